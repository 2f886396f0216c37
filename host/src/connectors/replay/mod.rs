//! Dead letters replayed into the operator that met them: the queue file
//! `weir deadletter replay` appends them to ([`enqueue`]), and the implicit
//! source that reads it into the operator's input ports ([`ReplayReader`]).
//!
//! Every operator whose `on_error` sends dead letters to a sink has one
//! such source, `replay:<operator>` ([`source_id`]), added by the job
//! file's parser. Its output ports are the operator's input ports, by name:
//! a letter goes back to the port it was met on (its `port`). The source
//! reads `<state dir>/replays/<operator>.jsonl` ([`queue_path`]); its
//! offset, checkpointed as any source's, says which letters the job has
//! processed, so each queued letter takes effect exactly once. A letter
//! that fails again becomes a new dead letter, as any bad record.
//!
//! Invariants:
//! - The queue is append-only, and only whole lines are read: a letter
//!   being appended is read once it is complete.
//! - A queue is named by the id in its first line: an offset of another
//!   queue (the file was deleted and made again) reads the new one from
//!   its start.
//! - The source waits for more letters while another source of the job is
//!   reading ([`StillReading`]); then it reads what the queue holds and
//!   ends, so a job whose input ends still ends.
//! - The source never holds event time back: it is idle whenever it has
//!   sent what it read ([`SourceReader::moves_event_time`]); replayed
//!   records are late if the operator's watermark is past them.

mod queue;
mod reader;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::SourceConnector;
use super::source::{SourceError, SourceReader};

pub use queue::{Queued, enqueue, pending};
pub use reader::ReplayReader;

/// The `kind` of a replay source, as summaries show it.
pub const KIND: &str = "replay";

/// The folder of the queues, in the state directory.
pub const DIR: &str = "replays";

/// The id of the source replaying dead letters into `operator`.
///
/// ```
/// assert_eq!(weir::connectors::replay::source_id("reconcile"), "replay:reconcile");
/// ```
pub fn source_id(operator: &str) -> String {
    format!("{KIND}:{operator}")
}

/// The queue of dead letters to replay into `operator`, in the state
/// directory `state_dir`.
pub fn queue_path(state_dir: &Path, operator: &str) -> PathBuf {
    state_dir.join(DIR).join(format!("{operator}.jsonl"))
}

/// How many of an attempt's other sources are still reading: a replay
/// source waits for more letters while any is, and ends once it read
/// what its queue holds after they all ended.
#[derive(Debug, Clone, Default)]
pub struct StillReading(Arc<AtomicUsize>);

impl StillReading {
    /// `sources` sources still reading.
    pub fn new(sources: usize) -> StillReading {
        StillReading(Arc::new(AtomicUsize::new(sources)))
    }

    /// One of them reached the end of its input.
    pub fn ended(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether any is still reading.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

/// The settings of the source replaying dead letters into `operator`. It
/// reads its queue in the run's state directory, so the run opens it
/// ([`ReplayReader::open`]), not [`SourceConnector::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayQueue {
    /// The operator it replays into.
    pub operator: String,
}

impl SourceConnector for ReplayQueue {
    fn open(&self, id: &str, _: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        Err(SourceError::Remote {
            source_id: id.to_owned(),
            target: format!("the replay queue of operator `{}`", self.operator),
            message: "it lives in a run's state directory and is opened by the run".into(),
        })
    }
}
