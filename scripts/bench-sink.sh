#!/usr/bin/env bash
# Measures the stage sink against a plain bulk insert into the same ClickHouse engine on the local stack.
#   scripts/bench-sink.sh [rows (1000000)] [batch rows (50000)] [pull|push] [zstandard|snappy|deflate|null]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"

bash scripts/install-chdb.sh >/dev/null
bash scripts/install-bq-emulator.sh >/dev/null

mvnw -q -DskipTests install
mvnw -q -pl e2e dependency:build-classpath -Dmdep.outputFile=target/quickstart.classpath -Dmdep.includeScope=runtime
exec "$JAVA_HOME/bin/java" -Xmx3g --enable-native-access=ALL-UNNAMED -Dtablecdc.root="$TABLECDC_ROOT" \
  --sun-misc-unsafe-memory-access=allow -Dlogback.configurationFile=e2e/src/main/resources/logback-quickstart.xml \
  -Dlogging.config=e2e/src/main/resources/logback-quickstart.xml -Dtablecdc.log.file=e2e/target/bench-sink.log \
  -cp "e2e/target/classes:$(cat e2e/target/quickstart.classpath)" io.tablecdc.e2e.bench.SinkBench "$@"
