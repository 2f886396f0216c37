#!/usr/bin/env bash
# Builds everything (plugins to components, the release `weir` binary) and
# runs the main example job, examples/wordcount/job.toml, from scratch.
# Usage: scripts/run-example.sh [EXAMPLE]
#   (wordcount | reconcile | dedupe | windows | nats-to-postgres |
#   cdc-to-postgres; the last two start private servers for the run and
#   stop them)
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

if [ "$example" = cdc-to-postgres ]; then
    scripts/services.sh install
    demo="$(mktemp -d /tmp/weir-demo.XXXXXX)"
    chmod 755 "$demo"
    job_pid=
    trap '[ -z "$job_pid" ] || kill "$job_pid" 2>/dev/null; scripts/services.sh stop "$demo/pg"; rm -rf "$demo"' EXIT
    pg="$(scripts/services.sh postgres "$demo/pg" 15432 2>/dev/null)"
    psql -X -q "$pg" -f examples/cdc-to-postgres/schema.sql
    rm -rf examples/cdc-to-postgres/state
    # The totals of the orders, as the job should keep them.
    want="SELECT customer, sum(amount) AS total, count(*) AS orders FROM orders GROUP BY customer ORDER BY customer"
    got="SELECT customer, total, orders FROM customer_totals ORDER BY customer"
    (
        cd examples/cdc-to-postgres
        echo "+ weir run job.toml --restore none (in examples/cdc-to-postgres; it runs until stopped)" >&2
        exec ../../target/release/weir run job.toml --restore none
    ) &
    job_pid=$!
    # wait_for_totals: until customer_totals equals the orders' totals.
    wait_for_totals() {
        for _ in $(seq 300); do
            if [ "$(psql -X -A -t "$pg" -c "$want")" = "$(psql -X -A -t "$pg" -c "$got")" ]; then
                return 0
            fi
            sleep 0.2
        done
        echo "customer_totals did not catch up with the orders in 60 s" >&2
        return 1
    }
    wait_for_totals
    echo "+ psql -f examples/cdc-to-postgres/changes.sql" >&2
    psql -X -q "$pg" -f examples/cdc-to-postgres/changes.sql
    wait_for_totals
    psql -X "$pg" -c "$got"
    kill -INT "$job_pid" && wait "$job_pid" || true
    job_pid=
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
