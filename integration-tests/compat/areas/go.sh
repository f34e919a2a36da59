# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Builds the franz-go smoke check (integration-tests/compat/go, franz-go and
# kadm pinned in go.mod, checksums in go.sum, fetched through the Go module
# proxy) into $OUT/franzgo; records FRANZGO_* in $OUT/env.
#
# go.mod needs Go 1.26 (franz-go 1.22's minimum). Where the go on PATH is
# older (Debian bookworm's golang-go is 1.19), the Go toolchain GO_TOOLCHAIN
# is fetched as the module golang.org/toolchain through the Go module proxy
# (as GOTOOLCHAIN=auto does, checksum-verified) into $OUT/go-toolchain.

GO_TOOLCHAIN="go1.26.8"

if ! command -v go >/dev/null; then
    apt_install_missing golang-go ca-certificates
fi
GO=go
go_minor="$(go env GOVERSION)"
go_minor="${go_minor#go1.}"
go_minor="${go_minor%%[!0-9]*}"
if ((go_minor < 26)); then
    if [[ ! -x "$OUT/go-toolchain/bin/go" ]]; then
        step "fetching Go toolchain $GO_TOOLCHAIN through the Go module proxy"
        go_toolchain_dir="$(cd "$OUT" && GOPATH="$OUT/go-toolchain-download" GOFLAGS=-modcacherw \
            go mod download -json "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$(go env GOARCH)" \
            | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
        rm -rf "$OUT/go-toolchain"
        cp -r "$go_toolchain_dir" "$OUT/go-toolchain"
        # Module zips keep no file modes: the toolchain's binaries need x.
        chmod -R u+w "$OUT/go-toolchain"
        find "$OUT/go-toolchain/bin" "$OUT/go-toolchain/pkg/tool" -type f -exec chmod +x {} +
        rm -rf "$OUT/go-toolchain-download"
    fi
    GO="$OUT/go-toolchain/bin/go"
fi

GO_SRC="$REPO/integration-tests/compat/go"
step "go build franz-go check into $OUT/franzgo"
(cd "$GO_SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$GO" build -o "$OUT/franzgo" .)
record FRANZGO_BIN "$OUT/franzgo"
record FRANZGO_VERSION "$(cd "$GO_SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    "$GO" list -m -f '{{.Version}}' github.com/twmb/franz-go)"
