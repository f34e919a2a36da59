"""What the round-trip scripts share (confluent_idempotent.py and
kafka_python_round_trip.py): their command line, the records they write and
the comparison of what they read back.

Each script is run as `SCRIPT BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]`;
every KEY=VALUE is a client option given to the admin client, the producer
and the consumer alike, split from its key at the first "=" only.
"""

import collections
import sys

DEADLINE_S = 180


def fail(message):
    """Prints `FAIL: message` on stderr and exits 2."""
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse_args(script):
    """(bootstrap, topic, count, partitions, options) from sys.argv, where
    options maps each KEY=VALUE's key to its value (a string)."""
    if len(sys.argv) < 5:
        fail(f"usage: {script} BOOTSTRAP TOPIC COUNT PARTITIONS [KEY=VALUE ...]")
    bootstrap, topic, count, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    options = {}
    for option in sys.argv[5:]:
        key, eq, value = option.partition("=")
        if not eq:
            fail(f"option {option} is not KEY=VALUE")
        options[key] = value
    return bootstrap, topic, count, partitions, options


def record(i):
    """The i-th record's (key, value), as bytes; values vary in length."""
    return f"key-{i}".encode(), f"value-{i}-{'x' * (i % 50)}".encode()


def expected_records(count):
    """The multiset of the first `count` records' (key, value) pairs."""
    return collections.Counter(record(i) for i in range(count))


def check_consumed(expected, got):
    """Fails unless the multiset `got` equals `expected`; prints
    `consumed N` when it does."""
    if got != expected:
        missing = expected - got
        extra = got - expected
        fail(f"multiset differs: {sum(missing.values())} missing, {sum(extra.values())} unexpected")
    print(f"consumed {sum(got.values())}", flush=True)
