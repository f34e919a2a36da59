// Writes a partition directory with Apache Kafka's own log layer (UnifiedLog
// from kafka-storage 4.1), for Weir's test that it serves a Kafka-written
// partition unchanged (issue 3, point 8). Run with Java's source launcher on
// the kafka_2.13 classpath resolved from ../pom.xml:
//
//   java -cp <classpath> WriteKafkaLog.java <partition-dir> <topic-id-hex32>
//
// <partition-dir> is <some dir>/<topic>-<partition> (UnifiedLog reads the
// topic partition from the name) and must not exist yet; <topic-id-hex32> is
// the topic id as 32 hex digits, written to partition.metadata. The log gets
// batches in every codec (none, gzip, snappy, lz4, zstd) with keys, a null
// key, a tombstone and headers, in three segments (explicit rolls), then is
// flushed and closed cleanly. Prints "log end offset <n>" on success.

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public class WriteKafkaLog {
    private static final long T0 = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        if (args.length != 2 || args[1].length() != 32) {
            System.err.println("usage: WriteKafkaLog <partition-dir> <topic-id-hex32>");
            System.exit(2);
        }
        File dir = new File(args[0]);
        Uuid topicId = new Uuid(
            Long.parseUnsignedLong(args[1].substring(0, 16), 16),
            Long.parseUnsignedLong(args[1].substring(16), 16));
        // Index every batch after a segment's first one.
        LogConfig config = new LogConfig(Map.of("index.interval.bytes", "1"));
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        UnifiedLog log = UnifiedLog.create(dir, config, 0L, 0L, scheduler, new BrokerTopicStats(),
            Time.SYSTEM, 900_000, new ProducerStateManagerConfig(86_400_000, false), 600_000,
            new LogDirFailureChannel(1), true, Optional.of(topicId));
        Compression[] codecs = {
            Compression.NONE, Compression.gzip().build(), Compression.snappy().build(),
            Compression.lz4().build(), Compression.zstd().build(),
        };
        int batch = 0;
        for (int segment = 0; segment < 3; segment++) {
            for (Compression codec : codecs) {
                List<SimpleRecord> records = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    long timestamp = T0 + batch * 1_000L + new long[] {30, 90, 10, 50}[i];
                    String id = batch + "-" + i;
                    byte[] key = i == 2 ? null : ("key-" + id).getBytes(StandardCharsets.UTF_8);
                    byte[] value = i == 3 && batch % 5 == 0
                        ? null
                        : ("value-" + id + "-" + codec.type().name + "-" + "x".repeat(100))
                            .getBytes(StandardCharsets.UTF_8);
                    Header[] headers = {new RecordHeader("trace", ("t" + id).getBytes(StandardCharsets.UTF_8))};
                    records.add(new SimpleRecord(timestamp, key, value, headers));
                }
                log.appendAsLeader(MemoryRecords.withRecords(codec, records.toArray(new SimpleRecord[0])), 0);
                batch++;
            }
            if (segment < 2) {
                log.roll();
            }
        }
        long logEndOffset = log.logEndOffset();
        log.flush(false);
        log.close();
        scheduler.shutdown();
        System.out.println("log end offset " + logEndOffset);
    }
}
