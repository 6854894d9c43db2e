#!/usr/bin/env bash
# Runs every test: unit tests of each module, then the end-to-end tests on the local stack (Kafka, Connect,
# Postgres, the ClickHouse engine, an object store and the BigQuery emulator, all started by the tests).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"

bash scripts/install-chdb.sh >/dev/null
bash scripts/install-bq-emulator.sh >/dev/null
bash scripts/install-schema-registry.sh >/dev/null
bash scripts/install-compose-config.sh >/dev/null

mvnw verify "$@"
