#!/usr/bin/env bash
# Builds every plugin crate under plugins/ (examples) and every guest of
# tests/guests/ (test fixtures, e.g. misbehaving plugins: one example target
# of crate weir-guests per file tests/guests/examples/<name>.rs) to a
# WebAssembly component and puts it at plugins/target/<name>.wasm. Cargo
# rebuilds only what changed, and a component is copied only when its bytes
# changed, so re-running is cheap.
#
# Adds the wasm32-wasip2 Rust target with rustup when it is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=wasm32-wasip2
out="$root/plugins/target"
built="$root/target/wasm/$target/plugin"

"$root/scripts/ensure-wasm-target.sh"

# Every directory of plugins/ with a Cargo.toml is a plugin crate.
plugins=()
for manifest in "$root"/plugins/*/Cargo.toml; do
    plugins+=("$(basename "$(dirname "$manifest")")")
done
guests=()
for file in "$root"/tests/guests/examples/*.rs; do
    guests+=("$(basename "$file" .rs)")
done

packages=(-p weir-guests)
for name in "${plugins[@]}"; do
    packages+=(-p "$name")
done
# Libraries (the plugins' cdylibs) and examples (the guests' cdylibs).
cargo build --quiet --manifest-path "$root/Cargo.toml" --profile plugin \
    --target "$target" --target-dir "$root/target/wasm" --lib --examples "${packages[@]}"

# install BUILT NAME: copies the component BUILT to plugins/target/NAME.wasm.
install() {
    if ! cmp -s "$1" "$out/$2.wasm"; then
        cp "$1" "$out/$2.wasm.tmp" && mv "$out/$2.wasm.tmp" "$out/$2.wasm"
    fi
}
mkdir -p "$out"
for name in "${plugins[@]}"; do
    install "$built/${name//-/_}.wasm" "$name"
done
for name in "${guests[@]}"; do
    install "$built/examples/${name//-/_}.wasm" "$name"
done
