//! A changed byte in any row the store reads back is damage naming what
//! and where, never a value read differently: snapshots, timers, in-flight
//! data and checkpoint metadata (segments: `corrupted_segments_are_errors`).
//! A format-2 store, without checksums, still reads and writes.

use super::*;

/// Flips each bit of one byte at a time in row `key` of `table`, runs
/// `read` on each damaged copy, and puts the row back.
fn flip_every_bit<K: redb::Key + 'static>(
    s: &CheckpointStore,
    table: redb::TableDefinition<K, &'static [u8]>,
    key: K::SelfType<'_>,
    read: impl Fn(&CheckpointStore) -> Result<(), StoreError>,
    what: &str,
) where
    for<'k> K::SelfType<'k>: Clone,
{
    let good = {
        let txn = s.read().unwrap();
        let t = txn.open_table(table).unwrap();
        t.get(key.clone()).unwrap().unwrap().value().to_vec()
    };
    for at in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[at] ^= 1 << bit;
            tamper(s, |txn| {
                let mut t = txn.open_table(table).unwrap();
                t.insert(key.clone(), bad.as_slice()).unwrap();
            });
            let e = read(s).expect_err("a changed bit must not read back");
            let message = e.to_string();
            assert!(matches!(e, StoreError::Corrupt { .. }), "{message}");
            assert!(message.contains(what), "{message} lacks {what:?}");
            assert!(message.contains("checksum"), "{message}");
            assert!(message.contains("--restore"), "{message}");
        }
    }
    tamper(s, |txn| {
        let mut t = txn.open_table(table).unwrap();
        t.insert(key.clone(), good.as_slice()).unwrap();
    });
    read(s).expect("the original row reads again");
}

#[test]
fn a_changed_bit_in_a_snapshot_timers_or_inflight_data_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let mut d = delta("a", 0, "k=1", Some("snap"));
    d.timers = vec![(b"t1".to_vec(), Some(b"due".to_vec()))];
    d.inflight = Some(inflight(0, &["x"]));
    s.commit(&meta(1), &[d], 3).unwrap();
    let load = |s: &CheckpointStore| s.load_instance(1, "a", 0).map(drop);
    flip_every_bit(
        &s,
        SNAPSHOTS,
        ("a", 0, 1),
        load,
        "the snapshot of instance 0 of operator `a` written by checkpoint 1",
    );
    flip_every_bit(
        &s,
        CHUNKS,
        (timer_space("a").as_str(), 0, 1, 0),
        load,
        "instance 0 of operator `a#timers` written by checkpoint 1",
    );
    flip_every_bit(
        &s,
        super::layout::INFLIGHT,
        ("a", 0, 1),
        load,
        "the in-flight data of instance 0 of operator `a` in checkpoint 1",
    );
    let loaded = s.load_instance(1, "a", 0).unwrap();
    assert_eq!(loaded.snapshot, b"snap");
    assert_eq!(loaded.timers, [(b"t1".to_vec(), b"due".to_vec())]);
    assert_eq!(loaded.inflight.len(), 1);
}

#[test]
fn a_changed_bit_in_checkpoint_metadata_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(1), &[delta("a", 0, "k=1", None)], 3)
        .unwrap();
    let get = |s: &CheckpointStore| s.get(1).map(drop);
    flip_every_bit(&s, CHECKPOINTS, 1, get, "metadata of checkpoint 1");
    assert_eq!(s.get(1).unwrap().unwrap().sources, meta(1).sources);
}

#[test]
fn a_format_2_store_without_checksums_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = CheckpointStore::open(dir.path(), "job").unwrap();
        // What Weir before format 3 wrote: the same rows, unsealed.
        s.sealed = false;
        tamper(&s, |txn| {
            let mut m = txn.open_table(META).unwrap();
            m.insert("format", b"2".as_slice()).unwrap();
        });
        s.commit(&meta(1), &[delta("a", 0, "k=1", Some("snap"))], 3)
            .unwrap();
    }
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert!(!s.sealed, "a format-2 store stays format 2");
    s.commit(&meta(2), &[delta("a", 0, "j=2", None)], 3)
        .unwrap();
    let loaded = s.load_instance(2, "a", 0).unwrap();
    assert_eq!(show(&loaded), "j=2 k=1");
    assert_eq!(loaded.snapshot, b"snap");
    let inspected = CheckpointStore::open_existing(dir.path()).unwrap();
    assert_eq!(inspected.get(2).unwrap().unwrap().id, 2);
}
