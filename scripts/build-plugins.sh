#!/usr/bin/env bash
# Builds every plugin crate under plugins/ to a WebAssembly component and puts
# it at plugins/target/<crate>.wasm. Cargo rebuilds only what changed, and a
# component is copied only when its bytes changed, so re-running is cheap.
#
# Adds the wasm32-wasip2 Rust target with rustup when it is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=wasm32-wasip2
out="$root/plugins/target"
cargo_target="$root/target/wasm"

"$root/scripts/ensure-wasm-target.sh"

# Every directory of plugins/ with a Cargo.toml is a plugin crate.
packages=()
for manifest in "$root"/plugins/*/Cargo.toml; do
    packages+=(-p "$(basename "$(dirname "$manifest")")")
done

cargo build --quiet --manifest-path "$root/Cargo.toml" --profile plugin \
    --target "$target" --target-dir "$cargo_target" "${packages[@]}"

mkdir -p "$out"
for manifest in "$root"/plugins/*/Cargo.toml; do
    name="$(basename "$(dirname "$manifest")")"
    built="$cargo_target/$target/plugin/${name//-/_}.wasm"
    if ! cmp -s "$built" "$out/$name.wasm"; then
        cp "$built" "$out/$name.wasm.tmp" && mv "$out/$name.wasm.tmp" "$out/$name.wasm"
    fi
done
