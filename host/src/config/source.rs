//! `[[source]]` entries: [`SourceConfig`] holds the options every source
//! has (`id`, `batch_size`, `rate`) and the settings of its connector,
//! parsed by the connector its `type` names in
//! [`connectors::SOURCE_TYPES`](crate::connectors::SOURCE_TYPES).

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use crate::connectors::source::{SourceError, SourceReader};
use crate::connectors::{SOURCE_TYPES, SourceConnector};
use crate::fields::{check_id, int_in};

/// Records per batch when a source does not set `batch_size`.
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// Largest accepted `batch_size`.
pub const MAX_BATCH_SIZE: usize = 65536;

/// One `[[source]]` entry.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// The source's id.
    pub id: String,
    /// What the source reads: the settings of its `type`.
    pub connector: Arc<dyn SourceConnector>,
    /// Records per batch (`batch_size`), 1..=[`MAX_BATCH_SIZE`].
    pub batch_size: usize,
    /// At most this many records per second (`rate`); unlimited when absent.
    pub rate: Option<u64>,
}

// By hand: a derived `==` cannot compare the connectors behind their `Arc`s.
impl PartialEq for SourceConfig {
    fn eq(&self, other: &Self) -> bool {
        let SourceConfig {
            id,
            connector,
            batch_size,
            rate,
        } = self;
        *id == other.id
            && **connector == *other.connector
            && *batch_size == other.batch_size
            && *rate == other.rate
    }
}

impl Eq for SourceConfig {}

impl SourceConfig {
    /// Opens the source at `offset` (from a checkpoint) or at the beginning.
    pub fn open(&self, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        self.connector.open(&self.id, offset)
    }
}

/// The options every source has, besides `type`: the keys of a `[[source]]`
/// table that are not its connector's.
const OPTIONS: [&str; 3] = ["id", "batch_size", "rate"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    id: Option<String>,
    batch_size: Option<i64>,
    rate: Option<i64>,
}

/// One `[[source]]` table; `dir` is the job folder.
///
/// Values of the wrong type are reported first (in the table's order), then
/// `id` and `batch_size`, then the connector's settings, then `rate`.
pub(super) fn build_source(dir: &Path, table: Table) -> Result<SourceConfig, String> {
    let types: Vec<(&str, &[&str])> = SOURCE_TYPES.iter().map(|t| (t.name, t.keys)).collect();
    let (raw, build): (RawSource, _) =
        super::split_entry(table, &types, &OPTIONS, |i, t| (SOURCE_TYPES[i].read)(t))?;
    let id = check_id(raw.id)?;
    let max = MAX_BATCH_SIZE as i64;
    let batch_size = int_in(
        "batch_size",
        raw.batch_size,
        DEFAULT_BATCH_SIZE as i64,
        1,
        max,
    )?;
    let connector = build(dir)?;
    let rate = match raw.rate {
        None => None,
        Some(r) => Some(int_in("rate", Some(r), 1, 1, i64::MAX)?),
    };
    Ok(SourceConfig {
        id,
        connector,
        batch_size,
        rate,
    })
}
