#!/bin/sh
# Builds the component with the gatehouse Python SDK (componentize-py), then embeds
# manifest.toml and signs it with the development key: {{name}}.signed.wasm. Needs the SDK's
# toolchain (its .venv: `build-support/toolchains` in a gatehouse checkout) and `gatehouse`
# on PATH.
set -eu
cd "$(dirname "$0")"
sdk="${GATEHOUSE_SDK_PY:-{{sdk}}}"
"$sdk/.venv/bin/python" "$sdk/build.py" {{source}} --world {{kind}} --out {{name}}.wasm
gatehouse pack {{name}}.wasm --manifest manifest.toml --key keys/{{key_id}}.secret.toml -o {{name}}.signed.wasm
