//! `weir-polyglot`: the two steps of building an operator in C or Zig that
//! need the component-model tooling, without installing `wit-bindgen-cli` or
//! `wasm-tools` (each takes about 25 minutes to build on 2 cores).
//!
//! ```text
//! weir-polyglot bindgen-c WIT_DIR WORLD OUT_DIR
//!     Writes <world>.h, <world>.c and <world>_component_type.o (the world's
//!     type, to link into the module) to OUT_DIR, like `wit-bindgen c`.
//! weir-polyglot component CORE.wasm OUT.wasm
//!     Encodes a core module built with those bindings as a component, like
//!     `wasm-tools component new`. A module that imports
//!     `wasi_snapshot_preview1` (wasi-libc) is adapted to WASI 0.2 with the
//!     reactor adapter of wasmtime 48.
//! ```

use std::path::Path;

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bindgen-c", wit, world, out] => bindgen_c(Path::new(wit), world, Path::new(out)),
        ["component", core, out] => component(Path::new(core), Path::new(out)),
        _ => bail!(
            "usage: weir-polyglot bindgen-c WIT_DIR WORLD OUT_DIR | weir-polyglot component CORE.wasm OUT.wasm"
        ),
    }
}

fn bindgen_c(wit: &Path, world: &str, out: &Path) -> Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve
        .push_path(wit)
        .with_context(|| format!("reading the WIT package in {}", wit.display()))?;
    let world_id = resolve.select_world(&[pkg], Some(world))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world_id, &mut files)?;
    std::fs::create_dir_all(out)?;
    for (name, contents) in files.iter() {
        let path = out.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(contents) {
            std::fs::write(&path, contents)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

fn component(core: &Path, out: &Path) -> Result<()> {
    let module = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let imports_wasi = wasmparser_imports(&module)?;
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder.validate(true).module(&module)?;
    if imports_wasi {
        encoder.adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?;
    }
    let bytes = encoder
        .encode()
        .with_context(|| format!("encoding {} as a component", core.display()))?;
    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, out)?;
    Ok(())
}

/// Whether the core module imports the `wasi_snapshot_preview1` module.
fn wasmparser_imports(module: &[u8]) -> Result<bool> {
    let needle = WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME.as_bytes();
    // The import section names its modules as plain strings; a byte search is
    // enough to decide whether the adapter is needed (the encoder validates).
    Ok(module.windows(needle.len()).any(|w| w == needle))
}
