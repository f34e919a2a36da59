//! kcat (librdkafka) end to end: metadata listing and a produce/consume
//! round trip of 1,000 records per compression codec.

use crate::support;

/// `kcat -L` lists broker 1 at its advertised port; the cluster id in the
/// ready line matches what Metadata reports.
#[test]
fn kcat_lists_broker_and_cluster() {
    let broker = support::start_broker();
    let listing = support::kcat(&broker.bootstrap(), &["-L"], None).stdout_text();
    assert!(
        listing.contains(&format!(
            "broker {} at 127.0.0.1:{}",
            broker.node_id(),
            broker.port()
        )),
        "kcat -L lists the broker:\n{listing}"
    );
    let mut client = support::connect(&broker);
    let metadata: kafka_protocol::messages::MetadataResponse = client
        .send(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![])),
            12,
        )
        .expect("Metadata v12");
    assert_eq!(
        metadata.cluster_id.map(|c| c.to_string()).as_deref(),
        Some(broker.cluster_id()),
        "the ready line and Metadata agree on the cluster id"
    );
    assert!(!broker.cluster_id().is_empty());
}

/// 1,000 lines through kcat for every codec, read back in order.
#[test]
fn kcat_round_trip_every_codec() {
    let broker = support::start_broker();
    let bootstrap = broker.bootstrap();
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("kcat-{codec}");
        let lines: Vec<String> = (0..1_000)
            .map(|i| format!("{codec} line {i:04} {}", "payload ".repeat(i % 7)))
            .collect();
        support::kcat_produce(&bootstrap, &topic, &lines, &["-z", codec]);
        let consumed = support::kcat_consume(&bootstrap, &topic, 0, "beginning");
        assert_eq!(consumed.len(), lines.len(), "{codec}: record count");
        assert!(
            consumed == lines,
            "{codec}: consumed records differ from produced ones"
        );
    }
}
