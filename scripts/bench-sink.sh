#!/usr/bin/env bash
# Measures the stage sink against a plain bulk insert into the same ClickHouse engine on the local stack.
#   scripts/bench-sink.sh [rows (1000000)] [batch rows (50000)] [pull|push] [zstandard|snappy|deflate|null]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
run_stack_main bench io.tablecdc.e2e.bench.SinkBench bench-sink "$@"
