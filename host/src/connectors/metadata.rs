//! Record metadata as fields of the record: what a message source knows of
//! each message besides its payload (Kafka's partition, offset, headers...;
//! NATS's subject, sequence...) added to the record's JSON object under
//! the field names its `metadata` table gives, so that plugins in every
//! language read it as they read any field, and `key` and `timestamp` may
//! name it. A sink's `metadata = { headers = "<field>" }` does the
//! reverse: the field's object becomes the message's headers and leaves
//! the value.
//!
//! Headers as JSON: an object by header name; a value that is UTF-8 is a
//! string, one that is not is `{"base64": "..."}`, a header without a
//! value is `null`, and a name given several times has the array of its
//! values in order.
//!
//! Invariant: the fields are appended at the end of the object, so a
//! record that already had a field of that name reads the metadata's (the
//! last of duplicate names wins in serde_json, Python's `json` and
//! JavaScript's `JSON.parse`).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use super::parsing::Format;

/// One item of a message's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    /// The Kafka topic or NATS subject it came from.
    Topic,
    /// The Kafka partition.
    Partition,
    /// The Kafka offset or JetStream stream sequence.
    Offset,
    /// The message's own time, milliseconds since the epoch (`null`
    /// without one).
    Timestamp,
    /// The Kafka message key, as text (`null` without one).
    Key,
    /// The headers (see the module's doc).
    Headers,
}

impl Item {
    /// Its name in a `metadata` table.
    pub fn name(self) -> &'static str {
        match self {
            Item::Topic => "topic",
            Item::Partition => "partition",
            Item::Offset => "offset",
            Item::Timestamp => "timestamp",
            Item::Key => "key",
            Item::Headers => "headers",
        }
    }
}

/// The fields a source's `metadata` table names, by item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(BTreeMap<Item, String>);

impl Fields {
    /// Reads a `metadata` table (item = field name) whose items must be
    /// among `known` (the names the source's messages have, in its own
    /// words: `alias` renames an item, `offset` as NATS's `sequence`).
    pub fn read(
        table: Option<BTreeMap<String, String>>,
        known: &[(&str, Item)],
    ) -> Result<Fields, String> {
        let mut fields = BTreeMap::new();
        for (name, field) in table.unwrap_or_default() {
            let Some(&(_, item)) = known.iter().find(|(n, _)| *n == name) else {
                let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "`metadata.{name}` is no metadata of this source's messages; they have: {}",
                    names.join(", ")
                ));
            };
            if field.is_empty() {
                return Err(format!(
                    "`metadata.{name}` is empty; name the field that holds it"
                ));
            }
            fields.insert(item, field);
        }
        Ok(Fields(fields))
    }

    /// Whether no item is asked for.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The field of `item`, if it is asked for.
    pub fn field(&self, item: Item) -> Option<&str> {
        self.0.get(&item).map(String::as_str)
    }

    /// The items asked for, with their fields.
    pub fn iter(&self) -> impl Iterator<Item = (Item, &str)> {
        self.0.iter().map(|(&item, field)| (item, field.as_str()))
    }

    /// Refuses the fields with a format whose records are not JSON
    /// objects.
    pub fn check_format(&self, format: Format) -> Result<(), String> {
        match format {
            _ if self.is_empty() => Ok(()),
            Format::Jsonl | Format::Avro | Format::Protobuf | Format::Json => Ok(()),
            _ => Err(
                "`metadata` adds fields to records that are JSON objects: use format = \"jsonl\", \"avro\", \"protobuf\" or \"json\", or remove it"
                    .into(),
            ),
        }
    }
}

/// The members (`"name":value` pairs) of one message's metadata, rendered
/// as JSON text to be appended to its record ([`append`]).
#[derive(Debug, Default)]
pub struct Members(Vec<u8>);

impl Members {
    /// Empties it for the next message.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The members as JSON text, comma-separated.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    fn name(&mut self, name: &str) {
        if !self.0.is_empty() {
            self.0.push(b',');
        }
        serde_json::to_writer(&mut self.0, name).expect("writing to a Vec");
        self.0.push(b':');
    }

    /// Adds `name` with integer `value` (or `null`).
    pub fn int(&mut self, name: &str, value: Option<i64>) {
        self.name(name);
        match value {
            Some(v) => self.0.extend_from_slice(v.to_string().as_bytes()),
            None => self.0.extend_from_slice(b"null"),
        }
    }

    /// Adds `name` with the bytes `value` as text (`null` without any).
    pub fn text(&mut self, name: &str, value: Option<&[u8]>) {
        self.name(name);
        let value = value.map(bytes_value).unwrap_or(Value::Null);
        serde_json::to_writer(&mut self.0, &value).expect("writing to a Vec");
    }

    /// Adds `name` with the JSON text `json` as it is (`null` without
    /// any).
    pub fn raw(&mut self, name: &str, json: Option<&[u8]>) {
        self.name(name);
        self.0.extend_from_slice(json.unwrap_or(b"null"));
    }

    /// Adds `name` with `headers` (name, value) as an object.
    pub fn headers<'h>(
        &mut self,
        name: &str,
        headers: impl IntoIterator<Item = (&'h str, Option<&'h [u8]>)>,
    ) {
        let mut by_name: Vec<(&str, Vec<Value>)> = Vec::new();
        for (header, value) in headers {
            let value = value.map(bytes_value).unwrap_or(Value::Null);
            match by_name.iter_mut().find(|(n, _)| *n == header) {
                Some((_, values)) => values.push(value),
                None => by_name.push((header, vec![value])),
            }
        }
        let object: Map<String, Value> = (by_name.into_iter())
            .map(|(header, mut values)| {
                let value = match values.len() {
                    1 => values.pop().expect("one value"),
                    _ => Value::Array(values),
                };
                (header.to_owned(), value)
            })
            .collect();
        self.name(name);
        serde_json::to_writer(&mut self.0, &object).expect("writing to a Vec");
    }
}

/// Bytes as a JSON value: a string when UTF-8, else `{"base64": ...}`.
fn bytes_value(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => serde_json::json!({ "base64": BASE64.encode(bytes) }),
    }
}

/// Appends `members` to the end of the JSON object `json`, into `out`.
/// `Err` when `json` is no object.
pub fn append(json: &[u8], members: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let end = (json.iter().rposition(|b| !b.is_ascii_whitespace())).filter(|&i| json[i] == b'}');
    let start = json.iter().position(|b| !b.is_ascii_whitespace());
    let (Some(start), Some(end)) = (start, end) else {
        return Err("record metadata goes into a JSON object, and the record is none".into());
    };
    if json[start] != b'{' {
        return Err("record metadata goes into a JSON object, and the record is none".into());
    }
    let empty = json[start + 1..end].iter().all(u8::is_ascii_whitespace);
    out.extend_from_slice(&json[..end]);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(members);
    out.extend_from_slice(&json[end..]);
    Ok(())
}

/// A message header: name and value (`None`: a header without a value).
pub type Header = (String, Option<Vec<u8>>);

/// Takes field `field` out of the JSON object `json`, as headers (see the
/// module's doc): the value without it, and the headers. A record without
/// the field has none; one whose field is not headers is an error naming
/// it.
pub fn take_headers(json: &[u8], field: &str) -> Result<(Vec<u8>, Vec<Header>), String> {
    let mut value: Value =
        serde_json::from_slice(json).map_err(|e| format!("the record is not JSON: {e}"))?;
    let Some(object) = value.as_object_mut() else {
        return Err(format!(
            "headers come from field `{field}` of a JSON object, and the record is none"
        ));
    };
    let Some(given) = object.remove(field) else {
        return Ok((json.to_vec(), Vec::new()));
    };
    let bad = || {
        format!(
            "field `{field}` must be an object of headers (a string, null, {{\"base64\": ...}} or an array of them by name)"
        )
    };
    let mut headers = Vec::new();
    match given {
        Value::Null => {}
        Value::Object(map) => {
            for (name, value) in map {
                let values = match value {
                    Value::Array(values) => values,
                    one => vec![one],
                };
                for v in values {
                    headers.push((name.clone(), header_bytes(v).ok_or_else(bad)?));
                }
            }
        }
        _ => return Err(bad()),
    }
    let rest = serde_json::to_vec(&value).expect("a JSON value serializes");
    Ok((rest, headers))
}

/// A header's value from its JSON form; `None` when it is not one.
fn header_bytes(value: Value) -> Option<Option<Vec<u8>>> {
    match value {
        Value::Null => Some(None),
        Value::String(s) => Some(Some(s.into_bytes())),
        Value::Object(o) if o.len() == 1 => {
            let text = o.get("base64")?.as_str()?;
            BASE64.decode(text).ok().map(Some)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn appended(json: &str, members: &str) -> Result<String, String> {
        let mut out = Vec::new();
        append(json.as_bytes(), members.as_bytes(), &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn members_go_at_the_end_of_the_object() {
        assert_eq!(
            appended(r#"{"a":1}"#, r#""p":3"#).unwrap(),
            r#"{"a":1,"p":3}"#
        );
        assert_eq!(
            appended(" { } \n", r#""p":3"#).unwrap(),
            r#" { "p":3} "#.to_owned() + "\n"
        );
        assert_eq!(
            appended(r#"{"p":"mine","b":[1,{"c":2}]}"#, r#""p":3"#).unwrap(),
            r#"{"p":"mine","b":[1,{"c":2}],"p":3}"#
        );
        // The last of a duplicated name wins.
        let v: Value =
            serde_json::from_str(&appended(r#"{"p":"mine"}"#, r#""p":3"#).unwrap()).unwrap();
        assert_eq!(v["p"], 3);
        for no in ["[1]", "3", "\"x\"", "", "{\"a\":1"] {
            assert!(appended(no, r#""p":3"#).is_err(), "{no}");
        }
    }

    #[test]
    fn metadata_renders_as_json_members() {
        let mut m = Members::default();
        m.int("partition", Some(3));
        m.int("ts", None);
        m.text("key", Some(b"k\"1"));
        m.text("raw", Some(&[0xff, 0x00]));
        m.headers(
            "headers",
            [
                ("trace", Some(&b"abc"[..])),
                ("empty", None),
                ("dup", Some(&b"1"[..])),
                ("bin", Some(&[0xc3, 0x28][..])),
                ("dup", Some(&b"2"[..])),
                ("dup", None),
            ],
        );
        let text = format!("{{{}}}", String::from_utf8(m.as_bytes().to_vec()).unwrap());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "partition": 3, "ts": null, "key": "k\"1", "raw": {"base64": "/wA="},
                "headers": {"trace": "abc", "empty": null, "dup": ["1", "2", null], "bin": {"base64": "wyg="}}
            })
        );
        m.clear();
        assert!(m.as_bytes().is_empty());
    }

    #[test]
    fn headers_taken_from_a_field_round_trip_and_leave_the_value() {
        let mut m = Members::default();
        let given = [
            ("a", Some(&b"x"[..])),
            ("b", None),
            ("a", Some(&[0xff][..])),
        ];
        m.headers("h", given);
        let mut record = Vec::new();
        append(br#"{"id":1}"#, m.as_bytes(), &mut record).unwrap();
        let (rest, headers) = take_headers(&record, "h").unwrap();
        assert_eq!(rest, br#"{"id":1}"#);
        let want: Vec<Header> = vec![
            ("a".into(), Some(b"x".to_vec())),
            ("a".into(), Some(vec![0xff])),
            ("b".into(), None),
        ];
        assert_eq!(headers, want);
        let (rest, headers) = take_headers(br#"{"id":1}"#, "h").unwrap();
        assert_eq!((rest.as_slice(), headers.len()), (&br#"{"id":1}"#[..], 0));
        for bad in [
            r#"{"h":3}"#,
            r#"{"h":{"a":1}}"#,
            r#"{"h":{"a":{"x":"y"}}}"#,
            "[1]",
        ] {
            let err = take_headers(bad.as_bytes(), "h").unwrap_err();
            assert!(err.contains('h'), "{bad}: {err}");
        }
    }

    #[test]
    fn a_metadata_table_names_known_items() {
        let known = [("partition", Item::Partition), ("sequence", Item::Offset)];
        let table = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            )
        };
        let f = Fields::read(table(&[("sequence", "seq")]), &known).unwrap();
        assert_eq!(f.field(Item::Offset), Some("seq"));
        assert_eq!(f.field(Item::Partition), None);
        let err = Fields::read(table(&[("offset", "o")]), &known).unwrap_err();
        assert!(
            err.contains("`metadata.offset`") && err.contains("partition, sequence"),
            "{err}"
        );
        assert!(Fields::read(table(&[("partition", "")]), &known).is_err());
        assert!(Fields::read(None, &known).unwrap().is_empty());
    }
}
