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

With --replicated, the same on the replicated benchmark's cluster (3 combined nodes on
127.0.0.1-3, topic RF=3, min.insync.replicas=2; leaders and followers fsync), per node: each
node's flushes and the batches in its copy of the topic, leaders' and followers' logs together.

Usage: WEIR_BIN=<weir> KAFKA_CLASSPATH_FILE=<classpath.txt> scripts/group_commit.py
           [--replicated] [RECORDS]
(RECORDS of 1 KiB, default 1,000,000; the classpath file is the one scripts/bench resolves,
integration-tests/java-kafka-tools/target/classpath.txt; log dirs under $TMPDIR or /tmp).
Measured on 2026-12-05 (release build of 4f5203d, 2-core VM, a quiet day): 104.8 MiB/s,
6.87 s/GB of broker CPU, 7,256 Produce requests, 55,273 flushes for 68,085 batches: 1.23
batches per flush, 56.6 flushes per MB. Each request carries a batch for about 9 of the 16
partitions and each of those gets a flush of its own: requests arrive about 1.3 ms apart and a
flush takes about as long, so a log's next batch seldom arrives while its flush is running.
--replicated, same day: 50.6 MiB/s, 22.62 s/GB summed broker CPU, 1.19-1.21 batches per flush
on each node (a follower appends the leader's batches as they are, 66,756 on every node), 171.2
flushes per MB over the 3 nodes.
Flush pacing (`log.flush.pace.ms`, default 4 ms since 2026-12-05; ARCHITECTURE.md, group commit)
holds a log that grows by 8 KiB or more per interval to one flush per interval: 3.3-3.6 batches
per flush on one node (137-149 MiB/s, 2.8-3.1 s/GB) and 1.80-1.84 on each replicated node
(71-74 MiB/s, 12.9-13.4 s/GB summed), against 1.06-1.20 and 1.33-1.43 with it set to 0.
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
COUNTED = re.compile(r'^(weir_storage_flushes_total|'
                     r'weir_requests_total\{[^}]*api="Produce"[^}]*\})\s+(\S+)$')


class Args:
    """The fields of the driver's parsed arguments that Weir and producer_perf read."""

    def __init__(self):
        self.weir_bin = os.environ["WEIR_BIN"]
        self.classpath = Path(os.environ["KAFKA_CLASSPATH_FILE"]).read_text().strip()


class MeteredWeir(bench.Weir):
    """The driver's Weir node with its Prometheus endpoint on `metrics_port` (127.0.0.1)."""

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


def report(label, nodes, records, delta_of, cpu, result):
    """Prints the run's throughput and broker CPU per GB, then per node its Produce requests,
    flushes, batches and batches per flush (and the sum over the nodes)."""
    mib = records * bench.RECORD_SIZE / 2**20
    print(f"ProducerPerformance acks=all, {label}, {records} records: {result['mb_s']} MiB/s; "
          f"broker CPU {cpu / (records * bench.RECORD_SIZE / 1e9):.2f} s/GB")
    total_flushes = total_batches = 0
    for node in nodes:
        delta = delta_of[node.node_id]
        flushes = delta.get("weir_storage_flushes_total", 0.0)
        requests = sum(v for k, v in delta.items() if k.startswith("weir_requests_total"))
        batches = batches_in(node.logdir, "t")
        total_flushes, total_batches = total_flushes + flushes, total_batches + batches
        print(f"node {node.node_id}: Produce requests {requests:.0f}, flushes {flushes:.0f}, "
              f"batches {batches}, batches per flush {batches / max(flushes, 1):.2f}, "
              f"flushes per MB {flushes / mib:.1f}")
    if len(nodes) > 1:
        print(f"all nodes: flushes {total_flushes:.0f}, batches {total_batches}, batches per "
              f"flush {total_batches / max(total_flushes, 1):.2f}, flushes per MB "
              f"{total_flushes / mib:.1f}")


def main():
    argv = sys.argv[1:]
    replicated = "--replicated" in argv
    argv = [a for a in argv if a != "--replicated"]
    records = int(argv[0]) if argv else 1_000_000
    args = Args()
    workdir = Path(tempfile.mkdtemp(prefix="group-commit-", dir=os.environ.get("TMPDIR", "/tmp")))
    if replicated:
        cluster = bench.Cluster("weir", args, workdir, node=MeteredWeir)
        nodes, label = cluster.nodes, (f"{PARTITIONS} partitions, RF={bench.REPLICAS}, "
                                       f"min.insync.replicas={bench.MIN_INSYNC_REPLICAS}")
    else:
        cluster = None
        nodes, label = [MeteredWeir("weir", args, workdir)], f"{PARTITIONS} partitions"
    first = nodes[0]
    try:
        if cluster:
            cluster.start()
            bench.create_topic(first.port, "t", PARTITIONS,
                               {"min.insync.replicas": str(bench.MIN_INSYNC_REPLICAS)},
                               bench.REPLICAS, host=first.host)
        else:
            first.start()
            bench.create_topic(first.port, "t", PARTITIONS)
        bench.wait_for_leaders(first.port, "t", PARTITIONS, host=first.host)
        pids = [n.proc.pid for n in nodes]
        before = {n.node_id: scrape(n.metrics_port) for n in nodes}
        cpu0 = bench.cpu_seconds(*pids)
        bootstrap = cluster.bootstrap if cluster else first.bootstrap
        result = bench.producer_perf(args, bootstrap, "t", records, "all")
        cpu = bench.cpu_seconds(*pids) - cpu0
        delta_of = {}
        for n in nodes:
            after = scrape(n.metrics_port)
            delta_of[n.node_id] = {k: v - before[n.node_id].get(k, 0.0) for k, v in after.items()}
        report(label, nodes, records, delta_of, cpu, result)
    finally:
        if cluster:
            cluster.stop()
        else:
            first.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
