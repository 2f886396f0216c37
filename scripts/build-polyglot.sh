#!/usr/bin/env bash
# Builds the operators written in other languages than Rust to components:
#
#   plugins/python/<name>/app.py    -> plugins/target/<name>-py.wasm   (componentize-py, PyPI)
#   plugins/c/<name>/*.c        -> plugins/target/<name>-c.wasm    (Debian clang + wasi-libc)
#   plugins/js/<name>/*.js      -> plugins/target/<name>-js.wasm   (componentize-js, npm)
#   plugins/zig/<name>/*.zig    -> plugins/target/<name>-zig.wasm  (Zig from PyPI `ziglang`)
#
# Usage: scripts/build-polyglot.sh [python|c|js|zig ...]   (default: all four)
#
# plugins/c/lib, plugins/js/lib and plugins/zig/lib (not operators) hold
# what the operators of a language share, and are among the inputs of each
# of them: C links lib/*.c into every operator; a JavaScript operator
# imports ../lib/weir.js; a Zig operator imports weir.zig and c.zig (made
# from lib/c.h) by name, and links plugins/c/lib/weir_util.c.
#
# A Python operator is built by scripts/python-sdk.sh, with weir_sdk
# (sdk/python), against world `operator-rows` unless a one-line file
# `world` next to its app.py names another (plugins/python/word-count-raw,
# on the raw bindings, names `operator`). The C, JavaScript and Zig
# operators are built against world `operator`.
#
# Toolchains are installed from the package registries only when missing, into
# ~/.cache/weir-polyglot (or $WEIR_POLYGLOT_CACHE): a Python venv (venv/),
# node_modules (js/), the Zig cache (zig-cache/) and `weir-polyglot`
# (tools/), a small Rust helper built from tools/polyglot that writes the C
# bindings and encodes core modules as components; Debian's clang and
# wasi-libc are installed with apt-get (root). Per checkout, target/polyglot/
# holds the generated bindings, build folders, logs and status. A component is rebuilt only when its inputs changed: the
# sha256 of its sources, the WIT files, this script and the toolchain version
# is kept next to it in `<name>-<lang>.wasm.inputs`.
#
# For each language, target/polyglot/status/<lang> says `ok` or
# `unavailable: <why>`. A toolchain that cannot be installed (no network, not
# root) makes its language `unavailable`, which is an error unless
# WEIR_POLYGLOT_OPTIONAL=1 is set (by hand, to work without a toolchain): the
# README's test command and CI behave alike and never pass by skipping.
# Exit status: 0 when every language built (or is unavailable and
# WEIR_POLYGLOT_OPTIONAL=1), 1 otherwise (a build error is always an error).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/target/polyglot"
out="$root/plugins/target"
status_dir="$tools/status"
logs="$tools/logs"
# Toolchains live where the machine keeps them across checkouts (CI runs in a
# fresh clone): $WEIR_POLYGLOT_CACHE, else ~/.cache/weir-polyglot.
cache="${WEIR_POLYGLOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-polyglot}"
mkdir -p "$tools" "$out" "$status_dir" "$logs" "$cache"

# Pinned toolchain versions (see docs/polyglot.md; componentize-py's and
# pytest's are in scripts/python-sdk.sh).
COMPONENTIZE_JS_VERSION=0.23.0
ZIGLANG_VERSION=0.17.0

# One build at a time (tests and people may run this concurrently).
exec 9>"$cache/.lock"
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

# sha256 of the files given, of the WIT world, of the recipe (the text of
# the calling build_<lang> function and of the steps all of them share) and
# of "$extra" (toolchain versions).
inputs_hash() {
    local extra="$1"
    shift
    {
        for f in "$@" "$root"/wit/*.wit; do
            printf '%s\n' "${f#"$root"/}"
            sha256sum <"$f"
        done
        declare -f "${FUNCNAME[1]}" build_step component_of in_dir
        printf '%s\n' "$extra"
    } | sha256sum | cut -d' ' -f1
}

# up_to_date OUT HASH: the component exists and was built from these inputs.
up_to_date() {
    [ -f "$1" ] && [ -f "$1.inputs" ] && [ "$(cat "$1.inputs")" = "$2" ]
}

# build_step LANG NAME OUT HASH CMD...: runs CMD, which writes OUT.tmp, with
# its output in $logs/NAME-LANG.log, then moves OUT.tmp to OUT and keeps HASH
# (the inputs) in OUT.inputs. When CMD fails, shows the end of its log and
# returns 1.
build_step() {
    local lang="$1" name="$2" dst="$3" hash="$4" log="$logs/$2-$1.log"
    shift 4
    "$@" >"$log" 2>&1 || {
        say "$lang: building $name failed:"
        tail -n 30 "$log" >&2
        return 1
    }
    mv "$dst.tmp" "$dst"
    printf '%s\n' "$hash" >"$dst.inputs"
}

# component_of WORK OUT CMD...: runs CMD in the folder WORK, where it compiles
# a core module to core.wasm, and encodes that as the component OUT.
component_of() {
    local work="$1" out="$2"
    shift 2
    (cd "$work" && "$@") && "$polyglot_tool" component "$work/core.wasm" "$out"
}

# in_dir DIR CMD...: runs CMD in the folder DIR.
in_dir() {
    (cd "$1" && "${@:2}")
}

# ------------------------------------------------------------------ python

py_venv="$cache/venv"

# python_sdk ARGS...: scripts/python-sdk.sh ARGS (the venv with
# componentize-py and pytest, `pip NAME VERSION` for more); its exit status
# 2 means the toolchain cannot be installed here.
python_sdk() {
    local status=0 log="$logs/python-sdk-$1.log"
    WEIR_POLYGLOT_LOCKED=1 "$root/scripts/python-sdk.sh" "$@" 2>"$log" || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$log" >&2
        [ "$status" -eq 2 ] && cannot "$(tail -n 1 "$log")"
        return 1
    fi
}

ensure_python() {
    python_sdk setup
}

# Operators on weir_sdk build against world `operator-rows`; a one-line
# file `world` next to app.py names another (the raw-bindings baseline).
build_python() {
    local name="$1" src="$2" dst="$out/$1-py.wasm" hash files world=operator-rows
    mapfile -t files < <(find "$src" "$root/sdk/python/weir_sdk" "$root/scripts/python-sdk.sh" \
        \( -name '*.py' -o -name world -o -name '*.sh' \) -not -path '*/__pycache__/*' -not -path '*/tests/*' | sort)
    if [ -f "$src/world" ]; then
        world="$(tr -d '[:space:]' <"$src/world")"
    fi
    hash="$(inputs_hash "scripts/python-sdk.sh" "${files[@]}")"
    up_to_date "$dst" "$hash" && return 0
    say "python: $name (componentize-py, world $world, about half a minute)"
    build_step python "$name" "$dst" "$hash" \
        env WEIR_POLYGLOT_LOCKED=1 "$root/scripts/python-sdk.sh" build "$src" "$dst.tmp" "$world"
}

# ------------------------------------------------------------------ tools

# weir-polyglot (tools/polyglot): writes C bindings, encodes components.
polyglot_tool="$cache/tools/release/weir-polyglot"
tool_version=""

ensure_tool() {
    local manifest="$root/tools/polyglot/Cargo.toml"
    tool_version="$(cat "$root/tools/polyglot/Cargo.lock" "$root/tools/polyglot/src/main.rs" | sha256sum | cut -c1-16)"
    if [ ! -x "$polyglot_tool" ] || [ "$(cat "$cache/tools/.version" 2>/dev/null)" != "$tool_version" ]; then
        say "building tools/polyglot (weir-polyglot, one-time, about a minute)"
        # A nested build: the outer cargo's settings must not leak in.
        env -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS \
            -u RUSTC_WRAPPER -u RUSTC_WORKSPACE_WRAPPER -u CARGO_MAKEFLAGS -u MAKEFLAGS -u MFLAGS \
            cargo build --release --quiet --locked --manifest-path "$manifest" \
            --target-dir "$cache/tools" >"$logs/tool.log" 2>&1 || {
            tail -n 30 "$logs/tool.log" >&2
            cannot "building tools/polyglot failed (see $logs/tool.log; it needs crates.io)" || return 1
        }
        echo "$tool_version" >"$cache/tools/.version"
    fi
}

# Writes the C bindings of the world to $tools/c-gen (unchanged files are not
# touched).
c_bindings() {
    "$polyglot_tool" bindgen-c "$root/wit" operator "$tools/c-gen" >"$logs/bindgen-c.log" 2>&1 || {
        cat "$logs/bindgen-c.log" >&2
        return 1
    }
}

# ------------------------------------------------------------------ c

# Debian's clang 14 with wasi-libc and compiler-rt for wasm32.
C_PACKAGES=(clang lld wasi-libc libclang-rt-dev-wasm32)
clang_version=""

c_smoke_test() {
    local dir
    dir="$(mktemp -d)"
    printf '#include <stdio.h>\nint f(double x){char b[32];return snprintf(b,32,"%%g",x);}\n' >"$dir/t.c"
    clang --target=wasm32-wasi -O2 -mexec-model=reactor "$dir/t.c" -o "$dir/t.wasm" >/dev/null 2>&1
    local rc=$?
    rm -rf "$dir"
    return "$rc"
}

ensure_c() {
    if ! command -v clang >/dev/null || ! c_smoke_test; then
        if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
            cannot "clang for wasm32-wasi is missing and cannot be installed here (needs root and apt-get: apt-get install ${C_PACKAGES[*]})"
            return 1
        fi
        say "installing ${C_PACKAGES[*]} with apt-get (one-time)"
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${C_PACKAGES[@]}"; } \
            >"$logs/apt-c.log" 2>&1 ||
            cannot "apt-get install ${C_PACKAGES[*]} failed (see $logs/apt-c.log)" || return 1
        c_smoke_test || cannot "clang cannot build for wasm32-wasi even after apt-get install" || return 1
    fi
    clang_version="$(clang --version | head -n 1)"
    ensure_tool && c_bindings
}

build_c() {
    local name="$1" src="$2" dst="$out/$1-c.wasm" hash files work
    mapfile -t files < <(find "$src" "$root/plugins/c/lib" -name '*.[ch]' | sort)
    hash="$(inputs_hash "$clang_version $tool_version" "${files[@]}")"
    up_to_date "$dst" "$hash" && return 0
    say "c: $name"
    work="$tools/build/$name-c"
    mkdir -p "$work"
    build_step c "$name" "$dst" "$hash" component_of "$work" "$dst.tmp" \
        clang --target=wasm32-wasi -O2 -mexec-model=reactor -Wall -Wl,--strip-debug \
        -I"$tools/c-gen" -I"$root/plugins/c/lib" \
        "$src"/*.c "$root"/plugins/c/lib/*.c \
        "$tools/c-gen/operator.c" "$tools/c-gen/operator_component_type.o" \
        -o core.wasm
}

# ------------------------------------------------------------------ js

js_dir="$cache/js"

ensure_js() {
    command -v node >/dev/null && command -v npm >/dev/null ||
        cannot "node and npm are not installed (on Debian: apt-get install nodejs npm)" || return 1
    local have
    have="$(node -p "require('$js_dir/node_modules/@bytecodealliance/componentize-js/package.json').version" 2>/dev/null || true)"
    if [ "$have" != "$COMPONENTIZE_JS_VERSION" ]; then
        say "installing @bytecodealliance/componentize-js $COMPONENTIZE_JS_VERSION from npm into $js_dir (one-time)"
        mkdir -p "$js_dir"
        [ -f "$js_dir/package.json" ] || echo '{"private": true}' >"$js_dir/package.json"
        (cd "$js_dir" && npm install --no-audit --no-fund --silent \
            "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION") >"$logs/npm-js.log" 2>&1 ||
            cannot "npm install @bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION failed (see $logs/npm-js.log)" || return 1
    fi
}

build_js() {
    local name="$1" src="$2" dst="$out/$1-js.wasm" hash files
    mapfile -t files < <(find "$src" "$root/plugins/js/lib" -name '*.js' | sort)
    hash="$(inputs_hash "componentize-js $COMPONENTIZE_JS_VERSION" "${files[@]}")"
    up_to_date "$dst" "$hash" && return 0
    say "js: $name (componentize-js, StarlingMonkey)"
    # componentize-js resolves the operator's relative imports itself, within
    # the folder it runs in: from plugins/js, `../lib/weir.js` is in reach.
    # Without -d, the component would import wasi:http, which hosts without
    # HTTP (Weir) cannot link.
    build_step js "$name" "$dst" "$hash" in_dir "$root/plugins/js" \
        "$js_dir/node_modules/.bin/componentize-js" "$src/$name.js" --wit "$root/wit" -n operator \
        -d stdio random clocks http fetch-event -o "$dst.tmp"
}

# ------------------------------------------------------------------ zig

zig() {
    ZIG_GLOBAL_CACHE_DIR="$cache/zig-cache" "$py_venv/bin/python" -m ziglang "$@"
}

ensure_zig() {
    python_sdk pip ziglang "$ZIGLANG_VERSION" && ensure_tool && c_bindings || return 1
    # Zig 0.16+ has no @cImport: translate the C declarations the operators
    # use (plugins/zig/lib/c.h) to c.zig, once for all of them.
    local hash
    hash="$(cat "$root/plugins/zig/lib/c.h" "$root"/plugins/c/lib/*.h "$tools"/c-gen/*.h | sha256sum | cut -c1-16) $ZIGLANG_VERSION"
    if [ "$(cat "$tools/zig-c/.inputs" 2>/dev/null)" != "$hash" ]; then
        mkdir -p "$tools/zig-c"
        zig translate-c -target wasm32-wasi -lc -I"$tools/c-gen" -I"$root/plugins/c/lib" \
            "$root/plugins/zig/lib/c.h" >"$tools/zig-c/c.zig" 2>"$logs/zig-translate-c.log" || {
            cat "$logs/zig-translate-c.log" >&2
            return 1
        }
        echo "$hash" >"$tools/zig-c/.inputs"
    fi
}

build_zig() {
    local name="$1" src="$2" dst="$out/$1-zig.wasm" hash files work
    mapfile -t files < <(find "$src" "$root/plugins/zig/lib" "$root/plugins/c/lib" -name '*.zig' -o -name '*.[ch]' | sort)
    hash="$(inputs_hash "ziglang $ZIGLANG_VERSION $tool_version" "${files[@]}")"
    up_to_date "$dst" "$hash" && return 0
    say "zig: $name (the first build takes a few minutes)"
    work="$tools/build/$name-zig"
    rm -rf "$work"
    mkdir -p "$work"
    # One folder holds the operator's files, the shared plugins/zig/lib/*.zig
    # (which an operator's own file must not be named like) and c.zig, so
    # main.zig imports them by name. Of plugins/c/lib, Zig links the helpers
    # (weir_util.c), not the C operators' default hooks (weir_glue.c).
    cp "$src"/*.zig "$root"/plugins/zig/lib/*.zig "$work/"
    cp "$tools/zig-c/c.zig" "$work/c.zig"
    build_step zig "$name" "$dst" "$hash" component_of "$work" "$dst.tmp" \
        zig build-exe main.zig "$root/plugins/c/lib/weir_util.c" \
        "$tools/c-gen/operator.c" "$tools/c-gen/operator_component_type.o" \
        -target wasm32-wasi -mexec-model=reactor -fno-entry -O ReleaseSmall -lc \
        -I"$tools/c-gen" -I"$root/plugins/c/lib" -femit-bin=core.wasm
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
            if [ "${WEIR_POLYGLOT_OPTIONAL:-}" != 1 ]; then
                say "$lang: an unavailable toolchain is an error (WEIR_POLYGLOT_OPTIONAL=1 skips it)"
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
        # lib/ holds code shared by the operators of a language.
        [ "$(basename "$src")" = lib ] && continue
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
    python | py) build_lang python plugins/python ;;
    c) build_lang c plugins/c ;;
    js) build_lang js plugins/js ;;
    zig) build_lang zig plugins/zig ;;
    *)
        say "unknown language \`$lang\` (python, c, js, zig)"
        exit 2
        ;;
    esac
done
exit $failed
