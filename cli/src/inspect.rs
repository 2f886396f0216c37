//! The reports of `weir inspect` (what a plugin is, without running it),
//! `weir checkpoints` and `weir state` (keyed state, and pending timers
//! with `--timers`).

use serde::Serialize;

use weir::Plugin;
use weir::keyed::timers::{Entry, Timer, decode};

/// A plugin's self-description plus what the component imports and exports.
/// Its JSON form is the stable output of `weir inspect --json`.
///
/// ```no_run
/// let rt = weir::Runtime::new().unwrap();
/// let plugin = rt.load("plugins/target/filter.wasm").unwrap();
/// let report = weir_cli::inspect::PluginReport::of(&plugin, rt.engine());
/// println!("{}", report.to_text());
/// ```
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginReport {
    /// The plugin file.
    pub path: String,
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Input port names, in port-number order.
    pub inputs: Vec<String>,
    /// Output port names, in port-number order.
    pub outputs: Vec<String>,
    /// State layout version.
    pub state_version: u32,
    /// Batch form across the boundary: `flat` when the component exports
    /// `weir:operator/flat-lifecycle` (world `operator-flat`), else
    /// `records`.
    pub batches: String,
    /// Whether records whose value is a row reach it as rows (it exports
    /// `weir:operator/row-input` and says it reads them), rather than as
    /// their JSON text.
    pub reads_rows: bool,
    /// Names of the component's imports (interfaces), sorted.
    pub imports: Vec<String>,
    /// Names of the component's exports, sorted.
    pub exports: Vec<String>,
    /// File size in bytes.
    pub size: u64,
    /// sha256 of the file, lower-case hex.
    pub sha256: String,
}

impl PluginReport {
    /// Describes `plugin`.
    pub fn of(plugin: &Plugin, engine: &weir::wasm::Engine) -> Self {
        let ty = plugin.component().component_type();
        let mut imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let mut exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        imports.sort();
        exports.sort();
        let info = plugin.info();
        PluginReport {
            path: plugin.path().display().to_string(),
            name: info.name.clone(),
            version: info.version.clone(),
            inputs: info.inputs.clone(),
            outputs: info.outputs.clone(),
            state_version: info.state_version,
            batches: if plugin.flat() { "flat" } else { "records" }.to_string(),
            reads_rows: plugin.reads_rows(),
            imports,
            exports,
            size: plugin.size(),
            sha256: plugin.sha256().to_string(),
        }
    }

    /// A human-readable multi-line description.
    pub fn to_text(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut s = format!(
            "plugin:        {} {}\nfile:          {} ({} bytes)\nsha256:        {}\ninputs:        {}\noutputs:       {}\nstate version: {}\nbatches:       {}\nrows:          {}\n",
            self.name,
            self.version,
            self.path,
            self.size,
            self.sha256,
            list(&self.inputs),
            list(&self.outputs),
            self.state_version,
            self.batches,
            match self.reads_rows {
                true => "read as rows",
                false => "read as JSON text",
            },
        );
        s.push_str("imports:\n");
        for i in &self.imports {
            s.push_str(&format!("  {i}\n"));
        }
        s.push_str("exports:\n");
        for e in &self.exports {
            s.push_str(&format!("  {e}\n"));
        }
        s
    }
}

/// One complete checkpoint as `weir checkpoints` shows it. Its JSON form
/// (with `--json`, an array of these) is stable: the stored
/// [`CheckpointMeta`](weir::store::CheckpointMeta) fields plus `time`, the
/// trigger time in RFC 3339, with `unaligned`, `inflight_bytes` and
/// `recorded_bytes` always
/// present (the store leaves them out when false and 0).
#[derive(Debug, Clone)]
pub struct CheckpointReport {
    /// Trigger time, RFC 3339 UTC.
    pub time: String,
    /// The stored metadata.
    pub meta: weir::store::CheckpointMeta,
}

/// The JSON form of a [`CheckpointReport`].
#[derive(Serialize)]
struct ReportJson<'a> {
    time: &'a str,
    #[serde(flatten)]
    meta: &'a weir::store::CheckpointMeta,
    /// `false` when the stored metadata leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    unaligned: Option<bool>,
    /// `0` when the stored metadata leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    inflight_bytes: Option<u64>,
    /// `0` when the stored metadata leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded_bytes: Option<u64>,
}

impl Serialize for CheckpointReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = &self.meta;
        ReportJson {
            time: &self.time,
            meta: m,
            unaligned: (!m.unaligned).then_some(false),
            inflight_bytes: (m.inflight_bytes == 0).then_some(0),
            recorded_bytes: (m.recorded_bytes == 0).then_some(0),
        }
        .serialize(serializer)
    }
}

impl CheckpointReport {
    /// The report of `meta`.
    pub fn of(meta: weir::store::CheckpointMeta) -> Self {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(meta.started_at_ms);
        CheckpointReport {
            time: humantime::format_rfc3339_millis(t).to_string(),
            meta,
        }
    }

    /// Human-readable lines.
    pub fn to_text(&self) -> String {
        let m = &self.meta;
        let pause = m
            .pause_ms
            .map_or(String::new(), |p| format!("  pause {p} ms"));
        let unaligned = match m.unaligned {
            true => format!("  unaligned, in flight {} bytes", m.inflight_bytes),
            false => String::new(),
        };
        let recorded = match m.recorded_bytes {
            0 => String::new(),
            n => format!("  recorded input {n} bytes"),
        };
        let mut s = format!(
            "checkpoint {}{}  {}  duration {} ms  alignment {} ms{pause}{unaligned}  written {} bytes{recorded}  keys {}\n",
            m.id,
            if m.final_checkpoint { " (final)" } else { "" },
            self.time,
            m.duration_ms,
            m.alignment_ms,
            m.bytes_written,
            m.state_keys
        );
        if let Some(d) = &m.derived {
            let origin = match &d.savepoint {
                Some(dir) => format!("checkpoint {} of savepoint {dir}", d.checkpoint),
                None => format!("checkpoint {}", d.checkpoint),
            };
            s.push_str(&format!("  derived from {origin}\n"));
            for (op, [from, to]) in &d.rescaled {
                s.push_str(&format!(
                    "  rescaled {op}: {from} -> {to} instances (state redistributed by key group)\n"
                ));
            }
            for what in &d.dropped {
                s.push_str(&format!("  dropped  {what} (--allow-non-restored-state)\n"));
            }
        }
        for (id, offset) in &m.sources {
            s.push_str(&format!("  source   {id}: offset {offset}\n"));
        }
        for (id, op) in &m.operators {
            let origin = match &op.swapped {
                Some(swap) => format!(", swapped in from {} (kept as {})", swap.from, swap.copy),
                None => String::new(),
            };
            s.push_str(&format!(
                "  operator {id}: {} {} (state version {}, parallelism {}, sha256 {}){origin}\n",
                op.plugin_name,
                version_or_dash(op),
                op.state_version,
                op.parallelism,
                op.sha256
            ));
        }
        s
    }
}

/// The plugin version an operator recorded, or `-` when it recorded none.
fn version_or_dash(meta: &weir::store::OperatorMeta) -> &str {
    if meta.plugin_version.is_empty() {
        "-"
    } else {
        &meta.plugin_version
    }
}

/// How `weir state` shows a value (`--format`).
///
/// ```
/// use serde_json::json;
/// use weir_cli::inspect::ValueFormat;
/// assert_eq!(ValueFormat::Auto.show(b"42"), (json!(42), "json"));
/// assert_eq!(ValueFormat::Auto.show(b"hi there"), (json!("hi there"), "utf8"));
/// let mut row = vec![weir_flat::state::ROW_VALUE];
/// weir_flat::row::RowWriter::new(&mut row).f64("a", 1.5).bool("done", true);
/// assert_eq!(ValueFormat::Auto.show(&row), (json!({"a": 1.5, "done": true}), "row"));
/// let counter = 5u64.to_le_bytes();
/// assert_eq!(ValueFormat::Auto.show(&counter), (json!({"hex": "0500000000000000"}), "hex"));
/// assert_eq!(ValueFormat::Hex.show(b"42"), (json!("3432"), "hex"));
/// assert_eq!(ValueFormat::Base64.show(&[0xff]), (json!("/w=="), "base64"));
/// assert_eq!(ValueFormat::Utf8.show(&[b'a', 0xff]), (json!("a\u{fffd}"), "utf8"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ValueFormat {
    /// JSON when the bytes parse as JSON, the JSON object of its fields
    /// for a row value (as the SDKs' `with_row_values` / `Row` write), a
    /// string when they are text (UTF-8 without control characters other
    /// than tab and line breaks), else `{"hex": "..."}`.
    #[default]
    Auto,
    /// A string: the bytes as UTF-8, invalid sequences replaced by U+FFFD.
    Utf8,
    /// A string of lower-case hex digits, two per byte.
    Hex,
    /// A string in standard base64.
    Base64,
}

impl ValueFormat {
    /// `bytes` shown in this format, with the name of the encoding used:
    /// `json`, `row`, `utf8`, `hex` or `base64`.
    pub fn show(self, bytes: &[u8]) -> (serde_json::Value, &'static str) {
        use base64::Engine as _;
        use serde_json::Value;
        let hex = || bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        match self {
            ValueFormat::Utf8 => (String::from_utf8_lossy(bytes).into(), "utf8"),
            ValueFormat::Hex => (hex().into(), "hex"),
            ValueFormat::Base64 => {
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                (text.into(), "base64")
            }
            ValueFormat::Auto => {
                if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
                    return (v, "json");
                }
                let row = weir::keyed::value::row_json(bytes);
                if let Some(v) = row.and_then(|json| serde_json::from_slice(&json).ok()) {
                    return (v, "row");
                }
                let text = |s: &str| !s.chars().any(|c| c.is_control() && !"\t\n\r".contains(c));
                match std::str::from_utf8(bytes) {
                    Ok(s) if text(s) => (s.into(), "utf8"),
                    _ => (serde_json::json!({ "hex": hex() }), "hex"),
                }
            }
        }
    }
}

/// How `weir state` shows a key: a string when UTF-8, else `{"base64": ...}`.
pub fn show_key(b: &[u8]) -> serde_json::Value {
    use base64::Engine as _;
    match std::str::from_utf8(b) {
        Ok(s) => serde_json::Value::String(s.to_string()),
        Err(_) => {
            serde_json::json!({"base64": base64::engine::general_purpose::STANDARD.encode(b)})
        }
    }
}

/// The fields that show a keyed-state entry's key in `weir state`: the key,
/// and for the SDK's `MapState` layout `<key> 0x00 <name>` (both UTF-8)
/// the key and the state's name apart, `{"key": "u1", "state": "s"}`
/// rather than `"u1\u0000s"`; `key_encoding` too when `encoding`.
///
/// ```
/// use weir_cli::inspect::key_fields;
/// let f = key_fields(b"u1\0s", false);
/// assert_eq!(serde_json::Value::Object(f), serde_json::json!({"key": "u1", "state": "s"}));
/// let f = key_fields(b"plain", true);
/// assert_eq!(serde_json::Value::Object(f), serde_json::json!({"key": "plain", "key_encoding": "utf8"}));
/// ```
pub fn key_fields(k: &[u8], encoding: bool) -> serde_json::Map<String, serde_json::Value> {
    let mut fields = serde_json::Map::new();
    let split = k
        .iter()
        .position(|&b| b == 0)
        .map(|at| (&k[..at], &k[at + 1..]));
    match split {
        Some((key, name))
            if !name.contains(&0)
                && std::str::from_utf8(key).is_ok()
                && std::str::from_utf8(name).is_ok() =>
        {
            fields.insert("key".into(), show_key(key));
            fields.insert("state".into(), show_key(name));
        }
        _ => {
            fields.insert("key".into(), show_key(k));
        }
    }
    if encoding {
        let utf8 = std::str::from_utf8(k).is_ok();
        let name = if utf8 { "utf8" } else { "base64" };
        fields.insert("key_encoding".into(), name.into());
    }
    fields
}

/// Whether state key `key` matches `--key wanted`: equal, or `wanted`
/// followed by 0x00 (the SDK's `MapState` layout `<key> 0x00 <name>`).
///
/// ```
/// use weir_cli::inspect::key_matches;
/// assert!(key_matches(b"hello\0count", b"hello"));
/// assert!(key_matches(b"hello", b"hello"));
/// assert!(!key_matches(b"hello2\0count", b"hello"));
/// ```
pub fn key_matches(key: &[u8], wanted: &[u8]) -> bool {
    key == wanted || (key.len() > wanted.len() && key.starts_with(wanted) && key[wanted.len()] == 0)
}

/// The pending timers and the watermark of one operator instance as a
/// checkpoint stored them: what `weir state --timers` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceTimers {
    /// The instance.
    pub instance: u32,
    /// Its watermark (`i64::MAX`: the end of time); `None` when it had none.
    pub watermark: Option<i64>,
    /// Its pending timers, per domain in firing order (time, then key).
    pub timers: Vec<Timer>,
}

/// The timer entries of an operator (`(instance, entry key, entry value)`,
/// as [`CheckpointStore::operator_state`] reads the store name
/// [`timer_space`]`(operator)`), decoded and grouped by instance: one
/// [`InstanceTimers`] per instance below `parallelism`, keeping only timers
/// whose key matches `key` ([`key_matches`]).
///
/// ```
/// use weir::keyed::timers::{Domain, Timers};
/// let mut t = Timers::default();
/// t.register(Domain::EventTime, 10, b"a");
/// t.set_watermark(3);
/// let entries: Vec<_> = t.take_changes().into_iter().map(|(k, v)| (1, k, v.unwrap())).collect();
/// let listed = weir_cli::inspect::instance_timers(&entries, 2, None).unwrap();
/// assert_eq!((listed[0].watermark, listed[0].timers.len()), (None, 0));
/// assert_eq!((listed[1].watermark, listed[1].timers[0].time), (Some(3), 10));
/// ```
///
/// [`CheckpointStore::operator_state`]: weir::store::CheckpointStore::operator_state
/// [`timer_space`]: weir::store::timer_space
pub fn instance_timers(
    entries: &[weir::store::OperatorEntry],
    parallelism: u32,
    key: Option<&[u8]>,
) -> Result<Vec<InstanceTimers>, String> {
    let mut out: Vec<InstanceTimers> = (0..parallelism)
        .map(|instance| InstanceTimers {
            instance,
            watermark: None,
            timers: Vec::new(),
        })
        .collect();
    for (instance, k, v) in entries {
        let slot = out.get_mut(*instance as usize).ok_or_else(|| {
            format!(
                "timers of instance {instance}, beyond the operator's parallelism {parallelism}"
            )
        })?;
        match decode(k, v).map_err(|e| format!("a timer entry of instance {instance}: {e}"))? {
            Entry::Watermark(w) => slot.watermark = Some(w),
            Entry::Timer(t) if key.is_none_or(|w| key_matches(&t.key, w)) => slot.timers.push(t),
            Entry::Timer(_) => {}
        }
    }
    for i in &mut out {
        // Firing order per domain, whatever order the entries came in.
        i.timers
            .sort_by(|a, b| (a.domain, a.time, &a.key).cmp(&(b.domain, b.time, &b.key)));
    }
    Ok(out)
}

/// A timer key in text: a JSON string when it is printable UTF-8, else
/// `0x` and lower-case hex.
///
/// ```
/// use weir_cli::inspect::show_timer_key;
/// assert_eq!(show_timer_key(b"w1"), "\"w1\"");
/// assert_eq!(show_timer_key(&[0, 0xff]), "0x00ff");
/// ```
pub fn show_timer_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.chars().any(char::is_control) => serde_json::Value::from(s).to_string(),
        _ => format!(
            "0x{}",
            key.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}

/// Pending timers over all instances.
pub fn timer_count(instances: &[InstanceTimers]) -> usize {
    instances.iter().map(|i| i.timers.len()).sum()
}

/// `weir state --timers` for one operator, as text: a header line, then per
/// instance its watermark and its timers (domain, time in ms and RFC 3339,
/// key).
pub fn timers_text(checkpoint: u64, operator: &str, instances: &[InstanceTimers]) -> String {
    let mut s = format!(
        "operator `{operator}` at checkpoint {checkpoint}: {} pending timer(s)\n",
        timer_count(instances)
    );
    for i in instances {
        s.push_str(&format!(
            "  instance {}: watermark {}, {} pending timer(s)\n",
            i.instance,
            match i.watermark {
                Some(w) => crate::event_time::show_time(w),
                None => "none".into(),
            },
            i.timers.len()
        ));
        for t in &i.timers {
            s.push_str(&format!(
                "    {:<15}  {:>20}  {:<24}  key {}\n",
                t.domain.name(),
                t.time,
                crate::event_time::show_time(t.time),
                show_timer_key(&t.key)
            ));
        }
    }
    s
}

/// `weir state --timers --json` for one operator: `{"operator", "instances":
/// [{"instance", "watermark", "watermark_utc", "timers": [{"domain",
/// "time", "time_utc", "key", "key_encoding"}]}]}`; times in milliseconds
/// since the Unix epoch, their `_utc` forms as [`show_time`] writes them
/// (`end` for `i64::MAX`), a missing watermark `null`.
///
/// [`show_time`]: crate::event_time::show_time
pub fn timers_json(operator: &str, instances: &[InstanceTimers]) -> serde_json::Value {
    use crate::event_time::show_time;
    let list: Vec<_> = instances
        .iter()
        .map(|i| {
            let timers: Vec<_> = i
                .timers
                .iter()
                .map(|t| {
                    let encoding = if std::str::from_utf8(&t.key).is_ok() {
                        "utf8"
                    } else {
                        "base64"
                    };
                    serde_json::json!({
                        "domain": t.domain.name(), "time": t.time, "time_utc": show_time(t.time),
                        "key": show_key(&t.key), "key_encoding": encoding,
                    })
                })
                .collect();
            serde_json::json!({
                "instance": i.instance,
                "watermark": i.watermark,
                "watermark_utc": i.watermark.map(show_time),
                "timers": timers,
            })
        })
        .collect();
    serde_json::json!({"operator": operator, "instances": list})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(extra: &str) -> CheckpointReport {
        let json = format!(
            r#"{{"id":3,"job":"j","started_at_ms":1,"duration_ms":2,"alignment_ms":1,"bytes_written":4,"state_keys":5,"key_groups":128,"sources":{{}},"operators":{{}},"sinks":{{}},"final_checkpoint":false{extra}}}"#
        );
        CheckpointReport::of(serde_json::from_str(&json).unwrap())
    }

    /// `--json` always says whether a checkpoint was unaligned and how many
    /// in-flight bytes it stored; the text only for unaligned ones.
    #[test]
    fn reports_show_unaligned_checkpoints_and_their_inflight_bytes() {
        let aligned = serde_json::to_value(report("")).unwrap();
        assert_eq!(aligned["unaligned"], false);
        assert_eq!(aligned["inflight_bytes"], 0);
        assert_eq!(aligned["alignment_ms"], 1);
        assert!(!report("").to_text().contains("unaligned"));
        let r = report(r#","unaligned":true,"inflight_bytes":640"#);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json.matches("\"unaligned\"").count(), 1, "{json}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (v["unaligned"].clone(), v["inflight_bytes"].clone()),
            (true.into(), 640.into())
        );
        assert!(
            r.to_text().contains("unaligned, in flight 640 bytes"),
            "{}",
            r.to_text()
        );
    }
}
