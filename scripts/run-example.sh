#!/usr/bin/env bash
# Builds everything (plugins to components, the release `weir` binary) and
# runs the main example job, examples/wordcount/job.toml, from scratch.
# Usage: scripts/run-example.sh [EXAMPLE]   (wordcount | reconcile | dedupe | windows)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
example="${1:-wordcount}"

scripts/build-plugins.sh
cargo build --release --quiet -p weir-cli
# From scratch: earlier runs' checkpoints (possibly of an older store format)
# and output go.
rm -rf "examples/$example/state" "examples/$example/out"
echo "+ target/release/weir run examples/$example/job.toml --restore none" >&2
target/release/weir run "examples/$example/job.toml" --restore none

out="$(ls examples/"$example"/out/* | head -1)"
echo "--- first lines of $out ($(wc -l < "$out") lines):" >&2
head -n 10 "$out"
