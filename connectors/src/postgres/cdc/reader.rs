//! The source reader: the snapshot's rows, then the stream's changes, and
//! the offset (module `offset`) that makes both exactly-once.
//!
//! - `lsn`, `skip`: where the stream resumes (module `pending`): the end
//!   of the last transaction all of whose records were returned (or a
//!   position the server said it had sent everything before, between
//!   transactions), and per output port how many records past it were
//!   returned. The server sends a slot's transactions in commit order,
//!   each whole, so a stream restarted at `lsn` yields the same records
//!   again, of which each port drops its first `skip`.
//! - `snapshot`: while the tables are read, one after another in port
//!   order, the table being read and the key of its last row returned;
//!   `null` after.
//! - `reads`: which rows of which table were read under which snapshot. A
//!   fresh start reads all of them under the snapshot the slot exported at
//!   its creation, at the slot's position: the stream then brings exactly
//!   the transactions the snapshot lacks. A restore in the middle of the
//!   snapshot cannot have that snapshot again; it reads the rest (the
//!   table being read after the last key returned, and the tables after
//!   it) under a new snapshot, exported by a temporary slot at a later
//!   position *L*, and remembers `{table, after, lsn: L}` for each. The
//!   stream then drops a change of a row covered by a read point in a
//!   transaction committed before its *L* (the row as read has it
//!   already); of several points covering a row, the last made counts. A
//!   point is forgotten once the stream passed it. A truncate committed
//!   before *L* is sent all the same and ends the dropping for its table:
//!   the table is empty then, and every change after it is sent.
//! - `end`: of a bounded source, the position of the logical message it
//!   emitted at the job's first start; the source ends when the stream
//!   brings it (a restore past it ends at once).
//! - The slot's confirmed position moves only in [`SourceReader::release`],
//!   to the `lsn` of the oldest checkpoint a restore may still pick: the
//!   server keeps every change a restore can ask for, and none in the
//!   snapshot, whose position is the slot's until the snapshot is read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::CdcConfig;
use super::key_order::compare_keys;
use super::offset::{Offset, ReadPoint, SnapshotAt};
use super::pending::Pending;
use super::pgoutput::{self, Message, OldTuple, Relation};
use super::record::{Image, RecordBuilder};
use super::setup::{self, SourceTable, parse_lsn, show_lsn};
use super::snapshot::SnapshotRead;
use super::stream::{Event, Stream};
use super::value::NumericAs;
use weir::connectors::source::{MAX_BATCH_BYTES, SourceError, SourceReader};
use weir::dataflow::Batch;
use weir::dataflow::batch::Change;
use weir::failpoint::{self, Failpoint};

/// The transaction being streamed.
#[derive(Debug)]
struct Txn {
    /// Where it commits.
    final_lsn: u64,
    /// Its commit time, milliseconds since the Unix epoch.
    time: i64,
}

/// The `postgres-cdc` source's reader.
pub(super) struct CdcReader {
    source_id: String,
    /// `host:port/db`, for messages.
    server: String,
    /// `table T at host:port/db` (or `tables T, U at ...`), for messages.
    target: String,
    /// The tables, by output port.
    tables: Vec<SourceTable>,
    numeric: NumericAs,
    stream: Stream,
    /// The snapshot being read; `None` once the stream runs.
    snapshot: Option<SnapshotRead>,
    /// The time of the snapshot's rows.
    snapshot_time: i64,
    /// The read points in force where the stream is.
    reads: Vec<ReadPoint>,
    /// The relations the stream described, each with the port of its
    /// table (`None`: a table the source does not read).
    relations: HashMap<u32, (Arc<Relation>, Option<usize>)>,
    txn: Option<Txn>,
    /// The stream's records not yet returned, and where a restore resumes.
    pending: Pending,
    /// The output port of the batch returned last.
    port: u32,
    /// The highest position the stream reached, for messages.
    read_to: u64,
    place: Option<String>,
    /// The slot's name, which the end marker carries.
    slot: String,
    /// Of a bounded source: where it ends (the position of its end marker,
    /// a logical message emitted at the job's first start).
    end: Option<u64>,
    /// Whether the stream reached `end`.
    ended: bool,
}

/// The prefix of a bounded source's end marker, whose content is its slot.
const END_MARKER: &str = "weir.end";

/// Emits the end marker of a bounded source reading slot `slot`; returns
/// its position.
fn mark_end(client: &mut postgres::Client, slot: &str) -> Result<u64, String> {
    let lsn: String = client
        .query_one(
            "SELECT pg_logical_emit_message(false, $1, $2)::text",
            &[&END_MARKER, &slot],
        )
        .map_err(|e| {
            format!(
                "marking where the bounded source ends failed: {}",
                super::super::table::describe(&e)
            )
        })?
        .get(0);
    parse_lsn(&lsn)
}

fn now_millis() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

impl CdcReader {
    /// Opens the source at `offset`: a fresh one makes its publication and
    /// slot and starts the snapshot.
    pub(super) fn open(
        config: &CdcConfig,
        id: &str,
        offset: Option<&Value>,
    ) -> Result<CdcReader, SourceError> {
        let target = format!("{} at {}", config.what(), config.server);
        let remote = |message: String| SourceError::Remote {
            source_id: id.to_owned(),
            target: target.clone(),
            message,
        };
        let bad_offset = |message: String| SourceError::BadOffset {
            source_id: id.to_owned(),
            offset: offset.map(Value::to_string).unwrap_or_default(),
            message,
        };
        let client_config = config.client_config();
        let mut client = (client_config.connect(postgres::NoTls)).map_err(|e| {
            remote(format!(
                "cannot connect to PostgreSQL ({})",
                super::super::table::describe(&e)
            ))
        })?;
        setup::check_wal_level(&mut client).map_err(&remote)?;
        let tables = (config.tables.iter())
            .map(|t| SourceTable::load(&mut client, &t.name, &t.key))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&remote)?;
        let (publication, own) = config.publication_name(id);
        setup::ensure_publication(&mut client, &publication, own, &tables).map_err(&remote)?;
        let slot = config.slot_name(id);
        let state = setup::slot(&mut client, &slot).map_err(&remote)?;
        if let Some(state) = &state
            && state.plugin != "pgoutput"
        {
            return Err(remote(format!(
                "replication slot {slot} uses the output plugin {:?}, not pgoutput; drop it or name another `slot`",
                state.plugin
            )));
        }
        // Restored: the stream resumes at the offset's position; fresh: at
        // the slot's (0), which is where a new slot's snapshot ends too.
        let restored = offset.map(Offset::read).transpose().map_err(&bad_offset)?;
        if let Some(restored) = &restored {
            let names: Vec<String> = tables.iter().map(|t| t.sql.clone()).collect();
            restored.check_tables(&names).map_err(&bad_offset)?;
        }
        let start = restored.as_ref().map_or(0, |r| r.lsn);
        let ports = tables.len();
        let mut reader = CdcReader {
            source_id: id.to_owned(),
            server: config.server.clone(),
            target: target.clone(),
            tables,
            numeric: config.numeric,
            stream: Stream::connect(&client_config, &slot, &publication, start).map_err(&remote)?,
            snapshot: None,
            snapshot_time: now_millis(),
            reads: Vec::new(),
            relations: HashMap::new(),
            txn: None,
            pending: Pending::new(ports, 0, &[], Vec::new()),
            port: 0,
            read_to: start,
            place: None,
            slot: slot.clone(),
            end: None,
            ended: false,
        };
        let Some(restored) = restored else {
            match (state, config.snapshot, config.slot.is_some()) {
                (Some(_), true, true) => {
                    return Err(remote(format!(
                        "replication slot {slot} exists but the job has no checkpoint: a snapshot needs a slot the source makes itself; \
                         drop the slot (SELECT pg_drop_replication_slot('{slot}')), or set snapshot = false to read its changes from its position"
                    )));
                }
                (Some(_), true, false) => {
                    tracing::warn!(
                        "source `{id}`: dropping replication slot {slot}, left by a run that never completed a checkpoint, to take a fresh snapshot"
                    );
                    setup::drop_slot(&mut client, &slot).map_err(&remote)?;
                }
                (Some(state), false, _) => {
                    reader.resume_at(state.confirmed, &[], Vec::new());
                    if config.bounded {
                        reader.end = Some(mark_end(&mut client, &slot).map_err(&remote)?);
                    }
                    reader.stream.start().map_err(&remote)?;
                    return Ok(reader);
                }
                (None, _, _) => {}
            }
            let export = match config.snapshot {
                true => "SNAPSHOT 'export'",
                false => "SNAPSHOT 'nothing'",
            };
            let (lsn, name) =
                create_slot(&mut reader.stream, &slot, "", export).map_err(&remote)?;
            if config.bounded {
                reader.end = Some(mark_end(&mut client, &slot).map_err(&remote)?);
            }
            match name {
                Some(name) if config.snapshot => {
                    reader.snapshot = Some(
                        SnapshotRead::begin(&client_config, &name, &reader.tables, 0, None)
                            .map_err(&remote)?,
                    );
                    let all = (0..ports).map(|table| ReadPoint {
                        table,
                        after: None,
                        lsn,
                    });
                    reader.resume_at(lsn, &[], all.collect());
                }
                _ => {
                    reader.resume_at(lsn, &[], Vec::new());
                    reader.stream.start().map_err(&remote)?;
                }
            }
            return Ok(reader);
        };
        let Some(state) = state else {
            return Err(remote(format!(
                "replication slot {slot} no longer exists (was it dropped?), so the changes after the job's checkpoint are gone; \
                 rerun with `--restore none` to start over with a fresh snapshot"
            )));
        };
        if state.confirmed > restored.lsn {
            return Err(bad_offset(format!(
                "replication slot {slot} is at {}, past the checkpoint's position {}: the changes in between are gone \
                 (was the slot used by another run?); restore a newer checkpoint, or rerun with `--restore none`",
                show_lsn(state.confirmed),
                show_lsn(restored.lsn)
            )));
        }
        reader.end = restored.end;
        reader.ended = restored.end.is_some_and(|end| restored.lsn > end);
        let mut reads = restored.reads;
        match restored.snapshot {
            None => reader.stream.start().map_err(&remote)?,
            Some(SnapshotAt { table, after, time }) => {
                reader.snapshot_time = time;
                // A temporary slot exports a snapshot at a later position:
                // the rows after `after`, and the tables after, are read
                // under it.
                let temporary = format!("{:.40}_r{}", slot, std::process::id());
                let mut exporter = Stream::connect(&client_config, &temporary, &publication, 0)
                    .map_err(&remote)?;
                let (lsn, name) =
                    create_slot(&mut exporter, &temporary, "TEMPORARY", "SNAPSHOT 'export'")
                        .map_err(&remote)?;
                let name = name.expect("an exported snapshot has a name");
                tracing::info!(
                    "source `{id}`: resuming the snapshot of {} after key {after:?}, under a snapshot at {}",
                    reader.tables[table].sql,
                    show_lsn(lsn)
                );
                reader.snapshot = Some(
                    SnapshotRead::begin(
                        &client_config,
                        &name,
                        &reader.tables,
                        table,
                        after.clone(),
                    )
                    .map_err(&remote)?,
                );
                drop(exporter);
                reads.push(ReadPoint { table, after, lsn });
                let rest = (table + 1..ports).map(|table| ReadPoint {
                    table,
                    after: None,
                    lsn,
                });
                reads.extend(rest);
            }
        }
        reader.resume_at(restored.lsn, &restored.skip, reads);
        Ok(reader)
    }

    /// Sets where the stream resumes, and the read points in force there.
    fn resume_at(&mut self, lsn: u64, skip: &[u64], reads: Vec<ReadPoint>) {
        self.pending = Pending::new(self.tables.len(), lsn, skip, reads.clone());
        self.reads = reads;
        self.read_to = lsn;
    }

    fn remote(&self, message: String) -> SourceError {
        SourceError::Remote {
            source_id: self.source_id.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// Reads up to `max` rows of the snapshot, of one table; starts the
    /// stream after the last.
    fn read_snapshot(&mut self, max: usize) -> Result<Batch, SourceError> {
        let snapshot = self.snapshot.as_mut().expect("reading the snapshot");
        let (table, rows) = snapshot.next_rows(max).map_err(|m| self.remote(m))?;
        failpoint::hit(Failpoint::CdcMidSnapshot);
        let mut batch = Batch::with_capacity(rows.len(), 0);
        if !rows.is_empty() {
            let mut builder = RecordBuilder::new(&self.tables[table], self.numeric);
            for row in &rows {
                let (key, value) = builder.row(row).map_err(|m| self.remote(m))?;
                batch.push_change(Change::Insert, Some(&key), &value, Some(self.snapshot_time));
            }
            self.port = table as u32;
            self.place = Some(format!(
                "rows of the snapshot of table {} at {}",
                self.tables[table].sql, self.server
            ));
        }
        if self.snapshot.as_ref().is_some_and(SnapshotRead::done) {
            self.snapshot = None;
            self.stream.start().map_err(|m| self.remote(m))?;
        }
        Ok(batch)
    }

    /// Whether a change of the row of table `table` with `key` in a
    /// transaction committing at `final_lsn` is in the rows read already.
    fn read_already(&self, table: usize, key: &[String], final_lsn: u64) -> Result<bool, String> {
        let mut applies = None;
        for point in self.reads.iter().filter(|p| p.table == table) {
            let after = match &point.after {
                None => true,
                Some(after) => {
                    let order = compare_keys(&self.tables[table].key_types, key, after)
                        .map_err(|e| e.to_string())?;
                    order == Some(std::cmp::Ordering::Greater)
                }
            };
            if after {
                applies = Some(point.lsn);
            }
        }
        Ok(applies.is_some_and(|lsn| final_lsn < lsn))
    }

    /// Reads stream events until `max` records are held or none comes for
    /// a while; returns the records of one port.
    fn read_stream(&mut self, max: usize) -> Result<Batch, SourceError> {
        let mut wait = Duration::from_millis(100);
        while self.pending.len() < max && self.pending.data_bytes() < MAX_BATCH_BYTES {
            let Some(event) = self.stream.next(wait).map_err(|m| self.remote(m))? else {
                break;
            };
            wait = Duration::from_millis(5);
            match event {
                Event::Begin {
                    final_lsn,
                    commit_time,
                } => {
                    self.txn = Some(Txn {
                        final_lsn,
                        time: pgoutput::unix_millis(commit_time),
                    });
                }
                Event::Data(data) => {
                    let message = pgoutput::decode(&data).map_err(|e| {
                        self.remote(format!("a replication message does not decode: {e}"))
                    })?;
                    self.apply(message).map_err(|m| self.remote(m))?;
                }
                Event::Commit { end_lsn } => {
                    if let Some(txn) = self.txn.take() {
                        self.reads.retain(|p| p.lsn > txn.final_lsn);
                    }
                    self.read_to = self.read_to.max(end_lsn);
                    self.pending.mark(end_lsn, &self.reads);
                }
                Event::Idle { wal_end } => {
                    if self.txn.is_none() {
                        self.reads.retain(|p| p.lsn > wal_end);
                        self.read_to = self.read_to.max(wal_end);
                        self.pending.mark(wal_end, &self.reads);
                    }
                }
                Event::Message {
                    lsn,
                    prefix,
                    content,
                } => {
                    let ours = prefix == END_MARKER && content == self.slot.as_bytes();
                    if ours && self.end.is_some_and(|end| lsn >= end) && self.txn.is_none() {
                        // Past the marker: a restore at `lsn` reads no more.
                        self.pending.mark(lsn + 1, &self.reads);
                        self.ended = true;
                        break;
                    }
                }
            }
        }
        Ok(self.take_pending().unwrap_or_default())
    }

    /// The held records of one port, if any.
    fn take_pending(&mut self) -> Option<Batch> {
        let (port, batch) = self.pending.take()?;
        self.port = port;
        self.place = Some(format!(
            "changes of table {} at {} up to {}",
            self.tables[port as usize].sql,
            self.server,
            show_lsn(self.read_to)
        ));
        Some(batch)
    }

    /// Holds the records of one message of the stream.
    fn apply(&mut self, message: Message) -> Result<(), String> {
        let relation_id = match &message {
            Message::Relation(r) => {
                let table =
                    (self.tables.iter()).position(|t| r.namespace == t.schema && r.name == t.name);
                self.relations.insert(r.id, (Arc::new(r.clone()), table));
                return Ok(());
            }
            Message::Insert { relation, .. }
            | Message::Update { relation, .. }
            | Message::Delete { relation, .. } => *relation,
            Message::Truncate { relations, .. } => {
                for relation in relations {
                    if let Some(table) = self.table_of(*relation) {
                        // Everything after a truncate is sent (see the module).
                        self.reads.retain(|p| p.table != table);
                        self.emit(table, Change::Truncate, None, b"{}", None)?;
                    }
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let Some(table) = self.table_of(relation_id) else {
            return Ok(());
        };
        let relation = self.relations[&relation_id].0.clone();
        let builder = RecordBuilder::new(&self.tables[table], self.numeric);
        match message {
            Message::Insert { new, .. } => {
                let Image { key, texts, value } = builder.tuple(&relation, &new, false)?;
                self.emit(table, Change::Insert, Some(&key), &value, Some(&texts))?;
            }
            Message::Update { old, new, .. } => {
                let Image { key, texts, value } = builder.tuple(&relation, &new, false)?;
                let old = match old {
                    Some(OldTuple::Key(t)) => Some((false, builder.tuple(&relation, &t, true)?)),
                    Some(OldTuple::Full(t)) => Some((true, builder.tuple(&relation, &t, false)?)),
                    None => None,
                };
                match old {
                    Some((_, old)) if old.texts != texts => {
                        let Image {
                            key: old_key,
                            texts: old_texts,
                            value: old_value,
                        } = old;
                        self.emit(
                            table,
                            Change::Delete,
                            Some(&old_key),
                            &old_value,
                            Some(&old_texts),
                        )?;
                        self.emit(table, Change::Insert, Some(&key), &value, Some(&texts))?;
                    }
                    old => {
                        if let Some((true, old)) = old {
                            self.emit(
                                table,
                                Change::UpdateBefore,
                                Some(&old.key),
                                &old.value,
                                Some(&old.texts),
                            )?;
                        }
                        self.emit(table, Change::UpdateAfter, Some(&key), &value, Some(&texts))?;
                    }
                }
            }
            Message::Delete { old, .. } => {
                let (key_only, old) = match old {
                    OldTuple::Key(t) => (true, t),
                    OldTuple::Full(t) => (false, t),
                };
                let Image { key, texts, value } = builder.tuple(&relation, &old, key_only)?;
                self.emit(table, Change::Delete, Some(&key), &value, Some(&texts))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The port of the table of relation `relation`, if the source reads it.
    fn table_of(&self, relation: u32) -> Option<usize> {
        self.relations.get(&relation).and_then(|(_, table)| *table)
    }

    /// Holds one record of the current transaction on port `table`, unless
    /// the rows read have it already.
    fn emit(
        &mut self,
        table: usize,
        change: Change,
        key: Option<&[u8]>,
        value: &[u8],
        key_texts: Option<&[String]>,
    ) -> Result<(), String> {
        let Some(txn) = &self.txn else {
            return Err("a change arrived outside a transaction".into());
        };
        if let Some(texts) = key_texts
            && self.read_already(table, texts, txn.final_lsn)?
        {
            return Ok(());
        }
        self.pending.push(table, change, key, value, txn.time);
        Ok(())
    }
}

/// Makes slot `slot` (`kind`: `""` or `"TEMPORARY"`) on a gated session,
/// with `snapshot` (`SNAPSHOT 'export'` or `'nothing'`); returns its
/// consistent position and the exported snapshot's name.
fn create_slot(
    stream: &mut Stream,
    slot: &str,
    kind: &str,
    snapshot: &str,
) -> Result<(u64, Option<String>), String> {
    let rows = stream
        .query(&format!(
            "CREATE_REPLICATION_SLOT {slot} {kind} LOGICAL pgoutput ({snapshot})"
        ))
        .map_err(|e| format!("cannot create replication slot {slot}: {e}"))?;
    let row = rows
        .first()
        .ok_or_else(|| format!("creating replication slot {slot} returned no row"))?;
    let lsn = row
        .get(1)
        .cloned()
        .flatten()
        .ok_or_else(|| format!("creating replication slot {slot} returned no position"))?;
    Ok((parse_lsn(&lsn)?, row.get(2).cloned().flatten()))
}

impl SourceReader for CdcReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let max = max.max(1);
        if let Some(batch) = self.take_pending() {
            return Ok(Some(batch));
        }
        if self.ended {
            return Ok(None);
        }
        let batch = match self.snapshot {
            Some(_) => self.read_snapshot(max)?,
            None => self.read_stream(max)?,
        };
        Ok(Some(batch))
    }

    fn offset(&self) -> Value {
        let snapshot = self.snapshot.as_ref().map(|s| {
            let (table, after) = s.at();
            SnapshotAt {
                table,
                after: after.cloned(),
                time: self.snapshot_time,
            }
        });
        Offset {
            tables: Some(self.tables.iter().map(|t| t.sql.clone()).collect()),
            lsn: self.pending.lsn(),
            skip: self.pending.skip(),
            snapshot,
            reads: self.pending.reads().to_vec(),
            end: self.end,
        }
        .to_json()
    }

    fn place(&self) -> Option<String> {
        self.place.clone()
    }

    fn output_port(&self) -> u32 {
        self.port
    }

    fn release(&mut self, offset: &Value) {
        if offset["snapshot"].is_null()
            && let Some(lsn) = offset["lsn"].as_str().and_then(|l| parse_lsn(l).ok())
        {
            self.stream.confirm(lsn);
            failpoint::hit(Failpoint::CdcAfterConfirm);
        }
    }
}
