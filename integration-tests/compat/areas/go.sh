# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Builds the franz-go smoke check (integration-tests/compat/go, franz-go and
# kadm pinned in go.mod, checksums in go.sum, fetched through the Go module
# proxy) into $OUT/franzgo; records FRANZGO_* in $OUT/env. go.mod needs Go
# 1.26 (franz-go 1.22's minimum); an older go fetches that toolchain as a
# module through the proxy (GOTOOLCHAIN=auto).

if ! command -v go >/dev/null; then
    apt_install_missing golang-go ca-certificates
fi

GO_SRC="$REPO/integration-tests/compat/go"
step "go build franz-go check into $OUT/franzgo"
(cd "$GO_SRC" && GOFLAGS=-mod=readonly go build -o "$OUT/franzgo" .)
record FRANZGO_BIN "$OUT/franzgo"
record FRANZGO_VERSION "$(cd "$GO_SRC" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/twmb/franz-go)"
