#!/usr/bin/env bash
# Builds the three Confluent Hub archives of a release from the committed tree (HEAD), with a release version
# instead of -SNAPSHOT, the manifest's documentation, source and support URLs, and a SHA-256 checksum per archive,
# into target/release/. Needs a JDK 17 or newer (JAVA_HOME or java on PATH) and the wrapper; not the local stack's JDK 25.
#
#   scripts/release.sh 0.1.0 https://github.com/OWNER/tablecdc
#   scripts/release.sh 0.1.0 https://github.com/OWNER/tablecdc --docs-url URL --support-url URL
#   scripts/release.sh 0.1.0 https://github.com/OWNER/tablecdc --skip-url-check   # offline: URLs not verified
#
# Documentation defaults to <source>/tree/v<version>/docs and support to <source>/issues; each URL must answer
# (HTTP 2xx/3xx) unless --skip-url-check.
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
VERSION="$1"; SOURCE_URL="${2%/}"; shift 2
DOCS_URL=""; SUPPORT_URL=""; CHECK_URLS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --docs-url) DOCS_URL="$2"; shift 2 ;;
    --support-url) SUPPORT_URL="$2"; shift 2 ;;
    --skip-url-check) CHECK_URLS=0; shift ;;
    *) usage ;;
  esac
done
DOCS_URL="${DOCS_URL:-$SOURCE_URL/tree/v$VERSION/docs}"
SUPPORT_URL="${SUPPORT_URL:-$SOURCE_URL/issues}"

if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "release.sh: the version must be MAJOR.MINOR.PATCH without a qualifier, not '$VERSION'" >&2; exit 2
fi
for url in "$SOURCE_URL" "$DOCS_URL" "$SUPPORT_URL"; do
  [[ "$url" =~ ^https:// ]] || { echo "release.sh: '$url' is not an https:// URL" >&2; exit 2; }
  if [ "$CHECK_URLS" = 1 ] && ! curl -fsSIL --max-time 20 -o /dev/null "$url"; then
    echo "release.sh: $url does not answer; the manifest must name URLs that exist (publish first, or --skip-url-check)" >&2
    exit 1
  fi
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
export JAVA_HOME
major="$("$JAVA_HOME/bin/java" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}' | cut -d. -f1)"
[ "$major" -ge 17 ] 2>/dev/null || { echo "release.sh: needs a JDK 17 or newer (JAVA_HOME=$JAVA_HOME is $major)" >&2; exit 1; }
export MAVEN_USER_HOME="${MAVEN_USER_HOME:-$ROOT/.cache/maven}"

if ! git -C "$ROOT" diff --quiet HEAD -- ; then
  echo "release.sh: the working tree has uncommitted changes; a release is built from HEAD ($(git -C "$ROOT" rev-parse --short HEAD)) only" >&2
fi

OUT="$ROOT/target/release"
SRC="$OUT/src"
rm -rf "$OUT"
mkdir -p "$SRC"
git -C "$ROOT" archive HEAD | tar -x -C "$SRC"

CURRENT="$(sed -n 's#^  <version>\(.*\)</version>#\1#p' "$SRC/pom.xml" | head -n 1)"
find "$SRC" -name pom.xml -exec sed -i.bak "s#<version>$CURRENT</version>#<version>$VERSION</version>#" {} + -exec rm -f {}.bak \;
grep -rq --include=pom.xml -e "-SNAPSHOT" "$SRC" && { echo "release.sh: a pom still names a -SNAPSHOT version" >&2; exit 1; }

PLUGINS=connect-bigquery-query-cdc,connect-pg-pipeline,connect-clickhouse-stage-sink
(cd "$SRC" && ./mvnw -B --no-transfer-progress -q -DskipTests package -pl "$PLUGINS" -am \
  -Dtablecdc.documentation.url="$DOCS_URL" -Dtablecdc.source.url="$SOURCE_URL" -Dtablecdc.support.url="$SUPPORT_URL")

for module in ${PLUGINS//,/ }; do
  dir="tablecdc-$module-$VERSION"
  packages="$SRC/$module/target/components/packages"
  zip="$packages/$dir.zip"
  [ -f "$zip" ] || { echo "release.sh: $zip was not built" >&2; exit 1; }
  # kafka-connect-maven-plugin 0.12.0 drops its deliveryGuarantee setting: add the field to the manifest. The sources
  # also support exactly-once delivery on a worker with exactly.once.source.support=enabled (docs/design.md)
  case "$module" in
    connect-clickhouse-stage-sink) guarantee='[ "at_least_once" ]' ;;
    *) guarantee='[ "at_least_once", "exactly_once" ]' ;;
  esac
  unpacked="$packages/$dir"   # the plugin also leaves the archive unpacked there: $dir/$dir/…
  manifest="$unpacked/$dir/manifest.json"
  grep -q '"delivery_guarantee"' "$manifest" || \
    sed -i.bak "s#\"kafka_connect_api\" : true#\"kafka_connect_api\" : true,\\n    \"delivery_guarantee\" : $guarantee#" "$manifest"
  rm -f "$manifest.bak"
  grep -qF "\"delivery_guarantee\" : $guarantee" "$manifest" || { echo "release.sh: cannot add the delivery guarantee to $manifest" >&2; exit 1; }
  (cd "$unpacked" && "$JAVA_HOME/bin/jar" --update --no-manifest --file "$zip" "$dir/manifest.json")
  cp "$zip" "$OUT/"
  (cd "$OUT" && if command -v sha256sum >/dev/null; then sha256sum "$dir.zip"; else shasum -a 256 "$dir.zip"; fi > "$dir.zip.sha256")
done
rm -rf "$SRC"
echo "release $VERSION from $(git -C "$ROOT" rev-parse --short HEAD):"
ls -1 "$OUT"
