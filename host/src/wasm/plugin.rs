//! A compiled [`Plugin`] (one per `.wasm` file, shared by all instances of
//! an operator) and loading one ([`Runtime::load`]): a file that is not
//! WebAssembly, a core module, a component of another world or one whose
//! `describe` fails or returns bad names is refused with a [`PluginError`]
//! naming the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::compile_cache::hex;
use super::error::{InstanceError, PluginError, trap_error};
use super::guest_output::sanitize;
use super::hook::Hook;
use super::instance_state::{InstanceState, begin_call};
use super::runtime::Runtime;
use crate::config::{Grants, Limits};
use crate::wit::OperatorPre;

/// What a plugin says about itself (`lifecycle.describe`).
///
/// ```
/// let info = weir::OperatorInfo {
///     name: "x".into(), version: "1.0.0".into(),
///     inputs: vec!["in".into()], outputs: vec![], state_version: 1,
/// };
/// assert_eq!(info.inputs.len(), 1);
/// ```
pub use crate::wit::types::OperatorInfo;

impl Runtime {
    /// Loads and compiles the plugin at `path`, checks it against the world
    /// and calls `describe`.
    ///
    /// ```no_run
    /// let rt = weir::Runtime::new().unwrap();
    /// let plugin = rt.load("plugins/target/word-count.wasm").unwrap();
    /// println!("{} {}", plugin.info().name, plugin.info().version);
    /// ```
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Plugin, PluginError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|error| PluginError::Read {
            path: path.into(),
            error,
        })?;
        self.load_bytes(path, bytes)
    }

    /// Like [`load`](Self::load), from bytes already in memory; `path` is
    /// used in messages.
    ///
    /// ```
    /// let rt = weir::Runtime::new().unwrap();
    /// let err = rt.load_bytes("x.wasm", b"hello".to_vec()).unwrap_err();
    /// assert!(err.to_string().contains("not a WebAssembly file"));
    /// ```
    pub fn load_bytes(
        &self,
        path: impl AsRef<Path>,
        bytes: Vec<u8>,
    ) -> Result<Plugin, PluginError> {
        let path = path.as_ref().to_path_buf();
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', _, _, 0, 0]) => {
                return Err(PluginError::CoreModule { path });
            }
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(PluginError::NotWasm { path }),
        }
        let sha256 = sha256_hex(&bytes);
        let (component, pre) = self.compile(&path, &bytes)?;
        let mut plugin = Plugin {
            inner: Arc::new(PluginInner {
                path,
                sha256,
                size: bytes.len() as u64,
                component,
                pre,
                fuel: self.options().fuel,
                bytes: bytes.into(),
                runtime: self.clone(),
                metered: OnceLock::new(),
                info: OperatorInfo {
                    name: String::new(),
                    version: String::new(),
                    inputs: Vec::new(),
                    outputs: Vec::new(),
                    state_version: 0,
                },
                reads_rows: false,
            }),
        };
        let (info, reads_rows) = plugin.call_describe()?;
        let inner = Arc::get_mut(&mut plugin.inner).expect("not shared yet");
        (inner.info, inner.reads_rows) = (info, reads_rows);
        Ok(plugin)
    }
}

/// The sha256 of a plugin's `.wasm` bytes, lower-case hex: its identity in
/// checkpoints.
///
/// ```
/// assert!(weir::wasm::sha256_hex(b"").starts_with("e3b0c442"));
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A compiled plugin, ready to instantiate. Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    path: PathBuf,
    sha256: String,
    size: u64,
    component: Component,
    pre: OperatorPre<InstanceState>,
    info: OperatorInfo,
    /// Whether it reads rows (`row-input.reads-rows`).
    reads_rows: bool,
    fuel: bool,
    /// The `.wasm` bytes, to compile a fuel-metered copy when needed.
    bytes: Arc<[u8]>,
    /// The runtime that compiled it.
    runtime: Runtime,
    /// The fuel-metered copy, once made.
    metered: OnceLock<Result<Plugin, String>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.inner.path)
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// What the plugin says about itself.
    pub fn info(&self) -> &OperatorInfo {
        &self.inner.info
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// sha256 of the `.wasm` file, lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.inner.sha256
    }

    /// The `.wasm` bytes it was compiled from.
    pub fn bytes(&self) -> &[u8] {
        &self.inner.bytes
    }

    /// Size of the `.wasm` file in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// The compiled component.
    pub fn component(&self) -> &Component {
        &self.inner.component
    }

    pub(super) fn pre(&self) -> &OperatorPre<InstanceState> {
        &self.inner.pre
    }

    /// Whether the plugin exports `flat-lifecycle` (world `operator-flat`),
    /// so batches cross the boundary in flat form.
    pub fn flat(&self) -> bool {
        self.inner.pre.has_flat()
    }

    /// Whether the plugin reads rows (it exports `row-input` and says so,
    /// and takes batches in flat form): the records it receives keep
    /// their rows ([`Batch::check_rows`](crate::Batch::check_rows)) instead
    /// of becoming JSON text.
    pub fn reads_rows(&self) -> bool {
        self.inner.reads_rows
    }

    /// Whether the runtime that compiled this plugin meters fuel.
    pub fn fuel_metered(&self) -> bool {
        self.inner.fuel
    }

    /// This plugin compiled with fuel metering: itself when its runtime
    /// meters fuel, else a copy compiled once by a metering twin of its
    /// runtime (same file, sha256 and `describe` result).
    pub fn metered(&self) -> Result<Plugin, String> {
        if self.inner.fuel {
            return Ok(self.clone());
        }
        self.inner
            .metered
            .get_or_init(|| {
                let rt = self.inner.runtime.metered()?;
                let (component, pre) = rt
                    .compile(&self.inner.path, &self.inner.bytes)
                    .map_err(|e| e.to_string())?;
                let i = &self.inner;
                Ok(Plugin {
                    inner: Arc::new(PluginInner {
                        path: i.path.clone(),
                        sha256: i.sha256.clone(),
                        size: i.size,
                        component,
                        pre,
                        info: i.info.clone(),
                        reads_rows: i.reads_rows,
                        fuel: true,
                        bytes: i.bytes.clone(),
                        runtime: rt,
                        metered: OnceLock::new(),
                    }),
                })
            })
            .clone()
    }

    /// Calls `describe` (and `row-input.reads-rows` when exported) in a
    /// throwaway store with default limits (where `emit` and state writes
    /// trap) and checks what it returns.
    fn call_describe(&self) -> Result<(OperatorInfo, bool), PluginError> {
        let path = &self.inner.path;
        let fail = |message: String| PluginError::Describe {
            path: path.clone(),
            message,
        };
        let label = path
            .file_name()
            .map_or_else(|| "plugin".into(), |n| n.to_string_lossy().into_owned());
        let data = InstanceState::new(&label, Limits::default(), Grants::default());
        let mut store = data.into_store(self.inner.pre.engine());
        let bindings = self.inner.pre.instantiate(&mut store).map_err(|e| {
            fail(format!(
                "instantiation failed: {}",
                describe_error(&store, e)
            ))
        })?;
        begin_call(&mut store, Hook::Describe);
        let info = bindings
            .weir_operator_lifecycle()
            .call_describe(&mut store)
            .map_err(|e| fail(format!("trapped: {}", describe_error(&store, e))))?;
        let reads_rows = match bindings.weir_operator_row_input() {
            Some(rows) if self.flat() => (rows.call_reads_rows(&mut store)).map_err(|e| {
                fail(format!(
                    "`reads-rows` trapped: {}",
                    describe_error(&store, e)
                ))
            })?,
            _ => false,
        };
        check_name("name", &info.name).map_err(&fail)?;
        check_name("version", &info.version).map_err(&fail)?;
        if info.outputs.is_empty() && info.inputs.is_empty() {
            return Err(fail(
                "the plugin declares no input and no output ports".into(),
            ));
        }
        for (kind, ports) in [("input", &info.inputs), ("output", &info.outputs)] {
            if ports.len() > MAX_PORTS {
                return Err(fail(format!(
                    "the plugin declares {} {kind} ports; at most {MAX_PORTS} are allowed",
                    ports.len()
                )));
            }
            let mut seen = std::collections::HashSet::new();
            for p in ports {
                check_name(&format!("{kind} port name"), p).map_err(&fail)?;
                if !seen.insert(p) {
                    return Err(fail(format!("{kind} port `{p}` is declared twice")));
                }
            }
        }
        Ok((info, reads_rows))
    }
}

/// Most input or output ports a plugin may declare.
pub const MAX_PORTS: usize = 64;
/// Longest plugin name, version or port name, bytes.
pub const MAX_NAME: usize = 128;

/// A name from `describe` must be non-empty, short, and free of control
/// characters and surrounding whitespace (it appears in logs, errors and
/// checkpoints).
fn check_name(what: &str, name: &str) -> Result<(), String> {
    let shown = sanitize(name, 64);
    if name.trim().is_empty() {
        return Err(format!("the plugin's {what} is empty"));
    }
    if name.len() > MAX_NAME {
        return Err(format!(
            "the plugin's {what} `{shown}` is {} bytes long; at most {MAX_NAME} are allowed",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) || name.trim() != name {
        return Err(format!(
            "the plugin's {what} `{shown}` contains control characters or surrounding whitespace"
        ));
    }
    Ok(())
}

/// One line for a failed `describe` or instantiation.
fn describe_error(store: &wasmtime::Store<InstanceState>, e: wasmtime::Error) -> String {
    match trap_error(store.data(), Hook::Describe, e) {
        InstanceError::Trap { message, .. } => message,
        InstanceError::Limit { limit, .. } => limit.to_string(),
        other => other.to_string(),
    }
}
