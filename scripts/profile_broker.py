#!/usr/bin/env python3
"""Profiles the weir release binary with `perf record` under Kafka's ProducerPerformance
(acks=1 and acks=all, 16 partitions) and ConsumerPerformance, the load generators of
`scripts/bench` (issue 6, scope 5), then a 3-node cluster of `scripts/bench replicated`
under ProducerPerformance acks=all (RF=3, min.insync.replicas=2, 16 partitions; the
defaults, where leader and followers fsync, and write.caching=true; all three processes
recorded), and writes a flat profile of each scenario to
bench/results/profile-<scenario>.txt: syscalls and context switches per MB (perf stat), the
split between kernel and Weir's own code, the hottest symbols, and the CPU split (broker(s) /
load generator / machine) of the run.

Usage: scripts/bench profile [--records N] [--out-dir DIR]
(scripts/bench builds the release binary and resolves the Kafka classpath first; needs `perf`).
For a flamegraph of one scenario, record call stacks and keep the data (--keep) and run e.g.
`perf script -i <file> | inferno-collapse-perf | inferno-flamegraph > out.svg`.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_kafka as bench  # noqa: E402  (the same brokers, load generators and CPU split)

REPO = Path(__file__).resolve().parent.parent


def perf_report(data, *extra):
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                          "-g", "none", *extra], capture_output=True, text=True).stdout
    # perf pads every row to the terminal width and ends it with empty columns ("-  -").
    rows = (re.sub(r"(\s+-)*\s*$", "", line) for line in out.splitlines())
    return "\n".join(row for row in rows if row.strip() and not row.startswith("#"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="1 KiB records per scenario")
    ap.add_argument("--out-dir", default=str(REPO / "bench/results"))
    ap.add_argument("--keep", action="store_true", help="keep the perf.data files (printed)")
    args = ap.parse_args()
    args.classpath = Path(os.environ["KAFKA_CLASSPATH_FILE"]).read_text().strip()
    args.weir_bin = os.environ["WEIR_BIN"]
    work = Path(tempfile.mkdtemp(prefix="weir-profile-", dir=os.environ.get("TMPDIR", "/tmp")))
    broker = bench.Weir("weir", args, work)
    broker.start()
    n, gigabytes = args.records, args.records * bench.RECORD_SIZE / 1e9
    scenarios = [
        ("produce-acks1-p16", "p16-acks1",
         lambda: bench.producer_perf(args, broker.bootstrap, "p16-acks1", n, "1")),
        ("produce-acksall-p16", "p16-acksall",
         lambda: bench.producer_perf(args, broker.bootstrap, "p16-acksall", n, "all")),
        ("consume-p16", None, lambda: bench.consumer_perf(args, broker.port, "p16-acks1", n)),
    ]
    try:
        for _, topic, _ in scenarios:
            if topic:
                bench.create_topic(broker.port, topic, 16)
                bench.wait_for_leaders(broker.port, topic, 16)
        for name, _, run in scenarios:
            record(args, work, name, [broker.proc.pid], gigabytes, run)
    finally:
        broker.stop()
    cluster = bench.Cluster("weir", args, work / "cluster")
    try:
        cluster.start()
        first = cluster.nodes[0]
        for variant, extra in (("defaults", {}), ("write-caching", {"write.caching": "true"})):
            topic = f"rf3-{variant}"
            configs = {"min.insync.replicas": str(bench.MIN_INSYNC_REPLICAS), **extra}
            bench.create_topic(first.port, topic, bench.REPLICATED_PARTITIONS, configs,
                               bench.REPLICAS, host=first.host)
            bench.wait_for_leaders(first.port, topic, bench.REPLICATED_PARTITIONS,
                                   host=first.host)
            record(args, work, f"replicated-acksall-p16-{variant}", cluster.pids, gigabytes,
                   lambda: bench.producer_perf(args, cluster.bootstrap, topic, n, "all"))
    finally:
        cluster.stop()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)])


# What `perf stat` counts beside each profile, per MB of the scenario's records: the syscalls
# of the produce path (fdatasync of a durable flush, sync_file_range of write-behind, write and
# writev of appends and answers), those of the fetch path (sendfile of record bytes, pread of
# batch headers) and context switches. The bound of a scenario is often clearer in these than
# in a flat profile: e.g. durable acks=all costs about one fdatasync per producer batch.
STAT_EVENTS = (
    "syscalls:sys_enter_fdatasync",
    "syscalls:sys_enter_sync_file_range",
    "syscalls:sys_enter_write",
    "syscalls:sys_enter_writev",
    "syscalls:sys_enter_sendfile64",
    "syscalls:sys_enter_pread64",
    "context-switches",
)


def stat_counts(path):
    """{event: count} from a `perf stat -x,` output file; events perf could not count are left
    out."""
    counts = {}
    for line in Path(path).read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit():
            counts[fields[2]] = int(fields[0])
    return counts


def record(args, work, name, pids, gigabytes, run):
    """Runs `run` under `perf record` and `perf stat` of `pids` and writes
    profile-`name`.txt."""
    data = work / f"{name}.data"
    stat_out = work / f"{name}.stat"
    stacks = ["--call-graph", "dwarf"] if args.keep else []
    targets = ",".join(map(str, pids))
    perf = subprocess.Popen(["perf", "record", "-F", "999", *stacks, "-o", str(data),
                             "-p", targets], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    stat = subprocess.Popen(["perf", "stat", "-x,", "-o", str(stat_out), "-e",
                             ",".join(STAT_EVENTS), "-p", targets],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf attaches before the load starts
    result, split = bench.cpu_split(pids, gigabytes, run)
    for p in (perf, stat):
        p.send_signal(2)
    perf.wait()
    stat.wait()
    megabytes = gigabytes * 1000
    counts = stat_counts(stat_out) if stat_out.exists() else {}
    per_mb = [f"    {counts[e] / megabytes:10.1f}  {e} ({counts[e]} in all)"
              for e in STAT_EVENTS if e in counts]
    who = "<weir>" if len(pids) == 1 else f"<the {len(pids)} weir nodes>"
    text = "\n".join([
        f"# {name}: perf record -F 999 -p {who} during {args.records} records of 1 KiB",
        f"# weir {os.environ.get('WEIR_COMMIT') or bench.sh(f'git -C {REPO} rev-parse --short HEAD')}, "
        f"result {result}",
        "# CPU split: " + ", ".join(f"{k}={v:.2f}" for k, v in split.items()),
        "", f"## per MB of records (perf stat -e ... -p {who})",
        *(per_mb or ["    (perf stat counted nothing: tracepoints unavailable?)"]),
        "", "## by shared object", perf_report(data, "--sort", "dso"),
        "", "## top symbols (self time, >= 0.5%)",
        perf_report(data, "--sort", "dso,symbol", "--percent-limit", "0.5"), ""])
    out = Path(args.out_dir) / f"profile-{name}.txt"
    out.write_text(text)
    bench.log(f"{name}: {result}; {split}; written to {out}")
    if args.keep:
        bench.log(f"perf data kept: {data}")


if __name__ == "__main__":
    main()
