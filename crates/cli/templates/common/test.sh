#!/bin/sh
# Builds and packs the plugin, then has gatehouse verify it (signature, trusted key, world)
# against gatehouse.toml and check its answer. Exits non-zero on any failure.
set -eu
cd "$(dirname "$0")"
{{build}}
gatehouse verify --config gatehouse.toml {{name}}.signed.wasm
{{check}}
