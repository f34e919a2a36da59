#!/usr/bin/env python3
"""Weir's client compatibility matrix (issue 5): starts one Weir broker on
free ports with a temporary data directory, runs every check of every area
(areas/<area>.py) against it, prints one row per check (client, version,
check, result, seconds), writes the same rows to <out>/compat.csv, ends with
"N passed, N failed" and exits non-zero if any check failed.

Usage: run.py --weir PATH --out DIR [--only SUBSTRING] [--try-all]

<out>/env holds what scripts/compat installed (KEY=VALUE lines). Each
check's output goes to <out>/logs/<client>-<check>.log; the tail of a
failing one is printed.

Besides its PLAINTEXT listener (Context.bootstrap, which most checks use)
the broker has an SSL listener that requires client certificates (mTLS)
and a SASL_SSL listener with SCRAM-SHA-512, whose user is seeded with
`weir format --add-scram`; their certificates are a throwaway PKI made in
the scratch directory (pki.py). Context.listeners gives their addresses,
Context.pki the files, Context.scram_user the credentials.
"""

import argparse
import csv
import importlib
import os
import pkgutil
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from areas.common import Check, Context  # noqa: E402
from pki import CLIENT_SUBJECT, Pki  # noqa: E402

# Broker settings every check runs with:
# - num.partitions=4: what librdkafka's test clusters (trivup) and
#   kafka-python's fixtures configure; their tests of auto-created topics
#   assume it.
# - node.id=0: kafka-python's admin tests address broker 0, the id of its
#   fixture's broker.
BROKER_OVERRIDES = [
    "num.partitions=4",
    "node.id=0",
    # Every check runs through the authorizer (as a super user: the
    # clients connect as User:ANONYMOUS on PLAINTEXT, as the SCRAM user on
    # SASL_SSL and as their certificate's subject on SSL), and the ACL APIs
    # are served.
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
]
# The SCRAM-SHA-512 user of the SASL_SSL listener: (name, password).
SCRAM_USER = ("weir-compat", "weir-compat-secret")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One Weir process with a PLAINTEXT, an SSL (client certificates
    required) and a SASL_SSL (SCRAM-SHA-512) listener, each on
    127.0.0.1:<free port>; the TLS listeners present pki's broker
    certificate and verify clients against its CA."""

    def __init__(self, weir: Path, work: Path, pki: Pki):
        self.listeners = {protocol: f"127.0.0.1:{free_port()}"
                          for protocol in ("PLAINTEXT", "SSL", "SASL_SSL")}
        self.port = int(self.listeners["PLAINTEXT"].rsplit(":", 1)[1])
        self.data = work / "data"
        self.log_path = work / "weir.log"
        overrides = BROKER_OVERRIDES + [
            "listeners=" + ",".join(f"{p}://{a}" for p, a in self.listeners.items()),
            f"log.dirs={self.data}",
            "metrics.listener=",
            f"super.users=User:ANONYMOUS;User:{SCRAM_USER[0]};User:{CLIENT_SUBJECT}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={pki.broker_keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={pki.ca}",
            "listener.name.ssl.ssl.client.auth=required",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ]
        args = [str(weir)]
        for o in overrides:
            args += ["--override", o]
        self.log = open(self.log_path, "wb")
        cluster_id = subprocess.run([str(weir), "random-uuid"], capture_output=True, text=True,
                                    check=True).stdout.strip()
        formatted = subprocess.run(
            args + ["format", "--cluster-id", cluster_id, "--add-scram",
                    f"SCRAM-SHA-512=[name={SCRAM_USER[0]},password={SCRAM_USER[1]}]"],
            stdout=self.log, stderr=subprocess.STDOUT, check=False)
        if formatted.returncode != 0:
            raise SystemExit(f"weir format exited with {formatted.returncode}; "
                             f"see {self.log_path}")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"weir exited with {self.process.returncode}; see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"weir did not listen within 30 s; see {self.log_path}")
                time.sleep(0.05)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def read_env(path: Path) -> dict:
    installed = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key:
                installed[key] = value
    return installed


def run_check(check: Check, logs: Path) -> tuple[bool, float]:
    log_path = logs / f"{check.client}-{check.name}.log".replace("/", "_")
    env = dict(os.environ, **check.env)
    started = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            # Its own process group, so that a timeout also ends what the
            # check started (librdkafka's test-runner under run_test.py).
            process = subprocess.Popen(check.argv, cwd=check.cwd, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            try:
                returncode = process.wait(timeout=check.timeout)
                ok, note = returncode == 0, f"exit {returncode}"
            except subprocess.TimeoutExpired:
                ok, note = False, f"timed out after {check.timeout:.0f} s"
            finally:
                if process.returncode is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        except OSError as e:
            ok, note = False, f"cannot run {check.argv[0]}: {e}"
    seconds = time.monotonic() - started
    if not ok:
        tail = log_path.read_bytes()[-3000:].decode(errors="replace")
        print(f"--- {check.client} {check.name}: {note}; last output ({log_path}):\n{tail}\n---",
              flush=True)
    return ok, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="run the checks whose client or name contains this")
    parser.add_argument("--try-all", action="store_true",
                        help="also run checks not on a pass list (to grow the lists)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="weir-compat-"))
    logs = args.out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    pki = Pki(work / "pki")
    broker = Broker(args.weir, work, pki)
    ctx = Context(bootstrap=broker.bootstrap, work=work, repo=HERE.parent.parent,
                  installed=read_env(args.out / "env"), try_all=args.try_all,
                  listeners=broker.listeners, pki=pki, scram_user=SCRAM_USER)
    rows = []
    try:
        checks = []
        for area in sorted(m.name for m in pkgutil.iter_modules([str(HERE / "areas")])):
            if area != "common":
                checks += importlib.import_module(f"areas.{area}").checks(ctx)
        checks = [c for c in checks if args.only in f"{c.client} {c.name}"]
        print(f"{'client':<22} {'version':<9} {'check':<44} {'result':<6} {'seconds':>7}", flush=True)
        for check in checks:
            ok, seconds = run_check(check, logs)
            row = (check.client, check.version, check.name, "pass" if ok else "FAIL", f"{seconds:.1f}")
            rows.append(row)
            print(f"{row[0]:<22} {row[1]:<9} {row[2]:<44} {row[3]:<6} {row[4]:>7}", flush=True)
    finally:
        broker.stop()
        shutil.copy(broker.log_path, logs / "weir.log")
        shutil.rmtree(work, ignore_errors=True)
    with open(args.out / "compat.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["client", "version", "check", "result", "seconds"])
        writer.writerows(rows)
    failed = sum(1 for r in rows if r[3] != "pass")
    print(f"{len(rows) - failed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
