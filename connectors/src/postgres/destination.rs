//! The PostgreSQL [`Destination`]: one transaction per epoch that writes
//! its rows by `COPY` and moves the bookkeeping row of the job's sink to
//! the epoch's checkpoint. At-least-once, [`WritingSink`]: one transaction
//! per written batch, without the bookkeeping row.

use std::borrow::Cow;
use std::io::Write;
use std::time::Duration;

use postgres::{Client, NoTls, Transaction};

use super::copy::{Columns, Groups, Row, Shown, check_key, show_line};
use super::merged::Merged;
use super::table::{COMMITS, Table, connection_lost, copy_context, create_commits, describe};
use super::{Mode, PostgresSinkConfig};
use weir::connectors::changelog::with_op;
use weir::connectors::sink::{Done, RecordCheck, Sink, SinkError};
use weir::connectors::staged::{Destination, EpochReader};
use weir::dataflow::Batch;
use weir::dataflow::batch::{Change, Encoding, RecordRef};
use weir::failpoint::{self, Failpoint};

/// Bytes of COPY text sent at a time: an append group is sent as one
/// `COPY` once it holds this much, an upsert group in writes of this size.
const CHUNK: usize = 1 << 20;

/// The temporary table an upsert epoch is copied into before its
/// `INSERT ... ON CONFLICT`.
const STAGE: &str = "weir_stage";

/// Writes epochs into a PostgreSQL table.
pub(super) struct PgDestination {
    config: postgres::Config,
    client: Option<Client>,
    job: String,
    sink: String,
    /// `table <schema.table> at <server>`, for messages.
    target: String,
    table: Table,
    mode: Mode,
    ignore_unknown: bool,
    row: Row,
    groups: Groups,
    merged: Merged,
}

impl PgDestination {
    /// Connects, reads the table (checking the key index of an upsert) and
    /// creates the bookkeeping table when missing.
    pub(super) fn connect(
        settings: &PostgresSinkConfig,
        job: &str,
        sink: &str,
    ) -> Result<PgDestination, SinkError> {
        let config = settings.client_config();
        let remote = |target: &str, message: String| SinkError::Remote {
            sink: sink.to_owned(),
            target: target.to_owned(),
            message,
        };
        let unresolved = format!("table {} at {}", settings.table, settings.server);
        let mut client = config.connect(NoTls).map_err(|e| {
            remote(
                &unresolved,
                format!(
                    "cannot connect to PostgreSQL ({}); check `url` and that the server is running",
                    describe(&e)
                ),
            )
        })?;
        let table = Table::load(&mut client, &settings.table, &settings.key)
            .map_err(|(t, m)| remote(&format!("table {t} at {}", settings.server), m))?;
        let target = format!("table {} at {}", table.shown, settings.server);
        create_commits(&mut client).map_err(|m| remote(&target, m))?;
        Ok(PgDestination {
            config,
            client: Some(client),
            job: job.to_owned(),
            sink: sink.to_owned(),
            target,
            table,
            mode: settings.mode,
            ignore_unknown: settings.ignore_unknown,
            row: Row::default(),
            groups: Groups::default(),
            merged: Merged::default(),
        })
    }

    fn remote(&self, message: String) -> SinkError {
        SinkError::Remote {
            sink: self.sink.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// The error of a failed statement; a lost connection is dropped so
    /// that the next step reconnects.
    fn failed(&mut self, doing: &str, e: &postgres::Error) -> SinkError {
        if connection_lost(e) {
            self.client = None;
            return self.remote(format!(
                "lost the connection to PostgreSQL while {doing} ({}); the job restarts and delivers the epoch again",
                describe(e)
            ));
        }
        self.remote(format!("{doing} failed: {}", describe(e)))
    }

    /// The client, reconnecting when the connection was lost. A connection
    /// that was idle since the last step is checked first: a server restart
    /// shows only at the next request.
    fn client(&mut self) -> Result<&mut Client, SinkError> {
        let alive = match self.client.as_mut() {
            Some(c) if !c.is_closed() => c.is_valid(Duration::from_secs(10)).is_ok(),
            _ => false,
        };
        if !alive {
            self.client = None;
            let client = self.config.connect(NoTls).map_err(|e| {
                self.remote(format!(
                    "lost the connection to PostgreSQL and cannot reconnect ({}); \
                     the job restarts and delivers the epoch again",
                    describe(&e)
                ))
            })?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }
}

impl Destination for PgDestination {
    fn reads_rows(&self) -> bool {
        true
    }

    fn check(&self) -> Option<Box<dyn RecordCheck>> {
        Some(Box::new(self.record_check()))
    }

    fn delivered(&mut self) -> Result<Option<u64>, SinkError> {
        let (job, sink) = (self.job.clone(), self.sink.clone());
        let query = format!("SELECT checkpoint FROM {COMMITS} WHERE job = $1 AND sink = $2");
        let row = self.client()?.query_opt(&query, &[&job, &sink]);
        match row {
            Ok(row) => Ok(Some(row.map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))),
            Err(e) => Err(self.failed("reading the bookkeeping row", &e)),
        }
    }

    fn start_over(&mut self) -> Result<(), SinkError> {
        let (job, sink) = (self.job.clone(), self.sink.clone());
        let query = format!("DELETE FROM {COMMITS} WHERE job = $1 AND sink = $2");
        let done = self.client()?.execute(&query, &[&job, &sink]);
        done.map(drop)
            .map_err(|e| self.failed("deleting the bookkeeping row", &e))
    }

    fn deliver(&mut self, id: u64, epoch: &mut EpochReader) -> Result<(), SinkError> {
        self.with_epoch(|work, client, job, sink| work.deliver(client, job, sink, id, epoch))?;
        // The epoch and its bookkeeping row are committed.
        failpoint::hit(Failpoint::SinkAfterDelivery);
        Ok(())
    }
}

impl PgDestination {
    /// What checks records against the table on the sink's thread.
    fn record_check(&self) -> TableCheck {
        TableCheck {
            columns: self.table.columns.clone(),
            key: match self.mode {
                Mode::Upsert => self.table.key.clone(),
                Mode::Append => Vec::new(),
            },
            ignore_unknown: self.ignore_unknown,
            row: Row::default(),
        }
    }

    /// Runs `step` with the connection and the destination's buffers, and
    /// turns its failure into the sink's error.
    fn with_epoch(
        &mut self,
        step: impl FnOnce(&mut Epoch<'_>, &mut Client, &str, &str) -> Result<(), Failure>,
    ) -> Result<(), SinkError> {
        self.client()?;
        let PgDestination {
            client,
            job,
            sink,
            table,
            mode,
            ignore_unknown,
            row,
            groups,
            merged,
            ..
        } = self;
        let client = client.as_mut().expect("connected above");
        let mut work = Epoch {
            table,
            mode: *mode,
            ignore_unknown: *ignore_unknown,
            row,
            groups,
            merged,
        };
        let result = step(&mut work, client, job, sink);
        work.groups.clear();
        match result {
            Ok(()) => Ok(()),
            Err(Failure::Sink(e)) => Err(e),
            Err(Failure::Message(m)) => Err(self.remote(m)),
            Err(Failure::Pg(doing, e)) => Err(self.failed(&doing, &e)),
        }
    }
}

/// Checks records as delivering them would, without the server: each
/// field against its column's type, unknown fields, the `key` columns of
/// an upsert. What only the server can tell (a date it cannot parse, a
/// constraint) is not checked.
struct TableCheck {
    columns: Columns,
    /// The `key` columns of an upsert; none for an append.
    key: Vec<usize>,
    ignore_unknown: bool,
    row: Row,
}

impl RecordCheck for TableCheck {
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        let mut refused = Vec::new();
        for (i, record) in batch.iter().enumerate() {
            let append = self.key.is_empty();
            let read = match record.change {
                change if !append && Merged::keyless(change) => Ok(()),
                _ => read(
                    &mut self.row,
                    &self.columns,
                    self.ignore_unknown,
                    append,
                    &record,
                ),
            };
            let read = read.and_then(|()| match append {
                true => Ok(()),
                false => check_key(&self.row, &self.key, &self.columns, shown(&record)),
            });
            if let Err(why) = read {
                refused.push((i, why));
            }
        }
        refused
    }
}

/// Reads `record` into `row` as the sink writes it: a row's fields as they
/// are, other values as JSON text; in an `append` table a change kind
/// other than insert as the `op` field of the record's JSON
/// ([`with_op`]).
fn read(
    row: &mut Row,
    columns: &Columns,
    ignore_unknown: bool,
    append: bool,
    record: &RecordRef<'_>,
) -> Result<(), String> {
    let with_kind = append && record.change != Change::Insert;
    if record.encoding == Encoding::Row && !with_kind {
        return row.read_fields(columns, ignore_unknown, record.value);
    }
    let text = match record.encoding {
        Encoding::Row => Cow::Owned(record.text_value()),
        Encoding::Bytes => Cow::Borrowed(record.value),
    };
    let value = match append {
        true => with_op(&text, record.change)?,
        false => Cow::Borrowed(&*text),
    };
    row.read(columns, ignore_unknown, &value)
}

/// `record` as messages show it.
fn shown<'a>(record: &RecordRef<'a>) -> Shown<'a> {
    match record.encoding {
        Encoding::Row => Shown::Row(record.value),
        Encoding::Bytes => Shown::Json(record.value),
    }
}

/// The at-least-once PostgreSQL sink: each batch is committed before
/// `write` returns, so a checkpoint's precommit has nothing left to wait
/// for.
pub(super) struct WritingSink {
    destination: PgDestination,
    check: TableCheck,
}

impl WritingSink {
    /// The at-least-once sink writing to `destination`.
    pub(super) fn new(destination: PgDestination) -> Self {
        let check = destination.record_check();
        WritingSink { destination, check }
    }
}

impl Sink for WritingSink {
    fn reads_rows(&self) -> bool {
        true
    }

    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.check.refuse(batch)
    }

    fn out_on_write(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        (self.destination).with_epoch(|work, client, _, _| work.write(client, batch))
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(serde_json::json!({ "checkpoint": id })));
        Ok(())
    }

    fn commit(&mut self, _: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(serde_json::Value::Null));
        Ok(())
    }
}

/// Why an epoch was not delivered.
enum Failure {
    /// Reading the staged epoch failed.
    Sink(SinkError),
    /// A record or the database refused the epoch: the message.
    Message(String),
    /// A statement failed: what the sink was doing, and the error.
    Pg(String, postgres::Error),
}

impl From<SinkError> for Failure {
    fn from(e: SinkError) -> Self {
        Failure::Sink(e)
    }
}

/// The work of one epoch, borrowing the destination's buffers.
struct Epoch<'a> {
    table: &'a Table,
    mode: Mode,
    ignore_unknown: bool,
    row: &'a mut Row,
    groups: &'a mut Groups,
    merged: &'a mut Merged,
}

impl Epoch<'_> {
    /// Writes epoch `id` and the bookkeeping row in one transaction.
    fn deliver(
        &mut self,
        client: &mut Client,
        job: &str,
        sink: &str,
        id: u64,
        epoch: &mut EpochReader,
    ) -> Result<(), Failure> {
        let pg = |doing: &str| {
            let doing = doing.to_owned();
            move |e| Failure::Pg(doing, e)
        };
        let checkpoint = i64::try_from(id).expect("checkpoint ids fit in a bigint");
        let mut tx = client.transaction().map_err(pg("starting a transaction"))?;
        // Locks the bookkeeping row: a second run of the same job waits.
        let held = tx
            .query_opt(
                &format!(
                    "SELECT checkpoint FROM {COMMITS} WHERE job = $1 AND sink = $2 FOR UPDATE"
                ),
                &[&job, &sink],
            )
            .map_err(pg("reading the bookkeeping row"))?;
        if let Some(held) = held
            .map(|r| r.get::<_, i64>(0))
            .filter(|h| *h >= checkpoint)
        {
            return Err(Failure::Message(format!(
                "{COMMITS} says the table already holds checkpoint {held}'s output, delivering checkpoint {id}; \
                 is another run of job `{job}` writing it? Stop it, or rerun with `--restore none`"
            )));
        }
        self.groups.clear();
        self.merged.clear();
        while let Some(batch) = epoch.next_batch()? {
            self.add(&mut tx, &batch)?;
        }
        self.finish(&mut tx)?;
        tx.execute(
            &format!(
                "INSERT INTO {COMMITS} (job, sink, checkpoint) VALUES ($1, $2, $3) \
                 ON CONFLICT (job, sink) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, committed_at = now()"
            ),
            &[&job, &sink, &checkpoint],
        )
        .map_err(pg("writing the bookkeeping row"))?;
        tx.commit().map_err(pg("committing the epoch"))
    }

    /// Writes `batch` in a transaction of its own (at-least-once: no
    /// bookkeeping row).
    fn write(&mut self, client: &mut Client, batch: &Batch) -> Result<(), Failure> {
        let mut tx = client
            .transaction()
            .map_err(|e| Failure::Pg("starting a transaction".into(), e))?;
        self.groups.clear();
        self.merged.clear();
        self.add(&mut tx, batch)?;
        self.finish(&mut tx)?;
        tx.commit()
            .map_err(|e| Failure::Pg("committing the rows".into(), e))
    }

    /// Reads the records of `batch` into rows; sends an append group once
    /// it holds [`CHUNK`] bytes.
    fn add(&mut self, tx: &mut Transaction<'_>, batch: &Batch) -> Result<(), Failure> {
        for record in batch.iter() {
            if self.mode == Mode::Upsert && Merged::keyless(record.change) {
                self.merged.apply_keyless(record.change);
                continue;
            }
            let append = self.mode == Mode::Append;
            let columns = &self.table.columns;
            (read(self.row, columns, self.ignore_unknown, append, &record))
                .map_err(Failure::Message)?;
            match self.mode {
                Mode::Append => {
                    let g = self.groups.push(self.row);
                    if self.groups.groups_mut()[g].copy.len() >= CHUNK {
                        self.send_append(tx, g)?;
                    }
                }
                Mode::Upsert => self
                    .merged
                    .push(
                        record.change,
                        self.row,
                        &self.table.key,
                        &self.table.columns,
                        shown(&record),
                    )
                    .map_err(Failure::Message)?,
            }
        }
        Ok(())
    }

    /// Sends what [`add`](Self::add) left unsent.
    fn finish(&mut self, tx: &mut Transaction<'_>) -> Result<(), Failure> {
        match self.mode {
            Mode::Append => {
                for g in 0..self.groups.groups_mut().len() {
                    self.send_append(tx, g)?;
                }
                Ok(())
            }
            Mode::Upsert => self.send_upsert(tx),
        }
    }

    /// Sends the lines of append group `g` into the table by one `COPY`.
    fn send_append(&mut self, tx: &mut Transaction<'_>, g: usize) -> Result<(), Failure> {
        let group = &mut self.groups.groups_mut()[g];
        if group.copy.is_empty() {
            return Ok(());
        }
        copy(tx, self.table, &self.table.sql, &group.columns, &group.copy)?;
        group.copy.clear();
        Ok(())
    }

    /// Sends the merged rows of an upsert epoch: per set of columns, a
    /// `COPY` into the temporary table and an `INSERT ... ON CONFLICT`
    /// from it.
    fn send_upsert(&mut self, tx: &mut Transaction<'_>) -> Result<(), Failure> {
        if self.merged.is_empty() {
            return Ok(());
        }
        let table = self.table;
        // Types only: no defaults, constraints or sequences of the table.
        let create = format!(
            "CREATE TEMP TABLE {STAGE} ON COMMIT DROP AS SELECT * FROM {} WITH NO DATA",
            table.sql
        );
        let pg = |doing: &'static str| move |e| Failure::Pg(doing.to_owned(), e);
        tx.batch_execute(&create)
            .map_err(pg("creating the temporary table"))?;
        let key = table.column_list(&table.key);
        if self.merged.truncated() {
            tx.batch_execute(&format!("DELETE FROM {}", table.sql))
                .map_err(|e| refused(table, "emptying the table (a truncate)", e, None))?;
        }
        let deleted = self.merged.deleted_keys();
        if !deleted.is_empty() {
            copy(tx, table, STAGE, &table.key, &deleted)?;
            let matches: Vec<String> = (table.key.iter())
                .map(|&c| {
                    let name = super::table::quote_ident(&table.columns.list[c].name);
                    format!("t.{name} = s.{name}")
                })
                .collect();
            let delete = format!(
                "DELETE FROM {} t USING {STAGE} s WHERE {}",
                table.sql,
                matches.join(" AND ")
            );
            tx.batch_execute(&delete)
                .map_err(|e| refused(table, "deleting the epoch's deleted keys", e, None))?;
            tx.batch_execute(&format!("TRUNCATE {STAGE}"))
                .map_err(pg("emptying the temporary table"))?;
        }
        self.merged.drain_into(self.groups, self.row);
        for group in self.groups.groups_mut() {
            copy(tx, table, STAGE, &group.columns, &group.copy)?;
            let cols = table.column_list(&group.columns);
            let updates: Vec<String> = group
                .columns
                .iter()
                .filter(|c| !table.key.contains(c))
                .map(|&c| {
                    let name = super::table::quote_ident(&table.columns.list[c].name);
                    format!("{name} = EXCLUDED.{name}")
                })
                .collect();
            let action = match updates.is_empty() {
                true => "NOTHING".to_owned(),
                false => format!("UPDATE SET {}", updates.join(", ")),
            };
            let overriding = match group.columns.iter().any(|&c| table.identity_always[c]) {
                true => " OVERRIDING SYSTEM VALUE",
                false => "",
            };
            let insert = format!(
                "INSERT INTO {} ({cols}){overriding} SELECT {cols} FROM {STAGE} ON CONFLICT ({key}) DO {action}",
                table.sql
            );
            tx.batch_execute(&insert)
                .map_err(|e| refused(table, "upserting the epoch", e, None))?;
            tx.batch_execute(&format!("TRUNCATE {STAGE}"))
                .map_err(pg("emptying the temporary table"))?;
            group.copy.clear();
        }
        Ok(())
    }
}

/// Copies `lines` (COPY text of columns `cols` of `table`) into `into`.
fn copy(
    tx: &mut Transaction<'_>,
    table: &Table,
    into: &str,
    cols: &[usize],
    lines: &[u8],
) -> Result<(), Failure> {
    let statement = format!("COPY {into} ({}) FROM STDIN", table.column_list(cols));
    let context = || (lines, cols);
    let mut writer = tx
        .copy_in(&statement)
        .map_err(|e| refused(table, "starting a COPY", e, Some(context())))?;
    for chunk in lines.chunks(CHUNK) {
        if let Err(e) = writer.write_all(chunk) {
            // The writer wraps the client's error; the server's reason
            // comes with it or at `finish`.
            let inner = e
                .into_inner()
                .and_then(|e| e.downcast::<postgres::Error>().ok());
            if let Some(e) = inner {
                return Err(refused(table, "copying the epoch", *e, Some(context())));
            }
            break;
        }
    }
    writer
        .finish()
        .map(drop)
        .map_err(|e| refused(table, "copying the epoch", e, Some(context())))
}

/// The failure of a statement that writes rows: for an error the data
/// caused, a message naming the column (from the COPY context or the
/// error's fields) and the row; else a [`Failure::Pg`].
fn refused(
    table: &Table,
    doing: &str,
    e: postgres::Error,
    copied: Option<(&[u8], &[usize])>,
) -> Failure {
    let Some(db) = e.as_db_error().filter(|_| !connection_lost(&e)) else {
        return Failure::Pg(doing.to_owned(), e);
    };
    let (line, context_column) = db.where_().map(copy_context).unwrap_or((None, None));
    let column = context_column.or(db.column());
    let mut message = match column.and_then(|c| table.columns.find(c)) {
        Some(c) => {
            let col = &table.columns.list[c];
            format!("column `{}` ({}): {}", col.name, col.sql_type, describe(&e))
        }
        None => format!("PostgreSQL refused the epoch: {}", describe(&e)),
    };
    if let (Some(line), Some((lines, cols))) = (line, copied) {
        let names: Vec<&str> = cols
            .iter()
            .map(|&c| table.columns.list[c].name.as_str())
            .collect();
        if let Some(row) = show_line(lines, line, &names) {
            message.push_str(&format!(" in row {row}"));
        }
    }
    message.push_str("; fix the records or the table");
    Failure::Message(message)
}
