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

use crate::config::Job;
use crate::connectors::sink::Sink;
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::output::Output;
use crate::metrics::{JobMetrics, NodeMetrics};
use crate::run::open::{OpenInstance, OpenSource};
use crate::run::wiring::TaskEnds;
use crate::threads::instance::InstanceTask;
use crate::threads::sink::SinkTask;
use crate::threads::source::SourceTask;

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

/// Starts every thread of `job` on the channel ends `wiring`. Its own
/// [`Shared`] is dropped here, so the driver sees the events channel
/// disconnect once every thread has exited.
///
/// [`Shared`]: crate::threads::Shared
pub(crate) fn start_threads(
    job: &Job,
    mut wiring: TaskEnds,
    operators: Vec<Vec<OpenInstance>>,
    sinks: Vec<Box<dyn Sink>>,
    sources: Vec<OpenSource>,
    metrics: &JobMetrics,
) -> Threads {
    let node = |id: &str| -> Arc<NodeMetrics> { metrics.node(id).expect("node").clone() };
    let shared = wiring.shared.clone();
    let mut threads = Threads(Vec::new());

    let operator_inputs = std::mem::take(&mut wiring.operator_inputs);
    for ((op, instances), inputs) in job.operators.iter().zip(operators).zip(operator_inputs) {
        for (i, (open, inputs)) in instances.into_iter().zip(inputs).enumerate() {
            let task = InstanceTask {
                shared: shared.clone(),
                operator: op.id.clone(),
                index: i as u32,
                instance: open.instance,
                metrics: node(&op.id),
                out: Output {
                    ports: wiring.outgoing(&op.id, i),
                    counters: node(&op.id),
                },
                last_snapshot: open.last_snapshot,
                replay: open.replay,
                overtaken: None,
            };
            threads.spawn(
                format!("{}[{i}]", op.id),
                &format!("op-{}-{i}", op.id),
                move || task.process_inputs(inputs),
            );
        }
    }

    let sink_inputs = std::mem::take(&mut wiring.sink_inputs);
    for ((s, sink), inputs) in job.sinks.iter().zip(sinks).zip(sink_inputs) {
        let task = SinkTask::new(shared.clone(), s.id.clone(), sink, node(&s.id));
        threads.spawn(s.id.clone(), &format!("sink-{}", s.id), move || {
            task.stage_and_commit(inputs)
        });
    }

    let ctls = std::mem::take(&mut wiring.source_ctls);
    for ((s, open), ctl) in job.sources.iter().zip(sources).zip(ctls) {
        let task = SourceTask {
            shared: shared.clone(),
            id: s.id.clone(),
            reader: open.reader,
            batch_size: open.batch_size,
            rate: s.rate,
            ctl,
            out: Output {
                ports: wiring.outgoing(&s.id, 0),
                counters: node(&s.id),
            },
            watermark: open.watermark,
            metrics: node(&s.id),
        };
        threads.spawn(s.id.clone(), &format!("src-{}", s.id), move || {
            task.stream_batches()
        });
    }
    threads
}
