#!/usr/bin/env bash
# Runs the benchmark suites on the local stack and writes docs/benchmarks.md with charts in docs/benchmarks/
# (with --quick: small sizes, report in e2e/target/bench-report/). Resolves the Debezium Postgres connector (the
# baseline of suites 1 and 2) into e2e/target/bench-plugins/ first. `scripts/bench.sh --help` lists the options.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
if [ ! -f e2e/target/bench-plugins/debezium-connector-postgres/tablecdc-bench-debezium-kafka44-bridge.jar ]; then
  mvnw -q -f e2e/bench-plugins/pom.xml package dependency:copy-dependencies
fi
run_e2e_main io.tablecdc.e2e.bench.BenchRunner bench "$@"
