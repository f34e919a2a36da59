#!/usr/bin/env python3
"""Weir's client compatibility matrix (issue 5): starts one Weir broker on a
free port with a temporary data directory, runs every check against it,
prints one row per check (client, version, check, result, seconds), writes
the same rows as CSV, ends with "N passed, N failed" and exits non-zero if
any check failed.

Usage: run.py --weir PATH --csv PATH [--only SUBSTRING]
              [--librdkafka-tests DIR --librdkafka-version V [--try-all-librdkafka]]

Checks are subprocesses; each one's output goes to <csv dir>/logs/<name>.log
and the tail of a failing one is printed. Installation is done by
scripts/compat, which calls this.
"""

import argparse
import csv
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRDKAFKA_PASS_LIST = HERE / "librdkafka-tests.txt"

# Broker settings every check runs with. num.partitions=4 is what
# librdkafka's own test clusters (trivup) configure; its tests that rely on
# auto-created topics assume it.
BROKER_OVERRIDES = [
    "num.partitions=4",
    "group.initial.rebalance.delay.ms=0",
]


@dataclass
class Check:
    client: str
    version: str
    name: str
    argv: list
    env: dict = field(default_factory=dict)
    cwd: Path | None = None
    timeout: float = 300.0


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


def librdkafka_checks(tests_dir: Path, version: str, bootstrap: str, work: Path,
                      try_all: bool) -> list:
    """librdkafka's own test suite (tests/test-runner), one check per test:
    the tests in librdkafka-tests.txt, or every test with try_all (to find
    tests to add to the list)."""
    conf = work / "librdkafka-test.conf"
    conf.write_text(f"metadata.broker.list={bootstrap}\ntest.timeout.multiplier=2\n")
    if try_all:
        numbers = sorted({m.group(1) for p in tests_dir.glob("0[0-9][0-9][0-9]-*.c*")
                          if (m := re.match(r"(\d{4})-", p.name))})
    else:
        numbers = [line.split()[0] for line in LIBRDKAFKA_PASS_LIST.read_text().splitlines()
                   if line.strip() and not line.startswith("#")]
    lib = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    checks = []
    for number in numbers:
        names = sorted(tests_dir.glob(f"{number}-*.c*"))
        name = names[0].stem if names else number
        checks.append(Check(
            client="librdkafka-testsuite", version=version, name=name,
            argv=["./test-runner"], cwd=tests_dir,
            env={"TESTS": number, "TEST_KAFKA_VERSION": "3.9.0", "RDKAFKA_TEST_CONF": str(conf),
                 "LD_LIBRARY_PATH": lib},
        ))
    return checks


def run_check(check: Check, logs: Path) -> tuple[bool, float]:
    log_path = logs / f"{check.client}-{check.name}.log".replace("/", "_")
    env = dict(os.environ, **check.env)
    started = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            completed = subprocess.run(check.argv, cwd=check.cwd, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, timeout=check.timeout)
            ok = completed.returncode == 0
            note = f"exit {completed.returncode}"
        except subprocess.TimeoutExpired:
            ok, note = False, f"timed out after {check.timeout:.0f} s"
    seconds = time.monotonic() - started
    if not ok:
        tail = log_path.read_bytes()[-3000:].decode(errors="replace")
        print(f"--- {check.client} {check.name}: {note}; last output ({log_path}):\n{tail}\n---",
              flush=True)
    return ok, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", type=Path, required=True)
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--librdkafka-tests", type=Path,
                        help="the tests/ directory of a built librdkafka source tree")
    parser.add_argument("--librdkafka-version", default="?")
    parser.add_argument("--try-all-librdkafka", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="weir-compat-"))
    logs = args.csv.parent / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    broker = Broker(args.weir, work)
    rows = []
    try:
        checks = []
        if args.librdkafka_tests:
            checks += librdkafka_checks(args.librdkafka_tests, args.librdkafka_version,
                                        broker.bootstrap, work, args.try_all_librdkafka)
        checks = [c for c in checks if args.only in f"{c.client} {c.name}"]
        print(f"{'client':<22} {'version':<8} {'check':<40} {'result':<6} {'seconds':>7}", flush=True)
        for check in checks:
            ok, seconds = run_check(check, logs)
            row = (check.client, check.version, check.name, "pass" if ok else "FAIL", f"{seconds:.1f}")
            rows.append(row)
            print(f"{row[0]:<22} {row[1]:<8} {row[2]:<40} {row[3]:<6} {row[4]:>7}", flush=True)
    finally:
        broker.stop()
        shutil.copy(broker.log_path, logs / "weir.log")
        shutil.rmtree(work, ignore_errors=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["client", "version", "check", "result", "seconds"])
        writer.writerows(rows)
    failed = sum(1 for r in rows if r[3] != "pass")
    print(f"{len(rows) - failed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
