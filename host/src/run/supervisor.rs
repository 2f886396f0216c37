//! The supervisor runs a job as a sequence of attempts, each a full dataflow
//! started from a checkpoint:
//! - a live swap (`weir swap`) ends an attempt at a checkpoint; the next
//!   attempt restores that checkpoint with the new plugin. If the new plugin
//!   fails to load, instantiate, restore, or run until the next checkpoint,
//!   the following attempt restores the same checkpoint with the old plugin:
//!   a rollback that loses and duplicates nothing, because sources replay
//!   from the checkpoint's offsets and sinks only expose committed output.
//! - a failed attempt is retried from the last complete checkpoint when the
//!   job's restart strategy allows it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crossbeam_channel::{Sender, bounded};

use crate::config::Job;
pub use crate::config::RestartStrategy;
use crate::metrics::JobMetrics;
use crate::run::{
    Attempt, AttemptEnd, LoadedOperator, Probation, RestoreMode, RunError, RunOptions, RunSummary,
    SwapRequest, load_operator, load_plugins, run_attempt,
};
use crate::wasm::Runtime;

/// File name of the control socket in the state dir.
pub const CONTROL_SOCKET: &str = "weir.sock";

/// Runs `job` to its end (or a stop), through swaps and restarts.
pub fn run(
    job: &Job,
    runtime: &Runtime,
    options: &RunOptions,
    shutdown: &AtomicBool,
) -> Result<RunSummary, RunError> {
    let started = std::time::Instant::now();
    let mut plugins = load_plugins(job, runtime, &options.swaps)?;
    let mut swapped: BTreeSet<String> = options.swaps.iter().map(|(op, _)| op.clone()).collect();
    if !swapped.is_empty() && options.restore == RestoreMode::None {
        return Err(RunError::Swap(
            "--swap replaces a plugin in a restored checkpoint; with --restore none there is nothing to swap: change the plugin in the job file instead".into(),
        ));
    }
    let metrics = options
        .metrics
        .clone()
        .unwrap_or_else(|| JobMetrics::for_job(job));
    let state_dir = options
        .state_dir
        .clone()
        .unwrap_or_else(|| job.checkpoint.dir.clone());
    let (control_tx, control_rx) = bounded(4);
    let _control = if options.control_socket {
        Some(ControlSocket::start(&state_dir, control_tx)?)
    } else {
        None
    };

    let mut restore = options.restore;
    let mut probation: Option<(Probation, usize, LoadedOperator)> = None;
    // The checkpoint the first attempt resumed from, for the summary.
    let mut first_restore: Option<Option<u64>> = None;
    let mut total_checkpoints = 0;
    let mut restarts = 0;
    loop {
        let attempt = Attempt {
            restore,
            plugins: &plugins,
            swapped: &swapped,
            control: Some(&control_rx),
            probation: probation.as_mut().map(|(p, _, _)| p),
            metrics: metrics.clone(),
        };
        let result = run_attempt(job, options, attempt, shutdown);
        // A swap on probation whose attempt failed: roll back.
        if let Err(e) = &result
            && probation
                .as_ref()
                .is_some_and(|(p, _, _)| p.reply.is_some())
        {
            let (p, index, old) = probation.take().expect("checked above");
            tracing::warn!(
                "swap of `{}` failed, rolling back to the previous plugin: {e}",
                p.operator
            );
            if let Some(reply) = p.reply {
                let _ = reply.send(Err(format!(
                    "the new plugin of `{}` failed, rolled back to the previous plugin from checkpoint {}: {e}",
                    p.operator, p.from
                )));
            }
            plugins[index] = old;
            swapped.remove(&p.operator);
            restore = RestoreMode::Id(p.from);
            continue;
        }
        let (summary, end) = match result {
            Ok(done) => done,
            Err(e) if restartable(&e) => {
                restarts += 1;
                let Some(wait) = job.restart.delay(restarts) else {
                    return Err(if restarts > 1 {
                        RunError::GaveUp {
                            restarts: restarts - 1,
                            error: Box::new(e),
                        }
                    } else {
                        e
                    });
                };
                tracing::warn!(
                    "attempt failed: {e}; restarting from the last complete checkpoint in {} ms (restart {restarts} of {})",
                    wait.as_millis(),
                    job.restart.attempts()
                );
                std::thread::sleep(wait);
                restore = RestoreMode::Latest;
                continue;
            }
            Err(e) => return Err(e),
        };
        first_restore.get_or_insert(summary.restored_from);
        total_checkpoints += summary.checkpoints;
        match end {
            AttemptEnd::Finished | AttemptEnd::Stopped => {
                if let Some((p, _, _)) = probation.take()
                    && let Some(reply) = p.reply
                {
                    let _ = reply.send(Ok(format!(
                        "operator `{}` swapped; the job ended before its next checkpoint",
                        p.operator
                    )));
                }
                let restored_from = first_restore.flatten();
                let duration = started.elapsed();
                return Ok(RunSummary {
                    restored_from,
                    checkpoints: total_checkpoints,
                    duration,
                    restarts,
                    ..summary
                });
            }
            AttemptEnd::SwapAt {
                checkpoint,
                request,
            } => {
                restore = RestoreMode::Id(checkpoint);
                let index = job
                    .operators
                    .iter()
                    .position(|o| o.id == request.operator)
                    .expect("checked by the driver");
                let op = &job.operators[index];
                match load_operator(job, runtime, op, &request.plugin) {
                    Err(e) => {
                        let _ = request.reply.send(Err(format!(
                            "swap refused, the job continues with the previous plugin: {e}"
                        )));
                    }
                    Ok(new) => {
                        let old = std::mem::replace(&mut plugins[index], new);
                        swapped.insert(request.operator.clone());
                        tracing::info!(
                            "swapping `{}` to {} at checkpoint {checkpoint}",
                            request.operator,
                            request.plugin.display()
                        );
                        let p = Probation {
                            from: checkpoint,
                            operator: request.operator,
                            reply: Some(request.reply),
                        };
                        probation = Some((p, index, old));
                    }
                }
            }
        }
    }
}

/// The control socket: one JSON request per connection,
/// `{"swap": {"operator": ..., "plugin": ...}}`, answered with
/// `{"ok": true, "message": ...}` or `{"ok": false, "error": ...}`.
struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    fn start(state_dir: &Path, requests: Sender<SwapRequest>) -> Result<Self, RunError> {
        let path = state_dir.join(CONTROL_SOCKET);
        let io = |e: std::io::Error| {
            RunError::Swap(format!(
                "cannot open the control socket {}: {e}",
                path.display()
            ))
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        // A socket left by a killed run; the checkpoint store's lock already
        // guarantees no other run uses this state dir.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(io)?;
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let requests = requests.clone();
                    std::thread::spawn(move || serve(conn, &requests));
                }
            })
            .map_err(io)?;
        Ok(ControlSocket { path })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(conn: UnixStream, requests: &Sender<SwapRequest>) {
    let mut line = String::new();
    let mut reader = BufReader::new(&conn);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let answer = match parse(&line) {
        Err(e) => Err(e),
        Ok((operator, plugin)) => {
            let (reply, result) = bounded(1);
            if requests
                .send(SwapRequest {
                    operator,
                    plugin,
                    reply,
                })
                .is_err()
            {
                Err("the job is shutting down".to_string())
            } else {
                result
                    .recv()
                    .unwrap_or_else(|_| Err("the job ended before the swap completed".into()))
            }
        }
    };
    let body = match answer {
        Ok(message) => serde_json::json!({"ok": true, "message": message}),
        Err(error) => serde_json::json!({"ok": false, "error": error}),
    };
    let mut conn = &conn;
    let _ = writeln!(conn, "{body}");
}

fn parse(line: &str) -> Result<(String, PathBuf), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad request ({e})"))?;
    let swap = v
        .get("swap")
        .ok_or("bad request: expected {\"swap\": ...}")?;
    let field = |k: &str| {
        swap.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or(format!("bad request: missing `{k}`"))
    };
    Ok((field("operator")?, PathBuf::from(field("plugin")?)))
}

/// Asks the job running on `state_dir` to swap `operator` to `plugin`, and
/// waits for the outcome (`weir swap`).
pub fn request_swap(
    state_dir: &Path,
    operator: &str,
    plugin: &Path,
    timeout: Duration,
) -> Result<String, String> {
    let path = state_dir.join(CONTROL_SOCKET);
    let conn = UnixStream::connect(&path).map_err(|e| {
        format!(
            "no running job on {} ({}: {e}); start it with `weir run`",
            state_dir.display(),
            path.display()
        )
    })?;
    conn.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let plugin = std::path::absolute(plugin).map_err(|e| format!("{}: {e}", plugin.display()))?;
    let req = serde_json::json!({"swap": {"operator": operator, "plugin": plugin}});
    (&conn)
        .write_all(format!("{req}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| format!("no answer from the job within {} s: {e}", timeout.as_secs()))?;
    let v: serde_json::Value = serde_json::from_str(&line)
        .map_err(|e| format!("bad answer from the job ({e}): {line}"))?;
    match (
        v["ok"].as_bool(),
        v["message"].as_str(),
        v["error"].as_str(),
    ) {
        (Some(true), Some(m), _) => Ok(m.to_string()),
        (_, _, Some(e)) => Err(e.to_string()),
        _ => Err(format!("bad answer from the job: {line}")),
    }
}

/// Whether restarting from a checkpoint can help: failures while running
/// can; failures to load, validate, open or restore cannot.
fn restartable(e: &RunError) -> bool {
    use crate::dataflow::task::TaskError;
    use crate::wasm::InstanceError;
    match e {
        RunError::Task(TaskError::Instance(
            InstanceError::Trap { hook, .. }
            | InstanceError::Limit { hook, .. }
            | InstanceError::Returned { hook, .. },
        )) => !matches!(*hook, "open" | "instantiate" | "restore"),
        RunError::Task(_) => true,
        _ => false,
    }
}
