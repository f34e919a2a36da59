"""Python clients (python.sh installs them, pinned, in their own venv): one
check per client that creates a topic, produces, consumes in a group,
commits and reads the committed offsets back with exact values
(python/roundtrip.py); kafka-python's also describes the topic, the cluster
and the group through its admin client."""

from pathlib import Path

from .common import Check, Context

ROUNDTRIP = Path(__file__).resolve().parent.parent / "python" / "roundtrip.py"


def checks(ctx: Context) -> list:
    python = str(Path(ctx.installed["PYTHON_VENV"]) / "bin" / "python")
    return [
        Check(client=client, version=ctx.installed[f"PYTHON_VERSION_{client}"],
              name="produce-group-consume-commit", timeout=240,
              argv=[python, str(ROUNDTRIP), client, ctx.bootstrap])
        for client in ("kafka-python", "aiokafka", "confluent-kafka")
    ]
