#!/usr/bin/env bash
# Makes sure a Rust target for Wasm is installed, adding it with rustup when
# missing. Fails with a message a person can act on.
#
# Usage: scripts/ensure-wasm-target.sh [TARGET]   (default: wasm32-wasip2, the
# target plugins are built for; tests also build one for wasm32-unknown-unknown)
set -euo pipefail
target="${1:-wasm32-wasip2}"
sysroot="$(rustc --print sysroot)"
if [ -d "$sysroot/lib/rustlib/$target/lib" ]; then
    exit 0
fi
if ! command -v rustup >/dev/null 2>&1; then
    echo "error: the Rust target $target is not installed and rustup is not available to add it." >&2
    echo "       Install rustup (https://rustup.rs) or a Rust toolchain that ships $target." >&2
    exit 1
fi
echo "weir: adding the Rust target $target (one-time download)..." >&2
if ! rustup target add "$target" >&2; then
    echo "error: 'rustup target add $target' failed (is the network down?)." >&2
    echo "       Plugins cannot be built without it. Retry when online; see docs/toolchains.md for an offline fallback." >&2
    exit 1
fi
