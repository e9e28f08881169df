#!/bin/sh
# Builds and packs the plugin, then has gatehouse verify it (signature, trusted key, world)
# against gatehouse.toml and check its answer. Exits non-zero on any failure, saying which
# check failed and printing what the call answered.
set -eu
cd "$(dirname "$0")"

# expect TEXT COMMAND...: runs COMMAND and fails, printing its output, unless it has TEXT.
expect() {
  want=$1
  shift
  if out=$("$@" 2>&1); then :; fi
  case $out in
    *"$want"*) ;;
    *)
      printf 'FAILED: %s\nexpected %s in its output, which was:\n%s\n' "$*" "$want" "$out" >&2
      exit 1
      ;;
  esac
}

{{build}}
gatehouse verify --config gatehouse.toml {{name}}.signed.wasm
{{check}}
