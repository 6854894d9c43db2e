#!/usr/bin/env bash
# Builds tools/compose-config (compose-go, the Compose Specification's loader that `docker compose` uses) with the Go
# toolchain, from modules of the Go module proxy, into .cache/compose-config/ and prints the binary's path.
# Idempotent: a second run only prints the path (a new build only when tools/compose-config changed).
# Used by ComposeConfigTest to validate docker/compose*.yaml the way `docker compose config` does, without an engine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tools/compose-config"
command -v go >/dev/null || { echo "install-compose-config.sh: the Go toolchain (go) is needed" >&2; exit 1; }
KEY="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-16)"
CACHE="$ROOT/.cache/compose-config"
BIN="$CACHE/$KEY/compose-config"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE"
TMP="$(mktemp -d "$CACHE/.build.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "building compose-config into $CACHE/$KEY" >&2
(cd "$SRC" && GOMODCACHE="$ROOT/.cache/go-mod" GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -o "$TMP/compose-config" .)
mkdir -p "$CACHE/$KEY"
mv "$TMP/compose-config" "$BIN"
echo "$BIN"
