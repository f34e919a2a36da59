"""A subscribed consumer group member with confluent-kafka (librdkafka) that
takes a number of records from where its group last committed.

Usage: confluent_group_resume.py BOOTSTRAP TOPIC GROUP TAKE

Joins GROUP (subscribe, enable.auto.commit=false, auto.offset.reset=earliest),
consumes exactly TAKE records, commits synchronously after the last one,
prints one line "consumed PARTITION OFFSET VALUE" per record and then
"committed PARTITION OFFSET" per committed partition (read back with
committed()), and closes (leaving the group). Exits non-zero with a message
on any error or when TAKE records do not arrive in time.
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException

DEADLINE_S = 120


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def main():
    bootstrap, topic, group, take = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
        }
    )
    consumer.subscribe([topic])
    taken = []
    deadline = time.monotonic() + DEADLINE_S
    while len(taken) < take:
        if time.monotonic() > deadline:
            fail(f"only {len(taken)} of {take} records arrived")
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            fail(f"consumer error: {message.error()}")
        taken.append(message)
        print(f"consumed {message.partition()} {message.offset()} {message.value().decode()}", flush=True)
    try:
        committed = consumer.commit(asynchronous=False)
    except KafkaException as e:
        fail(f"commit failed: {e}")
    for tp in committed:
        if tp.error:
            fail(f"commit of {tp} failed: {tp.error}")
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        print(f"committed {tp.partition} {tp.offset}", flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
