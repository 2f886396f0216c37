#!/usr/bin/env bash
# Builds everything (plugins to components, the release `weir` binary) and
# runs the main example job, examples/wordcount/job.toml, from scratch.
# Usage: scripts/run-example.sh [EXAMPLE]
#   (wordcount | reconcile | dedupe | windows | nats-to-postgres; the last
#   starts private NATS and PostgreSQL servers for the run and stops them)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
example="${1:-wordcount}"

scripts/build-plugins.sh
cargo build --release --quiet -p weir-cli
if [ "$example" = nats-to-postgres ]; then
    scripts/services.sh install
    demo="$(mktemp -d /tmp/weir-demo.XXXXXX)"
    chmod 755 "$demo"
    trap 'scripts/services.sh stop "$demo/nats"; scripts/services.sh stop "$demo/pg"; rm -rf "$demo"' EXIT
    nats="$(scripts/services.sh nats "$demo/nats" 14222 2>/dev/null)"
    pg="$(scripts/services.sh postgres "$demo/pg" 15432 2>/dev/null)"
    scripts/services.sh stream "$nats" WORDS 'words.>'
    psql -X -q "$pg" -f examples/nats-to-postgres/schema.sql
    rm -rf examples/nats-to-postgres/state
    (
        cd examples/nats-to-postgres
        echo "+ weir run publish.toml && weir run job.toml (in examples/nats-to-postgres)" >&2
        ../../target/release/weir run publish.toml --restore none
        ../../target/release/weir run job.toml --restore none
    )
    psql -X "$pg" -c 'SELECT * FROM word_totals ORDER BY count DESC LIMIT 5' \
        -c 'SELECT count(*) AS word_events FROM word_events'
    exit 0
fi

# From scratch: earlier runs' checkpoints (possibly of an older store format)
# and output go.
rm -rf "examples/$example/state" "examples/$example/out"
echo "+ target/release/weir run examples/$example/job.toml --restore none" >&2
target/release/weir run "examples/$example/job.toml" --restore none

out="$(ls examples/"$example"/out/* | head -1)"
echo "--- first lines of $out ($(wc -l < "$out") lines):" >&2
head -n 10 "$out"
