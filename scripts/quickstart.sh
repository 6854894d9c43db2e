#!/usr/bin/env bash
# Starts the local stack without Docker, prints its endpoints and deploys the connectors through the
# Connect REST API. Stays up until Ctrl-C when run from a terminal; exits after the report otherwise.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"

bash scripts/install-chdb.sh >/dev/null
bash scripts/install-bq-emulator.sh >/dev/null

mvnw -q -DskipTests install
mvnw -q -pl e2e dependency:build-classpath -Dmdep.outputFile=target/quickstart.classpath -Dmdep.includeScope=runtime
exec "$JAVA_HOME/bin/java" -Xmx2g --enable-native-access=ALL-UNNAMED -Dtablecdc.root="$TABLECDC_ROOT" \
  --sun-misc-unsafe-memory-access=allow -Dlogback.configurationFile=e2e/src/main/resources/logback-quickstart.xml \
  -Dlogging.config=e2e/src/main/resources/logback-quickstart.xml -Dtablecdc.log.file=e2e/target/quickstart.log \
  -cp "e2e/target/classes:$(cat e2e/target/quickstart.classpath)" io.tablecdc.e2e.Quickstart "$@"
