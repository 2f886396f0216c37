//! The PostgreSQL change-data-capture source (`type = "postgres-cdc"` in
//! `[[source]]`): the rows of a table (`table`) or of several (`tables`)
//! as of one consistent snapshot, then every change committed after it, in
//! commit order, read by logical replication with the built-in `pgoutput`
//! plugin. A source of `tables` has an output port per table, named as
//! `tables` writes it, which consumers name (`cdc.orders`); a source of
//! `table` has one unnamed output.
//!
//! Each record says its change ([`weir::dataflow::batch::Change`]): the
//! snapshot's rows and inserted rows are inserts; an update is its after
//! image (preceded by its before image when the table's replica identity
//! is `FULL`); an update of the primary key is a delete of the old key and
//! an insert of the new; a delete carries the key (the whole row with
//! `FULL`); a truncate has no key. The value is the row as a JSON object
//! (module `value`), the key the primary key as JSON (one column's value,
//! or an array of them), the timestamp the commit time (the snapshot's
//! rows: the time the snapshot was taken).
//!
//! The modules: `setup` checks the server and the table and makes the
//! publication and the replication slot; `snapshot` reads the table in key
//! order under an exported snapshot; `stream` holds the replication
//! connection; `reader` is the source reader, with the exactly-once
//! argument; `offset` its checkpointed offset; `pending` the stream's
//! records not yet returned, per port; `pgoutput`, `value` and `key_order`
//! are the protocol's messages, values and key order.

mod key_order;
mod offset;
mod pending;
mod pgoutput;
mod reader;
mod record;
mod setup;
mod snapshot;
mod stream;
mod value;

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use super::{KeyColumns, check_table, check_url};
use value::NumericAs;
use weir::connectors::from_table;
use weir::connectors::source::{SourceError, SourceReader};
use weir::connectors::{BuildSource, SourceConnector, SourceType};

/// The registry entry of `type = "postgres-cdc"` sources.
pub const SOURCE: SourceType = SourceType {
    name: "postgres-cdc",
    keys: &[
        "url",
        "table",
        "tables",
        "key",
        "publication",
        "slot",
        "numeric",
        "snapshot",
        "bounded",
    ],
    read: CdcConfig::read,
};

/// The settings of a PostgreSQL change-data-capture source.
#[derive(Clone, PartialEq, Eq)]
pub struct CdcConfig {
    /// The connection string (`url`), which may hold a password: never
    /// shown. Its user needs the `REPLICATION` attribute.
    url: String,
    /// Where the source connects, for messages: `host:port/dbname`.
    pub server: String,
    /// The tables, in port order: `table`, or each of `tables`.
    pub tables: Vec<CdcTable>,
    /// Whether the tables came as `tables`, which gives the source an
    /// output port per table.
    pub ports: bool,
    /// The publication (`publication`): `None` makes and uses
    /// `weir_<source id>`, holding the table.
    pub publication: Option<String>,
    /// The replication slot (`slot`): `None` uses `weir_<source id>`.
    pub slot: Option<String>,
    /// How `numeric` values are written (`numeric = "text"`, the default,
    /// exact; or `"number"`, a JSON number).
    pub numeric: NumericAs,
    /// Whether a fresh job reads the table's rows first (`snapshot`,
    /// default true); without, it reads the changes after the slot's
    /// position only.
    pub snapshot: bool,
    /// Whether the source ends at the server's position as of the job's
    /// first start (`bounded`, default false: it keeps reading changes).
    pub bounded: bool,
}

// By hand: the URL may hold a password.
impl std::fmt::Debug for CdcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdcConfig")
            .field("server", &self.server)
            .field("tables", &self.tables)
            .field("ports", &self.ports)
            .field("publication", &self.publication)
            .field("slot", &self.slot)
            .field("numeric", &self.numeric)
            .field("snapshot", &self.snapshot)
            .field("bounded", &self.bounded)
            .finish_non_exhaustive()
    }
}

impl CdcConfig {
    fn read(table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            url: Option<String>,
            table: Option<String>,
            tables: Option<Vec<String>>,
            key: Option<KeySetting>,
            publication: Option<String>,
            slot: Option<String>,
            numeric: Option<String>,
            snapshot: Option<bool>,
            bounded: Option<bool>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |_: &Path| {
            let Some(url) = raw.url else {
                return Err(
                    "`url` is missing; add url = \"postgresql://user@host:5432/dbname\" (a user with the REPLICATION attribute)".into(),
                );
            };
            let server = check_url(&url)?;
            let ports = raw.tables.is_some();
            let tables = read_tables(raw.table, raw.tables, raw.key)?;
            let numeric = match raw.numeric.as_deref() {
                None | Some("text") => NumericAs::Text,
                Some("number") => NumericAs::Number,
                Some(other) => {
                    return Err(format!(
                        "`numeric` = {other:?} is not a choice; write \"text\" (exact, the default) or \"number\""
                    ));
                }
            };
            if let Some(slot) = &raw.slot {
                check_slot_name(slot)?;
            }
            if raw.publication.as_deref() == Some("") {
                return Err("`publication` is empty; name a publication, or remove the key to let the source make one".into());
            }
            Ok(Arc::new(CdcConfig {
                url,
                server,
                tables,
                ports,
                publication: raw.publication,
                slot: raw.slot,
                numeric,
                snapshot: raw.snapshot.unwrap_or(true),
                bounded: raw.bounded.unwrap_or(false),
            }))
        }))
    }

    /// `table T` or `tables T, U`, for messages.
    fn what(&self) -> String {
        let names: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
        match names.as_slice() {
            [one] => format!("table {one}"),
            names => format!("tables {}", names.join(", ")),
        }
    }

    /// The client settings: the URL's, with the session settings the
    /// values are read under (module `value`), a connection timeout of
    /// 10 s and the application name `weir`.
    fn client_config(&self) -> postgres::Config {
        let mut config = super::client_config(&self.url);
        config.options(SESSION_OPTIONS);
        config
    }

    /// The slot's name: `slot`, or `weir_<source id>` made a valid slot name.
    fn slot_name(&self, source_id: &str) -> String {
        self.slot.clone().unwrap_or_else(|| default_name(source_id))
    }

    /// The publication's name and whether the source makes it.
    fn publication_name(&self, source_id: &str) -> (String, bool) {
        match &self.publication {
            Some(name) => (name.clone(), false),
            None => (default_name(source_id), true),
        }
    }
}

/// A table the source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcTable {
    /// `name` or `schema.name`, as SQL resolves it, and as written: the
    /// name of its output port.
    pub name: String,
    /// The columns of its records' key (`key`); empty: the primary key's.
    pub key: Vec<String>,
}

/// `key`: columns (a name or a list), or, for `tables`, a table of them
/// by table name.
enum KeySetting {
    Columns(Vec<String>),
    ByTable(Vec<(String, Vec<String>)>),
}

impl<'de> Deserialize<'de> for KeySetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl<'de> serde::de::Visitor<'de> for Key {
            type Value = KeySetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a column name, a list of them, or a table of them by table name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<KeySetting, E> {
                Ok(KeySetting::Columns(vec![name.to_owned()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<KeySetting, A::Error> {
                let columns =
                    KeyColumns::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(KeySetting::Columns(columns.0))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<KeySetting, A::Error> {
                let mut keys = Vec::new();
                while let Some((table, columns)) = map.next_entry::<String, KeyColumns>()? {
                    keys.push((table, columns.0));
                }
                Ok(KeySetting::ByTable(keys))
            }
        }
        d.deserialize_any(Key)
    }
}

/// The tables of `table` or `tables`, with their keys from `key`: columns
/// for `table`, a table of them by table name for `tables`.
fn read_tables(
    table: Option<String>,
    tables: Option<Vec<String>>,
    key: Option<KeySetting>,
) -> Result<Vec<CdcTable>, String> {
    match (table, tables) {
        (Some(_), Some(_)) => Err(
            "`table` and `tables` are both set; keep `table` for one table (one unnamed output) or `tables` for several (an output port each)".into(),
        ),
        (None, None) => Err(
            "`table` is missing; add table = \"<table>\" or \"<schema>.<table>\" (or tables = [...] for several)".into(),
        ),
        (Some(name), None) => {
            check_table(&name)?;
            let key = match key {
                None => Vec::new(),
                Some(KeySetting::Columns(columns)) => columns,
                Some(KeySetting::ByTable(_)) => {
                    return Err("`key` is a table of keys by table name, which is for `tables`; with `table`, write key = \"<column>\" or a list".into());
                }
            };
            Ok(vec![CdcTable { name, key }])
        }
        (None, Some(names)) => {
            if names.is_empty() {
                return Err("`tables` is empty; list the tables to read, or use `table` for one".into());
            }
            let mut keys = match key {
                None => Vec::new(),
                Some(KeySetting::ByTable(keys)) => keys,
                Some(KeySetting::Columns(_)) => {
                    return Err("with `tables`, `key` is a table of keys by table name: key = { orders = \"customer\" }".into());
                }
            };
            let mut read: Vec<CdcTable> = Vec::new();
            for name in names {
                check_table(&name)?;
                if read.iter().any(|t| t.name == name) {
                    return Err(format!("`tables` lists {name:?} twice; list each table once"));
                }
                let key = match keys.iter().position(|(table, _)| *table == name) {
                    Some(i) => keys.swap_remove(i).1,
                    None => Vec::new(),
                };
                read.push(CdcTable { name, key });
            }
            if let Some((name, _)) = keys.first() {
                return Err(format!(
                    "`key` names table {name:?}, which `tables` does not list; fix the name or remove it"
                ));
            }
            Ok(read)
        }
    }
}

/// The session settings every connection of the source runs with, so that
/// values print the same in the snapshot and in the stream.
const SESSION_OPTIONS: &str = "-c datestyle=ISO,MDY -c timezone=UTC -c intervalstyle=iso_8601 \
     -c extra_float_digits=3 -c bytea_output=hex -c standard_conforming_strings=on";

/// `weir_<id>`, lower case, other characters than letters, digits and `_`
/// as `_`, at most 63 bytes: a slot name and an unquoted identifier.
fn default_name(source_id: &str) -> String {
    let mut name: String = format!("weir_{source_id}")
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    name.truncate(63);
    name
}

/// A replication slot's name: lower-case letters, digits and `_`, at most
/// 63 characters (PostgreSQL's rule).
fn check_slot_name(slot: &str) -> Result<(), String> {
    let ok = !slot.is_empty()
        && slot.len() <= 63
        && slot
            .chars()
            .all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "`slot` = {slot:?} is not a replication slot name (lower-case letters, digits and `_`, at most 63)"
        )),
    }
}

impl SourceConnector for CdcConfig {
    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        Ok(Box::new(reader::CdcReader::open(self, id, offset)?))
    }

    fn ends(&self) -> bool {
        self.bounded
    }

    fn output_ports(&self) -> Vec<String> {
        match self.ports {
            true => self.tables.iter().map(|t| t.name.clone()).collect(),
            false => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> Result<CdcConfig, String> {
        SOURCE.settings::<CdcConfig>(text)
    }

    #[test]
    fn settings_are_read_with_defaults_and_checked() {
        let c = settings(
            r#"url = "postgresql://u@localhost/db"
table = "orders""#,
        )
        .unwrap();
        assert_eq!(
            (
                &c.tables[0].name,
                &c.publication,
                &c.slot,
                c.numeric,
                c.snapshot
            ),
            (&"orders".to_owned(), &None, &None, NumericAs::Text, true)
        );
        assert_eq!(c.tables.len(), 1);
        assert!(c.output_ports().is_empty());
        assert_eq!(c.slot_name("My-Source"), "weir_my_source");
        assert_eq!(c.publication_name("a"), ("weir_a".to_owned(), true));
        let c = settings(
            r#"url = "postgresql://u@localhost/db"
table = "s.t"
publication = "p"
key = "customer"
slot = "s1"
numeric = "number"
snapshot = false
bounded = true"#,
        )
        .unwrap();
        assert_eq!(c.publication_name("a"), ("p".to_owned(), false));
        assert_eq!(c.tables[0].key, ["customer"]);
        assert_eq!(
            (c.slot_name("a"), c.numeric, c.snapshot),
            ("s1".to_owned(), NumericAs::Number, false)
        );
        assert!(c.bounded);
        assert_eq!(
            (c.slot_name("a"), c.numeric, c.snapshot),
            ("s1".to_owned(), NumericAs::Number, false)
        );
        assert!(!format!("{c:?}").contains("postgresql://"));
        for (text, want) in [
            ("table = \"t\"", "`url` is missing"),
            ("url = \"postgresql://u@h/d\"", "`table` is missing"),
            (
                "url = \"postgresql://u@h/d\"\ntable = \"t\"\nnumeric = \"float\"",
                "`numeric` = \"float\"",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntable = \"t\"\nslot = \"Bad-Slot\"",
                "not a replication slot name",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntable = \"t\"\npublication = \"\"",
                "`publication` is empty",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntable = \"t\"\ntables = [\"u\"]",
                "`table` and `tables` are both set",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntables = []",
                "`tables` is empty",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntables = [\"a\", \"a\"]",
                "`tables` lists \"a\" twice",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntables = [\"a\"]\nkey = \"id\"",
                "a table of keys by table name",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntables = [\"a\"]\nkey = { b = \"id\" }",
                "`key` names table \"b\", which `tables` does not list",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntables = [\"a\"]\nkey = { a = [] }",
                "a list of column names",
            ),
            (
                "url = \"postgresql://u@h/d\"\ntable = \"a\"\nkey = { a = \"id\" }",
                "which is for `tables`",
            ),
        ] {
            let err = settings(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_source_of_tables_has_a_port_per_table_and_keys_by_table() {
        let c = settings(
            r#"url = "postgresql://u@localhost/db"
tables = ["orders", "shop.items"]
key = { "shop.items" = ["order_id", "line"] }"#,
        )
        .unwrap();
        assert_eq!(c.output_ports(), ["orders", "shop.items"]);
        assert_eq!(
            c.tables,
            [
                CdcTable {
                    name: "orders".into(),
                    key: vec![]
                },
                CdcTable {
                    name: "shop.items".into(),
                    key: vec!["order_id".into(), "line".into()]
                }
            ]
        );
        assert_eq!(c.what(), "tables orders, shop.items");
    }
}
