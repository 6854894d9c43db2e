#!/usr/bin/env bash
# Randomized fault runs (e2e/src/test/java/io/tablecdc/e2e/ChaosIT.java): each run replicates a seeded workload from
# Postgres and BigQuery to ClickHouse while a worker dies at a step picked by the seed (or, in a third of the runs, the
# step's call fails), one dependency (catalog, source Postgres, ClickHouse, object store: refused or hung; or the Kafka
# broker: restarted) goes away for a while and a table leaves the publication and comes back, then checks ClickHouse
# against the sources row for row. Usage: scripts/chaos.sh [--runs N] [--seed S]   (runs S, S+1, …, S+N-1; a random S by default)
# Each run appends "seed, fault@occurrence+outage+…, fired|not-reached, transactions, equal…|failed" to
# e2e/target/chaos/runs.tsv.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"

runs=1
seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "chaos.sh: unknown argument $1 (--runs N, --seed S)" >&2; exit 2 ;;
  esac
done
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]] || { [ -n "$seed" ] && ! [[ "$seed" =~ ^[0-9]+$ ]]; }; then
  echo "chaos.sh: --runs needs a positive integer and --seed a non-negative integer" >&2
  exit 2
fi
[ -n "$seed" ] || seed=$(( (RANDOM << 15 | RANDOM) ))

bash scripts/install-chdb.sh >/dev/null
bash scripts/install-bq-emulator.sh >/dev/null
# every module: the worker loads the connectors from the archives their modules build
mvnw -q install -DskipTests >/dev/null
echo "chaos: $runs run(s) from seed $seed"
mkdir -p e2e/target/chaos
log="e2e/target/chaos/chaos-$seed.log"
status=0
mvnw -pl e2e test -Dtest=ChaosIT -Dsurefire.failIfNoSpecifiedTests=false \
  -Dtablecdc.chaos.seed="$seed" -Dtablecdc.chaos.runs="$runs" > "$log" 2>&1 || status=$?
grep -E "chaos run seed|Tests run:|FAIL" "$log" || true
echo "log: $log"
if [ -f e2e/target/chaos/runs.tsv ]; then
  echo "runs so far (e2e/target/chaos/runs.tsv): $(wc -l < e2e/target/chaos/runs.tsv), equal: $(grep -c $'\tequal$' e2e/target/chaos/runs.tsv)"
fi
exit "$status"
