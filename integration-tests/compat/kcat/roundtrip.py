"""kcat check of the kcat area: produces with every codec, consumes in a
group (-G) which commits on exit, and reads the committed offsets back, both
through kafka-python's admin client and by resuming the group with kcat.

Usage: roundtrip.py KCAT BOOTSTRAP (run with the python area's venv
interpreter, which has kafka-python)

1. `kcat -P -z CODEC -p P` produces PER_CALL records to each of the
   PARTITIONS partitions of a new topic (auto-created with the broker's
   num.partitions=4), once per codec (none, gzip, snappy, lz4, zstd).
2. `kcat -L -J` lists the topic: PARTITIONS partitions led by broker 0; a
   Fetch v4 sent from here (stored_batches.py) shows, for each codec's
   records on every partition, batches with that codec in their attributes
   (kcat really compressed).
3. `kcat -G GROUP -c N` consumes all N records; the exact set of
   (partition, offset, key, value) must come back. On exit kcat closes the
   consumer, which commits the offsets it consumed.
4. kafka-python's list_group_offsets must show the end offset on every
   partition.
5. One more record per partition is produced; `kcat -G GROUP -c PARTITIONS`
   must get exactly those records, at the committed offsets.
Exits 1 with a message on the first mismatch; every kcat call has a timeout.
"""

import json
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stored_batches import CODEC_IDS, stored_batches  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4
PER_CALL = 5
TIMEOUT_S = 60


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")
    shown = sorted(got) if isinstance(got, set) else got
    print(f"ok: {what} = {shown!r}", flush=True)


def value(codec, partition, i):
    """A record value that every codec shrinks even alone: librdkafka sends a
    batch uncompressed when compressing does not make it smaller."""
    return f"value-{codec}-{partition}-{i}-" + "x" * 200


def kcat(kcat_bin, args, stdin=None):
    argv = [kcat_bin] + args
    print("$ " + " ".join(argv), flush=True)
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        fail(f"{' '.join(argv)} did not finish within {TIMEOUT_S} s; stderr: {e.stderr}")
    if done.stderr:
        print(done.stderr, end="", flush=True)
    if done.returncode != 0:
        fail(f"{' '.join(argv)} exited {done.returncode}")
    return done.stdout


def consume(kcat_bin, bootstrap, topic, group, count):
    """Consumes count records in group; returns {(partition, offset, key, value)}."""
    out = kcat(kcat_bin, ["-b", bootstrap, "-G", group, "-c", str(count), "-q",
                          "-X", "auto.offset.reset=earliest",
                          "-f", "%p %o %k %s\\n", topic])
    got = [tuple(line.split(" ")) for line in out.splitlines()]
    records = {(int(p), int(o), k, v) for p, o, k, v in got}
    expect(f"records consumed by group {group} (count)", len(got), count)
    if len(records) != count:
        fail(f"duplicate records: {sorted(got)}")
    return records


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} KCAT BOOTSTRAP")
    kcat_bin, bootstrap = sys.argv[1], sys.argv[2]
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"compat-kcat-{suffix}", f"compat-kcat-group-{suffix}"
    print(f"kcat: topic {topic}, group {group}", flush=True)

    want = set()
    next_offset = {p: 0 for p in range(PARTITIONS)}
    for codec in CODECS:
        for p in range(PARTITIONS):
            lines = [f"{codec}-p{p}-{i}:{value(codec, p, i)}" for i in range(PER_CALL)]
            kcat(kcat_bin, ["-b", bootstrap, "-P", "-t", topic, "-p", str(p), "-z", codec,
                            "-K", ":", "-X", "acks=all"], stdin="\n".join(lines) + "\n")
            for i in range(PER_CALL):
                want.add((p, next_offset[p], f"{codec}-p{p}-{i}", value(codec, p, i)))
                next_offset[p] += 1

    listing = json.loads(kcat(kcat_bin, ["-b", bootstrap, "-L", "-J", "-t", topic]))
    expect("kcat -L topic partitions (partition, leader, replicas)",
           [(p["partition"], p["leader"], [r["id"] for r in p["replicas"]])
            for t in listing["topics"] if t["topic"] == topic
            for p in sorted(t["partitions"], key=lambda p: p["partition"])],
           [(p, 0, [0]) for p in range(PARTITIONS)])

    for p in range(PARTITIONS):
        # librdkafka may split one call's records into several batches
        # (the first record often goes alone); each is compressed.
        batches = stored_batches(bootstrap, topic, p)
        expect(f"stored batches of partition {p}: (records, codec ids) per kcat call",
               [(sum(n for base, n, _ in batches if i * PER_CALL <= base < (i + 1) * PER_CALL),
                 {c for base, _, c in batches if i * PER_CALL <= base < (i + 1) * PER_CALL})
                for i in range(len(CODECS))],
               [(PER_CALL, {CODEC_IDS[c]}) for c in CODECS])

    total = len(CODECS) * PARTITIONS * PER_CALL
    expect("records consumed (partition, offset, key, value)",
           consume(kcat_bin, bootstrap, topic, group, total), want)

    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    offsets = admin.list_group_offsets({group: None})[group]
    expect("committed offsets (kafka-python list_group_offsets)",
           {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic},
           next_offset)
    admin.close()

    resumed_want = set()
    for p in range(PARTITIONS):
        kcat(kcat_bin, ["-b", bootstrap, "-P", "-t", topic, "-p", str(p), "-K", ":"],
             stdin=f"after-p{p}:after-{p}\n")
        resumed_want.add((p, next_offset[p], f"after-p{p}", f"after-{p}"))
    expect("records consumed on resuming the group",
           consume(kcat_bin, bootstrap, topic, group, PARTITIONS), resumed_want)
    print("kcat: all checks passed", flush=True)


if __name__ == "__main__":
    main()
