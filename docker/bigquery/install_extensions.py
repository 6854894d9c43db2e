"""Installs the DuckDB extensions shipped by the duckdb-extension-* PyPI packages into DuckDB's extension folder.

Usage: install_extensions.py <duckdb version> <extension>...
"""
import importlib
import os
import sys

import duckdb

version, names = sys.argv[1], sys.argv[2:]
connection = duckdb.connect()
for name in names:
    module = importlib.import_module(f"duckdb_extension_{name}")
    path = os.path.join(os.path.dirname(module.__file__), "extensions", f"v{version}", f"{name}.duckdb_extension")
    connection.execute(f"INSTALL '{path}'")
    connection.execute(f"LOAD {name}")
print("duckdb extensions installed:", ", ".join(names))
