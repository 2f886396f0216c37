//! Every example plugin, built to a component, run through the host with
//! in-memory state: the contract works end to end.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use weir::{InstanceError, OperatorInstance, Record, Runtime};
use weir_tests::pipeline::XorShift;
use weir_tests::plugins;
use weir_tests::text::assert_has_all;

fn runtime() -> Runtime {
    Runtime::new().expect("wasmtime starts")
}

fn rec(v: &str) -> Record {
    Record::new(v.as_bytes().to_vec())
}

fn texts(out: &[Record]) -> Vec<String> {
    out.iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect()
}

#[test]
fn every_plugin_loads_and_describes_itself() {
    let rt = runtime();
    for (name, path) in plugins::ALL {
        let p = rt.load(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        // word-count-v2 is the next version of word-count, under the same name.
        let (want_name, want_version) = match *name {
            "word-count-v2" => ("word-count", "2.0.0"),
            other => (other, "0.1.0"),
        };
        assert_eq!(p.info().name, want_name);
        assert_eq!(p.info().version, want_version);
        assert_eq!(p.sha256().len(), 64);
    }
}

#[test]
fn filter_keeps_matching_records() {
    let rt = runtime();
    let p = rt.load(plugins::FILTER).unwrap();
    let mut inst =
        OperatorInstance::new(&p, "f", 0, 1, r#"{"field":"amount","op":"ge","value":10}"#).unwrap();
    let input = [
        r#"{"amount":5}"#,
        r#"{"amount":10}"#,
        r#"{"amount":"x"}"#,
        r#"{"amount":99.5}"#,
    ];
    inst.process(0, &input.map(rec)).unwrap();
    assert_eq!(texts(&inst.take_output(0)), [input[1], input[3]]);
    inst.finish().unwrap();
    assert!(inst.state().is_empty(), "filter is stateless");
}

#[test]
fn filter_reports_bad_config_as_a_returned_error() {
    let rt = runtime();
    let p = rt.load(plugins::FILTER).unwrap();
    let err = OperatorInstance::new(&p, "f", 0, 1, r#"{"field":"a"}"#).unwrap_err();
    assert!(
        matches!(
            err,
            InstanceError::Returned {
                hook: weir::wasm::Hook::Open,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert_has_all(&msg, &["operator `f[0]`", "op"]);
}

#[test]
fn word_count_keeps_counts_in_host_state() {
    let rt = runtime();
    let p = rt.load(plugins::WORD_COUNT).unwrap();
    let mut inst = OperatorInstance::new(&p, "wc", 0, 1, "{}").unwrap();
    inst.process(0, &["to", "be", "or", "not", "to", "be"].map(rec))
        .unwrap();
    let out: Vec<Value> = inst
        .take_output(0)
        .iter()
        .map(|r| serde_json::from_slice(&r.value).unwrap())
        .collect();
    assert_eq!(out.len(), 6);
    assert_eq!(out[4], json!({"word": "to", "count": 2}));
    // Typed state reaches the host when the hook before a snapshot returns.
    inst.on_checkpoint(1).unwrap();
    assert_eq!(inst.state().get(b"be\0count"), Some(&b"2"[..]));
    // Host state moves to a fresh instance, as after a restore.
    let state = inst.state().clone();
    let mut fresh = OperatorInstance::new(&p, "wc", 0, 1, "{}").unwrap();
    fresh.restore(state, p.info().state_version, &[]).unwrap();
    fresh.process(0, &[rec("be")]).unwrap();
    assert_eq!(texts(&fresh.take_output(0)), [r#"{"word":"be","count":3}"#]);
}

#[test]
fn dedupe_round_trips_its_snapshot() {
    let rt = runtime();
    let p = rt.load(plugins::DEDUPE).unwrap();
    let mut inst = OperatorInstance::new(&p, "d", 0, 1, "{}").unwrap();
    inst.process(0, &["a", "b", "a"].map(rec)).unwrap();
    assert_eq!(texts(&inst.take_output(0)), ["a", "b"]);
    inst.on_checkpoint(1).unwrap();
    let snap = inst.snapshot().unwrap();
    assert!(!snap.is_empty());
    let mut fresh = OperatorInstance::new(&p, "d", 0, 1, "{}").unwrap();
    fresh.restore(Default::default(), 1, &snap).unwrap();
    fresh.process(0, &["b", "c", "a"].map(rec)).unwrap();
    assert_eq!(texts(&fresh.take_output(0)), ["c"]);
    // Corrupt bytes are refused by the plugin, not a crash.
    let mut broken = OperatorInstance::new(&p, "d", 0, 1, "{}").unwrap();
    let err = broken
        .restore(Default::default(), 1, &snap[..snap.len() - 1])
        .unwrap_err();
    assert!(err.to_string().contains("incompatible state"), "{err}");
}

/// The reference coGroup: classify each key from the first record per side.
fn reference(a: &[(String, f64)], b: &[(String, f64)], tolerance: f64) -> BTreeMap<String, Value> {
    let mut sides: BTreeMap<String, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for (k, v) in a {
        sides.entry(k.clone()).or_default().0.get_or_insert(*v);
    }
    for (k, v) in b {
        sides.entry(k.clone()).or_default().1.get_or_insert(*v);
    }
    sides
        .into_iter()
        .map(|(k, (a, b))| {
            let status = match (a, b) {
                (Some(x), Some(y)) if (x - y).abs() <= tolerance + 1e-9 => "MATCH",
                (Some(_), Some(_)) => "AMOUNT_MISMATCH",
                (Some(_), None) => "ONLY_A",
                _ => "ONLY_B",
            };
            let v = json!({"key": k, "status": status, "a": a, "b": b});
            (k, v)
        })
        .collect()
}

#[test]
fn reconcile_classifies_like_the_reference() {
    let mut rng = XorShift(0x9e3779b97f4a7c15);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..2000 {
        let key = format!("ORD-{i:05}");
        let cents = (rng.next_u64() % 100_000) as f64 / 100.0;
        match rng.next_u64() % 10 {
            0 => a.push((key, cents)),
            1 => b.push((key, cents)),
            2 => {
                a.push((key.clone(), cents));
                b.push((key, cents + 1.0));
            }
            3 => {
                a.push((key.clone(), cents));
                b.push((key, cents + 0.004)); // within tolerance
            }
            _ => {
                a.push((key.clone(), cents));
                b.push((key, cents));
            }
        }
    }
    // Arrival order differs per side.
    for i in (1..b.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        b.swap(i, j);
    }
    let expected = reference(&a, &b, 0.005);

    let to_records = |side: &[(String, f64)], amount_as_string: bool| -> Vec<Record> {
        side.iter()
            .map(|(k, v)| {
                let body = if amount_as_string {
                    json!({"amount": v.to_string()})
                } else {
                    json!({"amount": v})
                };
                Record::new(body.to_string().into_bytes()).with_key(k.as_bytes().to_vec())
            })
            .collect()
    };
    let (ra, rb) = (to_records(&a, false), to_records(&b, true));

    let rt = runtime();
    let p = rt.load(plugins::RECONCILE).unwrap();
    let mut inst = OperatorInstance::new(&p, "rc", 0, 1, r#"{"tolerance":0.005}"#).unwrap();
    let mut out = Vec::new();
    // Interleave batches of different sizes from both inputs.
    let (mut ia, mut ib) = (ra.chunks(37), rb.chunks(101));
    loop {
        let (x, y) = (ia.next(), ib.next());
        if x.is_none() && y.is_none() {
            break;
        }
        if let Some(batch) = x {
            inst.process(0, batch).unwrap();
        }
        if let Some(batch) = y {
            inst.process(1, batch).unwrap();
        }
        out.extend(inst.take_output(0));
    }
    inst.finish().unwrap();
    out.extend(inst.take_output(0));

    let mut got: HashMap<String, Value> = HashMap::new();
    for r in &out {
        let v: Value = serde_json::from_slice(&r.value).unwrap();
        let key = v["key"].as_str().unwrap().to_string();
        assert_eq!(
            r.key.as_deref(),
            Some(key.as_bytes()),
            "output is keyed by the order key"
        );
        assert!(
            got.insert(key.clone(), v).is_none(),
            "key {key} emitted twice"
        );
    }
    assert_eq!(got.len(), expected.len());
    for (k, v) in &expected {
        assert_eq!(&got[k], v, "key {k}");
    }
    let statuses: std::collections::BTreeSet<_> =
        expected.values().map(|v| v["status"].to_string()).collect();
    assert_eq!(statuses.len(), 4, "the data exercises every status");
}
