//! The PostgreSQL change-data-capture source (`type = "postgres-cdc"` in
//! `[[source]]`): a table's rows as of a consistent snapshot, then every
//! change committed after it, in commit order, read by logical replication
//! with the built-in `pgoutput` plugin.
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
//! connection; `reader` is the source reader, with the offset and the
//! exactly-once argument; `pgoutput`, `value` and `key_order` are the
//! protocol's messages, values and key order.

mod key_order;
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
    /// The table (`table`), `name` or `schema.name`, as SQL resolves it.
    pub table: String,
    /// The columns of the records' key (`key`, a name or a list); empty:
    /// the primary key's.
    pub key: Vec<String>,
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
            .field("table", &self.table)
            .field("key", &self.key)
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
            key: Option<KeyColumns>,
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
            let Some(table) = raw.table else {
                return Err(
                    "`table` is missing; add table = \"<table>\" or \"<schema>.<table>\"".into(),
                );
            };
            check_table(&table)?;
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
                table,
                key: raw.key.map(|k| k.0).unwrap_or_default(),
                publication: raw.publication,
                slot: raw.slot,
                numeric,
                snapshot: raw.snapshot.unwrap_or(true),
                bounded: raw.bounded.unwrap_or(false),
            }))
        }))
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
            (&c.table, &c.publication, &c.slot, c.numeric, c.snapshot),
            (&"orders".to_owned(), &None, &None, NumericAs::Text, true)
        );
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
        assert_eq!(c.key, ["customer"]);
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
        ] {
            let err = settings(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
