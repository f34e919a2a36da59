//! Record batches in and out of the simulated logs: the producer's
//! one-record batches, and a replica's log read back as raw bytes and as
//! [`Batch`]es for the invariants.

use bytes::Bytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use weir_broker::partition::Partition;

use crate::invariants::Batch;

/// One uncompressed batch of one keyless record holding `value`.
pub fn batch(value: &[u8]) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::copy_from_slice(value)),
        headers: Default::default(),
        delete_horizon: false,
    };
    let mut out = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, [&record], &options).expect("encode");
    out.freeze()
}

/// One stored batch with its raw bytes (to compare replicas byte for
/// byte).
pub struct RawBatch {
    pub batch: Batch,
    pub bytes: Bytes,
}

/// The whole log of `partition` from its log start offset (one read per
/// segment: a read returns batches of one segment file).
pub fn read_log(partition: &Partition) -> Result<Vec<RawBatch>, String> {
    let mut out = Vec::new();
    let mut offset = partition.log_start_offset();
    let end = partition.log_end_offset();
    while offset < end {
        let info = partition
            .read_to_log_end(offset, usize::MAX, true)
            .map_err(|e| format!("reading the log at {offset}: {e}"))?;
        let Some(slice) = info.records else { break };
        let bytes = slice
            .read_to_bytes()
            .map_err(|e| format!("reading the log at {offset}: {e}"))?;
        let read = raw_batches(&bytes)?;
        let next = read.last().map_or(end, |b| b.batch.offset + 1);
        if next <= offset {
            return Err(format!("the log read at {offset} does not advance"));
        }
        out.extend(read.into_iter().filter(|b| b.batch.offset >= offset));
        offset = next;
    }
    Ok(out)
}

/// The batches of raw log bytes: offset and epoch from each header, the
/// value of its one record.
pub fn batches(bytes: &[u8]) -> Result<Vec<Batch>, String> {
    Ok(raw_batches(bytes)?.into_iter().map(|b| b.batch).collect())
}

fn raw_batches(bytes: &[u8]) -> Result<Vec<RawBatch>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 17 <= bytes.len() {
        let offset = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let epoch = i32::from_be_bytes(bytes[at + 12..at + 16].try_into().unwrap());
        let end = (at + 12 + length).min(bytes.len());
        let raw = Bytes::copy_from_slice(&bytes[at..end]);
        let mut one = raw.clone();
        let set = RecordBatchDecoder::decode(&mut one)
            .map_err(|e| format!("batch at offset {offset}: {e}"))?;
        for record in set.records {
            out.push(RawBatch {
                batch: Batch {
                    offset: record.offset,
                    epoch,
                    value: record.value.map(|v| v.to_vec()).unwrap_or_default(),
                },
                bytes: raw.clone(),
            });
        }
        at = end;
    }
    Ok(out)
}
