//! The `weir` command line: a thin layer over the `weir` library.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use weir::run::RestoreMode;
use weir_cli::inspect::ValueFormat;
use weir_cli::shadow::Recorded;

mod job_run;

#[cfg(test)]
mod reference_docs;

/// Exit status of `weir state` when there is nothing to print.
const NO_STATE: u8 = 3;
/// Exit code of `weir replay` and `weir shadow` when the runs differ (or
/// the shadow's rule fails).
const DIFFERENT: u8 = 4;

/// Weir: stream processing with WebAssembly operators.
#[derive(Parser)]
#[command(name = "weir", version, about, long_about = None)]
struct Cli {
    /// More log output (-v: info, -vv: debug). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// What `weir deadletter` does.
#[derive(Subcommand)]
enum Deadletter {
    /// Sum up the dead letters of each dead-letter sink (a file, a Kafka
    /// topic) by the node that met them and their error.
    #[command(
        after_help = "Examples:\n  weir deadletter ls job.toml\n  weir deadletter ls job.toml --sink rejects --json"
    )]
    Ls {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
        /// Only this dead-letter sink.
        #[arg(long)]
        sink: Option<String>,
        /// Print one JSON document (`sinks`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Queue an operator's dead letters for replay into it, exactly once
    /// (after a fixed plugin was swapped in): a running job whose input
    /// does not end replays them at once, any other job at its next
    /// `weir run`. Letters that fail again go to the dead letters again.
    #[command(after_help = "Examples:
  weir deadletter replay job.toml --operator reconcile
  weir deadletter replay job.toml --operator reconcile --error-kind trap
  weir deadletter replay job.toml --operator reconcile --from fixed-letters.jsonl")]
    Replay {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
        /// The operator whose dead letters go back into it.
        #[arg(long)]
        operator: String,
        /// Read the letters from this dead-letter sink (default: the one
        /// the operator's `on_error` names).
        #[arg(long, conflicts_with = "from")]
        sink: Option<String>,
        /// Read the letters from this file, one JSON object per line.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Only letters of this kind (`trap`, `invalid-input`, `failed`).
        #[arg(long, value_name = "KIND")]
        error_kind: Option<String>,
        /// The job's state directory, if not its `[checkpoint] dir`.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Run a job until its input ends (or Ctrl-C, which checkpoints and stops).
    #[command(
        after_help = "Examples:\n  weir run examples/wordcount/job.toml\n  weir run job.toml --restore none        # start over\n  weir run job.toml --restore 12          # resume from checkpoint 12"
    )]
    Run(job_run::RunArgs),
    /// Take a savepoint of a running job: a checkpoint written as a
    /// self-contained directory that `weir run --from-savepoint` starts from.
    #[command(
        after_help = "Examples:\n  weir savepoint examples/wordcount                       # into <state dir>/savepoints/savepoint-<id>\n  weir savepoint examples/wordcount --out /backups/wc-v1\n  weir savepoint examples/wordcount --out /backups/wc-v1 --stop   # then stop the job\n  weir run examples/wordcount --state-dir /tmp/wc2 --from-savepoint /backups/wc-v1"
    )]
    Savepoint {
        #[command(flatten)]
        job: RunningJob,
        /// The savepoint directory to write (must not exist); default
        /// `<state dir>/savepoints/savepoint-<checkpoint id>`.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Stop the job once the savepoint is written.
        #[arg(long)]
        stop: bool,
    },
    /// Replace an operator's plugin in a running job, at a checkpoint,
    /// keeping its state; rolls back if the new plugin fails.
    #[command(
        after_help = "Examples:\n  weir swap examples/hot-swap/state count=plugins/target/word-count-v2.wasm"
    )]
    Swap {
        #[command(flatten)]
        job: RunningJob,
        /// The operator and its new plugin.
        #[arg(value_name = "OPERATOR=NEW.wasm", value_parser = parse_swap)]
        swap: (String, PathBuf),
        /// Try the new plugin on the operator's recorded input first (`weir
        /// shadow`, every recorded epoch) and swap only if it never traps
        /// and meets --max-changed and --max-errors. Needs the job file.
        #[arg(long)]
        shadow: bool,
        /// With --shadow: most records it may emit otherwise than the
        /// running plugin did (changed or only in one run).
        #[arg(long, value_name = "K", requires = "shadow")]
        max_changed: Option<u64>,
        /// With --shadow: most calls that may return an error or refuse
        /// records (a trap always refuses the swap).
        #[arg(long, value_name = "K", requires = "shadow", default_value_t = 0)]
        max_errors: u64,
    },
    /// Run one recorded epoch of an operator again with the plugin that ran
    /// it, from the checkpoint before it, and check that it emits the same
    /// bytes and ends in the checkpoint's state (the operator must set
    /// `record_inputs`). Exits 4 when anything differs.
    #[command(after_help = "Examples:
  weir replay job.toml --operator count --checkpoint 12
  weir replay job.toml --operator count --checkpoint 12 --log calls.txt --json")]
    Replay {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
        /// The operator.
        #[arg(long)]
        operator: String,
        /// The checkpoint whose epoch to run again.
        #[arg(long, value_name = "N")]
        checkpoint: u64,
        /// Write every call made again, one line each, with every host call
        /// it made, to this file.
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// The job's state directory, if not its `[checkpoint] dir`.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Read the checkpoints and recordings from the job's object store
        /// (`[checkpoint] store`), as its newest checkpoint kept them,
        /// instead of the state directory (read from the store anyway
        /// when the state directory has none).
        #[arg(long)]
        from_store: bool,
        /// In a job run by `weir run --worker`: the task whose checkpoints
        /// to read (`weir workers` lists them).
        #[arg(long, value_name = "STAGE-P")]
        task: Option<weir::cluster::TaskId>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Try another plugin on an operator's recorded input: from the state
    /// of a checkpoint (migrated by the new plugin's `restore`), on the
    /// recorded epochs after it, touching no sink; report the records and
    /// state keys that differ from what the running plugin emitted and
    /// kept, errors and traps, and the CPU and memory of each. Exits 4 when
    /// the new plugin traps or breaks --max-changed / --max-errors.
    #[command(after_help = "Examples:
  weir shadow job.toml --operator count --with plugins/target/word-count-v2.wasm
  weir shadow job.toml --operator count --with v2.wasm --from-checkpoint 10 --to 14 --json
  weir shadow job.toml --operator count --with v2.wasm --max-changed 0   # in CI")]
    Shadow {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
        /// The operator.
        #[arg(long)]
        operator: String,
        /// The plugin to try.
        #[arg(long, value_name = "V2.wasm")]
        with: PathBuf,
        /// Start from this checkpoint's state (0: the job's start)
        /// [default: the oldest the recordings allow].
        #[arg(long, value_name = "N")]
        from_checkpoint: Option<u64>,
        /// End with this checkpoint's epoch [default: the newest recorded].
        #[arg(long, value_name = "M")]
        to: Option<u64>,
        /// Most differences listed per port and in the state.
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Most records that may differ before the exit code says so.
        #[arg(long, value_name = "K")]
        max_changed: Option<u64>,
        /// Most failed calls and refused records (no trap) allowed.
        #[arg(long, value_name = "K", default_value_t = 0)]
        max_errors: u64,
        /// The job's state directory, if not its `[checkpoint] dir`.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Read the checkpoints and recordings from the job's object store
        /// (`[checkpoint] store`), as its newest checkpoint kept them,
        /// instead of the state directory (read from the store anyway
        /// when the state directory has none).
        #[arg(long)]
        from_store: bool,
        /// In a job run by `weir run --worker`: the task whose checkpoints
        /// to read (`weir workers` lists them).
        #[arg(long, value_name = "STAGE-P")]
        task: Option<weir::cluster::TaskId>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a job in worker mode: the workers in its group, the tasks each
    /// runs, and every task's newest checkpoint in the store and its lag.
    #[command(after_help = "Examples:\n  weir workers job.toml\n  weir workers job.toml --json")]
    Workers {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
        /// Print one JSON document (`group`, `tasks`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The dead letters of a job (what `on_error` sent to a sink), read back
    /// from its dead-letter sinks.
    #[command(subcommand)]
    Deadletter(Deadletter),
    /// Check a job file and load every plugin (world, ports, config via `open`) without running it.
    #[command(after_help = "Examples:\n  weir validate examples/reconcile/job.toml")]
    Validate {
        /// The job file, or a folder holding a job.toml.
        job: PathBuf,
    },
    /// List the complete checkpoints in a state directory.
    #[command(
        after_help = "Examples:\n  weir checkpoints examples/wordcount/job.toml\n  weir checkpoints examples/wordcount/state\n  weir checkpoints --json examples/wordcount | jq '.[-1].sources'"
    )]
    Checkpoints {
        /// The state directory (the job's checkpoint.dir), or the job file
        /// or job folder, for its state directory.
        state_dir: PathBuf,
        /// Print a JSON array (stable shape, see docs/reference/cli.md) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print an operator's host-owned state from a checkpoint as JSON lines,
    /// or with --timers its pending timers and watermark per instance,
    /// without loading the plugin. Exit status 3: nothing to print (the
    /// operator has no keyed state there, no pending timers with --timers,
    /// or no entry matches --key).
    #[command(
        after_help = "Examples:\n  weir state examples/wordcount --operator count\n  weir state examples/wordcount/state --operator count --key weir\n  weir state examples/hot-swap --operator count --format hex\n  weir state examples/reconcile/job.toml --operator reconcile --checkpoint 3 --json\n  weir state job.toml --timers                # every operator's pending timers\n  weir state job.toml --timers --operator sessions --json"
    )]
    State {
        /// The state directory (the job's checkpoint.dir), or the job file
        /// or job folder, for its state directory.
        state_dir: PathBuf,
        /// The operator's id in the job file (with --timers: default, every
        /// operator with pending timers).
        #[arg(long, required_unless_present = "timers")]
        operator: Option<String>,
        /// Checkpoint id (default: the latest).
        #[arg(long)]
        checkpoint: Option<u64>,
        /// Only this key (also matches SDK map entries `<key>\0<name>`).
        #[arg(long)]
        key: Option<String>,
        /// How values are shown: auto (JSON, row values as the JSON
        /// objects of their fields, text, else {"hex": ...}), utf8, hex or
        /// base64.
        #[arg(long, value_enum, default_value_t)]
        format: ValueFormat,
        /// Print one JSON document with encodings instead of JSON lines
        /// (with --timers: instead of text).
        #[arg(long)]
        json: bool,
        /// List pending timers (domain, time, key) and the watermark per
        /// instance instead of keyed state.
        #[arg(long, conflicts_with = "format")]
        timers: bool,
    },
    /// Show a plugin's name, version, ports, state version, imports, exports,
    /// size and sha256, without running it.
    #[command(
        after_help = "Examples:\n  weir inspect plugins/target/word-count.wasm\n  weir inspect --json plugins/target/reconcile.wasm | jq .inputs"
    )]
    Inspect {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        /// Print JSON (stable shape, see docs/reference/cli.md) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create a plugin (a Rust crate, or a Python package with --lang python)
    /// that builds to a component and passes its own tests out of the box.
    #[command(
        after_help = "Examples:\n  weir new my-counter                 # creates ./my-counter (Rust)\n  weir new tally --lang python        # creates ./tally (Python, weir_sdk)\n  weir new enrich --dir ~/src         # creates ~/src/enrich\n  weir new my-op --sdk ../weir/sdk    # depend on another weir-sdk checkout"
    )]
    New {
        /// The crate name: lowercase letters, digits, `-` and `_`, starting with a letter.
        name: String,
        /// Folder to create the crate in: it goes to DIR/NAME.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The weir-sdk crate to depend on [default: the sdk/ folder of the
        /// Weir checkout this binary was built from]; a Python plugin uses
        /// its python/ folder and the checkout's scripts/python-sdk.sh.
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// The plugin's language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: weir_cli::scaffold::Lang,
    },
}

fn parse_swap(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((op, path)) if !op.is_empty() && !path.is_empty() => {
            Ok((op.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("`{s}` is not OPERATOR=NEW.wasm")),
    }
}

fn parse_restore(s: &str) -> Result<RestoreMode, String> {
    s.parse()
}

/// `--progress-every`: a duration as job files write it, or a bare number
/// of seconds (as before durations were accepted).
fn parse_every(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("`{s}` is not a number of seconds >= 0")),
        Err(_) => weir::config::parse_duration(s),
    }
}

/// `--metrics` and `--ui`: a bare port listens on the loopback interface.
fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)));
    }
    let resolved = s.to_socket_addrs().ok().and_then(|mut addrs| addrs.next());
    resolved.ok_or_else(|| {
        format!("`{s}` is not a port (9400) or an address HOST:PORT (127.0.0.1:9400)")
    })
}

/// `weir swap --shadow`: runs the shadow of `plugin` on every recorded
/// epoch of `operator` and fails unless the report meets `rule`.
fn guard_swap(
    path: &Path,
    operator: &str,
    plugin: &Path,
    rule: weir::shadow::Rule,
) -> anyhow::Result<()> {
    if weir_cli::stored::job_of(path)?.is_none() {
        anyhow::bail!(
            "--shadow needs the job's file to run the operator's recorded input: name the job file or its folder instead of {}",
            path.display()
        );
    }
    let recorded = weir_cli::shadow::Recorded::open(path, None, false, None)?;
    let range = weir::shadow::Range::default();
    let report = recorded.shadow(operator, plugin, range, 20)?;
    eprint!("{}", weir_cli::shadow::shadow_text(&report));
    rule.check(&report)
        .map_err(|why| anyhow::anyhow!("swap of `{operator}` refused by its shadow run: {why}"))
}

/// The state directory a `weir swap`/`savepoint` argument names: a state
/// directory as it is, or, for a job file or a job folder (a folder with a
/// job.toml and no checkpoint store), the job's state directory.
fn state_dir_arg(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(match weir_cli::stored::job_of(path)? {
        Some(job) => weir::run::state_dir(&job, None),
        None => path.to_path_buf(),
    })
}

/// Why `--{flag} ADDR` could not listen.
fn listen_error(flag: &str, addr: SocketAddr, e: std::io::Error) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "--{flag} {addr}: the port is in use by another process; pick another port, or 0 for a free one"
        ),
        _ => anyhow::anyhow!("--{flag} {addr}: cannot listen there ({e}); pick another address"),
    }
}

/// The outcome of a control-socket request (`weir swap`, `weir
/// savepoint`): its message on stdout, or the error naming `what` failed.
/// A running job, reached through its control socket.
#[derive(clap::Args)]
struct RunningJob {
    /// The running job's state directory, or its job file or job folder.
    state_dir: PathBuf,
    /// Seconds to wait for the outcome.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Seconds to wait for a job that is starting to open its control
    /// socket.
    #[arg(long, default_value_t = 10)]
    wait: u64,
}

impl RunningJob {
    /// Sends the job a request with `send(state dir, wait, timeout)` and
    /// prints its answer; a refusal fails with "`what` failed: …".
    fn ask(
        &self,
        what: &str,
        send: impl FnOnce(&Path, Duration, Duration) -> Result<String, String>,
    ) -> anyhow::Result<ExitCode> {
        let state_dir = state_dir_arg(&self.state_dir)?;
        let (wait, timeout) = (
            Duration::from_secs(self.wait),
            Duration::from_secs(self.timeout),
        );
        match send(&state_dir, wait, timeout) {
            Ok(message) => {
                weir_cli::output::stdout(&format!("{message}\n"))?;
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => anyhow::bail!("{what} failed: {e}"),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    weir_cli::output::init_logging(cli.verbose);
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            weir_cli::output::message(format_args!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<weir::Runtime> {
    weir::Runtime::new()
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("starting wasmtime")
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => job_run::run(args),
        Command::Swap {
            job,
            swap: (operator, plugin),
            shadow,
            max_changed,
            max_errors,
        } => {
            if shadow {
                let rule = weir::shadow::Rule {
                    max_changed,
                    max_errors,
                };
                guard_swap(&job.state_dir, &operator, &plugin, rule)?;
            }
            job.ask(&format!("swap of `{operator}`"), |dir, wait, timeout| {
                weir::run::request_swap(dir, &operator, &plugin, wait, timeout)
            })
        }
        Command::Replay {
            job,
            operator,
            checkpoint,
            log,
            state_dir,
            from_store,
            task,
            json,
        } => {
            let recorded = Recorded::open(&job, state_dir.as_deref(), from_store, task)?;
            let report = weir::shadow::replay(
                &recorded.job,
                recorded.checkpoints(),
                &operator,
                checkpoint,
                log.is_some(),
            )?;
            if let Some(path) = log {
                let lines: Vec<&str> = (report.instances.iter())
                    .flat_map(|i| i.log.iter().map(String::as_str))
                    .collect();
                std::fs::write(&path, lines.join("\n") + "\n")
                    .with_context(|| format!("writing --log {}", path.display()))?;
            }
            let out = match json {
                true => format!("{}\n", serde_json::to_string_pretty(&report)?),
                false => weir_cli::shadow::replay_text(&report),
            };
            weir_cli::output::stdout(&out)?;
            Ok(match report.identical {
                true => ExitCode::SUCCESS,
                false => ExitCode::from(DIFFERENT),
            })
        }
        Command::Shadow {
            job,
            operator,
            with,
            from_checkpoint,
            to,
            limit,
            max_changed,
            max_errors,
            state_dir,
            from_store,
            task,
            json,
        } => {
            let recorded = Recorded::open(&job, state_dir.as_deref(), from_store, task)?;
            let range = weir::shadow::Range {
                from: from_checkpoint,
                to,
            };
            let report = recorded.shadow(&operator, &with, range, limit)?;
            let out = match json {
                true => format!("{}\n", serde_json::to_string_pretty(&report)?),
                false => weir_cli::shadow::shadow_text(&report),
            };
            weir_cli::output::stdout(&out)?;
            let rule = weir::shadow::Rule {
                max_changed,
                max_errors,
            };
            Ok(match rule.check(&report) {
                Ok(()) => ExitCode::SUCCESS,
                Err(why) => {
                    eprintln!("weir: {why}");
                    ExitCode::from(DIFFERENT)
                }
            })
        }
        Command::Savepoint { job, out, stop } => job.ask("savepoint", |dir, wait, timeout| {
            weir::run::request_savepoint(dir, out.as_deref(), stop, wait, timeout)
        }),
        Command::Workers { job, json } => {
            let stages = weir_cli::workers::view(&job)?;
            let out = match json {
                true => format!(
                    "{}\n",
                    serde_json::to_string_pretty(&serde_json::json!({ "stages": stages }))?
                ),
                false => weir_cli::workers::text(&stages),
            };
            weir_cli::output::stdout(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Deadletter(Deadletter::Ls { job, sink, json }) => {
            let sinks = weir_cli::deadletter::ls(&job, sink.as_deref())?;
            let out = match json {
                true => format!(
                    "{}\n",
                    serde_json::to_string_pretty(&serde_json::json!({ "sinks": sinks }))?
                ),
                false => weir_cli::deadletter::text(&sinks),
            };
            weir_cli::output::stdout(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Deadletter(Deadletter::Replay {
            job,
            operator,
            sink,
            from,
            error_kind,
            state_dir,
            json,
        }) => {
            use weir_cli::deadletter::replay;
            let letters = match from {
                Some(file) => replay::Letters::File(file),
                None => replay::Letters::Sink(sink),
            };
            let r = replay::replay(
                &job,
                &operator,
                &letters,
                error_kind.as_deref(),
                state_dir.as_deref(),
            )?;
            let out = match json {
                true => format!("{}\n", serde_json::to_string_pretty(&r)?),
                false => replay::text(&r),
            };
            weir_cli::output::stdout(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate { job } => {
            let job = weir::config::Job::load(&job, &weir_connectors::registry())?;
            let rt = runtime()?;
            let report = weir::run::validate(&job, &rt)?;
            weir_cli::output::stdout(&report)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoints { state_dir, json } => {
            use weir_cli::stored::Inspect;
            let (job, metas, state_dir) = match Inspect::of(&state_dir)? {
                Inspect::Store(url, options) => {
                    let (job, metas) = weir_cli::stored::list(&url, &options)?;
                    (job, metas, PathBuf::from(url))
                }
                Inspect::Dir(state_dir) => {
                    let store = weir::store::CheckpointStore::open_existing(&state_dir)?;
                    (Some(store.job()?), store.list()?, state_dir)
                }
            };
            let reports: Vec<_> = (metas.into_iter())
                .map(weir_cli::inspect::CheckpointReport::of)
                .collect();
            let text = if json {
                format!("{}\n", serde_json::to_string_pretty(&reports)?)
            } else if reports.is_empty() {
                format!("no complete checkpoints in {}\n", state_dir.display())
            } else {
                let mut text = format!(
                    "job `{}`: {} complete checkpoint(s)\n",
                    job.unwrap_or_default(),
                    reports.len()
                );
                for r in &reports {
                    text.push_str(&r.to_text());
                }
                text
            };
            weir_cli::output::stdout(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::State {
            state_dir,
            operator,
            checkpoint,
            key,
            format,
            json,
            timers,
        } => {
            let what = weir_cli::stored::Inspect::of(&state_dir)?;
            let inspected = weir_cli::stored::inspected(&what, checkpoint)?;
            let state_dir = inspected.dir.clone();
            let key = key.as_deref();
            let printed = match (timers, operator) {
                (true, operator) => {
                    list_timers(&state_dir, operator.as_deref(), checkpoint, key, json)?
                }
                (false, Some(operator)) => {
                    state(&state_dir, &operator, checkpoint, key, format, json)?
                }
                (false, None) => anyhow::bail!("--operator ID is required without --timers"),
            };
            Ok(if printed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(NO_STATE)
            })
        }
        Command::Inspect { plugin, json } => {
            let rt = runtime()?;
            let loaded = rt.load(&plugin)?;
            let report = weir_cli::inspect::PluginReport::of(&loaded, rt.engine());
            let text = if json {
                format!("{}\n", serde_json::to_string_pretty(&report)?)
            } else {
                report.to_text()
            };
            weir_cli::output::stdout(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::New {
            name,
            dir,
            sdk,
            lang,
        } => {
            let sdk = sdk.unwrap_or_else(weir_cli::scaffold::default_sdk_dir);
            let files = weir_cli::scaffold::scaffold(&name, &dir, &sdk, lang)?;
            let summary = weir_cli::scaffold::summary(&name, &dir, &files, lang);
            weir_cli::output::stdout(&summary)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The store in `state_dir` and its checkpoint `checkpoint` (default: the
/// latest).
fn open_checkpoint(
    state_dir: &Path,
    checkpoint: Option<u64>,
) -> anyhow::Result<(weir::store::CheckpointStore, weir::store::CheckpointMeta)> {
    let store = weir::store::CheckpointStore::open_existing(state_dir)?;
    let meta = match checkpoint {
        Some(id) => store.get(id)?.with_context(|| {
            format!(
                "no complete checkpoint {id} in {}; `weir checkpoints {}` lists them",
                state_dir.display(),
                state_dir.display()
            )
        })?,
        None => store
            .latest()?
            .with_context(|| format!("no complete checkpoints in {}", state_dir.display()))?,
    };
    Ok((store, meta))
}

/// The metadata of `operator` in `meta`, or an error naming the operators
/// it has (the job's: the store's `#timers` names are not operators).
fn operator_meta<'a>(
    meta: &'a weir::store::CheckpointMeta,
    operator: &str,
) -> anyhow::Result<&'a weir::store::OperatorMeta> {
    meta.operators.get(operator).with_context(|| {
        format!(
            "checkpoint {} has no operator `{operator}` (it has: {})",
            meta.id,
            meta.operators
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The timers of `operator` at checkpoint `meta`, per instance.
fn operator_timers(
    store: &weir::store::CheckpointStore,
    meta: &weir::store::CheckpointMeta,
    operator: &str,
    key: Option<&[u8]>,
) -> anyhow::Result<Vec<weir_cli::inspect::InstanceTimers>> {
    let parallelism = operator_meta(meta, operator)?.parallelism;
    let entries = store.operator_state(meta.id, &weir::store::timer_space(operator))?;
    weir_cli::inspect::instance_timers(&entries, parallelism, key).map_err(|e| {
        anyhow::anyhow!(
            "the timers of operator `{operator}` at checkpoint {} are unreadable: {e}; the checkpoint file is damaged",
            meta.id
        )
    })
}

/// How many timers `operator` had pending at checkpoint `meta`.
fn pending_timers(
    store: &weir::store::CheckpointStore,
    meta: &weir::store::CheckpointMeta,
    operator: &str,
) -> anyhow::Result<usize> {
    let timers = operator_timers(store, meta, operator, None)?;
    Ok(weir_cli::inspect::timer_count(&timers))
}

/// Prints the pending timers `weir state --timers` selects (of `operator`,
/// or of every operator that has some); `false` (after saying why on
/// stderr) when there are none.
fn list_timers(
    state_dir: &Path,
    operator: Option<&str>,
    checkpoint: Option<u64>,
    key: Option<&str>,
    json: bool,
) -> anyhow::Result<bool> {
    let (store, meta) = open_checkpoint(state_dir, checkpoint)?;
    let wanted = key.map(str::as_bytes);
    let operators: Vec<&str> = match operator {
        Some(op) => vec![operator_meta(&meta, op).map(|_| op)?],
        None => meta.operators.keys().map(String::as_str).collect(),
    };
    let mut listed = Vec::new();
    for op in &operators {
        let timers = operator_timers(&store, &meta, op, wanted)?;
        if weir_cli::inspect::timer_count(&timers) > 0 {
            listed.push((*op, timers));
        }
    }
    if listed.is_empty() {
        let whose = operator.map_or("no operator has pending timers".to_string(), |op| {
            format!("operator `{op}` has no pending timers")
        });
        let filter = key.map_or(String::new(), |k| format!(" for key {k:?}"));
        let hint = if key.is_some() {
            "; drop --key to list every key's"
        } else {
            " (timers that fired are gone; an earlier --checkpoint may hold some)"
        };
        weir_cli::output::message(format_args!(
            "{whose}{filter} at checkpoint {}{hint}",
            meta.id
        ));
        return Ok(false);
    }
    let text = if json {
        let list: Vec<_> = listed
            .iter()
            .map(|(op, timers)| weir_cli::inspect::timers_json(op, timers))
            .collect();
        let doc = serde_json::json!({"checkpoint": meta.id, "operators": list});
        format!("{}\n", serde_json::to_string_pretty(&doc)?)
    } else {
        listed
            .iter()
            .map(|(op, timers)| weir_cli::inspect::timers_text(meta.id, op, timers))
            .collect()
    };
    weir_cli::output::stdout(&text)?;
    Ok(true)
}

/// Prints the state `weir state` selects; `false` (after saying why on
/// stderr) when there is nothing to print.
fn state(
    state_dir: &Path,
    operator: &str,
    checkpoint: Option<u64>,
    key: Option<&str>,
    format: ValueFormat,
    json: bool,
) -> anyhow::Result<bool> {
    use std::io::Write as _;
    use weir_cli::inspect::{key_fields, key_matches};
    let (store, meta) = open_checkpoint(state_dir, checkpoint)?;
    let op = operator_meta(&meta, operator)?;
    let entries = store.operator_state(meta.id, operator)?;
    if entries.is_empty() {
        let timers = pending_timers(&store, &meta, operator)?;
        if timers > 0 {
            weir_cli::output::message(format_args!(
                "operator `{operator}` has no keyed state at checkpoint {}, only {timers} pending timer(s); add --timers to list them",
                meta.id
            ));
            return Ok(false);
        }
        let snapshot = (0..op.parallelism)
            .map(|i| -> anyhow::Result<usize> {
                Ok(store.load_instance(meta.id, operator, i)?.snapshot.len())
            })
            .sum::<anyhow::Result<usize>>()?;
        match snapshot {
            0 => weir_cli::output::message(format_args!(
                "operator `{operator}` is stateless at checkpoint {}: it has no keyed state and no snapshot",
                meta.id
            )),
            n => weir_cli::output::message(format_args!(
                "operator `{operator}` keeps only a snapshot ({n} bytes at checkpoint {}); it has no keyed state to print",
                meta.id
            )),
        }
        return Ok(false);
    }
    let wanted = key.map(str::as_bytes);
    let selected: Vec<_> = entries
        .iter()
        .filter(|(_, k, _)| wanted.is_none_or(|w| key_matches(k, w)))
        .collect();
    if let (Some(key), true) = (key, selected.is_empty()) {
        weir_cli::output::message(format_args!(
            "operator `{operator}` has no key {key:?} at checkpoint {} ({} entries); drop --key to list them",
            meta.id,
            entries.len()
        ));
        return Ok(false);
    }
    let mut out = std::io::stdout().lock();
    if json {
        let list: Vec<serde_json::Value> = selected
            .iter()
            .map(|(i, k, v)| {
                let (value, encoding) = format.show(v);
                let mut entry = key_fields(k, true);
                entry.insert("instance".into(), (*i).into());
                entry.insert("value".into(), value);
                entry.insert("value_encoding".into(), encoding.into());
                serde_json::Value::Object(entry)
            })
            .collect();
        let doc = serde_json::json!({"checkpoint": meta.id, "operator": operator, "entries": list});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)
            .map_err(weir_cli::output::stdout_error)?;
    } else {
        for (_, k, v) in selected {
            let mut entry = key_fields(k, false);
            entry.insert("value".into(), format.show(v).0);
            writeln!(out, "{}", serde_json::Value::Object(entry))
                .map_err(weir_cli::output::stdout_error)?;
        }
    }
    out.flush().map_err(weir_cli::output::stdout_error)?;
    Ok(true)
}
