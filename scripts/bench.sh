#!/usr/bin/env bash
# Runs the benchmark suites on the local stack and writes docs/benchmarks.md with charts in docs/benchmarks/
# (with --quick: small sizes, report in bench/target/bench-report/). Resolves the Debezium Postgres connector (the
# baseline of suites 1 and 2) and the bridge it needs (module bench/debezium-bridge) into bench/target/bench-plugins/
# first. `scripts/bench.sh --help` lists the options.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
if [ ! -f bench/target/bench-plugins/debezium-connector-postgres/tablecdc-bench-debezium-kafka44-bridge.jar ]; then
  mvnw -q -pl bench/debezium-bridge -Pdebezium-plugin package
fi
run_stack_main bench io.tablecdc.e2e.bench.BenchRunner bench "$@"
