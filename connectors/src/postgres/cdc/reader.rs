//! The source reader: the snapshot's rows, then the stream's changes, and
//! the offset that makes both exactly-once.
//!
//! The offset (`{"lsn", "skip", "snapshot", "reads", "end"}`):
//! - `lsn`: where the stream resumes, the end of the last transaction
//!   whose changes were all returned (or a position the server said it
//!   had sent everything before, between transactions); `skip`: how many
//!   records of the next transaction were returned already. The server
//!   sends a slot's transactions in commit order, each whole, so a stream
//!   restarted at `lsn` yields the same records again, the first `skip`
//!   of which are dropped.
//! - `snapshot`: while the table is read, the key of the last row
//!   returned and the snapshot's time; `null` after.
//! - `reads`: where the table's rows were read under which snapshot. A
//!   fresh start reads all of them under the snapshot the slot exported at
//!   its creation, at the slot's position: the stream then brings exactly
//!   the transactions the snapshot lacks. A restore in the middle of the
//!   snapshot cannot have that snapshot again; it reads the rows after the
//!   last key returned under a new snapshot, exported by a temporary slot
//!   at a later position *L*, and remembers `{after, lsn: L}`. The stream
//!   then drops a change of a row after that key in a transaction
//!   committed before *L* (the row as read has it already). A read point
//!   is forgotten once the stream passed it. A truncate committed before
//!   *L* is sent all the same and ends the dropping: the table is empty
//!   then, and every change after it is sent.
//! - `end`: of a bounded source, the position of the logical message it
//!   emitted at the job's first start; the source ends when the stream
//!   brings it (a restore past it ends at once).
//! - The slot's confirmed position moves only in [`SourceReader::release`],
//!   to the `lsn` of the oldest checkpoint a restore may still pick: the
//!   server keeps every change a restore can ask for, and none in the
//!   snapshot, whose position is the slot's until the snapshot is read.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::CdcConfig;
use super::key_order::compare_keys;
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

/// Rows of the table after key `after` (all: `None`) were read under a
/// snapshot at stream position `lsn`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadPoint {
    after: Option<Vec<String>>,
    lsn: u64,
}

/// The transaction being streamed.
#[derive(Debug)]
struct Txn {
    /// Where it commits.
    final_lsn: u64,
    /// Its commit time, milliseconds since the Unix epoch.
    time: i64,
    /// Its records returned so far (those of a restored `skip` included).
    returned: u64,
}

/// The `postgres-cdc` source's reader.
pub(super) struct CdcReader {
    source_id: String,
    /// `table T at host:port/db`, for messages.
    target: String,
    table: SourceTable,
    numeric: NumericAs,
    stream: Stream,
    /// The snapshot being read; `None` once the stream runs.
    snapshot: Option<SnapshotRead>,
    /// The time of the snapshot's rows.
    snapshot_time: i64,
    reads: Vec<ReadPoint>,
    relations: HashMap<u32, Relation>,
    lsn: u64,
    txn: Option<Txn>,
    /// Records of the first transaction a restore drops (returned before).
    to_skip: u64,
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
        let target = format!("table {} at {}", config.table, config.server);
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
        let table = SourceTable::load(&mut client, &config.table, &config.key).map_err(&remote)?;
        let (publication, own) = config.publication_name(id);
        setup::ensure_publication(&mut client, &publication, own, &table).map_err(&remote)?;
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
        let restored = offset
            .map(Restored::read)
            .transpose()
            .map_err(&bad_offset)?;
        let start = restored.as_ref().map_or(0, |r| r.lsn);
        let mut reader = CdcReader {
            source_id: id.to_owned(),
            target: target.clone(),
            table,
            numeric: config.numeric,
            stream: Stream::connect(&client_config, &slot, &publication, start).map_err(&remote)?,
            snapshot: None,
            snapshot_time: now_millis(),
            reads: Vec::new(),
            relations: HashMap::new(),
            lsn: 0,
            txn: None,
            to_skip: 0,
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
                    reader.lsn = state.confirmed;
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
            reader.lsn = lsn;
            if config.bounded {
                reader.end = Some(mark_end(&mut client, &slot).map_err(&remote)?);
            }
            match name {
                Some(name) if config.snapshot => {
                    reader.snapshot = Some(
                        SnapshotRead::begin(&client_config, &name, &reader.table, None)
                            .map_err(&remote)?,
                    );
                    reader.reads.push(ReadPoint { after: None, lsn });
                }
                _ => reader.stream.start().map_err(&remote)?,
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
        reader.lsn = restored.lsn;
        reader.to_skip = restored.skip;
        reader.reads = restored.reads;
        reader.end = restored.end;
        reader.ended = restored.end.is_some_and(|end| restored.lsn > end);
        match restored.snapshot {
            None => reader.stream.start().map_err(&remote)?,
            Some((after, time)) => {
                reader.snapshot_time = time;
                // A temporary slot exports a snapshot at a later position:
                // the rows after `after` are read under it.
                let temporary = format!("{:.40}_r{}", slot, std::process::id());
                let mut exporter = Stream::connect(&client_config, &temporary, &publication, 0)
                    .map_err(&remote)?;
                let (lsn, name) =
                    create_slot(&mut exporter, &temporary, "TEMPORARY", "SNAPSHOT 'export'")
                        .map_err(&remote)?;
                let name = name.expect("an exported snapshot has a name");
                tracing::info!(
                    "source `{id}`: resuming the snapshot of {} after key {after:?}, under a snapshot at {}",
                    reader.table.sql,
                    show_lsn(lsn)
                );
                reader.snapshot = Some(
                    SnapshotRead::begin(&client_config, &name, &reader.table, after.clone())
                        .map_err(&remote)?,
                );
                drop(exporter);
                reader.reads.push(ReadPoint { after, lsn });
            }
        }
        Ok(reader)
    }

    fn remote(&self, message: String) -> SourceError {
        SourceError::Remote {
            source_id: self.source_id.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// The key texts of a row of the table's columns.
    fn key_texts(table: &SourceTable, row: &[Option<String>]) -> Vec<String> {
        (table.key.iter())
            .map(|&c| row[c].clone().unwrap_or_default())
            .collect()
    }

    /// Reads up to `max` rows of the snapshot; starts the stream after the
    /// last.
    fn read_snapshot(&mut self, max: usize) -> Result<Batch, SourceError> {
        let snapshot = self.snapshot.as_mut().expect("reading the snapshot");
        let table = &self.table;
        let rows = snapshot
            .next_rows(max, |row| Self::key_texts(table, row))
            .map_err(|m| self.remote(m))?;
        failpoint::hit(Failpoint::CdcMidSnapshot);
        let mut batch = Batch::with_capacity(rows.len(), 0);
        let mut builder = RecordBuilder::new(&self.table, self.numeric);
        for row in &rows {
            let (key, value) = builder.row(row).map_err(|m| self.remote(m))?;
            batch.push_change(Change::Insert, Some(&key), &value, Some(self.snapshot_time));
        }
        self.place = Some(format!("rows of the snapshot of {}", self.target));
        if self.snapshot.as_ref().is_some_and(SnapshotRead::done) {
            self.snapshot = None;
            self.stream.start().map_err(|m| self.remote(m))?;
        }
        Ok(batch)
    }

    /// Whether a change of the row with `key` in a transaction committing
    /// at `final_lsn` is in the rows read already.
    fn read_already(&self, key: &[String], final_lsn: u64) -> Result<bool, String> {
        let mut applies = None;
        for point in &self.reads {
            let after = match &point.after {
                None => true,
                Some(after) => {
                    let order = compare_keys(&self.table.key_types, key, after)
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

    /// Reads stream events into `batch` until it holds `max` records or
    /// none comes for a while.
    fn read_stream(&mut self, max: usize) -> Result<Batch, SourceError> {
        let mut batch = Batch::new();
        let mut wait = Duration::from_millis(100);
        while batch.len() < max && batch.data_bytes() < MAX_BATCH_BYTES {
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
                        returned: 0,
                    });
                }
                Event::Data(data) => {
                    let message = pgoutput::decode(&data).map_err(|e| {
                        self.remote(format!("a replication message does not decode: {e}"))
                    })?;
                    self.apply(message, &mut batch)
                        .map_err(|m| self.remote(m))?;
                }
                Event::Commit { end_lsn } => {
                    let txn = self.txn.take();
                    self.lsn = self.lsn.max(end_lsn);
                    self.to_skip = 0;
                    if let Some(txn) = txn {
                        self.reads.retain(|p| p.lsn > txn.final_lsn);
                    }
                }
                Event::Idle { wal_end } => {
                    if self.txn.is_none() && wal_end > self.lsn {
                        self.lsn = wal_end;
                        self.reads.retain(|p| p.lsn > wal_end);
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
                        self.lsn = self.lsn.max(lsn + 1);
                        self.ended = true;
                        break;
                    }
                }
            }
        }
        if !batch.is_empty() {
            self.place = Some(format!(
                "changes of {} up to {}",
                self.target,
                show_lsn(self.lsn)
            ));
        }
        Ok(batch)
    }

    /// Adds the records of one message of the stream to `batch`.
    fn apply(&mut self, message: Message, batch: &mut Batch) -> Result<(), String> {
        let relation_id = match &message {
            Message::Relation(r) => {
                self.relations.insert(r.id, r.clone());
                return Ok(());
            }
            Message::Insert { relation, .. }
            | Message::Update { relation, .. }
            | Message::Delete { relation, .. } => *relation,
            Message::Truncate { relations, .. } => {
                let ours = relations.iter().any(|r| self.is_ours(*r));
                if ours {
                    // Everything after a truncate is sent (see the module).
                    self.reads.clear();
                    self.emit(Change::Truncate, None, b"{}", batch, None)?;
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        if !self.is_ours(relation_id) {
            return Ok(());
        }
        let relation = self.relations[&relation_id].clone();
        let builder = RecordBuilder::new(&self.table, self.numeric);
        match message {
            Message::Insert { new, .. } => {
                let Image { key, texts, value } = builder.tuple(&relation, &new, false)?;
                self.emit(Change::Insert, Some(&key), &value, batch, Some(&texts))?;
            }
            Message::Update { old, new, .. } => {
                let Image { key, texts, value } = builder.tuple(&relation, &new, false)?;
                match old {
                    Some(old) => {
                        let (is_full, old) = match old {
                            OldTuple::Key(t) => (false, t),
                            OldTuple::Full(t) => (true, t),
                        };
                        let key_only = !is_full;
                        let Image {
                            key: old_key,
                            texts: old_texts,
                            value: old_value,
                        } = builder.tuple(&relation, &old, key_only)?;
                        if old_texts != texts {
                            self.emit(
                                Change::Delete,
                                Some(&old_key),
                                &old_value,
                                batch,
                                Some(&old_texts),
                            )?;
                            self.emit(Change::Insert, Some(&key), &value, batch, Some(&texts))?;
                        } else {
                            if is_full {
                                self.emit(
                                    Change::UpdateBefore,
                                    Some(&old_key),
                                    &old_value,
                                    batch,
                                    Some(&old_texts),
                                )?;
                            }
                            self.emit(
                                Change::UpdateAfter,
                                Some(&key),
                                &value,
                                batch,
                                Some(&texts),
                            )?;
                        }
                    }
                    None => {
                        self.emit(Change::UpdateAfter, Some(&key), &value, batch, Some(&texts))?
                    }
                }
            }
            Message::Delete { old, .. } => {
                let (key_only, old) = match old {
                    OldTuple::Key(t) => (true, t),
                    OldTuple::Full(t) => (false, t),
                };
                let Image { key, texts, value } = builder.tuple(&relation, &old, key_only)?;
                self.emit(Change::Delete, Some(&key), &value, batch, Some(&texts))?;
            }
            _ => {}
        }
        Ok(())
    }

    fn is_ours(&self, relation: u32) -> bool {
        self.relations
            .get(&relation)
            .is_some_and(|r| r.namespace == self.table.schema && r.name == self.table.name)
    }

    /// Adds one record of the current transaction, unless the rows read
    /// have it already or a restore drops it.
    fn emit(
        &mut self,
        change: Change,
        key: Option<&[u8]>,
        value: &[u8],
        batch: &mut Batch,
        key_texts: Option<&[String]>,
    ) -> Result<(), String> {
        let Some(txn) = &self.txn else {
            return Err("a change arrived outside a transaction".into());
        };
        let final_lsn = txn.final_lsn;
        if let Some(texts) = key_texts
            && self.read_already(texts, final_lsn)?
        {
            return Ok(());
        }
        let txn = self.txn.as_mut().expect("checked above");
        txn.returned += 1;
        if self.to_skip > 0 {
            self.to_skip -= 1;
            return Ok(());
        }
        batch.push_change(change, key, value, Some(txn.time));
        Ok(())
    }
}

/// A checkpointed offset, read.
struct Restored {
    lsn: u64,
    skip: u64,
    /// The key after which the snapshot goes on, and its time.
    snapshot: Option<(Option<Vec<String>>, i64)>,
    reads: Vec<ReadPoint>,
    end: Option<u64>,
}

impl Restored {
    fn read(offset: &Value) -> Result<Restored, String> {
        let bad = || "not an offset of a postgres-cdc source".to_owned();
        let lsn = parse_lsn(offset["lsn"].as_str().ok_or_else(bad)?)?;
        let skip = offset["skip"].as_u64().ok_or_else(bad)?;
        let keys = |v: &Value| -> Result<Option<Vec<String>>, String> {
            match v {
                Value::Null => Ok(None),
                v => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|_| bad()),
            }
        };
        let snapshot = match &offset["snapshot"] {
            Value::Null => None,
            s => Some((keys(&s["after"])?, s["time"].as_i64().ok_or_else(bad)?)),
        };
        let reads = (offset["reads"].as_array().ok_or_else(bad)?.iter())
            .map(|p| {
                Ok(ReadPoint {
                    after: keys(&p["after"])?,
                    lsn: parse_lsn(p["lsn"].as_str().ok_or_else(bad)?)?,
                })
            })
            .collect::<Result<_, String>>()?;
        let end = match &offset["end"] {
            Value::Null => None,
            end => Some(parse_lsn(end.as_str().ok_or_else(bad)?)?),
        };
        Ok(Restored {
            end,
            lsn,
            skip,
            snapshot,
            reads,
        })
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
        let snapshot = self
            .snapshot
            .as_ref()
            .map(|s| json!({"after": s.after(), "time": self.snapshot_time}));
        let reads: Vec<Value> = (self.reads.iter())
            .map(|p| json!({"after": p.after, "lsn": show_lsn(p.lsn)}))
            .collect();
        json!({
            "lsn": show_lsn(self.lsn),
            "skip": self.txn.as_ref().map_or(0, |t| t.returned),
            "snapshot": snapshot,
            "reads": reads,
            "end": self.end.map(show_lsn),
        })
    }

    fn place(&self) -> Option<String> {
        self.place.clone()
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
