#!/usr/bin/env bash
# Installs the BigQuery emulator of the local test stack (PyPI local-bigquery, DuckDB-backed) into
# <project root>/.cache/bqemulator/ and prints the path of the executable to start it with.
# Idempotent: once installed, a run only prints that path. See docs/test-stack-bigquery.md.
#
# Environment:
#   TABLECDC_PYTHON   a Python >= 3.13 interpreter to build the virtualenv with (local-bigquery needs 3.13+);
#                     default: the first python3.13/3.14 found on PATH or among pyenv's versions.
set -euo pipefail

# Exact pins; every transitive package is pinned in bq-emulator-constraints.txt.
# local-bigquery 0.4.0 requires duckdb >= 2.0, whose wheels no longer bundle the icu extension, and no
# registry serves DuckDB 2.0 builds of the icu/ducklake/spatial extensions (DuckDB would download them from
# its own extension site at run time, which is not reachable here). local-bigquery 0.3.2 accepts
# duckdb 1.5.5, for which PyPI packages ship those extensions.
LOCAL_BIGQUERY_VERSION=0.3.2
DUCKDB_VERSION=1.5.5
DUCKDB_EXTENSIONS=(icu ducklake spatial)

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
home="$root/.cache/bqemulator/local-bigquery-$LOCAL_BIGQUERY_VERSION-duckdb-$DUCKDB_VERSION"
exe="$home/bin/local-bigquery"
marker="$home/.installed"
constraints="$script_dir/bq-emulator-constraints.txt"
stamp="$(sha256sum "$constraints" "${BASH_SOURCE[0]}" | cut -c1-64 | tr '\n' ' ')"

if [[ -f "$marker" && -x "$exe" && "$(cat "$marker")" == "$stamp" ]]; then
  echo "$exe"
  exit 0
fi

# One installer at a time (tests in parallel JVMs may call this together); re-check once holding the lock.
mkdir -p "$root/.cache/bqemulator"
exec 9>"$root/.cache/bqemulator/.install.lock"
flock 9
if [[ -f "$marker" && -x "$exe" && "$(cat "$marker")" == "$stamp" ]]; then
  echo "$exe"
  exit 0
fi

find_python() {
  local candidates=()
  [[ -n "${TABLECDC_PYTHON:-}" ]] && candidates+=("$TABLECDC_PYTHON")
  candidates+=(python3.13 python3.14 python3)
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  if [[ -d "$pyenv_root/versions" ]]; then
    local v
    for v in "$pyenv_root"/versions/3.13* "$pyenv_root"/versions/3.14*; do
      [[ -x "$v/bin/python3" ]] && candidates+=("$v/bin/python3")
    done
  fi
  local c
  for c in "${candidates[@]}"; do
    # pyenv shims exist for versions that are not selected and fail when run: try each one
    if "$c" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

python="$(find_python)" || {
  echo "install-bq-emulator: local-bigquery needs Python >= 3.13; none found (set TABLECDC_PYTHON)" >&2
  exit 1
}

echo "install-bq-emulator: installing local-bigquery $LOCAL_BIGQUERY_VERSION with $("$python" --version 2>&1) into $home" >&2
rm -rf "$home"
mkdir -p "$home/bin" "$home/duckdb-home"
"$python" -m venv "$home/venv"
pip_packages=("local-bigquery==$LOCAL_BIGQUERY_VERSION" "duckdb==$DUCKDB_VERSION")
for ext in "${DUCKDB_EXTENSIONS[@]}"; do
  pip_packages+=("duckdb-extension-$ext==$DUCKDB_VERSION")
done
"$home/venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" "${pip_packages[@]}" >&2
"$home/venv/bin/python" -m pip check >&2

# DuckDB looks for extensions under $HOME/.duckdb/extensions/v<version>/<platform>/ and would otherwise
# try to download them. Install the registry-shipped builds there, with HOME pointing into the cache.
HOME="$home/duckdb-home" "$home/venv/bin/python" - "$DUCKDB_VERSION" "${DUCKDB_EXTENSIONS[@]}" >&2 <<'PY'
import importlib, os, sys
import duckdb
version, names = sys.argv[1], sys.argv[2:]
con = duckdb.connect()
for name in names:
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = os.path.join(os.path.dirname(module.__file__), "extensions", f"v{version}", f"{name}.duckdb_extension")
    con.execute(f"INSTALL '{path}'")
    con.execute(f"LOAD {name}")
print("install-bq-emulator: duckdb extensions installed:", ", ".join(names))
PY

cat > "$exe" <<EOF
#!/usr/bin/env bash
# Starts local-bigquery $LOCAL_BIGQUERY_VERSION with DuckDB's extension folder inside the cache.
export HOME="$home/duckdb-home"
exec "$home/venv/bin/local-bigquery" "\$@"
EOF
chmod +x "$exe"
echo "$stamp" > "$marker"
echo "$exe"
