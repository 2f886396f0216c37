//! The `weir` command line: a thin layer over the `weir` library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use weir::runner::{RestoreMode, RunOptions};

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

#[derive(Subcommand)]
enum Command {
    /// Run a job until its input ends (or Ctrl-C, which checkpoints and stops).
    #[command(
        after_help = "Examples:\n  weir run examples/wordcount/job.toml\n  weir run job.toml --restore none        # start over\n  weir run job.toml --restore 12          # resume from checkpoint 12"
    )]
    Run {
        /// The job file.
        job: PathBuf,
        /// Checkpoint to resume from: latest (default), an id, or none.
        #[arg(long, default_value = "latest", value_parser = parse_restore)]
        restore: RestoreMode,
        /// State directory (overrides the job's checkpoint.dir).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// Show a plugin's name, version, ports, state version, imports, exports,
    /// size and sha256, without running it.
    #[command(
        after_help = "Examples:\n  weir inspect plugins/target/word-count.wasm\n  weir inspect --json plugins/target/reconcile.wasm | jq .inputs"
    )]
    Inspect {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        /// Print JSON (stable shape, see README) instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_restore(s: &str) -> Result<RestoreMode, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("weir={default},warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn runtime() -> anyhow::Result<weir::Runtime> {
    weir::Runtime::new()
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("starting wasmtime")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run {
            job,
            restore,
            state_dir,
        } => {
            let job = weir::job::Job::load(&job)?;
            let shutdown = Arc::new(AtomicBool::new(false));
            for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                signal_hook::flag::register(signal, shutdown.clone())
                    .context("installing signal handlers")?;
            }
            let rt = runtime()?;
            let summary =
                weir::runner::run(&job, &rt, &RunOptions { restore, state_dir }, &shutdown)?;
            eprint!("{}", weir::runner::format_summary(&job, &summary));
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { plugin, json } => {
            let rt = runtime()?;
            let loaded = rt.load(&plugin)?;
            let report = weir::inspect::PluginReport::of(&loaded, rt.engine());
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.to_text());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
