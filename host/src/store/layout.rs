//! The on-disk layout of a checkpoint store (`docs/checkpoints.md`): the
//! file name, the layout version and the redb tables with their keys.
//! Changing any of them changes the format: bump [`FORMAT_VERSION`].

use redb::TableDefinition;

/// Name of the store file inside the state directory.
pub const FILE_NAME: &str = "checkpoints.redb";
/// Version of the table layout this Weir writes, stored under `format` in
/// the `meta` table. Format 3 is format 2 with a checksum at the end of
/// every value but the `meta` and `gc` tables' (`seal.rs`).
pub const FORMAT_VERSION: u32 = 3;
/// The first format whose values carry checksums.
pub(super) const SEALED_FROM: u32 = 3;
/// The formats this Weir reads and writes: a format-2 store stays format 2.
pub(super) const READS: [u32; 2] = [2, 3];

pub(super) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// The `meta` key of the least id a new checkpoint may have (ASCII
/// decimal), set when newer checkpoints are dropped; absent: the newest
/// checkpoint's id + 1.
pub(super) const NEXT_ID: &str = "next_id";
pub(super) const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoints");
/// (operator, instance, version) -> segment header.
pub(super) const SEGMENTS: TableDefinition<(&str, u32, u64), &[u8]> =
    TableDefinition::new("segments");
/// (operator, instance, version, chunk) -> encoded entries.
pub(super) const CHUNKS: TableDefinition<(&str, u32, u64, u32), &[u8]> =
    TableDefinition::new("chunks");
/// (operator, instance, version) -> snapshot bytes.
pub(super) const SNAPSHOTS: TableDefinition<(&str, u32, u64), &[u8]> =
    TableDefinition::new("snapshots");
/// (version, operator, instance): the instance wrote a full segment or a
/// snapshot at `version` that hides older ones; collected once `version` is
/// no newer than the oldest retained checkpoint.
pub(super) const GC: TableDefinition<(u64, &str, u32), ()> = TableDefinition::new("gc");
/// (operator, instance, version) -> the instance's in-flight data of the
/// unaligned checkpoint `version` (`dataflow/inflight.rs` encoding). Added
/// within format 2: a store written before it lacks the table, which then
/// reads as empty (and is created when the store is opened read-write).
pub(super) const INFLIGHT: TableDefinition<(&str, u32, u64), &[u8]> =
    TableDefinition::new("inflight");
/// (operator, instance, version) -> the instance's recorded input of the
/// epoch that ends at checkpoint `version` (`dataflow/recording.rs`
/// encoding), for operators that record (`record_inputs`). Added within
/// format 3: a store written before it lacks the table, which then reads
/// as empty (and is created when the store is opened read-write).
pub(super) const RECORDINGS: TableDefinition<(&str, u32, u64), &[u8]> =
    TableDefinition::new("recordings");
/// (operator, version) -> the index row of the operator's recordings of
/// checkpoint `version`: their bytes, the checkpoint's start time and the
/// instances (`store/recording.rs`). Added with `recordings`.
pub(super) const RECORDED: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("recorded");
/// The tables every format-2 store has (`inflight` may be missing).
pub(super) const TABLES: [&str; 6] = [
    "meta",
    "checkpoints",
    "segments",
    "chunks",
    "snapshots",
    "gc",
];
