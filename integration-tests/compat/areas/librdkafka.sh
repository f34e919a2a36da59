# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Builds librdkafka's test suite from Debian bookworm's librdkafka source
# package (checksum pinned) under $OUT; records LIBRDKAFKA_* in $OUT/env.

LIBRDKAFKA_VERSION="2.0.2"
LIBRDKAFKA_ORIG_SHA256="f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d"
DEBIAN_POOL="http://deb.debian.org/debian/pool/main/libr/librdkafka"

apt_install_missing build-essential zlib1g-dev libzstd-dev liblz4-dev curl

RDKAFKA_DIR="$OUT/librdkafka-$LIBRDKAFKA_VERSION"
if [[ ! -x "$RDKAFKA_DIR/tests/test-runner" ]]; then
    step "building librdkafka $LIBRDKAFKA_VERSION and its test suite (Debian source package)"
    tarball="$OUT/librdkafka_$LIBRDKAFKA_VERSION.orig.tar.gz"
    if ! echo "$LIBRDKAFKA_ORIG_SHA256  $tarball" | sha256sum -c --status 2>/dev/null; then
        curl -fsS -o "$tarball" "$DEBIAN_POOL/librdkafka_$LIBRDKAFKA_VERSION.orig.tar.gz"
        echo "$LIBRDKAFKA_ORIG_SHA256  $tarball" | sha256sum -c --quiet
    fi
    rm -rf "$RDKAFKA_DIR"
    tar -xzf "$tarball" -C "$OUT"
    (
        cd "$RDKAFKA_DIR"
        # No SASL/SSL: the checks use PLAINTEXT on loopback.
        ./configure --disable-gssapi --disable-sasl --disable-ssl --disable-curl \
            --enable-zlib --enable-zstd >"$OUT/librdkafka-configure.log" 2>&1
        make -j"$(nproc)" libs >"$OUT/librdkafka-make.log" 2>&1
        make -C tests build >"$OUT/librdkafka-tests-make.log" 2>&1
    ) || { echo "librdkafka build failed; see $OUT/librdkafka-*.log" >&2; exit 1; }
fi
record LIBRDKAFKA_VERSION "$LIBRDKAFKA_VERSION"
record LIBRDKAFKA_TESTS "$RDKAFKA_DIR/tests"
