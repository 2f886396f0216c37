//! The `weir` command line: a thin layer over the `weir` library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

/// Weir: stream processing with WebAssembly operators.
#[derive(Parser)]
#[command(name = "weir", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Inspect { plugin, json } => {
            let rt = weir::Runtime::new()
                .map_err(|e| anyhow::anyhow!("{e:#}"))
                .context("starting wasmtime")?;
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
