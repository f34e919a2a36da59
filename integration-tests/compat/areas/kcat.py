"""kcat from Debian (kcat.sh): produces with every codec (none, gzip,
snappy, lz4, zstd), lists the topic, consumes in a group (-G) that commits
on exit, and reads the committed offsets back through kafka-python's admin
client and by resuming the group (kcat/roundtrip.py, run with the python
area's venv)."""

from pathlib import Path

from .common import Check, Context

ROUNDTRIP = Path(__file__).resolve().parent.parent / "kcat" / "roundtrip.py"


def checks(ctx: Context) -> list:
    python = str(Path(ctx.installed["PYTHON_VENV"]) / "bin" / "python")
    librdkafka = ctx.installed["KCAT_LIBRDKAFKA_VERSION"].split("-")[0]
    return [Check(
        client="kcat", version=ctx.installed["KCAT_VERSION"],
        name=f"codecs-group-commit-librdkafka-{librdkafka}", timeout=240,
        argv=[python, str(ROUNDTRIP), ctx.installed["KCAT_BIN"], ctx.bootstrap],
    )]
