# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Unpacks kafka-python's PyPI source distribution (version and sha256 pinned)
# under $OUT, adds the two test modules the sdist leaves out (see
# integration-tests/compat/kafka-python-shims/), and makes a venv with pinned pytest and codec
# libraries to run its integration tests in. Records KAFKA_PYTHON_SUITE_*.

KAFKA_PYTHON_SUITE_VERSION="2.3.0"
KAFKA_PYTHON_SUITE_SHA256="de65b596d26b5c894f227c35c7d29a65cea8f8a1c4f0f2b4e3e2ea60d503acc8"
KAFKA_PYTHON_SUITE_PIP=(
    pytest==8.3.5 pytest-mock==3.14.0 pytest-timeout==2.3.1
    lz4==4.3.3 zstandard==0.23.0 python-snappy==0.7.3 cramjam==2.9.1
)

apt_install_missing python3 python3-venv

KP_DIR="$OUT/kafka-python-suite"
KP_SRC="$KP_DIR/kafka_python-$KAFKA_PYTHON_SUITE_VERSION"
KP_VENV="$KP_DIR/venv"
KP_SHIMS="$REPO/integration-tests/compat/kafka-python-shims"
if [[ ! -x "$KP_VENV/bin/pytest" || ! -f "$KP_SRC/test/integration/conftest.py" ]]; then
    step "kafka-python $KAFKA_PYTHON_SUITE_VERSION test suite (PyPI sdist) and its venv"
    rm -rf "$KP_DIR"
    mkdir -p "$KP_DIR"
    /usr/bin/python3 -m venv "$KP_VENV"
    "$KP_VENV/bin/pip" install -q --disable-pip-version-check "${KAFKA_PYTHON_SUITE_PIP[@]}"
    printf 'kafka-python==%s --hash=sha256:%s\n' \
        "$KAFKA_PYTHON_SUITE_VERSION" "$KAFKA_PYTHON_SUITE_SHA256" >"$KP_DIR/sdist.txt"
    "$KP_VENV/bin/pip" download -q --disable-pip-version-check --no-deps \
        --no-binary :all: --require-hashes -r "$KP_DIR/sdist.txt" -d "$KP_DIR"
    tar -xzf "$KP_DIR/kafka_python-$KAFKA_PYTHON_SUITE_VERSION.tar.gz" -C "$KP_DIR"
fi
# The shims are ours: copied on every run so edits take effect.
cp "$KP_SHIMS/__init__.py" "$KP_SHIMS/service.py" "$KP_SRC/test/"
mkdir -p "$KP_DIR/kafka-root"
record KAFKA_PYTHON_SUITE_VERSION "$KAFKA_PYTHON_SUITE_VERSION"
record KAFKA_PYTHON_SUITE_SRC "$KP_SRC"
record KAFKA_PYTHON_SUITE_PYTHON "$KP_VENV/bin/python"
record KAFKA_PYTHON_SUITE_ROOT "$KP_DIR/kafka-root"
