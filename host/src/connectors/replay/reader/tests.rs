use std::io::Write;

use serde_json::json;

use super::*;
use crate::connectors::replay::{StillReading, enqueue};

fn ports() -> Vec<String> {
    vec!["left".into(), "right".into()]
}

fn letter(port: &str, value: &str, ts: i64) -> Value {
    json!({"node": "op", "kind": "operator", "port": port, "key": format!("k-{value}"),
           "value": value, "timestamp": ts, "origin": format!("in.txt line {ts} of source `in`")})
}

/// The reader of the queue at `path` for operator `op` of ports `left`
/// and `right`, waiting on `others`, resuming at `offset`.
fn open(
    path: &std::path::Path,
    others: StillReading,
    offset: Option<&Value>,
) -> Result<ReplayReader, SourceError> {
    ReplayReader::open(path.to_path_buf(), "replay:op", ports(), others, offset)
}

/// A record read back: its port, key, value and timestamp.
type Read = (u32, Option<String>, String, Option<i64>);

/// Each record `reader` reads until it has nothing more, batch by batch.
fn drain(reader: &mut ReplayReader) -> Vec<Vec<Read>> {
    let mut out = Vec::new();
    while let Some(batch) = reader.read_batch(10).unwrap() {
        if batch.is_empty() {
            break;
        }
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        let port = reader.output_port();
        out.push(
            (0..batch.len())
                .map(|i| {
                    let r = batch.get(i);
                    (port, r.key.map(text), text(r.value), r.timestamp)
                })
                .collect(),
        );
    }
    out
}

#[test]
fn letters_are_read_back_as_records_one_port_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("op.jsonl");
    let mut base64 = letter("right", "", 4);
    base64["value"] = Value::Null;
    base64["value_base64"] = "/wA=".into();
    base64["key"] = Value::Null;
    let letters = [
        letter("left", "a", 1),
        letter("left", "b", 2),
        letter("right", "c", 3),
    ];
    enqueue(&path, "job", "op", &letters).unwrap();
    let mut reader = open(&path, StillReading::new(0), None).unwrap();
    let first = reader.read_batch(10).unwrap().unwrap();
    assert_eq!((first.len(), reader.output_port()), (2, 0));
    assert_eq!(reader.place().unwrap(), "replays/op.jsonl lines 2–3");
    let second = reader.read_batch(10).unwrap().unwrap();
    assert_eq!((second.len(), reader.output_port()), (1, 1));
    assert_eq!(
        reader.place().unwrap(),
        "replays/op.jsonl line 4 (first: in.txt line 3 of source `in`)"
    );
    assert!(
        reader.read_batch(10).unwrap().is_none(),
        "ends without tail"
    );
    // Bytes that are not UTF-8 come back as they were.
    enqueue(&path, "job", "op", &[base64]).unwrap();
    let batch = reader.read_batch(10).unwrap().unwrap();
    assert_eq!(
        (batch.get(0).key, batch.get(0).value),
        (None, &[0xff, 0][..])
    );
}

#[test]
fn a_reader_resumes_at_its_offset_and_reads_only_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("op.jsonl");
    enqueue(&path, "job", "op", &[letter("left", "a", 1)]).unwrap();
    let mut reader = open(&path, StillReading::new(1), None).unwrap();
    assert_eq!(drain(&mut reader).concat().len(), 1);
    let offset = reader.offset();
    assert_eq!(offset["line"], 2);
    // Half a letter is not read until its line is whole.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let whole = format!("{}\n", letter("right", "b", 2));
    file.write_all(&whole.as_bytes()[..10]).unwrap();
    assert!(reader.read_batch(10).unwrap().unwrap().is_empty(), "tails");
    file.write_all(&whole.as_bytes()[10..]).unwrap();
    let b = (1, Some("k-b".to_owned()), "b".to_owned(), Some(2));
    assert_eq!(drain(&mut reader), vec![vec![b.clone()]]);
    // Reopened at the first offset: the second letter again, only it.
    let mut again = open(&path, StillReading::new(0), Some(&offset)).unwrap();
    assert_eq!(drain(&mut again), vec![vec![b]]);
    assert_eq!(again.offset(), reader.offset());
}

#[test]
fn a_missing_queue_is_empty_and_another_queue_is_read_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("op.jsonl");
    let others = StillReading::new(1);
    let mut tailing = open(&path, others.clone(), None).unwrap();
    assert!(
        tailing.read_batch(10).unwrap().unwrap().is_empty(),
        "waits while others read"
    );
    others.ended();
    assert!(tailing.read_batch(10).unwrap().is_none(), "ends after them");
    let mut ending = open(&path, StillReading::new(0), None).unwrap();
    assert!(ending.read_batch(10).unwrap().is_none());
    assert_eq!(
        ending.offset(),
        json!({"queue": null, "byte": 0, "line": 0})
    );
    // A checkpoint's offset in a queue since deleted and made again.
    enqueue(&path, "job", "op", &[letter("left", "a", 1)]).unwrap();
    let old = json!({"queue": "gone", "byte": 999, "line": 40});
    let mut reader = open(&path, StillReading::new(0), Some(&old)).unwrap();
    assert_eq!(drain(&mut reader).concat().len(), 1);
    let bad = json!({"byte": "x"});
    assert!(open(&path, StillReading::new(0), Some(&bad)).is_err());
}

#[test]
fn letters_that_cannot_be_replayed_are_bad_records_of_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("op.jsonl");
    let mut no_port = letter("left", "c", 3);
    no_port["port"] = Value::Null;
    let letters = [letter("middle", "a", 1), letter("left", "b", 2), no_port];
    enqueue(&path, "job", "op", &letters).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"not json\n")
        .unwrap();
    let mut reader = open(&path, StillReading::new(0), None).unwrap();
    assert_eq!(drain(&mut reader).concat().len(), 1, "only `b`");
    let bad = reader.take_bad();
    let reasons: Vec<String> = bad.iter().map(BadRecord::reason).collect();
    assert_eq!(bad.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("no input port \"middle\" (its inputs: left, right)"));
    assert!(reasons[1].contains("names no input `port`"));
    assert!(reasons[2].contains("not a dead letter"));
    assert_eq!(bad[2].origin, "replays/op.jsonl line 5");
    assert!(bad.iter().all(|b| b.kind == BadKind::Unreadable));
}

#[test]
fn the_first_origin_of_a_letter_that_failed_again_is_kept() {
    let again =
        "replays/op.jsonl line 4 (first: in.txt line 3 of source `in`) of source `replay:op`";
    assert_eq!(first_origin(again), "in.txt line 3 of source `in`");
    assert_eq!(
        first_origin("in.txt line 3 of source `in`"),
        "in.txt line 3 of source `in`"
    );
}
