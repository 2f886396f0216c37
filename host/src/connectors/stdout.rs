//! The stdout sink (`type = "stdout"`): record values printed to standard
//! output, one per line.
//!
//! - `delivery = "at-least-once"` (the default): each batch is printed and
//!   flushed as it arrives, so results show within milliseconds; after a
//!   crash the output since the restored checkpoint is printed again.
//! - `delivery = "exactly-once"`: output is printed only at commit, in
//!   checkpoint order, so a run prints exactly the committed epochs. It is
//!   not transactional across crashes: output staged in memory is lost with
//!   the process.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use toml::Table;

use super::sink::{Delivery, Done, Sink, SinkContext, SinkError, SinkFormat, encode};
use super::{BuildSink, SinkConnector, SinkType};
use crate::dataflow::Batch;
use crate::fields::from_table;

/// The registry entry of `type = "stdout"`.
pub const SINK: SinkType = SinkType {
    name: "stdout",
    keys: &["format"],
    delivery: Delivery::AtLeastOnce,
    read: StdoutConfig::read,
};

/// The settings of a stdout sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdoutConfig {
    /// How record values are written (`format`, default `lines`).
    pub format: SinkFormat,
}

impl StdoutConfig {
    fn read(table: Table) -> Result<BuildSink, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            format: Option<SinkFormat>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |_: &Path, _| {
            Ok(Arc::new(StdoutConfig {
                format: raw.format.unwrap_or(SinkFormat::Lines),
            }))
        }))
    }
}

impl SinkConnector for StdoutConfig {
    /// The commit info of a restored checkpoint is ignored: what was printed
    /// stays printed.
    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError> {
        let id = at.id;
        Ok(match at.delivery {
            Delivery::AtLeastOnce => Box::new(PrintingSink {
                id: id.to_string(),
                format: self.format,
            }),
            Delivery::ExactlyOnce => Box::new(StdoutSink {
                id: id.to_string(),
                format: self.format,
                epoch: Vec::new(),
                pending: BTreeMap::new(),
            }),
        })
    }

    fn writes_stdout(&self) -> bool {
        true
    }
}

/// Prints committed output to stdout. Not transactional across crashes:
/// output staged in memory is lost with the process, so after a crash the
/// output of the checkpoint being committed may be missing or, when printing
/// was interrupted, partly printed.
struct StdoutSink {
    id: String,
    format: SinkFormat,
    epoch: Vec<u8>,
    pending: BTreeMap<u64, Vec<u8>>,
}

/// Prints each batch as it arrives (at-least-once).
struct PrintingSink {
    id: String,
    format: SinkFormat,
}

impl PrintingSink {
    fn failed(&self, error: std::io::Error) -> SinkError {
        SinkError::Io {
            sink: self.id.clone(),
            path: "stdout".into(),
            error,
        }
    }
}

impl Sink for PrintingSink {
    fn out_on_write(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        // One write per batch, not one per line (stdout is line-buffered).
        let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        encode(batch, self.format, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Everything before the barrier is printed already.
    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(json!({ "checkpoint": id })));
        Ok(())
    }

    fn commit(&mut self, _: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(Value::Null));
        Ok(())
    }
}

impl Sink for StdoutSink {
    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        encode(batch, self.format, &mut self.epoch).map_err(|error| SinkError::Io {
            sink: self.id.clone(),
            path: "stdout".into(),
            error,
        })?;
        Ok(())
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let len = self.epoch.len();
        self.pending.insert(id, std::mem::take(&mut self.epoch));
        done(Ok(json!({"checkpoint": id, "staged_len": len})));
        Ok(())
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let ready: Vec<u64> = self.pending.range(..=id).map(|(k, _)| *k).collect();
        let mut out = std::io::stdout().lock();
        for k in ready {
            let bytes = self.pending.remove(&k).expect("listed above");
            out.write_all(&bytes)
                .and_then(|_| out.flush())
                .map_err(|error| SinkError::Io {
                    sink: self.id.clone(),
                    path: "stdout".into(),
                    error,
                })?;
        }
        done(Ok(Value::Null));
        Ok(())
    }
}
