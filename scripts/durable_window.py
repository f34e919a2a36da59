#!/usr/bin/env python3
"""Whether the client's in-flight window bounds durable acks=all throughput (issue 18: the
"produce acks=all durable, 16 partitions: at least Kafka's" target).

Weir answers acks=all after fdatasync, Kafka 4 before any flush. Kafka's ProducerPerformance
keeps at most 5 requests in flight per connection (max.in.flight.requests.per.connection, at most
5 with idempotence, the default) of one batch (<= batch.size, 16 KiB) per partition each, so its
window is about 5 x 16 x 16 KiB = 1.25 MiB; while Weir waits for a flush the client idles once
the window is full, and the machine shows idle CPU (machine_busy_cpus under 2). If the window is
the bound, a larger one lets Weir use that CPU: this runs the benchmark's scenario (16
partitions, acks=all, 1 KiB records, client defaults) and the same with batch.size=65536 (a 4x
window; max.request.size 1 MiB still holds 16 such batches), on fresh single nodes alternating
Weir (its defaults: durable) and Kafka (its defaults), each warmed first by the benchmark's
acks=1 run (Kafka's JIT; a cold Kafka runs the durable scenario ~30% slower). Prints MiB/s and
the CPU split (scripts/bench_vs_kafka.py's cpu_split) per run.

Usage: WEIR_BIN=<weir> KAFKA_CLASSPATH_FILE=<classpath.txt> scripts/durable_window.py
           [RECORDS] [ROUNDS]
(RECORDS of 1 KiB per run, default 1,000,000; ROUNDS default 2; the classpath file is the one
scripts/bench resolves, integration-tests/java-kafka-tools/target/classpath.txt; log dirs under
$TMPDIR or /tmp).

Measured 2026-12-06 (release build of 8276b94, 2-core VM, nothing else running, 3 rounds):
- client defaults: Weir 140.2 / 147.9 / 147.9 MiB/s (broker 2.75-2.82 s/GB, machine 1.73-1.84
  CPUs busy), Kafka 126.9 / 129.9 / 121.2 (broker 5.82-6.77 s/GB, 1.91-1.93 busy). Weir's
  figure is the full benchmark's (148 there); Kafka's is not (155 in `scripts/bench all`, where
  two acks=1 runs of 1M records precede it): after one warm-up run its broker still pays about
  6 s/GB against 3.4 there. The machine idles under Weir only: the window is full while flushes
  run.
- batch.size=65536: Weir 178.8 / 224.0 / 176.8, Kafka 171.0 / 197.3 / 197.4: both saturate the
  machine (1.88-1.90 CPUs busy), both brokers pay 1.9-2.4 s/GB (bigger batches cut Kafka's
  per-batch cost the most) and the load generator 6.6-8.6 s/GB; per-round ratios 1.05 / 1.14 /
  0.90. A larger window removes Weir's idle time but not the bound: the 2 CPUs are shared with
  a load generator that uses three quarters of them, and the two brokers' costs per GB are
  within the run-to-run noise of each other.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_kafka as bench  # noqa: E402  (the driver's brokers, topics, load and CPU split)
from group_commit import Args  # noqa: E402  (WEIR_BIN and the Kafka classpath)

PARTITIONS = 16
SETTINGS = [("client defaults", []), ("batch.size=65536", ["batch.size=65536"])]


def run(kind, args, workdir, records, rnd):
    broker = (bench.Weir if kind == "weir" else bench.Kafka)(kind, args, workdir)
    broker.start()
    try:
        bench.create_topic(broker.port, "warmup", PARTITIONS)
        bench.wait_for_leaders(broker.port, "warmup", PARTITIONS)
        bench.producer_perf(args, broker.bootstrap, "warmup", records, "1")
        for i, (name, props) in enumerate(SETTINGS):
            topic = f"durable-{i}"
            bench.create_topic(broker.port, topic, PARTITIONS)
            bench.wait_for_leaders(broker.port, topic, PARTITIONS)
            result, split = bench.cpu_split(
                [broker.proc.pid], records * bench.RECORD_SIZE / 1e9,
                lambda: bench.producer_perf(args, broker.bootstrap, topic, records, "all",
                                            props=props))
            mib_s = result["mb_s"]
            print(f"round {rnd} {kind:5} acks=all {name:17} {mib_s:6.1f} MiB/s  broker "
                  f"{split['broker_cpu_s_per_gb']:.2f} s/GB, load generator "
                  f"{split['client_cpu_s_per_gb']:.2f} s/GB, machine "
                  f"{split['machine_busy_cpus']:.2f} CPUs busy", flush=True)
    finally:
        broker.stop()


def main():
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    args = Args()
    tmp = Path(tempfile.mkdtemp(prefix="durable-window-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        for rnd in range(rounds):
            for kind in ("weir", "kafka"):
                workdir = tmp / f"{kind}-{rnd}"
                try:
                    run(kind, args, workdir, records, rnd)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
