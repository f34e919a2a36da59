//! confluent-kafka (Python on librdkafka): idempotent producer and an
//! assign()-only consumer over a topic made with the AdminClient.

use weir_integration_tests::clients;

use crate::support::{self, CLIENT_TIMEOUT};

/// 20,000 records with enable.idempotence=true to a 3-partition topic;
/// every delivery report succeeds and the exact multiset is read back.
#[test]
fn confluent_idempotent_producer_round_trip() {
    let broker = support::start_broker();
    let mut command = clients::python_script("confluent_idempotent.py").expect("venv");
    command
        .arg(broker.bootstrap())
        .arg("confluent-idempotent")
        .arg("20000")
        .arg("3");
    let output = clients::run(command, None, CLIENT_TIMEOUT * 2).expect("confluent_idempotent.py");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(stdout.lines().any(|l| l == "delivered 20000"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "consumed 20000"), "{stdout}");
}
