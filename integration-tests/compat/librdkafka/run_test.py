#!/usr/bin/env python3
"""Runs librdkafka's test-runner (the arguments after this script's own)
with the environment it is given, passes its output through, and fails when
a test it was asked for was SKIPPED. test-runner exits 0 for a skipped
test, and a skipped test checks nothing: one that found no SSL, no RapidJSON
or no SASL credentials, a mock-cluster test under a security.protocol the
mock does not serve, a test of another scenario (TEST_SCENARIO) or one
librdkafka marks as a known issue (run only with -k). The skips are read
from test-runner's summary table, which lists every test TESTS names."""

import re
import subprocess
import sys

ANSI = re.compile(rb"\x1b\[[0-9;]*m")
# A summary row: "| 0107_topic_recreate | SKIPPED | 0.000s | <reason>".
SKIPPED = re.compile(rb"^\|\s*(\S+)\s*\|\s*SKIPPED\s*\|[^|]*\|\s*(.*)$")


def main() -> int:
    process = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    skipped = []
    for line in process.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        if m := SKIPPED.match(ANSI.sub(b"", line).rstrip()):
            skipped.append(f"{m.group(1).decode(errors='replace')} "
                           f"({m.group(2).decode(errors='replace') or 'no reason given'})")
    code = process.wait()
    if code == 0 and skipped:
        print(f"run_test.py: a skipped test is not a pass: {'; '.join(skipped)}", flush=True)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
