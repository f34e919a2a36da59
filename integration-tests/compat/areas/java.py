"""The Java client and Kafka's CLI tools (built and resolved by java.sh).

- kafka-clients, each pinned version: java/client's ClientCheck, one row per
  mode (produce-consume, admin; see its javadoc).
- Kafka's CLI tools 4.1 (kafka_2.13 and kafka-tools from Maven Central), run
  by their main classes as bin/kafka-*.sh would: java/kafka_cli.py, one row
  per tool (see its docstring); those in KNOWN_FAILING only with --try-all.
"""

import sys
import uuid
from pathlib import Path

from .common import Check, Context

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
CLIENT_MODES = ["produce-consume", "admin"]
CLI_CHECKS = ["kafka-topics", "kafka-console-producer-consumer", "kafka-consumer-groups",
              "kafka-configs-describe", "kafka-configs-alter", "kafka-broker-api-versions"]
# Checks that fail on Weir for a known reason: run only with --try-all.
# Checks that fail against Weir for a known reason, each with it; they run
# only with --try-all.
KNOWN_FAILING: set = set()


def checks(ctx: Context) -> list:
    out = []
    client_dir = Path(ctx.installed["JAVA_CLIENT_DIR"])
    for version in ctx.installed["JAVA_CLIENT_VERSIONS"].split():
        target = client_dir / "target" / f"kafka-clients-{version}"
        classpath = f"{target / 'classes'}:{(target / 'classpath.txt').read_text().strip()}"
        for mode in CLIENT_MODES:
            out.append(Check(
                client="java-kafka-clients", version=version, name=mode,
                argv=["java", "-cp", classpath, "dev.weir.compat.ClientCheck", mode,
                      ctx.bootstrap, uuid.uuid4().hex[:8]],
                timeout=180.0,
            ))
    classpath_file = ctx.installed["JAVA_CLI_CLASSPATH"]
    for name in CLI_CHECKS:
        if name in KNOWN_FAILING and not ctx.try_all:
            continue
        out.append(Check(
            client="kafka-cli", version=ctx.installed["JAVA_CLI_VERSION"], name=name,
            argv=[sys.executable, str(JAVA_DIR / "kafka_cli.py"), name, ctx.bootstrap,
                  classpath_file, uuid.uuid4().hex[:8]],
            timeout=180.0,
        ))
    return out
