#!/usr/bin/env bash
# Runs the benchmark suites on the local stack and writes docs/benchmarks.md with charts in docs/benchmarks/
# (with --quick: small sizes, report in bench/target/bench-report/). Resolves the Debezium Postgres connector (the
# baseline of suites 1 and 2) and the bridge it needs (module bench/debezium-bridge) into bench/target/bench-plugins/
# first, when a suite that uses it runs (by default every suite does). `scripts/bench.sh --help` lists the options.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
suites=all
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = "--suites" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
    suites="${args[$((i + 1))]}"
  fi
done
needs_debezium=false
case ",$suites," in
  *,all,*|*,pg-copy,*|*,pg-stream,*) needs_debezium=true ;;
esac
if $needs_debezium && [ ! -f bench/target/bench-plugins/debezium-connector-postgres/tablecdc-bench-debezium-kafka44-bridge.jar ]; then
  mvnw -q -pl bench/debezium-bridge -Pdebezium-plugin package
fi
run_stack_main bench io.tablecdc.e2e.bench.BenchRunner bench "$@"
