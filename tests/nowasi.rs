//! The `weir:operator` world works for components that import no WASI at all,
//! as C or Zig without libc produce: `plugins/word-count` built for
//! `wasm32-unknown-unknown` and made a component with `wit-component`.

use serde_json::{Value, json};
use weir::{OperatorInstance, Plugin, Record, Runtime};
use weir_cli::inspect::PluginReport;
use weir_tests::plugins;

fn rec(v: &str) -> Record {
    Record::new(v.as_bytes().to_vec())
}

/// Runs word-count over `words` in two batches, then in a fresh instance
/// restored from the first one's host state; returns both outputs as
/// (key, JSON value) and the final count of "be".
/// Emitted (key, value) pairs, and the host state of one word afterwards.
type Ran = (Vec<(Vec<u8>, Value)>, Option<Vec<u8>>);

fn run(p: &Plugin, config: &str, words: &[&str]) -> Ran {
    let out = |inst: &mut OperatorInstance| -> Vec<(Vec<u8>, Value)> {
        inst.take_output(0)
            .iter()
            .map(|r| {
                let key = r.key.clone().expect("output is keyed by the word");
                (key, serde_json::from_slice(&r.value).unwrap())
            })
            .collect()
    };
    let (first, second) = words.split_at(words.len() / 2);
    let mut inst = OperatorInstance::new(p, "wc", 0, 1, config).unwrap();
    inst.process(0, &first.iter().map(|w| rec(w)).collect::<Vec<_>>())
        .unwrap();
    let mut got = out(&mut inst);
    // Host state moves to a fresh instance, as after a checkpoint and a
    // restore.
    inst.on_checkpoint(1).unwrap();
    let state = inst.state().clone();
    let mut fresh = OperatorInstance::new(p, "wc", 0, 1, config).unwrap();
    fresh.restore(state, p.info().state_version, &[]).unwrap();
    fresh
        .process(0, &second.iter().map(|w| rec(w)).collect::<Vec<_>>())
        .unwrap();
    got.extend(out(&mut fresh));
    fresh.finish().unwrap();
    let be = fresh.state().get(b"be\0count").map(<[u8]>::to_vec);
    (got, be)
}

#[test]
fn word_count_without_wasi_imports_no_wasi() {
    let rt = Runtime::new().unwrap();
    let p = rt.load(plugins::WORD_COUNT_NOWASI).unwrap();
    let report = PluginReport::of(&p, rt.engine());
    assert!(
        report.imports.iter().all(|i| !i.starts_with("wasi:")),
        "imports: {:?}",
        report.imports
    );
    assert!(
        report
            .imports
            .iter()
            .any(|i| i.starts_with("weir:operator/")),
        "it still imports the host interfaces: {:?}",
        report.imports
    );
    // The wasip2 build of the same crate does import WASI: the check above
    // would catch a WASI import.
    let wasip2 = rt.load(plugins::WORD_COUNT).unwrap();
    let wasip2_imports = PluginReport::of(&wasip2, rt.engine()).imports;
    assert!(
        wasip2_imports.iter().any(|i| i.starts_with("wasi:")),
        "{wasip2_imports:?}"
    );
    assert_eq!(p.info(), wasip2.info());
}

#[test]
fn word_count_without_wasi_counts_like_the_wasip2_build() {
    let rt = Runtime::new().unwrap();
    let nowasi = rt.load(plugins::WORD_COUNT_NOWASI).unwrap();
    let wasip2 = rt.load(plugins::WORD_COUNT).unwrap();

    let words = ["to", "be", "or", "not", "to", "be", " be ", "", "To"];
    let (got, be) = run(&nowasi, "{}", &words);
    let expected = [
        ("to", 1),
        ("be", 1),
        ("or", 1),
        ("not", 1),
        ("to", 2),
        ("be", 2),
        ("be", 3),
        ("To", 1),
    ];
    assert_eq!(got.len(), expected.len(), "{got:?}");
    for ((key, value), (word, count)) in got.iter().zip(expected) {
        assert_eq!(key, word.as_bytes());
        assert_eq!(value, &json!({"word": word, "count": count}));
    }
    assert_eq!(be.as_deref(), Some(&b"3"[..]));
    assert_eq!((got, be), run(&wasip2, "{}", &words));

    // Config is parsed inside the guest the same way, errors included.
    let lower = run(&nowasi, r#"{"lowercase":true}"#, &words);
    assert_eq!(lower.0.last().unwrap().1, json!({"word": "to", "count": 3}));
    assert_eq!(lower, run(&wasip2, r#"{"lowercase":true}"#, &words));
    let err = OperatorInstance::new(&nowasi, "wc", 0, 1, r#"{"lowercas":true}"#).unwrap_err();
    let err2 = OperatorInstance::new(&wasip2, "wc", 0, 1, r#"{"lowercas":true}"#).unwrap_err();
    assert_eq!(err.to_string(), err2.to_string());
}
