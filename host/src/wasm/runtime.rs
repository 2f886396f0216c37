//! The wasmtime [`Runtime`]: one engine and one linker per process, shared
//! by every plugin. The engine uses epoch interruption (a background thread
//! ticks the epoch every [`EPOCH_TICK`]) so every call can be bounded by a
//! wall-clock deadline, optionally fuel metering, and Weir's wasm stack
//! size. The linker holds WASI 0.2 (the sandbox of `wasi.rs`) and Weir's
//! interfaces (`host/`). Loading plugins with it is in `plugin.rs`.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::error::PluginError;
use super::instance_state::InstanceState;
use super::limiter::WASM_STACK;
use super::{compile_cache, host, wasi};
use crate::wit::OperatorPre;

/// How often the runtime's epoch thread ticks. Call deadlines are checked
/// at every tick, so a plugin is stopped at most about this long after its
/// deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Engine settings of a [`Runtime`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Compile every plugin with fuel metering. Compiled code then counts
    /// instructions, which makes plugins slower (see `SECURITY.md`); off by
    /// default. Without it, an operator that sets `limits.fuel` gets a copy
    /// of its plugin compiled with metering
    /// ([`Plugin::metered`](super::Plugin::metered)), so only that operator
    /// pays for it.
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
    /// use weir::wasm::RuntimeOptions;
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
        wasi::add_to_linker(&mut linker)?;
        host::add_to_linker(&mut linker)?;
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            options,
            metered: Arc::new(OnceLock::new()),
        })
    }

    /// This runtime if it meters fuel, else its twin that does (made once).
    pub(super) fn metered(&self) -> Result<Runtime, String> {
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

    /// Compiles `bytes` and pre-instantiates it against the linker.
    pub(super) fn compile(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Component, OperatorPre<InstanceState>), PluginError> {
        let path = path.to_path_buf();
        let component = compile_cache::compile(&self.engine, &path, bytes).map_err(|e| {
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
