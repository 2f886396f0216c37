//! Support for the integration tests in `tests/` and the benchmarks: the
//! plugin components, built by this crate's build script (feature
//! `plugins`), job files built in code, the `weir` command (also on a
//! pseudo-terminal), jobs run in temporary folders, the oracles their
//! output is checked with (counts, order), and a headless Chromium for the
//! web dashboard's tests.

/// Paths of the plugin components under `plugins/target/`.
#[cfg(feature = "plugins")]
pub mod plugins {
    include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
}

/// The repository root.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub mod browser;
pub mod cli;
pub mod counts;
pub mod http;
pub mod job_dir;
pub mod job_file;
#[cfg(feature = "plugins")]
pub mod jobs;
pub mod letters;
pub mod nested_build;
pub mod order;
#[cfg(feature = "plugins")]
pub mod orders;
pub mod pipeline;
pub mod polyglot;
pub mod pty;
pub mod running;
pub mod servers;
#[cfg(feature = "plugins")]
pub mod streaming;
pub mod targets;
pub mod text;
pub mod wait;
#[cfg(feature = "plugins")]
pub mod windows;
