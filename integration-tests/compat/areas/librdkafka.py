"""librdkafka's own test suite (tests/test-runner from Debian's librdkafka
source package, built with SSL by librdkafka.sh): one check per test on
librdkafka-tests.txt, run over the broker's PLAINTEXT listener, and one per
test and listener on librdkafka-secure-tests.txt, run over its SASL_SSL
listener (SCRAM-SHA-512) or its SSL listener (client certificate
required), named `<test> [SASL_SSL]` / `<test> [SSL]`. --try-all runs every
test over each of the three listeners (to grow the lists). Tests marked
`slow` on a list (10 s or more each) run only with WEIR_COMPAT_SLOW=1, to
keep the matrix within its time budget. A test that skips itself fails its
check (librdkafka/run_test.py): it checked nothing."""

import os
import re
import sys
from pathlib import Path

from .common import Check, Context

COMPAT = Path(__file__).resolve().parent.parent
PASS_LIST = COMPAT / "librdkafka-tests.txt"
SECURE_PASS_LIST = COMPAT / "librdkafka-secure-tests.txt"
RUN_TEST = COMPAT / "librdkafka" / "run_test.py"
SECURE = ("SASL_SSL", "SSL")


def test_conf(ctx: Context, protocol: str) -> Path:
    """Writes the test.conf (RDKAFKA_TEST_CONF) of the tests run over the
    listener of `protocol`: its address and the client's security settings,
    as trivup's LibrdkafkaTestApp writes them for a cluster with SSL and
    SASL."""
    lines = [f"metadata.broker.list={ctx.listeners[protocol]}", "test.timeout.multiplier=2"]
    if protocol != "PLAINTEXT":
        lines += [f"security.protocol={protocol}", f"ssl.ca.location={ctx.pki.ca}"]
    if protocol == "SASL_SSL":
        user, password = ctx.scram_user
        lines += ["sasl.mechanisms=SCRAM-SHA-512", f"sasl.username={user}",
                  f"sasl.password={password}"]
    if protocol == "SSL":
        lines += [f"ssl.certificate.location={ctx.pki.client_cert}",
                  f"ssl.key.location={ctx.pki.client_key}",
                  f"ssl.key.password={ctx.pki.password}"]
    conf = ctx.work / f"librdkafka-test-{protocol}.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def listed(path: Path, slow: bool) -> list:
    """(number, tags) of the tests on the list at `path`: a line is a test
    number, its name, then tags (`slow`, listener names); lines marked
    `slow` only when `slow`."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            number, _name, *tags = line.split()
            if slow or "slow" not in tags:
                out.append((number, tags))
    return out


def checks(ctx: Context) -> list:
    tests_dir = Path(ctx.installed["LIBRDKAFKA_TESTS"])
    version = ctx.installed["LIBRDKAFKA_VERSION"]
    if ctx.try_all:
        numbers = sorted({m.group(1) for p in tests_dir.glob("0[0-9][0-9][0-9]-*.c*")
                          if (m := re.match(r"(\d{4})-", p.name))})
        runs = [(n, p) for p in ("PLAINTEXT",) + SECURE for n in numbers]
    else:
        slow = os.environ.get("WEIR_COMPAT_SLOW") == "1"
        runs = [(n, "PLAINTEXT") for n, _ in listed(PASS_LIST, slow)]
        runs += [(n, p) for n, tags in listed(SECURE_PASS_LIST, slow)
                 for p in SECURE if p in tags]
    confs = {p: test_conf(ctx, p) for p in {p for _, p in runs}}
    lib = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    out = []
    for number, protocol in runs:
        names = sorted(tests_dir.glob(f"{number}-*.c*"))
        name = names[0].stem if names else number
        env = {"TESTS": number, "TEST_KAFKA_VERSION": "3.9.0",
               "RDKAFKA_TEST_CONF": str(confs[protocol]), "LD_LIBRARY_PATH": lib}
        if protocol != "PLAINTEXT":
            # The client's files in every encoding, for 0097 ssl_verify.
            env.update(ctx.pki.trivup_env())
            name += f" [{protocol}]"
        out.append(Check(
            client="librdkafka-testsuite", version=version, name=name,
            argv=[sys.executable, str(RUN_TEST), "./test-runner"], cwd=tests_dir, env=env,
        ))
    return out
