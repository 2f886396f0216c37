//! `weir deadletter ls JOB`: the dead letters of a job, read back from its
//! dead-letter sinks (a file, a Kafka topic, a NATS subject, a PostgreSQL table: what
//! `on_error` names) and
//! summed up by the node that met them and their error, once what is the
//! record's own (its numbers and quoted text) is taken out of the message.
//! Each group says how many, of which kind, and where the first came from.
//! [`replay`] queues an operator's dead letters for replay into it.

pub mod replay;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::Value;
use weir::config::{Job, SinkConfig};
use weir_connectors::kafka::read_back::committed_values;
use weir_connectors::kafka::sink::KafkaSinkConfig;
use weir_connectors::nats::read_back::published;
use weir_connectors::nats::sink::NatsSinkConfig;
use weir_connectors::postgres::PostgresSinkConfig;

/// The dead letters of one sink.
#[derive(Debug, Serialize)]
pub struct SinkLetters {
    /// The sink's id.
    pub sink: String,
    /// Where they were read: a file, or a topic at its brokers.
    pub from: String,
    /// How many.
    pub letters: u64,
    /// By node and error, most first.
    pub groups: Vec<LetterGroup>,
}

/// Dead letters of one shape: met by one node, of one kind, with one error
/// once the records' own words are taken out.
#[derive(Debug, Serialize)]
pub struct LetterGroup {
    /// The node that met them.
    pub node: String,
    /// What it is: `source`, `operator` or `sink`.
    pub kind: String,
    /// What was wrong, in a word (`unreadable`, `invalid-input`, ...).
    pub error_kind: String,
    /// The error, with numbers as `N` and quoted text as `"…"`.
    pub error: String,
    /// How many.
    pub count: u64,
    /// The first of them: its own error, origin and checkpoint.
    pub first: Value,
}

/// The dead letters of the job at `path`, from each of its dead-letter
/// sinks, or from sink `only`.
pub fn ls(path: &Path, only: Option<&str>) -> anyhow::Result<Vec<SinkLetters>> {
    let job = Job::load(path, &weir_connectors::registry())?;
    let mut named: Vec<&str> = (job.sources.iter().map(|s| &s.on_error))
        .chain(job.operators.iter().map(|o| &o.on_error))
        .chain(job.sinks.iter().map(|s| &s.on_error))
        .filter_map(|p| p.dead_letter_sink())
        .collect();
    named.sort_unstable();
    named.dedup();
    if let Some(id) = only {
        if !named.contains(&id) {
            bail!(
                "{}: sink `{id}` takes no dead letters (those that do: {}); name one of them",
                job.path.display(),
                list(&named)
            );
        }
        named = vec![id];
    }
    if named.is_empty() {
        bail!(
            "{}: no `on_error` sends dead letters to a sink; set on_error = {{ dead_letter = \"<sink id>\" }} on a source, operator or sink",
            job.path.display()
        );
    }
    let mut out = Vec::new();
    for id in named {
        let sink = job.sinks.iter().find(|s| s.id == id).expect("a job sink");
        let (from, letters) = letters(&job, sink)?;
        out.push(summary(id, from, &letters));
    }
    Ok(out)
}

/// `names` as a comma-separated list, or `none`.
fn list(names: &[&str]) -> String {
    match names {
        [] => "none".into(),
        names => names.join(", "),
    }
}

/// Where `sink` keeps its dead letters, and the letters, each a JSON value.
fn letters(job: &Job, sink: &SinkConfig) -> anyhow::Result<(String, Vec<Value>)> {
    let (from, values) = read(job, sink)?;
    let letters = (values.iter().enumerate())
        .map(|(i, value)| {
            serde_json::from_slice(value).with_context(|| {
                format!(
                    "dead letter {} of sink `{}` ({from}) is not JSON; is something else writing there?",
                    i + 1,
                    sink.id
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((from, letters))
}

/// Where `sink` keeps its dead letters, and their values (JSON objects).
fn read(job: &Job, sink: &SinkConfig) -> anyhow::Result<(String, Vec<Vec<u8>>)> {
    if let Some(file) = sink.connector.file() {
        let from = file.display().to_string();
        let text = match std::fs::read(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {from}")),
        };
        let lines = text.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        return Ok((from, lines.map(<[u8]>::to_vec).collect()));
    }
    let any = sink.connector.as_ref() as &dyn std::any::Any;
    if let Some(k) = any.downcast_ref::<KafkaSinkConfig>() {
        let from = format!("topic `{}` at {}", k.topic, k.client.brokers);
        let values = committed_values(&k.client, &k.topic)
            .map_err(|e| anyhow::anyhow!("{}: sink `{}`: {e}", job.path.display(), sink.id))?;
        return Ok((from, values));
    }
    if let Some(n) = any.downcast_ref::<NatsSinkConfig>() {
        let from = format!("subject `{}` at {}", n.subject, n.url);
        let values = published(n)
            .map_err(|e| anyhow::anyhow!("{}: sink `{}`: {e}", job.path.display(), sink.id))?;
        return Ok((from, values));
    }
    if let Some(p) = any.downcast_ref::<PostgresSinkConfig>() {
        let from = format!("table {} at {}", p.table, p.server);
        let values = (p.rows_as_json())
            .map_err(|e| anyhow::anyhow!("{}: sink `{}`: {e}", job.path.display(), sink.id))?;
        return Ok((from, values));
    }
    bail!(
        "{}: sink `{}` is a `{}` sink; `weir deadletter` reads dead letters back from `file`, `kafka`, `nats` and `postgres` sinks: send them to one of those",
        job.path.display(),
        sink.id,
        sink.kind
    )
}

/// The dead letters `letters` of sink `sink` (read from `from`), grouped.
fn summary(sink: &str, from: String, letters: &[Value]) -> SinkLetters {
    type Key = (String, String, String, String);
    let mut groups: BTreeMap<Key, (u64, Value)> = BTreeMap::new();
    for letter in letters {
        let field = |k: &str| letter[k].as_str().unwrap_or_default().to_owned();
        let error = field("error");
        let key = (
            field("node"),
            field("kind"),
            field("error_kind"),
            shape(&error),
        );
        let first = serde_json::json!({
            "error": error,
            "origin": letter["origin"],
            "checkpoint": letter["checkpoint"],
        });
        groups.entry(key).or_insert((0, first)).0 += 1;
    }
    let mut groups: Vec<LetterGroup> = (groups.into_iter())
        .map(
            |((node, kind, error_kind, error), (count, first))| LetterGroup {
                node,
                kind,
                error_kind,
                error,
                count,
                first,
            },
        )
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    SinkLetters {
        sink: sink.to_owned(),
        from,
        letters: letters.len() as u64,
        groups,
    }
}

/// `error` with what belongs to one record taken out: every run of digits
/// becomes `N`, text in double or single quotes `"…"` or `'…'`; names in
/// backquotes (columns, fields, nodes) stay.
///
/// ```
/// use weir_cli::deadletter::shape;
/// assert_eq!(
///     shape(r#"record 17 refused: `amount` is not a number: "n/a" (line 42)"#),
///     r#"record N refused: `amount` is not a number: "…" (line N)"#
/// );
/// assert_eq!(shape("ValueError: could not convert 'x9'"), "ValueError: could not convert '…'");
/// ```
pub fn shape(error: &str) -> String {
    let mut out = String::with_capacity(error.len());
    let mut chars = error.chars().peekable();
    // Inside backquotes: a name, whose quotes are its own.
    let mut named = false;
    while let Some(c) = chars.next() {
        match c {
            '0'..='9' => {
                while chars.next_if(char::is_ascii_digit).is_some() {}
                out.push('N');
            }
            '"' | '\'' if !named => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    match (escaped, d) {
                        (false, '\\') => escaped = true,
                        (false, d) if d == c => break,
                        _ => escaped = false,
                    }
                }
                out.extend([c, '…', c]);
            }
            '`' => {
                named = !named;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `sinks` as text: per sink, its count, then a line per group.
pub fn text(sinks: &[SinkLetters]) -> String {
    let mut out = String::new();
    for s in sinks {
        out.push_str(&format!(
            "sink `{}` ({}): {} dead letter(s)\n",
            s.sink, s.from, s.letters
        ));
        for g in &s.groups {
            out.push_str(&format!(
                "  {:>8}  {} `{}`  {}  {}\n",
                g.count, g.kind, g.node, g.error_kind, g.error
            ));
            let origin = g.first["origin"].as_str().unwrap_or_default();
            let checkpoint = &g.first["checkpoint"];
            out.push_str(&format!(
                "            first: {origin}, checkpoint {checkpoint}\n"
            ));
        }
    }
    out
}
