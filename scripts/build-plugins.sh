#!/usr/bin/env bash
# Builds every plugin crate under plugins/ (examples) and tests/guests/ (test
# fixtures, e.g. misbehaving plugins) to a WebAssembly component and puts it
# at plugins/target/<crate>.wasm. Cargo rebuilds only what changed, and a
# component is copied only when its bytes changed, so re-running is cheap.
#
# Adds the wasm32-wasip2 Rust target with rustup when it is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=wasm32-wasip2
out="$root/plugins/target"
cargo_target="$root/target/wasm"

"$root/scripts/ensure-wasm-target.sh"

# Every directory of plugins/ or tests/guests/ with a Cargo.toml is a plugin crate.
manifests=("$root"/plugins/*/Cargo.toml)
if compgen -G "$root/tests/guests/*/Cargo.toml" >/dev/null; then
    manifests+=("$root"/tests/guests/*/Cargo.toml)
fi
packages=()
for manifest in "${manifests[@]}"; do
    packages+=(-p "$(basename "$(dirname "$manifest")")")
done

cargo build --quiet --manifest-path "$root/Cargo.toml" --profile plugin \
    --target "$target" --target-dir "$cargo_target" "${packages[@]}"

mkdir -p "$out"
for manifest in "${manifests[@]}"; do
    name="$(basename "$(dirname "$manifest")")"
    built="$cargo_target/$target/plugin/${name//-/_}.wasm"
    if ! cmp -s "$built" "$out/$name.wasm"; then
        cp "$built" "$out/$name.wasm.tmp" && mv "$out/$name.wasm.tmp" "$out/$name.wasm"
    fi
done
