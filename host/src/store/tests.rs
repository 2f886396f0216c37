use super::layout::META;
use super::segment::{Header, Kind};
use super::tuning::{TUNING, Tuning};
use super::*;
use crate::keyed::changes::StateChanges;
use redb::{
    Database, Key, ReadableDatabase, ReadableTableMetadata, TableDefinition, TableHandle, Value,
};

type Model = BTreeMap<(String, u32), RestoredInstance>;

/// Checkpoint `id` of job `job` with operators `a` and `b` at parallelism
/// 2 (also the base of `rescale`'s tests).
pub(crate) fn meta(id: u64) -> CheckpointMeta {
    let op = |parallelism| OperatorMeta {
        plugin_name: "p".into(),
        plugin_version: "1".into(),
        state_version: 1,
        sha256: "00".into(),
        plugin_path: None,
        parallelism,
        swapped: None,
        recording: None,
        config_sha256: None,
    };
    CheckpointMeta {
        started_at_ms: 1_700_000_000_000 + id,
        duration_ms: 5,
        alignment_ms: 1,
        pause_ms: Some(2),
        sources: [("src".into(), serde_json::json!({"offset": id, "f": 0.1}))].into(),
        operators: [("a".into(), op(2)), ("b".into(), op(2))].into(),
        ..CheckpointMeta::new(id, "job")
    }
}

/// `delta("a", 0, "x=1 -y", Some("s"))`: put x=1, delete y, snapshot "s".
pub(crate) fn delta(op: &str, instance: u32, changes: &str, snap: Option<&str>) -> InstanceDelta {
    let b = |s: &str| s.as_bytes().to_vec();
    let changes = changes
        .split_whitespace()
        .map(|c| match c.strip_prefix('-') {
            Some(key) => (b(key), None),
            None => c.split_once('=').map(|(k, v)| (b(k), Some(b(v)))).unwrap(),
        });
    let (operator, changes, snapshot) = (op.into(), changes.collect(), snap.map(b));
    InstanceDelta {
        operator,
        instance,
        changes,
        snapshot,
        timers: Vec::new(),
        inflight: None,
        recorded: None,
    }
}

/// `"x=1 y=2"` for the entries of an instance.
fn show(r: &RestoredInstance) -> String {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let e: Vec<_> = r
        .entries
        .iter()
        .map(|(k, v)| format!("{}={}", s(k), s(v)))
        .collect();
    e.join(" ")
}

fn rows<K: Key + 'static, V: Value + 'static>(
    s: &CheckpointStore,
    t: TableDefinition<K, V>,
) -> u64 {
    s.read().unwrap().open_table(t).unwrap().len().unwrap()
}

/// Every segment: (operator, instance, version, header), in key order.
fn segments(s: &CheckpointStore) -> Vec<(String, u32, u64, Header)> {
    let txn = s.read().unwrap();
    let table = txn.open_table(SEGMENTS).unwrap();
    let rows = table.iter().unwrap().map(|row| {
        let (k, v) = row.unwrap();
        let (op, inst, version) = k.value();
        (
            op.to_string(),
            inst,
            version,
            Header::decode(s.unseal(v.value()).unwrap()).unwrap(),
        )
    });
    rows.collect()
}

/// `"F1 D2 D3"`: the kinds and versions of one instance's segments.
fn kinds(s: &CheckpointStore, op: &str, inst: u32) -> String {
    let all = segments(s).into_iter().filter(|x| x.0 == op && x.1 == inst);
    let all: Vec<_> = all
        .map(|(_, _, v, h)| match h.kind {
            Kind::Full => format!("F{v}"),
            Kind::Delta => format!("D{v}"),
        })
        .collect();
    all.join(" ")
}

/// Tiny chunks; compaction after two deltas, whatever their size.
const EVERY_THIRD: Tuning = Tuning {
    chunk_bytes: 16,
    max_deltas: 2,
    max_delta_percent: u64::MAX,
};

/// Never compacts: every segment after an instance's first is a delta.
const NEVER: Tuning = Tuning {
    chunk_bytes: 40,
    max_deltas: usize::MAX,
    max_delta_percent: u64::MAX,
};

#[test]
fn incremental_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert_eq!(
        (s.job().unwrap(), s.latest().unwrap()),
        ("job".into(), None)
    );
    let d1 = [
        delta("a", 0, "x=1 y=2 z=3", Some("snap1")),
        delta("a", 1, "x=other", None),
    ];
    assert_eq!(s.commit(&meta(1), &d1, 3).unwrap().bytes_written, 6 + 5 + 6);
    // A later change wins; deleting a missing key writes nothing; no snapshot keeps snap1.
    let d2 = [
        delta("a", 0, "y=20 -z -w y=22", None),
        delta("a", 1, "", Some("")),
    ];
    assert_eq!(s.commit(&meta(3), &d2, 3).unwrap().bytes_written, 3 + 1 + 3);
    let r1 = s.load_instance(1, "a", 0).unwrap();
    assert_eq!(
        (show(&r1).as_str(), &r1.snapshot[..]),
        ("x=1 y=2 z=3", &b"snap1"[..])
    );
    let r3 = s.load_instance(3, "a", 0).unwrap();
    assert_eq!(
        (show(&r3).as_str(), &r3.snapshot[..]),
        ("x=1 y=22", &b"snap1"[..])
    );
    assert_eq!(
        s.load_instance(3, "b", 1).unwrap(),
        RestoredInstance::default()
    );
    let all = s.operator_state(3, "a").unwrap();
    let keys: Vec<_> = all.iter().map(|(i, k, _)| (*i, k.as_slice())).collect();
    assert_eq!(keys, [(0, &b"x"[..]), (1, b"x"), (0, b"y")]);
    let list: Vec<_> = s
        .list()
        .unwrap()
        .iter()
        .map(|m| (m.id, m.state_keys))
        .collect();
    assert_eq!(list, [(1, 4), (3, 3)]);
    assert_eq!(s.latest().unwrap().unwrap().sources, meta(3).sources);
    assert!(s.get(2).unwrap().is_none());
    let e = s.load_instance(2, "a", 0).unwrap_err();
    assert!(
        matches!(e, StoreError::UnknownCheckpoint { id: 2, .. }),
        "{e}"
    );
    drop(s);
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert_eq!(s.latest().unwrap().unwrap().id, 3);
    assert_eq!(show(&s.load_instance(3, "a", 1).unwrap()), "x=other");
    assert!(s.file_size().unwrap() > 0);
}

#[test]
fn commit_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(5), &[], 2).unwrap();
    let refused = |m: &CheckpointMeta, d: &[InstanceDelta], retain| {
        matches!(s.commit(m, d, retain), Err(StoreError::Invalid { .. }))
    };
    assert!(refused(&meta(5), &[], 2) && refused(&meta(4), &[], 2));
    assert!(refused(&meta(6), &[], 0));
    assert!(refused(&meta(6), &[delta("c", 0, "", None)], 2));
    assert!(refused(&meta(6), &[delta("a", 2, "", None)], 2));
    assert!(refused(
        &CheckpointMeta {
            job: "other".into(),
            ..meta(6)
        },
        &[],
        2
    ));
    assert_eq!(s.list().unwrap().len(), 1);
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The layout invariants after a commit whose oldest retained checkpoint is
/// `horizon`: per instance, the oldest segment is full and it is the only
/// full one <= horizon (older ones were collected); no delta chain is longer
/// than the tuning allows; every chunk belongs to a segment; the journal
/// holds only versions newer than the horizon.
fn check_layout(s: &CheckpointStore, horizon: u64) {
    let all = segments(s);
    let mut by_instance: BTreeMap<(String, u32), Vec<(u64, Header)>> = BTreeMap::new();
    for (op, inst, v, h) in &all {
        by_instance
            .entry((op.clone(), *inst))
            .or_default()
            .push((*v, *h));
    }
    for (instance, segs) in &by_instance {
        assert_eq!(segs[0].1.kind, Kind::Full, "{instance:?}: {segs:?}");
        let full_at_or_before = segs
            .iter()
            .filter(|(v, h)| *v <= horizon && h.kind == Kind::Full)
            .count();
        assert!(
            full_at_or_before <= 1,
            "{instance:?} at {horizon}: {segs:?}"
        );
        let mut run = 0;
        for (_, h) in segs {
            run = if h.kind == Kind::Full { 0 } else { run + 1 };
            assert!(run <= s.tuning.max_deltas, "{instance:?}: {segs:?}");
        }
    }
    let chunks: u64 = all.iter().map(|x| u64::from(x.3.chunks)).sum();
    assert_eq!(rows(s, CHUNKS), chunks);
    let txn = s.read().unwrap();
    let gc = txn.open_table(GC).unwrap();
    for row in gc.iter().unwrap() {
        assert!(row.unwrap().0.value().0 > horizon);
    }
}

/// Random changes, snapshots, id gaps, truncations and reopens, checked
/// after every commit against an in-memory model of every checkpoint.
/// Returns how many commits compacted a chain.
fn model_run(mut rng: u64, retain: usize, rounds: usize, tuning: Tuning) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        CheckpointStore::open(dir.path(), "job")
            .unwrap()
            .with_tuning(tuning)
    };
    let mut s = open();
    let instances = [("a", 0), ("a", 1), ("b", 0), ("b", 1)].map(|(o, i)| (o.to_string(), i));
    let mut current: Model = instances
        .iter()
        .map(|i| (i.clone(), Default::default()))
        .collect();
    let mut history: BTreeMap<u64, Model> = BTreeMap::new();
    let (mut id, mut compactions) = (0, 0);
    for _ in 0..rounds {
        let r = &mut rng;
        id += 1 + u64::from(xorshift(r).is_multiple_of(4));
        let mut deltas = Vec::new();
        for ((op, inst), model) in current.iter_mut() {
            if xorshift(r).is_multiple_of(5) {
                continue;
            }
            let mut state: BTreeMap<_, _> = model.entries.drain(..).collect();
            let mut changes = StateChanges::default();
            for _ in 0..xorshift(r) % 12 {
                let key = format!("k{}", xorshift(r) % 50).into_bytes();
                let value = match xorshift(r) % 10 {
                    0..=2 => None,
                    3 => Some(vec![]),
                    _ => Some(format!("v{id}.{}", xorshift(r) % 1000).into_bytes()),
                };
                match &value {
                    Some(v) => state.insert(key.clone(), v.clone()),
                    None => state.remove(&key),
                };
                changes.push(&key, value.as_deref());
            }
            model.entries = state.into_iter().collect();
            let snapshot = xorshift(r)
                .is_multiple_of(3)
                .then(|| format!("s{id}").into_bytes());
            model.snapshot = snapshot
                .clone()
                .unwrap_or(std::mem::take(&mut model.snapshot));
            deltas.push(InstanceDelta {
                changes,
                snapshot,
                ..delta(op, *inst, "", None)
            });
        }
        let had_state: BTreeSet<_> = segments(&s).into_iter().map(|x| (x.0, x.1)).collect();
        s.commit(&meta(id), &deltas, retain).unwrap();
        let written = segments(&s).into_iter().filter(|x| x.2 == id);
        compactions += written
            .filter(|(op, inst, _, h)| {
                h.kind == Kind::Full && had_state.contains(&(op.clone(), *inst))
            })
            .count();
        history.insert(id, current.clone());
        while history.len() > retain {
            let (gone, _) = history.pop_first().unwrap();
            assert!(s.get(gone).unwrap().is_none());
            assert!(s.load_instance(gone, "a", 0).is_err());
        }
        check_layout(&s, *history.keys().next().unwrap());
        if xorshift(r).is_multiple_of(8) {
            let to = *history
                .keys()
                .nth(xorshift(r) as usize % history.len())
                .unwrap();
            s.truncate_after(to).unwrap();
            history.retain(|k, _| *k <= to);
            current = history[&to].clone();
            assert!(segments(&s).iter().all(|x| x.2 <= to));
        }
        if xorshift(r).is_multiple_of(6) {
            drop(s);
            s = open();
        }
        let listed: Vec<u64> = s.list().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(listed, history.keys().copied().collect::<Vec<_>>());
        for (cp, model) in &history {
            for ((op, inst), want) in model {
                let got = s.load_instance(*cp, op, *inst).unwrap();
                assert_eq!(&got, want, "checkpoint {cp} {op}/{inst}");
            }
            let live = model.values().map(|m| m.entries.len() as u64).sum::<u64>();
            assert_eq!(s.get(*cp).unwrap().unwrap().state_keys, live);
            let a = s.operator_state(*cp, "a").unwrap();
            let want = (0..2)
                .map(|i| model[&("a".into(), i)].entries.len())
                .sum::<usize>();
            assert_eq!(a.len(), want);
            assert!(a.windows(2).all(|w| (&w[0].1, w[0].0) < (&w[1].1, w[1].0)));
        }
        assert!(rows(&s, SNAPSHOTS) <= (instances.len() * retain) as u64);
    }
    compactions
}

#[test]
fn model_retain_3() {
    assert!(model_run(0x9E37_79B9_7F4A_7C15, 3, 40, TUNING) > 0);
}

#[test]
fn model_retain_1_and_5() {
    assert!(model_run(0xDEAD_BEEF_1234_5678, 1, 40, TUNING) > 0);
    assert!(model_run(0x0123_4567_89AB_CDEF, 5, 40, TUNING) > 0);
}

#[test]
fn model_small_chunks_and_chains() {
    assert!(model_run(0x5555_AAAA_1234_0001, 3, 40, EVERY_THIRD) > 10);
    assert!(model_run(0x0F0F_F0F0_1234_0002, 2, 40, EVERY_THIRD) > 10);
    assert_eq!(model_run(0x1357_9BDF_2468_ACE0, 3, 40, NEVER), 0);
}

#[test]
fn incremental_is_small() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let changes = |round: u32, step| {
        let kv = |i: u32| format!("key-{i:08}=value-{round}-{i:032}");
        let changes: Vec<_> = (0..10_000).step_by(step).map(kv).collect();
        [delta("a", 0, &changes.join(" "), None)]
    };
    let full = s.commit(&meta(1), &changes(0, 1), 3).unwrap().bytes_written;
    let inc = s
        .commit(&meta(2), &changes(1, 100), 3)
        .unwrap()
        .bytes_written;
    assert!(inc * 20 < full, "{inc} vs {full}");
    let latest = s.latest().unwrap().unwrap();
    assert_eq!((latest.bytes_written, latest.state_keys), (inc, 10_000));
    assert_eq!(s.load_instance(2, "a", 0).unwrap().entries.len(), 10_000);
    // The increment is stored as a delta of its 100 changes, split in chunks.
    let segs = segments(&s);
    assert_eq!(kinds(&s, "a", 0), "F1 D2");
    assert_eq!((segs[1].3.entries, segs[0].3.entries), (100, 10_000));
    assert!(segs[0].3.chunks > 1 && segs[0].3.bytes < full);
}

#[test]
fn compaction_merges_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job")
        .unwrap()
        .with_tuning(EVERY_THIRD);
    let steps = [
        "a=1 b=2 c=3 d=4",
        "b=20 -c e=5",
        "-a c=30 -e",
        "f=6 -b d=40",
        "g=7",
        "-c -d",
    ];
    let want = [
        "a=1 b=2 c=3 d=4",
        "a=1 b=20 d=4 e=5",
        "b=20 c=30 d=4",
        "c=30 d=40 f=6",
        "c=30 d=40 f=6 g=7",
        "f=6 g=7",
    ];
    for (i, changes) in steps.iter().enumerate() {
        let id = i as u64 + 1;
        s.commit(&meta(id), &[delta("a", 0, changes, None)], 10)
            .unwrap();
        let live = [4, 4, 3, 3, 4, 2][i];
        assert_eq!(s.latest().unwrap().unwrap().state_keys, live);
    }
    // The fourth commit merged F1 D2 D3 and its changes into F4.
    assert_eq!(kinds(&s, "a", 0), "F1 D2 D3 F4 D5 D6");
    let f4 = segments(&s)[3].3;
    assert_eq!((f4.kind, f4.entries), (Kind::Full, 3));
    for (id, want) in want.iter().enumerate() {
        let got = s.load_instance(id as u64 + 1, "a", 0).unwrap();
        assert_eq!(show(&got), *want, "checkpoint {}", id + 1);
    }
    // Restoring 3 drops F4 and what followed; the chain F1 D2 D3 goes on.
    s.truncate_after(3).unwrap();
    assert_eq!(kinds(&s, "a", 0), "F1 D2 D3");
    s.commit(&meta(7), &[delta("a", 0, "-b", None)], 10)
        .unwrap();
    assert_eq!(kinds(&s, "a", 0), "F1 D2 D3 F7");
    assert_eq!(show(&s.load_instance(7, "a", 0).unwrap()), "c=30 d=4");
    assert_eq!(show(&s.load_instance(3, "a", 0).unwrap()), want[2]);
}

#[test]
fn gc_keeps_what_retained_checkpoints_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job")
        .unwrap()
        .with_tuning(EVERY_THIRD);
    let mut expect = Vec::new();
    for id in 1..=10u64 {
        let d = delta("a", 0, &format!("k{id}={id} k{}=x", id % 3), None);
        s.commit(&meta(id), &[d], 3).unwrap();
        expect.push(show(&s.load_instance(id, "a", 0).unwrap()));
        // Horizon id - 2: its newest full segment <= it and everything after.
        let want = match id {
            1 => "F1",
            2 => "F1 D2",
            3 => "F1 D2 D3",
            4 => "F1 D2 D3 F4",
            5 => "F1 D2 D3 F4 D5",
            6 => "F4 D5 D6",
            7 => "F4 D5 D6 F7",
            8 => "F4 D5 D6 F7 D8",
            9 => "F7 D8 D9",
            _ => "F7 D8 D9 F10",
        };
        assert_eq!(kinds(&s, "a", 0), want, "after checkpoint {id}");
        for cp in id.saturating_sub(2).max(1)..=id {
            let got = show(&s.load_instance(cp, "a", 0).unwrap());
            assert_eq!(got, expect[cp as usize - 1], "checkpoint {cp} after {id}");
        }
    }
    assert_eq!(rows(&s, GC), 1);
}

/// The changes of checkpoint `id` that replace ten keys `<prefix><id-1>.k`
/// with ten keys `<prefix><id>.k` (`delta`'s notation).
fn replaced(prefix: &str, id: u64) -> String {
    let new = (0..10).map(|k| format!("{prefix}{id}.{k}=v"));
    let old = (0..10).map(|k| format!("-{prefix}{}.{k}", id - 1));
    new.chain(old).collect::<Vec<_>>().join(" ")
}

#[test]
fn dead_keys_are_collected() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    // Keys live for one checkpoint each (windows, sessions): nothing of
    // them may linger once no retained checkpoint sees them.
    for id in 1..=20u64 {
        let changes = format!("{} t{id}=1 -t{id}", replaced("", id));
        s.commit(&meta(id), &[delta("a", 0, &changes, None)], 2)
            .unwrap();
    }
    // Each change set replaces the whole state, so each commit writes a
    // full segment; retained 19 and 20 keep theirs, the older are gone.
    assert_eq!(kinds(&s, "a", 0), "F19 F20");
    let stored = |s: &CheckpointStore| segments(s).iter().map(|x| x.3.entries).sum::<u64>();
    assert_eq!(stored(&s), 20);
    s.commit(&meta(21), &[delta("a", 0, "-20.0", None)], 1)
        .unwrap();
    assert_eq!(kinds(&s, "a", 0), "F20 D21");
    assert_eq!((stored(&s), rows(&s, GC)), (10 + 1, 0));
    assert_eq!(s.load_instance(21, "a", 0).unwrap().entries.len(), 9);
}

#[test]
fn churn_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let stable: Vec<_> = (0..1000).map(|k| format!("stable{k:04}=v")).collect();
    s.commit(&meta(1), &[delta("a", 0, &stable.join(" "), None)], 3)
        .unwrap();
    // Ten short-lived keys per checkpoint: their values and tombstones live
    // in deltas until a compaction drops them.
    let mut most = 0;
    for id in 2..=600u64 {
        let d = delta("a", 0, &replaced("t", id), None);
        s.commit(&meta(id), &[d], 3).unwrap();
        let stored = segments(&s).iter().map(|x| x.3.entries).sum::<u64>();
        most = most.max(stored);
    }
    assert!(most < 4000, "{most} entries stored for 1010 live keys");
    assert_eq!(s.load_instance(600, "a", 0).unwrap().entries.len(), 1010);
}

#[test]
fn truncate_after_drops_newer() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    for id in 1..=4 {
        let d = delta("a", 0, &format!("k={id} {id}=x"), Some(&id.to_string()));
        s.commit(&meta(id), &[d], 10).unwrap();
    }
    let e = s.truncate_after(7).unwrap_err();
    assert!(
        matches!(e, StoreError::UnknownCheckpoint { id: 7, .. }),
        "{e}"
    );
    s.truncate_after(2).unwrap();
    let ids: Vec<_> = s.list().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2]);
    let r = s.load_instance(2, "a", 0).unwrap();
    assert_eq!(
        (show(&r).as_str(), &r.snapshot[..]),
        ("1=x 2=x k=2", &b"2"[..])
    );
    // The ids of the dropped 3 and 4 are never given again (their epochs
    // may have reached a sink), across a reopen too.
    assert_eq!(s.next_id().unwrap(), 5);
    drop(s);
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert_eq!(s.next_id().unwrap(), 5);
    // The next checkpoint builds on 2, not on the truncated 3 and 4.
    s.commit(&meta(5), &[delta("a", 0, "5=x", None)], 10)
        .unwrap();
    let r = s.load_instance(5, "a", 0).unwrap();
    assert_eq!(
        (show(&r).as_str(), &r.snapshot[..]),
        ("1=x 2=x 5=x k=2", &b"2"[..])
    );
    assert_eq!(s.latest().unwrap().unwrap().state_keys, 4);
    assert_eq!(s.next_id().unwrap(), 6);
    s.truncate_after(0).unwrap();
    assert!(s.list().unwrap().is_empty());
    assert_eq!(s.next_id().unwrap(), 6, "none of 1..5 again");
    assert_eq!(
        rows(&s, SEGMENTS) + rows(&s, CHUNKS) + rows(&s, SNAPSHOTS) + rows(&s, GC),
        0
    );
}

/// Ids another writer used (manifests in the object store this store
/// never held) are never given again, across a reopen; a reservation
/// below the ids in use changes nothing.
#[test]
fn reserved_ids_are_never_given() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(1), &[delta("a", 0, "k=1", None)], 10)
        .unwrap();
    s.reserve_ids_through(6).unwrap();
    assert_eq!(s.next_id().unwrap(), 7);
    s.reserve_ids_through(3).unwrap();
    drop(s);
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert_eq!(s.next_id().unwrap(), 7);
}

#[test]
fn open_refuses_other_job_and_reports_missing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    let e = CheckpointStore::open_existing(&empty).err().unwrap();
    assert!(matches!(e, StoreError::NotFound { .. }), "{e}");
    std::fs::create_dir(&empty).unwrap();
    let e = CheckpointStore::open_existing(&empty).err().unwrap();
    assert!(matches!(e, StoreError::NotFound { .. }), "{e}");
    assert!(e.to_string().starts_with("no checkpoints in "), "{e}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    drop(CheckpointStore::open(dir.path(), "job").unwrap());
    let e = CheckpointStore::open(dir.path(), "other").err().unwrap();
    assert!(
        matches!(&e, StoreError::OtherJob { found, .. } if found == "job"),
        "{e}"
    );
    assert!(e.to_string().contains("--state-dir"), "{e}");
    assert_eq!(
        CheckpointStore::open_existing(dir.path())
            .unwrap()
            .job()
            .unwrap(),
        "job"
    );
}

#[test]
fn format_1_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    // The format-1 layout: one row per key and version.
    const STATE_1: TableDefinition<(&str, u32, &[u8], u64), &[u8]> = TableDefinition::new("state");
    {
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let mut meta_table = txn.open_table(META).unwrap();
        meta_table.insert("job", &b"job"[..]).unwrap();
        meta_table.insert("format", &b"1"[..]).unwrap();
        drop(meta_table);
        txn.open_table(CHECKPOINTS)
            .unwrap()
            .insert(1, serde_json::to_vec(&meta(1)).unwrap().as_slice())
            .unwrap();
        txn.open_table(STATE_1)
            .unwrap()
            .insert(("a", 0, &b"k"[..], 1), &[1, b'v'][..])
            .unwrap();
        txn.open_table(SNAPSHOTS).unwrap();
        txn.commit().unwrap();
    }
    for e in [
        CheckpointStore::open(dir.path(), "job").err().unwrap(),
        CheckpointStore::open_existing(dir.path()).err().unwrap(),
    ] {
        assert!(
            matches!(&e, StoreError::UnsupportedFormat { found, .. } if found == "1"),
            "{e}"
        );
        let message = e.to_string();
        assert!(
            message.contains("has format \"1\", this weir reads formats 2 and 3"),
            "{e}"
        );
        assert!(
            message.contains("use the weir version that wrote it"),
            "{e}"
        );
        assert!(
            message.contains(&format!(
                "or delete {} to start from scratch",
                dir.path().display()
            )),
            "{e}"
        );
    }
    // Refusing leaves the file as it was (no format-2 tables added).
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let tables: Vec<_> = txn
        .list_tables()
        .unwrap()
        .map(|t| t.name().to_string())
        .collect();
    assert!(!tables.iter().any(|t| t == "segments"), "{tables:?}");
}

#[test]
fn inspect_while_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(1), &[delta("a", 0, "k=v", None)], 3)
        .unwrap();
    let e = CheckpointStore::open(dir.path(), "job").err().unwrap();
    assert!(matches!(e, StoreError::InUse { .. }), "{e}");
    let ro = CheckpointStore::open_existing(dir.path()).unwrap();
    assert_eq!(ro.latest().unwrap().unwrap().id, 1);
    s.commit(&meta(2), &[], 3).unwrap();
    assert_eq!(ro.latest().unwrap().unwrap().id, 2);
    assert!(matches!(
        ro.truncate_after(1),
        Err(StoreError::Invalid { .. })
    ));
}

/// Changes the raw tables of a store behind its back.
fn tamper(s: &CheckpointStore, f: impl FnOnce(&WriteTransaction)) {
    let txn = s.rw().unwrap().begin_write().unwrap();
    f(&txn);
    txn.commit().unwrap();
}

#[test]
fn corrupted_segments_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job")
        .unwrap()
        .with_tuning(EVERY_THIRD);
    let keys: Vec<_> = (0..40).map(|i| format!("key{i:02}=value{i}")).collect();
    s.commit(&meta(1), &[delta("a", 0, &keys.join(" "), None)], 3)
        .unwrap();
    s.commit(&meta(2), &[delta("a", 0, "key07=x -key08", None)], 3)
        .unwrap();
    assert_eq!(kinds(&s, "a", 0), "F1 D2");
    let good: Vec<Vec<u8>> = {
        let txn = s.read().unwrap();
        let chunks = txn.open_table(CHUNKS).unwrap();
        let rows = chunks
            .range(("a", 0, 1, 0)..=("a", 0, 1, u32::MAX))
            .unwrap();
        rows.map(|r| r.unwrap().1.value().to_vec()).collect()
    };
    assert!(good.len() > 3);
    let damaged = |e: StoreError, what: &str| {
        let message = e.to_string();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{message}");
        assert!(
            message.contains("instance 0 of operator `a` written by checkpoint 1"),
            "{message}"
        );
        assert!(message.contains(what), "{message}");
        assert!(message.contains("weir run --restore none"), "{message}");
    };
    let set_chunk = |j: u32, bytes: &[u8]| {
        tamper(&s, |txn| {
            txn.open_table(CHUNKS)
                .unwrap()
                .insert(("a", 0, 1, j), bytes)
                .unwrap();
        })
    };
    let every_read = |what: &str| {
        damaged(s.load_instance(2, "a", 0).unwrap_err(), what);
        damaged(s.operator_state(1, "a").unwrap_err(), what);
    };

    // A chunk cut short: its checksum no longer matches.
    set_chunk(1, &good[1][..good[1].len() - 1]);
    every_read("checksum");
    // A sealed chunk whose entries do not fill the header's lengths.
    let inner = s.unseal(&good[1]).unwrap();
    set_chunk(1, &s.seal(&inner[..inner.len() - 1]));
    every_read("its chunks hold");
    // Same length, garbage inside: a length runs past the end, or keys out of order.
    let mut garbage = good[1].clone();
    garbage.iter_mut().for_each(|b| *b = 0xff);
    set_chunk(1, &garbage);
    every_read("");
    // The commit that reads the chain to find live keys fails too, writing nothing.
    let e = s.commit(&meta(3), &[delta("a", 0, "key30=y", None)], 3);
    damaged(e.unwrap_err(), "");
    assert_eq!(s.latest().unwrap().unwrap().id, 2);
    // Keys out of order across chunks.
    set_chunk(1, &good[3]);
    every_read("order");
    // Any single changed bit is caught, by every read.
    set_chunk(1, &good[1]);
    for at in 0..good[2].len() {
        for flip in [0x01, 0x40, 0x80] {
            let mut bad = good[2].clone();
            bad[at] ^= flip;
            set_chunk(2, &bad);
            every_read("checksum");
        }
    }
    set_chunk(2, &good[2]);
    assert_eq!(s.load_instance(2, "a", 0).unwrap().entries.len(), 39);
    // A missing chunk, a damaged header, a delta without its full segment.
    tamper(&s, |txn| {
        txn.open_table(CHUNKS)
            .unwrap()
            .remove(("a", 0, 1, 1))
            .unwrap();
    });
    every_read("chunk 1 is missing");
    set_chunk(1, &good[1]);
    tamper(&s, |txn| {
        txn.open_table(SEGMENTS)
            .unwrap()
            .insert(("a", 0, 1), &*s.seal(&[1, 2, 3]))
            .unwrap();
    });
    every_read("header is 3 bytes");
    tamper(&s, |txn| {
        txn.open_table(SEGMENTS)
            .unwrap()
            .remove(("a", 0, 1))
            .unwrap();
    });
    let e = s.load_instance(2, "a", 0).unwrap_err();
    assert!(e.to_string().contains("no full segment precedes it"), "{e}");
}

#[test]
fn an_empty_store_file_is_damage_not_a_new_store() {
    // A store file that exists is opened, never created over: an empty one
    // (truncated by a crash of the file system or by hand) would otherwise
    // look like a job with no checkpoints and rerun it from scratch.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, b"").unwrap();
    for e in [
        CheckpointStore::open(dir.path(), "job").err(),
        CheckpointStore::open_existing(dir.path()).err(),
    ] {
        let e = e.expect("an empty store file must not open");
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "left as found");
}

#[test]
fn damaged_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let check = |e: Option<StoreError>| {
        let e = e.expect("a damaged file must not open");
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    };
    let mut r = 42u64;
    let garbage: Vec<u8> = (0..10_000).map(|_| xorshift(&mut r) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    check(CheckpointStore::open(dir.path(), "job").err());
    check(CheckpointStore::open_existing(dir.path()).err());
    std::fs::remove_file(&path).unwrap();
    let changes: Vec<_> = (0..5000).map(|i| format!("{i}={i:064}")).collect();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(1), &[delta("a", 0, &changes.join(" "), None)], 3)
        .unwrap();
    drop(s);
    let valid = std::fs::read(&path).unwrap();
    std::fs::write(&path, &valid[..valid.len() / 2]).unwrap();
    check(CheckpointStore::open(dir.path(), "job").err());
    check(CheckpointStore::open_existing(dir.path()).err());
    // Flipped bytes anywhere: an error or a readable store, never a panic.
    for at in (0..valid.len()).step_by(valid.len() / 37) {
        let mut bad = valid.clone();
        bad[at] ^= 0x55;
        std::fs::write(&path, &bad).unwrap();
        if let Ok(s) = CheckpointStore::open(dir.path(), "job") {
            let _ = s.list().and_then(|_| s.load_instance(1, "a", 0));
        }
    }
}

#[test]
fn timers_are_stored_beside_the_state_and_not_counted_as_state_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let mut d = delta("a", 0, "k=v", None);
    d.timers = vec![
        (b"t1".to_vec(), Some(Vec::new())),
        (b"t2".to_vec(), Some(Vec::new())),
    ];
    s.commit(&meta(1), &[d], 3).unwrap();
    let mut d = delta("a", 0, "", None);
    d.timers = vec![(b"t1".to_vec(), None)];
    s.commit(&meta(2), &[d], 3).unwrap();
    assert_eq!(
        s.get(2).unwrap().unwrap().state_keys,
        1,
        "timers are not state keys"
    );
    let at1 = s.load_instance(1, "a", 0).unwrap();
    assert_eq!(at1.entries, vec![(b"k".to_vec(), b"v".to_vec())]);
    assert_eq!(at1.timers.len(), 2);
    let at2 = s.load_instance(2, "a", 0).unwrap();
    assert_eq!(at2.timers, vec![(b"t2".to_vec(), Vec::new())]);
    assert_eq!(
        s.operator_state(2, "a").unwrap().len(),
        1,
        "the operator's state holds no timer"
    );
}

/// In-flight data of `values` on port `port`, encoded.
fn inflight(port: u32, values: &[&str]) -> Vec<u8> {
    let mut batch = crate::Batch::new();
    values
        .iter()
        .for_each(|v| batch.push(Some(v.as_bytes()), v.as_bytes(), None));
    let mut f = crate::dataflow::inflight::InFlight::default();
    f.push(port, batch);
    f.encode()
}

/// The values of an instance's in-flight data, with their ports.
fn replayed(r: &RestoredInstance) -> Vec<(u32, String)> {
    let value = |b: &crate::Batch| -> Vec<String> {
        b.iter()
            .map(|r| String::from_utf8_lossy(r.value).into_owned())
            .collect()
    };
    let frames = r.inflight.iter();
    frames.map(|(p, b)| (*p, value(b).join(","))).collect()
}

fn with_inflight(mut d: InstanceDelta, bytes: Option<Vec<u8>>) -> InstanceDelta {
    d.inflight = bytes;
    d
}

#[test]
fn inflight_data_is_read_back_only_at_its_own_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let d1 = with_inflight(delta("a", 1, "k=1", None), Some(inflight(0, &["x", "y"])));
    s.commit(&meta(1), &[d1], 5).unwrap();
    // Two deltas of one instance (a stale one first): frames concatenate.
    let d2 = with_inflight(delta("a", 0, "k=2", None), Some(inflight(1, &["p"])));
    let d2b = with_inflight(delta("a", 0, "", None), Some(inflight(0, &["q"])));
    let aligned = delta("b", 0, "k=3", None);
    s.commit(&meta(2), &[d2, d2b, aligned], 5).unwrap();
    s.commit(&meta(3), &[], 5).unwrap();
    let at = |id, op, i| s.load_instance(id, op, i).unwrap();
    assert_eq!(replayed(&at(1, "a", 1)), [(0, "x,y".to_string())]);
    assert_eq!(replayed(&at(2, "a", 0)), [(1, "p".into()), (0, "q".into())]);
    for (id, op, i) in [
        (2, "a", 1),
        (3, "a", 1),
        (3, "a", 0),
        (2, "b", 0),
        (1, "a", 0),
    ] {
        assert!(at(id, op, i).inflight.is_empty(), "{op}[{i}] at {id}");
    }
    assert_eq!(show(&at(2, "a", 1)), "k=1", "the state is unchanged");
    let by_instance = s.operator_inflight(2, "a").unwrap();
    assert_eq!(by_instance.len(), 1);
    assert_eq!(by_instance[0].0, 0);
    assert_eq!(by_instance[0].1.len(), 2);
    assert!(s.operator_inflight(3, "a").unwrap().is_empty());
}

#[test]
fn gc_and_truncation_drop_inflight_rows_with_their_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    for id in 1..=4 {
        let d = with_inflight(delta("a", 0, "k=v", None), Some(inflight(0, &["r"])));
        s.commit(&meta(id), &[d], 2).unwrap();
    }
    assert_eq!(rows(&s, layout::INFLIGHT), 2, "retain 2: rows of 3 and 4");
    assert!(!s.load_instance(3, "a", 0).unwrap().inflight.is_empty());
    s.truncate_after(3).unwrap();
    assert_eq!(rows(&s, layout::INFLIGHT), 1);
    assert!(!s.load_instance(3, "a", 0).unwrap().inflight.is_empty());
    // An empty in-flight buffer (unaligned, nothing in flight) writes no row.
    s.commit(
        &meta(4),
        &[with_inflight(delta("a", 0, "", None), Some(Vec::new()))],
        2,
    )
    .unwrap();
    assert_eq!(rows(&s, layout::INFLIGHT), 1);
    s.truncate_after(0).unwrap();
    assert_eq!(rows(&s, layout::INFLIGHT), 0);
}

#[test]
fn a_store_written_before_the_inflight_table_opens_and_gets_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    s.commit(&meta(1), &[delta("a", 0, "k=v", None)], 3)
        .unwrap();
    drop(s);
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        assert!(txn.delete_table(layout::INFLIGHT).unwrap());
        txn.commit().unwrap();
    }
    let tables = || -> Vec<String> {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        txn.list_tables()
            .unwrap()
            .map(|t| t.name().to_string())
            .collect()
    };
    assert!(!tables().iter().any(|t| t == "inflight"));
    // Read-only (a job holds it): the missing table reads as empty.
    // (with the store's settings, which let a reader share the file)
    let holder = super::file::builder().open(&path).unwrap();
    let ro = CheckpointStore::open_existing(dir.path()).unwrap();
    assert!(ro.is_read_only());
    let r = ro.load_instance(1, "a", 0).unwrap();
    assert_eq!((show(&r), r.inflight.len()), ("k=v".to_string(), 0));
    assert!(ro.operator_inflight(1, "a").unwrap().is_empty());
    drop((ro, holder));
    assert!(
        !tables().iter().any(|t| t == "inflight"),
        "read-only adds nothing"
    );
    // Read-write: the table is created, the format stays 2.
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    assert!(s.load_instance(1, "a", 0).unwrap().inflight.is_empty());
    let d = with_inflight(delta("a", 0, "k=w", None), Some(inflight(0, &["z"])));
    s.commit(&meta(2), &[d], 3).unwrap();
    assert_eq!(
        replayed(&s.load_instance(2, "a", 0).unwrap()),
        [(0, "z".to_string())]
    );
    drop(s);
    assert!(tables().iter().any(|t| t == "inflight"));
}

/// `weir checkpoints` and `weir state` open a store read-write when no job
/// has it open, for a few milliseconds: a job starting (or restarting)
/// then must wait for them, not fail as if another job used the store.
#[test]
fn a_job_opening_the_store_waits_for_a_brief_inspector() {
    let dir = tempfile::tempdir().unwrap();
    drop(CheckpointStore::open(dir.path(), "job").unwrap());
    let inspector = CheckpointStore::open_existing(dir.path()).unwrap();
    let (held, release) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        held.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(inspector);
    });
    release.recv().unwrap();
    let job = CheckpointStore::open(dir.path(), "job");
    holder.join().unwrap();
    assert!(job.is_ok(), "{:?}", job.err());
}

mod damage;

/// Checkpoint `id` whose operator `a` records `keep` epochs of at most
/// `max_bytes` (none when `keep` is 0).
fn recording_meta(id: u64, keep: u32, max_bytes: u64) -> CheckpointMeta {
    let mut m = meta(id);
    let a = m.operators.get_mut("a").unwrap();
    a.recording = (keep > 0).then_some(crate::config::RecordInputs {
        keep: crate::config::Keep::Checkpoints(keep),
        max_bytes,
    });
    m
}

/// A delta of instance `i` of `a` whose recording is one checkpoint call.
fn recorded(i: u32, id: u64) -> InstanceDelta {
    let mut r = crate::dataflow::recording::Recorder::default();
    r.checkpoint(id as i64, id);
    InstanceDelta {
        recorded: Some(r.take()),
        ..delta("a", i, "k=v", None)
    }
}

/// The checkpoints with a recording of `a`, after checking that the
/// index names exactly the rows of `recordings`.
fn recorded_ids(s: &CheckpointStore) -> Vec<u64> {
    let epochs = s.recorded_epochs("a").unwrap();
    let named: usize = epochs.iter().map(|e| e.instances.len()).sum();
    assert_eq!(rows(s, layout::RECORDINGS), named as u64);
    assert_eq!(rows(s, layout::RECORDED), epochs.len() as u64);
    for e in &epochs {
        for &i in &e.instances {
            assert!(s.recording(e.checkpoint, "a", i).unwrap().is_some());
        }
    }
    epochs.iter().map(|e| e.checkpoint).collect()
}

fn ids(s: &CheckpointStore) -> Vec<u64> {
    s.list().unwrap().iter().map(|m| m.id).collect()
}

#[test]
fn recordings_keep_their_bound_and_the_checkpoint_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    for id in 1..=6 {
        s.commit(
            &recording_meta(id, 3, 1 << 20),
            &[recorded(0, id), recorded(1, id)],
            1,
        )
        .unwrap();
    }
    assert_eq!(recorded_ids(&s), [4, 5, 6]);
    assert_eq!(
        ids(&s),
        [3, 4, 5, 6],
        "retain 1, and 3: epoch 4 starts from it"
    );
    let e = &s.recorded_epochs("a").unwrap()[0];
    assert_eq!(e.instances, [0, 1]);
    let steps = s.recording(5, "a", 1).unwrap().unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(
        steps[0].call,
        crate::dataflow::recording::Call::Checkpoint(5)
    );
    assert_eq!(s.recording(3, "a", 1).unwrap(), None);
    // A byte bound under two epochs keeps the newest only.
    let one = e.bytes;
    s.commit(
        &recording_meta(7, 3, one + one / 2),
        &[recorded(0, 7), recorded(1, 7)],
        1,
    )
    .unwrap();
    assert_eq!(recorded_ids(&s), [7]);
    assert_eq!(ids(&s), [6, 7]);
    // An epoch with an instance whose recording is missing (it outgrew
    // record_max_bytes) has no row for it; a stale delta's recording
    // comes first.
    let stale = recorded(0, 8);
    let mut lost = recorded(1, 8);
    lost.recorded = None;
    s.commit(
        &recording_meta(8, 3, 1 << 20),
        &[stale, recorded(0, 8), lost],
        1,
    )
    .unwrap();
    assert_eq!(s.recorded_epochs("a").unwrap()[1].instances, [0]);
    assert_eq!(s.recording(8, "a", 0).unwrap().unwrap().len(), 2);
    // Truncation drops newer rows; an operator that stops recording loses
    // them all at its next checkpoint, and its checkpoints with them.
    s.truncate_after(7).unwrap();
    assert_eq!(recorded_ids(&s), [7]);
    s.commit(&recording_meta(9, 0, 0), &[delta("a", 0, "k=w", None)], 1)
        .unwrap();
    assert_eq!(recorded_ids(&s), Vec::<u64>::new());
    assert_eq!(ids(&s), [9]);
}

#[test]
fn a_first_recorded_epoch_keeps_every_checkpoint_from_it_and_packs_carry_recordings() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    for id in 1..=4 {
        s.commit(&recording_meta(id, 100, 1 << 20), &[recorded(0, id)], 1)
            .unwrap();
    }
    // Epoch 1 starts at the job's start; epoch 2 from checkpoint 1.
    assert_eq!(ids(&s), [1, 2, 3, 4]);
    let pack = s.export(3).unwrap();
    let pack = Pack::decode(&pack.encode()).unwrap();
    let other = tempfile::tempdir().unwrap();
    let rebuilt = CheckpointStore::open(other.path(), "job").unwrap();
    let packs: Vec<Pack> = (1..=3).map(|v| s.export(v).unwrap()).collect();
    assert!(packs.contains(&pack));
    rebuilt.import(&super::Catalog::only(3), &packs).unwrap();
    assert_eq!(
        recorded_ids(&rebuilt),
        [3],
        "only the checkpoint's own recording"
    );
    assert_eq!(
        rebuilt.recording(3, "a", 0).unwrap(),
        s.recording(3, "a", 0).unwrap()
    );
}

/// A store copied as the object store copies it (the pack of each version
/// exported when its checkpoint committed) is rebuilt from its catalog
/// exactly: the same checkpoints with the same state, and the same
/// recordings, though the packs hold recordings and checkpoints the store
/// dropped since (a bound that shrank to one epoch, then grew again).
#[test]
fn a_store_rebuilt_from_its_catalog_and_packs_holds_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let mut uploaded: BTreeMap<u64, Pack> = BTreeMap::new();
    let forever = format!("forever={}", "x".repeat(4096));
    for id in 1..=9u64 {
        let keep = match id {
            5 => 1,
            _ => 3,
        };
        let kv = format!("k{id}=v{id} shared={id} -k{}", id - 1);
        let snapshot = (id % 3 == 0).then(|| format!("s{id}"));
        let mut d1 = delta("a", 1, &kv, snapshot.as_deref());
        d1.recorded = recorded(1, id).recorded;
        let deltas = [
            InstanceDelta {
                changes: delta("a", 0, &kv, None).changes,
                ..recorded(0, id)
            },
            d1,
            // Written once, larger than the deltas after it: its version
            // stays in use.
            delta("b", 0, if id == 1 { &forever } else { &kv }, None),
        ];
        s.commit(&recording_meta(id, keep, 1 << 20), &deltas, 2)
            .unwrap();
        for v in s.versions_in_use().unwrap() {
            if v == id || !uploaded.contains_key(&v) {
                uploaded.insert(v, Pack::decode(&s.export(v).unwrap().encode()).unwrap());
            }
        }
    }
    assert_eq!(recorded_ids(&s), [7, 8, 9]);
    assert_eq!(ids(&s), [6, 7, 8, 9]);
    let catalog = s.catalog(9).unwrap();
    assert_eq!(catalog.checkpoints, [6, 7, 8, 9]);
    assert_eq!(catalog.recorded.as_ref().unwrap()["a"], [7, 8, 9]);
    let versions = s.versions_in_use().unwrap();
    let packs: Vec<Pack> = versions.iter().map(|v| uploaded[v].clone()).collect();
    // The packs hold what the store dropped since: the recording of epoch
    // 6 (the bound of checkpoint 5) and checkpoints before 6.
    let held = |v: u64| packs.iter().find(|p| p.version == v).map(Pack::held);
    assert_eq!(
        held(6),
        Some((true, vec![("a".to_string(), 0), ("a".into(), 1)]))
    );
    let dropped: Vec<u64> = (packs.iter())
        .filter(|p| p.version < 6 && p.held().0)
        .map(|p| p.version)
        .collect();
    assert!(!dropped.is_empty(), "versions in use: {versions:?}");
    let other = tempfile::tempdir().unwrap();
    let rebuilt = CheckpointStore::open(other.path(), "job").unwrap();
    rebuilt.import(&catalog, &packs).unwrap();
    assert_eq!(ids(&rebuilt), ids(&s));
    assert_eq!(recorded_ids(&rebuilt), [7, 8, 9]);
    assert_eq!(
        rebuilt.recorded_epochs("a").unwrap(),
        s.recorded_epochs("a").unwrap()
    );
    for id in ids(&s) {
        assert_eq!(rebuilt.get(id).unwrap(), s.get(id).unwrap());
        for (op, inst) in [("a", 0), ("a", 1), ("b", 0)] {
            assert_eq!(
                rebuilt.load_instance(id, op, inst).unwrap(),
                s.load_instance(id, op, inst).unwrap(),
                "{op}[{inst}] at {id}"
            );
            if op == "a" {
                assert_eq!(
                    rebuilt.recording(id, op, inst).unwrap(),
                    s.recording(id, op, inst).unwrap()
                );
            }
        }
    }
    assert_eq!(rebuilt.catalog(9).unwrap(), catalog);
    assert_eq!(rebuilt.next_id().unwrap(), 10);
}

/// An operator that stopped recording left no recording in the store,
/// though the packs of the checkpoints it keeps still hold theirs: the
/// catalog says none, and none comes back.
#[test]
fn a_catalog_without_recordings_brings_none_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    let mut uploaded: BTreeMap<u64, Pack> = BTreeMap::new();
    for id in 1..=4u64 {
        let (keep, delta) = match id {
            4 => (0, delta("a", 0, "k=4", None)),
            _ => (100, recorded(0, id)),
        };
        s.commit(&recording_meta(id, keep, 1 << 20), &[delta], 3)
            .unwrap();
        uploaded.insert(id, s.export(id).unwrap());
    }
    assert_eq!(recorded_ids(&s), Vec::<u64>::new());
    assert_eq!(ids(&s), [2, 3, 4]);
    let catalog = s.catalog(4).unwrap();
    assert_eq!(catalog.recorded, Some(BTreeMap::new()));
    let packs: Vec<Pack> = (s.versions_in_use().unwrap().iter())
        .map(|v| uploaded[v].clone())
        .collect();
    assert!(
        packs.iter().any(|p| !p.held().1.is_empty()),
        "packs hold recordings"
    );
    let other = tempfile::tempdir().unwrap();
    let rebuilt = CheckpointStore::open(other.path(), "job").unwrap();
    rebuilt.import(&catalog, &packs).unwrap();
    assert_eq!(ids(&rebuilt), [2, 3, 4]);
    assert_eq!(recorded_ids(&rebuilt), Vec::<u64>::new());
}

#[test]
fn a_duration_keeps_the_epochs_of_checkpoints_started_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = CheckpointStore::open(dir.path(), "job").unwrap();
    for id in 1..=6 {
        let mut m = recording_meta(id, 1, 1 << 20);
        // Started 1 ms apart (`meta`); keep those within 2 ms of the newest.
        m.operators.get_mut("a").unwrap().recording = Some(crate::config::RecordInputs {
            keep: crate::config::Keep::Millis(2),
            max_bytes: 1 << 20,
        });
        s.commit(&m, &[recorded(0, id)], 1).unwrap();
    }
    assert_eq!(recorded_ids(&s), [4, 5, 6]);
    assert_eq!(ids(&s), [3, 4, 5, 6]);
}
