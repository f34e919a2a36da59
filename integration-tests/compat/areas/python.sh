# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Installs the Python clients pinned in integration-tests/compat/python/
# requirements.txt into their own venv, $OUT/python-venv (reinstalled when
# the requirements change); records PYTHON_* in $OUT/env.

apt_install_missing python3 python3-venv

PYTHON_REQUIREMENTS="$REPO/integration-tests/compat/python/requirements.txt"
PYTHON_VENV="$OUT/python-venv"
if ! cmp -s "$PYTHON_REQUIREMENTS" "$PYTHON_VENV/installed-requirements.txt"; then
    step "pip install $(grep -v '^#' "$PYTHON_REQUIREMENTS" | xargs) into $PYTHON_VENV"
    rm -rf "$PYTHON_VENV"
    python3 -m venv "$PYTHON_VENV"
    "$PYTHON_VENV/bin/pip" install -q --disable-pip-version-check -r "$PYTHON_REQUIREMENTS"
    cp "$PYTHON_REQUIREMENTS" "$PYTHON_VENV/installed-requirements.txt"
fi
record PYTHON_VENV "$PYTHON_VENV"
for pkg in kafka-python aiokafka confluent-kafka; do
    record "PYTHON_VERSION_$pkg" "$(grep "^$pkg==" "$PYTHON_REQUIREMENTS" | cut -d= -f3)"
done
