#!/usr/bin/env bash
# Starts the local stack without Docker, prints its endpoints, replicates a BigQuery emulator table into
# ClickHouse through the connectors deployed with the Connect REST API, and shows the catalog's status.
# Stays up until Ctrl-C when run from a terminal; exits after the report otherwise (or with --exit).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
run_stack_main test-stack io.tablecdc.e2e.Quickstart quickstart "$@"
