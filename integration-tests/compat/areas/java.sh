# Sourced by scripts/compat with OUT (its output dir) and step() defined.
# The Java area (areas/java.py): builds java/client (ClientCheck) once per
# pinned kafka-clients version, and resolves the classpath of Kafka's CLI
# tools (kafka_2.13 and kafka-tools, integration-tests/java-kafka-tools/pom.xml)
# into $OUT. Everything comes from Maven Central; records JAVA_* in $OUT/env.

# The latest 3.9 patch and the 4.1 line Weir targets.
JAVA_CLIENT_VERSIONS="3.9.2 4.1.2"
# Kafka's CLI tools, as pinned in integration-tests/java-kafka-tools/pom.xml.
JAVA_CLI_VERSION="4.1.2"

# Any JDK 17+ will do; Debian's default one only when there is none.
java_missing=()
command -v mvn >/dev/null 2>&1 || java_missing+=(maven)
command -v javac >/dev/null 2>&1 || java_missing+=(default-jdk-headless)
((${#java_missing[@]} == 0)) || apt_install_missing "${java_missing[@]}"

JAVA_CLIENT_DIR="$REPO/integration-tests/compat/java/client"
for v in $JAVA_CLIENT_VERSIONS; do
    target="$JAVA_CLIENT_DIR/target/kafka-clients-$v"
    if [[ ! -f "$target/classpath.txt" \
          || -n "$(find "$JAVA_CLIENT_DIR/src" "$JAVA_CLIENT_DIR/pom.xml" -newer "$target/classpath.txt" -print -quit)" ]]; then
        step "building the Java client check against kafka-clients $v (mvn compile)"
        (cd "$JAVA_CLIENT_DIR" && mvn -q -B -Dstyle.color=never -Dkafka.clients.version="$v" \
            compile dependency:build-classpath -Dmdep.includeScope=runtime \
            -Dmdep.outputFile="$target/classpath.txt")
        touch "$target/classpath.txt"
    fi
done
record JAVA_CLIENT_VERSIONS "$JAVA_CLIENT_VERSIONS"
record JAVA_CLIENT_DIR "$JAVA_CLIENT_DIR"

JAVA_CLI_POM="$REPO/integration-tests/java-kafka-tools/pom.xml"
JAVA_CLI_CLASSPATH="$OUT/java-cli-classpath.txt"
if [[ ! -f "$JAVA_CLI_CLASSPATH" || "$JAVA_CLI_POM" -nt "$JAVA_CLI_CLASSPATH" ]]; then
    step "resolving Kafka's CLI tools $JAVA_CLI_VERSION (mvn dependency:build-classpath)"
    mvn -q -B -Dstyle.color=never -f "$JAVA_CLI_POM" dependency:build-classpath \
        -Dmdep.includeScope=runtime -Dmdep.outputFile="$JAVA_CLI_CLASSPATH"
    touch "$JAVA_CLI_CLASSPATH"
fi
grep -q "kafka-tools-$JAVA_CLI_VERSION.jar" "$JAVA_CLI_CLASSPATH" \
    || { echo "$JAVA_CLI_POM does not resolve kafka-tools $JAVA_CLI_VERSION" >&2; exit 1; }
record JAVA_CLI_VERSION "$JAVA_CLI_VERSION"
record JAVA_CLI_CLASSPATH "$JAVA_CLI_CLASSPATH"
