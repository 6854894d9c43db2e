#!/usr/bin/env bash
# Fetches the chDB engine (ClickHouse as a shared library) for the local test stack and prints the path
# of libchdb.so. Idempotent: a second run only prints the path. TABLECDC_CHDB_LIB=<existing lib> skips all.
# Test fixture only: production talks to a real ClickHouse server.
set -euo pipefail

CHDB_VERSION="26.5.3"
PACKAGE="@chdb/lib-linux-x64-gnu@${CHDB_VERSION}"

if [[ -n "${TABLECDC_CHDB_LIB:-}" ]]; then
  if [[ ! -f "${TABLECDC_CHDB_LIB}" ]]; then
    echo "TABLECDC_CHDB_LIB=${TABLECDC_CHDB_LIB} does not exist" >&2
    exit 1
  fi
  echo "${TABLECDC_CHDB_LIB}"
  exit 0
fi

# The project root is the parent of this script's folder, whatever the caller's cwd.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ROOT}/.cache/chdb"
LIB="${CACHE}/${CHDB_VERSION}/libchdb.so"

if [[ -f "${LIB}" ]]; then
  echo "${LIB}"
  exit 0
fi

command -v npm >/dev/null || { echo "npm is needed to fetch ${PACKAGE}" >&2; exit 1; }
command -v tar >/dev/null || { echo "tar is needed to unpack ${PACKAGE}" >&2; exit 1; }

# Work in a private temp folder and move the lib in place last, so an interrupted run leaves no half file
# that a later run would mistake for a finished install.
mkdir -p "${CACHE}"
TMP="$(mktemp -d "${CACHE}/.install.XXXXXX")"
trap 'rm -rf "${TMP}"' EXIT

echo "fetching ${PACKAGE} (about 170 MB) into ${CACHE}" >&2
# a private npm cache, removed with TMP: the tarball is kept once, as the extracted lib
TARBALL="$(cd "${TMP}" && npm pack --silent --cache "${TMP}/npm-cache" "${PACKAGE}" | tail -n 1)"
tar -xzf "${TMP}/${TARBALL}" -C "${TMP}"
FOUND="$(find "${TMP}/package" -name libchdb.so -type f | head -n 1)"
[[ -n "${FOUND}" ]] || { echo "libchdb.so not found in ${TARBALL}" >&2; exit 1; }

mkdir -p "${CACHE}/${CHDB_VERSION}"
# Keep the C header (when shipped) beside the lib: it documents the API the Java binding calls.
HEADER="$(find "${TMP}/package" -name chdb.h -type f | head -n 1)"
[[ -z "${HEADER}" ]] || cp "${HEADER}" "${CACHE}/${CHDB_VERSION}/chdb.h"
mv "${FOUND}" "${LIB}.part"
mv "${LIB}.part" "${LIB}"
echo "${LIB}"
