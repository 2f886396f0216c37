//! Loading plugins: the wasmtime [`Runtime`] (engine and linker, one per
//! process) and a compiled [`Plugin`] (one per `.wasm` file, shared by all
//! instances of an operator).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, Store};

use crate::bindings::{Operator, OperatorPre};
use crate::instance::InstanceState;

/// What a plugin says about itself (`lifecycle.describe`).
///
/// ```
/// let info = weir::OperatorInfo {
///     name: "x".into(), version: "1.0.0".into(),
///     inputs: vec!["in".into()], outputs: vec![], state_version: 1,
/// };
/// assert_eq!(info.inputs.len(), 1);
/// ```
pub use crate::bindings::types::OperatorInfo;

/// Why a plugin could not be loaded. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read.
    #[error("{path}: cannot read plugin: {error}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file is not WebAssembly at all.
    #[error(
        "{path}: not a WebAssembly file (it does not start with the `\\0asm` magic bytes); build the plugin for wasm32-wasip2"
    )]
    NotWasm {
        /// The plugin file.
        path: PathBuf,
    },
    /// The file is a core module, not a component.
    #[error(
        "{path}: is a core WebAssembly module, not a component; build it for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule {
        /// The plugin file.
        path: PathBuf,
    },
    /// wasmtime rejected the component.
    #[error("{path}: invalid component: {message}")]
    Compile {
        /// The plugin file.
        path: PathBuf,
        /// wasmtime's explanation.
        message: String,
    },
    /// The component does not fit the `weir:operator` world.
    #[error("{path}: does not implement the weir:operator@0.1.0 world: {message}")]
    World {
        /// The plugin file.
        path: PathBuf,
        /// What is missing or mismatched.
        message: String,
    },
    /// `describe` trapped or returned nonsense.
    #[error("{path}: `describe` failed: {message}")]
    Describe {
        /// The plugin file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The wasmtime engine and the linker with Weir's host interfaces and an
/// empty WASI sandbox. Create one per process and share it.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<InstanceState>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with Weir's default engine configuration.
    ///
    /// ```
    /// let rt = weir::Runtime::new().unwrap();
    /// # drop(rt);
    /// ```
    pub fn new() -> wasmtime::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::<InstanceState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        Operator::add_to_linker::<InstanceState, HasSelf<InstanceState>>(&mut linker, |s| s)?;
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
        })
    }

    /// The wasmtime engine.
    ///
    /// ```
    /// let rt = weir::Runtime::new().unwrap();
    /// let _engine: &wasmtime::Engine = rt.engine();
    /// ```
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

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
        let sha256 = hex(&Sha256::digest(&bytes));
        let component = Component::new(&self.engine, &bytes).map_err(|e| PluginError::Compile {
            path: path.clone(),
            message: format!("{e:#}"),
        })?;
        let instance_pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| PluginError::World {
                    path: path.clone(),
                    message: format!("{e:#}"),
                })?;
        let pre = OperatorPre::new(instance_pre).map_err(|e| PluginError::World {
            path: path.clone(),
            message: format!("{e:#}"),
        })?;
        let mut plugin = Plugin {
            inner: Arc::new(PluginInner {
                path,
                sha256,
                size: bytes.len() as u64,
                component,
                pre,
                info: OperatorInfo {
                    name: String::new(),
                    version: String::new(),
                    inputs: Vec::new(),
                    outputs: Vec::new(),
                    state_version: 0,
                },
            }),
        };
        let info = plugin.call_describe()?;
        Arc::get_mut(&mut plugin.inner)
            .expect("not shared yet")
            .info = info;
        Ok(plugin)
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    /// Size of the `.wasm` file in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// The compiled component.
    pub fn component(&self) -> &Component {
        &self.inner.component
    }

    pub(crate) fn pre(&self) -> &OperatorPre<InstanceState> {
        &self.inner.pre
    }

    fn call_describe(&self) -> Result<OperatorInfo, PluginError> {
        let path = &self.inner.path;
        let fail = |message: String| PluginError::Describe {
            path: path.clone(),
            message,
        };
        let mut store = Store::new(self.inner.pre.engine(), InstanceState::new("describe", 0));
        let bindings = self
            .inner
            .pre
            .instantiate(&mut store)
            .map_err(|e| fail(format!("instantiation trapped: {e:#}")))?;
        let info = bindings
            .weir_operator_lifecycle()
            .call_describe(&mut store)
            .map_err(|e| fail(format!("trapped: {e:#}")))?;
        if info.name.trim().is_empty() {
            return Err(fail("the plugin's name is empty".into()));
        }
        if info.outputs.is_empty() && info.inputs.is_empty() {
            return Err(fail(
                "the plugin declares no input and no output ports".into(),
            ));
        }
        for (kind, ports) in [("input", &info.inputs), ("output", &info.outputs)] {
            let mut seen = std::collections::HashSet::new();
            for p in ports {
                if !seen.insert(p) {
                    return Err(fail(format!("{kind} port `{p}` is declared twice")));
                }
            }
        }
        Ok(info)
    }
}
