#!/usr/bin/env bash
# The Python toolchain of Weir operators written on `weir_sdk` (sdk/python):
#
#   scripts/python-sdk.sh build SRC OUT.wasm [WORLD]
#       builds the operator package SRC (its `app.py` and any other modules)
#       to a component with componentize-py, against world WORLD of wit/
#       (default `operator-rows`, what the SDK exports), with weir_sdk on
#       its path;
#   scripts/python-sdk.sh test [PYTEST ARGS...]
#       runs pytest (tests on weir_sdk.testing need no component build),
#       with weir_sdk on the path, test modules imported by path (several
#       packages may each have tests/test_app.py) and no .pytest_cache;
#   scripts/python-sdk.sh setup
#       only installs the toolchain;
#   scripts/python-sdk.sh pip NAME VERSION
#       installs NAME==VERSION from PyPI into the toolchain's venv too
#       (build-polyglot.sh's Zig).
#
# The toolchain is a Python venv with componentize-py and pytest from PyPI,
# installed when missing into $WEIR_POLYGLOT_CACHE/venv (default
# ~/.cache/weir-polyglot/venv), shared with scripts/build-polyglot.sh.
# Exit status 2 when the toolchain cannot be installed (the message says
# why), 1 when the build or the tests fail.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${WEIR_POLYGLOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-polyglot}"
venv="$cache/venv"
logs="$cache/logs"
mkdir -p "$cache" "$logs"

# Pinned versions (see docs/polyglot.md).
COMPONENTIZE_PY_VERSION=0.25.1
PYTEST_VERSION=8.3.5
# The SDK's build backend (sdk/python/pyproject.toml), for its packaging test.
FLIT_CORE_VERSION=3.12.0

say() { echo "python-sdk: $*" >&2; }
cannot() {
    say "$*"
    exit 2
}

# pip_package NAME VERSION: installs NAME==VERSION into the venv when missing.
pip_package() {
    local have
    have="$("$venv/bin/python" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p' || true)"
    if [ "$have" != "$2" ]; then
        say "installing $1 $2 from PyPI into $venv (one-time)"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$1==$2" \
            >"$logs/pip-$1.log" 2>&1 ||
            cannot "pip install $1==$2 failed (see $logs/pip-$1.log)"
    fi
}

setup() {
    # One installation at a time; build-polyglot.sh holds the lock already.
    if [ -z "${WEIR_POLYGLOT_LOCKED:-}" ]; then
        exec 9>"$cache/.lock"
        flock 9
        export WEIR_POLYGLOT_LOCKED=1
    fi
    if [ ! -x "$venv/bin/python" ]; then
        command -v python3 >/dev/null || cannot "python3 is not installed (on Debian: apt-get install python3 python3-venv)"
        python3 -m venv "$venv" >"$logs/venv.log" 2>&1 ||
            cannot "python3 -m venv failed (see $logs/venv.log; on Debian: apt-get install python3-venv)"
    fi
    pip_package componentize-py "$COMPONENTIZE_PY_VERSION"
    pip_package pytest "$PYTEST_VERSION"
    pip_package flit_core "$FLIT_CORE_VERSION"
}

usage() {
    say "usage: scripts/python-sdk.sh build SRC OUT.wasm [WORLD] | test [PYTEST ARGS...] | setup | pip NAME VERSION"
    exit 1
}

case "${1:-}" in
setup)
    setup
    ;;
pip)
    [ $# -eq 3 ] || usage
    setup
    pip_package "$2" "$3"
    ;;
build)
    [ $# -ge 3 ] && [ $# -le 4 ] || usage
    src="$(cd "$2" && pwd)" || exit 1
    out="$3"
    world="${4:-operator-rows}"
    [ -f "$src/app.py" ] || { say "$src has no app.py (the module that calls weir_sdk.export)"; exit 1; }
    setup
    mkdir -p "$(dirname "$out")"
    out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
    # No Rust backtrace of componentize-py itself: the Python traceback says why.
    (cd "$src" && RUST_BACKTRACE=0 "$venv/bin/componentize-py" -d "$root/wit" -w "$world" \
        componentize -p "$src" -p "$root/sdk/python" app -o "$out.tmp") || {
        rm -f "$out.tmp"
        say "building $src failed (the lines above say why)"
        exit 1
    }
    mv "$out.tmp" "$out"
    say "built $out ($(du -h "$out" | cut -f1))"
    ;;
test)
    shift
    setup
    PYTHONPATH="$root/sdk/python${PYTHONPATH:+:$PYTHONPATH}" \
        "$venv/bin/python" -m pytest --import-mode=importlib -p no:cacheprovider "$@"
    ;;
*)
    usage
    ;;
esac
