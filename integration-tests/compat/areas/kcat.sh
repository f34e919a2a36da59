# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# Installs kcat from Debian (it links Debian's librdkafka); the versions are
# Debian bookworm's, checked here so that a different release is noticed.
# Records KCAT_* in $OUT/env. Its check reads committed offsets back with
# kafka-python from the python area's venv (python.sh).

KCAT_VERSION="1.7.1-2"
KCAT_LIBRDKAFKA_VERSION="2.0.2-1"

apt_install_missing kcat
for kcat_pin in "kcat $KCAT_VERSION" "librdkafka1 $KCAT_LIBRDKAFKA_VERSION"; do
    read -r kcat_pkg kcat_want <<<"$kcat_pin"
    kcat_have="$(dpkg-query -W -f='${Version}' "$kcat_pkg")"
    if [[ "$kcat_have" != "$kcat_want" ]]; then
        echo "$kcat_pkg $kcat_have is installed; the kcat check pins $kcat_want (Debian bookworm)" >&2
        exit 1
    fi
done
record KCAT_BIN "$(command -v kcat)"
record KCAT_VERSION "$KCAT_VERSION"
record KCAT_LIBRDKAFKA_VERSION "$KCAT_LIBRDKAFKA_VERSION"
