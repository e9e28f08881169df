#!/bin/sh
# Builds the component with the gatehouse JavaScript SDK (componentize-js), then embeds
# manifest.toml and signs it with the development key: {{name}}.signed.wasm. Needs the SDK's
# toolchain (`npm ci` in the SDK, or `build-support/toolchains` in a gatehouse checkout) and
# `gatehouse` on PATH.
set -eu
cd "$(dirname "$0")"
sdk="${GATEHOUSE_SDK_JS:-{{sdk}}}"
node "$sdk/build.mjs" {{source}} --world {{kind}} --out {{name}}.wasm
gatehouse pack {{name}}.wasm --manifest manifest.toml --key keys/{{key_id}}.secret.toml -o {{name}}.signed.wasm
