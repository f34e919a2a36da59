"""franz-go (go.sh builds go/main.go with franz-go and kadm pinned in
go.mod): a smoke check that creates a topic, produces lz4 batches, lists
end offsets, consumes in a group (the batches come back lz4), commits, and
reads the committed offsets back and describes the group with kadm."""

from .common import Check, Context


def checks(ctx: Context) -> list:
    return [Check(
        client="franz-go", version=ctx.installed["FRANZGO_VERSION"],
        name="produce-group-consume-commit", timeout=240,
        argv=[ctx.installed["FRANZGO_BIN"], ctx.bootstrap],
    )]
