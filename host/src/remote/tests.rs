//! The object store protocol on a `file://` store: uploads, fencing,
//! garbage collection, and a state directory rebuilt from the store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::store::tests::{delta, meta};
use crate::store::{CheckpointMeta, CheckpointStore};

fn open(dir: &std::path::Path) -> RemoteStore {
    let url = format!("file://{}", dir.display());
    RemoteStore::open(&url, &BTreeMap::new()).unwrap()
}

/// Waits for the replica's answer about one checkpoint.
fn answer(replica: &Replica) -> Result<u64, RemoteError> {
    replica
        .done()
        .recv_timeout(Duration::from_secs(20))
        .expect("an answer")
}

#[test]
fn urls_and_options_are_checked_before_anything_is_contacted() {
    let none = BTreeMap::new();
    let err = RemoteStore::open("ftp://host/x", &none)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ftp:// is not supported"), "{err}");
    let err = RemoteStore::open("s3://", &none).unwrap_err().to_string();
    assert!(err.contains("names no bucket"), "{err}");
    let typo = BTreeMap::from([("aws_endpiont".to_string(), "x".to_string())]);
    let err = RemoteStore::open("s3://bucket/p", &typo)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key `aws_endpiont`"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let err = RemoteStore::open(&url, &typo).unwrap_err().to_string();
    assert!(err.contains("do not apply to file://"), "{err}");
}

#[test]
fn a_second_writer_of_a_checkpoint_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let remote = open(dir.path());
    let mine = Manifest {
        format: MANIFEST_FORMAT,
        job: "job".into(),
        id: 7,
        writer: "a".into(),
        packs: vec![],
        meta: meta(7),
        catalog: None,
        staged: vec![],
    };
    remote.create_manifest(&mine).unwrap();
    // An answer lost on the way: the same writer again is fine.
    remote.create_manifest(&mine).unwrap();
    let theirs = Manifest {
        writer: "b".into(),
        ..mine.clone()
    };
    let err = remote.create_manifest(&theirs).unwrap_err();
    assert!(matches!(err, RemoteError::Fenced { id: 7, .. }), "{err}");
    assert!(
        err.to_string()
            .contains("two processes run job `job` on one store"),
        "{err}"
    );
    assert_eq!(remote.manifest(7).unwrap(), mine);
}

/// Five checkpoints copied with `retain` 2 and sinks' staged epochs; the
/// store keeps two manifests and only the packs they name; each kept one
/// rebuilds a state directory that reads as the original and holds the
/// epochs still to deliver.
#[test]
fn checkpoints_copied_to_the_store_rebuild_a_lost_state_directory() {
    let (remote_dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = Arc::new(open(remote_dir.path()));
    let store = CheckpointStore::open(state.path(), "job").unwrap();
    let staging = state.path().join("sinks/out");
    std::fs::create_dir_all(&staging).unwrap();
    let mut replica = Replica::start(remote.clone(), None);
    let mut states = BTreeMap::new();
    for id in 1..=5u64 {
        let changes = format!("k{id}=v{id} shared={id}");
        let deltas = [
            delta("a", 0, &changes, Some(&format!("s{id}"))),
            delta("b", 1, &changes, None),
        ];
        store.commit(&meta(id), &deltas, 2).unwrap();
        for (op, inst) in [("a", 0), ("b", 1)] {
            states.insert((id, op, inst), store.load_instance(id, op, inst).unwrap());
        }
        // The sink sealed epoch `id`; the one before is delivered.
        std::fs::write(staging.join(format!("{id}.epoch")), format!("epoch {id}")).unwrap();
        let _ = std::fs::remove_file(staging.join(format!("{}.epoch", id - 1)));
        std::fs::write(staging.join(format!("{}.open", id + 1)), "open").unwrap();
        replica.upload(&store, id, state.path(), 2).unwrap();
        assert_eq!(answer(&replica).unwrap(), id);
        // The manifest carries the metadata as stored, with its figures.
        let stored = store.get(id).unwrap().unwrap();
        assert!(stored.bytes_written > 0 && stored.state_keys > 0);
        assert_eq!(remote.manifest(id).unwrap().meta, stored);
    }
    assert_eq!(remote.manifest_ids().unwrap(), [4, 5]);
    // Only what the two manifests read: their packs and staged epochs.
    let named: std::collections::BTreeSet<String> = [4, 5]
        .iter()
        .flat_map(|&id| {
            remote
                .manifest(id)
                .unwrap()
                .objects()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect();
    let held: std::collections::BTreeSet<String> = (remote.names("").unwrap().into_iter())
        .filter(|n| !n.starts_with("manifests/"))
        .collect();
    assert_eq!(held, named);
    for id in [4, 5] {
        let lost = tempfile::tempdir().unwrap();
        let got = sync_state_dir(&remote, lost.path(), "job", Some(id))
            .unwrap()
            .unwrap();
        assert_eq!(got.id, id);
        let rebuilt = CheckpointStore::open(lost.path(), "job").unwrap();
        assert_eq!(rebuilt.latest().unwrap().unwrap().id, id);
        // Every checkpoint the original held then (`retain` 2), whole.
        let held: Vec<u64> = rebuilt.list().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(held, [id - 1, id]);
        for at in [id - 1, id] {
            for (op, inst) in [("a", 0), ("b", 1)] {
                assert_eq!(
                    rebuilt.load_instance(at, op, inst).unwrap(),
                    states[&(at, op, inst)],
                    "{op}[{inst}] at {at}"
                );
            }
        }
        let staged: Vec<_> = std::fs::read_dir(lost.path().join("sinks/out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            staged,
            [format!("{id}.epoch")],
            "only the epoch still to deliver"
        );
    }
    let newest = tempfile::tempdir().unwrap();
    assert_eq!(
        sync_state_dir(&remote, newest.path(), "job", None)
            .unwrap()
            .unwrap()
            .id,
        5
    );
    let err = sync_state_dir(&remote, newest.path(), "job", Some(3))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint 3 has no manifest; it holds 4, 5"),
        "{err}"
    );
    let err = sync_state_dir(&remote, newest.path(), "other", None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds the checkpoints of job `job`, not `other`"),
        "{err}"
    );
}

/// A local store that holds the checkpoint is kept as it is; one that
/// does not (a newer checkpoint never copied, another job's leftovers) is
/// replaced.
#[test]
fn a_local_store_holding_the_checkpoint_is_reused() {
    let (remote_dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = Arc::new(open(remote_dir.path()));
    let store = CheckpointStore::open(state.path(), "job").unwrap();
    let replica = {
        let mut r = Replica::start(remote.clone(), None);
        store
            .commit(&meta(1), &[delta("a", 0, "k=1", None)], 3)
            .unwrap();
        r.upload(&store, 1, state.path(), 3).unwrap();
        assert_eq!(answer(&r).unwrap(), 1);
        r
    };
    drop(replica);
    // Checkpoint 2 is local only (the process died before its manifest).
    store
        .commit(&meta(2), &[delta("a", 0, "k=2", None)], 3)
        .unwrap();
    drop(store);
    let got = sync_state_dir(&remote, state.path(), "job", None)
        .unwrap()
        .unwrap();
    assert_eq!(got.id, 1);
    let store = CheckpointStore::open(state.path(), "job").unwrap();
    assert_eq!(
        store.latest().unwrap().unwrap().id,
        2,
        "kept: the restore truncates it"
    );
}

/// JSON lines like a file sink's staged epoch: repetitive, as output is.
fn json_lines(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 64);
    let mut i = 0u64;
    while out.len() < bytes {
        let line = format!(
            "{{\"word\":\"w{}\",\"count\":{}}}\n",
            (i * 7919) % 100_000,
            i / 7
        );
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out
}

/// A staged epoch larger than one read (8 MiB) is stored compressed under
/// a `.zst` name and comes back byte for byte; a name without the suffix
/// (a manifest written before compression) is stored and read as it is.
#[test]
fn staged_files_are_stored_compressed_and_come_back_whole() {
    let (remote_dir, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = open(remote_dir.path());
    let original = json_lines(20 << 20);
    let path = local.path().join("7.epoch");
    std::fs::write(&path, &original).unwrap();
    let name = staged_name(7, "w", "sinks/out/7.epoch");
    assert!(name.ends_with(".zst"), "{name}");
    assert!(remote.put_file(&name, &path).unwrap());
    let stored = std::fs::read(remote_dir.path().join(&name)).unwrap();
    assert_eq!(zstd::stream::decode_all(&stored[..]).unwrap(), original);
    assert!(
        stored.len() * 4 < original.len(),
        "{} bytes stored for {}",
        stored.len(),
        original.len()
    );
    let back = local.path().join("back");
    remote.get_file(&name, &back).unwrap();
    assert!(std::fs::read(&back).unwrap() == original, "round trip");

    let plain = "staged/00000000000000000007-w/sinks/out/7.epoch";
    assert!(remote.put_file(plain, &path).unwrap());
    assert!(std::fs::read(remote_dir.path().join(plain)).unwrap() == original);
    remote.get_file(plain, &back).unwrap();
    assert!(
        std::fs::read(&back).unwrap() == original,
        "plain round trip"
    );
    assert!(!remote.put_file(&name, &local.path().join("gone")).unwrap());
}

/// A compressed object with a flipped byte or cut short is an error naming
/// it, never different bytes: the frame's checksum and end are checked.
#[test]
fn a_damaged_compressed_object_is_an_error_naming_it() {
    let (remote_dir, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = open(remote_dir.path());
    let path = local.path().join("3.epoch");
    std::fs::write(&path, json_lines(1 << 20)).unwrap();
    let name = staged_name(3, "w", "sinks/out/3.epoch");
    remote.put_file(&name, &path).unwrap();
    let stored_at = remote_dir.path().join(&name);
    let stored = std::fs::read(&stored_at).unwrap();
    let mut flipped = stored.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x40;
    let cut = stored[..stored.len() - 9].to_vec();
    for (what, bytes) in [("a flipped byte", flipped), ("cut short", cut)] {
        std::fs::write(&stored_at, bytes).unwrap();
        let err = remote
            .get_file(&name, &local.path().join("back"))
            .unwrap_err();
        assert!(matches!(err, RemoteError::Damaged { .. }), "{what}: {err}");
        assert!(err.to_string().contains(&name), "{what}: {err}");
    }

    // Packs likewise.
    let pack_at = remote_dir.path().join(pack_name(3, "w"));
    std::fs::create_dir_all(pack_at.parent().unwrap()).unwrap();
    std::fs::write(&pack_at, &stored[..stored.len() / 2]).unwrap();
    let err = remote.pack(&pack_name(3, "w")).unwrap_err();
    assert!(matches!(err, RemoteError::Damaged { .. }), "{err}");
}

/// A local store that holds a checkpoint of the same id as the store's
/// newest manifest, but not that checkpoint (another process's, whose
/// manifest was fenced: other offsets, other state), is rebuilt from the
/// store, never restored as it is.
#[test]
fn a_local_checkpoint_of_the_same_id_but_another_writer_is_replaced() {
    let remote_dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let remote = Arc::new(open(remote_dir.path()));
    let store = CheckpointStore::open(theirs.path(), "job").unwrap();
    store
        .commit(&meta(1), &[delta("a", 0, "k=theirs", None)], 3)
        .unwrap();
    let mut replica = Replica::start(remote.clone(), None);
    replica.upload(&store, 1, theirs.path(), 3).unwrap();
    assert_eq!(answer(&replica).unwrap(), 1);
    drop((replica, store));
    // This process committed its own checkpoint 1 locally, a moment later,
    // and was fenced when it created the manifest.
    let mine = CheckpointStore::open(ours.path(), "job").unwrap();
    let later = CheckpointMeta {
        started_at_ms: meta(1).started_at_ms + 250,
        ..meta(1)
    };
    mine.commit(&later, &[delta("a", 0, "k=mine", None)], 3)
        .unwrap();
    drop(mine);
    sync_state_dir(&remote, ours.path(), "job", None)
        .unwrap()
        .unwrap();
    let rebuilt = CheckpointStore::open(ours.path(), "job").unwrap();
    let want = CheckpointStore::open(theirs.path(), "job")
        .unwrap()
        .load_instance(1, "a", 0)
        .unwrap();
    assert_eq!(rebuilt.load_instance(1, "a", 0).unwrap(), want);
    assert_eq!(
        rebuilt.get(1).unwrap().unwrap().started_at_ms,
        meta(1).started_at_ms
    );
}

/// A writer whose manifests were superseded (a zombie, or an attempt
/// fenced at its create) collects no garbage: the new owner's manifests,
/// newer than any it knows, name packs of the old chain, which it would
/// otherwise take for orphans.
#[test]
fn a_superseded_writer_deletes_nothing_the_new_owner_names() {
    let dir = tempfile::tempdir().unwrap();
    let remote = open(dir.path());
    let manifest = |id: u64, writer: &str, packs: Vec<String>| Manifest {
        format: MANIFEST_FORMAT,
        job: "job".into(),
        id,
        writer: writer.into(),
        packs,
        meta: meta(id),
        catalog: None,
        staged: vec![],
    };
    let base = pack_name(1, "a");
    remote
        .put_pack(&base, bytes::Bytes::from_static(b"base"))
        .unwrap();
    let mut known_a = BTreeMap::new();
    for id in 1..=3 {
        let m = manifest(id, "a", vec![base.clone()]);
        remote.create_manifest(&m).unwrap();
        known_a.insert(id, m.objects().cloned().collect());
    }
    // The new owner restored 3 and went on: its chain still reads the base.
    let mut known_b = BTreeMap::new();
    for id in 4..=6 {
        let own = pack_name(id, "b");
        remote
            .put_pack(&own, bytes::Bytes::from_static(b"delta"))
            .unwrap();
        remote
            .create_manifest(&manifest(id, "b", vec![base.clone(), own]))
            .unwrap();
        remote.collect_garbage(id, 2, &mut known_b).unwrap();
    }
    assert_eq!(remote.manifest_ids().unwrap(), [5, 6]);
    // The old writer wakes after its manifest 3 and collects garbage.
    remote.collect_garbage(3, 2, &mut known_a).unwrap();
    let names = remote.names("").unwrap();
    for id in 5..=6 {
        for object in remote.manifest(id).unwrap().objects() {
            assert!(
                names.contains(object),
                "{object} of manifest {id} deleted: {names:?}"
            );
        }
    }
}
