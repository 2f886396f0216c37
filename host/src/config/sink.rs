//! `[[sink]]` entries: [`SinkConfig`] holds the options every sink has
//! (`id`, `input`: one [`Upstream`] or a union of several) and the settings
//! of its connector, parsed by the connector its `type` names in
//! the job's [`Registry`].

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use crate::connectors::sink::{Delivery, Sink, SinkContext, SinkError, Transactions};
use crate::connectors::{Registry, SinkConnector};
use crate::fields::check_id;

use super::on_error::{OnError, build_on_error};
use super::upstream::{Upstream, read_upstreams};

/// One `[[sink]]` entry.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// The sink's id.
    pub id: String,
    /// Its `type` (`"file"`, `"nats"`, ...).
    pub kind: &'static str,
    /// Where the sink writes: the settings of its `type`.
    pub connector: Arc<dyn SinkConnector>,
    /// The upstreams (sources or operators' output ports), never empty and
    /// without duplicates; several are a union. The dead-letter ports of
    /// the entries whose `on_error` names this sink are added last.
    pub input: Vec<Upstream>,
    /// Its guarantee (`delivery`; when absent, its type's default).
    pub delivery: Delivery,
    /// What it does with a record its destination would refuse
    /// (`on_error`): see [`SinkConnector`]'s `refuse`.
    pub on_error: OnError,
    /// At most this many bad records per checkpoint (`max_bad`).
    pub max_bad: Option<u64>,
}

// By hand: a derived `==` cannot compare the connectors behind their `Arc`s.
impl PartialEq for SinkConfig {
    fn eq(&self, other: &Self) -> bool {
        let SinkConfig {
            id,
            kind,
            connector,
            input,
            delivery,
            on_error,
            max_bad,
        } = self;
        *id == other.id
            && *kind == other.kind
            && **connector == *other.connector
            && *input == other.input
            && *delivery == other.delivery
            && *on_error == other.on_error
            && *max_bad == other.max_bad
    }
}

impl Eq for SinkConfig {}

impl SinkConfig {
    /// Opens the sink of job `job` (its name). `staging` is a folder the sink owns (under the state
    /// dir); `restore` is the sink's commit info in the checkpoint being
    /// restored, or `None` to start fresh (which empties an output file);
    /// `transactions` what the run's commit point carries, if anything
    /// ([`SinkContext::transactions`]).
    pub fn open(
        &self,
        job: &str,
        staging: &Path,
        restore: Option<&Value>,
        transactions: Option<&Transactions>,
    ) -> Result<Box<dyn Sink>, SinkError> {
        self.connector.open(&SinkContext {
            job,
            id: &self.id,
            delivery: self.delivery,
            staging,
            restore,
            transactions,
        })
    }
}

/// The options every sink has, besides `type`: the keys of a `[[sink]]`
/// table that are not its connector's.
const OPTIONS: [&str; 5] = ["id", "input", "delivery", "on_error", "max_bad"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    id: Option<String>,
    input: Option<toml::Value>,
    delivery: Option<Delivery>,
    on_error: Option<toml::Value>,
    max_bad: Option<i64>,
}

/// One `[[sink]]` table of a type in `registry`; `dir` is the job folder.
///
/// Values of the wrong type are reported first (in the table's order), then
/// `id`, then the connector's settings, then `input`.
pub(super) fn build_sink(
    registry: &Registry,
    dir: &Path,
    table: Table,
) -> Result<SinkConfig, String> {
    let sinks = registry.sinks();
    let types: Vec<(&str, &[&str])> = sinks.iter().map(|t| (t.name, t.keys)).collect();
    let (raw, (sink_type, build)): (RawSink, _) =
        super::split_entry(table, &types, &OPTIONS, |i, t| {
            (sinks[i].read)(t).map(|build| (sinks[i], build))
        })?;
    let id = check_id(raw.id)?;
    let delivery = raw.delivery.unwrap_or(sink_type.delivery);
    let connector = build(dir, delivery)?;
    const HINT: &str = "write input = \"<source or operator id>\", \"<operator id>.<output port>\" \
                        or a list of them";
    let input = match raw.input {
        Some(toml::Value::String(input)) if input.is_empty() => None,
        Some(input) => Some(read_upstreams("`input`", input, true, HINT)?),
        None => None,
    };
    // A sink may have no `input` of its own when it takes dead letters;
    // `Job::wire_dead_letters` checks that it does.
    let input = input.unwrap_or_default();
    let (on_error, max_bad) = build_on_error(raw.on_error, raw.max_bad)?;
    Ok(SinkConfig {
        id,
        kind: sink_type.name,
        connector,
        input,
        delivery,
        on_error,
        max_bad,
    })
}
