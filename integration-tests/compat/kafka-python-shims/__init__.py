# Written for Weir's compatibility matrix, not part of kafka-python: the
# 2.3.0 sdist ships test/ without this file, so `test.testutil` and
# `test.integration.fixtures` (imported by its conftest) do not resolve.
