//! `weir-bench`: runs Weir's benchmarks and prints each result as a ratio
//! against a baseline measured in the same run, with the absolute numbers.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use weir_bench::{BENCHMARKS, Mode, Settings};

/// Weir's benchmarks: Wasm operators against native code, in one run.
#[derive(Parser, Debug)]
#[command(name = "weir-bench", version)]
struct Cli {
    /// Benchmarks to run, or all (the default).
    #[arg(value_parser = benchmark_names())]
    benchmarks: Vec<String>,
    /// Small sizes (about 200k records) for CI smoke runs.
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// The smallest sizes (what the tests run).
    #[arg(long, hide = true)]
    tiny: bool,
    /// Print the reports as one JSON array instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the reports as JSON to this file (with the tables on stdout).
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Records of the end-to-end jobs (default 10 million; 200k with --quick).
    #[arg(long)]
    records: Option<u64>,
    /// Keys of state for checkpoint and recovery (default 1 million).
    #[arg(long)]
    keys: Option<u64>,
    /// Folder with the plugin components (default: plugins/target of this checkout).
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Keep inputs, job files and state under this folder instead of a
    /// temporary one (for profiling a job with `weir run`).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// The `weir` binary the `state` benchmark runs (default: `weir` next
    /// to this executable, as `cargo build --release -p weir-cli` puts it).
    #[arg(long, value_name = "PATH")]
    weir: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// `all` and every benchmark's name, each with what it measures.
fn benchmark_names() -> clap::builder::PossibleValuesParser {
    let all = clap::builder::PossibleValue::new("all").help("every benchmark, in this order");
    let each = BENCHMARKS
        .iter()
        .map(|b| clap::builder::PossibleValue::new(b.name).help(b.about));
    clap::builder::PossibleValuesParser::new(std::iter::once(all).chain(each))
}

fn main() -> ExitCode {
    // `weir-bench native PROGRAM ARGS...` (hidden): a native baseline as a
    // child process of the `state` benchmark.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "native") {
        return match weir_bench::state::native_child(&args[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let mode = if cli.tiny {
        Mode::Tiny
    } else if cli.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    let mut settings = Settings::new(mode);
    settings.records = cli.records;
    settings.keys = cli.keys;
    settings.work_dir = cli.work_dir;
    settings.verbose = !cli.quiet;
    settings.weir = cli.weir;
    if let Some(p) = cli.plugins {
        settings.plugins = p;
    }
    let mut names: Vec<&str> = cli.benchmarks.iter().map(String::as_str).collect();
    if names.is_empty() || names.contains(&"all") {
        names = BENCHMARKS.iter().map(|b| b.name).collect();
    }
    let mut reports = Vec::new();
    for name in names {
        match weir_bench::run(name, &settings) {
            Ok(report) => {
                if !cli.json {
                    println!("{}", report.table());
                }
                reports.push(report);
            }
            Err(e) => {
                eprintln!("error: benchmark `{name}`: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(path) = &cli.json_out {
        let text = serde_json::to_string_pretty(&reports).expect("reports serialize");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialize")
        );
    }
    ExitCode::SUCCESS
}
