#!/usr/bin/env bash
# The stage sink on many small batches: one INSERT per batch against batches that wait loaded together
# (normalize.batches.per.load; docs/benchmarks.md).
#   scripts/bench-small-batches.sh [batches (2000)] [rows per batch (5)] [reps (3)]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
run_stack_main bench io.tablecdc.e2e.bench.SmallBatchSinkBench bench-small-batches "$@"
