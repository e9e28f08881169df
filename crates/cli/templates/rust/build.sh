#!/bin/sh
# Builds the component for wasm32-wasip2, then embeds manifest.toml and signs it with the
# development key: {{name}}.signed.wasm. Needs `rustup target add wasm32-wasip2` and
# `gatehouse` on PATH. (With CARGO_TARGET_DIR set, the .wasm is under that directory.)
set -eu
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2
gatehouse pack "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" \
  --manifest manifest.toml --key keys/{{key_id}}.secret.toml -o {{name}}.signed.wasm
