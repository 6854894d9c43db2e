#!/usr/bin/env bash
# Deploys the example flows of examples/ to the compose deployment through Connect's REST API:
#   1. waits until the Connect worker has loaded the three tablecdc plugins;
#   2. creates the demo dataset shop (tables orders and customers, a few rows) in the BigQuery emulator
#      (the Postgres demo database was created by postgres/init.sh when its volume was new);
#   3. PUTs the stage sink, the BigQuery query CDC source and the Postgres pipeline (examples/<connector>.<variant>.json)
#      and waits until each one and its tasks are RUNNING;
#   4. changes a row in Postgres (streamed by the pipeline; the full example also copies the rows that were there).
# Run it again at will: every step is idempotent (an existing connector gets the config again).
#
# Usage: ./deploy.sh [minimal|full]          (default: full)
# Environment: CONNECT_URL (http://localhost:8083), BIGQUERY_URL (http://localhost:9050),
#              BIGQUERY_PROJECT (tablecdc-demo), DEPLOY_TIMEOUT_S (180), COMPOSE ("docker compose").
set -euo pipefail

variant="${1:-full}"
case "$variant" in
  minimal|full) ;;
  *) echo "usage: $0 [minimal|full]" >&2; exit 2 ;;
esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
examples="$here/../examples"
connect="${CONNECT_URL:-http://localhost:8083}"
bigquery="${BIGQUERY_URL:-http://localhost:9050}"
project="${BIGQUERY_PROJECT:-tablecdc-demo}"
timeout_s="${DEPLOY_TIMEOUT_S:-180}"
compose="${COMPOSE:-docker compose}"
connectors=(clickhouse-stage-sink bigquery-query-cdc pg-pipeline)
plugins=(io.tablecdc.clickhouse.ClickHouseStageSinkConnector io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector
         io.tablecdc.pg.PgPipelineSourceConnector)

say() { printf 'deploy: %s\n' "$*" >&2; }

# until <description> <command…>: retries the command every 2 s until it succeeds or the timeout passes
until_ok() {
  local what="$1"; shift
  local deadline=$((SECONDS + timeout_s))
  until "$@" > /dev/null 2>&1; do
    if (( SECONDS > deadline )); then
      say "gave up after ${timeout_s} s waiting for $what"
      return 1
    fi
    sleep 2
  done
}

plugins_loaded() {
  local list
  list="$(curl -fsS "$connect/connector-plugins?connectorsOnly=true")" || return 1
  local p
  for p in "${plugins[@]}"; do
    grep -q "\"$p\"" <<< "$list" || return 1
  done
}

# POST that treats 409 (already exists) as done; prints the HTTP status
post_once() {
  local url="$1" body="$2" code
  code="$(curl -sS -o /tmp/tablecdc-deploy.out -w '%{http_code}' -X POST -H 'Content-Type: application/json' "$url" -d "$body")"
  if [[ "$code" != 2* && "$code" != 409 ]]; then
    say "POST $url answered $code: $(cat /tmp/tablecdc-deploy.out)"
    return 1
  fi
  echo "$code"
}

running() {
  local status
  status="$(curl -fsS "$connect/connectors/$1/status")" || return 1
  # the connector and every task RUNNING, at least one task
  grep -Eq '"tasks": *\[ *\{' <<< "$status" || return 1
  ! grep -Eq '"state": *"(FAILED|UNASSIGNED|PAUSED|STOPPED|RESTARTING)"' <<< "$status"
}

say "waiting for Connect at $connect to load the tablecdc plugins"
until_ok "the tablecdc plugins at $connect" plugins_loaded

say "creating the demo dataset $project.shop in the BigQuery emulator at $bigquery"
until_ok "the BigQuery emulator at $bigquery" curl -fsS "$bigquery/bigquery/v2/projects/$project/datasets"
bq="$bigquery/bigquery/v2/projects/$project"
post_once "$bq/datasets" "{\"datasetReference\":{\"projectId\":\"$project\",\"datasetId\":\"shop\"}}" > /dev/null
now="$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
# rows go in only when the table is new, so that running this again adds nothing
created="$(post_once "$bq/datasets/shop/tables" "{\"tableReference\":{\"projectId\":\"$project\",\"datasetId\":\"shop\",\"tableId\":\"customers\"},
  \"schema\":{\"fields\":[{\"name\":\"id\",\"type\":\"INTEGER\",\"mode\":\"REQUIRED\"},{\"name\":\"name\",\"type\":\"STRING\"},
  {\"name\":\"updated_at\",\"type\":\"TIMESTAMP\"}]}}")"
if [[ "$created" == 2* ]]; then
  post_once "$bq/datasets/shop/tables/customers/insertAll" "{\"rows\":[
    {\"json\":{\"id\":1,\"name\":\"Ada\",\"updated_at\":\"$now\"}},
    {\"json\":{\"id\":2,\"name\":\"Grace\",\"updated_at\":\"$now\"}}]}" > /dev/null
fi
created="$(post_once "$bq/datasets/shop/tables" "{\"tableReference\":{\"projectId\":\"$project\",\"datasetId\":\"shop\",\"tableId\":\"orders\"},
  \"schema\":{\"fields\":[{\"name\":\"id\",\"type\":\"INTEGER\",\"mode\":\"REQUIRED\"},{\"name\":\"customer_id\",\"type\":\"INTEGER\"},
  {\"name\":\"amount\",\"type\":\"NUMERIC\"},{\"name\":\"updated_at\",\"type\":\"TIMESTAMP\"}]}}")"
if [[ "$created" == 2* ]]; then
  post_once "$bq/datasets/shop/tables/orders/insertAll" "{\"rows\":[
    {\"json\":{\"id\":1,\"customer_id\":1,\"amount\":\"12.50\",\"updated_at\":\"$now\"}},
    {\"json\":{\"id\":2,\"customer_id\":2,\"amount\":\"99.90\",\"updated_at\":\"$now\"}}]}" > /dev/null
fi

for name in "${connectors[@]}"; do
  file="$examples/$name.$variant.json"
  say "PUT /connectors/$name/config from ${file#"$here"/}"
  code="$(curl -sS -o /tmp/tablecdc-deploy.out -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    "$connect/connectors/$name/config" --data-binary "@$file")"
  if [[ "$code" != 2* ]]; then
    say "Connect refused $name ($code): $(cat /tmp/tablecdc-deploy.out)"
    exit 1
  fi
done
for name in "${connectors[@]}"; do
  if ! until_ok "$name to run" running "$name"; then
    curl -sS "$connect/connectors/$name/status" >&2 || true
    exit 1
  fi
  say "$name RUNNING"
done

if [[ "${DEPLOY_PG_DEMO:-1}" == 1 ]]; then
  say "changing a row in Postgres shop.orders (streamed by the pg-pipeline flow)"
  (cd "$here" && $compose exec -T postgres psql -q -U postgres -d shop -c \
    "UPDATE shop.orders SET amount = amount + 1, updated_at = now() WHERE id = 1") || say "skipped: $compose exec failed"
fi

cat >&2 <<EOF
deploy: done. The flows poll BigQuery every 10 s (full) or 60 s (minimal) with a 5 s / 60 s safety lag. Then:
  curl -s $connect/connectors/bigquery-query-cdc/status
  $compose exec clickhouse sh -c 'clickhouse-client --password "\$CLICKHOUSE_PASSWORD" -q "SHOW TABLES FROM analytics"'
  $compose exec clickhouse sh -c 'clickhouse-client --password "\$CLICKHOUSE_PASSWORD" -q "SELECT * FROM analytics.bq_tablecdc_demo_shop_orders FINAL"'
EOF
