//! `weir run`: runs a job with its metrics endpoint, dashboard and
//! progress lines, and prints the summary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use weir::run::{RestoreMode, RunOptions};

use crate::{listen_error, parse_every, parse_listen_addr, parse_restore, parse_swap, runtime};

/// The arguments of `weir run`.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The job file, or a folder holding a job.toml.
    job: PathBuf,
    /// Checkpoint to resume from: latest (default), an id, or none.
    #[arg(long, default_value = "latest", value_parser = parse_restore)]
    restore: RestoreMode,
    /// State directory (overrides the job's checkpoint.dir).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Serve Prometheus metrics on this address: a port (9400, on
    /// 127.0.0.1) or HOST:PORT (0.0.0.0:9400).
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
    metrics: Option<SocketAddr>,
    /// Serve the web dashboard on this address while the job runs: a
    /// port (8080, on 127.0.0.1) or HOST:PORT. Read-only unless
    /// --ui-actions.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
    ui: Option<SocketAddr>,
    /// Let the dashboard take savepoints and swap plugins (the checks of
    /// `weir savepoint` and `weir swap` apply; see SECURITY.md).
    #[arg(long, requires = "ui")]
    ui_actions: bool,
    /// Time between progress lines when stderr is not a terminal: a
    /// duration (500ms, 2s) or a number of seconds (0: none).
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = parse_every)]
    progress_every: Duration,
    /// Restore with a new plugin for an operator, keeping its state
    /// (repeatable). The plugin's `restore` migrates older state versions.
    #[arg(long, value_name = "OPERATOR=NEW.wasm", value_parser = parse_swap)]
    swap: Vec<(String, PathBuf)>,
    /// Print the run summary as one JSON object on stdout (stable shape,
    /// see docs/reference/cli.md); refused for a job with a stdout sink.
    #[arg(long)]
    json: bool,
    /// Start from a savepoint (written by `weir savepoint`), in a state
    /// directory with no checkpoint; state is matched to the job by id,
    /// and a changed parallelism is redistributed by key group.
    #[arg(long, value_name = "DIR")]
    from_savepoint: Option<PathBuf>,
    /// With --from-savepoint: start even if the savepoint holds state of
    /// operators, sources or sinks the job no longer has (dropped).
    #[arg(long, requires = "from_savepoint")]
    allow_non_restored_state: bool,
    /// With --ui: keep the dashboard up once the job ended (finished or
    /// failed), showing how it ended, until Ctrl-C.
    #[arg(long, requires = "ui")]
    ui_linger: bool,
    /// Run as one worker of the job: join its Kafka consumer group
    /// ([cluster]) and run the tasks (anchor partitions) the group assigns
    /// this process, until SIGINT or SIGTERM hands them over. With --ui,
    /// the dashboard lists its tasks, each with its job's dashboard.
    #[arg(
        long,
        conflicts_with_all = ["restore", "ui_actions", "ui_linger", "swap", "json", "from_savepoint"]
    )]
    worker: bool,
    /// With --worker: this worker's stable identity in the group (a host
    /// name, a StatefulSet ordinal): restarted with the same id within the
    /// session timeout, it gets its tasks back without a rebalance.
    #[arg(long, value_name = "ID", requires = "worker")]
    instance_id: Option<String>,
}

/// Runs the job `args` names.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let RunArgs {
        job,
        restore,
        state_dir,
        metrics,
        ui,
        ui_actions,
        progress_every,
        swap,
        json,
        from_savepoint,
        allow_non_restored_state,
        ui_linger,
        worker,
        instance_id,
    } = args;
    if worker {
        let serve = Serve { metrics, ui };
        return run_worker(&job, state_dir.as_deref(), serve, instance_id.as_deref());
    }
    let job = weir::config::Job::load(&job, &weir_connectors::registry())?;
    if json && let Some(sink) = job.sinks.iter().find(|s| s.connector.writes_stdout()) {
        anyhow::bail!(
            "--json prints the run summary on stdout, where sink `{}` (type = \"stdout\") writes its output; drop --json or give the sink type = \"file\"",
            sink.id
        );
    }
    let shutdown = stop_on_signals()?;
    let rt = runtime()?;
    let live = weir::metrics::JobMetrics::for_job(&job);
    if let Some(addr) = metrics {
        let bound = weir_cli::prometheus::serve(addr, live.clone())
            .map_err(|e| listen_error("metrics", addr, e))?;
        weir_cli::output::message(format_args!("metrics: http://{bound}/metrics"));
    }
    if let Some(addr) = ui {
        let dir = weir::run::state_dir(&job, state_dir.as_deref());
        let bound = weir_cli::dashboard::serve(addr, &job, dir, live.clone(), ui_actions)
            .map_err(|e| listen_error("ui", addr, e))?;
        let mode = match (ui_actions, bound.ip().is_loopback()) {
            (false, true) => "read-only",
            (false, false) => {
                "read-only, and reachable from other machines: anyone who reaches this port sees the job's graph, rates and errors"
            }
            (true, true) => "actions on",
            (true, false) => {
                "actions on, and reachable from other machines: anyone who reaches this port can swap plugins and take savepoints"
            }
        };
        weir_cli::output::message(format_args!("dashboard: http://{bound}/ ({mode})"));
    }
    let progress = (!progress_every.is_zero())
        .then(|| weir_cli::progress::Progress::start(live.clone(), progress_every));
    let fetched = match from_savepoint {
        Some(url) if weir_cli::stored::is_store_url(&url) => {
            let (dir, guard) = weir_cli::stored::fetch_savepoint(&url, &job)?;
            Some((dir, Some(guard)))
        }
        Some(dir) => Some((dir, None)),
        None => None,
    };
    let options = RunOptions {
        restore,
        state_dir,
        metrics: Some(live.clone()),
        swaps: swap,
        control_socket: true,
        from_savepoint: fetched.as_ref().map(|(dir, _)| weir::run::FromSavepoint {
            dir: dir.clone(),
            allow_non_restored_state,
        }),
        commit_point: None,
    };
    let result = weir::run::run(&job, &rt, &options, &shutdown);
    if let Some(p) = progress {
        p.stop();
    }
    if ui_linger {
        linger(&result, &shutdown);
    }
    // A failure names the job file, as the job file's own errors do.
    let summary = result.map_err(|e| anyhow::anyhow!("{}: {e}", job.path.display()))?;
    let mut text = weir::run::format_summary(&job, &summary);
    text.extend(weir_cli::event_time::summary(&live));
    weir_cli::output::stderr(text.as_bytes());
    if json {
        let report = weir::run::summary_json(&job, &summary);
        weir_cli::output::stdout(&format!("{report}\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a worker serves besides its tasks: Prometheus metrics and the
/// dashboard, each on its address.
struct Serve {
    metrics: Option<SocketAddr>,
    ui: Option<SocketAddr>,
}

/// `weir run --worker`: one worker of the job at `path`, its tasks' local
/// state under `state_dir` when given, a static member of the group with
/// `instance_id`, until SIGINT or SIGTERM.
fn run_worker(
    path: &std::path::Path,
    state_dir: Option<&std::path::Path>,
    serve: Serve,
    instance_id: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let path = weir::config::job_file(path)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read job file {}", path.display()))?;
    let registry = weir_connectors::registry();
    let mut job = weir::cluster::WorkerJob::parse(&path, &text, &registry)?;
    if let Some(dir) = state_dir {
        job = job.with_state_dir(dir);
    }
    let shutdown = stop_on_signals()?;
    let worker_error = |e: String| anyhow::anyhow!("{}: worker: {e}", path.display());
    let tasks = weir_connectors::kafka::group::prepare(&job).map_err(worker_error)?;
    let job = job.with_tasks(tasks);
    let worker = weir::cluster::Worker::new(job, registry, runtime()?);
    if let Some(addr) = serve.metrics {
        let tasks = worker.clone();
        let bound = weir_cli::prometheus::serve_jobs(addr, move || tasks.metrics())
            .map_err(|e| listen_error("metrics", addr, e))?;
        weir_cli::output::message(format_args!("metrics: http://{bound}/metrics"));
    }
    if let Some(addr) = serve.ui {
        let tasks = worker.clone();
        let boards = move || tasks.runs();
        let bound = weir_cli::dashboard::serve_worker(addr, Box::new(boards))
            .map_err(|e| listen_error("ui", addr, e))?;
        weir_cli::output::message(format_args!("dashboard: http://{bound}/"));
    }
    let mut groups: Vec<Box<dyn weir::cluster::Membership>> = Vec::new();
    for stage in &worker.job().stages {
        let owner = worker.clone();
        let group = weir_connectors::kafka::group::GroupMembership::join(
            worker.job(),
            stage.id,
            owner,
            instance_id,
        )
        .map_err(worker_error)?;
        groups.push(Box::new(group));
    }
    worker.run(&mut groups, &shutdown)?;
    weir_cli::output::message(format_args!(
        "worker of job `{}` left its group",
        worker.job().job.name
    ));
    Ok(ExitCode::SUCCESS)
}

/// A flag SIGINT and SIGTERM set: the run's request to stop.
fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, shutdown.clone())
            .context("installing signal handlers")?;
    }
    Ok(shutdown)
}

/// Keeps the process (and its dashboard) up after the job ended with
/// `result`, until SIGINT or SIGTERM; a signal that stopped the job does not
/// count.
fn linger<T>(result: &Result<T, weir::run::RunError>, shutdown: &AtomicBool) {
    shutdown.store(false, Ordering::Relaxed);
    let how = match result {
        Ok(_) => "finished".to_string(),
        Err(e) => format!("failed ({e})"),
    };
    weir_cli::output::message(format_args!(
        "the job {how}; --ui-linger: the dashboard stays up until Ctrl-C"
    ));
    while !shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
}
