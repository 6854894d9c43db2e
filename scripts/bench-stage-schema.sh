#!/usr/bin/env bash
# The sink's per-row staging (Connect Struct -> Avro stage record -> Avro binary) of this working tree against a
# baseline commit, side by side: both builds' sink jars, one JVM run each, alternating (docs/benchmarks.md).
#   scripts/bench-stage-schema.sh [baseline commit (HEAD~1)] [rows per round (1000000)] [rounds (5)] [runs of each (3)]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TABLECDC_ROOT"
base="${1:-HEAD~1}"
rows="${2:-1000000}"
rounds="${3:-5}"
runs="${4:-3}"
work="$TABLECDC_ROOT/target/bench-stage-schema"
mkdir -p "$work"
jars() { # <tree> -> the sink's and common's jars of that tree
  echo "$1/connect-clickhouse-stage-sink/target/tablecdc-connect-clickhouse-stage-sink-0.1.0-SNAPSHOT.jar:$1/common/target/tablecdc-common-0.1.0-SNAPSHOT.jar"
}
mvnw -q -pl connect-clickhouse-stage-sink -am package -DskipTests
mvnw -q -pl connect-clickhouse-stage-sink dependency:build-classpath -Dmdep.includeScope=test \
  -Dmdep.outputFile="$work/deps.classpath" >/dev/null
deps="$(tr ':' '\n' < "$work/deps.classpath" | grep -v '/io/tablecdc/' | paste -sd:)"
rm -rf "$work/baseline"
git worktree prune
git worktree add -q --detach "$work/baseline" "$base"
trap 'git -C "$TABLECDC_ROOT" worktree remove --force "$work/baseline"' EXIT
(cd "$work/baseline" && "$TABLECDC_ROOT/mvnw" -B -q --no-transfer-progress -pl connect-clickhouse-stage-sink -am package -DskipTests)
rm -rf "$work/classes"
"$JAVA_HOME/bin/javac" -d "$work/classes" -cp "$(jars "$TABLECDC_ROOT"):$deps" bench/standalone/StageSchemaBench.java
echo "baseline $(git rev-parse --short "$base"), this tree $(git rev-parse --short HEAD)$(git diff --quiet || echo ' with changes')"
for run in $(seq 1 "$runs"); do
  for build in baseline tree; do
    if [ "$build" = baseline ]; then tree="$work/baseline"; else tree="$TABLECDC_ROOT"; fi
    echo "== run $run, $build"
    "$JAVA_HOME/bin/java" -Xmx1g -cp "$work/classes:$(jars "$tree"):$deps" io.tablecdc.e2e.bench.StageSchemaBench "$rows" "$rounds" 3
  done
done
