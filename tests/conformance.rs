//! The conformance suite: `word-count` and `reconcile` written in Python, C,
//! JavaScript and Zig behave exactly like the Rust reference plugins.
//!
//! For every build of each operator (see `weir_tests::polyglot`):
//! - the same scripted inputs give byte-for-byte the same outputs (port, key,
//!   timestamp, value), errors (by kind), host state and timers as the Rust
//!   build, at every checkpoint and at the end, through [`OperatorInstance`];
//! - snapshot and restore round-trip, also across languages (state and timers
//!   written by the Rust build continue in the other build, and back);
//! - a `weir run` job gives the same output lines as with the Rust build;
//! - a job survives SIGKILL and restores exactly-once;
//! - a `reconcile` checkpoint of state version 1 (values as JSON text, not
//!   yet row values) continues in every build;
//! - a Rust `word-count` checkpoint restored with `--swap count=<other>.wasm`
//!   keeps every count: state belongs to the host, not to a language;
//! - an exception a Python plugin does not catch is in `weir run`'s final
//!   error line, in Python's own words.
//!
//! Event time: the Python `reconcile` (world `operator-timers`) also
//! implements `timeout`; scripts with watermark advances (`set_watermark`,
//! then `fire_timers` as an instance task does) give the same outputs on
//! `out` and `late`, state and timers as the Rust build, across restores and
//! languages. The C, JavaScript and Zig builds stay on world `operator`,
//! without `timeout` and without the `late` port: they prove that components
//! of the old world keep working unchanged.
//!
//! A language whose toolchain cannot be installed on this machine fails the
//! suite; `WEIR_POLYGLOT_OPTIONAL=1` skips it instead, with its reason
//! printed (`SKIPPED ...`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use weir::keyed::state::KeyedState;
use weir::keyed::timers::{Domain, Timers};
use weir::keyed::value::readable;
use weir::{InstanceError, OperatorInfo, OperatorInstance, Plugin, Record, Runtime};
use weir_tests::cli::Weir;
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{self, count_words};
use weir_tests::pipeline::{XorShift, assert_same_lines, seed, wordcount_words};
use weir_tests::plugins;
use weir_tests::polyglot::{self, Lang};
use weir_tests::streaming::{self, Script};
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

// ------------------------------------------------------------------ plugins

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::new().expect("wasmtime starts"))
}

/// Loads (compiles) each component once per process.
fn load(path: &Path) -> Plugin {
    static LOADED: OnceLock<Mutex<BTreeMap<PathBuf, Plugin>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Default::default);
    if let Some(p) = loaded.lock().unwrap().get(path) {
        return p.clone();
    }
    let p = runtime()
        .load(path)
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    loaded
        .lock()
        .unwrap()
        .entry(path.to_path_buf())
        .or_insert(p)
        .clone()
}

/// The Rust reference build of `operator`.
fn reference(operator: &str) -> PathBuf {
    PathBuf::from(match operator {
        "word-count" => plugins::WORD_COUNT,
        "reconcile" => plugins::RECONCILE,
        other => panic!("no reference for {other}"),
    })
}

/// The `lang` build of `operator`, or `None` (printed) when the language's
/// toolchain cannot be installed here.
fn build_of(lang: Lang, operator: &str, test: &str) -> Option<PathBuf> {
    match polyglot::component(lang, operator) {
        Ok(p) => Some(p),
        Err(reason) => {
            polyglot::skip(test, &reason);
            None
        }
    }
}

// ------------------------------------------------------------------ scripts

fn rec(value: impl Into<Vec<u8>>) -> Record {
    Record::new(value.into())
}

fn keyed(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Record {
    let mut r = Record::new(value.into());
    r.key = Some(key.into());
    r
}

/// `key` keyed `value` at event time `ts`.
fn stamped(key: Option<&str>, value: impl Into<Vec<u8>>, ts: i64) -> Record {
    let mut r = Record::new(value.into());
    r.key = key.map(|k| k.as_bytes().to_vec());
    r.timestamp = Some(ts);
    r
}

/// One call into an operator instance.
#[derive(Clone)]
enum Step {
    Process(u32, Vec<Record>),
    /// The watermark advances to this: `set_watermark`, then the due
    /// event-time timers fire, as an instance task does.
    Watermark(i64),
    Checkpoint(u64),
    Finish,
}

/// One emitted record: output port, key, timestamp, value.
type Emitted = (u32, Option<Vec<u8>>, Option<i64>, String);

/// What one step gave: the records emitted, or the kind of error (messages
/// may be worded differently per language).
type Outcome = Result<Vec<Emitted>, String>;

/// Host state entries, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// What the host holds for an instance: keyed state, watermark and timers.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    state: Entries,
    watermark: Option<i64>,
    timers: Vec<(Domain, i64, Vec<u8>)>,
}

impl Held {
    fn of(inst: &OperatorInstance) -> Self {
        let t = inst.timers();
        Held {
            state: state_entries(inst.state()),
            watermark: t.watermark(),
            timers: [Domain::EventTime, Domain::ProcessingTime]
                .into_iter()
                .flat_map(|d| t.iter(d).map(move |(time, key)| (d, time, key.to_vec())))
                .collect(),
        }
    }
}

/// Every step's outcome, what the host held after each checkpoint step,
/// and at the end.
#[derive(Debug)]
struct Trace {
    outcomes: Vec<Outcome>,
    at_checkpoints: Vec<Held>,
    end: Held,
}

fn error_kind(e: &InstanceError) -> String {
    match e {
        InstanceError::Returned { error, .. } => error.kind.name().to_string(),
        other => format!("not a returned error: {other}"),
    }
}

fn state_entries(state: &KeyedState) -> Entries {
    state
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

/// Runs `steps` on `inst`; returns each step's outcome and what the host
/// held after each checkpoint step.
fn play(inst: &mut OperatorInstance, steps: &[Step]) -> (Vec<Outcome>, Vec<Held>) {
    let mut outcomes = Vec::new();
    let mut at_checkpoints = Vec::new();
    for step in steps {
        let result = match step {
            Step::Process(port, batch) => inst.process(*port, batch),
            Step::Watermark(w) => {
                inst.set_watermark(*w);
                inst.fire_timers(Domain::EventTime, *w).map(|_| ())
            }
            Step::Checkpoint(id) => inst.on_checkpoint(*id),
            Step::Finish => inst.finish(),
        };
        if matches!(step, Step::Checkpoint(_)) {
            at_checkpoints.push(Held::of(inst));
        }
        let out: Vec<_> = (0..inst.output_ports() as u32)
            .flat_map(|p| inst.take_output(p).into_iter().map(move |r| (p, r)))
            .map(|(p, r)| {
                (
                    p,
                    r.key,
                    r.timestamp,
                    String::from_utf8_lossy(&r.value).into_owned(),
                )
            })
            .collect();
        outcomes.push(match result {
            Ok(()) => Ok(out),
            Err(e) => Err(error_kind(&e)),
        });
    }
    (outcomes, at_checkpoints)
}

/// Opens `plugin` with `config` and plays `steps`: its trace, or the kind of
/// the error `open` returned.
fn run(plugin: &Plugin, config: &str, steps: &[Step]) -> Result<Trace, String> {
    let mut inst = OperatorInstance::new(plugin, "op", 0, 1, config).map_err(|e| error_kind(&e))?;
    let (outcomes, at_checkpoints) = play(&mut inst, steps);
    Ok(Trace {
        outcomes,
        at_checkpoints,
        end: Held::of(&inst),
    })
}

/// Panics, showing the first differences, unless `got` holds what `want`
/// holds.
fn assert_same_held(got: &Held, want: &Held, what: &str) {
    if got.state != want.state {
        let diff: Vec<_> = got
            .state
            .iter()
            .zip(&want.state)
            .filter(|(g, w)| g != w)
            .take(3)
            .map(|(g, w)| {
                format!(
                    "{:?}={:?} vs Rust {:?}={:?}",
                    String::from_utf8_lossy(&g.0),
                    String::from_utf8_lossy(&g.1),
                    String::from_utf8_lossy(&w.0),
                    String::from_utf8_lossy(&w.1)
                )
            })
            .collect();
        panic!(
            "{what}: host state differs from the Rust build ({} vs {} entries): {diff:?}",
            got.state.len(),
            want.state.len()
        );
    }
    assert_eq!(got.watermark, want.watermark, "{what}: watermark");
    assert_eq!(got.timers, want.timers, "{what}: timers");
}

/// Asserts that trace `got` (of `what`) is trace `want` of the Rust build.
fn assert_same_trace(got: &Trace, want: &Trace, what: &str) {
    for (i, (w, g)) in want.outcomes.iter().zip(&got.outcomes).enumerate() {
        assert_eq!(g, w, "{what}: step {i}: outputs differ from the Rust build");
    }
    assert_eq!(got.outcomes.len(), want.outcomes.len(), "{what}: steps");
    assert_eq!(
        got.at_checkpoints.len(),
        want.at_checkpoints.len(),
        "{what}: checkpoints"
    );
    for (i, (g, w)) in got
        .at_checkpoints
        .iter()
        .zip(&want.at_checkpoints)
        .enumerate()
    {
        assert_same_held(g, w, &format!("{what}: checkpoint step {i}"));
    }
    assert_same_held(&got.end, &want.end, &format!("{what}: at the end"));
}

/// What `build` must answer to `describe`: what the Rust build answers,
/// except that a `reconcile` of world `operator` (no timers: the C,
/// JavaScript and Zig builds) has no `late` port, which only `timeout` uses.
fn expected_describe(rust: &Plugin, build: &Plugin) -> OperatorInfo {
    let mut info = rust.info().clone();
    let has_timers = OperatorInstance::new(build, "op", 0, 1, "{}")
        .expect("opens with config {}")
        .has_timers();
    if info.name == "reconcile" && !has_timers {
        assert_eq!(
            info.outputs,
            ["out", "late"],
            "the Rust reconcile's outputs"
        );
        info.outputs.truncate(1);
    }
    info
}

/// Asserts that `build` does what the Rust reference does, for each config.
fn assert_same_as_reference(build: &Path, operator: &str, configs: &[&str], steps: &[Step]) {
    let (rust, other) = (load(&reference(operator)), load(build));
    assert_eq!(other.info(), &expected_describe(&rust, &other), "describe");
    for config in configs {
        let want = run(&rust, config, steps);
        let got = run(&other, config, steps);
        match (&want, &got) {
            (Ok(want), Ok(got)) => {
                assert_same_trace(got, want, &format!("{}: config {config}", build.display()))
            }
            _ => assert_eq!(
                got.as_ref().err(),
                want.as_ref().err(),
                "{}: config {config}: open",
                build.display()
            ),
        }
    }
}

fn word_count_script() -> Vec<Step> {
    let mut rng = XorShift(seed());
    let bulk: Vec<Record> = (0..600)
        .map(|_| {
            let w = [
                "Alpha", "beta", "GAMMA", "Délta", "ÉCOLE", "straße", "ΟΔΟΣ", "x",
            ][rng.range(0, 8) as usize];
            let n = rng.range(0, 40);
            if n.is_multiple_of(7) {
                keyed(format!("{w}{n}"), "ignored")
            } else {
                rec(format!("  {w}{n}\n"))
            }
        })
        .collect();
    vec![
        Step::Process(0, ["to", "be", "or", "not", "to", "be"].map(rec).to_vec()),
        Step::Process(
            0,
            vec![
                rec("  spaced  "),
                rec("\ttab\r\n"),
                rec(""),
                rec("   "),
                rec("to"),
                rec("\u{1c}sep\u{1c}"),
                rec("\u{a0}nbsp\u{3000}"),
            ],
        ),
        Step::Process(
            0,
            vec![
                keyed("Key", "ignored"),
                keyed(vec![0xff, 0xfe], "fallback"),
                rec("Ünïcödé"),
                rec("quote\"back\\slash/"),
                rec("ctl\u{1}char\u{7f}"),
                rec("tab\tinside"),
                rec("İstanbul"),
                rec("ΟΔΟΣ"),
                rec("订单"),
                rec("emoji😀"),
            ],
        ),
        Step::Checkpoint(1),
        Step::Process(0, vec![rec("ok"), rec(vec![b'a', 0xff])]),
        Step::Process(0, vec![]),
        Step::Process(0, bulk),
        Step::Process(0, vec![rec("to"), keyed("to", ""), rec("TO")]),
        Step::Checkpoint(2),
        Step::Finish,
    ]
}

const WORD_COUNT_CONFIGS: &[&str] = &[
    "{}",
    "",
    r#"{"lowercase": true}"#,
    r#"{"lowercase": false}"#,
    r#"{"lowercas": true}"#,
    r#"{"lowercase": "yes"}"#,
    "[1]",
    "not json",
];

fn order(key: &str, amount: &str) -> Record {
    keyed(key, format!(r#"{{"amount":{amount}}}"#))
}

/// A random amount from `rng`, 1 to `below` - 1 cents: the cents, and
/// the amount as a JSON string of a decimal (`"12.34"`).
fn random_amount(rng: &mut XorShift, below: u64) -> (u64, String) {
    let cents = rng.range(1, below);
    (cents, format!("\"{}.{:02}\"", cents / 100, cents % 100))
}

/// The other side's amount of an order of `cents`, as a JSON number: the
/// same, or 0.5 more when `off`.
fn other_amount(cents: u64, off: bool) -> String {
    let off = if off { 0.5 } else { 0.0 };
    format!("{}", cents as f64 / 100.0 + off)
}

fn reconcile_script() -> Vec<Step> {
    let mut rng = XorShift(seed() ^ 7);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..400 {
        let key = format!("ORD-{i:05}");
        let (cents, amount) = random_amount(&mut rng, 1_000_000);
        match rng.range(0, 10) {
            0 => a.push(order(&key, &amount)),
            1 => b.push(order(&key, &amount)),
            n => {
                a.push(order(&key, &amount));
                b.push(order(&key, &other_amount(cents, n == 2)));
            }
        }
    }
    let (b1, b2) = b.split_at(b.len() / 2);
    vec![
        Step::Process(
            0,
            vec![
                order("1", "10"),
                order("2", "20"),
                order("3", "\"30\""),
                rec(r#"{"key":"k4","amount":"  4.5 "}"#),
                rec(r#"{"key":7,"amount":1e3}"#),
                rec(r#"{"key":true,"amount":2}"#),
                rec(r#"{"key":"neg","amount":-0.0}"#),
                order("订单-1", "0.1"),
                order("big", "12345678901234567890"),
                order("tiny", "1e-7"),
                order("small", "0.00001234"),
                order("huge", "1.5e300"),
                order("esc\"q\\", "\"+1.25\""),
            ],
        ),
        Step::Process(
            1,
            vec![
                order("1", "10.005"),
                order("2", "\"21\""),
                order("5", "50"),
                rec(r#"{"key":7,"amount":1000.004}"#),
                rec(r#"{"key":"k4","amount":"4.5e0"}"#),
                order("订单-1", "0.30000000000000004"),
                order("tiny", "1e-7"),
                order("huge", "1.5e300"),
                order("esc\"q\\", "1.25"),
            ],
        ),
        Step::Process(0, vec![order("1", "99"), order("5", "50.0")]),
        Step::Process(1, vec![order("5", "51")]),
        Step::Checkpoint(1),
        Step::Process(0, vec![rec(r#"{"amount":1}"#)]),
        Step::Process(1, vec![order("y", "\"abc\"")]),
        Step::Process(0, vec![keyed("z", "{}")]),
        Step::Process(0, vec![keyed("z", "not json")]),
        Step::Process(0, vec![keyed("z", r#"{"amount":1} trailing"#)]),
        Step::Process(0, vec![keyed("z", r#"{"amount":true}"#)]),
        Step::Process(0, vec![keyed("z", r#"{"amount":null}"#)]),
        Step::Process(0, vec![keyed("z", "[1,2]")]),
        Step::Process(0, vec![rec(r#"{"key":null,"amount":1}"#)]),
        Step::Process(2, vec![order("p", "1")]),
        Step::Process(1, vec![]),
        Step::Process(0, a),
        Step::Process(1, b1.to_vec()),
        Step::Checkpoint(2),
        Step::Process(1, b2.to_vec()),
        Step::Process(0, vec![rec(r#"{"id":"f1","amount":3}"#)]),
        Step::Finish,
    ]
}

const RECONCILE_CONFIGS: &[&str] = &[
    r#"{"tolerance": 0.01}"#,
    "{}",
    r#"{"tolerance": 1, "key_field": "id"}"#,
    r#"{"tolerance": -1}"#,
    r#"{"tolerance": "x"}"#,
    r#"{"key_field": 3}"#,
    r#"{"tolerance": 0.1, "extra": 1}"#,
];

/// `key` (a record key) with `amount` at event time `ts`.
fn order_at(key: &str, amount: &str, ts: i64) -> Record {
    stamped(Some(key), format!(r#"{{"amount":{amount}}}"#), ts)
}

/// A script for `reconcile` with `timeout` (10 s in most of
/// [`TIMEOUT_CONFIGS`]): matches, keys timing out on each side, records of
/// emitted keys (late), tombstones expiring and keys starting again, a
/// record without a timestamp, timers at the end of time, and a random
/// bulk interleaved with watermark advances; it ends as a job does (the
/// watermark at the end of time, then `finish`).
fn timeout_script() -> Vec<Step> {
    let field = |value: &str, ts| stamped(None, value, ts);
    let mut rng = XorShift(seed() ^ 17);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..300 {
        let key = format!("T-{i:04}");
        let (cents, amount) = random_amount(&mut rng, 100_000);
        let ts = 22_000 + rng.range(0, 40_000) as i64;
        let other_ts = ts + rng.range(0, 15_000) as i64 - 2_000;
        match rng.range(0, 6) {
            0 => a.push(order_at(&key, &amount, ts)),
            1 => b.push(order_at(&key, &amount, ts)),
            n => {
                a.push(order_at(&key, &amount, ts));
                b.push(order_at(&key, &other_amount(cents, n == 2), other_ts));
            }
        }
    }
    // Arrival order is not timestamp order.
    let (a1, a2) = a.split_at(a.len() / 2);
    let (b1, b2) = b.split_at(b.len() / 3);
    vec![
        Step::Process(
            0,
            vec![
                order_at("1", "10", 1_000),
                order_at("2", "20", 1_500),
                order_at("3", "\"30\"", 2_000),
                field(r#"{"key":"k4","id":"i4","amount":"  4.5 "}"#, 2_500),
                field(r#"{"key":7,"amount":1e3}"#, 3_000),
                order_at("订单-1", "0.1", 3_000),
                order_at("esc\"q\\", "\"+1.25\"", 4_000),
                order_at("neg", "-0.0", -5_000),
                order_at("end", "1", i64::MAX - 5),
            ],
        ),
        Step::Process(
            1,
            vec![
                order_at("1", "10.005", 1_200),
                order_at("2", "\"21\"", 900),
                order_at("5", "50", 5_000),
                field(r#"{"key":7,"amount":1000.004}"#, 100),
                order_at("订单-1", "0.30000000000000004", 3_500),
                order_at("5", "51", 5_100),
            ],
        ),
        Step::Watermark(4_999),
        Step::Watermark(5_000),
        Step::Checkpoint(1),
        Step::Watermark(12_000),
        Step::Process(
            1,
            vec![
                order_at("3", "30", 12_500),
                field(r#"{"key":"k4","id":"i4","amount":"4.5e0"}"#, 12_600),
                order_at("1", "10", 13_000),
                order_at("neg", "0", 0),
            ],
        ),
        Step::Process(0, vec![order_at("6", "1", 13_000), order("no-ts", "1")]),
        Step::Process(0, vec![field(r#"{"amount":1}"#, 13_000)]),
        Step::Process(0, vec![stamped(Some("z"), "not json", 13_000)]),
        Step::Watermark(21_000),
        Step::Process(0, vec![order_at("1", "11", 21_500)]),
        Step::Process(1, vec![order_at("2", "20", 21_400)]),
        Step::Watermark(22_000),
        Step::Process(0, a1.to_vec()),
        Step::Process(1, b1.to_vec()),
        Step::Watermark(30_000),
        Step::Process(1, b2.to_vec()),
        Step::Checkpoint(2),
        Step::Watermark(45_000),
        Step::Process(0, a2.to_vec()),
        Step::Process(0, vec![]),
        Step::Watermark(70_000),
        Step::Checkpoint(3),
        Step::Watermark(i64::MAX),
        Step::Finish,
        Step::Checkpoint(4),
    ]
}

/// Configs with `timeout`, good and bad.
const TIMEOUT_CONFIGS: &[&str] = &[
    r#"{"timeout": "10s"}"#,
    r#"{"timeout": 10000, "tolerance": 0.01}"#,
    r#"{"timeout": "1.5s", "key_field": "id"}"#,
    r#"{"timeout": " 10 s "}"#,
    r#"{"timeout": ".25m"}"#,
    r#"{"timeout": null}"#,
    r#"{"timeout": "0s"}"#,
    r#"{"timeout": 0}"#,
    r#"{"timeout": -1}"#,
    r#"{"timeout": 1.5}"#,
    r#"{"timeout": true}"#,
    r#"{"timeout": "soon"}"#,
    r#"{"timeout": "5"}"#,
    r#"{"timeout": "1.2.3s"}"#,
    r#"{"timeout": "99999999999d"}"#,
];

// ------------------------------------------------------------------ instance-level checks

fn same_outputs_as_rust(lang: Lang, operator: &str, test: &str) {
    let Some(build) = build_of(lang, operator, test) else {
        return;
    };
    match operator {
        "word-count" => {
            assert_same_as_reference(&build, operator, WORD_COUNT_CONFIGS, &word_count_script())
        }
        _ => assert_same_as_reference(&build, operator, RECONCILE_CONFIGS, &reconcile_script()),
    }
}

/// Runs the first `cut` steps in `first`, checkpoints, snapshots, restores
/// host state, timers (through their checkpoint entries) and snapshot into a
/// fresh instance of `second`, runs the rest there; returns the trace.
fn run_with_restore(
    first: &Plugin,
    second: &Plugin,
    config: &str,
    steps: &[Step],
    cut: usize,
) -> Trace {
    let mut a = OperatorInstance::new(first, "op", 0, 1, config).unwrap();
    let (mut outcomes, mut at_checkpoints) = play(&mut a, &steps[..cut]);
    a.on_checkpoint(99).unwrap();
    let snap = a.snapshot().unwrap();
    let state = KeyedState::from_entries(state_entries(a.state()));
    // Nothing was taken before: the changes are every timer and the watermark.
    let timer_entries: Entries = a
        .timers_mut()
        .take_changes()
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    let timers = Timers::from_entries(timer_entries.iter().map(|(k, v)| (&k[..], &v[..]))).unwrap();
    drop(a);
    let mut b = OperatorInstance::new(second, "op", 0, 1, config).unwrap();
    b.restore_timers(timers);
    b.restore(state, first.info().state_version, &snap).unwrap();
    let (more, more_at) = play(&mut b, &steps[cut..]);
    outcomes.extend(more);
    at_checkpoints.extend(more_at);
    Trace {
        outcomes,
        at_checkpoints,
        end: Held::of(&b),
    }
}

/// Asserts that `steps` restored after each step of `cuts` into another
/// instance, of the same build, from Rust to `other` and back, give what a
/// straight run of the Rust build gives.
fn assert_restores_like_a_straight_run(
    operator: &str,
    (rust, other, lang): (&Plugin, &Plugin, Lang),
    config: &str,
    steps: &[Step],
    cuts: &[usize],
) {
    let straight = run(rust, config, steps).unwrap();
    for &cut in cuts {
        for (first, second, what) in [
            (other, other, format!("{} -> {}", lang.name, lang.name)),
            (rust, other, format!("rust -> {}", lang.name)),
            (other, rust, format!("{} -> rust", lang.name)),
        ] {
            let got = run_with_restore(first, second, config, steps, cut);
            assert_same_trace(
                &got,
                &straight,
                &format!("{operator} {config}: restore after step {cut} ({what})"),
            );
        }
    }
}

fn snapshot_round_trip(lang: Lang, operator: &str, test: &str) {
    let Some(build) = build_of(lang, operator, test) else {
        return;
    };
    let (rust, other) = (load(&reference(operator)), load(&build));
    let (config, steps) = match operator {
        "word-count" => (r#"{"lowercase": true}"#, word_count_script()),
        _ => (r#"{"tolerance": 0.01}"#, reconcile_script()),
    };
    let cuts = [0, 3, steps.len() - 1];
    assert_restores_like_a_straight_run(operator, (&rust, &other, lang), config, &steps, &cuts);
    // Snapshot bytes it did not write are refused, not a crash.
    let mut inst = OperatorInstance::new(&other, "op", 0, 1, config).unwrap();
    let err = inst
        .restore(KeyedState::default(), 1, b"not mine")
        .unwrap_err();
    assert_eq!(error_kind(&err), "incompatible-state", "{err}");
}

fn entries_as_json(entries: &Entries) -> Entries {
    (entries.iter())
        .map(|(k, v)| (k.clone(), readable(v).into_owned()))
        .collect()
}

/// `reconcile` state version 1 stored each value as JSON text, the JSON of
/// the row value version 2 stores. A version 1 checkpoint (the Rust
/// build's state after a cut of [`reconcile_script`], each value turned
/// into that text, restored as version 1) continues in `build` like a
/// straight run of the Rust build: the same outputs, and at the end the
/// same state read as JSON (values the rest of the run did not write stay
/// JSON text).
fn continues_state_version_1(build: &Plugin, what: &str) {
    let rust = load(&reference("reconcile"));
    let config = r#"{"tolerance": 0.01}"#;
    let steps = reconcile_script();
    let straight = run(&rust, config, &steps).unwrap();
    for cut in [3, steps.len() - 2] {
        let mut a = OperatorInstance::new(&rust, "op", 0, 1, config).unwrap();
        let (mut outcomes, _) = play(&mut a, &steps[..cut]);
        a.on_checkpoint(99).unwrap();
        let rows = state_entries(a.state());
        assert!(
            rows.iter().any(|(_, v)| v[0] == 0xFF),
            "the Rust build writes row values"
        );
        let v1 = entries_as_json(&rows);
        assert!(v1.iter().all(|(_, v)| v[0] == b'{'), "{v1:?}");
        let mut b = OperatorInstance::new(build, "op", 0, 1, config).unwrap();
        b.restore(KeyedState::from_entries(v1), 1, &a.snapshot().unwrap())
            .unwrap();
        let (more, _) = play(&mut b, &steps[cut..]);
        outcomes.extend(more);
        for (i, (g, w)) in outcomes.iter().zip(&straight.outcomes).enumerate() {
            assert_eq!(g, w, "{what}: restored after step {cut}: step {i}");
        }
        assert_eq!(
            entries_as_json(&state_entries(b.state())),
            entries_as_json(&straight.end.state),
            "{what}: restored after step {cut}: the state at the end"
        );
    }
}

#[test]
fn rust_reconcile_continues_a_state_version_1_checkpoint() {
    continues_state_version_1(&load(&reference("reconcile")), "rust");
}

// ------------------------------------------------------------------ jobs

fn wordcount_job(plugin: &Path, input: &str, rate: Option<u64>) -> JobDir {
    let job = jobs::wordcount(plugin, rate);
    JobDir::new(WEIR, job, &[("input.txt", input)])
}

fn reconcile_job(plugin: &Path, n: usize) -> JobDir {
    let mut rng = XorShift(seed() ^ 11);
    let (mut a, mut b) = (
        String::from("order_no,amount,channel\n"),
        String::from("order_no,amount,state\n"),
    );
    for i in 0..n {
        let cents = rng.range(100, 1_000_000);
        let amount = format!("{}.{:02}", cents / 100, cents % 100);
        let other = format!("{}.{:02}", cents / 100 + 1, cents % 100);
        match rng.range(0, 10) {
            0 => a.push_str(&format!("ORD-{i},{amount},web\n")),
            1 => b.push_str(&format!("ORD-{i},{amount},ok\n")),
            2 => {
                a.push_str(&format!("ORD-{i},{amount},web\n"));
                b.push_str(&format!("ORD-{i},{other},ok\n"));
            }
            _ => {
                a.push_str(&format!("ORD-{i},{amount},web\n"));
                b.push_str(&format!("ORD-{i},{amount},ok\n"));
            }
        }
    }
    let job = jobs::reconcile(plugin);
    JobDir::new(WEIR, job, &[("payments.csv", &a), ("bank.csv", &b)])
}

/// Compiles the component in a `weir` process, so that later runs (which
/// a test kills early) find it in the compile cache.
fn warm_cache(plugin: &Path) {
    WEIR.ok([Path::new("inspect"), plugin]);
}

fn job_same_output_as_rust(lang: Lang, operator: &str, test: &str) {
    let Some(build) = build_of(lang, operator, test) else {
        return;
    };
    let (out, rust_job, job) = match operator {
        "word-count" => {
            let input = weir_tests::pipeline::wordcount_input(&mut XorShift(seed() ^ 5), 300, 1500);
            (
                "out/counts.jsonl",
                wordcount_job(&reference(operator), &input, None),
                wordcount_job(&build, &input, None),
            )
        }
        _ => (
            "out/reconcile.jsonl",
            reconcile_job(&reference(operator), 1500),
            reconcile_job(&build, 1500),
        ),
    };
    rust_job.run_ok(&[]);
    job.run_ok(&[]);
    let want = rust_job.lines(out);
    assert!(want.len() > 100, "the Rust job produced output");
    let what = format!("{} job output", lang.name);
    assert_same_lines(&job.lines(out), &want, &what);
    if operator == "word-count" {
        assert_counts_the_input(&job, &what);
    }
}

/// Asserts that the wordcount job in `job` counted the words of its
/// `input.txt` exactly once, each word's counts in order.
fn assert_counts_the_input(job: &JobDir, what: &str) {
    let want = true_counts(wordcount_words(&job.read("input.txt")));
    assert_running_counts(&want, &job.read("out/counts.jsonl"), what);
}

fn job_survives_sigkill(lang: Lang, test: &str) {
    let Some(build) = build_of(lang, "word-count", test) else {
        return;
    };
    warm_cache(&build);
    let mut rng = XorShift(seed() ^ 13);
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 300, 6000);
    let job = wordcount_job(&build, &input, Some(4000));
    // Every kill lands after the run committed output, so each run but the
    // first resumes from a checkpoint however slowly the machine runs.
    let killed = job.run_through_kills(4, "out/counts.jsonl", (0, 300), &mut rng);
    let what = format!("{} output after {killed} SIGKILLs", lang.name);
    assert_counts_the_input(&job, &what);
}

/// A word count with this build recording its input (`record_inputs`):
/// every recorded epoch replays byte for byte (recording is the host's,
/// whatever the guest's language), their records are the input once each,
/// and `weir shadow` with the Rust build on the same recordings finds not
/// one record or state key that differs.
fn recorded_replays_and_shadows_as_rust(lang: Lang, test: &str) {
    let Some(build) = build_of(lang, "word-count", test) else {
        return;
    };
    warm_cache(&build);
    let n = 1200;
    let words: String = (0..n).map(|i| format!("w{}\n", (i * 7) % 31)).collect();
    let job =
        count_words("recorded", Checkpoint::every("50ms"), 3000, 2).operator_with("count", |_| {
            Operator::new("count", build.to_str().unwrap())
                .inputs(&["words"])
                .string("record_inputs", "1000 checkpoints")
        });
    let j = JobDir::new(WEIR, job, &[("words.txt", &words)]);
    j.run_ok(&[]);
    let json = |verb: &str, args: &[&str]| {
        let out = j.weir(verb, &[args, &["--json"]].concat());
        assert_eq!(
            out.code(),
            Some(0),
            "{}: {}{}",
            lang.name,
            out.stdout,
            out.stderr
        );
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()
    };
    let shadow = json(
        "shadow",
        &[
            "--operator",
            "count",
            "--with",
            plugins::WORD_COUNT,
            "--max-changed",
            "0",
        ],
    );
    assert_eq!(
        shadow["from_checkpoint"],
        serde_json::Value::Null,
        "{shadow}"
    );
    assert_eq!(shadow["v1"]["records_in"], n, "{shadow}");
    assert_eq!(shadow["v1_reproduced"], true, "{shadow}");
    let port = &shadow["outputs"][0];
    assert_eq!(port["same"], n, "{}: {port}", lang.name);
    assert_eq!(shadow["state"]["same"], 31, "{}: {shadow}", lang.name);
    let mut replayed = 0;
    for epoch in shadow["epochs"].as_array().unwrap() {
        let epoch = epoch.to_string();
        let r = json("replay", &["--operator", "count", "--checkpoint", &epoch]);
        assert_eq!(r["identical"], true, "{}: {r}", lang.name);
        replayed += r["plugin"]["records_in"].as_u64().unwrap();
    }
    assert_eq!(replayed, n as u64, "{}", lang.name);
}

const SWAP_WORDS: usize = 40;

/// A Rust word-count job stopped at a checkpoint, then restored with
/// `--swap count=<other build>`: every word is counted exactly once across
/// the two plugins, and the other build continues the Rust counts.
fn swap_from_rust(lang: Lang, test: &str) {
    let Some(build) = build_of(lang, "word-count", test) else {
        return;
    };
    warm_cache(&build);
    let n = 6000;
    let words: String = (0..n)
        .map(|i| format!("w{}\n", (i * 7) % SWAP_WORDS))
        .collect();
    let job = count_words("swappable", Checkpoint::every("100ms"), 3000, 2);
    let j = JobDir::new(WEIR, job, &[("words.txt", &words)]);
    // Stop the Rust job with SIGINT once it committed output: it takes a
    // checkpoint and exits.
    let out = j.run_interrupted(&[], "out.jsonl");
    assert!(out.success(), "{}", out.stderr);
    let before = j.read("out.jsonl").lines().count();
    assert!(
        before > 0 && before < n,
        "the Rust run was stopped mid-way ({before} of {n})"
    );
    let stderr = j.run_ok(&["--swap", &format!("count={}", build.display())]);
    assert_has(&stderr, "resumed from checkpoint");
    let want = true_counts(words.lines());
    assert_eq!(want.len(), SWAP_WORDS);
    assert_running_counts(
        &want,
        &j.read("out.jsonl"),
        &format!("after the swap to {}", lang.name),
    );
    // The last checkpoint records the swapped-in plugin.
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let last = store.latest().unwrap().unwrap();
    let sha = load(&build).sha256().to_string();
    assert_eq!(last.operators["count"].sha256, sha);
}

// ------------------------------------------------------------------ per language

macro_rules! conformance {
    ($lang:ident) => {
        mod $lang {
            use super::*;

            fn lang() -> Lang {
                polyglot::lang(stringify!($lang))
            }

            fn name(test: &str) -> String {
                format!("{}::{test}", stringify!($lang))
            }

            #[test]
            fn word_count_same_outputs_as_rust() {
                same_outputs_as_rust(
                    lang(),
                    "word-count",
                    &name("word_count_same_outputs_as_rust"),
                );
            }

            #[test]
            fn reconcile_same_outputs_as_rust() {
                same_outputs_as_rust(lang(), "reconcile", &name("reconcile_same_outputs_as_rust"));
            }

            #[test]
            fn word_count_snapshot_restore_round_trip() {
                snapshot_round_trip(
                    lang(),
                    "word-count",
                    &name("word_count_snapshot_restore_round_trip"),
                );
            }

            #[test]
            fn reconcile_snapshot_restore_round_trip() {
                snapshot_round_trip(
                    lang(),
                    "reconcile",
                    &name("reconcile_snapshot_restore_round_trip"),
                );
            }

            #[test]
            fn reconcile_continues_a_state_version_1_checkpoint() {
                let test = name("reconcile_continues_a_state_version_1_checkpoint");
                if let Some(build) = build_of(lang(), "reconcile", &test) {
                    continues_state_version_1(&load(&build), lang().name);
                }
            }

            #[test]
            fn word_count_job_same_output_as_rust() {
                job_same_output_as_rust(
                    lang(),
                    "word-count",
                    &name("word_count_job_same_output_as_rust"),
                );
            }

            #[test]
            fn reconcile_job_same_output_as_rust() {
                job_same_output_as_rust(
                    lang(),
                    "reconcile",
                    &name("reconcile_job_same_output_as_rust"),
                );
            }

            #[test]
            fn word_count_job_survives_sigkill_exactly_once() {
                job_survives_sigkill(
                    lang(),
                    &name("word_count_job_survives_sigkill_exactly_once"),
                );
            }

            #[test]
            fn word_count_recorded_replays_and_shadows_as_rust() {
                recorded_replays_and_shadows_as_rust(
                    lang(),
                    &name("word_count_recorded_replays_and_shadows_as_rust"),
                );
            }

            #[test]
            fn swap_rust_checkpoint_into_this_build_keeps_every_count() {
                swap_from_rust(
                    lang(),
                    &name("swap_rust_checkpoint_into_this_build_keeps_every_count"),
                );
            }
        }
    };
}

conformance!(python);
conformance!(c);
conformance!(js);
conformance!(zig);

/// An exception a Python plugin does not catch traps the call, and the one
/// `error:` line of `weir run` carries the exception's own text, not only
/// componentize-py's generic panic: here reconcile-py's `float()` of an
/// amount that is a 401-digit integer.
#[test]
fn python_an_uncaught_exception_is_in_the_final_error_line() {
    let test = "python_an_uncaught_exception_is_in_the_final_error_line";
    let Some(build) = build_of(polyglot::lang("python"), "reconcile", test) else {
        return;
    };
    let job = JobFile::new("overflow")
        .checkpoint(Checkpoint::final_only())
        .source(Source::file("a", "a.jsonl"))
        .source(Source::file("b", "b.jsonl"))
        .operator(Operator::new("rec", &build).ports(&[("a", "a"), ("b", "b")]))
        .sink(Sink::file("out", "out.jsonl").input("rec"));
    let line = format!("{{\"key\":\"K1\",\"amount\":1{}}}\n", "0".repeat(400));
    let j = JobDir::new(WEIR, job, &[("a.jsonl", &line), ("b.jsonl", "")]);
    let out = j.run(&[]);
    let error = out.error_line();
    assert_has_all(
        error,
        &[
            "operator `rec[0]`",
            "OverflowError: int too large to convert to float",
        ],
    );
    assert_lacks(&out.stderr, "RUST_BACKTRACE");
}

// ------------------------------------------------------------------ event time (Python)

/// Panics unless the Rust build's trace of [`timeout_script`] covers what
/// the timer tests are about: results emitted by timers on each side and by
/// matches, records of emitted keys on `late`, a refused record, tombstones
/// held at a checkpoint, timers pending at a checkpoint, and nothing left at
/// the end.
fn assert_covers_event_time(trace: &Trace) {
    let emitted: Vec<&Emitted> = trace.outcomes.iter().flatten().flatten().collect();
    for status in ["MATCH", "AMOUNT_MISMATCH", "ONLY_A", "ONLY_B"] {
        assert!(
            emitted
                .iter()
                .any(|(port, _, ts, v)| *port == 0 && ts.is_some() && v.contains(status)),
            "the script emits {status} with a timestamp"
        );
    }
    assert!(emitted.iter().any(|(port, ..)| *port == 1), "late records");
    assert!(
        trace.outcomes.contains(&Err("invalid-input".into())),
        "a record without a timestamp is refused"
    );
    let tombstone = |h: &Held| {
        h.state
            .iter()
            .any(|(_, v)| readable(v).starts_with(br#"{"done":true,"t":"#))
    };
    assert!(
        trace.at_checkpoints.iter().any(tombstone),
        "tombstones at a checkpoint"
    );
    assert!(
        trace.at_checkpoints.iter().any(|h| !h.timers.is_empty()),
        "timers pending at a checkpoint"
    );
    assert!(
        trace.end.state.is_empty() && trace.end.timers.is_empty(),
        "every key is emitted and every tombstone dropped by the end: {:?}",
        trace.end
    );
}

/// The Python `reconcile` implements `timeout` (world `operator-timers`):
/// with every config of [`TIMEOUT_CONFIGS`], [`timeout_script`] gives the
/// same outputs on `out` and `late`, errors, host state and timers as the
/// Rust build.
#[test]
fn python_reconcile_timeout_same_outputs_state_and_timers_as_rust() {
    let test = "python_reconcile_timeout_same_outputs_state_and_timers_as_rust";
    let Some(build) = build_of(polyglot::lang("python"), "reconcile", test) else {
        return;
    };
    let steps = timeout_script();
    let rust = run(&load(&reference("reconcile")), TIMEOUT_CONFIGS[0], &steps).unwrap();
    assert_covers_event_time(&rust);
    assert_same_as_reference(&build, "reconcile", TIMEOUT_CONFIGS, &steps);
}

/// State and timers written by one build of `reconcile` with `timeout`
/// continue in the other (Rust to Python and back, and each into itself),
/// restored at cuts where timers are pending and keys are tombstones, as a
/// straight run of the Rust build.
#[test]
fn python_reconcile_timeout_restores_pending_timers_across_languages() {
    let test = "python_reconcile_timeout_restores_pending_timers_across_languages";
    let lang = polyglot::lang("python");
    let Some(build) = build_of(lang, "reconcile", test) else {
        return;
    };
    let (rust, other) = (load(&reference("reconcile")), load(&build));
    let config = TIMEOUT_CONFIGS[0];
    let steps = timeout_script();
    let cuts = [1, 3, 5, 6, 13, 16, 20, steps.len() - 3];
    for &cut in &cuts {
        let mut inst = OperatorInstance::new(&rust, "op", 0, 1, config).unwrap();
        play(&mut inst, &steps[..cut]);
        assert!(
            !inst.timers().is_empty(),
            "timers are pending after step {cut}"
        );
    }
    assert_restores_like_a_straight_run("reconcile", (&rust, &other, lang), config, &steps, &cuts);
}

/// A `weir run` of the streaming reconcile over a live stdin (source `a`
/// fed in phases, see `weir_tests::streaming`) gives the same results and
/// late records with the Python plugin as with the Rust one.
#[test]
fn python_streaming_reconcile_job_same_output_as_rust() {
    let test = "python_streaming_reconcile_job_same_output_as_rust";
    let Some(build) = build_of(polyglot::lang("python"), "reconcile", test) else {
        return;
    };
    warm_cache(&build);
    let script = Script::new();
    let rust = streaming::run_over_live_stdin(WEIR, &reference("reconcile"), &script);
    let (want_out, want_late) = streaming::outputs(&rust);
    assert!(
        want_out.len() > 20 && !want_late.is_empty(),
        "{want_out:?} {want_late:?}"
    );
    let python = streaming::run_over_live_stdin(WEIR, &build, &script);
    let (out, late) = streaming::outputs(&python);
    assert_same_lines(&out, &want_out, "python streaming results");
    assert_same_lines(&late, &want_late, "python late records");
}
