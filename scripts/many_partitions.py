#!/usr/bin/env python3
"""Many partitions on a local 3-node cluster (issue 18, scope 5).

Starts a fresh cluster with scripts/cluster (nodes 1-3, broker+controller,
on 127.0.0.1-3; `--with-broker` adds node 4, broker-only, which follows the
quorum as an observer), creates `--partitions` partitions with replication
factor 3 in topics of at most `--per-topic` (controllers refuse more than
10,000 records per operation), and prints:

- creation: the wall time of the CreateTopics requests (sent one after
  another to node 1, each answered at commit, as Kafka's);
- propagation: after the last CreateTopics answer, how long until each node's
  Metadata (v4, all topics) lists every partition with a leader, and until
  each node's log directory holds the logs of all its replicas;
- RSS of each node (VmRSS) and its idle CPU over `--idle-seconds`
  (/proc/<pid>/stat utime+stime), as % of one core;
- restart to serving: node `--restart` (default 3, and node 4 with
  `--with-broker`) is stopped with SIGTERM (controlled shutdown; the time
  to exit is printed), started again, and timed from its launch until its
  Metadata lists every partition with a leader.

    scripts/many_partitions.py [--partitions N] [--per-topic N] [--with-broker]
                               [--idle-seconds S] [--keep] [--dir DIR] [--json FILE]

`--json FILE` also writes the figures as JSON (seconds and MiB; per-node
figures keyed by node id): partitions, create_s, slowest_create_s, listed_s,
hosted_s, rss_mib, idle_cpu_pct, stop_s, restart_answered_s, restart_listed_s
(`scripts/bench all` puts them in bench/results/latest.md).

WEIR_BIN=path measures that binary; otherwise scripts/cluster builds the
release binary. The cluster lives under --dir (default: a new directory in
$TMPDIR) and is removed at the end unless --keep.
"""

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_kafka import (  # noqa: E402  (the bench driver's raw-protocol helpers)
    CLK_TCK,
    _request,
    _roundtrip,
    _str,
    cpu_seconds,
    status_kb,
)

REPO = Path(__file__).resolve().parent.parent


def log(msg):
    print(f"[many {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cluster(env, *args):
    subprocess.run([str(REPO / "scripts" / "cluster"), *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def prop(node_dir, key):
    for line in (node_dir / "server.properties").read_text().splitlines():
        if line.startswith(key + "="):
            value = line.split("=", 1)[1]
    return value


def client_address(node_dir):
    for listener in prop(node_dir, "listeners").split(","):
        if listener.startswith("PLAINTEXT://"):
            host, port = listener[len("PLAINTEXT://"):].rsplit(":", 1)
            return host, int(port)
    raise KeyError("PLAINTEXT listener")


def create_topics(host, port, names, partitions):
    """CreateTopics v4 for `names`, each with `partitions` partitions and
    replication factor 3; raises on any non-zero error code."""
    body = struct.pack(">i", len(names))
    for name in names:
        body += _str(name) + struct.pack(">ih", partitions, 3) + struct.pack(">ii", 0, 0)
    body += struct.pack(">i?", 120000, False)
    resp = _roundtrip(port, _request(19, 4, 2, body), timeout=300.0, host=host)
    off = 4 + 4
    (count,) = struct.unpack(">i", resp[off:off + 4])
    off += 4
    for _ in range(count):
        (nlen,) = struct.unpack(">h", resp[off:off + 2])
        name = resp[off + 2:off + 2 + nlen].decode()
        off += 2 + nlen
        (err,) = struct.unpack(">h", resp[off:off + 2])
        off += 2
        (mlen,) = struct.unpack(">h", resp[off:off + 2])
        off += 2 + max(mlen, 0)
        if err != 0:
            raise RuntimeError(f"CreateTopics {name}: error code {err}")


def led_partitions(host, port, prefix, replicas_by_node=None):
    """Metadata v4 for all topics: how many partitions of topics named
    `prefix*` have a leader (-1 when the node does not answer). With
    `replicas_by_node` (a dict), also counts there how many of those
    partitions list each node as a replica."""
    body = struct.pack(">i?", -1, False)
    try:
        r = _roundtrip(port, _request(3, 4, 3, body), timeout=30.0, host=host)
    except OSError:
        return -1
    off = 8
    unpack = struct.unpack_from

    def skip_str(off):
        (n,) = unpack(">h", r, off)
        return off + 2 + max(n, 0)

    (brokers,) = unpack(">i", r, off)
    off += 4
    for _ in range(brokers):
        off = skip_str(off + 4) + 4
        off = skip_str(off)
    off = skip_str(off) + 4  # cluster_id, controller_id
    (topics,) = unpack(">i", r, off)
    off += 4
    led = 0
    pre = prefix.encode()
    for _ in range(topics):
        (err, nlen) = unpack(">hh", r, off)
        ours = r[off + 4:off + 4 + nlen].startswith(pre)
        off += 4 + nlen + 1
        (parts,) = unpack(">i", r, off)
        off += 4
        for _ in range(parts):
            (_perr, _index, leader, nrep) = unpack(">hiii", r, off)
            if ours and replicas_by_node is not None:
                for node in unpack(f">{nrep}i", r, off + 14):
                    replicas_by_node[node] = replicas_by_node.get(node, 0) + 1
            off += 14 + 4 * nrep
            (nisr,) = unpack(">i", r, off)
            off += 4 + 4 * nisr
            if ours and err == 0 and leader >= 0:
                led += 1
    return led


def poll_nodes(nodes, ready, start, timeout, what):
    """Polls `ready(node, value)` for every node of `nodes` (a dict) until
    each has been ready once; returns {node: seconds since `start`}."""
    done = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(nodes):
        for node, value in nodes.items():
            if node not in done and ready(node, value):
                done[node] = time.monotonic() - start
        if time.monotonic() > deadline:
            missing = sorted(set(nodes) - set(done))
            raise RuntimeError(f"nodes {missing}: not {what} in {timeout} s")
        time.sleep(0.05)  # polling interval
    return done


def wait_all_listed(nodes, prefix, total, start, timeout):
    """Polls every node until it lists `total` led partitions; returns
    {node: seconds since `start`}."""
    return poll_nodes(nodes, lambda _node, addr: led_partitions(*addr, prefix) >= total,
                      start, timeout, f"listing {total} partitions")


def wait_all_hosted(node_dirs, prefix, expected, start, timeout):
    """Polls every node's log directory until it holds a partition
    directory for each of its `expected[node]` replicas of `prefix*`
    topics (CreateTopics answers at commit; each node creates its logs
    after); returns {node: seconds since `start`}."""
    def hosted(node, node_dir):
        with os.scandir(prop(node_dir, "log.dirs")) as entries:
            count = sum(1 for e in entries if e.name.startswith(prefix) and e.is_dir())
        return count >= expected.get(node, 0)
    return poll_nodes(node_dirs, hosted, start, timeout, "holding their logs")


def pid_of(node_dir):
    return int((node_dir / "pid").read_text().strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--topics-per-request", type=int, default=1,
                    help="topics per CreateTopics request (partitions per request must stay "
                         "at most 10,000 / 2 records: one TopicRecord and one PartitionRecord each)")
    ap.add_argument("--with-broker", action="store_true",
                    help="also node 4, broker-only (an observer of the quorum)")
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--restart", type=int, nargs="*", default=None,
                    help="nodes restarted and timed (default: 3, and 4 with --with-broker)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--dir", help="cluster directory (default: a new one in $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running and its data")
    ap.add_argument("--json", help="also write the figures to this file as JSON")
    args = ap.parse_args()
    # SIGTERM unwinds as Ctrl-C does, so the `finally` below stops the cluster
    # (scripts/cluster starts the nodes detached: they outlive this script).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    figures = {"partitions": args.partitions, "stop_s": {}, "restart_answered_s": {},
               "restart_listed_s": {}, "rss_mib": {}, "idle_cpu_pct": {}}

    workdir = Path(args.dir or tempfile.mkdtemp(prefix="weir-many-"))
    # A restart follows a clean shutdown, however long its flush of every
    # log takes (75,000 logs per node at 100,000 partitions).
    env = dict(os.environ, WEIR_CLUSTER_DIR=str(workdir), WEIR_CLUSTER_UP_TIMEOUT="120",
               WEIR_CLUSTER_DOWN_TIMEOUT="300")
    ids = [1, 2, 3] + ([4] if args.with_broker else [])
    restart = args.restart if args.restart is not None else [3] + ([4] if args.with_broker else [])
    log(f"cluster in {workdir}")
    cluster(env, "up", *(["--with-broker"] if args.with_broker else []))
    try:
        node_dirs = {i: workdir / f"node-{i}" for i in ids}
        nodes = {i: client_address(d) for i, d in node_dirs.items()}
        prefix = "many-"
        topics = (args.partitions + args.per_topic - 1) // args.per_topic
        names = [f"{prefix}{t:05d}" for t in range(topics)]
        host, port = nodes[1]
        log(f"creating {args.partitions:,} partitions (RF=3) in {topics} topics of "
            f"{args.per_topic}")
        start = time.monotonic()
        slowest = 0.0
        for i in range(0, topics, args.topics_per_request):
            t0 = time.monotonic()
            create_topics(host, port, names[i:i + args.topics_per_request], args.per_topic)
            slowest = max(slowest, time.monotonic() - t0)
        created = time.monotonic()
        total = topics * args.per_topic
        log(f"created in {created - start:.1f} s (slowest request {slowest:.2f} s)")
        figures.update(partitions=total, create_s=created - start, slowest_create_s=slowest)
        listed = wait_all_listed(nodes, prefix, total, created, args.timeout)
        figures["listed_s"] = listed
        for node, secs in sorted(listed.items()):
            log(f"node {node} lists all {total:,} partitions {secs:.2f} s after the last "
                f"CreateTopics answer")
        expected = {}
        led_partitions(host, port, prefix, expected)
        hosted = wait_all_hosted(node_dirs, prefix, expected, created, args.timeout)
        figures["hosted_s"] = hosted
        for node, secs in sorted(hosted.items()):
            log(f"node {node} holds the logs of its {expected.get(node, 0):,} replicas "
                f"{secs:.2f} s after the last CreateTopics answer")
        time.sleep(2)  # let background work that follows creation finish
        pids = {i: pid_of(d) for i, d in node_dirs.items()}
        cpu0 = {i: cpu_seconds(p) for i, p in pids.items()}
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        window = time.monotonic() - t0
        for i, p in pids.items():
            idle = 100.0 * (cpu_seconds(p) - cpu0[i]) / window
            figures["idle_cpu_pct"][i] = idle
            figures["rss_mib"][i] = status_kb(p, 'VmRSS') / 1024
            log(f"node {i}: RSS {status_kb(p, 'VmRSS') / 1024:.0f} MiB, idle CPU {idle:.2f}% of a "
                f"core over {window:.0f} s (CLK_TCK {CLK_TCK})")
        for node in restart:
            t0 = time.monotonic()
            cluster(env, "stop", str(node))
            figures["stop_s"][node] = time.monotonic() - t0
            log(f"node {node}: SIGTERM to exit (controlled shutdown, every log flushed) "
                f"{time.monotonic() - t0:.2f} s")
            t0 = time.monotonic()
            cluster(env, "start", str(node))
            answered = time.monotonic() - t0
            listed = wait_all_listed({node: nodes[node]}, prefix, total, t0, args.timeout)
            figures["restart_answered_s"][node] = answered
            figures["restart_listed_s"][node] = listed[node]
            log(f"node {node}: restart answers Metadata after {answered:.2f} s, lists all "
                f"{total:,} partitions after {listed[node]:.2f} s; RSS "
                f"{status_kb(pid_of(node_dirs[node]), 'VmRSS') / 1024:.0f} MiB")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            subprocess.run([str(REPO / "scripts" / "cluster"), "down", "--clean"], env=env,
                           stdout=subprocess.DEVNULL)
            subprocess.run(["rm", "-rf", str(workdir)])


if __name__ == "__main__":
    main()
