#!/usr/bin/env bash
# Builds the operators written in other languages than Rust to components:
#
#   plugins-py/<name>/app.py    -> plugins/target/<name>-py.wasm   (componentize-py, PyPI)
#   plugins-c/<name>/*.c        -> plugins/target/<name>-c.wasm    (Debian clang + wasi-libc)
#   plugins-js/<name>/*.js      -> plugins/target/<name>-js.wasm   (componentize-js, npm)
#   plugins-zig/<name>/*.zig    -> plugins/target/<name>-zig.wasm  (Zig from PyPI `ziglang`)
#
# Usage: scripts/build-polyglot.sh [python|c|js|zig ...]   (default: all four)
#
# Toolchains are installed from the package registries only when missing, into
# target/polyglot/ (a Python venv, node_modules, and `weir-polyglot`, a small
# Rust helper in tools/polyglot that writes the C bindings and encodes core
# modules as components), except Debian's clang and wasi-libc, which need
# apt-get (root). A component is rebuilt only when its inputs changed: the
# sha256 of its sources, the WIT files, this script and the toolchain version
# is kept next to it in `<name>-<lang>.wasm.inputs`.
#
# For each language, target/polyglot/status/<lang> says `ok` or
# `unavailable: <why>`. A toolchain that cannot be installed (no network, not
# root) makes its language `unavailable`, which is an error when CI=true.
# Exit status: 0 when every language built or is unavailable outside CI, 1
# otherwise (a build error is always an error).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/target/polyglot"
out="$root/plugins/target"
status_dir="$tools/status"
logs="$tools/logs"
mkdir -p "$tools" "$out" "$status_dir" "$logs"

# Pinned toolchain versions (see docs/polyglot.md).
COMPONENTIZE_PY_VERSION=0.25.1
COMPONENTIZE_JS_VERSION=0.23.0
ZIGLANG_VERSION=0.17.0

# One build at a time (tests and people may run this concurrently).
exec 9>"$tools/.lock"
flock 9

langs=("$@")
if [ ${#langs[@]} -eq 0 ]; then
    langs=(python c js zig)
fi

say() { echo "build-polyglot: $*" >&2; }

# Sets $unavailable and returns 1: the toolchain cannot be installed here.
unavailable=""
cannot() {
    unavailable="$*"
    return 1
}

# sha256 of the files given, of the WIT world, of this script and of "$extra".
inputs_hash() {
    local extra="$1"
    shift
    {
        for f in "$@" "$root"/wit/*.wit "${BASH_SOURCE[0]}"; do
            printf '%s\n' "${f#"$root"/}"
            sha256sum <"$f"
        done
        printf '%s\n' "$extra"
    } | sha256sum | cut -d' ' -f1
}

# up_to_date OUT HASH: the component exists and was built from these inputs.
up_to_date() {
    [ -f "$1" ] && [ -f "$1.inputs" ] && [ "$(cat "$1.inputs")" = "$2" ]
}

# install OUT HASH TMP: moves the freshly built TMP into place with its hash.
install_output() {
    mv "$3" "$1"
    printf '%s\n' "$2" >"$1.inputs"
}

# ------------------------------------------------------------------ python

py_venv="$tools/venv"

ensure_venv() {
    if [ ! -x "$py_venv/bin/python" ]; then
        command -v python3 >/dev/null || cannot "python3 is not installed" || return 1
        python3 -m venv "$py_venv" >"$logs/venv.log" 2>&1 ||
            cannot "python3 -m venv failed (see $logs/venv.log; on Debian: apt-get install python3-venv)" || return 1
    fi
}

# pip_package NAME VERSION: installs NAME==VERSION into the venv when missing.
pip_package() {
    local have
    have="$("$py_venv/bin/python" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p')"
    if [ "$have" != "$2" ]; then
        say "installing $1 $2 from PyPI into target/polyglot/venv (one-time)"
        "$py_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$1==$2" \
            >"$logs/pip-$1.log" 2>&1 ||
            cannot "pip install $1==$2 failed (see $logs/pip-$1.log)" || return 1
    fi
}

ensure_python() {
    ensure_venv && pip_package componentize-py "$COMPONENTIZE_PY_VERSION"
}

build_python() {
    local name="$1" src="$2" dst="$out/$1-py.wasm" hash files
    mapfile -t files < <(find "$src" -name '*.py' -not -path '*/__pycache__/*' | sort)
    hash="$(inputs_hash "componentize-py $COMPONENTIZE_PY_VERSION" "${files[@]}")"
    up_to_date "$dst" "$hash" && return 0
    say "python: $name (componentize-py, about a minute)"
    (cd "$src" && "$py_venv/bin/componentize-py" -d "$root/wit" -w operator \
        componentize -p "$src" app -o "$dst.tmp") >"$logs/$name-py.log" 2>&1 || {
        say "python: building $name failed:"
        tail -n 30 "$logs/$name-py.log" >&2
        return 1
    }
    install_output "$dst" "$hash" "$dst.tmp"
}

# ------------------------------------------------------------------ driver

# build_lang LANG DIR: ensures LANG's toolchain, then builds every operator
# folder of DIR with build_LANG.
failed=0
build_lang() {
    local lang="$1" dir="$2" started=$SECONDS
    unavailable=""
    if ! "ensure_$lang"; then
        if [ -n "$unavailable" ]; then
            echo "unavailable: $unavailable" >"$status_dir/$lang"
            say "$lang: UNAVAILABLE: $unavailable"
            if [ "${CI:-}" = "true" ]; then
                say "$lang: CI=true, so an unavailable toolchain is an error"
                failed=1
            fi
        else
            echo "unavailable: installing the toolchain failed" >"$status_dir/$lang"
            failed=1
        fi
        return 0
    fi
    local ok=1
    for src in "$root/$dir"/*/; do
        src="${src%/}"
        "build_$lang" "$(basename "$src")" "$src" || ok=0
    done
    if [ $ok = 1 ]; then
        echo ok >"$status_dir/$lang"
        say "$lang: ok ($((SECONDS - started)) s)"
    else
        echo "error: a build failed (see $logs)" >"$status_dir/$lang"
        failed=1
    fi
}

for lang in "${langs[@]}"; do
    case "$lang" in
    python | py) build_lang python plugins-py ;;
    *)
        say "unknown language \`$lang\` (python, c, js, zig)"
        exit 2
        ;;
    esac
done
exit $failed
