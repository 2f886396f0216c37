//! `[[operator]]` entries: [`OperatorConfig`] (plugin, wiring, parallelism,
//! [`Exchange`], the `config` table as JSON, limits and grants, `on_error`) and [`Inputs`], how its
//! input ports are wired (each to one [`Upstream`] or, by name, to a union
//! of several).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::{Table, Value};

use super::limits::{Grants, Limits, build_grants, build_limits};
use super::on_error::{OnError, build_on_error};
use super::recording::{RecordInputs, build_record_inputs};
use super::upstream::{Upstream, read_upstreams};
use crate::fields::{check_id, from_table, int_in, resolve};

/// Largest accepted operator `parallelism`.
pub const MAX_PARALLELISM: u32 = 128;

/// One `[[operator]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorConfig {
    /// The operator's id.
    pub id: String,
    /// The plugin `.wasm` file (resolved).
    pub plugin: PathBuf,
    /// Upstream wiring; never empty.
    pub inputs: Inputs,
    /// Number of parallel instances, 1..=[`MAX_PARALLELISM`].
    pub parallelism: u32,
    /// How records reach it from its upstreams (`exchange`).
    pub exchange: Exchange,
    /// The `config` table as JSON object text (`{}` when absent; datetimes become strings).
    pub config: String,
    /// The `limits` table over [`Limits::default`] (see `SECURITY.md`).
    pub limits: Limits,
    /// The `grants` list (none by default).
    pub grants: Grants,
    /// What it does with a record its plugin fails on (`on_error`).
    pub on_error: OnError,
    /// At most this many bad records per checkpoint (`max_bad`).
    pub max_bad: Option<u64>,
    /// What of its input its instances record (`record_inputs`,
    /// `record_max_bytes`); `None`: nothing.
    pub record_inputs: Option<RecordInputs>,
}

/// How records travel to an operator from its upstreams (`exchange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exchange {
    /// In the process, to the instance that owns the record's key
    /// (`"local"`, the default).
    Local,
    /// Through a Kafka topic partitioned by key, in worker mode
    /// (`"repartition"`): a stage boundary, so the operator may run on
    /// another machine than its upstreams. In one process, as `"local"`.
    Repartition,
}

/// How an operator's input ports are wired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {
    /// `inputs = { port = "upstream" }` or `{ port = ["a", "b"] }`: each named
    /// port with its upstreams (several: a union), sorted by port name; every
    /// list is non-empty and without duplicates.
    Named(Vec<(String, Vec<Upstream>)>),
    /// `inputs = ["upstream", ...]`: one upstream per input port of the plugin, in
    /// declared order.
    Positional(Vec<Upstream>),
}

impl Inputs {
    /// The upstreams, in wiring order (an upstream wired to two ports appears twice).
    pub fn upstreams(&self) -> Vec<&Upstream> {
        self.port_lists().into_iter().flatten().collect()
    }

    /// The upstreams of each port as written: per named port its list, per
    /// positional entry a list of one.
    pub fn port_lists(&self) -> Vec<&[Upstream]> {
        match self {
            Inputs::Named(pairs) => pairs.iter().map(|(_, ups)| ups.as_slice()).collect(),
            Inputs::Positional(ups) => ups.iter().map(std::slice::from_ref).collect(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperator {
    id: Option<String>,
    plugin: Option<String>,
    inputs: Option<Value>,
    parallelism: Option<i64>,
    exchange: Option<Value>,
    config: Option<Value>,
    limits: Option<Value>,
    grants: Option<Value>,
    on_error: Option<Value>,
    max_bad: Option<i64>,
    record_inputs: Option<String>,
    record_max_bytes: Option<String>,
}

/// One `[[operator]]` table; `dir` is the job folder.
pub(super) fn build_operator(dir: &Path, table: Table) -> Result<OperatorConfig, String> {
    const HINT: &str = "use inputs = { port = \"upstream\" }, inputs = { port = [\"a\", \"b\"] } \
                        or inputs = [\"upstream\"]";
    let raw: RawOperator = from_table(table)?;
    let id = check_id(raw.id)?;
    let inputs = match raw.inputs {
        Some(Value::Table(table)) => {
            let pairs = table.into_iter().map(|(port, v)| {
                let ups = read_upstreams(&format!("input port {port:?}"), v, true, HINT)?;
                Ok((port, ups))
            });
            let mut pairs: Vec<(String, Vec<Upstream>)> = pairs.collect::<Result<_, String>>()?;
            pairs.sort(); // table order depends on toml's `preserve_order` feature
            Inputs::Named(pairs)
        }
        Some(Value::Array(list)) => {
            let each = "each entry of `inputs`";
            let hint = "to wire several upstreams into one port, name it: \
                        inputs = { port = [\"a\", \"b\"] }";
            let ups = list
                .into_iter()
                .map(|v| read_upstreams(each, v, false, hint).map(|mut one| one.remove(0)));
            Inputs::Positional(ups.collect::<Result<_, _>>()?)
        }
        Some(other) => {
            return Err(format!(
                "`inputs` must be a table or a list (got {}); {HINT}",
                other.type_str()
            ));
        }
        None => return Err(format!("`inputs` is missing; {HINT}")),
    };
    if inputs.upstreams().is_empty() {
        return Err(format!("`inputs` is empty; {HINT}"));
    }
    let config = match raw.config {
        None => "{}".to_owned(),
        Some(table @ Value::Table(_)) => to_json(table)?.to_string(),
        Some(other) => {
            return Err(format!(
                "`config` must be a table (got {}), e.g. config = {{ k = 1 }}",
                other.type_str()
            ));
        }
    };
    let exchange = match raw.exchange {
        None => Exchange::Local,
        Some(Value::String(s)) if s == "local" => Exchange::Local,
        Some(Value::String(s)) if s == "repartition" => Exchange::Repartition,
        Some(other) => {
            return Err(format!(
                "`exchange` = {other} is not an exchange; use \"local\" (the default) or \"repartition\""
            ));
        }
    };
    let max = i64::from(MAX_PARALLELISM);
    let (on_error, max_bad) = build_on_error(raw.on_error, raw.max_bad)?;
    Ok(OperatorConfig {
        id,
        plugin: resolve(dir, "plugin", raw.plugin)?,
        inputs,
        parallelism: int_in("parallelism", raw.parallelism, 1, 1, max)?,
        exchange,
        config,
        limits: build_limits(raw.limits)?,
        grants: build_grants(raw.grants)?,
        on_error,
        max_bad,
        record_inputs: build_record_inputs(raw.record_inputs, raw.record_max_bytes)?,
    })
}

/// TOML to JSON; datetimes become strings, non-finite floats (not JSON) are rejected.
fn to_json(value: Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as Json;
    Ok(match value {
        Value::String(s) => Json::String(s),
        Value::Integer(i) => Json::from(i),
        Value::Float(f) => Json::Number(serde_json::Number::from_f64(f).ok_or_else(|| {
            format!("`config` contains the float {f}, which JSON cannot represent; use a string")
        })?),
        Value::Boolean(b) => Json::Bool(b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(a) => Json::Array(a.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Table(t) => {
            let entries = t.into_iter().map(|(k, v)| Ok((k, to_json(v)?)));
            Json::Object(entries.collect::<Result<_, String>>()?)
        }
    })
}
