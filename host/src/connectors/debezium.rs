//! Debezium's JSON change events (`format = "debezium-json"`), read by
//! sources and written by sinks, for pipelines that already carry them
//! (Debezium connectors, Flink CDC, Kafka Connect).
//!
//! An event is a JSON object `{"before", "after", "op", "ts_ms", ...}`,
//! alone or as the `payload` of `{"schema", "payload"}` (Kafka Connect's
//! JSON converter with schemas). Its `op`: `c` (create) and `r` (a
//! snapshot read) are inserts of `after`; `u` an update, its `before`
//! (when the event has it) then its `after`; `d` a delete of `before`; `t`
//! a truncate; `m` (a logical message) carries no row and is skipped.
//! Other fields (`source`, `transaction`) are not read.
//!
//! Written events have `before`, `after`, `op` and `ts_ms` (the record's
//! timestamp): an update's before image is the `update-before` record
//! right before its `update-after` in the same batch (else `null`); an
//! `update-before` without one is not written.

use serde_json::Value;

use crate::dataflow::batch::{Batch, Change};

/// One row change of an event: its kind and its row (a JSON object, `{}`
/// for a truncate).
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    /// What the change does.
    pub change: Change,
    /// The row, as JSON text.
    pub row: String,
}

/// What one event says.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its row changes in order (none for a logical message; two for an
    /// update with its before image).
    pub changes: Vec<RowChange>,
    /// `ts_ms`, when the event has it.
    pub ts_ms: Option<i64>,
}

/// Reads one event; the error says what is wrong with it.
///
/// ```
/// use weir::connectors::debezium::read;
/// use weir::dataflow::batch::Change;
/// let e = read(br#"{"before":{"id":1,"n":1},"after":{"id":1,"n":2},"op":"u","ts_ms":5}"#).unwrap();
/// let kinds: Vec<Change> = e.changes.iter().map(|c| c.change).collect();
/// assert_eq!(kinds, [Change::UpdateBefore, Change::UpdateAfter]);
/// assert_eq!((e.changes[1].row.as_str(), e.ts_ms), (r#"{"id":1,"n":2}"#, Some(5)));
/// ```
pub fn read(event: &[u8]) -> Result<Event, String> {
    let mut event: Value = serde_json::from_slice(event)
        .map_err(|e| format!("not a Debezium event (not JSON: {e})"))?;
    if event.get("schema").is_some()
        && let Some(payload) = event.get_mut("payload")
    {
        event = payload.take();
    }
    let Value::Object(mut event) = event else {
        return Err("not a Debezium event (not a JSON object)".into());
    };
    let op = match event.get("op") {
        Some(Value::String(op)) => op.clone(),
        Some(other) => return Err(format!("the event's `op` is {other}, not a string")),
        None => return Err("not a Debezium event (no `op` field)".into()),
    };
    let ts_ms = event.get("ts_ms").and_then(Value::as_i64);
    let mut image = |field: &str| -> Result<Option<String>, String> {
        match event.remove(field) {
            None | Some(Value::Null) => Ok(None),
            Some(row @ Value::Object(_)) => Ok(Some(row.to_string())),
            Some(other) => Err(format!("the event's `{field}` is {other}, not an object")),
        }
    };
    let one = |change, row: Option<String>, field: &str| -> Result<Vec<RowChange>, String> {
        let row = row.ok_or_else(|| format!("an event with op {op:?} has no `{field}`"))?;
        Ok(vec![RowChange { change, row }])
    };
    let changes = match op.as_str() {
        "c" | "r" => one(Change::Insert, image("after")?, "after")?,
        "u" => {
            let before = image("before")?;
            let mut changes = one(Change::UpdateAfter, image("after")?, "after")?;
            if let Some(row) = before {
                changes.insert(
                    0,
                    RowChange {
                        change: Change::UpdateBefore,
                        row,
                    },
                );
            }
            changes
        }
        "d" => one(Change::Delete, image("before")?, "before")?,
        "t" => vec![RowChange {
            change: Change::Truncate,
            row: "{}".into(),
        }],
        "m" => Vec::new(),
        other => {
            return Err(format!(
                "the event's op {other:?} is none of c, r, u, d, t, m"
            ));
        }
    };
    Ok(Event { changes, ts_ms })
}

/// Writes the records of `batch` as events, one line each (module docs);
/// returns the bytes written. A record whose value is not a JSON object is
/// an error naming its kind.
pub fn write(batch: &Batch, out: &mut impl std::io::Write) -> std::io::Result<u64> {
    let mut bytes = 0;
    let mut line = Vec::new();
    let mut before: Option<&[u8]> = None;
    for r in batch.iter() {
        if r.change == Change::UpdateBefore {
            before = Some(r.value);
            continue;
        }
        line.clear();
        let held = before.take().filter(|_| r.change == Change::UpdateAfter);
        envelope(r.change, r.value, held, r.timestamp, &mut line).map_err(std::io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        bytes += line.len() as u64;
    }
    Ok(bytes)
}

/// One event of a record saying `change` of `value`, an update with
/// `before`, at `ts_ms`, into `out` (without a line break).
///
/// ```
/// use weir::connectors::debezium::envelope;
/// use weir::dataflow::batch::Change;
/// let mut out = Vec::new();
/// envelope(Change::Delete, br#"{"id":1}"#, None, Some(7), &mut out).unwrap();
/// assert_eq!(out, br#"{"before":{"id":1},"after":null,"op":"d","ts_ms":7}"#);
/// ```
pub fn envelope(
    change: Change,
    value: &[u8],
    before: Option<&[u8]>,
    ts_ms: Option<i64>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    // Checked without building the value: a JSON text that opens an object.
    let object = |v: &[u8]| match v.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(v).is_ok()
    {
        true => Ok(()),
        false => Err(format!(
            "a record saying `{}` must be a JSON object to be written as a Debezium event",
            change.name()
        )),
    };
    let (op, before, after) = match change {
        Change::Insert => ("c", None, Some(value)),
        Change::UpdateAfter => ("u", before, Some(value)),
        Change::UpdateBefore => ("u", Some(value), None),
        Change::Delete => ("d", Some(value), None),
        Change::Truncate => ("t", None, None),
    };
    out.extend_from_slice(b"{\"before\":");
    for (i, image) in [before, after].into_iter().enumerate() {
        if i == 1 {
            out.extend_from_slice(b",\"after\":");
        }
        match image {
            Some(v) => {
                object(v)?;
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(format!(",\"op\":\"{op}\"").as_bytes());
    match ts_ms {
        Some(t) => out.extend_from_slice(format!(",\"ts_ms\":{t}}}").as_bytes()),
        None => out.push(b'}'),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Change, String)> {
        let e = read(text.as_bytes()).unwrap();
        e.changes.into_iter().map(|c| (c.change, c.row)).collect()
    }

    #[test]
    fn every_op_reads_as_its_changes() {
        use Change::*;
        let row = |s: &str| s.to_owned();
        assert_eq!(
            kinds(r#"{"after":{"a":1},"op":"c"}"#),
            [(Insert, row(r#"{"a":1}"#))]
        );
        assert_eq!(
            kinds(r#"{"before":null,"after":{"a":1},"op":"r"}"#),
            [(Insert, row(r#"{"a":1}"#))]
        );
        assert_eq!(
            kinds(r#"{"before":null,"after":{"a":2},"op":"u"}"#),
            [(UpdateAfter, row(r#"{"a":2}"#))]
        );
        assert_eq!(
            kinds(r#"{"before":{"a":1},"after":{"a":2},"op":"u"}"#),
            [
                (UpdateBefore, row(r#"{"a":1}"#)),
                (UpdateAfter, row(r#"{"a":2}"#))
            ]
        );
        assert_eq!(
            kinds(r#"{"before":{"a":1},"after":null,"op":"d"}"#),
            [(Delete, row(r#"{"a":1}"#))]
        );
        assert_eq!(kinds(r#"{"op":"t","ts_ms":3}"#), [(Truncate, row("{}"))]);
        assert_eq!(kinds(r#"{"op":"m"}"#), []);
        // Kafka Connect's JSON converter with schemas.
        assert_eq!(
            kinds(r#"{"schema":{"type":"struct"},"payload":{"after":{"a":1},"op":"c"}}"#),
            [(Insert, row(r#"{"a":1}"#))]
        );
        assert_eq!(read(br#"{"op":"t","ts_ms":3}"#).unwrap().ts_ms, Some(3));
    }

    #[test]
    fn events_that_are_not_debezium_are_one_line_errors() {
        for (text, want) in [
            ("nope", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"after":{}}"#, "no `op` field"),
            (r#"{"op":1}"#, "not a string"),
            (r#"{"op":"x"}"#, "none of c, r, u, d, t, m"),
            (r#"{"op":"c"}"#, "has no `after`"),
            (r#"{"op":"d","before":null}"#, "has no `before`"),
            (r#"{"op":"c","after":[1]}"#, "not an object"),
        ] {
            let err = read(text.as_bytes()).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn records_write_as_events_that_read_back() {
        let mut b = Batch::new();
        b.push_change(Change::Insert, None, br#"{"a":1}"#, Some(1));
        b.push_change(Change::UpdateBefore, None, br#"{"a":1}"#, Some(2));
        b.push_change(Change::UpdateAfter, None, br#"{"a":2}"#, Some(2));
        b.push_change(Change::UpdateBefore, None, br#"{"a":9}"#, None);
        b.push_change(Change::Delete, None, br#"{"a":2}"#, None);
        b.push_change(Change::Truncate, None, b"{}", Some(4));
        let mut out = Vec::new();
        let n = write(&b, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(n as usize, text.len());
        assert_eq!(
            text,
            concat!(
                r#"{"before":null,"after":{"a":1},"op":"c","ts_ms":1}"#,
                "\n",
                r#"{"before":{"a":1},"after":{"a":2},"op":"u","ts_ms":2}"#,
                "\n",
                r#"{"before":{"a":2},"after":null,"op":"d"}"#,
                "\n",
                r#"{"before":null,"after":null,"op":"t","ts_ms":4}"#,
                "\n",
            )
        );
        let back: Vec<Change> = (text.lines())
            .flat_map(|l| read(l.as_bytes()).unwrap().changes)
            .map(|c| c.change)
            .collect();
        use Change::*;
        assert_eq!(back, [Insert, UpdateBefore, UpdateAfter, Delete, Truncate]);
        let mut b = Batch::new();
        b.push_change(Change::Delete, None, b"plain", None);
        let err = write(&b, &mut Vec::new()).unwrap_err();
        assert!(
            err.to_string().contains("`delete` must be a JSON object"),
            "{err}"
        );
    }
}
