"""kafka-python's own integration tests (test/integration/ of its PyPI source
distribution, unpacked with our two shims by kafka_python_suite.sh), run
against Weir through KAFKA_URI: one check per test id on
kafka-python-tests.txt, or every collected test with --try-all (to grow the
list). They run over the compat broker's PLAINTEXT listener; the suite's
SASL tests are not run (kafka-python over SASL_PLAINTEXT and SASL_SSL
against Weir is tested in integration-tests/tests/sasl.rs)."""

import subprocess
from pathlib import Path

from .common import Check, Context

PASS_LIST = Path(__file__).resolve().parent.parent / "kafka-python-tests.txt"


def checks(ctx: Context) -> list:
    src = Path(ctx.installed["KAFKA_PYTHON_SUITE_SRC"])
    python = ctx.installed["KAFKA_PYTHON_SUITE_PYTHON"]
    version = ctx.installed["KAFKA_PYTHON_SUITE_VERSION"]
    env = {
        # The Kafka version the tests assume the broker speaks (they skip
        # or adapt by it); Weir implements Kafka 4.0's protocol.
        "KAFKA_VERSION": "4.0.0",
        "KAFKA_URI": f"kafka://{ctx.bootstrap}",
        # Must name an existing directory; unused with an external broker.
        "KAFKA_ROOT": ctx.installed["KAFKA_PYTHON_SUITE_ROOT"],
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if ctx.try_all:
        collected = subprocess.run(
            [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "test/integration", "-k", "not sasl"],
            cwd=src, env=env, capture_output=True, text=True, check=False)
        ids = [line for line in collected.stdout.splitlines() if "::" in line]
    else:
        ids = [line.strip() for line in PASS_LIST.read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    return [Check(
        client="kafka-python-testsuite", version=version,
        name=test_id.removeprefix("test/integration/"),
        # --tb=line: pytest's full traceback formatting hits a Python 3.11.7
        # AST bug on some of these assertions. -p no:cacheprovider: keep
        # the unpacked sdist unchanged.
        argv=[python, "-m", "pytest", "-q", "--tb=line", "-p", "no:cacheprovider",
              "--timeout=90", test_id],
        env=env, cwd=src, timeout=120,
    ) for test_id in ids]
