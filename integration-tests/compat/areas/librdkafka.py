"""librdkafka's own test suite (tests/test-runner from Debian's librdkafka
source package, built with SSL by librdkafka.sh): one check per test on
librdkafka-tests.txt, or every test with --try-all (to grow the list).
Tests marked `slow` on the list (10 s or more each) run only with
WEIR_COMPAT_SLOW=1, to keep the matrix within its time budget. A test that
skips itself fails its check (librdkafka/run_test.py): it checked nothing."""

import os
import re
import sys
from pathlib import Path

from .common import Check, Context

COMPAT = Path(__file__).resolve().parent.parent
PASS_LIST = COMPAT / "librdkafka-tests.txt"
RUN_TEST = COMPAT / "librdkafka" / "run_test.py"


def checks(ctx: Context) -> list:
    tests_dir = Path(ctx.installed["LIBRDKAFKA_TESTS"])
    version = ctx.installed["LIBRDKAFKA_VERSION"]
    conf = ctx.work / "librdkafka-test.conf"
    conf.write_text(f"metadata.broker.list={ctx.bootstrap}\ntest.timeout.multiplier=2\n")
    if ctx.try_all:
        numbers = sorted({m.group(1) for p in tests_dir.glob("0[0-9][0-9][0-9]-*.c*")
                          if (m := re.match(r"(\d{4})-", p.name))})
    else:
        slow = os.environ.get("WEIR_COMPAT_SLOW") == "1"
        numbers = [line.split()[0] for line in PASS_LIST.read_text().splitlines()
                   if line.strip() and not line.startswith("#")
                   and (slow or "slow" not in line.split()[2:])]
    lib = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    out = []
    for number in numbers:
        names = sorted(tests_dir.glob(f"{number}-*.c*"))
        name = names[0].stem if names else number
        out.append(Check(
            client="librdkafka-testsuite", version=version, name=name,
            argv=[sys.executable, str(RUN_TEST), "./test-runner"], cwd=tests_dir,
            env={"TESTS": number, "TEST_KAFKA_VERSION": "3.9.0",
                 "RDKAFKA_TEST_CONF": str(conf), "LD_LIBRARY_PATH": lib},
        ))
    return out
