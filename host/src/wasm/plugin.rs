//! Loading plugins: the wasmtime [`Runtime`] (engine and linker, one per
//! process) and a compiled [`Plugin`] (one per `.wasm` file, shared by all
//! instances of an operator).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, Resource};
use wasmtime::{Config, Engine, StoreContextMut};
use wasmtime_wasi::p2::DynPollable;

use crate::config::{Grants, Limits};
use crate::wasm::instance::{InstanceState, WASM_STACK, begin_call};
use crate::wit::{Imports, OperatorPre};

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

/// How often the runtime's epoch thread ticks. Call deadlines are checked
/// at every tick, so a plugin is stopped at most about this long after its
/// deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The `wasi:clocks/monotonic-clock` interface whose sleeps Weir replaces.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Engine settings of a [`Runtime`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Compile every plugin with fuel metering. Compiled code then counts
    /// instructions, which makes plugins slower (see `SECURITY.md`); off by
    /// default. Without it, an operator that sets `limits.fuel` gets a copy
    /// of its plugin compiled with metering ([`Plugin::metered`]), so only
    /// that operator pays for it.
    pub fuel: bool,
}

/// The wasmtime engine and the linker with Weir's host interfaces and an
/// empty WASI sandbox. Create one per process and share it.
///
/// Every call into a plugin is bounded by a wall-clock deadline: the engine
/// uses epoch interruption and a background thread advances the epoch every
/// [`EPOCH_TICK`] for as long as the engine (or any plugin compiled with it)
/// is alive.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<InstanceState>>,
    options: RuntimeOptions,
    /// A twin with fuel metering, made when an operator sets `limits.fuel`
    /// on a runtime without it.
    metered: Arc<OnceLock<Result<Runtime, String>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with Weir's default engine configuration (no fuel
    /// metering).
    ///
    /// ```
    /// let rt = weir::Runtime::new().unwrap();
    /// # drop(rt);
    /// ```
    pub fn new() -> wasmtime::Result<Self> {
        Self::with_options(RuntimeOptions::default())
    }

    /// A runtime for `job`: every plugin compiled with fuel metering when
    /// one of its operators sets `limits.fuel`, else as [`new`](Self::new).
    /// (With [`new`](Self::new), only the operators that set fuel get a
    /// metered copy of their plugin, compiled on first use.)
    pub fn for_job(job: &crate::config::Job) -> wasmtime::Result<Self> {
        Self::with_options(RuntimeOptions {
            fuel: job.operators.iter().any(|op| op.limits.fuel.is_some()),
        })
    }

    /// A runtime with explicit engine settings.
    ///
    /// ```
    /// use weir::wasm::plugin::RuntimeOptions;
    /// let rt = weir::Runtime::with_options(RuntimeOptions { fuel: true }).unwrap();
    /// assert!(rt.options().fuel);
    /// ```
    pub fn with_options(options: RuntimeOptions) -> wasmtime::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.consume_fuel(options.fuel);
        config.max_wasm_stack(WASM_STACK);
        config.profiler(profiler_from_env()?);
        let engine = Engine::new(&config)?;
        spawn_epoch_ticker(&engine)?;
        let mut linker = Linker::<InstanceState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        replace_sleeps(&mut linker)?;
        Imports::add_to_linker::<InstanceState, HasSelf<InstanceState>>(&mut linker, |s| s)?;
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            options,
            metered: Arc::new(OnceLock::new()),
        })
    }

    /// This runtime if it meters fuel, else its twin that does (made once).
    fn metered(&self) -> Result<Runtime, String> {
        if self.options.fuel {
            return Ok(self.clone());
        }
        self.metered
            .get_or_init(|| {
                let mut options = self.options;
                options.fuel = true;
                Runtime::with_options(options).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    /// The engine settings.
    pub fn options(&self) -> RuntimeOptions {
        self.options
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
        let (component, pre) = self.compile(&path, &bytes)?;
        let mut plugin = Plugin {
            inner: Arc::new(PluginInner {
                path,
                sha256,
                size: bytes.len() as u64,
                component,
                pre,
                fuel: self.options.fuel,
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
            }),
        };
        let info = plugin.call_describe()?;
        Arc::get_mut(&mut plugin.inner)
            .expect("not shared yet")
            .info = info;
        Ok(plugin)
    }

    /// Compiles `bytes` and pre-instantiates it against the linker.
    fn compile(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Component, OperatorPre<InstanceState>), PluginError> {
        let path = path.to_path_buf();
        let component = crate::wasm::compile_cache::compile(&self.engine, bytes).map_err(|e| {
            PluginError::Compile {
                path: path.clone(),
                message: format!("{e:#}"),
            }
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
        Ok((component, pre))
    }
}

/// The JIT profiling agent that the environment variable `WEIR_PROFILER`
/// asks for: `perfmap` makes wasmtime write `/tmp/perf-<pid>.map`, so that
/// `perf report` names the plugins' functions (docs/performance.md);
/// unset, empty or `none` for no agent.
fn profiler_from_env() -> wasmtime::Result<wasmtime::ProfilingStrategy> {
    use wasmtime::ProfilingStrategy;
    match std::env::var("WEIR_PROFILER").as_deref() {
        Err(_) | Ok("" | "none") => Ok(ProfilingStrategy::None),
        Ok("perfmap") => Ok(ProfilingStrategy::PerfMap),
        Ok(other) => Err(wasmtime::format_err!(
            "WEIR_PROFILER={other:?} is not a profiling agent: use `perfmap` or `none`"
        )),
    }
}

/// Starts the thread that advances `engine`'s epoch every [`EPOCH_TICK`].
/// It holds only a weak reference and ends when the engine is dropped (the
/// engine lives as long as the runtime, any plugin or any store made from it).
fn spawn_epoch_ticker(engine: &Engine) -> wasmtime::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("weir-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })?;
    Ok(())
}

/// Replaces `subscribe-duration` and `subscribe-instant` of
/// `wasi:clocks/monotonic-clock`: without the clocks grant a sleep returns at
/// once (time does not pass in the sandbox); with it, a sleep ends at the
/// call's deadline at the latest. Otherwise a plugin could block its thread
/// in the host, where the epoch deadline cannot interrupt it.
fn replace_sleeps(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    type Pollable = wasmtime::Result<(Resource<DynPollable>,)>;
    fn sleep(mut store: StoreContextMut<'_, InstanceState>, nanos: u64) -> Pollable {
        let (granted, deadline) = store.data().clock_grant();
        let table = store.data_mut().table();
        Ok((crate::wasm::sandbox::subscribe_sleep(
            table, nanos, granted, deadline,
        )?,))
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("subscribe-duration", |store, (nanos,): (u64,)| {
        sleep(store, nanos)
    })?;
    clock.func_wrap("subscribe-instant", |store, (when,): (u64,)| {
        // The sandbox's monotonic clock reads 0 without the grant, so
        // `when` is the sleep; with it, subtract the real clock.
        let (granted, _) = store.data().clock_grant();
        let now = if granted {
            wasmtime_wasi::HostMonotonicClock::now(&*wasmtime_wasi::clocks::monotonic_clock())
        } else {
            0
        };
        sleep(store, when.saturating_sub(now))
    })?;
    linker.allow_shadowing(false);
    Ok(())
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

    /// Whether the plugin exports `flat-lifecycle` (world `operator-flat`),
    /// so batches cross the boundary in flat form.
    pub fn flat(&self) -> bool {
        self.inner.pre.has_flat()
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
                        fuel: true,
                        bytes: i.bytes.clone(),
                        runtime: rt,
                        metered: OnceLock::new(),
                    }),
                })
            })
            .clone()
    }

    /// Calls `describe` in a throwaway store with default limits (where
    /// `emit` and state writes trap) and checks what it returns.
    fn call_describe(&self) -> Result<OperatorInfo, PluginError> {
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
        begin_call(&mut store, "describe");
        let info = bindings
            .weir_operator_lifecycle()
            .call_describe(&mut store)
            .map_err(|e| fail(format!("trapped: {}", describe_error(&store, e))))?;
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
        Ok(info)
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
    let shown = crate::wasm::instance::sanitize(name, 64);
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
    use crate::wasm::instance::InstanceError;
    match crate::wasm::instance::trap_error(store.data(), "describe", e) {
        InstanceError::Trap { message, .. } => message,
        InstanceError::Limit { limit, .. } => limit.to_string(),
        other => other.to_string(),
    }
}
