"""kafka-python round trip: admin-created topic, acks=all producer, assign() consumer.

Usage: kafka_python_round_trip.py BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]

Every KEY=VALUE is a keyword argument (a string) given to KafkaAdminClient,
KafkaProducer and KafkaConsumer alike, for example security_protocol=SSL,
ssl_cafile=PATH, ssl_certfile=PATH and ssl_keyfile=PATH for a TLS listener
(ssl_check_hostname stays at its default, true), or
security_protocol=SASL_PLAINTEXT, sasl_mechanism=PLAIN,
sasl_plain_username=NAME and sasl_plain_password=SECRET for a SASL
listener. A value is split from its key at the first "=" only.

Creates TOPIC with PARTITIONS partitions, produces COUNT records with
acks=all (every send acknowledged), then reads every partition from the
beginning with assign() (no group) up to its end offset and compares the
multiset of (key, value) pairs. Prints "delivered N" and "consumed N";
exits non-zero with a message on any failure or mismatch.
"""

import collections
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from round_trip import DEADLINE_S, check_consumed, expected_records, fail, parse_args, record


def main():
    bootstrap, topic, count, partitions, options = parse_args("kafka_python_round_trip.py")
    common = {"bootstrap_servers": bootstrap, "request_timeout_ms": 30000, **options}

    admin = KafkaAdminClient(**common)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()

    producer = KafkaProducer(acks="all", linger_ms=5, **common)
    expected = expected_records(count)
    futures = []
    for i in range(count):
        key, value = record(i)
        futures.append(producer.send(topic, key=key, value=value))
    producer.flush(timeout=DEADLINE_S)
    for future in futures:
        future.get(timeout=DEADLINE_S)
    producer.close(timeout=30)
    print(f"delivered {len(futures)}", flush=True)

    consumer = KafkaConsumer(enable_auto_commit=False, **common)
    assigned = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    end = consumer.end_offsets(assigned)
    if sum(end.values()) != count:
        fail(f"end offsets {end} add up to {sum(end.values())}, expected {count}")
    got = collections.Counter()
    deadline = time.monotonic() + DEADLINE_S
    while any(consumer.position(tp) < end[tp] for tp in assigned):
        if time.monotonic() > deadline:
            positions = {tp.partition: consumer.position(tp) for tp in assigned}
            fail(f"timed out at positions {positions}, end offsets {end}")
        for messages in consumer.poll(timeout_ms=500).values():
            for message in messages:
                got[(message.key, message.value)] += 1
    consumer.close()
    check_consumed(expected, got)


if __name__ == "__main__":
    main()
