//! The start phase of an attempt: one OS thread per operator instance, per
//! sink and per source, in that order, so that every consumer is running
//! before its upstream sends ([`start_threads`]); and joining them
//! ([`Threads::join`]).
//!
//! Calls into wasmtime are synchronous and CPU-bound, so a thread per
//! instance keeps each `Store` on one core without an async runtime between
//! the channel and the plugin; batches amortise the channel hop.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::dataflow::cancel::Cancelled;
use crate::dataflow::output::Output;
use crate::metrics::{JobMetrics, NodeMetrics};
use crate::plan::{InstanceId, Node, Plan};
use crate::run::narrow::Narrow;
use crate::run::open::Opened;
use crate::run::wiring::TaskEnds;
use serde_json::Value;

use crate::config::DEAD_LETTER_PORT;
use crate::threads::bad_records::{BadAt, BadInputs, BadRecords};
use crate::threads::instance::{InstanceTask, Recording};
use crate::threads::sink::SinkTask;
use crate::threads::source::SourceTask;
use crate::wasm::Plugin;

/// The running threads of an attempt, each with the name failures report.
pub(crate) struct Threads(Vec<(String, JoinHandle<Result<(), Cancelled>>)>);

impl Threads {
    /// Waits for every thread; returns the name of the first that panicked.
    pub(crate) fn join(self) -> Option<String> {
        let mut panicked = None;
        for (name, t) in self.0 {
            if t.join().is_err() {
                panicked.get_or_insert(name);
            }
        }
        panicked
    }

    fn spawn<F>(&mut self, name: String, thread: &str, f: F)
    where
        F: FnOnce() -> Result<(), Cancelled> + Send + 'static,
    {
        let handle = std::thread::Builder::new()
            .name(thread.to_string())
            .spawn(f)
            .expect("spawning a job thread");
        self.0.push((name, handle));
    }
}

/// Starts every thread of `plan` on the channel ends `wiring`, each
/// instance with what the open phase made for its id. Its own [`Shared`]
/// is dropped here, so the driver sees the events channel disconnect once
/// every thread has exited.
///
/// [`Shared`]: crate::threads::Shared
/// The attempt's first checkpoint is `first_checkpoint`.
pub(crate) fn start_threads(
    plan: &Plan<'_>,
    (wiring, narrow, bad_inputs): (TaskEnds, &Narrow, Arc<BadInputs>),
    (opened, first_checkpoint): (Opened, u64),
    metrics: &JobMetrics,
) -> Threads {
    let mut start = Start {
        wiring,
        narrow,
        bad_inputs,
        opened,
        metrics,
        job: plan.job().name.clone(),
        first_checkpoint,
        threads: Threads(Vec::new()),
    };
    for node in plan.operators() {
        node.instances().for_each(|id| start.instance(node, id));
    }
    plan.sinks().for_each(|node| start.sink(node));
    plan.sources().for_each(|node| start.source(node));
    start.threads
}

/// What the start phase takes each thread's ends from.
struct Start<'m> {
    wiring: TaskEnds,
    narrow: &'m Narrow,
    /// The records replays found plugins fail on.
    bad_inputs: Arc<BadInputs>,
    opened: Opened,
    metrics: &'m JobMetrics,
    /// The job's name.
    job: String,
    /// The attempt's first checkpoint id.
    first_checkpoint: u64,
    threads: Threads,
}

impl Start<'_> {
    /// The metrics of node `id`.
    fn node(&self, id: &str) -> Arc<NodeMetrics> {
        self.metrics.node(id).expect("node").clone()
    }

    /// What source, operator or sink `node` (its instance `instance` and
    /// its plugin, for an operator) does with bad records: its
    /// `on_error`, and the plan's dead-letter port of the node.
    fn bad_records(&self, node: &Node<'_, Plugin>, instance: Option<(u32, Value)>) -> BadRecords {
        let policy = match (node.source(), node.operator(), node.sink()) {
            (Some(s), _, _) => (s.on_error.clone(), s.max_bad),
            (_, Some(o), _) => (o.on_error.clone(), o.max_bad),
            (_, _, Some(s)) => (s.on_error.clone(), s.max_bad),
            (None, None, None) => unreachable!("a node is a source, an operator or a sink"),
        };
        let ports = node.output_ports();
        let port = (policy.0.dead_letter_sink())
            .and_then(|_| ports.iter().rposition(|p| p == DEAD_LETTER_PORT))
            .map(|p| p as u32);
        let at = BadAt {
            kind: node.kind(),
            id: node.name().to_owned(),
            job: self.job.clone(),
            instance,
        };
        BadRecords::new(at, policy, port, self.first_checkpoint)
    }

    /// Starts the thread of instance `id` of operator `node`.
    fn instance(&mut self, node: &Node<'_, Plugin>, id: InstanceId) {
        let (name, i) = (node.name(), id.index);
        let open = (self.opened.instances.remove(&id)).expect("an opened instance");
        let info = open.instance.info();
        let plugin = serde_json::json!({
            "name": info.name,
            "version": info.version,
            "sha256": open.instance.plugin().sha256(),
        });
        let inputs = self.wiring.inputs(id);
        let task = InstanceTask {
            shared: self.wiring.shared.clone(),
            operator: name.to_string(),
            index: i,
            instance: open.instance,
            metrics: self.node(name),
            out: Output {
                ports: self.wiring.outgoing(id),
                counters: self.node(name),
            },
            last_snapshot: open.last_snapshot,
            replay: open.replay,
            overtaken: None,
            bad_inputs: self.bad_inputs.clone(),
            bad: self.bad_records(node, Some((i, plugin))),
            recording: (node.operator())
                .and_then(|op| op.record_inputs)
                .map(|r| Recording::new(r.max_bytes)),
        };
        let thread = format!("op-{name}-{i}");
        self.threads
            .spawn(format!("{name}[{i}]"), &thread, move || {
                task.process_inputs(inputs)
            });
    }

    /// Starts the thread of sink `node`.
    fn sink(&mut self, node: &Node<'_, Plugin>) {
        let name = node.name();
        let sink = (self.opened.sinks.remove(&node.id())).expect("an opened sink");
        let id = node.id().instance(0);
        let inputs = self.wiring.inputs(id);
        let shared = self.wiring.shared.clone();
        let out = Output {
            ports: self.wiring.outgoing(id),
            counters: self.node(name),
        };
        let bad = self.bad_records(node, None);
        let task = SinkTask::new(
            (shared, name.to_string()),
            sink,
            self.node(name),
            (out, bad),
        );
        self.threads
            .spawn(name.to_string(), &format!("sink-{name}"), move || {
                task.stage_and_commit(inputs)
            });
    }

    /// Starts the thread of source `node`.
    fn source(&mut self, node: &Node<'_, Plugin>) {
        let (name, s) = (node.name(), node.source().expect("a source"));
        let open = (self.opened.sources.remove(&node.id())).expect("an opened source");
        let task = SourceTask {
            shared: self.wiring.shared.clone(),
            id: name.to_string(),
            reader: open.reader,
            batch_size: open.batch_size,
            narrow: self.narrow.get(name).copied().unwrap_or(0),
            rate: s.rate,
            ctl: self.wiring.source_ctl(node.id()),
            out: Output {
                ports: self.wiring.outgoing(node.id().instance(0)),
                counters: self.node(name),
            },
            watermark: open.watermark,
            metrics: self.node(name),
            bad: self.bad_records(node, None),
            still_reading: open.still_reading,
        };
        self.threads
            .spawn(name.to_string(), &format!("src-{name}"), move || {
                task.stream_batches()
            });
    }
}
