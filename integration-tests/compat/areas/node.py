"""KafkaJS (node.sh installs it with npm ci from the committed lock file):
creates a topic, produces, consumes in a group, commits, reads the committed
offsets back and describes the group (node/roundtrip.js); any KafkaJS ERROR
log line fails the check."""

from pathlib import Path

from .common import Check, Context

ROUNDTRIP = Path(__file__).resolve().parent.parent / "node" / "roundtrip.js"


def checks(ctx: Context) -> list:
    return [Check(
        client="kafkajs", version=ctx.installed["KAFKAJS_VERSION"],
        name="produce-group-consume-commit", timeout=240,
        argv=["node", str(ROUNDTRIP), ctx.bootstrap],
        # KafkaJS 2 warns once that its default partitioner changed; the
        # check names every record's partition.
        env={"NODE_PATH": ctx.installed["NODE_MODULES"], "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )]
