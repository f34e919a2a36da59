"""Idempotent producer + assign() consumer round trip with confluent-kafka (librdkafka).

Usage: confluent_idempotent.py BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]

Every KEY=VALUE is a librdkafka property given to the admin client, the
producer and the consumer alike (for example security.protocol=SSL and
ssl.ca.location=PATH for a TLS listener, plus sasl.mechanism=PLAIN,
sasl.username and sasl.password with security.protocol=SASL_SSL). A value
is split from its key at the first "=" only.

Creates TOPIC with PARTITIONS partitions through the AdminClient, produces
COUNT records with enable.idempotence=true, requires a successful delivery
report for every record, then reads every partition from the beginning with
assign() (no group membership, no commits) up to the high watermark and
compares the multiset of (key, value) pairs. Prints "delivered N" and
"consumed N"; exits non-zero with a message on any mismatch.
"""

import collections
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from round_trip import DEADLINE_S, check_consumed, expected_records, fail, parse_args, record


def main():
    bootstrap, topic, count, partitions, options = parse_args("confluent_idempotent.py")
    common = {"bootstrap.servers": bootstrap, **options}

    admin = AdminClient(dict(common))
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    try:
        futures[topic].result(timeout=60)
    except KafkaException as e:
        fail(f"create_topics({topic}) failed: {e}")
    metadata = admin.list_topics(topic, timeout=30)
    got = len(metadata.topics[topic].partitions)
    if got != partitions:
        fail(f"topic {topic} has {got} partitions after creation, expected {partitions}")

    producer = Producer({
        **common,
        "enable.idempotence": True,
        "linger.ms": 5,
    })
    expected = expected_records(count)
    errors = []
    delivered = 0

    def on_delivery(err, msg):
        nonlocal delivered
        if err is not None:
            errors.append(str(err))
        else:
            delivered += 1

    for i in range(count):
        key, value = record(i)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    if remaining:
        fail(f"{remaining} records still undelivered after flush")
    if errors:
        fail(f"{len(errors)} delivery errors, first: {errors[0]}")
    if delivered != count:
        fail(f"{delivered} delivery reports, expected {count}")
    print(f"delivered {delivered}", flush=True)

    consumer = Consumer({
        **common,
        "group.id": "weir-itest-assign-only",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "check.crcs": True,
    })
    high = {}
    for p in range(partitions):
        _low, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        high[p] = hi
    if sum(high.values()) != count:
        fail(f"high watermarks {high} add up to {sum(high.values())}, expected {count}")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = collections.Counter()
    position = {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + DEADLINE_S
    while any(position[p] < high[p] for p in range(partitions)):
        if time.monotonic() > deadline:
            fail(f"timed out at positions {position}, high watermarks {high}")
        for msg in consumer.consume(num_messages=1000, timeout=0.5):
            if msg.error():
                fail(f"consume error: {msg.error()}")
            got[(msg.key(), msg.value())] += 1
            position[msg.partition()] = msg.offset() + 1
    consumer.close()
    check_consumed(expected, got)


if __name__ == "__main__":
    main()
