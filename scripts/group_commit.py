#!/usr/bin/env python3
"""How many record batches one log flush covers on a durable Weir (issue 18: the bound of
durable acks=all throughput is the number of fdatasyncs per MB, about 100 us of CPU and 5-7
context switches each; scripts/fsync_cost.py measures that cost).

Starts a single-node Weir with its defaults (acks=all answered after fdatasync) and its
Prometheus endpoint on, creates a 16-partition topic, runs Kafka's ProducerPerformance acks=all
(client defaults: batch.size=16384, linger.ms=5, 5 requests in flight) over it, then prints the
broker's CPU per GB, the Produce requests, the log flushes (`weir_storage_flushes_total`: one
fdatasync of a log's segment each, shared by every acks=all waiter of that log's round), the
record batches in the topic's segments (counted by walking their batch headers), and batches
per flush: 1.0 means each batch paid for its own fdatasync, group commit merged nothing.

Usage: WEIR_BIN=<weir> KAFKA_CLASSPATH_FILE=<classpath.txt> scripts/group_commit.py [RECORDS]
(RECORDS of 1 KiB, default 1,000,000; the classpath file is the one scripts/bench resolves,
integration-tests/java-kafka-tools/target/classpath.txt; log dir under $TMPDIR or /tmp).
Measured on 2026-12-05 (release build of 4f5203d, 2-core VM, a quiet day): 104.8 MiB/s,
6.87 s/GB of broker CPU, 7,256 Produce requests, 55,273 flushes for 68,085 batches: 1.23
batches per flush, 56.6 flushes per MB. Each request carries a batch for about 9 of the 16
partitions and each of those gets a flush of its own: requests arrive about 1.3 ms apart and a
flush takes about as long, so a log's next batch seldom arrives while its flush is running.
"""

import os
import re
import shutil
import struct
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_kafka as bench  # noqa: E402  (the driver's Weir, topic and load helpers)

PARTITIONS = 16
COUNTED = re.compile(r'^(weir_storage_flushes_total|weir_storage_appended_records_total|'
                     r'weir_requests_total\{[^}]*api="Produce"[^}]*\})\s+(\S+)$')


class Args:
    """The fields of the driver's parsed arguments that Weir and producer_perf read."""

    def __init__(self):
        self.weir_bin = os.environ["WEIR_BIN"]
        self.classpath = Path(os.environ["KAFKA_CLASSPATH_FILE"]).read_text().strip()


class MeteredWeir(bench.Weir):
    """The driver's single-node Weir with its Prometheus endpoint on `metrics_port`."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.metrics_port = bench.free_port()

    def write_props(self, props):
        props["metrics.listener"] = f"127.0.0.1:{self.metrics_port}"
        return super().write_props(props)


def scrape(port):
    """The counted series of the Prometheus endpoint on `port`: {series: value}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    out = {}
    for line in text.decode().splitlines():
        m = COUNTED.match(line)
        if m:
            out[m[1]] = out.get(m[1], 0.0) + float(m[2])
    return out


def batches_in(logdir, topic):
    """Record batches in every segment of `topic` under `logdir` (base offset 8 bytes, then a
    big-endian batch length 4 bytes, then that many bytes)."""
    count = 0
    for segment in Path(logdir).glob(f"{topic}-*/*.log"):
        data, pos = segment.read_bytes(), 0
        while pos + 12 <= len(data):
            length = struct.unpack_from(">i", data, pos + 8)[0]
            if length <= 0:
                break
            count, pos = count + 1, pos + 12 + length
    return count


def main():
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    args = Args()
    workdir = Path(tempfile.mkdtemp(prefix="group-commit-", dir=os.environ.get("TMPDIR", "/tmp")))
    weir = MeteredWeir("weir", args, workdir)
    try:
        weir.start()
        bench.create_topic(weir.port, "t", PARTITIONS)
        bench.wait_for_leaders(weir.port, "t", PARTITIONS)
        before, cpu0 = scrape(weir.metrics_port), bench.cpu_seconds(weir.proc.pid)
        result = bench.producer_perf(args, weir.bootstrap, "t", records, "all")
        cpu = bench.cpu_seconds(weir.proc.pid) - cpu0
        after = scrape(weir.metrics_port)
        delta = {k: v - before.get(k, 0.0) for k, v in after.items()}
        flushes = delta.get("weir_storage_flushes_total", 0.0)
        requests = sum(v for k, v in delta.items() if k.startswith("weir_requests_total"))
        batches = batches_in(weir.logdir, "t")
        mib = records * bench.RECORD_SIZE / 2**20
        print(f"ProducerPerformance acks=all, {PARTITIONS} partitions, {records} records: "
              f"{result['mb_s']} MiB/s; broker CPU {cpu / (records * bench.RECORD_SIZE / 1e9):.2f}"
              f" s/GB")
        print(f"Produce requests {requests:.0f}, flushes {flushes:.0f}, batches {batches}, "
              f"batches per flush {batches / max(flushes, 1):.2f}, flushes per MB "
              f"{flushes / mib:.1f}")
    finally:
        weir.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
