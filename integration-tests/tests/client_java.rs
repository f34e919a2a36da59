//! The official Java client (kafka-clients 4.1) with default producer
//! settings (acks=all, idempotence on) and an assign() consumer.

use weir_integration_tests::clients;

use crate::support::{self, CLIENT_TIMEOUT};

/// 100,000 records of 1 KiB with keys, headers and explicit timestamps; the
/// Java program compares everything it reads back and exits non-zero on any
/// difference.
#[test]
fn java_default_producer_and_assign_consumer() {
    let broker = support::start_broker();
    let mut java = clients::java_client_tool().expect("Java client harness");
    java.args([
        "produce-consume",
        &broker.bootstrap(),
        "java-round-trip",
        "100000",
        "1024",
    ]);
    let output = clients::run(java, None, CLIENT_TIMEOUT * 3).expect("java produce-consume");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(stdout.lines().any(|l| l == "produced 100000"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "consumed 100000"), "{stdout}");
}
