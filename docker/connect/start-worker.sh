#!/bin/sh
# Entry point of the tablecdc Connect image: fills the worker properties from the environment, then runs
# the distributed worker in the foreground (so that `docker stop` reaches it and `docker kill` kills it).
set -eu
template=/opt/tablecdc/connect-distributed.properties
props=/tmp/connect-distributed.properties
sed -e "s|@BOOTSTRAP_SERVERS@|${CONNECT_BOOTSTRAP_SERVERS:-kafka:19092}|g" \
    -e "s|@GROUP_ID@|${CONNECT_GROUP_ID:-tablecdc-connect}|g" \
    -e "s|@ADVERTISED_HOST@|${CONNECT_ADVERTISED_HOST:-$(hostname)}|g" \
    "$template" > "$props"
# extra worker settings, one per line, e.g. CONNECT_EXTRA_PROPERTIES="offset.flush.interval.ms=5000"
if [ -n "${CONNECT_EXTRA_PROPERTIES:-}" ]; then
  printf '%s\n' "$CONNECT_EXTRA_PROPERTIES" >> "$props"
fi
exec /opt/kafka/bin/connect-distributed.sh "$props"
