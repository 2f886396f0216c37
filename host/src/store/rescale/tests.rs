use std::collections::BTreeMap;

use super::*;
use crate::dataflow::protocol::InstanceDelta;
use crate::keyed::timers::{Domain, Timers};
use crate::store::{MANIFEST, RestoredInstance, SAVEPOINT_FORMAT, Savepoint};

/// Checkpoint `id` with operator `a` only, at `parallelism`.
fn meta(id: u64, parallelism: u32) -> CheckpointMeta {
    let mut m = crate::store::tests::meta(id);
    m.operators.remove("b");
    if let Some(a) = m.operators.get_mut("a") {
        a.parallelism = parallelism;
    }
    m
}

fn key(i: u32) -> Vec<u8> {
    format!("w{i}\0count").into_bytes()
}

/// The owner of `key` at `p` instances.
fn owner(key: &[u8], p: u32) -> u32 {
    instance_for(key_group(key), p)
}

/// Checkpoint 1 of operator `a` at `p` instances: keys `w0..w{n}` (each in
/// its owner), an event-time timer per tenth key, and watermark `100 + i`
/// at instance `i`; checkpoint 2 deletes every seventh key and rewrites
/// every fifth (so chains hold deltas).
fn two_checkpoints(store: &CheckpointStore, p: u32, n: u32) {
    let mut first: Vec<InstanceDelta> = (0..p)
        .map(|i| InstanceDelta {
            operator: "a".into(),
            instance: i,
            changes: Default::default(),
            snapshot: None,
            timers: Vec::new(),
            inflight: None,
            recorded: None,
        })
        .collect();
    let mut timers: Vec<Timers> = (0..p).map(|_| Timers::default()).collect();
    for k in 0..n {
        let owner = owner(&key(k), p) as usize;
        first[owner]
            .changes
            .push(&key(k), Some(k.to_string().as_bytes()));
        if k % 10 == 0 {
            timers[owner].register(Domain::EventTime, i64::from(k) * 1000, &key(k));
        }
    }
    for (i, t) in timers.iter_mut().enumerate() {
        t.set_watermark(100 + i as i64);
        first[i].timers = t.take_changes();
    }
    store.commit(&meta(1, p), &first, 3).unwrap();
    let mut second: Vec<InstanceDelta> = first
        .iter()
        .map(|d| InstanceDelta {
            changes: Default::default(),
            timers: Vec::new(),
            ..d.clone()
        })
        .collect();
    for k in 0..n {
        let owner = owner(&key(k), p) as usize;
        if k % 7 == 0 {
            second[owner].changes.push(&key(k), None);
        } else if k % 5 == 0 {
            second[owner].changes.push(&key(k), Some(b"five"));
        }
    }
    store.commit(&meta(2, p), &second, 3).unwrap();
}

/// What checkpoint 2 of [`two_checkpoints`] holds, by key.
fn expected_state(n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..n)
        .filter(|k| k % 7 != 0)
        .map(|k| {
            let v = if k % 5 == 0 {
                b"five".to_vec()
            } else {
                k.to_string().into_bytes()
            };
            (key(k), v)
        })
        .collect()
}

fn temp_store() -> (tempfile::TempDir, CheckpointStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path(), "job").unwrap();
    (dir, store)
}

fn timer_keys(r: &RestoredInstance) -> (Vec<Vec<u8>>, Option<i64>) {
    let mut keys = Vec::new();
    let mut watermark = None;
    for (k, v) in &r.timers {
        match decode(k, v).unwrap() {
            Entry::Timer(t) => keys.push(t.key),
            Entry::Watermark(w) => watermark = Some(w),
        }
    }
    (keys, watermark)
}

/// Checks that checkpoint `id` holds the state of [`two_checkpoints`] at
/// `q` instances, derived from `p` instances whose watermarks were
/// `100 + i`: each key, timer and watermark where it belongs.
fn check_shape(store: &CheckpointStore, id: u64, p: u32, q: u32, n: u32) {
    let watermarks: Vec<i64> = (0..p).map(|i| 100 + i64::from(i)).collect();
    check_shape_from(store, id, &watermarks, q, n);
}

/// [`check_shape`] from `watermarks.len()` instances with those watermarks.
fn check_shape_from(store: &CheckpointStore, id: u64, watermarks: &[i64], q: u32, n: u32) {
    let p = watermarks.len() as u32;
    let expected = expected_state(n);
    let mut seen = BTreeMap::new();
    for i in 0..q {
        let r = store.load_instance(id, "a", i).unwrap();
        for (k, v) in &r.entries {
            assert_eq!(owner(k, q), i, "key {k:?} in instance {i} of {q}");
            assert!(seen.insert(k.clone(), v.clone()).is_none(), "duplicate");
        }
        assert!(r.entries.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        let (timers, watermark) = timer_keys(&r);
        let mut want: Vec<Vec<u8>> = (0..n)
            .step_by(10)
            .map(key)
            .filter(|k| owner(k, q) == i)
            .collect();
        want.sort();
        let mut got = timers.clone();
        got.sort();
        assert_eq!(got, want, "timers of instance {i}");
        // The lowest watermark of the old instances it draws from.
        let sources: Vec<u32> = (0..KEY_GROUPS)
            .filter(|&g| instance_for(g, q) == i)
            .map(|g| instance_for(g, p))
            .collect();
        let low = sources.iter().map(|&j| watermarks[j as usize]).min();
        assert_eq!(watermark, low, "watermark of instance {i}");
    }
    assert_eq!(seen, expected, "every key once, with its value");
}

/// Every key and timer moves to the instance owning its key group, for
/// growing, shrinking and uneven changes; older checkpoints still read
/// their old shape; the live key count is kept.
#[test]
fn rescale_moves_every_key_and_timer_to_its_owner() {
    for (p, q) in [(2, 3), (3, 1), (1, 4), (4, 2), (5, 7), (128, 3)] {
        let (_dir, store) = temp_store();
        two_checkpoints(&store, p, 600);
        let moves = [Move {
            operator: "a".into(),
            from: p,
            to: q,
        }];
        store.derive(None, 2, &meta(3, q), &moves, 3).unwrap();
        check_shape(&store, 3, p, q, 600);
        check_shape(&store, 2, p, p, 600);
        let derived = store.get(3).unwrap().unwrap();
        assert_eq!(
            derived.state_keys,
            store.get(2).unwrap().unwrap().state_keys
        );
        assert_eq!(derived.sources, meta(3, q).sources);
    }
}

/// Rescaling back and forth keeps the state; once the old checkpoints are
/// no longer retained, only the derived shape's segments are left (the
/// instances beyond the parallelism hold an empty full segment).
#[test]
fn rescale_round_trips_and_old_chains_are_collected() {
    let (_dir, store) = temp_store();
    two_checkpoints(&store, 4, 400);
    let mv = |from, to| {
        [Move {
            operator: "a".into(),
            from,
            to,
        }]
    };
    store.derive(None, 2, &meta(3, 2), &mv(4, 2), 1).unwrap();
    check_shape_from(&store, 3, &[100, 102], 2, 400);
    store.derive(None, 3, &meta(4, 3), &mv(2, 3), 1).unwrap();
    // At 2 instances the watermarks were the lowest of each pair of 4.
    check_shape_from(&store, 4, &[100, 102], 3, 400);
    let txn = store.read().unwrap();
    let segments = txn.open_table(SEGMENTS).unwrap();
    for row in segments.iter().unwrap() {
        let (k, _) = row.unwrap();
        let (op, inst, version) = k.value();
        assert_eq!(
            version, 4,
            "segment ({op}, {inst}, {version}) survived garbage collection"
        );
    }
    let instance_3 = store.load_instance(4, "a", 3).unwrap();
    assert_eq!(
        instance_3,
        RestoredInstance::default(),
        "nothing left beyond"
    );
}

/// A key kept by an instance that does not own its key group is refused,
/// naming the key.
#[test]
fn a_misplaced_key_refuses_the_rescale() {
    let (_dir, store) = temp_store();
    let stray = (0..).map(key).find(|k| owner(k, 2) == 1).unwrap();
    let mut d = InstanceDelta {
        operator: "a".into(),
        instance: 0,
        changes: Default::default(),
        snapshot: None,
        timers: Vec::new(),
        inflight: None,
        recorded: None,
    };
    d.changes.push(&stray, Some(b"1"));
    store.commit(&meta(1, 2), &[d], 3).unwrap();
    let moves = [Move {
        operator: "a".into(),
        from: 2,
        to: 3,
    }];
    let err = store.derive(None, 1, &meta(2, 3), &moves, 3).unwrap_err();
    assert!(matches!(err, StoreError::Rescale { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("instance 0 holds the state key") && text.contains("Keep parallelism 2"),
        "{text}"
    );
    assert!(store.get(2).unwrap().is_none(), "nothing written");
}

/// The in-flight records of an unaligned checkpoint move with their keys
/// (a keyless record to one instance), per port and in order; another
/// operator's in-flight data is carried to the derived checkpoint as is.
#[test]
fn in_flight_records_move_with_their_keys() {
    use crate::dataflow::Batch;
    use crate::dataflow::inflight::InFlight;
    let (_dir, store) = temp_store();
    let mut m = meta(1, 2);
    m.operators.insert("b".into(), m.operators["a"].clone());
    let frames = |i: u32| {
        let mut f = InFlight::default();
        for port in 0..2 {
            let mut batch = Batch::new();
            for k in (0..200).filter(|k| owner(&key(*k), 2) == i) {
                batch.push(Some(&key(k)), format!("{port}:{k}").as_bytes(), None);
            }
            batch.push(None, format!("{port}:keyless{i}").as_bytes(), None);
            f.push(port, batch);
        }
        f.encode()
    };
    let deltas: Vec<InstanceDelta> = ["a", "b"]
        .iter()
        .flat_map(|op| (0..2).map(move |i| (op, i)))
        .map(|(op, i)| InstanceDelta {
            operator: (*op).into(),
            instance: i,
            changes: Default::default(),
            snapshot: None,
            timers: Vec::new(),
            inflight: Some(frames(i)),
            recorded: None,
        })
        .collect();
    store.commit(&m, &deltas, 3).unwrap();
    let mut derived = meta(2, 3);
    derived
        .operators
        .insert("b".into(), m.operators["b"].clone());
    let moves = [Move {
        operator: "a".into(),
        from: 2,
        to: 3,
    }];
    store.derive(None, 1, &derived, &moves, 3).unwrap();
    let mut seen = Vec::new();
    for i in 0..3 {
        let r = store.load_instance(2, "a", i).unwrap();
        for (port, batch) in r.inflight {
            let mut last = None;
            for rec in batch.iter() {
                let value = String::from_utf8(rec.value.to_vec()).unwrap();
                assert!(
                    value.starts_with(&format!("{port}:")),
                    "{value} on port {port}"
                );
                if let Some(k) = rec.key {
                    assert_eq!(owner(k, 3), i, "{value} in instance {i}");
                    let n: u32 = value[2..].parse().unwrap();
                    assert!(last < Some(n), "order kept");
                    last = Some(n);
                }
                seen.push(value);
            }
        }
    }
    seen.sort();
    let mut want: Vec<String> = (0..2)
        .flat_map(|p| (0..200).map(move |k| format!("{p}:{k}")))
        .chain((0..2).flat_map(|p| (0..2).map(move |i| format!("{p}:keyless{i}"))))
        .collect();
    want.sort();
    assert_eq!(seen, want, "every in-flight record once");
    for i in 0..2 {
        let r = store.load_instance(2, "b", i).unwrap();
        let mut again = InFlight::default();
        for (port, batch) in r.inflight {
            again.push(port, batch);
        }
        assert_eq!(again.encode(), frames(i), "operator b carried as is");
    }
    let stored = store.get(2).unwrap().unwrap();
    let encoded = |op: &str, i: u32| {
        let mut f = InFlight::default();
        for (port, batch) in store.load_instance(2, op, i).unwrap().inflight {
            f.push(port, batch);
        }
        f.encoded_len() as u64
    };
    let total: u64 =
        (0..3).map(|i| encoded("a", i)).sum::<u64>() + encoded("b", 0) + encoded("b", 1);
    assert_eq!(
        stored.inflight_bytes, total,
        "the derived checkpoint's in-flight bytes"
    );
}

/// Snapshot bytes cannot be split: a rescale is refused, a copy at the
/// same parallelism (a savepoint) keeps them.
#[test]
fn snapshots_are_copied_but_never_split() {
    let (_dir, store) = temp_store();
    let d = |i| InstanceDelta {
        operator: "a".into(),
        instance: i,
        changes: Default::default(),
        snapshot: Some(format!("snap{i}").into_bytes()),
        timers: Vec::new(),
        inflight: None,
        recorded: None,
    };
    store.commit(&meta(1, 2), &[d(0), d(1)], 3).unwrap();
    let moves = |to| {
        [Move {
            operator: "a".into(),
            from: 2,
            to,
        }]
    };
    let err = store
        .derive(None, 1, &meta(2, 1), &moves(1), 3)
        .unwrap_err();
    assert!(
        err.to_string().contains("plugin memory (its snapshot)"),
        "{err}"
    );
    let (_other_dir, other) = temp_store();
    other
        .derive(Some(&store), 1, &meta(1, 2), &moves(2), 3)
        .unwrap();
    for i in 0..2 {
        let r = other.load_instance(1, "a", i).unwrap();
        assert_eq!(r.snapshot, format!("snap{i}").into_bytes());
    }
}

/// A savepoint holds the checkpoint's whole state as full segments, opens
/// with its manifest, and refuses to be written twice or read in another
/// format.
#[test]
fn savepoints_round_trip_and_refuse_other_formats() {
    let (dir, store) = temp_store();
    two_checkpoints(&store, 2, 300);
    let out = dir.path().join("sp");
    let manifest = store.write_savepoint(2, &out).unwrap();
    assert_eq!(
        (manifest.checkpoint, manifest.format),
        (2, SAVEPOINT_FORMAT)
    );
    let sp = Savepoint::open(&out).unwrap();
    assert_eq!(sp.meta.operators, store.get(2).unwrap().unwrap().operators);
    check_shape(&sp.store, 2, 2, 2, 300);
    assert_eq!(
        sp.meta.state_keys,
        store.get(2).unwrap().unwrap().state_keys
    );
    drop(sp);
    let again = store.write_savepoint(2, &out).unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let path = out.join(MANIFEST);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"format\": 1", "\"format\": 0")).unwrap();
    let err = Savepoint::open(&out).unwrap_err().to_string();
    assert!(
        err.contains("savepoint format 0, this weir reads format 1"),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();
    let err = Savepoint::open(&out).unwrap_err().to_string();
    assert!(err.contains("savepoint.json"), "{err}");
}
