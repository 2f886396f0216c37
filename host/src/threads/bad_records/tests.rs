use super::*;
use crate::connectors::source::SourceError;

fn bad(line: u64, value: &[u8]) -> BadRecord {
    BadRecord {
        kind: BadKind::Unreadable,
        error: SourceError::Malformed {
            source_id: "in".into(),
            path: "in.jsonl".into(),
            line,
            message: "not JSON: expected value".into(),
        },
        origin: format!("in.jsonl line {line}"),
        key: None,
        value: value.to_vec(),
        timestamp: Some(7),
    }
}

fn source() -> BadAt {
    BadAt {
        kind: NodeKind::Source,
        id: "in".into(),
        job: "job".into(),
        instance: None,
    }
}

fn handling(policy: OnError, max_bad: Option<u64>) -> BadRecords {
    let port = policy.dead_letter_sink().map(|_| 1);
    BadRecords::new(source(), (policy, max_bad), port, 4)
}

/// `fail` fails with the first bad record's own error; nothing is
/// counted.
#[test]
fn fail_fails_with_the_first_bad_record() {
    let m = NodeMetrics::default();
    let err = handling(OnError::Fail, None)
        .read(vec![bad(3, b"{"), bad(5, b"x")], &m)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "source `in`: in.jsonl:3: not JSON: expected value"
    );
    assert_eq!(m.records_bad.total(), 0);
}

/// A dead letter holds the error, where the record came from and the
/// record as read; bytes that are not text are base64.
#[test]
fn dead_letters_say_what_was_wrong_and_where() {
    let m = NodeMetrics::default();
    let mut h = handling(OnError::DeadLetter("dlq".into()), None);
    let letters = h
        .read(vec![bad(3, b"{"), bad(5, b"\xff")], &m)
        .unwrap()
        .unwrap();
    assert_eq!(letters.len(), 2);
    let first: Value = serde_json::from_slice(letters.get(0).value).unwrap();
    assert_eq!(
        first,
        json!({"error": "not JSON: expected value", "error_kind": "unreadable",
               "job": "job", "node": "in",
               "kind": "source", "origin": "in.jsonl line 3", "checkpoint": 4,
               "timestamp": 7, "key": null, "value": "{"})
    );
    assert_eq!(letters.get(0).timestamp, Some(7));
    let second: Value = serde_json::from_slice(letters.get(1).value).unwrap();
    assert_eq!(second["value_base64"], "/w==");
    assert!(second.get("value").is_none());
    h.barrier(4);
    let later = h.read(vec![bad(9, b"[")], &m).unwrap().unwrap();
    let later: Value = serde_json::from_slice(later.get(0).value).unwrap();
    assert_eq!(later["checkpoint"], 5, "read after barrier 4");
    assert_eq!(m.records_bad.total(), 3);
}

/// An operator's dead letter names its instance and plugin.
#[test]
fn an_operators_dead_letter_names_its_instance_and_plugin() {
    let plugin = json!({"name": "reconcile", "version": "1.0.0", "sha256": "ab"});
    let node = BadAt {
        kind: NodeKind::Operator,
        id: "rec".into(),
        job: "job".into(),
        instance: Some((1, plugin.clone())),
    };
    let letter = Letter {
        kind: BadKind::InvalidInput,
        first_time: true,
        error: "invalid input: amount `x`".into(),
        origin: "a.csv line 4 of source `a`".into(),
        port: Some("a".into()),
        key: Some(b"o-4".to_vec()),
        value: b"{}".to_vec(),
        timestamp: None,
    };
    let out: Value = serde_json::from_slice(&dead_letter(&letter, &node, 9)).unwrap();
    assert_eq!(out["instance"], 1);
    assert_eq!(out["plugin"], plugin);
    assert_eq!(
        (out["kind"].as_str(), out["key"].as_str()),
        (Some("operator"), Some("o-4"))
    );
    assert_eq!(out["error_kind"], "invalid-input");
    assert_eq!(out["port"], "a");
}

/// `skip` counts and sends nothing; past `max_bad` between two
/// barriers the node fails, naming the budget and the last record.
#[test]
fn skip_counts_and_the_budget_is_per_checkpoint() {
    let m = NodeMetrics::default();
    let mut h = handling(OnError::Skip, Some(2));
    assert!(
        h.read(vec![bad(1, b"{"), bad(2, b"{")], &m)
            .unwrap()
            .is_none()
    );
    h.barrier(4);
    assert!(h.read(vec![bad(3, b"{")], &m).unwrap().is_none());
    let err = h.read(vec![bad(4, b"{"), bad(6, b"{")], &m).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(
            "source `in`: 3 bad records since its last checkpoint, more than max_bad = 2"
        ),
        "{text}"
    );
    assert!(text.contains("in.jsonl line 6: not JSON"), "{text}");
    assert_eq!(m.records_bad.total(), 5);
    assert_eq!(m.records_bad.get(BadKind::Unreadable), 5);
}

/// A failure on a batch of one record names it; on several, they go one
/// call each next time, and the failure of one of those names it. What
/// is known already is no news.
#[test]
fn replays_learn_which_record_a_plugin_fails_on() {
    let from = Provenance {
        source: "in".into(),
        place: "in.txt line 7".into(),
        records: 1,
    };
    let mut inputs = BadInputs::default();
    assert!(inputs.of("op", &from).is_none());
    assert_eq!(
        inputs.learn("op", &from, (3, None), (BadKind::Trap, "trap".into())),
        Some(Learnt::OneByOne)
    );
    assert!(inputs.of("op", &from).unwrap().one_by_one);
    let again = inputs.learn("op", &from, (3, None), (BadKind::Trap, "trap".into()));
    assert_eq!(again, None, "known");
    assert_eq!(
        inputs.learn("op", &from, (1, Some(2)), (BadKind::Trap, "trap".into())),
        Some(Learnt::Record)
    );
    let again = inputs.learn("op", &from, (1, Some(2)), (BadKind::Trap, "trap".into()));
    assert_eq!(again, None, "known");
    let found = inputs.of("op", &from).unwrap();
    let bad: Vec<(&usize, &str)> = found.bad.iter().map(|(i, r)| (i, &*r.error)).collect();
    assert_eq!(bad, [(&2, "trap")]);
    assert!(found.bad[&2].first_time());
    let later = inputs.clone();
    assert!(
        !later.of("op", &from).unwrap().bad[&2].first_time(),
        "counted once, clones alike"
    );
    assert!(inputs.of("other", &from).is_none(), "per operator");
    let alone = Provenance {
        place: "in.txt line 9".into(),
        ..from
    };
    assert_eq!(
        inputs.learn(
            "op",
            &alone,
            (1, None),
            (BadKind::InvalidInput, "bad".into())
        ),
        Some(Learnt::Record)
    );
    assert_eq!(
        inputs
            .of("op", &alone)
            .unwrap()
            .bad
            .keys()
            .collect::<Vec<_>>(),
        [&0]
    );
}

/// The dead letter of a row (a record an operator that reads rows
/// refused) holds its JSON text, as every other reader sees it.
#[test]
fn a_rows_dead_letter_holds_its_json_text() {
    let mut row = Vec::new();
    weir_flat::row::RowWriter::new(&mut row)
        .str("id", "a")
        .decimal("amount", "1.50");
    let mut batch = Batch::new();
    batch.push(None, b"plain", None);
    batch.push_row(Some(b"a"), &row, Some(4));
    let letter = Letter::of(&batch, 1, (BadKind::InvalidInput, "no"));
    assert_eq!(letter.value, br#"{"id":"a","amount":1.50}"#);
    assert_eq!(
        (letter.key.as_deref(), letter.timestamp),
        (Some(&b"a"[..]), Some(4))
    );
    assert_eq!(
        Letter::of(&batch, 0, (BadKind::InvalidInput, "no")).value,
        b"plain"
    );
}
