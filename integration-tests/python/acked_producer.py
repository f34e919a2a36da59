"""acks=all producer that records every acknowledged record, for crash tests.

Usage: acked_producer.py BOOTSTRAP TOPIC ACK_FILE MAX_RECORDS

Produces values "v-<n>" with acks=all (confluent-kafka / librdkafka) until
MAX_RECORDS have been sent or the process is killed. For every successful
delivery report it appends "<partition> <offset> <value>\n" to ACK_FILE and
flushes it, so that the file holds exactly the records the broker
acknowledged (a line without its newline was cut by the kill and is not an
acknowledgement the test may rely on).
"""

import sys

from confluent_kafka import Producer


def main():
    bootstrap, topic, ack_path, max_records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    acks = open(ack_path, "a", buffering=1)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "enable.idempotence": False,
        "message.timeout.ms": 300000,
    })

    def on_delivery(err, msg):
        if err is None:
            acks.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
            acks.flush()

    for n in range(max_records):
        while True:
            try:
                producer.produce(topic, value=f"v-{n}".encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(300)
    acks.close()


if __name__ == "__main__":
    main()
