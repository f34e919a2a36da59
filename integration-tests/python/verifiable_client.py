"""Kafka's VerifiableProducer and VerifiableConsumer, on confluent-kafka (librdkafka).

Usage:
  verifiable_client.py producer BOOTSTRAP TOPIC THROUGHPUT
  verifiable_client.py consumer BOOTSTRAP TOPIC GROUP

Both print one JSON event per line with the names and fields of Apache
Kafka's `org.apache.kafka.tools.VerifiableProducer` and
`VerifiableConsumer` (kafka-tools), so a test reads either tool's output
the same way, and both run until SIGTERM (as ducktape stops those tools).

producer: an idempotent acks=all producer (enable.idempotence=true) sending
the values "0", "1", ... with no key at THROUGHPUT records/s. Each delivery
report prints `producer_send_success` (value, partition, offset) or
`producer_send_error` (value, exception). On SIGTERM it stops sending,
flushes what is in flight (every record gets its report) and prints
`shutdown_complete`.

consumer: a consumer in group GROUP (subscribe, auto.offset.reset=earliest,
no auto-commit) that prints `partitions_assigned` / `partitions_revoked`,
one `record_data` (value, partition, offset) per record, and after each
batch commits the next offsets synchronously and prints `offsets_committed`
(offsets, success, error), as VerifiableConsumer --verbose does. On SIGTERM
it closes (leaving the group) and prints `shutdown_complete`.
"""

import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

stopping = False


def on_sigterm(_signum, _frame):
    global stopping
    stopping = True


def emit(name, **fields):
    print(json.dumps({"timestamp": int(time.time() * 1000), "name": name, **fields}), flush=True)


def produce(bootstrap, topic, throughput):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
    })

    def report(value):
        def on_delivery(err, msg):
            if err is None:
                emit("producer_send_success", key=None, value=value, topic=msg.topic(),
                     partition=msg.partition(), offset=msg.offset())
            else:
                emit("producer_send_error", key=None, value=value, topic=topic,
                     exception=type(err).__name__, message=str(err))
        return on_delivery

    emit("startup_complete")
    start = time.monotonic()
    sent = 0
    while not stopping:
        value = str(sent)
        try:
            producer.produce(topic, value=value.encode(), on_delivery=report(value))
        except BufferError:
            producer.poll(0.05)
            continue
        sent += 1
        # Paces the sends at THROUGHPUT records/s (ThroughputThrottler's rule).
        ahead = start + sent / throughput - time.monotonic()
        producer.poll(max(ahead, 0))
    remaining = producer.flush(300)
    emit("shutdown_complete", sent=sent, undelivered=remaining)


def consume(bootstrap, topic, group):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })

    def partitions_of(partitions):
        return [{"topic": p.topic, "partition": p.partition} for p in partitions]

    consumer.subscribe(
        [topic],
        on_assign=lambda _c, ps: emit("partitions_assigned", partitions=partitions_of(ps)),
        on_revoke=lambda _c, ps: emit("partitions_revoked", partitions=partitions_of(ps)),
    )
    emit("startup_complete")
    while not stopping:
        messages = consumer.consume(num_messages=500, timeout=0.2)
        next_offsets = {}
        for msg in messages:
            if msg.error():
                emit("consumer_error", message=str(msg.error()))
                continue
            emit("record_data", key=None, value=msg.value().decode(), topic=msg.topic(),
                 partition=msg.partition(), offset=msg.offset())
            next_offsets[(msg.topic(), msg.partition())] = msg.offset() + 1
        if not next_offsets:
            continue
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(next_offsets.items())]
        listed = [{"topic": t, "partition": p, "offset": o}
                  for (t, p), o in sorted(next_offsets.items())]
        try:
            committed = consumer.commit(offsets=offsets, asynchronous=False)
            # A per-partition error comes back in the returned list.
            errors = [str(p.error) for p in committed or [] if p.error is not None]
            if errors:
                emit("offsets_committed", offsets=listed, success=False, error="; ".join(errors))
            else:
                emit("offsets_committed", offsets=listed, success=True)
        except KafkaException as e:
            emit("offsets_committed", offsets=listed, success=False, error=str(e))
    consumer.close()
    emit("shutdown_complete")


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    role, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "producer":
        produce(bootstrap, topic, int(sys.argv[4]))
    elif role == "consumer":
        consume(bootstrap, topic, sys.argv[4])
    else:
        sys.exit(f"unknown role {role}")


if __name__ == "__main__":
    main()
