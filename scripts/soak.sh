#!/usr/bin/env bash
# The soak tier, not part of CI: each golden pipeline (a word count into the
# file, PostgreSQL, NATS and Kafka sinks) crashed many times, two runs in
# three by SIGKILL at a random moment after a checkpoint and one in three at
# a random failpoint (a named step of the sink protocol), then run to its
# end and checked against its input. Prints one line per pipeline:
#   soak: kafka: kills 50 (34 random, 16 failpoints), records 100000, lost 0, duplicated 0, out-of-order 0
#
# Usage: scripts/soak.sh [KILLS] [SEED]    (defaults: 50, a new seed each run)
# Takes about 15 minutes with 50 kills. Installs what it needs as
# scripts/test.sh does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kills="${1:-50}"
seed="${2:-$((RANDOM * 32768 + RANDOM))}"
scripts/ensure-wasm-target.sh
scripts/services.sh install
echo "soak: $kills crashes per pipeline, seed $seed" >&2
log="$(mktemp -t weir-soak.XXXXXX)"
status=0
WEIR_SOAK_KILLS="$kills" WEIR_SOAK_SEED="$seed" \
    cargo test -p weir-cli --test integration soak:: -- --ignored --nocapture --test-threads 1 \
    >"$log" 2>&1 || status=$?
# The harness prints each test's line after its name (`test soak_file ... `).
grep -v 'soak: [a-z]*: kills' "$log" | tail -n 40 >&2
grep -o 'soak: [a-z]*: kills.*' "$log" || echo "soak: no pipeline finished (log: $log)"
exit "$status"
