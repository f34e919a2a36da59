#!/usr/bin/env python3
"""Side-by-side benchmark of Weir and Apache Kafka 4.1.2 on this machine (issue 6).

Run by `scripts/bench kafka [--quick]`, which passes the Weir binary (WEIR_BIN)
and the Kafka classpath file (KAFKA_CLASSPATH_FILE, resolved by Maven exactly as
scripts/test does).

Each round starts Weir, then Kafka (KRaft, broker+controller in one JVM), each
fresh, on free 127.0.0.1 ports, with a log dir under $TMPDIR, and runs the same
scenarios against it with the same load generators (Kafka's own
ProducerPerformance and ConsumerPerformance from kafka-tools 4.1.2, and
librdkafka's rdkafka_performance when RDKAFKA_PERFORMANCE names it). The figures
of all rounds are reduced to medians and printed as a table with the
Weir/Kafka ratio; the table also goes to bench/results/latest.md with the
machine, versions and settings.

Broker settings, equal on both: one node, replication factor 1,
num.partitions=1, offsets.topic.replication.factor=1,
group.initial.rebalance.delay.ms=0; every other key at its default. Kafka runs
with the JVM options of kafka-server-start.sh (-Xmx1G -Xms1G, G1).

`--replicated` (`scripts/bench replicated`, issue 16) runs the replicated
scenario instead: each round starts a fresh 3-node cluster of each (combined
broker+controller nodes on 127.0.0.1-3, every broker key at its default) and
measures ProducerPerformance acks=all throughput on 16-partition topics with
replication factor 3 and min.insync.replicas=2, the brokers' summed CPU per GB
and summed RSS, and weir-latency-probe at 20,000 records/s, acks=all; the
table goes to bench/results/replicated.md.

`--tls` (`scripts/bench tls`, issue 19) runs the TLS scenario instead: each round
starts the single node of each, fresh, with its client listener SSL (a CA and a
server certificate made at run time with openssl, PEM keystore and truststore,
no client certificate; Kafka's CONTROLLER listener PLAINTEXT), and measures
ProducerPerformance acks=1 and acks=all and ConsumerPerformance over TLS on
16-partition topics: throughput, the CPU split of each run and the broker's RSS;
the table goes to bench/results/tls.md.
"""

import argparse
import base64
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KAFKA_VERSION = "4.1.2"
RECORD_SIZE = 1024
LATENCY_RATE = 20000  # records/s of the fixed-rate latency scenario
KAFKA_JVM_OPTS = [
    # kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's
    # KAFKA_JVM_PERFORMANCE_OPTS.
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
CLK_TCK = os.sysconf("SC_CLK_TCK")
PP = "ProducerPerformance (kafka-tools 4.1.2)"
CP_ = "ConsumerPerformance (kafka-tools 4.1.2)"
PROBE = "raw Metadata v4 probe (this script)"
PROC = "/proc/<pid>"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# --- Kafka protocol frames (no client library: the same bytes to both) -------

def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _request(api_key, version, corr, body):
    """A request frame with header v1 (non-flexible): size, key, version, id, client id."""
    msg = struct.pack(">hhi", api_key, version, corr) + _str("weir-bench") + body
    return struct.pack(">i", len(msg)) + msg


def _connect(host, port, timeout, pki=None):
    """A TCP connection to `host`:`port`; with `pki` (a `Pki`) a TLS one over it that checks
    the broker's certificate against the PKI's CA and `host` (ssl.SSLError is an OSError)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    if pki is None:
        return sock
    try:
        return pki.context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def _roundtrip(port, frame, timeout, host="127.0.0.1", pki=None):
    with _connect(host, port, timeout, pki) as s:
        s.sendall(frame)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before the answer")
            buf += chunk
        return buf[4:]


def metadata_brokers(port, host="127.0.0.1", pki=None):
    """The brokers a Metadata v4 request (all topics) lists, 0 when nothing answers."""
    body = struct.pack(">i?", -1, False)  # topics: null (all), allow_auto_topic_creation
    try:
        resp = _roundtrip(port, _request(3, 4, 1, body), timeout=1.0, host=host, pki=pki)
    except OSError:
        return 0
    # correlation id, throttle_time_ms, brokers array length
    _corr, _throttle, brokers = struct.unpack(">iii", resp[:12])
    return brokers


def create_topic(port, name, partitions, configs=None, replication_factor=1, host="127.0.0.1",
                 pki=None):
    """CreateTopics v4 for one topic; raises on a non-zero error code."""
    cfg = configs or {}
    topic = _str(name) + struct.pack(">ih", partitions, replication_factor) + struct.pack(">i", 0)
    topic += struct.pack(">i", len(cfg)) + b"".join(_str(k) + _str(v) for k, v in cfg.items())
    body = struct.pack(">i", 1) + topic + struct.pack(">i?", 30000, False)
    resp = _roundtrip(port, _request(19, 4, 2, body), timeout=35.0, host=host, pki=pki)
    off = 4 + 4 + 4  # correlation id, throttle, topics count
    (nlen,) = struct.unpack(">h", resp[off:off + 2])
    off += 2 + nlen
    (err,) = struct.unpack(">h", resp[off:off + 2])
    if err != 0:
        raise RuntimeError(f"CreateTopics {name}: error code {err}")


def wait_for_leaders(port, topic, partitions, timeout=60, host="127.0.0.1", pki=None):
    """Polls Metadata until every partition of `topic` has a leader (Kafka answers
    CreateTopics before its broker knows the leaders)."""
    deadline = time.monotonic() + timeout
    while partitions_with_leader(port, topic, host, pki) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every partition has a leader in {timeout} s")
        time.sleep(0.05)  # polling interval


def wait_for_served(port, topic, partitions, timeout=60, host="127.0.0.1"):
    """Polls ListOffsets (latest) until every partition of `topic` answers without an
    error, so the leader holds its log and serves it: Weir answers CreateTopics at the
    commit and creates the logs after it, Kafka's broker does the same after its
    controller's answer, so "has a leader" alone does not mean "can be produced to"."""
    deadline = time.monotonic() + timeout
    while partitions_served(port, topic, partitions, host) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every partition served in {timeout} s")
        time.sleep(0.05)  # polling interval


def partitions_served(port, topic, partitions, host="127.0.0.1"):
    """ListOffsets v1 (latest offset) for partitions 0..`partitions` of `topic` on this
    broker: how many answered without an error (-1 when the request failed)."""
    body = struct.pack(">ii", -1, 1) + _str(topic) + struct.pack(">i", partitions)
    body += b"".join(struct.pack(">iq", p, -1) for p in range(partitions))
    try:
        r = _roundtrip(port, _request(2, 1, 4, body), timeout=30.0, host=host)
    except OSError:
        return -1
    off = 4  # correlation id (v1 has no throttle time)
    served = 0
    (topics,) = struct.unpack(">i", r[off:off + 4])
    off += 4
    for _ in range(topics):
        (n,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + n
        (count,) = struct.unpack(">i", r[off:off + 4])
        off += 4
        for _ in range(count):  # partition, error_code, timestamp, offset
            (_p, err) = struct.unpack(">ih", r[off:off + 6])
            off += 6 + 16
            served += err == 0
    return served


def partitions_with_leader(port, topic, host="127.0.0.1", pki=None):
    """Metadata v4 for one topic: how many of its partitions have a leader (-1 on error)."""
    body = struct.pack(">i", 1) + _str(topic) + struct.pack("?", False)
    try:
        r = _roundtrip(port, _request(3, 4, 3, body), timeout=30.0, host=host, pki=pki)
    except OSError:
        return -1
    off = 8  # correlation id, throttle_time_ms

    def i32():
        nonlocal off
        (v,) = struct.unpack(">i", r[off:off + 4])
        off += 4
        return v

    def skip_str():
        nonlocal off
        (n,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + max(n, 0)

    for _ in range(i32()):  # brokers: node_id, host, port, rack
        i32()
        skip_str()
        i32()
        skip_str()
    skip_str()  # cluster_id
    i32()  # controller_id
    led = 0
    for _ in range(i32()):  # topics
        (err,) = struct.unpack(">h", r[off:off + 2])
        off += 2
        skip_str()
        off += 1  # is_internal
        if err != 0:
            return -1
        for _ in range(i32()):  # partitions: error, index, leader, replicas, isr
            off += 2
            i32()
            if i32() >= 0:
                led += 1
            for _ in range(2):
                n = i32()
                off += 4 * n
    return led


# --- /proc sampling ------------------------------------------------------------

def cpu_seconds(*pids):
    """utime + stime of the processes `pids`, summed, in seconds."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # fields[0] is state (field 3); utime/stime are fields 14/15.
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def machine_jiffies():
    """(busy, total) jiffies of every CPU from /proc/stat (busy excludes idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
    return total - fields[3] - fields[4], total


def children_cpu_seconds():
    """CPU seconds of every child process waited for so far (the load generators)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_split(pids, gigabytes, run):
    """Runs `run()` and returns (its result, {cpu figures}): the brokers' (`pids`, summed) and
    the load generator's CPU seconds per GB moved, and the machine's busy CPUs (of
    os.cpu_count()) over the run, which show whether the brokers or the client (on the same
    machine) are the bound."""
    broker0, client0 = cpu_seconds(*pids), children_cpu_seconds()
    busy0, total0 = machine_jiffies()
    result = run()
    busy1, total1 = machine_jiffies()
    figures = {
        "broker_cpu_s_per_gb": (cpu_seconds(*pids) - broker0) / gigabytes,
        "client_cpu_s_per_gb": (children_cpu_seconds() - client0) / gigabytes,
        "machine_busy_cpus": (os.cpu_count() or 1) * (busy1 - busy0) / max(total1 - total0, 1),
    }
    return result, figures


def status_kb(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def status_mb(pids, key):
    """`key` (VmRSS, VmHWM) of the processes `pids`, summed, in MiB."""
    return sum(status_kb(pid, key) for pid in pids) / 1024


# --- TLS (the tls scenario) ---------------------------------------------------

# The server certificate's names: the brokers listen on, and clients connect to, 127.0.0.1.
SERVER_SAN = "IP:127.0.0.1,DNS:localhost"
CA_CONFIG = """[req]
distinguished_name = dn
x509_extensions = ca
prompt = no
[dn]
CN = weir bench CA
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""
SERVER_EXTENSIONS = f"""basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = {SERVER_SAN}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


class Pki:
    """A CA and a server certificate made at run time with the openssl command line in
    `directory`: ECDSA P-256 keys in unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`, which rustls
    and Java's PEM stores both read), the server certificate signed by the CA for SERVER_SAN.
    Files: ca.pem (the brokers' truststore and the clients'), server.pem (the server's key,
    then its certificate and the CA's: both brokers' `ssl.keystore.type=PEM` keystore), and
    client.properties (security.protocol=SSL over ca.pem, no client certificate) for
    ProducerPerformance and ConsumerPerformance; `context` is the same client side for the
    raw probes."""

    def __init__(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        self.ca, self.keystore = directory / "ca.pem", directory / "server.pem"
        self.client_properties = directory / "client.properties"
        (directory / "ca.cnf").write_text(CA_CONFIG)
        (directory / "server.ext").write_text(SERVER_EXTENSIONS)
        for step in (
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", "ca.key"],
            ["req", "-x509", "-new", "-config", "ca.cnf", "-key", "ca.key", "-sha256",
             "-days", "3650", "-out", "ca.pem"],
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", "server.key"],
            ["req", "-new", "-key", "server.key", "-subj", "/CN=localhost", "-out", "server.csr"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-set_serial", str(uuid.uuid4().int >> 65), "-sha256", "-days", "3650",
             "-extfile", "server.ext", "-out", "server.crt"],
        ):
            run = subprocess.run(["openssl", *step], cwd=directory, capture_output=True,
                                 text=True)
            if run.returncode != 0:
                raise RuntimeError(f"openssl {' '.join(step)} exited with {run.returncode}: "
                                   f"{run.stderr}")
        if "BEGIN PRIVATE KEY" not in (directory / "server.key").read_text():
            raise RuntimeError("openssl genpkey did not write an unencrypted PKCS#8 key")
        self.keystore.write_text("".join((directory / f).read_text()
                                         for f in ("server.key", "server.crt", "ca.pem")))
        self.client_properties.write_text(
            "security.protocol=SSL\nssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca}\n")
        self.context = ssl.create_default_context(cafile=str(self.ca))

    def broker_props(self):
        """The `ssl.*` keys of an SSL listener presenting server.pem (Kafka's names; Weir reads
        the same), no client authentication (`ssl.client.auth` at its default, none)."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }

    def session(self, host, port):
        """The protocol version and cipher suite a handshake with `host`:`port` agrees on with
        Python's ssl (OpenSSL) as the client, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384"."""
        with _connect(host, port, 5.0, self) as s:
            return f"{s.version()} {s.cipher()[0]}"


# --- brokers -------------------------------------------------------------------

COMMON_PROPS = {
    "node.id": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class Broker:
    """One broker process: node `node_id` on `host`, with its server.properties, log dir and
    broker.log under `workdir`, on free ports. Without `voters` it is the single node of the
    side-by-side run; `Cluster` sets `voters` (controller.quorum.voters) and `cluster_id` to
    make it one combined broker+controller node of a cluster. With `pki` (a `Pki`, single node
    only) its client listener `port` is SSL (`listeners=SSL://...`) with the PKI's server
    certificate, and the raw probes speak TLS to it."""

    def __init__(self, kind, args, workdir, host="127.0.0.1", node_id=1, pki=None):
        self.kind, self.args, self.workdir = kind, args, workdir
        self.host, self.node_id, self.pki = host, node_id, pki
        self.port = free_port(host)
        self.controller_port = free_port(host)
        self.voters = self.cluster_id = None
        self.logdir = workdir / "data"
        self.proc = None
        self.out = None

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    @property
    def client_listener(self):
        """The name (and security protocol) of the client listener: SSL with a PKI."""
        return "SSL" if self.pki else "PLAINTEXT"

    def write_props(self, props):
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self):
        """Starts the broker; returns seconds from process start to the first Metadata answer."""
        fmt, cmd = self.commands()
        if fmt:
            run_formats([fmt])
        t0 = time.monotonic()
        self.launch(cmd)
        self.wait_for_brokers(1, t0 + 120)
        return time.monotonic() - t0

    def launch(self, cmd):
        self.out = open(self.workdir / "broker.log", "wb")
        # Its own session: Ctrl-C reaches the driver, whose `finally` stops the broker.
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_for_brokers(self, brokers, deadline):
        """Polls Metadata until this node's answer lists `brokers` brokers."""
        while metadata_brokers(self.port, self.host, self.pki) < brokers:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} node {self.node_id} exited with "
                                   f"{self.proc.returncode}; see {self.workdir / 'broker.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} node {self.node_id}: no Metadata answer "
                                   f"listing {brokers} broker(s) in 120 s")
            time.sleep(0.005)  # polling interval of the probe, not a synchronisation

    def terminate(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()

    def stop(self):
        self.terminate()
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.out:
            self.out.close()


def run_formats(commands):
    """Runs the storage format commands (one per node) side by side; raises if one fails."""
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for c in commands]
    failed = []
    try:
        for command, proc in zip(commands, procs):
            _, err = proc.communicate()
            if proc.returncode != 0:
                failed.append(f"{' '.join(command[-6:])} exited with {proc.returncode}: "
                              f"{err.decode()}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if failed:
        raise RuntimeError("\n".join(failed))


class Weir(Broker):
    def commands(self):
        """(format command or None, broker command)."""
        listeners = f"{self.client_listener}://{self.host}:{self.port}"
        if self.voters is None:
            props = dict(COMMON_PROPS)
        else:
            props = {"node.id": str(self.node_id), "controller.quorum.voters": self.voters,
                     "controller.listener.names": "CONTROLLER"}
            listeners += f",CONTROLLER://{self.host}:{self.controller_port}"
        props.update({
            "process.roles": "broker,controller",
            "listeners": listeners,
            "log.dirs": str(self.logdir),
            "metrics.listener": "",
        })
        if self.pki:
            props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SSL:SSL"
            props.update(self.pki.broker_props())
        path = self.write_props(props)
        fmt = None if self.voters is None else [
            self.args.weir_bin, "format", "--config", str(path), f"--cluster-id={self.cluster_id}"]
        return fmt, [self.args.weir_bin, "--config", str(path)]


def kafka_cluster_id():
    # org.apache.kafka.common.Uuid: base64url of 16 random bytes, no padding,
    # never starting with '-'.
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


class Kafka(Broker):
    def commands(self):
        """(format command, broker command)."""
        if self.voters is None:
            props = dict(COMMON_PROPS)
            props.update({
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": "1",
                "share.coordinator.state.topic.min.isr": "1",
            })
        else:
            props = {"node.id": str(self.node_id)}
        props.update({
            "process.roles": "broker,controller",
            "controller.quorum.voters": self.voters
            or f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"{self.client_listener}://{self.host}:{self.port},"
                         f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"{self.client_listener}://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map":
                f"{self.client_listener}:{self.client_listener},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": self.client_listener,
            "log.dirs": str(self.logdir),
        })
        if self.pki:
            props.update(self.pki.broker_props())
        path = self.write_props(props)
        fmt = ["java", "-cp", self.args.classpath, "kafka.tools.StorageTool", "format",
               "-t", self.cluster_id or kafka_cluster_id(), "-c", str(path)]
        return fmt, ["java", *KAFKA_JVM_OPTS, "-cp", self.args.classpath, "kafka.Kafka", str(path)]


# The replicated scenario's clusters: combined broker+controller nodes on 127.0.0.1, .2 and .3,
# the layout of scripts/cluster.
CLUSTER_NODES = 3


class Cluster:
    """CLUSTER_NODES fresh nodes of one kind (`Weir` or `Kafka`), each a combined
    broker+controller voter with its own ports and log dir under `workdir`/node-<id>,
    formatted with one cluster id (`weir format`, Kafka's StorageTool format). `node`: the
    node class when not the kind's own (a `Weir` subclass, as scripts/group_commit.py's)."""

    def __init__(self, kind, args, workdir, node=None):
        node = node or (Weir if kind == "weir" else Kafka)
        self.kind = kind
        self.nodes = [node(kind, args, workdir / f"node-{i}", host=f"127.0.0.{i}", node_id=i)
                      for i in range(1, CLUSTER_NODES + 1)]
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)
        cluster_id = kafka_cluster_id()
        for n in self.nodes:
            n.voters, n.cluster_id = voters, cluster_id

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def pids(self):
        return [n.proc.pid for n in self.nodes]

    def start(self):
        """Formats and starts every node; returns seconds from the first process start until
        every node's Metadata answer lists every broker."""
        commands = [n.commands() for n in self.nodes]
        run_formats([fmt for fmt, _ in commands])
        t0 = time.monotonic()
        for n, (_, cmd) in zip(self.nodes, commands):
            n.launch(cmd)
        for n in self.nodes:
            n.wait_for_brokers(CLUSTER_NODES, t0 + 120)
        return time.monotonic() - t0

    def stop(self):
        """SIGTERM to every node at once (so none waits on the others' shutdown), then waits."""
        for n in self.nodes:
            n.terminate()
        for n in self.nodes:
            n.stop()


# --- load generators -----------------------------------------------------------

PP_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def producer_perf(args, bootstrap, topic, records, acks, throughput=-1, pki=None, props=()):
    """ProducerPerformance against `bootstrap` (host:port[,host:port...]), client defaults
    except acks and `props` ("key=value" producer properties; over TLS with `pki`: its
    client.properties); returns {rec_s, mb_s, p50, p99, p999 (ms)} of its summary line."""
    cmd = ["java", "-cp", args.classpath, "org.apache.kafka.tools.ProducerPerformance",
           "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
           "--throughput", str(throughput)]
    if pki:
        cmd += ["--producer.config", str(pki.client_properties)]
    cmd += ["--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", *props]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800).stdout
    m = None
    for m in PP_RE.finditer(out):
        pass  # the last match is the summary line
    if m is None:
        raise RuntimeError(f"no ProducerPerformance summary in:\n{out}")
    return {"rec_s": float(m[2]), "mb_s": float(m[3]), "p50": float(m[6]),
            "p99": float(m[8]), "p999": float(m[9])}


def consumer_perf(args, port, topic, records, pki=None):
    """ConsumerPerformance of `records` records of `topic` from 127.0.0.1:`port` (over TLS with
    `pki`: its client.properties); returns {mb_s, rec_s} (fetch.MB.sec, fetch.nMsg.sec)."""
    cmd = ["java", "-cp", args.classpath, "org.apache.kafka.tools.ConsumerPerformance",
           "--bootstrap-server", f"127.0.0.1:{port}", "--topic", topic,
           "--messages", str(records), "--timeout", "30000", "--group", f"bench-{topic}"]
    if pki:
        cmd += ["--consumer.config", str(pki.client_properties)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800).stdout
    lines = [line for line in out.splitlines() if line.count(",") >= 9]
    header = [h.strip() for h in lines[0].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(","))))
    if int(row["data.consumed.in.nMsg"]) < records:
        raise RuntimeError(f"consumed {row['data.consumed.in.nMsg']} of {records}")
    return {"mb_s": float(row["fetch.MB.sec"]), "rec_s": float(row["fetch.nMsg.sec"])}


RDK = "rdkafka_performance (librdkafka 2.0.2)"
# The single-node weir-latency-probe runs: (key, acks, Produce requests in flight on the
# connection). acks=1: the leader answers after its write; acks=all: Weir answers after its
# fdatasync by default, Kafka after the write (it does not fsync). The headline runs keep up to
# PROBE_IN_FLIGHT requests in flight, a Kafka producer's max.in.flight.requests.per.connection
# default, as the replicated probe does; the `acksall_serial` run (context) keeps one, so each
# request waits for the answer before it, fdatasync included: on a disk whose fdatasync round
# takes longer than the 1 ms between sends it measures a queue that a Kafka producer at its
# defaults does not build.
PROBE_IN_FLIGHT = 5
PROBE_RUNS = (("acks1", "1", PROBE_IN_FLIGHT), ("acksall", "all", PROBE_IN_FLIGHT),
              ("acksall_serial", "all", 1))
RDK_PRODUCE_RE = re.compile(r"messages produced .* in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s")


def rdkafka_produce(args, port, topic, records, acks):
    """rdkafka_performance -P, unthrottled; returns MiB/s of records (from its msgs/s)."""
    cmd = [args.rdkafka_perf, "-P", "-t", topic, "-b", f"127.0.0.1:{port}", "-s",
           str(RECORD_SIZE), "-c", str(records), "-a", acks, "-q"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800).stdout
    m = RDK_PRODUCE_RE.search(out)
    if m is None:
        raise RuntimeError(f"no rdkafka_performance summary in:\n{out}")
    return int(m[2]) * RECORD_SIZE / 2**20


PROBE_RE = re.compile(
    r"send_to_ack_ms p50=([\d.]+) p99=([\d.]+) p999=([\d.]+) max=[\d.]+ "
    r"end_to_end_ms p50=([\d.]+) p99=([\d.]+) p999=([\d.]+) max=[\d.]+ rate=(\d+)")
LATENCY_PROBE = "weir-latency-probe (integration-tests; no client batching)"


def latency_probe(args, bootstrap, topic, partitions, acks, in_flight=1):
    """weir-latency-probe at LATENCY_RATE for latency_seconds (+1 s warm-up) against `bootstrap`
    (it sends to and fetches from each partition's leader, with at most `in_flight` Produce
    requests awaiting answers per connection): returns
    {ack_p50, ack_p99, ack_p999, e2e_p50, e2e_p99, e2e_p999 (ms), rate (rec/s)}."""
    cmd = [args.latency_probe, "--bootstrap", bootstrap, "--topic", topic,
           "--partitions", str(partitions), "--rate", str(LATENCY_RATE),
           "--record-size", str(RECORD_SIZE), "--seconds", str(args.latency_seconds + 1),
           f"--acks={'-1' if acks == 'all' else acks}", f"--max-in-flight={in_flight}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"weir-latency-probe failed ({run.returncode}): {run.stderr}")
    out = run.stdout
    m = PROBE_RE.search(out)
    if m is None:
        raise RuntimeError(f"no weir-latency-probe summary in:\n{out}")
    keys = ("ack_p50", "ack_p99", "ack_p999", "e2e_p50", "e2e_p99", "e2e_p999")
    return {**{k: float(v) for k, v in zip(keys, m.groups())}, "rate": int(m[7])}


def rdkafka_end_to_end(args, port, topic, records, workdir):
    """Produce-to-consume latency at LATENCY_RATE rec/s, acks=1, one partition.

    A rdkafka_performance consumer (-C -l) reads the partition from the beginning
    while a rdkafka_performance producer (-P -l -r) writes records that carry their
    send wall-clock time; the consumer logs now - send time per record (us). The
    first second of records is left out as warm-up when the run is longer than 2 s.
    Returns (p50, p99, p99.9) in ms and the rate the producer reached (records/s).
    """
    lat_file = workdir / "e2e-latency.txt"
    base = [args.rdkafka_perf, "-t", topic, "-p", "0", "-b", f"127.0.0.1:{port}", "-l", "-q"]
    consumer = subprocess.Popen(
        base + ["-C", "-o", "beginning", "-c", str(records), "-A", str(lat_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The consumer has its fetch going before the first record is sent.
        time.sleep(1)
        try:
            out = subprocess.run(base + ["-P", "-s", str(RECORD_SIZE), "-c", str(records), "-a", "1",
                                         "-r", str(LATENCY_RATE)],
                                 check=True, capture_output=True, text=True,
                                 timeout=records / LATENCY_RATE + 120).stdout
        except subprocess.CalledProcessError as e:
            # Keep what the producer said: a failed run must be diagnosable.
            raise RuntimeError(f"end-to-end producer exited {e.returncode}:\n"
                               f"{(e.stdout or '')[-3000:]}\n{(e.stderr or '')[-3000:]}") from e
        m = RDK_PRODUCE_RE.search(out)
        if m is None:
            raise RuntimeError(f"no rdkafka_performance summary in:\n{out}")
        consumer.wait(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    lat = [int(x) for x in lat_file.read_text().split()]
    if len(lat) < records * 0.99:
        raise RuntimeError(f"end-to-end: {len(lat)} latencies for {records} records")
    if len(lat) > 2 * LATENCY_RATE:
        lat = lat[LATENCY_RATE:]
    lat.sort()
    pct = tuple(lat[min(len(lat) - 1, int(len(lat) * q))] / 1000 for q in (0.5, 0.99, 0.999))
    return pct, int(m[2])


# --- one broker run ------------------------------------------------------------

def run_broker(kind, args, tmp, rnd):
    """Starts one fresh broker, runs every scenario, returns {figure: value}."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{kind}-r{rnd}-", dir=tmp))
    broker = (Weir if kind == "weir" else Kafka)(kind, args, workdir)
    res = {}
    n = args.records
    try:
        res["start_to_metadata_ms"] = broker.start() * 1000
        pid = broker.proc.pid
        # Idle RSS once the broker has answered and sat idle for a moment.
        time.sleep(args.idle_seconds)
        res["rss_idle_mb"] = status_kb(pid, "VmRSS") / 1024
        weir_cache = {"write.caching": "true"} if kind == "weir" else {}
        produce = [
            ("produce_acks1_p1", "acks1-p1", 1, "1", {}),
            ("produce_acks1_p16", "acks1-p16", 16, "1", {}),
            ("produce_acksall_p16_default", "acksall-p16", 16, "all", {}),
            ("produce_acksall_p16_sameflush", "acksall-p16-cache", 16, "all", weir_cache),
        ]
        for _, topic, parts, _, cfg in produce:
            create_topic(broker.port, topic, parts, cfg)
        create_topic(broker.port, "latency", 16)
        for key, _, _ in PROBE_RUNS:
            create_topic(broker.port, f"probe-{key}", 16)
            wait_for_leaders(broker.port, f"probe-{key}", 16)
        if args.rdkafka_perf:
            create_topic(broker.port, "rdk-acks1-p16", 16)
            create_topic(broker.port, "e2e", 1)
        cpu0, produced = cpu_seconds(pid), 0
        for fig, topic, _, acks, _ in produce:
            r, split = cpu_split([pid], n * RECORD_SIZE / 1e9,
                                 lambda: producer_perf(args, broker.bootstrap, topic, n, acks))
            res[fig + "_mb_s"] = r["mb_s"]
            res.update({f"{fig}_{k}": v for k, v in split.items()})
            produced += n * RECORD_SIZE
        res["cpu_s_per_gb_produced"] = (cpu_seconds(pid) - cpu0) / (produced / 1e9)
        res["rss_after_produce_mb"] = status_kb(pid, "VmRSS") / 1024
        if args.rdkafka_perf:
            res["rdk_produce_acks1_p16_mb_s"] = rdkafka_produce(
                args, broker.port, "rdk-acks1-p16", n, "1")
        cpu0 = cpu_seconds(pid)
        r, split = cpu_split([pid], n * RECORD_SIZE / 1e9,
                             lambda: consumer_perf(args, broker.port, "acks1-p16", n))
        res["consume_p16_mb_s"] = r["mb_s"]
        res.update({f"consume_p16_{k}": v for k, v in split.items()})
        res["cpu_s_per_gb_consumed"] = (cpu_seconds(pid) - cpu0) / (n * RECORD_SIZE / 1e9)
        lat_n = max(LATENCY_RATE * args.latency_seconds, 1000)
        r = producer_perf(args, broker.bootstrap, "latency", lat_n, "1", throughput=LATENCY_RATE)
        res["produce_latency_rate_rec_s"] = r["rec_s"]
        for q in ("p50", "p99", "p999"):
            res[f"produce_latency_{q}_ms"] = r[q]
        for key, acks, in_flight in PROBE_RUNS:
            r = latency_probe(args, broker.bootstrap, f"probe-{key}", 16, acks, in_flight)
            res.update({f"probe_{key}_{k}": v for k, v in r.items()})
        if args.rdkafka_perf:
            e2e, res["e2e_rate_rec_s"] = rdkafka_end_to_end(
                args, broker.port, "e2e", lat_n, workdir)
            for q, v in zip(("p50", "p99", "p999"), e2e):
                res[f"e2e_latency_{q}_ms"] = v
        for parts in args.many_partitions:
            # Topics of at most 1,000 partitions: both controllers refuse an operation of
            # more than 10,000 metadata records (Kafka's MAX_RECORDS_PER_USER_OP).
            sizes = [min(1000, parts - i) for i in range(0, parts, 1000)]
            topics = [(f"many-{parts}-{i}", size) for i, size in enumerate(sizes)]
            t0 = time.monotonic()
            for topic, size in topics:
                create_topic(broker.port, topic, size)
            for topic, size in topics:
                wait_for_leaders(broker.port, topic, size, timeout=600)
                wait_for_served(broker.port, topic, size, timeout=600)
            res[f"create_{parts}_s"] = time.monotonic() - t0
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.idle_seconds * 2)  # the idle window measured
            res[f"idle_cpu_{parts}_pct"] = 100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            res[f"rss_{parts}_mb"] = status_kb(pid, "VmRSS") / 1024
        res["rss_peak_mb"] = status_kb(pid, "VmHWM") / 1024
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return res


# --- one cluster run (replicated scenario) --------------------------------------

REPLICAS = 3
MIN_INSYNC_REPLICAS = 2
REPLICATED_PARTITIONS = 16
# (key, label) of the replicated topics: Weir's defaults (leader and followers fsync before
# acks=all is answered) and Weir's write.caching=true (no fsync, Kafka's behaviour); Kafka runs
# both with its defaults.
REPLICATED_VARIANTS = (
    ("default", "defaults (Weir: leader and followers fsync; Kafka: no fsync)"),
    ("cache", "no fsync on both (Weir write.caching=true)"),
)
# Produce requests in flight per leader connection of the replicated probe runs: a Kafka
# producer's max.in.flight.requests.per.connection default. With one, each connection (one
# request every 3 ms over 3 leaders) keeps the rate only while an acks=all round trip, which
# includes the followers' fetch (and on Weir their fsync), stays under 3 ms.
REPLICATED_PROBE_IN_FLIGHT = 5


def run_cluster(kind, args, tmp, rnd):
    """Starts one fresh cluster of CLUSTER_NODES nodes, runs the replicated scenarios
    (ProducerPerformance acks=all, then weir-latency-probe acks=all, on RF=3 topics with
    min.insync.replicas=2, once per REPLICATED_VARIANTS), returns {figure: value}; CPU and RSS
    are sums over the nodes' processes."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{kind}-cluster-r{rnd}-", dir=tmp))
    cluster = Cluster(kind, args, workdir)
    res = {}
    n = args.records
    try:
        res["start_to_metadata_ms"] = cluster.start() * 1000
        log(f"{kind}: {CLUSTER_NODES} nodes up in {res['start_to_metadata_ms'] / 1000:.1f} s")
        pids = cluster.pids
        # Idle RSS once every node has answered and the cluster sat idle for a moment.
        time.sleep(args.idle_seconds)
        res["rss_idle_mb"] = status_mb(pids, "VmRSS")
        first = cluster.nodes[0]
        for variant, _ in REPLICATED_VARIANTS:
            configs = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)}
            if kind == "weir" and variant == "cache":
                configs["write.caching"] = "true"
            for topic in (f"rf3-{variant}", f"rf3-probe-{variant}"):
                create_topic(first.port, topic, REPLICATED_PARTITIONS, configs, REPLICAS,
                             host=first.host)
                wait_for_leaders(first.port, topic, REPLICATED_PARTITIONS, host=first.host)
        for variant, _ in REPLICATED_VARIANTS:
            r, split = cpu_split(pids, n * RECORD_SIZE / 1e9, lambda: producer_perf(
                args, cluster.bootstrap, f"rf3-{variant}", n, "all"))
            res[f"produce_{variant}_mb_s"] = r["mb_s"]
            res.update({f"produce_{variant}_{k}": v for k, v in split.items()})
        res["rss_after_produce_mb"] = status_mb(pids, "VmRSS")
        for variant, _ in REPLICATED_VARIANTS:
            r = latency_probe(args, cluster.bootstrap, f"rf3-probe-{variant}",
                              REPLICATED_PARTITIONS, "all", REPLICATED_PROBE_IN_FLIGHT)
            res.update({f"probe_{variant}_{k}": v for k, v in r.items()})
        res["rss_peak_mb"] = status_mb(pids, "VmHWM")
    finally:
        t0 = time.monotonic()
        cluster.stop()
        log(f"{kind}: stopped in {time.monotonic() - t0:.1f} s")
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return res


# --- one TLS run (tls scenario) -------------------------------------------------

TLS_PARTITIONS = 16
# (key, topic, acks, Weir's topic configs, label) of the TLS produce runs, in the order they
# run (Kafka's topics have no configs); the consume run reads the first topic back. A label's
# part before " (" names the run in the CPU rows.
TLS_PRODUCE = (
    ("produce_acks1", "tls-acks1", "1", {},
     f"produce acks=1, {TLS_PARTITIONS} partitions over TLS"),
    ("produce_acksall_default", "tls-acksall", "all", {},
     f"produce acks=all, {TLS_PARTITIONS} partitions over TLS, defaults "
     "(Weir fsyncs, Kafka does not)"),
    ("produce_acksall_sameflush", "tls-acksall-cache", "all", {"write.caching": "true"},
     f"produce acks=all, {TLS_PARTITIONS} partitions over TLS, no fsync on both "
     "(Weir write.caching=true)"),
)


def run_tls(kind, args, tmp, rnd):
    """Starts one fresh broker whose client listener is SSL (args.pki's server certificate),
    runs ProducerPerformance (TLS_PRODUCE) then ConsumerPerformance over TLS on
    TLS_PARTITIONS-partition topics, returns {figure: value}: throughput, the CPU split of
    each run, and RSS."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{kind}-tls-r{rnd}-", dir=tmp))
    broker = (Weir if kind == "weir" else Kafka)(kind, args, workdir, pki=args.pki)
    res = {}
    n = args.records
    gigabytes = n * RECORD_SIZE / 1e9
    try:
        res["start_to_metadata_ms"] = broker.start() * 1000
        pid = broker.proc.pid
        args.tls_sessions.setdefault(kind, set()).add(args.pki.session(broker.host, broker.port))
        # Idle RSS once the broker has answered and sat idle for a moment.
        time.sleep(args.idle_seconds)
        res["rss_idle_mb"] = status_kb(pid, "VmRSS") / 1024
        for _, topic, _, weir_configs, _ in TLS_PRODUCE:
            create_topic(broker.port, topic, TLS_PARTITIONS,
                         weir_configs if kind == "weir" else {}, pki=broker.pki)
            wait_for_leaders(broker.port, topic, TLS_PARTITIONS, pki=broker.pki)
        for key, topic, acks, _, _ in TLS_PRODUCE:
            r, split = cpu_split([pid], gigabytes, lambda: producer_perf(
                args, broker.bootstrap, topic, n, acks, pki=broker.pki))
            res.update({f"{key}_mb_s": r["mb_s"], f"{key}_rec_s": r["rec_s"]})
            res.update({f"{key}_{k}": v for k, v in split.items()})
        res["rss_after_produce_mb"] = status_kb(pid, "VmRSS") / 1024
        r, split = cpu_split([pid], gigabytes, lambda: consumer_perf(
            args, broker.port, TLS_PRODUCE[0][1], n, pki=broker.pki))
        res.update({"consume_mb_s": r["mb_s"], "consume_rec_s": r["rec_s"]})
        res.update({f"consume_{k}": v for k, v in split.items()})
        res["rss_peak_mb"] = status_kb(pid, "VmHWM") / 1024
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return res


def probe_figures(key, run, setting):
    """The rows of one weir-latency-probe run (keys `<key>_rate`, `<key>_ack_<q>`,
    `<key>_e2e_<q>`): the rate reached, then send-to-ack and end-to-end p50, p99, p99.9."""
    return [
        (f"{key}_rate", f"probe run {run}: rate reached (target {LATENCY_RATE})", "rec/s",
         "at target", LATENCY_PROBE),
        *((f"{key}_{kind}_{q}", f"{label} latency {q.replace('p999', 'p99.9')} at "
           f"{LATENCY_RATE} rec/s, {setting}", "ms", "lower", LATENCY_PROBE)
          for kind, label in (("ack", "send-to-ack"), ("e2e", "end-to-end"))
          for q in ("p50", "p99", "p999")),
    ]


# (key, label, unit, better, load generator)
FIGURES = [
    ("produce_acks1_p1_mb_s", "produce acks=1, 1 partition", "MiB/s", "higher", PP),
    ("produce_acks1_p16_mb_s", "produce acks=1, 16 partitions", "MiB/s", "higher", PP),
    ("produce_acksall_p16_default_mb_s",
     "produce acks=all, 16 partitions, defaults (Weir fsyncs, Kafka does not)", "MiB/s", "higher", PP),
    ("produce_acksall_p16_sameflush_mb_s",
     "produce acks=all, 16 partitions, no fsync on both (Weir write.caching=true)", "MiB/s",
     "higher", PP),
    ("rdk_produce_acks1_p16_mb_s", "produce acks=1, 16 partitions", "MiB/s", "higher", RDK),
    ("consume_p16_mb_s", "consume 16 partitions from page cache (fetch.MB.sec)", "MiB/s", "higher",
     CP_),
    ("produce_latency_rate_rec_s", f"send-to-ack run: rate reached (target {LATENCY_RATE})",
     "rec/s", "at target", PP),
    ("produce_latency_p50_ms", f"send-to-ack latency p50 at {LATENCY_RATE} rec/s, acks=1", "ms",
     "lower", PP),
    ("produce_latency_p99_ms", f"send-to-ack latency p99 at {LATENCY_RATE} rec/s, acks=1", "ms",
     "lower", PP),
    ("produce_latency_p999_ms", f"send-to-ack latency p99.9 at {LATENCY_RATE} rec/s, acks=1", "ms",
     "lower", PP),
    *(fig for key, acks, in_flight in PROBE_RUNS
      for fig in probe_figures(
          f"probe_{key}", f"acks={acks}, {in_flight} in flight",
          f"acks={acks}, 16 partitions, {in_flight} in flight")),
    ("e2e_rate_rec_s", f"end-to-end run: rate reached (target {LATENCY_RATE})", "rec/s", "at target",
     RDK),
    ("e2e_latency_p50_ms", f"end-to-end latency p50 at {LATENCY_RATE} rec/s, acks=1, 1 partition",
     "ms", "lower", RDK),
    ("e2e_latency_p99_ms", f"end-to-end latency p99 at {LATENCY_RATE} rec/s, acks=1, 1 partition",
     "ms", "lower", RDK),
    ("e2e_latency_p999_ms",
     f"end-to-end latency p99.9 at {LATENCY_RATE} rec/s, acks=1, 1 partition", "ms", "lower", RDK),
    ("cpu_s_per_gb_produced", "broker CPU per GB produced (4 produce scenarios)", "s/GB", "lower",
     f"{PROC}/stat during {PP}"),
    ("cpu_s_per_gb_consumed", "broker CPU per GB consumed", "s/GB", "lower",
     f"{PROC}/stat during ConsumerPerformance"),
    *(fig for key, what, gen in (
        ("produce_acks1_p16", "produce acks=1, 16 partitions", PP),
        ("produce_acksall_p16_default", "produce acks=all, 16 partitions, defaults", PP),
        ("consume_p16", "consume 16 partitions", CP_),
    ) for fig in (
        (f"{key}_broker_cpu_s_per_gb", f"{what}: broker CPU per GB", "s/GB", "lower",
         f"{PROC}/stat"),
        (f"{key}_client_cpu_s_per_gb", f"{what}: load generator CPU per GB", "s/GB", "context",
         f"getrusage of {gen}"),
        (f"{key}_machine_busy_cpus", f"{what}: machine CPUs busy (of {os.cpu_count()})", "CPUs",
         "context", "/proc/stat"),
    )),
    ("rss_idle_mb", "broker RSS idle (VmRSS)", "MiB", "lower", f"{PROC}/status"),
    ("rss_after_produce_mb", "broker RSS after the produce scenarios (VmRSS)", "MiB", "lower",
     f"{PROC}/status"),
    ("rss_peak_mb", "broker peak RSS over the run (VmHWM)", "MiB", "lower", f"{PROC}/status"),
    *(fig for parts in (100, 1000, 10000) for fig in (
        (f"create_{parts}_s", f"create {parts:,} partitions (topics of <= 1,000) until every one "
         "has a leader and answers ListOffsets", "s", "lower",
         PROBE.replace("Metadata v4", "CreateTopics v4 + Metadata v4 + ListOffsets v1")),
        (f"idle_cpu_{parts}_pct", f"broker idle CPU with {parts:,} more partitions", "% of a core",
         "lower", f"{PROC}/stat"),
        (f"rss_{parts}_mb", f"broker RSS with {parts:,} more partitions (VmRSS)", "MiB", "lower",
         f"{PROC}/status"),
    )),
    ("start_to_metadata_ms", "process start to first Metadata answer", "ms", "lower", PROBE),
]


SUMMED = f"sum over the {CLUSTER_NODES} nodes of {PROC}"
REPLICATED = (f"acks=all, RF={REPLICAS}, min.insync.replicas={MIN_INSYNC_REPLICAS}, "
              f"{REPLICATED_PARTITIONS} partitions")
# The replicated scenario's table; issue 18's targets are the throughput, summed CPU per GB and
# end-to-end p99 rows of the defaults and the summed RSS rows.
REPLICATED_FIGURES = [
    *(fig for variant, what in REPLICATED_VARIANTS for fig in (
        (f"produce_{variant}_mb_s", f"produce {REPLICATED}, {what}", "MiB/s", "higher", PP),
        (f"produce_{variant}_broker_cpu_s_per_gb",
         f"summed broker CPU per GB produced, {what}", "s/GB", "lower", f"{SUMMED}/stat"),
        (f"produce_{variant}_client_cpu_s_per_gb", f"load generator CPU per GB, {what}", "s/GB",
         "context", f"getrusage of {PP}"),
        (f"produce_{variant}_machine_busy_cpus",
         f"machine CPUs busy (of {os.cpu_count()}) while producing, {what}", "CPUs", "context",
         "/proc/stat"),
    )),
    *(fig for variant, what in REPLICATED_VARIANTS
      for fig in probe_figures(f"probe_{variant}", what, f"{REPLICATED}, {what}")),
    ("rss_idle_mb", "summed broker RSS idle (VmRSS)", "MiB", "lower", f"{SUMMED}/status"),
    ("rss_after_produce_mb", "summed broker RSS after the produce scenarios (VmRSS)", "MiB",
     "lower", f"{SUMMED}/status"),
    ("rss_peak_mb", "summed broker peak RSS over the run (VmHWM)", "MiB", "lower",
     f"{SUMMED}/status"),
    ("start_to_metadata_ms",
     f"cluster start to every node's Metadata listing {CLUSTER_NODES} brokers", "ms", "lower",
     PROBE),
]

TLS_SCENARIOS = (
    *((key, what, PP) for key, _, _, _, what in TLS_PRODUCE),
    ("consume", f"consume {TLS_PARTITIONS} partitions over TLS from page cache (fetch.MB.sec, "
     "fetch.nMsg.sec; no kTLS on either: Weir encrypts Fetch data with rustls in user space, "
     "Kafka loses sendfile under TLS too)", CP_),
)
# The TLS scenario's table: throughput, then the CPU split of each run, then RSS.
TLS_FIGURES = [
    *(fig for key, what, gen in TLS_SCENARIOS for fig in (
        (f"{key}_mb_s", what, "MiB/s", "higher", gen),
        (f"{key}_rec_s", what.split(" (")[0], "records/s", "higher", gen),
    )),
    *(fig for key, what, gen in TLS_SCENARIOS for fig in (
        (f"{key}_broker_cpu_s_per_gb", f"{what.split(' (')[0]}: broker CPU per GB", "s/GB",
         "lower", f"{PROC}/stat"),
        (f"{key}_client_cpu_s_per_gb", f"{what.split(' (')[0]}: load generator CPU per GB",
         "s/GB", "context", f"getrusage of {gen}"),
        (f"{key}_machine_busy_cpus",
         f"{what.split(' (')[0]}: machine CPUs busy (of {os.cpu_count()})", "CPUs", "context",
         "/proc/stat"),
    )),
    ("rss_idle_mb", "broker RSS idle (VmRSS)", "MiB", "lower", f"{PROC}/status"),
    ("rss_after_produce_mb", "broker RSS after the produce runs (VmRSS)", "MiB", "lower",
     f"{PROC}/status"),
    ("rss_peak_mb", "broker peak RSS over the run (VmHWM)", "MiB", "lower", f"{PROC}/status"),
    ("start_to_metadata_ms", "process start to first Metadata answer over TLS", "ms", "lower",
     PROBE.replace("probe", "probe over TLS")),
]


def fmt(v):
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def table(results, figures):
    rows = ["| figure | unit | Weir | Kafka | Weir/Kafka | better | load generator |",
            "|---|---|---|---|---|---|---|"]
    for key, label, unit, better, gen in figures:
        w = [r[key] for r in results["weir"] if key in r]
        k = [r[key] for r in results["kafka"] if key in r]
        if not w or not k:
            continue
        wm, km = statistics.median(w), statistics.median(k)
        ratio = f"{wm / km:.2f}" if km else "n/a"
        rows.append(f"| {label} | {unit} | {fmt(wm)} | {fmt(km)} | {ratio} | {better} | {gen} |")
    return "\n".join(rows)


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def machine(tmp):
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    cpu = sh("awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo")
    return [
        f"- CPUs: {os.cpu_count()} ({cpu}); RAM {mem}; kernel {platform.release()}",
        f"- load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
        f"- log dirs under {tmp}: `{sh(f'df -hT {tmp} | tail -1')}`",
        f"- mount: `{sh(f'findmnt -n -T {tmp} -o SOURCE,FSTYPE,OPTIONS')}`",
        f"- java: `{sh('java -version 2>&1 | head -1')}`",
    ]


def single_settings(args):
    """The Settings lines of the single-node run (`scripts/bench kafka`)."""
    return [
        "- both: 1 node, RF 1, " + ", ".join(f"{k}={v}" for k, v in COMMON_PROPS.items()
                                              if k != "node.id")
        + "; everything else at its default (Weir: acks=all answered after fdatasync; "
          "Kafka: no fsync before the answer); Weir's Prometheus endpoint off "
          "(metrics.listener empty), as Kafka has no HTTP metrics endpoint",
        f"- {args.records} records of {RECORD_SIZE} B per produce and consume scenario; "
        "producer: ProducerPerformance with client defaults except acks "
        "(batch.size=16384, linger.ms=5); consumer: ConsumerPerformance defaults",
        "- CPU split (rows marked context): the broker's CPU (/proc/<pid>/stat), the load "
        "generator's (getrusage of the finished child) and the machine's busy CPUs over the same "
        "run. The load generator runs on the same machine, so when the machine is saturated, "
        "throughput is bounded by (client + broker) CPU seconds per GB: a broker that uses less "
        "CPU leaves more to the client.",
        f"- latency: {LATENCY_RATE} rec/s for {args.latency_seconds} s, acks=1, 16 partitions; "
        "ProducerPerformance's send-to-ack latency; end-to-end: rdkafka_performance producer "
        "(-l -r) and consumer (-C -l) on one partition, acks=1, first second left out as "
        "warm-up when longer than 2 s"
        + ("" if args.rdkafka_perf else " (SKIPPED: RDKAFKA_PERFORMANCE not set)"),
        f"- probe: weir-latency-probe at {LATENCY_RATE} rec/s for {args.latency_seconds} s "
        "(+1 s warm-up left out) on a fresh 16-partition topic per run, after the throughput "
        "scenarios: one Produce of 20 records every millisecond round-robin over the partitions "
        "on one connection, one Fetch long-poll connection; timed from each request's scheduled "
        f"send time. acks=1 and acks=all keep up to {PROBE_IN_FLIGHT} requests in flight (a "
        "Kafka producer's max.in.flight.requests.per.connection); the `1 in flight` acks=all run "
        "waits for each answer before the next send (context: on a durable broker each send then "
        "waits for the fdatasync before it)",
        f"- many partitions: {' then '.join(f'{p:,}' for p in args.many_partitions)} partitions "
        "(in topics of at most 1,000: both controllers refuse more than 10,000 metadata records "
        "in one operation) created at the end of each broker run (so on top of "
        "the earlier scenarios' ~90 partitions and __consumer_offsets' 50); idle CPU over "
        f"{args.idle_seconds * 2} s after each",
        "- rdkafka_performance: librdkafka 2.0.2 defaults except acks (linger 5 ms)",
    ]


def replicated_settings(args):
    """The Settings lines of the replicated run (`scripts/bench replicated`)."""
    return [
        f"- both: {CLUSTER_NODES} combined broker+controller nodes (process.roles="
        f"broker,controller, static controller.quorum.voters) on 127.0.0.1-{CLUSTER_NODES}, "
        "each its own process and log dir, formatted with one cluster id (`weir format`, "
        "Kafka's StorageTool format); every broker key at its default (so "
        "offsets.topic.replication.factor=3); Weir's Prometheus endpoint off "
        "(metrics.listener empty)",
        f"- topics: {REPLICATED_PARTITIONS} partitions, replication factor {REPLICAS}, topic "
        f"config min.insync.replicas={MIN_INSYNC_REPLICAS}; the `defaults` topics as they are "
        "(Weir: an acks=all write is answered once the leader and every in-sync follower have "
        "fsynced it; Kafka: once the in-sync replicas have it in memory, no fsync); the `no "
        "fsync` topics add write.caching=true on Weir (Kafka's behaviour) and nothing on Kafka",
        f"- throughput: {args.records} records of {RECORD_SIZE} B per topic, ProducerPerformance "
        "with client defaults except acks=all (so idempotent, batch.size=16384, linger.ms=5), "
        f"bootstrap listing the {CLUSTER_NODES} nodes",
        f"- summed broker CPU per GB: utime+stime of the {CLUSTER_NODES} broker processes "
        "(/proc/<pid>/stat) over the produce run, per GB of records produced (each GB is "
        f"written {REPLICAS} times, once per replica); rows marked context: the load "
        "generator's CPU per GB (getrusage of the finished child) and the machine's busy CPUs. "
        "Brokers and load generator share the machine: when it is saturated, throughput is "
        "bounded by (client + brokers) CPU seconds per GB",
        f"- summed RSS: VmRSS of the {CLUSTER_NODES} processes after start (idle "
        f"{args.idle_seconds} s) and after the produce runs, VmHWM at the end",
        f"- latency: weir-latency-probe at {LATENCY_RATE} rec/s for {args.latency_seconds} s "
        f"(+1 s warm-up left out), acks=all, on a fresh topic of each kind after the produce "
        "runs: one Produce of 20 records every millisecond round-robin over the partitions, each "
        f"to its leader, at most {REPLICATED_PROBE_IN_FLIGHT} in flight per leader connection "
        "(a Kafka producer's max.in.flight.requests.per.connection), one Fetch long-poll "
        "connection per leader; timed from each request's scheduled send time",
    ]


def tls_settings(args):
    """The Settings lines of the TLS run (`scripts/bench tls`)."""
    sessions = "; ".join(f"{name}: {', '.join(sorted(args.tls_sessions.get(kind, ())))}"
                         for kind, name in (("weir", "Weir"), ("kafka", "Kafka")))
    return [
        "- both: 1 node, RF 1, " + ", ".join(f"{k}={v}" for k, v in COMMON_PROPS.items()
                                              if k != "node.id")
        + "; the one client listener is `SSL://127.0.0.1:<port>` "
          "(listener.security.protocol.map maps SSL to SSL; Kafka's CONTROLLER listener is "
          "PLAINTEXT and its inter.broker.listener.name is SSL), ssl.keystore.type=PEM "
          "(ssl.keystore.location: the server's key, then its certificate and the CA's), "
          "ssl.truststore.type=PEM, ssl.client.auth at its default (none: server-authenticated "
          "TLS), ssl.enabled.protocols and cipher suites at their defaults; everything else at "
          "its default (Weir: acks=all answered after fdatasync; Kafka: no fsync before the "
          "answer); Weir's Prometheus endpoint off (metrics.listener empty)",
        f"- certificates made at the start of the run with `{sh('openssl version')}`: a CA and "
        f"a server certificate for {SERVER_SAN}, ECDSA P-256 keys in unencrypted PKCS#8 PEM; "
        "the load generators' client properties: security.protocol=SSL, "
        "ssl.truststore.type=PEM, ssl.truststore.location=<the CA's certificate> "
        "(ssl.endpoint.identification.algorithm at its default, https)",
        f"- TLS session a Python ssl (OpenSSL) client agreed on with each: {sessions}",
        f"- {args.records} records of {RECORD_SIZE} B per produce and consume run, "
        f"{TLS_PARTITIONS} partitions per topic; producer: ProducerPerformance with client "
        "defaults except acks (batch.size=16384, linger.ms=5); consumer: ConsumerPerformance "
        "defaults, reading the acks=1 topic just written",
        "- CPU split (rows marked context): the broker's CPU (/proc/<pid>/stat), the load "
        "generator's (getrusage of the finished child) and the machine's busy CPUs over the same "
        "run. The load generator runs on the same machine and encrypts and decrypts too, so "
        "when the machine is saturated, throughput is bounded by (client + broker) CPU seconds "
        "per GB.",
        "- no kernel TLS (kTLS) on either: Weir sends Fetch record data with sendfile over "
        "plain TCP, but over TLS reads it into memory and encrypts it with rustls in user space; "
        "Kafka's SslTransportLayer likewise copies it from the segment file and encrypts it in "
        "the JVM (no sendfile under TLS). The same scenarios over PLAINTEXT are in "
        "`scripts/bench kafka` (bench/results/latest.md, another run: compare its ratios, not "
        "its figures).",
    ]


# --- every figure of issue 18 in one run (`scripts/bench all`) ----------------------

MANY_PARTITIONS = 100_000


def run_many_partitions(args, tmp):
    """scripts/many_partitions.py on a fresh 3-node Weir cluster plus a broker-only node
    (Weir only: Kafka was not run at this scale): returns its --json figures."""
    out = tmp / "many-partitions.json"
    parts = 1000 if args.quick else MANY_PARTITIONS
    cmd = [sys.executable, str(REPO / "scripts" / "many_partitions.py"), "--partitions",
           str(parts), "--with-broker", "--json", str(out), "--dir", str(tmp / "many-cluster")]
    cmd += ["--idle-seconds", str(args.idle_seconds * 6)]
    child = subprocess.Popen(cmd, env=dict(os.environ, WEIR_BIN=args.weir_bin))
    try:
        code = child.wait(timeout=3600)
    except BaseException:
        # A timeout, Ctrl-C or SIGTERM: the child's own `finally` stops its cluster (whose
        # nodes outlive it) on SIGTERM; give it the cluster's shutdown time.
        child.terminate()
        child.wait(timeout=400)
        raise
    if code != 0:
        raise RuntimeError(f"scripts/many_partitions.py failed ({code})")
    return {**json.loads(out.read_text()), "idle_window_s": args.idle_seconds * 6}


def many_table(m):
    """The 100,000-partition figures (`run_many_partitions`) as a table, per node."""
    def nodes(key, unit, digits=2):
        return ", ".join(f"node {n} {v:.{digits}f}{unit}" for n, v in sorted(m[key].items()))
    return "\n".join([
        "| figure | Weir |",
        "|---|---|",
        f"| creation: CreateTopics of 1,000 partitions (RF=3) one after another, to node 1 | "
        f"{m['create_s']:.1f} s (slowest request {m['slowest_create_s']:.2f} s) |",
        f"| after the last CreateTopics answer, every node's Metadata lists all "
        f"{m['partitions']:,} partitions with a leader | {nodes('listed_s', ' s')} |",
        f"| after the last answer, every node holds the logs of its replicas | "
        f"{nodes('hosted_s', ' s')} |",
        f"| RSS per node after creation (VmRSS) | {nodes('rss_mib', ' MiB', 0)} |",
        f"| idle CPU per node | {nodes('idle_cpu_pct', ' %')} |",
        f"| SIGTERM to exit (controlled shutdown, every log flushed) | {nodes('stop_s', ' s')} |",
        f"| restart: start to first Metadata answer | {nodes('restart_answered_s', ' s')} |",
        f"| restart to serving: start until Metadata lists every partition with a leader | "
        f"{nodes('restart_listed_s', ' s')} |",
    ])


def targets_table(single, replicated, many):
    """Issue 18's targets, each with its figure from this run's medians and whether it is met."""
    def med(results, key):
        w = [r[key] for r in results["weir"] if key in r]
        k = [r[key] for r in results["kafka"] if key in r]
        return (statistics.median(w) if w else None, statistics.median(k) if k else None)

    rows = ["| target | figure | Weir | Kafka | Weir/Kafka | met |", "|---|---|---|---|---|---|"]

    def ratio_row(target, results, key, what, unit, ok):
        w, k = med(results, key)
        if w is None or k is None:
            rows.append(f"| {target} | {what}: not measured in this run | - | - | - | no |")
            return
        ratio = w / k if k else float("inf")
        rows.append(f"| {target} | {what} | {fmt(w)} {unit} | {fmt(k)} {unit} | {ratio:.2f} | "
                    f"{'yes' if ok(w, ratio) else 'no'} |")

    probe_all = (f"probe acks=all, 16 partitions, {LATENCY_RATE} rec/s, "
                 f"{PROBE_IN_FLIGHT} in flight")
    ratio_row("durable acks=all, single node: p99 at most 2x Kafka's", single,
              "probe_acksall_ack_p99", f"send-to-ack p99, {probe_all}", "ms",
              lambda w, r: r <= 2)
    ratio_row("durable acks=all, single node: p99.9 at most 50 ms", single,
              "probe_acksall_ack_p999", f"send-to-ack p99.9, {probe_all}", "ms",
              lambda w, r: w <= 50)
    ratio_row("produce acks=all durable, 16 partitions: at least Kafka's", single,
              "produce_acksall_p16_default_mb_s", "ProducerPerformance throughput", "MiB/s",
              lambda w, r: r >= 1)
    ratio_row("replicated: throughput at least 1.5x", replicated, "produce_default_mb_s",
              "ProducerPerformance acks=all, RF=3, defaults", "MiB/s", lambda w, r: r >= 1.5)
    ratio_row("replicated: summed broker CPU per GB at most 0.3x", replicated,
              "produce_default_broker_cpu_s_per_gb", "defaults", "s/GB", lambda w, r: r <= 0.3)
    ratio_row("replicated: summed broker CPU per GB at most 0.3x", replicated,
              "produce_cache_broker_cpu_s_per_gb", "Weir write.caching=true (no fsync on both)",
              "s/GB", lambda w, r: r <= 0.3)
    w_rate, _ = med(replicated, "probe_default_rate")
    ratio_row("replicated: end-to-end p99 at the fixed rate at most 0.5x", replicated,
              "probe_default_e2e_p99",
              f"probe, defaults, {LATENCY_RATE} rec/s (Weir reached "
              f"{fmt(w_rate) if w_rate is not None else '?'} rec/s)", "ms",
              lambda w, r: r <= 0.5)
    ratio_row("replicated: summed RSS at most 0.1x", replicated, "rss_peak_mb",
              "summed peak RSS (VmHWM)", "MiB", lambda w, r: r <= 0.1)
    ratio_row("broker CPU per GB consumed at most 0.2x", single, "cpu_s_per_gb_consumed",
              "ConsumerPerformance, 16 partitions", "s/GB", lambda w, r: r <= 0.2)
    ratio_row("creating 1,000 partitions no slower than Kafka", single, "create_1000_s",
              "1,000 partitions (RF=1) until served", "s", lambda w, r: r <= 1)
    if not many:
        rows.append(f"| {MANY_PARTITIONS:,} partitions | not measured in this run | - | - | - | "
                    "no |")
    else:
        def worst(key):
            return max(many[key].values())
        count = f"{many['partitions']:,} partitions, 3 voters + 1 broker-only, RF=3"
        for target, key, what, limit in (
                ("every node serves Metadata for all of them within 10 s of creation",
                 "listed_s", "slowest node, s after the last CreateTopics answer", 10),
                ("idle CPU under 2% of a core per node", "idle_cpu_pct",
                 "busiest node, % of a core", 2),
                ("restart to serving under 10 s", "restart_listed_s",
                 "slowest restarted node, s", 10)):
            rows.append(f"| {count}: {target} | {what} | {worst(key):.2f} | - | - | "
                        f"{'yes' if worst(key) < limit else 'no'} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicated", action="store_true",
                    help=f"the replicated scenario: {CLUSTER_NODES}-node clusters, RF={REPLICAS} "
                         f"(scripts/bench replicated; default --out bench/results/replicated.md)")
    ap.add_argument("--all", action="store_true",
                    help="every scenario issue 18 sets a target for, in one run: the single-node "
                         "scenarios, then the replicated ones, then "
                         f"{MANY_PARTITIONS:,} partitions on a 3-node Weir cluster "
                         "(scripts/many_partitions.py; --quick: 1,000); a table of the targets "
                         "first (scripts/bench all; default --out bench/results/latest.md)")
    ap.add_argument("--tls", action="store_true",
                    help="the TLS scenario: clients over an SSL listener on both brokers "
                         "(scripts/bench tls; default --out bench/results/tls.md)")
    ap.add_argument("--quick", action="store_true",
                    help="1 round, 10k records per scenario (CI smoke run; figures not comparable)")
    ap.add_argument("--rounds", type=int, help="rounds of Weir, Kafka (default 3; --quick 1)")
    ap.add_argument("--records", type=int,
                    help="1 KiB records per produce/consume scenario (default 1000000; --quick 10000)")
    ap.add_argument("--latency-seconds", type=int,
                    help="length in seconds of each fixed-rate latency run (default 30; --quick 1; "
                         "not in --tls)")
    ap.add_argument("--many-partitions", type=int, nargs="*",
                    help="partition counts of the many-partitions scenario (default 1000 "
                         "10000; --quick 100; none to skip; not in --replicated or --tls)")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' temp dirs")
    ap.add_argument("--out", help="the results file (default bench/results/latest.md, "
                                  "or replicated.md with --replicated, tls.md with --tls)")
    args = ap.parse_args()
    if args.replicated + args.tls + args.all > 1:
        ap.error("--replicated, --tls and --all are different runs: pick one")
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.records = args.records or (10_000 if args.quick else 1_000_000)
    args.latency_seconds = args.latency_seconds or (1 if args.quick else 30)
    args.idle_seconds = 1 if args.quick else 5
    args.weir_bin = os.environ["WEIR_BIN"]
    if args.many_partitions is None:
        args.many_partitions = [100] if args.quick else [1000, 10000]
    args.rdkafka_perf = os.environ.get("RDKAFKA_PERFORMANCE") or None
    # The TLS scenario runs no latency probe (scripts/bench tls does not build it).
    args.latency_probe = os.environ.get("LATENCY_PROBE") if args.tls \
        else os.environ["LATENCY_PROBE"]
    args.classpath = Path(os.environ["KAFKA_CLASSPATH_FILE"]).read_text().strip()
    weir_build = os.environ.get("WEIR_BUILD", "release")
    # The runs: (section heading or None, one broker/cluster run, its figures, its settings).
    single = ("Single node", run_broker, FIGURES, single_settings)
    replicated = (f"Replicated, {CLUSTER_NODES} local nodes each", run_cluster,
                  REPLICATED_FIGURES, replicated_settings)
    if args.all:
        runs, command = [single, replicated], "scripts/bench all"
        title = "Weir vs Apache Kafka: every figure of issue 18 in one run"
        out = Path(args.out or REPO / "bench/results/latest.md")
    elif args.replicated:
        runs, command = [(None, *replicated[1:])], "scripts/bench replicated"
        title = f"Weir vs Apache Kafka: replicated, {CLUSTER_NODES} local nodes each"
        out = Path(args.out or REPO / "bench/results/replicated.md")
    elif args.tls:
        runs, command = [(None, run_tls, TLS_FIGURES, tls_settings)], "scripts/bench tls"
        title = "Weir vs Apache Kafka: produce and consume over TLS"
        out = Path(args.out or REPO / "bench/results/tls.md")
    else:
        runs, command = [(None, *single[1:])], "scripts/bench kafka"
        title = "Weir vs Apache Kafka: side-by-side benchmark"
        out = Path(args.out or REPO / "bench/results/latest.md")
    # SIGTERM unwinds as Ctrl-C does, so the `finally`s stop every broker process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="weir-bench-", dir=os.environ.get("TMPDIR", "/tmp")))
    info = machine(tmp)
    results = [{"weir": [], "kafka": []} for _ in runs]
    many = None
    try:
        if args.tls:
            args.pki, args.tls_sessions = Pki(tmp / "pki"), {}
        for (name, run, _, _), res in zip(runs, results):
            for rnd in range(1, args.rounds + 1):
                for kind in ("weir", "kafka"):
                    log(f"{name + ': ' if name else ''}round {rnd}/{args.rounds}: {kind}")
                    res[kind].append(run(kind, args, tmp, rnd))
        if args.all:
            log(f"{MANY_PARTITIONS:,} partitions on a 3-node Weir cluster")
            try:
                many = run_many_partitions(args, tmp)
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                # Keep the rounds above: the file says the many-partitions step failed.
                log(f"the many-partitions step failed: {e}")
    finally:
        if args.keep:
            log(f"kept the brokers' dirs in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started

    # The binary's commit: WEIR_COMMIT when set (a WEIR_BIN built elsewhere), else the checkout's
    # HEAD, marked when WEIR_BIN may not be built from it.
    commit = os.environ.get("WEIR_COMMIT") or sh(f"git -C {REPO} rev-parse --short HEAD") + (
        " (dirty)" if sh(f"git -C {REPO} status --porcelain --untracked-files=no") else "") + (
        " (checkout's HEAD; the binary came from WEIR_BIN, set WEIR_COMMIT to name its commit)"
        if os.environ.get("WEIR_BUILD") == "given by WEIR_BIN" else "")
    mode = "QUICK (CI smoke run: tiny loads, 1 round; the figures are not comparable)" \
        if args.quick else "full"
    tables = [table(res, figures) for (_, _, figures, _), res in zip(runs, results)]
    sections = []
    if args.all:
        sections += ["## Targets (issue 18)", "",
                     targets_table(results[0], results[1], many), ""]
    for (name, _, _, _), tbl in zip(runs, tables):
        sections += [f"## {name}", ""] if name else []
        sections += [tbl, ""]
    if many is not None:
        sections += [
            f"## {many['partitions']:,} partitions on a local 3-node cluster (Weir only)", "",
            f"`scripts/many_partitions.py --partitions {many['partitions']} --with-broker`: nodes "
            "1-3 broker+controller voters, node 4 broker-only (an observer); topics of 1,000 "
            f"partitions, RF=3; idle CPU over {many['idle_window_s']} s (/proc/<pid>/stat) from "
            "a few seconds after "
            "every node holds its logs; node 3 and node 4 restarted (SIGTERM, then started "
            "again). One run (not alternated: Kafka was not run at this scale).", "",
            many_table(many), ""]
    doc = "\n".join([
        f"# {title}",
        "",
        f"Mode: **{mode}**. Generated by `{command}{' --quick' if args.quick else ''}` "
        f"on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} in {elapsed:.0f} s.",
        "",
        f"Medians of {args.rounds} round(s); each round starts Weir, then Kafka, fresh, and runs "
        "every scenario against it. Ratio = Weir median / Kafka median.",
        "",
        *sections,
        "## Settings",
        "",
        f"- Weir {commit} ({weir_build} build, `{args.weir_bin}`); Apache Kafka {KAFKA_VERSION} "
        f"(Maven Central jars, KRaft broker+controller in one JVM per node, "
        f"{' '.join(KAFKA_JVM_OPTS[:2])}, G1)",
        *(line for name, _, _, settings in runs
          for line in ([f"- {name}:"] + ["  " + s for s in settings(args)] if name
                       else settings(args))),
        "",
        "## Machine",
        "",
        *info,
        "",
        "## Raw figures per round",
        "",
        "```",
        *(f"{name + ': ' if name else ''}{kind} round {i + 1}: "
          + ", ".join(f"{k}={fmt(v)}" for k, v in r.items())
          for (name, _, _, _), res in zip(runs, results)
          for kind in ("weir", "kafka") for i, r in enumerate(res[kind])),
        *([f"{many['partitions']:,} partitions: {json.dumps(many)}"] if many else []),
        "```",
        "",
    ])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(doc)
    print()
    print("\n\n".join(tables))
    print(f"\n{mode}; {elapsed:.0f} s; written to {out}")


if __name__ == "__main__":
    sys.exit(main())
