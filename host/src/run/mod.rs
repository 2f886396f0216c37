//! Running a job: load plugins, restore the chosen checkpoint, wire the
//! dataflow, start its threads, and drive the checkpoint coordinator until
//! the end of input, a stop request, or a failure.
//!
//! Threading model: one OS thread per source, operator instance and sink.
//! Calls into wasmtime are synchronous and CPU-bound, so a thread per
//! instance keeps each `Store` on one core without an async runtime between
//! the channel and the plugin; batches amortise the channel hop.

pub mod supervisor;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};

use crate::checkpoint::coordinator::{Command, Completed, Coordinator, Participant};
use crate::checkpoint::state::KeyedState;
use crate::config::{Job, SourceKind};
use crate::connectors::{sink, source};
use crate::dataflow::partition::{KEY_GROUPS, Partitioner};
use crate::dataflow::task::{
    Edge, Event, Inputs, InstanceTask, Msg, Output, POLL, Shared, SinkTask, SourceCtl, TaskError,
};
use crate::metrics::JobMetrics;
use crate::store::{CheckpointMeta, CheckpointStore, OperatorMeta, StoreError};
use crate::wasm::{InstanceError, OperatorInstance};
use crate::wasm::{Plugin, PluginError, Runtime};

/// Messages a channel holds before its sender blocks (backpressure).
const CHANNEL_CAPACITY: usize = 16;

/// Which checkpoint to resume from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestoreMode {
    /// The newest complete checkpoint, if there is one.
    #[default]
    Latest,
    /// This checkpoint.
    Id(u64),
    /// None: start from scratch, discarding existing checkpoints and output.
    None,
}

impl std::str::FromStr for RestoreMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "latest" => Ok(RestoreMode::Latest),
            "none" => Ok(RestoreMode::None),
            n => n
                .parse()
                .map(RestoreMode::Id)
                .map_err(|_| format!("`{n}` is not `latest`, `none` or a checkpoint id")),
        }
    }
}

/// How to run a job.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Which checkpoint to resume from.
    pub restore: RestoreMode,
    /// Overrides the job's `checkpoint.dir`.
    pub state_dir: Option<PathBuf>,
    /// Live metrics to update (from [`JobMetrics::for_job`]); the run
    /// creates its own when `None`.
    pub metrics: Option<Arc<JobMetrics>>,
    /// Operators whose plugin is replaced, on restore, by another `.wasm`
    /// (`--swap OPERATOR=NEW.wasm`).
    pub swaps: Vec<(String, PathBuf)>,
    /// Listen for `weir swap` on a control socket in the state dir.
    pub control_socket: bool,
}

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The checkpoint the run resumed from.
    pub restored_from: Option<u64>,
    /// Checkpoints completed during this run (including the final one).
    pub checkpoints: u64,
    /// The last completed checkpoint.
    pub last_checkpoint: Option<u64>,
    /// Whether the job reached the end of its input (else it was stopped).
    pub finished: bool,
    /// Wall time of the run.
    pub duration: Duration,
    /// Restarts after failures (see the job's `[restart]` strategy).
    pub restarts: u32,
    /// Per node (sources, operators, sinks in job order): id, records in, records out.
    pub nodes: Vec<(String, u64, u64)>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A plugin could not be loaded.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The job does not fit its plugins (ports).
    #[error(transparent)]
    Job(#[from] crate::config::JobError),
    /// The checkpoint store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A task failed while running.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// Restoring a checkpoint is not possible.
    #[error("cannot restore checkpoint {id} of job `{job}`: {message}")]
    Restore {
        /// The job.
        job: String,
        /// The checkpoint.
        id: u64,
        /// What is wrong and what to do.
        message: String,
    },
    /// The job failed again after its restart strategy's last restart.
    #[error(
        "{error} (gave up after {restarts} restart(s); the state dir keeps the last complete checkpoint: fix the cause and run again to resume)"
    )]
    GaveUp {
        /// Restarts made.
        restarts: u32,
        /// The last failure.
        error: Box<RunError>,
    },
    /// A plugin swap is not possible.
    #[error("{0}")]
    Swap(String),
    /// A thread of the job panicked (a host bug).
    #[error("internal error: a job thread panicked ({0}); please report this")]
    Panicked(String),
}

/// A loaded plugin with its input ports resolved against the job:
/// `(port, upstream id)` pairs.
pub type LoadedOperator = (Plugin, Vec<(u32, String)>);

/// The receivers of one instance: `(input port, channel)` per upstream instance.
type ChannelInputs = Vec<(u32, Receiver<Msg>)>;

/// Loads every operator's plugin, with `swaps` (`--swap OP=NEW.wasm`)
/// replacing the job's plugin for the operators they name, and checks each
/// plugin's ports against the job. Returns (plugin, resolved input ports) per
/// operator, in job order.
pub fn load_plugins(
    job: &Job,
    runtime: &Runtime,
    swaps: &[(String, PathBuf)],
) -> Result<Vec<LoadedOperator>, RunError> {
    if let Some((op, _)) = swaps
        .iter()
        .find(|(op, _)| !job.operators.iter().any(|o| &o.id == op))
    {
        let ids: Vec<&str> = job.operators.iter().map(|o| o.id.as_str()).collect();
        return Err(RunError::Swap(format!(
            "--swap {op}=...: job `{}` has no operator `{op}` (it has: {})",
            job.name,
            ids.join(", ")
        )));
    }
    job.operators
        .iter()
        .map(|op| {
            let path = swaps
                .iter()
                .rev()
                .find(|(id, _)| id == &op.id)
                .map_or(&op.plugin, |(_, p)| p);
            load_operator(job, runtime, op, path)
        })
        .collect()
}

/// Loads the plugin at `path` for operator `op` and checks its ports against
/// the job. A port mismatch of a plugin other than the job's is reported as a
/// refused swap.
pub fn load_operator(
    job: &Job,
    runtime: &Runtime,
    op: &crate::config::OperatorConfig,
    path: &std::path::Path,
) -> Result<LoadedOperator, RunError> {
    let plugin = runtime.load(path)?;
    let ports = job
        .resolve_ports(op, &plugin.info().inputs, &plugin.info().outputs)
        .map_err(|e| {
            if path == op.plugin {
                RunError::Job(e)
            } else {
                RunError::Swap(format!(
                    "cannot swap operator `{}` to {}: its ports do not fit the job: {e}",
                    op.id,
                    path.display()
                ))
            }
        })?;
    Ok((plugin, ports))
}

/// Runs `job` until its input ends, `shutdown` becomes true (then it takes a
/// checkpoint and stops), or something fails.
pub fn run(
    job: &Job,
    runtime: &Runtime,
    options: &RunOptions,
    shutdown: &AtomicBool,
) -> Result<RunSummary, RunError> {
    crate::run::supervisor::run(job, runtime, options, shutdown)
}

/// How an attempt ended (when it did not fail).
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    /// End of input, final checkpoint committed.
    Finished,
    /// Stopped at a checkpoint on request.
    Stopped,
    /// Stopped at checkpoint `checkpoint` to swap a plugin.
    SwapAt {
        checkpoint: u64,
        request: SwapRequest,
    },
}

/// A `weir swap` request from the control socket.
#[derive(Debug)]
pub(crate) struct SwapRequest {
    pub operator: String,
    pub plugin: PathBuf,
    pub reply: Sender<Result<String, String>>,
}

/// A swapped plugin on probation: the swap is reported successful once a
/// checkpoint after `from` completes with it.
#[derive(Debug)]
pub(crate) struct Probation {
    pub from: u64,
    pub operator: String,
    pub reply: Option<Sender<Result<String, String>>>,
}

/// What one attempt runs with.
pub(crate) struct Attempt<'a> {
    pub restore: RestoreMode,
    pub plugins: &'a [LoadedOperator],
    /// Operators whose plugin may differ from the checkpoint's (swapped).
    pub swapped: &'a std::collections::BTreeSet<String>,
    pub control: Option<&'a Receiver<SwapRequest>>,
    pub probation: Option<&'a mut Probation>,
    pub metrics: Arc<JobMetrics>,
}

/// Runs the dataflow once, from the checkpoint `attempt.restore` names.
pub(crate) fn run_attempt(
    job: &Job,
    options: &RunOptions,
    attempt: Attempt<'_>,
    shutdown: &AtomicBool,
) -> Result<(RunSummary, AttemptEnd), RunError> {
    let started = Instant::now();
    let plugins = attempt.plugins;
    let state_dir = options
        .state_dir
        .clone()
        .unwrap_or_else(|| job.checkpoint.dir.clone());
    let store = CheckpointStore::open(&state_dir, &job.name)?;

    // Which checkpoint to restore.
    let restored: Option<CheckpointMeta> = match attempt.restore {
        RestoreMode::None => {
            store.truncate_after(0)?;
            None
        }
        RestoreMode::Latest => store.latest()?,
        RestoreMode::Id(id) => Some(store.get(id)?.ok_or_else(|| RunError::Restore {
            job: job.name.clone(),
            id,
            message: format!(
                "no such complete checkpoint in {}; `weir checkpoints {}` lists them",
                state_dir.display(),
                state_dir.display()
            ),
        })?),
    };
    if let Some(meta) = restored.as_ref().filter(|m| m.final_checkpoint) {
        tracing::warn!(
            "job `{}` already finished (checkpoint {} is final); nothing to do. Run with `--restore none` to process the input again",
            job.name,
            meta.id
        );
        let summary = RunSummary {
            restored_from: Some(meta.id),
            checkpoints: 0,
            last_checkpoint: Some(meta.id),
            finished: true,
            restarts: 0,
            duration: started.elapsed(),
            nodes: Vec::new(),
        };
        return Ok((summary, AttemptEnd::Finished));
    }
    if let Some(meta) = &restored {
        check_restorable(job, plugins, meta, attempt.swapped)?;
        store.truncate_after(meta.id)?;
    }
    let first_id = store.latest()?.map_or(1, |m| m.id + 1);
    let restored_id = restored.as_ref().map(|m| m.id);
    if let Some(id) = restored_id {
        tracing::info!("restoring checkpoint {id} from {}", state_dir.display());
    }

    let cancel = Arc::new(AtomicBool::new(false));
    let (events_tx, events) = unbounded();
    let shared = Shared {
        cancel: cancel.clone(),
        events: events_tx,
    };

    // Channels: for every consumer instance, one channel per upstream
    // instance. `senders[upstream id]` collects the edges out of a node.
    let parallelism: HashMap<&str, u32> = job
        .sources
        .iter()
        .map(|s| (s.id.as_str(), 1))
        .chain(job.operators.iter().map(|o| (o.id.as_str(), o.parallelism)))
        .collect();
    let mut edges: HashMap<String, Vec<Vec<Edge>>> = parallelism
        .iter()
        .map(|(id, p)| (id.to_string(), (0..*p).map(|_| Vec::new()).collect()))
        .collect();
    let mut connect = |upstream: &str, port: u32, consumers: u32| -> Vec<ChannelInputs> {
        // Returns, per consumer instance, its receivers from `upstream`.
        let up = parallelism[upstream];
        let mut per_consumer: Vec<ChannelInputs> = (0..consumers).map(|_| Vec::new()).collect();
        for u in 0..up {
            let mut senders = Vec::with_capacity(consumers as usize);
            for rxs in per_consumer.iter_mut() {
                let (tx, rx) = bounded(CHANNEL_CAPACITY);
                senders.push(tx);
                rxs.push((port, rx));
            }
            edges.get_mut(upstream).expect("validated upstream")[u as usize].push(Edge {
                senders,
                partitioner: Partitioner::new(consumers),
            });
        }
        per_consumer
    };

    // Inputs of each operator instance and sink.
    let mut op_inputs: Vec<Vec<ChannelInputs>> = Vec::new();
    for (op, (_, ports)) in job.operators.iter().zip(plugins) {
        let mut per_instance: Vec<ChannelInputs> =
            (0..op.parallelism).map(|_| Vec::new()).collect();
        for (port, upstream) in ports {
            for (i, rxs) in connect(upstream, *port, op.parallelism)
                .into_iter()
                .enumerate()
            {
                per_instance[i].extend(rxs);
            }
        }
        op_inputs.push(per_instance);
    }
    let mut sink_inputs = Vec::new();
    for s in &job.sinks {
        sink_inputs.push(connect(&s.input, 0, 1).pop().expect("one sink instance"));
    }

    let mut threads: Vec<(
        String,
        JoinHandle<Result<(), crate::dataflow::task::Cancelled>>,
    )> = Vec::new();
    let metrics = attempt.metrics.clone();
    if restored.is_some() {
        metrics.checkpoints.restarts.fetch_add(1, Ordering::Relaxed);
    }
    let metrics_of: HashMap<String, Arc<crate::metrics::NodeMetrics>> = metrics
        .nodes
        .iter()
        .map(|(id, _, m)| (id.clone(), m.clone()))
        .collect();
    let output = |id: &str, instance: usize, edges: &mut HashMap<String, Vec<Vec<Edge>>>| Output {
        edges: std::mem::take(&mut edges.get_mut(id).expect("node")[instance]),
        metrics: metrics_of[id].clone(),
    };

    // Operators first (instantiated and restored before any record flows).
    let mut instances = Vec::new();
    for ((op, (plugin, _)), inputs) in job.operators.iter().zip(plugins).zip(op_inputs) {
        for (i, channels) in inputs.into_iter().enumerate() {
            let i = i as u32;
            let mut inst = OperatorInstance::for_operator(plugin, op, i)
                .map_err(|e| RunError::Task(e.into()))?;
            let mut last_snapshot = None;
            if let Some(meta) = &restored {
                let r = store.load_instance(meta.id, &op.id, i)?;
                let version = meta
                    .operators
                    .get(&op.id)
                    .map_or(plugin.info().state_version, |m| m.state_version);
                last_snapshot = Some(crate::dataflow::task::hash_bytes(&r.snapshot));
                inst.restore(KeyedState::from_entries(r.entries), version, &r.snapshot)
                    .map_err(|e: InstanceError| RunError::Task(e.into()))?;
            }
            instances.push((op.id.clone(), i, inst, channels, last_snapshot));
        }
    }
    for (op_id, i, instance, channels, last_snapshot) in instances {
        let task = InstanceTask {
            shared: shared.clone(),
            operator: op_id.clone(),
            index: i,
            instance,
            inputs: Inputs {
                channels,
                metrics: metrics_of[&op_id].clone(),
            },
            out: output(&op_id, i as usize, &mut edges),
            last_snapshot,
        };
        threads.push((
            format!("{op_id}[{i}]"),
            spawn(&format!("op-{op_id}-{i}"), move || task.run()),
        ));
    }

    // Sinks.
    let mut commit_txs: Vec<Sender<u64>> = Vec::new();
    for (s, channels) in job.sinks.iter().zip(sink_inputs) {
        let staging = state_dir.join("sinks").join(&s.id);
        let info = restored.as_ref().and_then(|m| m.sinks.get(&s.id));
        let sink = sink::open(s, &staging, info).map_err(|e| RunError::Task(e.into()))?;
        let (tx, rx) = unbounded();
        commit_txs.push(tx);
        let task = SinkTask {
            shared: shared.clone(),
            id: s.id.clone(),
            sink,
            inputs: Inputs {
                channels,
                metrics: metrics_of[&s.id].clone(),
            },
            commits: rx,
        };
        threads.push((
            s.id.clone(),
            spawn(&format!("sink-{}", s.id), move || task.run()),
        ));
    }

    // Sources last.
    let mut source_ctls: Vec<Sender<SourceCtl>> = Vec::new();
    for s in &job.sources {
        let offset = restored.as_ref().and_then(|m| m.sources.get(&s.id));
        let reader = source::open(s, offset).map_err(|e| RunError::Task(e.into()))?;
        if restored.is_some() && !reader.replayable() {
            tracing::warn!(
                "source `{}` reads stdin, which cannot be replayed: records read before the crash are lost",
                s.id
            );
        }
        let batch_size = match &s.kind {
            SourceKind::File { batch_size, .. }
            | SourceKind::Generator { batch_size, .. }
            | SourceKind::Stdin { batch_size, .. } => *batch_size,
        };
        let (tx, rx) = unbounded();
        source_ctls.push(tx);
        let out = output(&s.id, 0, &mut edges);
        let (sh, id, rate) = (shared.clone(), s.id.clone(), s.rate);
        threads.push((
            s.id.clone(),
            spawn(&format!("src-{}", s.id), move || {
                crate::dataflow::task::run_source(sh, id, reader, batch_size, rate, rx, out)
            }),
        ));
    }
    drop(shared);

    let participants = job
        .sources
        .iter()
        .map(|s| Participant::Source(s.id.clone()))
        .chain(
            job.operators
                .iter()
                .flat_map(|o| (0..o.parallelism).map(|i| Participant::Instance(o.id.clone(), i))),
        )
        .chain(job.sinks.iter().map(|s| Participant::Sink(s.id.clone())));
    let mut coordinator = Coordinator::new(participants, job.checkpoint.interval, first_id);
    let operators_meta: BTreeMap<String, OperatorMeta> = job
        .operators
        .iter()
        .zip(plugins)
        .map(|(op, (p, _))| {
            (
                op.id.clone(),
                OperatorMeta {
                    plugin_name: p.info().name.clone(),
                    plugin_version: p.info().version.clone(),
                    state_version: p.info().state_version,
                    sha256: p.sha256().to_string(),
                    parallelism: op.parallelism,
                },
            )
        })
        .collect();

    let mut drive = Driver {
        job,
        store: &store,
        coordinator: &mut coordinator,
        source_ctls: &source_ctls,
        commit_txs: &commit_txs,
        operators_meta,
        metrics: &metrics,
        control: attempt.control,
        pending_swap: None,
        probation: attempt.probation,
        checkpoints: 0,
        last: None,
        awaiting_commit: None,
        sinks: job.sinks.len(),
        committed: 0,
        finished: false,
    };
    let outcome = drive.run(&events, shutdown);
    let (checkpoints, last, finished) = (drive.checkpoints, drive.last, drive.finished);
    let swap = drive.pending_swap.take();
    if outcome.is_err() || !finished {
        cancel.store(true, Ordering::Relaxed);
    }
    let mut panicked = None;
    for (name, t) in threads {
        if t.join().is_err() {
            panicked.get_or_insert(name);
        }
    }
    outcome?;
    if let Some(name) = panicked {
        return Err(RunError::Panicked(name));
    }
    let end = match (finished, swap, last) {
        (true, _, _) => AttemptEnd::Finished,
        (false, Some(request), Some(checkpoint)) => AttemptEnd::SwapAt {
            checkpoint,
            request,
        },
        _ => AttemptEnd::Stopped,
    };
    let summary = RunSummary {
        restored_from: restored_id,
        checkpoints,
        last_checkpoint: last,
        finished,
        restarts: 0,
        duration: started.elapsed(),
        nodes: metrics
            .nodes
            .iter()
            .map(|(id, _, m)| {
                (
                    id.clone(),
                    m.records_in.load(Ordering::Relaxed),
                    m.records_out.load(Ordering::Relaxed),
                )
            })
            .collect(),
    };
    Ok((summary, end))
}

fn spawn<F>(name: &str, f: F) -> JoinHandle<Result<(), crate::dataflow::task::Cancelled>>
where
    F: FnOnce() -> Result<(), crate::dataflow::task::Cancelled> + Send + 'static,
{
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .expect("spawning a job thread")
}

/// Refuses a checkpoint whose operators do not match the job's.
fn check_restorable(
    job: &Job,
    plugins: &[LoadedOperator],
    meta: &CheckpointMeta,
    swapped: &std::collections::BTreeSet<String>,
) -> Result<(), RunError> {
    let err = |message: String| RunError::Restore {
        job: job.name.clone(),
        id: meta.id,
        message,
    };
    if meta.key_groups != KEY_GROUPS {
        return Err(err(format!(
            "it uses {} key groups, this Weir uses {KEY_GROUPS}",
            meta.key_groups
        )));
    }
    for (op, (plugin, _)) in job.operators.iter().zip(plugins) {
        let Some(m) = meta.operators.get(&op.id) else {
            return Err(err(format!(
                "operator `{}` is not in the checkpoint (it has: {}); operators cannot be added to a checkpointed job yet. Use `--restore none` to start over",
                op.id,
                meta.operators
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if m.parallelism != op.parallelism {
            return Err(err(format!(
                "operator `{}` ran with parallelism {} and the job now asks for {}; changing parallelism on restore is not supported yet. Set it back to {}, or use `--restore none`",
                op.id, m.parallelism, op.parallelism, m.parallelism
            )));
        }
        if m.state_version > plugin.info().state_version {
            return Err(err(format!(
                "operator `{}` was checkpointed by {} {} with state version {}, but {} {} reads state versions up to {}: downgrading would lose or misread its state. Restore with a plugin that reads state version {}",
                op.id,
                m.plugin_name,
                m.plugin_version,
                m.state_version,
                plugin.info().name,
                plugin.info().version,
                plugin.info().state_version,
                m.state_version
            )));
        }
        if m.sha256 != plugin.sha256() && !swapped.contains(&op.id) {
            return Err(err(format!(
                "operator `{}` ran plugin {} {} (sha256 {}) but {} is now {} {} (sha256 {}); refusing to change code silently. To upgrade it and keep its state, run with `--swap {}={}`; else restore with the plugin the checkpoint ran, or use `--restore none`",
                op.id,
                m.plugin_name,
                m.plugin_version,
                &m.sha256[..12.min(m.sha256.len())],
                op.plugin.display(),
                plugin.info().name,
                plugin.info().version,
                &plugin.sha256()[..12],
                op.id,
                op.plugin.display(),
            )));
        }
    }
    if let Some(extra) = meta
        .operators
        .keys()
        .find(|k| !job.operators.iter().any(|o| &o.id == *k))
    {
        return Err(err(format!(
            "the checkpoint has operator `{extra}`, which the job no longer has; use `--restore none` to start over"
        )));
    }
    Ok(())
}

/// The coordinator loop's I/O: sends commands, persists completed
/// checkpoints, tells sinks to commit.
struct Driver<'a> {
    job: &'a Job,
    store: &'a CheckpointStore,
    coordinator: &'a mut Coordinator,
    source_ctls: &'a [Sender<SourceCtl>],
    commit_txs: &'a [Sender<u64>],
    operators_meta: BTreeMap<String, OperatorMeta>,
    metrics: &'a JobMetrics,
    control: Option<&'a Receiver<SwapRequest>>,
    /// A swap waiting for its checkpoint.
    pending_swap: Option<SwapRequest>,
    probation: Option<&'a mut Probation>,
    checkpoints: u64,
    last: Option<u64>,
    /// A checkpoint whose sink commits end the run (final or stop).
    awaiting_commit: Option<u64>,
    sinks: usize,
    committed: usize,
    finished: bool,
}

impl Driver<'_> {
    fn command(&self, cmd: Option<Command>) {
        match cmd {
            Some(Command::Trigger(n)) => {
                tracing::debug!("triggering checkpoint {n}");
                for tx in self.source_ctls {
                    let _ = tx.send(SourceCtl::Trigger(n));
                }
            }
            Some(Command::Finish(n)) => {
                tracing::debug!("end of input: final checkpoint {n}");
                for tx in self.source_ctls {
                    let _ = tx.send(SourceCtl::Finish(n));
                }
            }
            None => {}
        }
    }

    fn persist(&mut self, done: Completed) -> Result<(), RunError> {
        let meta = CheckpointMeta {
            id: done.id,
            job: self.job.name.clone(),
            started_at_ms: unix_ms(SystemTime::now())
                .saturating_sub(done.started.elapsed().as_millis() as u64),
            duration_ms: done.started.elapsed().as_millis() as u64,
            alignment_ms: done.alignment.as_millis() as u64,
            bytes_written: 0,
            state_keys: 0,
            key_groups: KEY_GROUPS,
            sources: done.sources,
            operators: self.operators_meta.clone(),
            sinks: done.sinks,
            final_checkpoint: done.is_final,
        };
        let stats = self
            .store
            .commit(&meta, &done.deltas, self.job.checkpoint.retain)?;
        tracing::info!(
            "checkpoint {} complete in {} ms ({} bytes written, alignment {} ms)",
            done.id,
            meta.duration_ms,
            stats.bytes_written,
            meta.alignment_ms
        );
        self.checkpoints += 1;
        self.last = Some(done.id);
        let c = &self.metrics.checkpoints;
        c.completed.fetch_add(1, Ordering::Relaxed);
        c.last_id.store(done.id, Ordering::Relaxed);
        c.last_duration_ms
            .store(meta.duration_ms, Ordering::Relaxed);
        c.last_bytes.store(stats.bytes_written, Ordering::Relaxed);
        c.last_alignment_ms
            .store(meta.alignment_ms, Ordering::Relaxed);
        c.last_alignment_buffered_bytes
            .store(done.buffered_bytes, Ordering::Relaxed);
        c.duration.observe(done.started.elapsed());
        c.alignment.observe(done.alignment);
        for tx in self.commit_txs {
            let _ = tx.send(done.id);
        }
        if let Some(p) = self.probation.as_mut().filter(|p| done.id > p.from)
            && let Some(reply) = p.reply.take()
        {
            let _ = reply.send(Ok(format!(
                "operator `{}` now runs the new plugin: swapped at checkpoint {}, checkpoint {} completed with it",
                p.operator, p.from, done.id
            )));
        }
        if done.is_final || self.coordinator.stop_requested() {
            self.finished = done.is_final;
            self.awaiting_commit = Some(done.id);
        }
        Ok(())
    }

    /// A live swap: checkpoint now, then end the attempt so that the
    /// supervisor restarts from that checkpoint with the new plugin.
    fn swap_requested(&mut self, req: SwapRequest, now: Instant) {
        let refuse = |req: SwapRequest, why: String| {
            let _ = req.reply.send(Err(why));
        };
        if !self.job.operators.iter().any(|o| o.id == req.operator) {
            let ids: Vec<&str> = self.job.operators.iter().map(|o| o.id.as_str()).collect();
            let why = format!(
                "job `{}` has no operator `{}` (it has: {})",
                self.job.name,
                req.operator,
                ids.join(", ")
            );
            return refuse(req, why);
        }
        if self.pending_swap.is_some()
            || self.coordinator.stop_requested()
            || self.awaiting_commit.is_some()
        {
            return refuse(
                req,
                "the job is already stopping or swapping; retry in a moment".into(),
            );
        }
        if self.probation.as_ref().is_some_and(|p| p.reply.is_some()) {
            return refuse(
                req,
                "the previous swap is still on probation; retry after its first checkpoint".into(),
            );
        }
        tracing::info!("swap of `{}` requested: taking a checkpoint", req.operator);
        self.pending_swap = Some(req);
        let cmd = self.coordinator.request_stop(now);
        self.command(cmd);
    }

    fn run(&mut self, events: &Receiver<Event>, shutdown: &AtomicBool) -> Result<(), RunError> {
        loop {
            let now = Instant::now();
            if shutdown.load(Ordering::Relaxed)
                && !self.coordinator.stop_requested()
                && self.awaiting_commit.is_none()
            {
                tracing::info!("stop requested: taking a checkpoint");
                let cmd = self.coordinator.request_stop(now);
                self.command(cmd);
            }
            if let Some(req) = self.control.and_then(|c| c.try_recv().ok()) {
                self.swap_requested(req, now);
            }
            let cmd = self.coordinator.tick(now);
            self.command(cmd);
            let wait = self.coordinator.next_due(now).unwrap_or(POLL).min(POLL);
            match events.recv_timeout(wait) {
                Ok(Event::Ack(id, ack)) => {
                    let (done, next) = self.coordinator.on_ack(id, ack, Instant::now());
                    if let Some(done) = done {
                        self.persist(done)?;
                    }
                    self.command(next);
                }
                Ok(Event::SourceAtEnd(s)) => {
                    let cmd = self.coordinator.source_at_end(&s, now);
                    self.command(cmd);
                }
                Ok(Event::SinkCommitted(sink, id)) => {
                    tracing::debug!("sink `{sink}` committed checkpoint {id}");
                    if Some(id) >= self.awaiting_commit && self.awaiting_commit.is_some() {
                        self.committed += 1;
                        if self.committed == self.sinks {
                            return Ok(());
                        }
                    }
                }
                Ok(Event::Failed(e)) => return Err(e.into()),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RunError::Panicked(
                        "every job thread exited unexpectedly".into(),
                    ));
                }
            }
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The summary `weir run` prints at the end.
pub fn format_summary(job: &Job, s: &RunSummary) -> String {
    let mut out = format!(
        "job `{}` {} in {:.2} s: {} checkpoint(s){}{}{}\n",
        job.name,
        if s.finished { "finished" } else { "stopped" },
        s.duration.as_secs_f64(),
        s.checkpoints,
        s.last_checkpoint
            .map(|c| format!(", last {c}"))
            .unwrap_or_default(),
        s.restored_from
            .map(|c| format!(", resumed from checkpoint {c}"))
            .unwrap_or_default(),
        if s.restarts > 0 {
            format!(", {} restart(s) after failures", s.restarts)
        } else {
            String::new()
        },
    );
    let width = s.nodes.iter().map(|n| n.0.len()).max().unwrap_or(0);
    for (id, records_in, records_out) in &s.nodes {
        let kind = if job.sources.iter().any(|x| &x.id == id) {
            "source"
        } else if job.sinks.iter().any(|x| &x.id == id) {
            "sink"
        } else {
            "operator"
        };
        out.push_str(&format!(
            "  {kind:<8} {id:<width$}  in {records_in:>12}  out {records_out:>12}\n"
        ));
    }
    out
}

/// Checks `job` without running it: loads every plugin, checks its ports,
/// and instantiates one instance of each operator to call `open` with its
/// config. Returns a short human-readable report.
pub fn validate(job: &Job, runtime: &Runtime) -> Result<String, RunError> {
    let plugins = load_plugins(job, runtime, &[])?;
    let mut report = format!(
        "job `{}` ({}) is valid: {} source(s), {} operator(s), {} sink(s)\n",
        job.name,
        job.path.display(),
        job.sources.len(),
        job.operators.len(),
        job.sinks.len()
    );
    for (op, (plugin, ports)) in job.operators.iter().zip(&plugins) {
        OperatorInstance::for_operator(plugin, op, 0).map_err(|e| RunError::Task(e.into()))?;
        let wiring: Vec<String> = ports
            .iter()
            .map(|(p, up)| format!("{} <- {up}", plugin.info().inputs[*p as usize]))
            .collect();
        report.push_str(&format!(
            "  operator {}: {} {} x{} ({})\n",
            op.id,
            plugin.info().name,
            plugin.info().version,
            op.parallelism,
            wiring.join(", ")
        ));
    }
    Ok(report)
}
