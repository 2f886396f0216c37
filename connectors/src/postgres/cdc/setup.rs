//! What the source checks and makes on the server before it reads: logical
//! replication enabled, the tables (their columns, primary keys and replica
//! identities), the publication holding them, and the replication slot.

use postgres::Client;

use super::super::table::{describe, quote_ident};
use super::key_order;

/// One column of the table, as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TableColumn {
    pub(super) name: String,
    pub(super) type_oid: u32,
    /// The type as SQL writes it (`numeric(10,2)`), for casts.
    pub(super) sql_type: String,
    /// Whether the type has a collation (text types): keys of such a
    /// column are ordered `COLLATE "C"`, by bytes.
    pub(super) collatable: bool,
}

/// A table the source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SourceTable {
    pub(super) schema: String,
    pub(super) name: String,
    /// `"schema"."name"`.
    pub(super) sql: String,
    /// Published columns in table order (generated ones are not published).
    pub(super) columns: Vec<TableColumn>,
    /// The primary key's columns, as indices into `columns`, in key order.
    pub(super) key: Vec<usize>,
    /// The primary key columns' types, in key order.
    pub(super) key_types: Vec<u32>,
    /// The columns of the records' key (the source's `key`; by default
    /// the primary key's).
    pub(super) record_key: Vec<usize>,
}

impl SourceTable {
    /// Reads `table` (as SQL resolves the name) from the catalog; refuses
    /// a table without a primary key, with a key of a type the source
    /// cannot order, or with `REPLICA IDENTITY NOTHING`, and a record key
    /// (`record_key`, column names; empty: the primary key) naming a
    /// column it lacks.
    pub(super) fn load(
        client: &mut Client,
        table: &str,
        record_key: &[String],
    ) -> Result<SourceTable, String> {
        let pg = |doing: &str| {
            let doing = doing.to_owned();
            move |e: postgres::Error| format!("{doing} failed: {}", describe(&e))
        };
        let found = client
            .query_opt(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relreplident::text \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.oid = to_regclass($1) AND c.relkind IN ('r', 'p')",
                &[&table],
            )
            .map_err(pg("looking the table up"))?;
        let Some(found) = found else {
            return Err(format!(
                "table {table} does not exist (or is no table); create it or fix `table`"
            ));
        };
        let (oid, schema, name, identity): (u32, String, String, String) =
            (found.get(0), found.get(1), found.get(2), found.get(3));
        let sql = format!("{}.{}", quote_ident(&schema), quote_ident(&name));
        if identity == "n" {
            return Err(format!(
                "table {sql} has REPLICA IDENTITY NOTHING, so its deletes and updates carry no key; \
                 run ALTER TABLE {sql} REPLICA IDENTITY DEFAULT"
            ));
        }
        let rows = client
            .query(
                "SELECT a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod), \
                 a.attcollation <> 0, \
                 array_position(i.indkey::int2[], a.attnum) \
                 FROM pg_attribute a \
                 LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary \
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
                 AND a.attgenerated = '' ORDER BY a.attnum",
                &[&oid],
            )
            .map_err(pg("reading the table's columns"))?;
        let mut columns = Vec::new();
        let mut key: Vec<(i32, usize)> = Vec::new();
        for row in rows {
            if let Some(position) = row.get::<_, Option<i32>>(4) {
                key.push((position, columns.len()));
            }
            columns.push(TableColumn {
                name: row.get(0),
                type_oid: row.get(1),
                sql_type: row.get(2),
                collatable: row.get(3),
            });
        }
        if key.is_empty() {
            return Err(format!(
                "table {sql} has no primary key; the postgres-cdc source keys records and orders its snapshot by it: add one (ALTER TABLE {sql} ADD PRIMARY KEY (...))"
            ));
        }
        key.sort();
        let key: Vec<usize> = key.into_iter().map(|(_, c)| c).collect();
        if let Some(&c) = key
            .iter()
            .find(|&&c| !key_order::orderable(columns[c].type_oid))
        {
            return Err(format!(
                "the primary key column {} of table {sql} has type {}, which the postgres-cdc source cannot order; \
                 keys of integer, numeric, text, uuid, date, timestamp, boolean and bytea types are supported",
                quote_ident(&columns[c].name),
                columns[c].sql_type
            ));
        }
        let record_key = match record_key {
            [] => key.clone(),
            names => (names.iter())
                .map(|name| {
                    columns.iter().position(|c| &c.name == name).ok_or_else(|| {
                        format!("`key` names column {name:?}, which table {sql} does not have")
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let key_types = key.iter().map(|&c| columns[c].type_oid).collect();
        Ok(SourceTable {
            schema,
            name,
            sql,
            columns,
            key,
            key_types,
            record_key,
        })
    }
}

/// Refuses a server whose `wal_level` is not `logical`.
pub(super) fn check_wal_level(client: &mut Client) -> Result<(), String> {
    let level: String = client
        .query_one("SHOW wal_level", &[])
        .map_err(|e| format!("reading wal_level failed: {}", describe(&e)))?
        .get(0);
    match level.as_str() {
        "logical" => Ok(()),
        other => Err(format!(
            "the server has wal_level = {other}; change data capture needs wal_level = logical \
             (set it in postgresql.conf, or ALTER SYSTEM SET wal_level = logical, and restart the server)"
        )),
    }
}

/// Makes sure publication `name` exists and publishes `tables`: the
/// source's own one is made or extended; a named one must be so already.
pub(super) fn ensure_publication(
    client: &mut Client,
    name: &str,
    own: bool,
    tables: &[SourceTable],
) -> Result<(), String> {
    let pg =
        |doing: &'static str| move |e: postgres::Error| format!("{doing} failed: {}", describe(&e));
    let exists = client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&name])
        .map_err(pg("looking the publication up"))?
        .is_some();
    let mut missing = Vec::new();
    for table in tables {
        let holds = client
            .query_opt(
                "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                &[&name, &table.schema, &table.name],
            )
            .map_err(pg("reading the publication's tables"))?
            .is_some();
        if !holds {
            missing.push(table.sql.as_str());
        }
    }
    let publication = quote_ident(name);
    let missing = missing.join(", ");
    match (exists, missing.is_empty(), own) {
        (true, true, _) => Ok(()),
        (false, _, true) => client
            .batch_execute(&format!(
                "CREATE PUBLICATION {publication} FOR TABLE {missing}"
            ))
            .map_err(pg("creating the publication")),
        (true, false, true) => client
            .batch_execute(&format!(
                "ALTER PUBLICATION {publication} ADD TABLE {missing}"
            ))
            .map_err(pg("adding the tables to the publication")),
        (false, _, false) => Err(format!(
            "publication {publication} does not exist; create it (CREATE PUBLICATION {publication} FOR TABLE {missing}) or remove `publication` to let the source make one"
        )),
        (true, false, false) => Err(format!(
            "publication {publication} does not publish {missing}; add it (ALTER PUBLICATION {publication} ADD TABLE {missing}) or name another publication"
        )),
    }
}

/// A replication slot as the server shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SlotState {
    /// Up to where the server may drop the slot's changes.
    pub(super) confirmed: u64,
    /// The slot's output plugin.
    pub(super) plugin: String,
}

/// Slot `name` of this database, if it exists.
pub(super) fn slot(client: &mut Client, name: &str) -> Result<Option<SlotState>, String> {
    let row = client
        .query_opt(
            "SELECT confirmed_flush_lsn::text, plugin::text FROM pg_replication_slots \
             WHERE slot_name = $1 AND database = current_database()",
            &[&name],
        )
        .map_err(|e| format!("reading the replication slots failed: {}", describe(&e)))?;
    row.map(|row| {
        let confirmed: Option<String> = row.get(0);
        let plugin: Option<String> = row.get(1);
        Ok(SlotState {
            confirmed: confirmed
                .as_deref()
                .map(parse_lsn)
                .transpose()?
                .unwrap_or(0),
            plugin: plugin.unwrap_or_default(),
        })
    })
    .transpose()
}

/// Drops slot `name` (one an earlier run made and never confirmed).
pub(super) fn drop_slot(client: &mut Client, name: &str) -> Result<(), String> {
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&name])
        .map(drop)
        .map_err(|e| {
            format!(
                "dropping replication slot {name} failed: {}; is another run of the job reading it?",
                describe(&e)
            )
        })
}

/// An LSN as PostgreSQL prints it (`16/B374D848`).
pub(super) fn parse_lsn(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not an LSN");
    let (hi, lo) = text.split_once('/').ok_or_else(bad)?;
    let hi = u64::from_str_radix(hi, 16).map_err(|_| bad())?;
    let lo = u64::from_str_radix(lo, 16).map_err(|_| bad())?;
    if hi > u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
        return Err(bad());
    }
    Ok(hi << 32 | lo)
}

/// An LSN as PostgreSQL prints it.
pub(super) fn show_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_read_and_print_as_postgresql_does() {
        for (text, lsn) in [
            ("0/0", 0),
            ("16/B374D848", 0x16_B374_D848),
            ("FFFFFFFF/FFFFFFFF", u64::MAX),
        ] {
            assert_eq!(parse_lsn(text), Ok(lsn));
            assert_eq!(show_lsn(lsn), text);
        }
        for bad in ["", "1", "x/1", "1/100000000"] {
            assert!(parse_lsn(bad).is_err(), "{bad}");
        }
    }
}
