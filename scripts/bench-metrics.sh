#!/usr/bin/env bash
# Measures what per-table metrics cost: registration, one JMX scrape of every table, updates per batch.
#   scripts/bench-metrics.sh [tables (1000)] [batches per round (2000000)]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
run_stack_main bench io.tablecdc.e2e.bench.MetricsBench bench-metrics "$@"
