"""A consumer-group member for the group tests (issue 4, point 4).

Usage: group_consumer.py confluent|kafka-python BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]

Options (all optional):
  session.timeout.ms=MS   the member's session timeout (default 10000)
  assignor=NAME           range (default), roundrobin, or (confluent only)
                          cooperative-sticky
  stop.after=N            commit and leave the group once N records were read
  commit=poll|none        poll (default): commit the read positions
                          synchronously after every poll that returned records

Subscribes to TOPIC in GROUP (auto.offset.reset=earliest, auto-commit off)
and prints one event per line on stdout, `<event> key=value ...`:
  assigned partitions=0,2 generation=G   after each assignment (G = -1 when
                                         the client does not expose it)
  revoked partitions=0,2
  record partition=P offset=O value=V
  committed partition=P offset=O         a commit the broker acknowledged
                                         (O is the next offset to read)
  error name=UNKNOWN_MEMBER_ID           a client log line named that error
  closed                                 after close() returned (LeaveGroup)
Reads commands from stdin: `stop` commits and leaves (end of input alone
does not stop it, so stdin may be /dev/null with stop.after).
Exits non-zero with `FAIL: ...` on stderr when a commit or poll fails.
"""

import logging
import re
import sys
import threading

UNKNOWN_MEMBER = re.compile(r"UNKNOWN_MEMBER_ID|UnknownMemberId|Unknown member", re.I)
GENERATION = re.compile(r"JoinGroup response: GenerationId (-?\d+)")

lock = threading.Lock()
stop_requested = threading.Event()


def emit(line):
    with lock:
        print(line, flush=True)


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parts(partitions):
    return ",".join(str(p) for p in sorted(partitions))


class LogScanner(logging.Handler):
    """Forwards client logs to stderr and reports UNKNOWN_MEMBER_ID and the
    generation librdkafka logs on each JoinGroup response (debug=cgrp)."""

    def __init__(self):
        super().__init__()
        self.generation = -1

    def emit(self, record):
        text = record.getMessage()
        print(f"[{record.levelname}] {record.name}: {text}", file=sys.stderr, flush=True)
        if UNKNOWN_MEMBER.search(text):
            emit("error name=UNKNOWN_MEMBER_ID")
        match = GENERATION.search(text)
        if match:
            self.generation = int(match.group(1))


def read_commands():
    for line in sys.stdin:
        if line.strip() == "stop":
            stop_requested.set()
            return


def parse_options(args):
    options = {
        "session.timeout.ms": "10000",
        "assignor": "range",
        "stop.after": None,
        "commit": "poll",
    }
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or key not in options:
            fail(f"unknown option {arg!r}")
        options[key] = value
    return options


def run_confluent(bootstrap, topic, group, options):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    logger = logging.getLogger("librdkafka")
    scanner = LogScanner()
    logger.addHandler(scanner)
    logger.setLevel(logging.DEBUG)
    strategy = {"range": "range", "roundrobin": "roundrobin",
                "cooperative-sticky": "cooperative-sticky"}[options["assignor"]]
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": int(options["session.timeout.ms"]),
        "heartbeat.interval.ms": min(3000, int(options["session.timeout.ms"]) // 3),
        "partition.assignment.strategy": strategy,
        "debug": "cgrp",
    }, logger=logger)

    def on_assign(c, partitions):
        emit(f"assigned partitions={parts(p.partition for p in partitions)} "
             f"generation={scanner.generation}")

    def on_revoke(c, partitions):
        emit(f"revoked partitions={parts(p.partition for p in partitions)}")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    positions = {}
    read = 0
    stop_after = options["stop.after"]

    def commit():
        if not positions:
            return
        offsets = [TopicPartition(topic, p, o) for p, o in sorted(positions.items())]
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            fail(f"commit {offsets}: {e}")
        for tp in result:
            if tp.error is not None:
                fail(f"commit of partition {tp.partition}: {tp.error}")
            emit(f"committed partition={tp.partition} offset={tp.offset}")
        positions.clear()

    while not stop_requested.is_set():
        batch = consumer.consume(num_messages=100, timeout=0.2)
        for message in batch:
            if message.error() is not None:
                if message.error().code() == -191:  # _PARTITION_EOF
                    continue
                fail(f"consume: {message.error()}")
            value = (message.value() or b"").decode()
            emit(f"record partition={message.partition()} offset={message.offset()} value={value}")
            positions[message.partition()] = message.offset() + 1
            read += 1
        if batch and options["commit"] == "poll":
            commit()
        if stop_after is not None and read >= int(stop_after):
            break
    if options["commit"] == "poll":
        commit()
    consumer.close()
    emit("closed")


def run_kafka_python(bootstrap, topic, group, options):
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    scanner = LogScanner()
    logging.getLogger("kafka").addHandler(scanner)
    logging.getLogger("kafka").setLevel(logging.INFO)
    assignor = {"range": RangePartitionAssignor,
                "roundrobin": RoundRobinPartitionAssignor}[options["assignor"]]
    session = int(options["session.timeout.ms"])
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=session,
        heartbeat_interval_ms=min(3000, session // 3),
        partition_assignment_strategy=[assignor],
        request_timeout_ms=max(30000, session + 5000),
    )

    def generation():
        # kafka-python keeps the current generation on its coordinator.
        try:
            return consumer._coordinator._generation.generation_id
        except AttributeError:
            return -1

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(f"revoked partitions={parts(tp.partition for tp in revoked)}")

        def on_partitions_assigned(self, assigned):
            emit(f"assigned partitions={parts(tp.partition for tp in assigned)} "
                 f"generation={generation()}")

    consumer.subscribe([topic], listener=Listener())
    positions = {}
    read = 0
    stop_after = options["stop.after"]

    def commit():
        if not positions:
            return
        offsets = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                   for p, o in positions.items()}
        try:
            consumer.commit(offsets)
        except Exception as e:  # kafka-python raises its own error classes
            fail(f"commit {offsets}: {e!r}")
        for p, o in sorted(positions.items()):
            emit(f"committed partition={p} offset={o}")
        positions.clear()

    while not stop_requested.is_set():
        batches = consumer.poll(timeout_ms=200)
        for tp, messages in batches.items():
            for message in messages:
                value = (message.value or b"").decode()
                emit(f"record partition={tp.partition} offset={message.offset} value={value}")
                positions[tp.partition] = message.offset + 1
                read += 1
        if batches and options["commit"] == "poll":
            commit()
        if stop_after is not None and read >= int(stop_after):
            break
    if options["commit"] == "poll":
        commit()
    consumer.close()
    emit("closed")


def main():
    if len(sys.argv) < 5:
        fail("usage: group_consumer.py confluent|kafka-python BOOTSTRAP TOPIC GROUP [KEY=VALUE ...]")
    client, bootstrap, topic, group = sys.argv[1:5]
    options = parse_options(sys.argv[5:])
    threading.Thread(target=read_commands, daemon=True).start()
    if client == "confluent":
        run_confluent(bootstrap, topic, group, options)
    elif client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, options)
    else:
        fail(f"unknown client {client!r}")


if __name__ == "__main__":
    main()
