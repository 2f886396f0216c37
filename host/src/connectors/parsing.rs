//! How a source makes records of what it reads: the settings `format`,
//! `key`, `timestamp`, `on_bad_timestamp`, `columns` and the schema
//! formats' `schema`, `message` and `schema_registry`, which the file,
//! stdin, Kafka and NATS sources share ([`Parsing`]), read and checked in
//! one place.

use std::path::Path;

use serde::Deserialize;
use toml::Table;

use super::cells::Columns;
use super::schema_format::{SchemaKeys, SchemaKind, SchemaSettings};
use crate::fields::from_table;

/// How a source's text becomes records (its `format`, `key`, `timestamp`
/// and `on_bad_timestamp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsing {
    /// How the input is cut into records (`format`, default `lines`).
    pub format: Format,
    /// The field (jsonl) or column (csv) used as record key (`key`).
    pub key: Option<String>,
    /// Where each record's event time is read from (`timestamp` and
    /// `on_bad_timestamp`); without it records have no timestamp (or the
    /// source's own, such as a message's).
    pub timestamp: Option<TimestampField>,
    /// The types of a `csv` source's columns (`columns`).
    pub columns: Columns,
    /// Of format `avro` or `protobuf`: its schema and registry (`schema`,
    /// `message`, `schema_registry`).
    pub schema: Option<SchemaSettings>,
    /// Of messages' keys in a format with a schema (`key_format`,
    /// `key_schema`, `key_message`, the same `schema_registry`).
    pub key_schema: Option<SchemaSettings>,
}

impl Parsing {
    /// The keys [`take`](Self::take) reads.
    pub const KEYS: [&str; 11] = [
        "format",
        "key",
        "timestamp",
        "on_bad_timestamp",
        "columns",
        "schema",
        "message",
        "schema_registry",
        "key_format",
        "key_schema",
        "key_message",
    ];

    /// Takes the parsing settings out of a source's `table` (leaving its
    /// other keys), each read on its own; [`ParsingKeys::check`] checks
    /// them together once the whole entry is read.
    pub fn take(table: &mut Table) -> Result<ParsingKeys, String> {
        let ours: Table = Self::KEYS
            .iter()
            .filter_map(|&k| table.remove(k).map(|v| (k.to_owned(), v)))
            .collect();
        from_table(ours)
    }

    /// The columns a `csv` header must have, each with the setting that
    /// names it: `key`, `timestamp`, each of `columns`.
    pub fn named_columns(&self) -> Vec<(&'static str, &str)> {
        let key = self.key.as_deref().map(|k| ("key", k));
        let timestamp = (self.timestamp.as_ref()).map(|t| ("timestamp", t.field.as_str()));
        let typed = self.columns.named().map(|c| ("columns", c));
        key.into_iter().chain(timestamp).chain(typed).collect()
    }
}

/// The parsing keys of a source as read, not yet checked together.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParsingKeys {
    format: Option<Format>,
    key: Option<String>,
    timestamp: Option<String>,
    on_bad_timestamp: Option<OnBadTimestamp>,
    columns: Option<Columns>,
    schema: Option<String>,
    message: Option<String>,
    schema_registry: Option<String>,
    key_format: Option<String>,
    key_schema: Option<String>,
    key_message: Option<String>,
    /// Whether the input carries its own Avro schema (object container
    /// files): `schema` is then optional ([`ParsingKeys::files`]).
    #[serde(skip)]
    own_schema: bool,
    /// Whether `protobuf` reads a file of length-delimited messages
    /// ([`ParsingKeys::files`]).
    #[serde(skip)]
    delimited: bool,
}

impl ParsingKeys {
    /// For a source of files: `avro` reads object container files, which
    /// carry their writer's schema (`schema`, optional, is the one records
    /// are read as), and `protobuf` files of length-delimited messages of
    /// `schema`; a registry has nothing to say about either.
    pub fn files(mut self) -> Result<ParsingKeys, String> {
        match self.format {
            Some(Format::Avro) if self.schema_registry.is_some() => {
                Err("an Avro object container file carries its own schema: remove `schema_registry` (`schema`, if given, is the schema records are read as)".into())
            }
            Some(Format::Protobuf) if self.schema_registry.is_some() => {
                Err("a file of length-delimited Protobuf messages names no schema ids: remove `schema_registry` and give `schema` (and `message`)".into())
            }
            Some(Format::Avro) => {
                self.own_schema = true;
                Ok(self)
            }
            Some(Format::Protobuf) => {
                self.delimited = true;
                Ok(self)
            }
            _ => Ok(self),
        }
    }

    /// Refuses `csv`, which needs a file with a header row: "format =
    /// "csv" is not supported by a `kind` source".
    pub fn refuse_csv(&self, kind: &str) -> Result<(), String> {
        if self.format == Some(Format::Csv) {
            return Err(format!(
                "format = \"csv\" is not supported by a {kind} source; use lines or jsonl"
            ));
        }
        Ok(())
    }

    /// Refuses `avro` and `protobuf`, whose datums are messages, not
    /// lines: "format = "avro" is not supported by a `kind` source"; and
    /// `json` with a registry, whose framing is binary (lines of JSON
    /// records are checked against `schema`).
    pub fn refuse_binary(&self, kind: &str) -> Result<(), String> {
        let format = match self.format {
            Some(Format::Avro) if self.own_schema => return Ok(()),
            Some(Format::Protobuf) if self.delimited => return Ok(()),
            Some(Format::Avro) => "avro",
            Some(Format::Protobuf) => "protobuf",
            Some(Format::Json) if self.schema_registry.is_some() => {
                return Err(format!(
                    "`schema_registry` reads messages framed with a schema id (of Kafka and NATS sources), not lines of a {kind} source: check the lines with `schema` alone"
                ));
            }
            _ => return Ok(()),
        };
        Err(format!(
            "format = \"{format}\" reads messages (of Kafka and NATS sources) and files (Avro object container files, length-delimited Protobuf messages), not lines of a {kind} source"
        ))
    }

    /// The settings, checked together (a schema file read from the job
    /// folder `dir`): `timestamp` and `on_bad_timestamp` need a format
    /// with fields, `on_bad_timestamp` needs `timestamp`, `columns` needs
    /// `csv`, `schema`, `message` and `schema_registry` need `avro` or
    /// `protobuf`.
    pub fn check(self, dir: &Path) -> Result<Parsing, String> {
        let format = self.format.unwrap_or_default();
        if self.columns.is_some() && format != Format::Csv {
            return Err(
                "`columns` types the cells of format = \"csv\"; set the format or remove columns"
                    .into(),
            );
        }
        let kind = match format {
            // An Avro container file's own schema, read as it is.
            Format::Avro if self.own_schema && self.schema.is_none() => None,
            Format::Avro => Some(SchemaKind::Avro),
            Format::Protobuf => Some(SchemaKind::Protobuf),
            Format::Json => Some(SchemaKind::Json),
            _ => None,
        };
        let keys = SchemaKeys {
            schema: self.schema.as_deref(),
            message: self.message.as_deref(),
            registry: self.schema_registry.clone(),
            strategy: None,
            key_format: self.key_format.as_deref(),
            key_schema: self.key_schema.as_deref(),
            key_message: self.key_message.as_deref(),
        };
        let (schema, key_schema) = SchemaSettings::read(kind, keys, dir, false)?;
        Ok(Parsing {
            format,
            key: self.key,
            timestamp: timestamp_setting(format, self.timestamp, self.on_bad_timestamp)?,
            columns: self.columns.unwrap_or_default(),
            schema,
            key_schema,
        })
    }
}

/// Record format of a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One record per line; the line is both key and value (the default).
    #[default]
    Lines,
    /// One JSON value per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
    /// One Debezium change event per line (module `debezium`): each
    /// record says its change kind; `key` and `timestamp` name fields of
    /// its row, and without `timestamp` its time is the event's `ts_ms`.
    #[serde(rename = "debezium-json")]
    DebeziumJson,
    /// One Avro datum per message (module `schema_format`), read into a
    /// JSON record; `key` and `timestamp` name its fields.
    Avro,
    /// One Protobuf message per message, read into a JSON record as Avro
    /// is.
    Protobuf,
    /// One JSON record per message (or line of a file), checked against a
    /// JSON Schema: the job's `schema`, and with a registry its writer's.
    Json,
}

/// What a source does with a record whose timestamp is missing or invalid
/// (`on_bad_timestamp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBadTimestamp {
    /// The source fails, naming the file and line (the default).
    #[default]
    Fail,
    /// The record is dropped and counted (`SourceReader::skipped`).
    Skip,
}

/// Where a `jsonl` or `csv` source finds each record's event time
/// (`timestamp = "<field>"`): a field or column holding integer
/// milliseconds since the Unix epoch or an RFC 3339 date-time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampField {
    /// The field (jsonl) or column (csv).
    pub field: String,
    /// What to do with a record without a valid timestamp.
    pub on_bad: OnBadTimestamp,
}

impl TimestampField {
    /// The message of a record whose `what` (`field` or `column`) holds
    /// `found` (as [`shown`]), or nothing (`None`).
    pub(crate) fn bad(&self, what: &str, found: Option<&str>) -> String {
        let field = &self.field;
        let found = match found {
            Some(found) => format!(
                "{what} `{field}` is {found}, not milliseconds since the epoch or an RFC 3339 time"
            ),
            None => format!("no {what} `{field}` (the timestamp)"),
        };
        format!("{found}; fix the record or set on_bad_timestamp = \"skip\"")
    }
}

/// The settings `timestamp` and `on_bad_timestamp` of a source of `format`,
/// checked: both need a format with fields, and `on_bad_timestamp` needs
/// `timestamp`.
fn timestamp_setting(
    format: Format,
    field: Option<String>,
    on_bad: Option<OnBadTimestamp>,
) -> Result<Option<TimestampField>, String> {
    let Some(field) = field else {
        return match on_bad {
            Some(_) => Err(
                "`on_bad_timestamp` needs `timestamp`; add timestamp = \"<field>\" \
                 or remove on_bad_timestamp"
                    .into(),
            ),
            None => Ok(None),
        };
    };
    if format == Format::Lines {
        return Err(
            "`timestamp` needs format = \"jsonl\" or \"csv\": a line has no fields; \
             set the format or remove timestamp"
                .into(),
        );
    }
    if field.is_empty() {
        return Err("`timestamp` is empty; name the field that holds the event time".into());
    }
    Ok(Some(TimestampField {
        field,
        on_bad: on_bad.unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_settings_need_a_format_with_fields() {
        let ts = Some("ts".to_owned());
        let err = timestamp_setting(Format::Lines, ts.clone(), None).unwrap_err();
        assert!(
            err.starts_with(
                "`timestamp` needs format = \"jsonl\" or \"csv\": a line has no fields"
            )
        );
        let err = timestamp_setting(Format::Jsonl, None, Some(OnBadTimestamp::Skip)).unwrap_err();
        assert!(
            err.starts_with("`on_bad_timestamp` needs `timestamp`"),
            "{err}"
        );
        let err = timestamp_setting(Format::Lines, None, Some(OnBadTimestamp::Fail)).unwrap_err();
        assert!(
            err.starts_with("`on_bad_timestamp` needs `timestamp`"),
            "{err}"
        );
        assert!(timestamp_setting(Format::Csv, Some(String::new()), None).is_err());
        assert_eq!(timestamp_setting(Format::Lines, None, None), Ok(None));
        let want = TimestampField {
            field: "ts".into(),
            on_bad: OnBadTimestamp::Fail,
        };
        assert_eq!(timestamp_setting(Format::Csv, ts, None), Ok(Some(want)));
    }

    #[test]
    fn take_leaves_the_other_keys_and_checks_them_together() {
        let mut t: Table = "path = \"a\"\nformat = \"jsonl\"\nkey = \"k\""
            .parse()
            .unwrap();
        let p = Parsing::take(&mut t)
            .unwrap()
            .check(Path::new("."))
            .unwrap();
        assert_eq!(
            (p.format, p.key.as_deref(), p.timestamp),
            (Format::Jsonl, Some("k"), None)
        );
        assert_eq!(t.keys().collect::<Vec<_>>(), ["path"]);
        // Read alone (as an entry's keys are, one by one, for their types),
        // `timestamp` is a string; checked, it needs a format with fields.
        let mut t: Table = "timestamp = \"ts\"".parse().unwrap();
        let err = Parsing::take(&mut t)
            .unwrap()
            .check(Path::new("."))
            .unwrap_err();
        assert!(err.starts_with("`timestamp` needs format"), "{err}");
        let mut t: Table = "format = \"xml\"".parse().unwrap();
        assert!(Parsing::take(&mut t).is_err());
        let mut t: Table = "format = \"jsonl\"\ncolumns = \"infer\"".parse().unwrap();
        let err = Parsing::take(&mut t)
            .unwrap()
            .check(Path::new("."))
            .unwrap_err();
        assert!(
            err.starts_with("`columns` types the cells of format = \"csv\""),
            "{err}"
        );
        let mut t: Table = "format = \"csv\"\ncolumns = { a = \"i64\" }"
            .parse()
            .unwrap();
        let p = Parsing::take(&mut t)
            .unwrap()
            .check(Path::new("."))
            .unwrap();
        assert_eq!(p.named_columns(), [("columns", "a")]);
        let csv = Parsing::take(&mut "format = \"csv\"".parse().unwrap()).unwrap();
        let err = csv.refuse_csv("kafka").unwrap_err();
        assert_eq!(
            err,
            "format = \"csv\" is not supported by a kafka source; use lines or jsonl"
        );
    }

    /// The keys' schema settings are read as the values' are, with their
    /// own names in messages; the registry may serve the keys alone.
    #[test]
    fn key_schema_settings_are_checked_with_their_names() {
        use crate::connectors::schema_format::Role;
        let check = |text: &str| {
            let mut t: Table = text.parse().unwrap();
            Parsing::take(&mut t).unwrap().check(Path::new("."))
        };
        let p = check("format = \"jsonl\"\nkey_format = \"avro\"\nschema_registry = \"http://r\"")
            .unwrap();
        let keys = p.key_schema.unwrap();
        assert_eq!((keys.kind, keys.role), (SchemaKind::Avro, Role::Keys));
        assert!(p.schema.is_none());
        for (text, want) in [
            (
                "key_schema = \"k.avsc\"",
                "`key_schema` and `key_message` are settings of key_format",
            ),
            (
                "key_format = \"csv\"",
                "`key_format` = \"csv\" is no format with a schema",
            ),
            (
                "key_format = \"avro\"",
                "key_format = \"avro\" needs the writers' schemas: add key_schema",
            ),
            (
                "key_format = \"avro\"\nkey_message = \"M\"\nschema_registry = \"http://r\"",
                "`key_message` names a Protobuf message type: remove it (key_format",
            ),
            (
                "key_format = \"json\"\nkey_schema = \"missing.json\"",
                "`key_schema` = \"missing.json\": cannot read",
            ),
        ] {
            let err = check(text).unwrap_err();
            assert!(err.starts_with(want), "{text}: {err}");
        }
    }
}
