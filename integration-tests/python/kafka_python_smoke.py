"""kafka-python against the broker without pinning api_version (case C11).

Usage: kafka_python_smoke.py BOOTSTRAP TOPIC

kafka-python opens with ApiVersions v4 (newer than some brokers support) and
must fall back from the broker's answer. Produces one record and waits for
its acknowledgement, then asks a consumer for the topic's partitions.
Prints "offset N" and "partitions [..]"; exits non-zero on failure.
"""

import sys

from kafka import KafkaConsumer, KafkaProducer


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    metadata = producer.send(topic, b"from-kafka-python").get(timeout=60)
    producer.flush(timeout=60)
    producer.close(timeout=10)
    print(f"offset {metadata.offset}", flush=True)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    partitions = consumer.partitions_for_topic(topic)
    consumer.close()
    if not partitions:
        print(f"FAIL: no partitions for {topic}: {partitions!r}", file=sys.stderr)
        sys.exit(2)
    print(f"partitions {sorted(partitions)}", flush=True)


if __name__ == "__main__":
    main()
