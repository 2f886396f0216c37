//! Support for the integration tests in `tests/`: the plugin components, built
//! by this crate's build script, and small helpers.

/// Paths of the plugin components under `plugins/target/`.
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

pub mod pipeline;
pub mod polyglot;
