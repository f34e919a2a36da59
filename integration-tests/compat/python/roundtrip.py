"""Produce, group-consume, commit and read committed offsets back with one
Python client against a broker (the python area's checks).

Usage: roundtrip.py kafka-python|aiokafka|confluent-kafka BOOTSTRAP

Creates a topic of PARTITIONS partitions (unique name), produces
PER_PARTITION records to each partition explicitly (kafka-python and
aiokafka gzip-compressed, confluent-kafka zstd-compressed and idempotent;
the stored batches are read back raw to show the codec), consumes them all in a
new group from the earliest offset, commits, and reads the group's committed
offsets back. Asserts the exact records (partition, offset, key, value) and
committed offsets (PER_PARTITION on every partition). Exits 1 with a message
on the first mismatch; every wait has a deadline.
"""

import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stored_batches import CODEC_IDS, stored_batches  # noqa: E402

PARTITIONS = 3
PER_PARTITION = 10
DEADLINE_S = 60


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")
    shown = sorted(got) if isinstance(got, set) else got
    print(f"ok: {what} = {shown!r}", flush=True)


def records():
    """The records to produce: (partition, key, value), in order per partition."""
    return [(p, f"k{p}-{i}".encode(), value(p, i))
            for p in range(PARTITIONS) for i in range(PER_PARTITION)]


def value(p, i):
    """A record value that gzip and zstd shrink even alone: kafka-python and
    librdkafka send a batch uncompressed when compressing does not make it
    smaller."""
    return f"v{p}-{i}-".encode() + b"x" * 200


def expected_consumed():
    return {(p, i, f"k{p}-{i}".encode(), value(p, i))
            for p in range(PARTITIONS) for i in range(PER_PARTITION)}


def expected_committed():
    return {p: PER_PARTITION for p in range(PARTITIONS)}


def check_stored_codec(bootstrap, topic, codec):
    """Every batch the broker stored is compressed with codec and they hold
    PER_PARTITION records on each partition."""
    for p in range(PARTITIONS):
        batches = stored_batches(bootstrap, topic, p)
        expect(f"partition {p}: stored batches' codecs, records",
               ({c for _, _, c in batches}, sum(n for _, n, _ in batches)),
               ({CODEC_IDS[codec]}, PER_PARTITION))


def check_consumed(consumed):
    if len(consumed) != len(set(consumed)):
        fail(f"duplicate records consumed: {sorted(consumed)}")
    expect("records consumed (partition, offset, key, value)", set(consumed), expected_consumed())


def run_kafka_python(bootstrap, topic, group):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kafka-python")
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=10000)
    described = admin.describe_topics([topic])
    expect("describe_topics names", [t["name"] for t in described], [topic])
    expect("describe_topics error_code", described[0]["error_code"], 0)
    expect("describe_topics partitions (index, leader, replicas)",
           sorted((p["partition_index"], p["leader_id"], p["replica_nodes"])
                  for p in described[0]["partitions"]),
           [(p, 0, [0]) for p in range(PARTITIONS)])
    expect("list_topics contains topic", topic in admin.list_topics(), True)
    cluster = admin.describe_cluster()
    expect("describe_cluster (controller, brokers)",
           (cluster["controller_id"], [b["broker_id"] for b in cluster["brokers"]]), (0, [0]))

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    offsets = [producer.send(topic, key=k, value=v, partition=p).get(timeout=DEADLINE_S)
               for p, k, v in records()]
    producer.flush(timeout=DEADLINE_S)
    producer.close()
    expect("produced (partition, offset)", [(m.partition, m.offset) for m in offsets],
           [(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    check_stored_codec(bootstrap, topic, "gzip")

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumed = []
    deadline = time.monotonic() + DEADLINE_S
    while len(consumed) < PARTITIONS * PER_PARTITION:
        if time.monotonic() > deadline:
            fail(f"consumed {len(consumed)} of {PARTITIONS * PER_PARTITION} records in {DEADLINE_S} s")
        for tp, msgs in consumer.poll(timeout_ms=1000).items():
            consumed += [(m.partition, m.offset, m.key, m.value) for m in msgs]
    check_consumed(consumed)
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    expect("consumer.committed", committed, expected_committed())
    consumer.close()

    via_admin = admin.list_group_offsets({group: None})[group]
    expect("admin list_group_offsets",
           {tp.partition: om.offset for tp, om in via_admin.items() if tp.topic == topic},
           expected_committed())
    listed = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
    expect("admin list_groups state of group", listed.get(group), "Empty")
    described = admin.describe_groups([group])[group]
    expect("admin describe_groups (state, protocol_type, members)",
           (described["group_state"], described["protocol_type"], described["members"]),
           ("Empty", "consumer", []))
    admin.close()


def run_aiokafka(bootstrap, topic, group):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    compression_type="gzip")
        await producer.start()
        produced = []
        for p, k, v in records():
            m = await asyncio.wait_for(producer.send_and_wait(topic, key=k, value=v, partition=p),
                                       DEADLINE_S)
            produced.append((m.partition, m.offset))
        await producer.stop()
        expect("produced (partition, offset)", produced,
               [(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)])
        check_stored_codec(bootstrap, topic, "gzip")

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        consumed = []
        deadline = time.monotonic() + DEADLINE_S
        while len(consumed) < PARTITIONS * PER_PARTITION:
            if time.monotonic() > deadline:
                fail(f"consumed {len(consumed)} of {PARTITIONS * PER_PARTITION} records in {DEADLINE_S} s")
            for tp, msgs in (await consumer.getmany(timeout_ms=1000)).items():
                consumed += [(m.partition, m.offset, m.key, m.value) for m in msgs]
        check_consumed(consumed)
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
        expect("consumer.committed", committed, expected_committed())
        await consumer.stop()

        via_admin = await admin.list_consumer_group_offsets(group)
        expect("admin list_consumer_group_offsets",
               {tp.partition: om.offset for tp, om in via_admin.items() if tp.topic == topic},
               expected_committed())
        await admin.close()

    asyncio.run(asyncio.wait_for(main(), 3 * DEADLINE_S))


def run_confluent_kafka(bootstrap, topic, group):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t, fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).items():
        fut.result(timeout=DEADLINE_S)
    md = admin.list_topics(topic, timeout=DEADLINE_S)
    expect("metadata partitions", sorted(md.topics[topic].partitions), list(range(PARTITIONS)))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "compression.type": "zstd"})
    produced, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            produced.append((msg.partition(), msg.offset()))

    for p, k, v in records():
        producer.produce(topic, key=k, value=v, partition=p, on_delivery=on_delivery)
    remaining = producer.flush(DEADLINE_S)
    expect("undelivered after flush", remaining, 0)
    expect("delivery errors", errors, [])
    expect("produced (partition, offset)", sorted(produced),
           [(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    check_stored_codec(bootstrap, topic, "zstd")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    consumed = []
    deadline = time.monotonic() + DEADLINE_S
    while len(consumed) < PARTITIONS * PER_PARTITION:
        if time.monotonic() > deadline:
            fail(f"consumed {len(consumed)} of {PARTITIONS * PER_PARTITION} records in {DEADLINE_S} s")
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            fail(f"consumer error: {msg.error()}")
        consumed.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    check_consumed(consumed)
    committed_now = consumer.commit(asynchronous=False)
    expect("commit() result", {tp.partition: tp.offset for tp in committed_now if tp.topic == topic},
           expected_committed())
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                   timeout=DEADLINE_S)
    expect("consumer.committed", {tp.partition: tp.offset for tp in committed}, expected_committed())
    consumer.close()


CLIENTS = {
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent_kafka,
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CLIENTS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(CLIENTS)} BOOTSTRAP")
    client, bootstrap = sys.argv[1], sys.argv[2]
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"compat-{client}-{suffix}", f"compat-{client}-group-{suffix}"
    print(f"{client}: topic {topic}, group {group}", flush=True)
    CLIENTS[client](bootstrap, topic, group)
    print(f"{client}: all checks passed", flush=True)


if __name__ == "__main__":
    main()
