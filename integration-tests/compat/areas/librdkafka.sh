# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Builds librdkafka's test suite from Debian's librdkafka source package
# (bookworm's 2.0.2-1, the librdkafka that kcat links; orig tarball checksum
# pinned) under $OUT, with SSL (OpenSSL, libssl-dev), which also builds in
# its SASL mechanisms PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER; records
# LIBRDKAFKA_* in $OUT/env. An existing build is redone when its configure
# flags or build dependencies differ from LIBRDKAFKA_CONFIGURE and
# LIBRDKAFKA_BUILD_DEPS (what it was built with is in its directory's
# .weir-build-stamp): configure enables what it finds installed.
#
# The source package comes through apt, from the archives this machine
# already uses: when apt knows no source of that version, the deb-src
# entries are derived from the system's own sources (every `deb` entry of
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, every stanza of
# /etc/apt/sources.list.d/*.sources whose Types has `deb`, with Types
# `deb-src`), written to LIBRDKAFKA_DEB_SRC.{list,sources} (the system's own
# files are never edited) and fetched with apt-get update. apt-get source
# then downloads the .dsc, the orig tarball and the Debian tarball into
# $OUT, checked against the signed Sources index. The build uses the orig
# tarball as released upstream (Debian's patches are not applied).

LIBRDKAFKA_VERSION="2.0.2"
LIBRDKAFKA_DEBIAN_VERSION="$LIBRDKAFKA_VERSION-1"
LIBRDKAFKA_ORIG_SHA256="f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d"
LIBRDKAFKA_DEB_SRC="/etc/apt/sources.list.d/weir-compat-deb-src"

# librdkafka's --enable-sasl is the deprecated alias of --enable-gssapi
# (Cyrus libsasl2, for Kerberos, which Weir does not serve): PLAIN and SCRAM
# are librdkafka's own code, built in with SSL (SCRAM needs OpenSSL's
# HMAC and base64). No curl: OAUTHBEARER OIDC (test 0126) needs a token
# endpoint, and Weir serves no OAUTHBEARER.
LIBRDKAFKA_CONFIGURE="--disable-gssapi --enable-ssl --disable-curl --enable-zlib --enable-zstd"
# rapidjson-dev: the tests that check the statistics JSON (0053, 0101,
# 0110) skip themselves without RapidJSON.
LIBRDKAFKA_BUILD_DEPS="build-essential zlib1g-dev libzstd-dev liblz4-dev libssl-dev rapidjson-dev"

# shellcheck disable=SC2086 # a list of packages
apt_install_missing $LIBRDKAFKA_BUILD_DEPS

# Prints the deb-src form of the one-line entries in "$@".
deb_src_lines() {
    sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$@"
}

# Prints the deb-src form of the deb822 stanzas in "$@" whose Types has
# `deb` and not already `deb-src`; comment lines are left out.
deb_src_stanzas() {
    awk 'BEGIN { RS = ""; FS = "\n" }
        {
            has_deb = 0; has_src = 0
            for (i = 1; i <= NF; i++) if (tolower($i) ~ /^types:/) {
                n = split(substr($i, 7), types, /[[:space:]]+/)
                for (j = 1; j <= n; j++) {
                    if (types[j] == "deb") has_deb = 1
                    if (types[j] == "deb-src") has_src = 1
                }
            }
            if (!has_deb || has_src) next
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^#/) continue
                print (tolower($i) ~ /^types:/ ? "Types: deb-src" : $i)
            }
            print ""
        }' "$@"
}

librdkafka_source_known() {
    apt-cache showsrc --only-source librdkafka 2>/dev/null \
        | grep -qx "Version: $LIBRDKAFKA_DEBIAN_VERSION"
}

RDKAFKA_DIR="$OUT/librdkafka-$LIBRDKAFKA_VERSION"
RDKAFKA_STAMP="$RDKAFKA_DIR/.weir-build-stamp"
RDKAFKA_BUILT_WITH="configure $LIBRDKAFKA_CONFIGURE; deps $LIBRDKAFKA_BUILD_DEPS"
if [[ ! -x "$RDKAFKA_DIR/tests/test-runner" ]] \
    || [[ "$(cat "$RDKAFKA_STAMP" 2>/dev/null)" != "$RDKAFKA_BUILT_WITH" ]]; then
    step "building librdkafka $LIBRDKAFKA_VERSION and its test suite (Debian source package, through apt)"
    tarball="$OUT/librdkafka_$LIBRDKAFKA_VERSION.orig.tar.gz"
    if ! echo "$LIBRDKAFKA_ORIG_SHA256  $tarball" | sha256sum -c --status 2>/dev/null; then
        if ! librdkafka_source_known; then
            rdk_lists=() rdk_stanzas=()
            for rdk_f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
                [[ -f "$rdk_f" && "$rdk_f" != "$LIBRDKAFKA_DEB_SRC.list" ]] && rdk_lists+=("$rdk_f")
            done
            for rdk_f in /etc/apt/sources.list.d/*.sources; do
                [[ -f "$rdk_f" && "$rdk_f" != "$LIBRDKAFKA_DEB_SRC.sources" ]] && rdk_stanzas+=("$rdk_f")
            done
            rm -f "$LIBRDKAFKA_DEB_SRC.list" "$LIBRDKAFKA_DEB_SRC.sources"
            rdk_header="# Written by Weir's integration-tests/compat/areas/librdkafka.sh: the deb-src
# form of this machine's apt sources, for apt-get source librdkafka. Remove at will."
            if ((${#rdk_lists[@]})) && rdk_src="$(deb_src_lines "${rdk_lists[@]}")" && [[ -n "$rdk_src" ]]; then
                printf '%s\n%s\n' "$rdk_header" "$rdk_src" >"$LIBRDKAFKA_DEB_SRC.list"
            fi
            if ((${#rdk_stanzas[@]})) && rdk_src="$(deb_src_stanzas "${rdk_stanzas[@]}")" && [[ -n "$rdk_src" ]]; then
                printf '%s\n%s\n' "$rdk_header" "$rdk_src" >"$LIBRDKAFKA_DEB_SRC.sources"
            fi
            step "apt-get update (deb-src entries in $LIBRDKAFKA_DEB_SRC.*)"
            apt-get update -qq
            librdkafka_source_known || {
                echo "apt knows no source package librdkafka $LIBRDKAFKA_DEBIAN_VERSION" \
                    "(deb-src entries: $LIBRDKAFKA_DEB_SRC.*)" >&2
                exit 1
            }
        fi
        step "apt-get source --download-only librdkafka=$LIBRDKAFKA_DEBIAN_VERSION"
        (cd "$OUT" && apt-get source -qq --download-only "librdkafka=$LIBRDKAFKA_DEBIAN_VERSION")
        echo "$LIBRDKAFKA_ORIG_SHA256  $tarball" | sha256sum -c --quiet
    fi
    rm -rf "$RDKAFKA_DIR"
    tar -xzf "$tarball" -C "$OUT"
    (
        cd "$RDKAFKA_DIR"
        # shellcheck disable=SC2086 # the flags are words
        ./configure $LIBRDKAFKA_CONFIGURE >"$OUT/librdkafka-configure.log" 2>&1
        make -j"$(nproc)" libs >"$OUT/librdkafka-make.log" 2>&1
        make -C tests build >"$OUT/librdkafka-tests-make.log" 2>&1
    ) || { echo "librdkafka build failed; see $OUT/librdkafka-*.log" >&2; exit 1; }
    printf '%s\n' "$RDKAFKA_BUILT_WITH" >"$RDKAFKA_STAMP"
fi
record LIBRDKAFKA_VERSION "$LIBRDKAFKA_VERSION"
record LIBRDKAFKA_TESTS "$RDKAFKA_DIR/tests"
