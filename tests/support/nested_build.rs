//! Cargo builds started from within a build or a test (the plugins, a
//! scaffolded crate): the outer cargo's settings must not leak into them.
//! Also compiled into `tests/build.rs`, so it uses nothing but `std`.

use std::process::Command;

/// Settings of the outer cargo that would change what a nested build does or
/// where it writes.
const OUTER: [&str; 9] = [
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
];

/// `cmd` with the outer cargo's settings removed from its environment.
pub fn nested(mut cmd: Command) -> Command {
    for var in OUTER {
        cmd.env_remove(var);
    }
    cmd
}
