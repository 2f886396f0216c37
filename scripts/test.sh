#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, rustdoc links,
# then every test
# (SDK and plugin unit tests natively, integration tests against the plugins
# built to components by tests/build.rs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/ensure-wasm-target.sh
# nats-server and PostgreSQL for the connectors' integration tests (they
# start private instances) and Chromium for the web dashboard's tests;
# installs the Debian packages when missing.
scripts/services.sh install
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done

cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# Operators in Python, C, JavaScript and Zig (tests/conformance.rs): installs
# their toolchains when missing (cached under ~/.cache/weir-polyglot) and
# builds them.
scripts/build-polyglot.sh
# Free space decides some failures (a server refusing writes on a full
# disk): it is shown before the tests and after them.
trap 'df -h . /tmp /dev/shm 2>/dev/null || true' EXIT
df -h . /tmp /dev/shm 2>/dev/null || true
cargo test --workspace
