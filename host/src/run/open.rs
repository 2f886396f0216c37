//! The opening phases of an attempt, before any thread starts: instantiate
//! and restore every operator instance ([`instantiate_operators`]), open the
//! sinks ([`open_sinks`]) and the sources ([`open_sources`]), each at the
//! restored checkpoint.
//!
//! Invariants:
//! - A restored instance starts with the checkpoint's state (the newest
//!   version `<= id` of each key) with nothing dirty, and with the
//!   checkpoint's state version and snapshot bytes, and with its timers
//!   and watermark; the checkpoint's in-flight data for it (an unaligned
//!   checkpoint) is handed to its thread, to be processed before any input.
//! - Sinks and sources are opened at the checkpoint's commit infos and
//!   offsets, so the output ends exactly at the checkpoint and the sources
//!   replay exactly the records after it.

use std::collections::BTreeMap;

use crate::Batch;
use crate::connectors::replay::{self, ReplayReader, StillReading};
use crate::connectors::sink::Sink;
use crate::connectors::source::SourceReader;
use crate::dataflow::watermark::SourceWatermark;
use crate::keyed::state::KeyedState;
use crate::keyed::timers::Timers;
use crate::plan::{InstanceId, NodeId, Plan};
use crate::run::commit_point::CommitPoint;
use crate::run::error::RunError;
use crate::run::restore::RestorePoint;
use crate::store::{CheckpointMeta, CheckpointStore, RestoredInstance, StoreError};
use crate::threads::instance::hash_bytes;
use crate::threads::source::restored_max_timestamp;
use crate::wasm::{InstanceError, OperatorInstance};

/// An instantiated operator instance, restored when resuming.
pub(crate) struct OpenInstance {
    /// The instance.
    pub instance: OperatorInstance,
    /// Hash of the restored snapshot bytes.
    pub last_snapshot: Option<u64>,
    /// The restored checkpoint's in-flight data for the instance: `(input
    /// port, batch)` in the order it received them.
    pub replay: Vec<(u32, Batch)>,
}

/// An opened source.
pub(crate) struct OpenSource {
    /// The reader, at the restored offset.
    pub reader: Box<dyn SourceReader>,
    /// Records per batch at most.
    pub batch_size: usize,
    /// Its watermark state, continuing from the checkpoint's.
    pub watermark: SourceWatermark,
    /// The count the job's replay sources wait on, if it is one of those
    /// they wait for (every source but them).
    pub still_reading: Option<StillReading>,
}

/// What the opening phases made, by the id of the instance or node that
/// runs it.
pub(crate) struct Opened {
    /// Every operator instance.
    pub instances: BTreeMap<InstanceId, OpenInstance>,
    /// Every sink.
    pub sinks: BTreeMap<NodeId, Box<dyn Sink>>,
    /// Every source.
    pub sources: BTreeMap<NodeId, OpenSource>,
}

/// Instantiates every instance of every operator of `plan` (by node id,
/// then instance index) and restores it from the checkpoint, if any.
pub(crate) fn instantiate_operators(
    plan: &Plan<'_>,
    at: &RestorePoint,
) -> Result<BTreeMap<InstanceId, OpenInstance>, RunError> {
    let mut instances = BTreeMap::new();
    for (node, op, plugin) in plan.operator_plugins() {
        for id in node.instances() {
            let mut instance = OperatorInstance::for_operator(plugin, op, id.index)
                .map_err(|e| RunError::Task(e.into()))?;
            let mut last_snapshot = None;
            let mut replay = Vec::new();
            if let Some(meta) = &at.checkpoint {
                let r = restore_instance(&mut instance, &at.store, meta, &op.id, id.index)?;
                last_snapshot = Some(hash_bytes(&r.snapshot));
                replay = r.inflight;
            }
            let open = OpenInstance {
                instance,
                last_snapshot,
                replay,
            };
            instances.insert(id, open);
        }
    }
    Ok(instances)
}

/// Restores `instance`, instance `index` of operator `operator`, to
/// checkpoint `meta` of `store`: its keyed state, timers and watermark,
/// and its snapshot through the plugin's `restore` with the state version
/// the checkpoint recorded (the plugin's own for an operator the
/// checkpoint lacks). Returns the rest of what was loaded (its entries
/// moved into the instance): the snapshot, and the in-flight data, which
/// the caller replays or not.
pub(crate) fn restore_instance(
    instance: &mut OperatorInstance,
    store: &CheckpointStore,
    meta: &CheckpointMeta,
    operator: &str,
    index: u32,
) -> Result<RestoredInstance, RunError> {
    let mut r = store.load_instance(meta.id, operator, index)?;
    let version =
        (meta.operators.get(operator)).map_or(instance.info().state_version, |m| m.state_version);
    let timers = Timers::from_entries(r.timers.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .map_err(|message| StoreError::Corrupt {
            path: store.path().to_path_buf(),
            message: format!(
                "the timers of instance {index} of operator `{operator}` in checkpoint {} are unreadable: {message}",
                meta.id
            ),
        })?;
    instance.restore_timers(timers);
    let state = KeyedState::from_entries(std::mem::take(&mut r.entries));
    (instance.restore(state, version, &r.snapshot))
        .map_err(|e: InstanceError| RunError::Task(e.into()))?;
    Ok(r)
}

/// Opens every sink of `plan` (by node id) with the checkpoint's commit
/// info, and the transactions the commit point `point` carries, if any.
pub(crate) fn open_sinks(
    plan: &Plan<'_>,
    at: &RestorePoint,
    point: Option<&dyn CommitPoint>,
) -> Result<BTreeMap<NodeId, Box<dyn Sink>>, RunError> {
    let job = plan.job();
    let transactions = match point.map(|p| p.transactions()).transpose() {
        Ok(t) => t.flatten(),
        Err(message) => {
            let job = job.name.clone();
            return Err(RunError::CommitPoint { job, message });
        }
    };
    let mut sinks = BTreeMap::new();
    for node in plan.sinks() {
        let s = node.sink().expect("a sink");
        let staging = at.state_dir.join("sinks").join(&s.id);
        let info = at.checkpoint.as_ref().and_then(|m| m.sinks.get(&s.id));
        let sink = (s.open(&job.name, &staging, info, transactions.as_ref()))
            .map_err(|e| RunError::Task(e.into()))?;
        sinks.insert(node.id(), sink);
    }
    Ok(sinks)
}

/// Opens every source of `plan` (by node id) at the checkpoint's offset.
pub(crate) fn open_sources(
    plan: &Plan<'_>,
    at: &RestorePoint,
) -> Result<BTreeMap<NodeId, OpenSource>, RunError> {
    let mut sources = BTreeMap::new();
    let readers = plan.sources().filter_map(|n| n.source());
    let others = StillReading::new(readers.filter(|s| s.replays().is_none()).count());
    for node in plan.sources() {
        let s = node.source().expect("a source");
        let offset = at.checkpoint.as_ref().and_then(|m| m.sources.get(&s.id));
        let reader: Box<dyn SourceReader> = match s.replays() {
            Some(operator) => {
                let path = replay::queue_path(&at.state_dir, operator);
                let fed = plan.find(operator).expect("the operator a replay feeds");
                let ports = plan.node(fed).input_ports().to_vec();
                let reader = ReplayReader::open(path, &s.id, ports, others.clone(), offset);
                Box::new(reader.map_err(|e| RunError::Task(e.into()))?)
            }
            None => s.open(offset).map_err(|e| RunError::Task(e.into()))?,
        };
        if at.checkpoint.is_some() && !reader.replayable() {
            tracing::warn!(
                "source `{}` reads stdin, which cannot be replayed: records read before the crash are lost",
                s.id
            );
        }
        let max_timestamp = restored_max_timestamp(offset);
        let open = OpenSource {
            still_reading: s.replays().is_none().then(|| others.clone()),
            reader,
            batch_size: s.batch_size,
            watermark: SourceWatermark::new(s.watermark, max_timestamp),
        };
        sources.insert(node.id(), open);
    }
    Ok(sources)
}
