#!/usr/bin/env bash
# Installs the schema registry of the local test stack and its Kafka Connect converter from Maven Central into
# <project root>/.cache/schema-registry/ and prints the install folder, which holds:
#   server/quarkus-run.jar   Apicurio Registry (in-memory H2 storage), run with a JDK 17+
#   converter/apicurio-avro/ Apicurio's Avro converter with its dependencies, laid out as one Connect plugin
#                            folder (Kafka's own jars left out: the worker provides them), plus a jar (made with
#                            the JDK's jar tool) holding the ServiceLoader manifest that plugin.discovery=service_load
#                            needs (the converter's jars ship none; Kafka's `connect-plugin-path sync-manifests`
#                            writes the same file)
# Idempotent: once installed, a run only prints that folder. See docs/test-stack.md.
set -euo pipefail

# The registry server is the newest release whose distribution Maven Central serves; the converter is the newest
# release whose jar and dependencies resolve there (the 3.x converter jars are not served). The 2.x converter
# talks to the registry's v2 REST API, which the 3.x server still serves.
REGISTRY_VERSION=3.3.3
CONVERTER_VERSION=2.6.13.Final

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
cache="$root/.cache/schema-registry"
home="$cache/apicurio-$REGISTRY_VERSION-converter-$CONVERTER_VERSION"
marker="$home/.installed"
stamp="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)"

installed() {
  [[ -f "$marker" && "$(cat "$marker")" == "$stamp" && -f "$home/server/quarkus-run.jar" ]]
}

if installed; then
  echo "$home"
  exit 0
fi

# One installer at a time (tests in parallel JVMs may call this together); re-check once holding the lock.
mkdir -p "$cache"
exec 9>"$cache/.install.lock"
flock 9
if installed; then
  echo "$home"
  exit 0
fi

echo "install-schema-registry: installing Apicurio Registry $REGISTRY_VERSION and its converter $CONVERTER_VERSION into $home" >&2
rm -rf "$home"
tmp="$(mktemp -d "$cache/.install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

mvn_cmd=("$root/mvnw" -B -q --no-transfer-progress)

# A throwaway project to resolve with: the converter and its runtime dependencies, and the registry's own
# distribution (a Quarkus application folder, published with the classifier "all").
mkdir -p "$tmp/project"
cat > "$tmp/project/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.tablecdc.local</groupId>
  <artifactId>schema-registry</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.apicurio</groupId>
      <artifactId>apicurio-registry-utils-converter</artifactId>
      <version>$CONVERTER_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
"${mvn_cmd[@]}" -f "$tmp/project/pom.xml" dependency:copy \
  -Dartifact="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all" -DoutputDirectory="$tmp" >&2
mkdir -p "$tmp/home/server"
tar xzf "$tmp/apicurio-registry-app-$REGISTRY_VERSION-all.tar.gz" -C "$tmp/home/server"

plugin="$tmp/home/converter/apicurio-avro"
"${mvn_cmd[@]}" -f "$tmp/project/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DexcludeGroupIds=org.apache.kafka -DoutputDirectory="$plugin" >&2

mkdir -p "$tmp/manifests/META-INF/services"
echo "io.apicurio.registry.utils.converter.AvroConverter" > "$tmp/manifests/META-INF/services/org.apache.kafka.connect.storage.Converter"
jar_tool="${JAVA_HOME:+$JAVA_HOME/bin/}jar"
command -v "$jar_tool" >/dev/null || jar_tool=jar
"$jar_tool" --create --file "$plugin/tablecdc-test-service-manifests.jar" -C "$tmp/manifests" META-INF

mv "$tmp/home" "$home"
echo "$stamp" > "$marker"
echo "$home"
