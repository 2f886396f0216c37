//! What the sink reads from PostgreSQL's catalog when it opens: the table
//! (resolved by `to_regclass`, as SQL resolves a name), its columns and
//! their types, and the unique index an upsert needs; the bookkeeping
//! table; and how a PostgreSQL error becomes a one-line message.

use postgres::Client;

use super::copy::{Column, Columns, Kind};

/// The bookkeeping table: per job and sink, the last checkpoint whose
/// epoch the database holds, written in the epoch's transaction.
pub(super) const COMMITS: &str = "weir_sink_commits";

/// Creates [`COMMITS`] (in the first schema of the search path).
pub(super) const CREATE_COMMITS: &str = "CREATE TABLE IF NOT EXISTS weir_sink_commits (\
     job text, sink text, checkpoint bigint NOT NULL, \
     committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, sink))";

/// The table a sink writes, as the catalog describes it.
#[derive(Debug)]
pub(super) struct Table {
    /// `schema.table` for messages (identifiers quoted only when needed).
    pub(super) shown: String,
    /// `"schema"."table"` for statements.
    pub(super) sql: String,
    /// Its columns, in table order.
    pub(super) columns: Columns,
    /// Whether a column is an identity column `GENERATED ALWAYS` (an
    /// `INSERT` naming it needs `OVERRIDING SYSTEM VALUE`).
    pub(super) identity_always: Vec<bool>,
    /// The `key` columns (upsert), as indices of `columns`.
    pub(super) key: Vec<usize>,
}

impl Table {
    /// Reads table `name` (as the job file writes it) and checks that
    /// `key` (upsert; empty for append) names columns with a unique index
    /// on exactly them. An error is a message for a person, with the table
    /// as it was found (`schema.table`) or else as written.
    pub(super) fn load(
        client: &mut Client,
        name: &str,
        key: &[String],
    ) -> Result<Table, (String, String)> {
        let unresolved = |message: String| (name.to_owned(), message);
        let found = client
            .query_opt(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.oid = to_regclass($1)",
                &[&name],
            )
            .map_err(|e| unresolved(format!("cannot look the table up: {}", describe(&e))))?;
        let Some(found) = found else {
            return Err(unresolved(format!(
                "the table does not exist (or is not on the search path); create it, \
                 e.g. CREATE TABLE {name} (...) with a column per record field, or fix `table`"
            )));
        };
        let oid: u32 = found.get(0);
        let (schema, relname, kind): (String, String, String) =
            (found.get(1), found.get(2), found.get(3));
        let shown = format!("{}.{}", shown_ident(&schema), shown_ident(&relname));
        let fail = |message: String| (shown.clone(), message);
        if kind != "r" && kind != "p" {
            return Err(fail(format!(
                "it is a {}, not a table; set `table` to a table",
                match kind.as_str() {
                    "v" => "view",
                    "m" => "materialized view",
                    "f" => "foreign table",
                    "S" => "sequence",
                    "i" | "I" => "index",
                    _ => "relation",
                }
            )));
        }
        let sql = format!("{}.{}", quote_ident(&schema), quote_ident(&relname));
        let rows = client
            .query(
                "SELECT a.attnum, a.attname::text, format_type(a.atttypid, a.atttypmod), \
                        COALESCE(b.typname, t.typname)::text, a.attgenerated::text, a.attidentity::text \
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
                 LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype \
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
                 ORDER BY a.attnum",
                &[&oid],
            )
            .map_err(|e| fail(format!("cannot read the table's columns: {}", describe(&e))))?;
        let mut attnums = Vec::new();
        let mut list = Vec::new();
        let mut identity_always = Vec::new();
        for row in rows {
            attnums.push(row.get::<_, i16>(0));
            let generated: String = row.get(4);
            let identity: String = row.get(5);
            list.push(Column {
                name: row.get(1),
                sql_type: row.get(2),
                kind: Kind::of(row.get(3)),
                generated: !generated.is_empty(),
            });
            identity_always.push(identity == "a");
        }
        let columns = Columns::new(list);
        let mut key_cols = Vec::new();
        for k in key {
            match columns.find(k) {
                Some(col) => key_cols.push(col),
                None => {
                    let names: Vec<&str> = columns.list.iter().map(|c| c.name.as_str()).collect();
                    return Err(fail(format!(
                        "`key` column `{k}` is not a column of the table (its columns: {}); fix `key`",
                        names.join(", ")
                    )));
                }
            }
        }
        let table = Table {
            shown: shown.clone(),
            sql,
            columns,
            identity_always,
            key: key_cols,
        };
        if !key.is_empty() {
            table
                .check_unique_index(client, oid, &attnums)
                .map_err(fail)?;
        }
        Ok(table)
    }

    /// `ON CONFLICT (key)` needs a unique index (or primary key) on exactly
    /// the key columns: immediate, valid, without predicate or expression.
    fn check_unique_index(
        &self,
        client: &mut Client,
        oid: u32,
        attnums: &[i16],
    ) -> Result<(), String> {
        let indexes = client
            .query(
                "SELECT i.indkey::int2[], i.indnkeyatts FROM pg_index i \
                 WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indimmediate \
                   AND i.indpred IS NULL AND i.indexprs IS NULL",
                &[&oid],
            )
            .map_err(|e| format!("cannot read the table's indexes: {}", describe(&e)))?;
        let mut want: Vec<i16> = self.key.iter().map(|&col| attnums[col]).collect();
        want.sort_unstable();
        for index in indexes {
            let cols: Vec<i16> = index.get(0);
            let n = usize::try_from(index.get::<_, i16>(1)).unwrap_or(0);
            let mut have = cols[..n.min(cols.len())].to_vec();
            have.sort_unstable();
            if have == want {
                return Ok(());
            }
        }
        let shown: Vec<String> = self
            .key
            .iter()
            .map(|&c| shown_ident(&self.columns.list[c].name))
            .collect();
        let cols = shown.join(", ");
        Err(format!(
            "mode = \"upsert\" needs a primary key or unique index on exactly the `key` columns ({cols}) \
             for ON CONFLICT, and the table has none; add one, e.g. ALTER TABLE {} ADD PRIMARY KEY ({cols}), \
             or CREATE UNIQUE INDEX ON {} ({cols})",
            self.shown, self.shown
        ))
    }

    /// The names of columns `cols`, quoted for a statement, comma-separated.
    pub(super) fn column_list(&self, cols: &[usize]) -> String {
        let names: Vec<String> = cols
            .iter()
            .map(|&c| quote_ident(&self.columns.list[c].name))
            .collect();
        names.join(", ")
    }
}

/// Creates the bookkeeping table when it is missing.
pub(super) fn create_commits(client: &mut Client) -> Result<(), String> {
    let exists = |client: &mut Client| -> Result<bool, String> {
        let row = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&COMMITS])
            .map_err(|e| describe(&e))?;
        Ok(row.get(0))
    };
    if exists(client)? {
        return Ok(());
    }
    let created = client.batch_execute(CREATE_COMMITS);
    match created {
        Ok(()) => Ok(()),
        // Another sink created it meanwhile (IF NOT EXISTS races).
        Err(_) if exists(client)? => Ok(()),
        Err(e) => Err(format!(
            "cannot create the bookkeeping table {COMMITS} ({}); create it once as a user who may: {CREATE_COMMITS}",
            describe(&e)
        )),
    }
}

/// An identifier quoted for a statement: `"name"`, inner quotes doubled.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// An identifier as a person would write it in SQL: bare when it is a
/// lower-case word that is not a reserved keyword, else quoted.
pub(super) fn shown_ident(name: &str) -> String {
    // PostgreSQL's reserved key words (also those that may name a
    // function or type), which a bare column name cannot be.
    #[rustfmt::skip]
    const RESERVED: &[&str] = &[
        "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
        "authorization", "binary", "both", "case", "cast", "check", "collate", "collation",
        "column", "concurrently", "constraint", "create", "cross", "current_catalog",
        "current_date", "current_role", "current_schema", "current_time", "current_timestamp",
        "current_user", "default", "deferrable", "desc", "distinct", "do", "else", "end", "except",
        "false", "fetch", "for", "foreign", "freeze", "from", "full", "grant", "group", "having",
        "ilike", "in", "initially", "inner", "intersect", "into", "is", "isnull", "join", "lateral",
        "leading", "left", "like", "limit", "localtime", "localtimestamp", "natural", "not",
        "notnull", "null", "offset", "on", "only", "or", "order", "outer", "overlaps", "placing",
        "primary", "references", "returning", "right", "select", "session_user", "similar", "some",
        "symmetric", "system_user", "table", "tablesample", "then", "to", "trailing", "true",
        "union", "unique", "user", "using", "variadic", "verbose", "when", "where", "window",
        "with",
    ];
    let mut chars = name.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && !RESERVED.contains(&name) {
        name.to_owned()
    } else {
        quote_ident(name)
    }
}

/// A PostgreSQL error on one line: the server's message with its detail
/// and hint, or the client's error and its causes.
pub(super) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = db.message().to_owned();
        if let Some(detail) = db.detail() {
            out.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            out.push_str(&format!("; hint: {hint}"));
        }
        return out.replace('\n', " ");
    }
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out.replace('\n', " ")
}

/// Whether `e` means the connection is gone (closed, broken, the server
/// shutting down) rather than a statement refused.
pub(super) fn connection_lost(e: &postgres::Error) -> bool {
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    if e.is_closed() {
        return true;
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The column named in a COPY error's context (`COPY t, line 2, column
/// day: "x"`), and the line.
pub(super) fn copy_context(where_: &str) -> (Option<usize>, Option<&str>) {
    let Some(rest) = where_.strip_prefix("COPY ") else {
        return (None, None);
    };
    let line = rest
        .split_once(", line ")
        .and_then(|(_, l)| l.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|l| l.parse().ok());
    let column = rest
        .split_once(", column ")
        .map(|(_, c)| match c.split_once(": ") {
            Some((c, _)) => c,
            None => c,
        });
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_for_statements_and_shown_bare_when_plain() {
        assert_eq!(quote_ident("totals"), "\"totals\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(shown_ident("word_count2"), "word_count2");
        assert_eq!(shown_ident("Totals"), "\"Totals\"");
        assert_eq!(shown_ident("order"), "\"order\"");
        assert_eq!(shown_ident("2x"), "\"2x\"");
    }

    #[test]
    fn the_copy_context_names_the_line_and_column() {
        assert_eq!(
            copy_context("COPY totals, line 2, column day: \"xyz\""),
            (Some(2), Some("day"))
        );
        assert_eq!(
            copy_context("COPY t, line 17: \"1\t\\N\""),
            (Some(17), None)
        );
        assert_eq!(
            copy_context("COPY t, line 3, column a: b: \"x\""),
            (Some(3), Some("a"))
        );
        assert_eq!(copy_context("SQL function"), (None, None));
    }
}
