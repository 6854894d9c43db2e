#!/usr/bin/env bash
# Freshness of healthy tables while one table is stalled, against the same run with none stalled (docs/isolation.md).
#   scripts/bench-freshness.sh [tables (10)] [sync.interval.ms (5000)] [measured seconds per run (60)] [safety.lag.ms (1000)]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
run_stack_main bench io.tablecdc.e2e.bench.FreshnessBench bench-freshness "$@"
