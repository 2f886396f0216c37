//! `[[source]]` entries: [`SourceConfig`] holds the options every source
//! has (`id`, `batch_size`, `rate`, `watermark`, `on_error`, `max_bad`) and the settings of its connector,
//! parsed by the connector its `type` names in
//! the job's [`Registry`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use crate::config::parse_duration;
use crate::connectors::source::{SourceError, SourceReader};
use crate::connectors::{Registry, SourceConnector};
use crate::dataflow::watermark::{DEFAULT_INTERVAL, WatermarkConfig};
use crate::fields::{check_id, int_in};

use super::on_error::{OnError, build_on_error};

/// Records per batch when a source does not set `batch_size`.
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// Largest accepted `batch_size`.
pub const MAX_BATCH_SIZE: usize = 65536;

/// One `[[source]]` entry.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// The source's id.
    pub id: String,
    /// Its `type` (`"file"`, `"nats"`, ...).
    pub kind: &'static str,
    /// What the source reads: the settings of its `type`.
    pub connector: Arc<dyn SourceConnector>,
    /// Records per batch (`batch_size`), 1..=[`MAX_BATCH_SIZE`].
    pub batch_size: usize,
    /// At most this many records per second (`rate`); unlimited when absent.
    pub rate: Option<u64>,
    /// How the source makes watermarks (`watermark`); none until its end
    /// when absent.
    pub watermark: Option<WatermarkConfig>,
    /// What it does with a record it cannot read (`on_error`).
    pub on_error: OnError,
    /// At most this many bad records per checkpoint (`max_bad`), past which
    /// it fails; unlimited when absent.
    pub max_bad: Option<u64>,
}

// By hand: a derived `==` cannot compare the connectors behind their `Arc`s.
impl PartialEq for SourceConfig {
    fn eq(&self, other: &Self) -> bool {
        let SourceConfig {
            id,
            kind,
            connector,
            batch_size,
            rate,
            watermark,
            on_error,
            max_bad,
        } = self;
        *id == other.id
            && *kind == other.kind
            && **connector == *other.connector
            && *batch_size == other.batch_size
            && *rate == other.rate
            && *watermark == other.watermark
            && *on_error == other.on_error
            && *max_bad == other.max_bad
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
const OPTIONS: [&str; 6] = [
    "id",
    "batch_size",
    "rate",
    "watermark",
    "on_error",
    "max_bad",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    id: Option<String>,
    batch_size: Option<i64>,
    rate: Option<i64>,
    watermark: Option<RawWatermark>,
    on_error: Option<toml::Value>,
    max_bad: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWatermark {
    max_out_of_orderness: Option<String>,
    idle_timeout: Option<String>,
    interval: Option<String>,
}

/// The `watermark` table of a source.
fn build_watermark(raw: RawWatermark) -> Result<WatermarkConfig, String> {
    let duration = |key: &str, text: Option<String>| -> Result<Option<Duration>, String> {
        text.map(|t| parse_duration(&t).map_err(|e| format!("`watermark.{key}` = {e}")))
            .transpose()
    };
    let disorder = duration("max_out_of_orderness", raw.max_out_of_orderness)?.unwrap_or_default();
    let idle_timeout = duration("idle_timeout", raw.idle_timeout)?;
    if idle_timeout.is_some_and(|d| d.is_zero()) {
        return Err("`watermark.idle_timeout` must be longer than 0s; remove it for a source that is never idle".into());
    }
    Ok(WatermarkConfig {
        max_out_of_orderness: i64::try_from(disorder.as_millis()).map_err(|_| {
            "`watermark.max_out_of_orderness` is too long; use at most a few years".to_string()
        })?,
        idle_timeout,
        interval: duration("interval", raw.interval)?.unwrap_or(DEFAULT_INTERVAL),
    })
}

/// One `[[source]]` table of a type in `registry`; `dir` is the job folder.
///
/// Values of the wrong type are reported first (in the table's order), then
/// `id` and `batch_size`, then the connector's settings, then `rate`.
pub(super) fn build_source(
    registry: &Registry,
    dir: &Path,
    table: Table,
) -> Result<SourceConfig, String> {
    let sources = registry.sources();
    let types: Vec<(&str, &[&str])> = sources.iter().map(|t| (t.name, t.keys)).collect();
    let (raw, (kind, build)): (RawSource, _) =
        super::split_entry(table, &types, &OPTIONS, |i, t| {
            (sources[i].read)(t).map(|build| (sources[i].name, build))
        })?;
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
    let rate = (raw.rate.map(|r| int_in("rate", Some(r), 1, 1, i64::MAX))).transpose()?;
    let (on_error, max_bad) = build_on_error(raw.on_error, raw.max_bad)?;
    Ok(SourceConfig {
        id,
        kind,
        connector,
        batch_size,
        rate,
        watermark: raw.watermark.map(build_watermark).transpose()?,
        on_error,
        max_bad,
    })
}
