#!/usr/bin/env python3
"""Weir's client compatibility matrix (issue 5): starts one Weir broker on a
free port with a temporary data directory, runs every check of every area
(areas/<area>.py) against it, prints one row per check (client, version,
check, result, seconds), writes the same rows to <out>/compat.csv, ends with
"N passed, N failed" and exits non-zero if any check failed.

Usage: run.py --weir PATH --out DIR [--only SUBSTRING] [--try-all]

<out>/env holds what scripts/compat installed (KEY=VALUE lines). Each
check's output goes to <out>/logs/<client>-<check>.log; the tail of a
failing one is printed.
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
    # clients connect as User:ANONYMOUS), and the ACL APIs are served.
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One Weir process on 127.0.0.1:<free port>."""

    def __init__(self, weir: Path, work: Path):
        self.port = free_port()
        self.data = work / "data"
        self.log_path = work / "weir.log"
        args = [str(weir), "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data}", "--override", "metrics.listener="]
        for o in BROKER_OVERRIDES:
            args += ["--override", o]
        self.log = open(self.log_path, "wb")
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
    broker = Broker(args.weir, work)
    ctx = Context(bootstrap=broker.bootstrap, work=work, repo=HERE.parent.parent,
                  installed=read_env(args.out / "env"), try_all=args.try_all)
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
