# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Installs KafkaJS, pinned by integration-tests/compat/node/package.json and
# package-lock.json, with `npm ci` into $OUT/node (again when the lock file
# changes); records NODE_* in $OUT/env.

# Debian's nodejs ships npm separately; NodeSource's nodejs (which conflicts
# with Debian's npm) bundles it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install_missing nodejs npm
fi

NODE_SRC="$REPO/integration-tests/compat/node"
NODE_DIR="$OUT/node"
if ! cmp -s "$NODE_SRC/package-lock.json" "$NODE_DIR/package-lock.json" \
    || [[ ! -d "$NODE_DIR/node_modules/kafkajs" ]]; then
    step "npm ci (KafkaJS) in $NODE_DIR"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    cp "$NODE_SRC/package.json" "$NODE_SRC/package-lock.json" "$NODE_DIR/"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi
record NODE_MODULES "$NODE_DIR/node_modules"
record KAFKAJS_VERSION "$(node -p "require('$NODE_DIR/node_modules/kafkajs/package.json').version")"
