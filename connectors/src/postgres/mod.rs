//! The PostgreSQL sink (`type = "postgres"` in `[[sink]]`): exactly-once
//! writes into a table, as a `Destination`
//! of the staged sink (`super::staged`): each epoch is staged on disk at
//! precommit and written into the table once its checkpoint is complete.
//!
//! Invariants (the exactly-once argument):
//! - An epoch's rows and the bookkeeping row of the job's sink in
//!   `weir_sink_commits` (the epoch's checkpoint id) are written in one
//!   transaction: the table holds an epoch exactly when the bookkeeping row
//!   says so.
//! - That transaction runs only after the epoch's checkpoint is complete
//!   (the staged sink delivers at commit), and epochs in checkpoint order,
//!   so the bookkeeping row names the last checkpoint the table holds.
//! - Restoring checkpoint *n* reads the bookkeeping row *d* and delivers
//!   the staged epochs `d+1..=n` (each staged until its transaction
//!   committed); a `d > n` is refused. A crash before, during or after the
//!   commit leaves either the epoch and its row or neither, so the restore
//!   delivers it again or not at all: never twice.
//! - Each delivery locks the bookkeeping row and refuses a checkpoint not
//!   newer than the one it holds (a second run of the same job).
//!
//! Records are JSON objects; a field goes to the column of the same name
//! (matched exactly). What a record leaves out is what an `INSERT` naming
//! only its fields leaves out: the column's default, NULL when it has
//! none; a JSON `null` is NULL. Values are checked in Rust against the
//! column's type before anything is sent (module `copy`); what PostgreSQL
//! itself parses (dates, uuids...) and refuses is reported with its
//! column. In `append` mode rows are sent by `COPY` (one per set of fields
//! the records name, per MiB); in `upsert` mode the records of one key in
//! an epoch are merged first (later fields win, as if applied in order),
//! copied into a temporary table and moved by `INSERT ... ON CONFLICT
//! (key) DO UPDATE` of the fields they name.
//!
//! Changelogs: in `upsert` mode a delete deletes its key's row, a
//! truncate empties the table and an update's before image is skipped
//! (module `merged`); in `append` mode every record is a row, and one
//! that is not an insert has its kind in the field `op` (a column of
//! that name takes it).
//!
//! With `delivery = "at-least-once"` nothing is staged: each written batch
//! goes into the table in a transaction of its own as it arrives, and a
//! checkpoint completes only once every batch before its barrier is
//! committed; after a crash the batches since the restored checkpoint are
//! written again (an upsert writes the same values again).

pub mod cdc;
mod copy;
mod destination;
mod merged;
mod table;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use postgres::config::{Host, SslMode};
use serde::Deserialize;
use toml::Table;

use destination::{PgDestination, WritingSink};
use weir::connectors::from_table;
use weir::connectors::sink::{Delivery, Sink, SinkContext, SinkError};
use weir::connectors::{BuildSink, SinkConnector, SinkType};

/// The registry entry of `type = "postgres"` sinks.
pub const SINK: SinkType = SinkType {
    name: "postgres",
    keys: &["url", "table", "mode", "key", "ignore_unknown"],
    delivery: Delivery::ExactlyOnce,
    read: PostgresSinkConfig::read,
};

/// How rows reach the table (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every record is a new row (`COPY`).
    Append,
    /// A record replaces the fields it names in the row of its `key`, or
    /// inserts it (`INSERT ... ON CONFLICT (key) DO UPDATE`).
    Upsert,
}

/// The settings of a PostgreSQL sink.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresSinkConfig {
    /// The connection string (`url`), which may hold a password: never
    /// shown.
    url: String,
    /// Where the sink connects, for messages: `host:port/dbname`.
    pub server: String,
    /// The table (`table`), `name` or `schema.name`, resolved as SQL
    /// resolves it (unquoted names fold to lower case; the search path).
    pub table: String,
    /// `append` (the default) or `upsert`.
    pub mode: Mode,
    /// The upsert key's columns (`key`), empty in append mode.
    pub key: Vec<String>,
    /// Whether record fields without a column are skipped rather than an
    /// error (`ignore_unknown`, default false).
    pub ignore_unknown: bool,
}

// By hand: the URL may hold a password.
impl std::fmt::Debug for PostgresSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSinkConfig")
            .field("server", &self.server)
            .field("table", &self.table)
            .field("mode", &self.mode)
            .field("key", &self.key)
            .field("ignore_unknown", &self.ignore_unknown)
            .finish_non_exhaustive()
    }
}

/// The key's column names: a list of them, or one name. An empty list is
/// refused as a value of the wrong kind.
struct KeyColumns(Vec<String>);

impl<'de> Deserialize<'de> for KeyColumns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Columns;
        impl<'de> serde::de::Visitor<'de> for Columns {
            type Value = KeyColumns;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of column names such as [\"id\"]")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<KeyColumns, E> {
                Ok(KeyColumns(vec![name.to_owned()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<KeyColumns, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                if names.is_empty() {
                    let empty = serde::de::Unexpected::Other("an empty list");
                    return Err(serde::de::Error::invalid_type(empty, &self));
                }
                Ok(KeyColumns(names))
            }
        }
        d.deserialize_any(Columns)
    }
}

impl PostgresSinkConfig {
    fn read(table: Table) -> Result<BuildSink, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            url: Option<String>,
            table: Option<String>,
            mode: Option<Mode>,
            key: Option<KeyColumns>,
            ignore_unknown: Option<bool>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |_dir: &Path, _| {
            let Some(url) = raw.url else {
                return Err(
                    "`url` is missing; add url = \"postgresql://user@host:5432/dbname\"".into(),
                );
            };
            let server = check_url(&url)?;
            let Some(table) = raw.table else {
                return Err(
                    "`table` is missing; add table = \"<table>\" or \"<schema>.<table>\"".into(),
                );
            };
            check_table(&table)?;
            let mode = raw.mode.unwrap_or(Mode::Append);
            let key = raw.key.map(|k| k.0);
            let key = match (mode, key) {
                (Mode::Append, None) => Vec::new(),
                (Mode::Append, Some(_)) => {
                    return Err(
                        "`key` is only for mode = \"upsert\"; remove it, or set mode = \"upsert\""
                            .into(),
                    );
                }
                (Mode::Upsert, None) => {
                    return Err(
                        "mode = \"upsert\" needs `key`, the columns of the table's primary key \
                                or unique index; add e.g. key = [\"id\"]"
                            .into(),
                    );
                }
                (Mode::Upsert, Some(key)) => key,
            };
            let twice = key.iter().enumerate().find(|(i, k)| key[..*i].contains(k));
            if let Some((_, k)) = twice {
                return Err(format!(
                    "`key` names column {k:?} twice; list each column once"
                ));
            }
            Ok(Arc::new(PostgresSinkConfig {
                url,
                server,
                table,
                mode,
                key,
                ignore_unknown: raw.ignore_unknown.unwrap_or(false),
            }))
        }))
    }

    /// The client settings: the URL's, with a connection timeout of 10 s
    /// and the application name `weir` unless it sets them.
    /// Every row of the sink's table as a JSON object (`row_to_json`), in
    /// the table's storage order: how `weir deadletter ls` reads the dead
    /// letters a PostgreSQL sink wrote.
    pub fn rows_as_json(&self) -> Result<Vec<Vec<u8>>, String> {
        let at = format!("table {} at {}", self.table, self.server);
        let mut client = (self.client_config().connect(postgres::NoTls)).map_err(|e| {
            format!(
                "{at}: cannot connect to PostgreSQL ({})",
                table::describe(&e)
            )
        })?;
        let found = table::Table::load(&mut client, &self.table, &[])
            .map_err(|(_, m)| format!("{at}: {m}"))?;
        let query = format!("SELECT row_to_json(t)::text FROM {} t", found.sql);
        let rows = (client.query(&query, &[]))
            .map_err(|e| format!("{at}: reading the rows failed: {}", table::describe(&e)))?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0).into_bytes())
            .collect())
    }

    fn client_config(&self) -> postgres::Config {
        client_config(&self.url)
    }
}

/// The client settings of connection string `url` (checked when read):
/// its own, with a connection timeout of 10 s and the application name
/// `weir` unless it sets them.
fn client_config(url: &str) -> postgres::Config {
    let mut config = postgres::Config::from_str(url).expect("checked when read");
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_application_name().is_none() {
        config.application_name("weir");
    }
    config
}

/// Checks a connection string; returns `host:port/dbname` for messages
/// (never the password, so the URL itself is never shown).
fn check_url(url: &str) -> Result<String, String> {
    const HINT: &str = "write e.g. url = \"postgresql://user@localhost:5432/dbname\" \
                        or \"host=localhost port=5432 user=... dbname=...\"";
    let config = postgres::Config::from_str(url).map_err(|e| {
        let mut cause = e.to_string();
        if let Some(source) = std::error::Error::source(&e) {
            cause = format!("{cause}: {source}");
        }
        format!("`url` is not a PostgreSQL connection string ({cause}); {HINT}")
    })?;
    if config.get_ssl_mode() == SslMode::Require {
        return Err(
            "`url` asks for TLS (sslmode=require), which the postgres sink does not support; \
                    use sslmode=disable or prefer, on a trusted network"
                .into(),
        );
    }
    let mut hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    if hosts.is_empty() {
        hosts = config
            .get_hostaddrs()
            .iter()
            .map(|a| a.to_string())
            .collect();
    }
    if hosts.is_empty() {
        return Err(format!("`url` names no host; {HINT}"));
    }
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("");
    Ok(format!("{}:{port}/{db}", hosts.join(",")))
}

/// Checks `table`: one name or `schema.name`, each unquoted or in double
/// quotes (`""` for a quote), as SQL writes them.
fn check_table(table: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "`table` = {table:?} {why}; write table = \"<table>\" or \"<schema>.<table>\" \
             (double-quote a name to keep its case: table = '\"Totals\"')"
        ))
    };
    let mut parts = 0;
    let mut chars = table.chars().peekable();
    loop {
        let mut empty = true;
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                    }
                    Some('"') => break,
                    Some(_) => empty = false,
                    None => return bad("has an unclosed quote"),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if c.is_whitespace() || c == '"' {
                    return bad("is not a table name");
                }
                empty = false;
                chars.next();
            }
        }
        if empty {
            return bad("has an empty name");
        }
        parts += 1;
        match chars.next() {
            None => break,
            Some('.') => {}
            Some(_) => return bad("is not a table name"),
        }
    }
    match parts {
        1 | 2 => Ok(()),
        _ => bad("has too many parts (a database cannot be named)"),
    }
}

impl SinkConnector for PostgresSinkConfig {
    /// Connects, checks the table (and the key's unique index for an
    /// upsert), creates the bookkeeping table when missing, then opens the
    /// staged sink, which recovers to `restore`; at-least-once, a sink that
    /// writes each batch as it comes.
    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError> {
        let (job, id) = (at.job, at.id);
        let destination = PgDestination::connect(self, job, id)?;
        if at.delivery == Delivery::AtLeastOnce {
            return Ok(Box::new(WritingSink::new(destination)));
        }
        at.staged(destination)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> Result<PostgresSinkConfig, String> {
        SINK.settings(text, Delivery::ExactlyOnce)
    }

    fn error(text: &str) -> String {
        let err = settings(text).unwrap_err();
        assert!(!err.contains('\n'), "one line: {err}");
        err
    }

    /// As the registry's test checks for every type: each declared key is
    /// read, so a value of the wrong type is a type error.
    #[test]
    fn every_declared_key_is_read() {
        for key in SINK.keys {
            let mut table = Table::new();
            table.insert((*key).to_owned(), toml::Value::Array(Vec::new()));
            let err = (SINK.read)(table).err().unwrap_or_default();
            assert!(err.contains("invalid type"), "{key}: {err}");
        }
    }

    #[test]
    fn defaults_and_every_setting() {
        let s = settings(
            r#"url = "postgresql://weir@db.example:5433/stats"
                            table = "totals""#,
        )
        .unwrap();
        assert_eq!(
            (
                s.server.as_str(),
                s.table.as_str(),
                s.mode,
                s.key.len(),
                s.ignore_unknown
            ),
            ("db.example:5433/stats", "totals", Mode::Append, 0, false)
        );
        let s = settings(
            r#"url = "host=/run/postgresql user=weir"
               table = 'public."Totals"'
               mode = "upsert"
               key = ["word", "day"]
               ignore_unknown = true"#,
        )
        .unwrap();
        assert_eq!(s.server, "/run/postgresql:5432/weir");
        assert_eq!(
            (s.mode, s.key.clone(), s.ignore_unknown),
            (Mode::Upsert, vec!["word".into(), "day".into()], true)
        );
        let s =
            settings("url = \"host=h\"\ntable = \"t\"\nmode = \"upsert\"\nkey = \"id\"").unwrap();
        assert_eq!(s.key, ["id"]);
    }

    #[test]
    fn the_url_is_checked_and_its_password_never_shown() {
        let s = settings(
            r#"url = "postgresql://weir:s3cret@localhost/db"
                            table = "t""#,
        )
        .unwrap();
        assert!(!format!("{s:?}").contains("s3cret"), "{s:?}");
        assert_eq!(s.server, "localhost:5432/db");
        let err = error(
            r#"url = "postgresql://weir:s3cret@localhost:notaport/db"
                           table = "t""#,
        );
        assert!(
            err.starts_with("`url` is not a PostgreSQL connection string")
                && err.contains("url = \"postgresql://"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
        assert!(
            error(
                r#"url = "user=weir dbname=db"
                         table = "t""#
            )
            .contains("`url` names no host")
        );
        assert!(
            error(
                r#"url = "host=h sslmode=require"
                         table = "t""#
            )
            .contains("sslmode=require")
        );
        assert!(error(r#"table = "t""#).contains("`url` is missing; add url = "));
    }

    #[test]
    fn the_table_name_is_checked() {
        let with = |t: &str| settings(&format!("url = \"host=h\"\ntable = '{t}'"));
        for ok in ["t", "public.t", r#""My ""T""""#, r#"s."Weird.Name""#] {
            assert!(with(ok).is_ok(), "{ok}: {:?}", with(ok));
        }
        for (bad, why) in [
            ("", "empty name"),
            ("a.", "empty name"),
            ("db.s.t", "too many parts"),
            ("my table", "not a table name"),
            (r#""open"#, "unclosed quote"),
        ] {
            let err = with(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("<schema>.<table>"),
                "{bad}: {err}"
            );
        }
        assert!(error(r#"url = "host=h""#).contains("`table` is missing"));
    }

    #[test]
    fn key_goes_with_upsert_only() {
        let base = "url = \"host=h\"\ntable = \"t\"\n";
        let err = error(&format!("{base}key = [\"id\"]"));
        assert!(err.contains("`key` is only for mode = \"upsert\""), "{err}");
        let err = error(&format!("{base}mode = \"upsert\""));
        assert!(
            err.contains("needs `key`") && err.contains("key = [\"id\"]"),
            "{err}"
        );
        let err = error(&format!("{base}mode = \"upsert\"\nkey = []"));
        assert!(
            err.contains("an empty list") && err.contains("[\"id\"]"),
            "{err}"
        );
        let err = error(&format!(
            "{base}mode = \"upsert\"\nkey = [\"a\", \"b\", \"a\"]"
        ));
        assert!(err.contains("names column \"a\" twice"), "{err}");
        let err = error(&format!("{base}mode = \"merge\""));
        assert!(
            err.contains("merge") && err.contains("append") && err.contains("upsert"),
            "{err}"
        );
        let err = error(&format!("{base}batch = 3"));
        assert!(err.contains("batch"), "{err}");
    }
}
