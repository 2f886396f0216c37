//! The sandbox: untrusted plugins that loop, eat memory, recurse, flood,
//! trap or lie never hang or crash the host. Every limit hit is an error
//! naming the operator, the limit and its configured value, never before
//! the limit is reached and within a generous bound after it; the state dir
//! stays intact and restorable.
//!
//! Each adversarial plugin (`tests/guests/examples/*`) is checked on an
//! `OperatorInstance` and through `weir run`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use weir::config::{Grants, LimitValue, Limits};
use weir::wasm::InstanceError;
use weir::wasm::RuntimeOptions;
use weir::{Batch, OperatorInstance, Plugin, PluginError, Record, Runtime};
use weir_tests::cli::Weir;
use weir_tests::job_dir::{JobDir, signal};
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_lacks};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn rt() -> Runtime {
    Runtime::new().unwrap()
}

fn load(rt: &Runtime, path: &str) -> Plugin {
    rt.load(path).unwrap()
}

fn batch(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record::new(format!("r{i}").into_bytes()))
        .collect()
}

fn open(p: &Plugin, config: &str, limits: &Limits, grants: Grants) -> OperatorInstance {
    OperatorInstance::with_limits(p, "op", 0, 1, config, limits, grants).unwrap()
}

/// [`open`] with the default limits and no grants.
fn open_default(p: &Plugin, config: &str) -> OperatorInstance {
    open(p, config, &Limits::default(), Grants::default())
}

/// The default limits with each `(key, value)` of `set` (a key of the job
/// file's `limits` table, and its value) in place of the default.
fn limits(set: &[(&str, LimitValue)]) -> Limits {
    let mut l = Limits::default();
    for &(key, value) in set {
        let n = match value {
            LimitValue::Bytes(n) | LimitValue::Count(n) => n,
            LimitValue::Time(d) => {
                assert_eq!(key, "call_timeout", "{key} is no time");
                l.call_timeout = d;
                continue;
            }
        };
        let size = usize::try_from(n).unwrap();
        match key {
            "memory" => l.memory = size,
            "fuel" => l.fuel = Some(n),
            "instances" => l.instances = size,
            "table_elements" => l.table_elements = size,
            "max_key_bytes" => l.max_key_bytes = size,
            "max_value_bytes" => l.max_value_bytes = size,
            "max_state_bytes" => l.max_state_bytes = size,
            "max_emit_records" => l.max_emit_records_per_call = size,
            "max_emit_bytes" => l.max_emit_bytes_per_call = size,
            other => panic!("no limit `{other}` here"),
        }
    }
    l
}

/// Asserts `e` is a limit error with `key` = `value`, naming the operator,
/// and returns its message.
fn assert_limit(e: &InstanceError, hook: &str, key: &str, value: LimitValue) -> String {
    let message = e.to_string();
    match e {
        InstanceError::Limit {
            operator,
            hook: h,
            limit,
        } => {
            assert_eq!((operator.as_str(), h.name()), ("op[0]", hook), "{message}");
            assert_eq!((limit.key, limit.limit), (key, value), "{message}");
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
    assert!(message.starts_with("operator `op[0]`: "), "{message}");
    assert_has(&message, &format!("{key} = {value}"));
    assert!(!message.contains('\n'), "one line: {message}");
    message
}

/// Opens `p` with `config` under `limits` (no grants), asserts that
/// processing one record stops at the limit `key` = `value`, and returns the
/// instance and the error's message.
fn one_record_hits(
    p: &Plugin,
    config: &str,
    limits: &Limits,
    key: &str,
    value: LimitValue,
) -> (OperatorInstance, String) {
    let mut inst = open(p, config, limits, Grants::default());
    let err = inst.process(0, &batch(1)).unwrap_err();
    let message = assert_limit(&err, "process", key, value);
    (inst, message)
}

/// Asserts that instantiating `p` under [`limits`] with `key` = `value`
/// fails at that limit.
fn instantiation_hits(p: &Plugin, key: &str, value: LimitValue) {
    let limits = limits(&[(key, value)]);
    let err =
        OperatorInstance::with_limits(p, "op", 0, 1, "{}", &limits, Grants::default()).unwrap_err();
    assert_limit(&err, "instantiate", key, value);
}

/// Asserts `e` is a trap in `hook` whose message contains `needle`.
fn assert_trap(e: &InstanceError, hook: &str, needle: &str) -> String {
    let message = e.to_string();
    match e {
        InstanceError::Trap { hook: h, .. } => assert_eq!(*h, hook, "{message}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(message.contains(needle), "{needle:?} not in {message}");
    assert!(!message.contains('\n'), "one line: {message}");
    message
}

/// The bound within which a limit must stop a plugin: generous, so that a
/// loaded machine cannot fail a test, yet far below "never".
const STOPPED_WITHIN: Duration = Duration::from_secs(30);

/// Runs `f`, returning its result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

// ---------------------------------------------------------------- CPU

#[test]
fn an_infinite_loop_is_stopped_at_its_deadline() {
    let rt = rt();
    let p = load(&rt, plugins::GUEST_SPIN_LOOP);
    for (mode, timeout_ms) in [("loop", 300), ("clock", 250)] {
        let deadline = LimitValue::Time(Duration::from_millis(timeout_ms));
        let limits = limits(&[("call_timeout", deadline)]);
        let config = format!(r#"{{"mode":"{mode}"}}"#);
        let mut inst = open(&p, &config, &limits, Grants::default());
        let (result, took) = timed(|| inst.process(0, &batch(3)));
        assert_limit(&result.unwrap_err(), "process", "call_timeout", deadline);
        let deadline = Duration::from_millis(timeout_ms);
        // Never before the deadline; within a generous bound after it.
        assert!(
            took >= deadline && took < STOPPED_WITHIN,
            "{mode}: stopped after {took:?}, deadline {deadline:?}"
        );
    }
}

#[test]
fn a_sleep_passes_no_time_without_the_clocks_grant_and_ends_at_the_deadline_with_it() {
    let rt = rt();
    let p = load(&rt, plugins::GUEST_SPIN_LOOP);
    let deadline = Duration::from_millis(300);
    let limits = limits(&[("call_timeout", LimitValue::Time(deadline))]);
    // Without the grant, the hour-long sleep returns at once: the call
    // succeeds, so it ended before its deadline.
    let mut inst = open(&p, r#"{"mode":"sleep"}"#, &limits, Grants::default());
    inst.process(0, &batch(2)).unwrap();
    assert_eq!(inst.take_output(0).len(), 2);
    // With it, the sleep is real but cannot outlast the call's deadline.
    let clocks = Grants {
        clocks: true,
        ..Grants::default()
    };
    let mut inst = open(&p, r#"{"mode":"sleep"}"#, &limits, clocks);
    let (result, took) = timed(|| inst.process(0, &batch(2)));
    assert_limit(
        &result.unwrap_err(),
        "process",
        "call_timeout",
        LimitValue::Time(deadline),
    );
    assert!(took >= deadline && took < STOPPED_WITHIN, "{took:?}");
}

#[test]
fn fuel_bounds_a_call_deterministically() {
    let fuel = LimitValue::Count(5_000_000);
    let limits = limits(&[("fuel", fuel)]);
    for metering in [false, true] {
        let rt = Runtime::with_options(RuntimeOptions { fuel: metering }).unwrap();
        let p = load(&rt, plugins::GUEST_SPIN_LOOP);
        assert_eq!(p.fuel_metered(), metering);
        // Without metering in the runtime, the plugin is compiled again
        // with it for this instance.
        let mut inst = open(&p, "{}", &limits, Grants::default());
        assert!(inst.plugin().fuel_metered());
        assert_eq!(inst.plugin().sha256(), p.sha256());
        let err = inst.process(0, &batch(1)).unwrap_err();
        assert_limit(&err, "process", "fuel", fuel);
    }
    // A well-behaved plugin runs on the same budget, call after call: fuel
    // is refilled for every call.
    let wc = load(&rt(), plugins::WORD_COUNT);
    let mut inst = open(&wc, "{}", &limits, Grants::default());
    for _ in 0..5 {
        inst.process(0, &batch(100)).unwrap();
    }
    assert_eq!(inst.take_output(0).len(), 500);
}

// ---------------------------------------------------------------- memory

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let rt = rt();
    let p = load(&rt, plugins::GUEST_MEMORY_BOMB);
    let memory = LimitValue::Bytes(32 << 20);
    let limits = limits(&[("memory", memory)]);
    let (inst, message) = one_record_hits(&p, r#"{"chunk_kib":256}"#, &limits, "memory", memory);
    assert_has(&message, "linear memory");
    assert!(inst.memory_used() <= 32 << 20, "{}", inst.memory_used());

    // One huge allocation fails the same way.
    one_record_hits(&p, r#"{"chunk_kib":1048576}"#, &limits, "memory", memory);
}

#[test]
fn a_plugin_whose_initial_memory_is_over_the_limit_does_not_instantiate() {
    let p = load(&rt(), plugins::WORD_COUNT);
    instantiation_hits(&p, "memory", LimitValue::Bytes(64 << 10));
}

#[test]
fn instance_and_table_caps_are_enforced_at_instantiation() {
    let p = load(&rt(), plugins::WORD_COUNT);
    instantiation_hits(&p, "instances", LimitValue::Count(1));
    instantiation_hits(&p, "table_elements", LimitValue::Count(1));
    // The defaults fit real plugins: each one opens under them.
    for (name, path) in plugins::ALL {
        let p = load(&rt(), path);
        let config = match *name {
            "filter" => r#"{"field":"x","op":"eq","value":"y"}"#,
            "window-count" => r#"{"size":"1s"}"#,
            _ => "{}",
        };
        if let Err(e) = OperatorInstance::new(&p, "op", 0, 1, config) {
            panic!("{name} does not open under the default limits: {e}");
        }
    }
}

#[test]
fn deep_recursion_exhausts_the_wasm_stack_not_the_host() {
    let p = load(&rt(), plugins::GUEST_DEEP_RECURSION);
    let mut inst = open_default(&p, "{}");
    let err = inst.process(0, &batch(1)).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("operator `op[0]`: "), "{message}");
    assert!(!message.contains('\n'), "{message}");
    match &err {
        InstanceError::Limit { limit, .. } => {
            assert_eq!(limit.limit, LimitValue::Bytes(512 << 10), "{message}");
            assert_has(&message, "wasm call stack");
        }
        // A deep shadow stack in linear memory runs out of bounds first.
        InstanceError::Trap { .. } => assert!(message.contains("out of bounds"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn oversized_state_keys_and_values_hit_their_limits() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let (key, value) = (LimitValue::Bytes(1 << 10), LimitValue::Bytes(512 << 10));
    let limits = limits(&[("max_key_bytes", key), ("max_value_bytes", value)]);
    let config = r#"{"mode":"big-key","kib":2}"#;
    let (_, message) = one_record_hits(&p, config, &limits, "max_key_bytes", key);
    assert_has(&message, "state key size (2KiB)");
    let config = r#"{"mode":"big-read","kib":1024,"copies":1}"#;
    let (inst, _) = one_record_hits(&p, config, &limits, "max_value_bytes", value);
    assert!(inst.state().is_empty());
}

#[test]
fn host_state_is_capped_in_size_and_in_what_one_read_returns() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let state = LimitValue::Bytes(4 << 20);
    let config = r#"{"mode":"state-bomb","kib":256}"#;
    let under = limits(&[("max_state_bytes", state)]);
    let (inst, _) = one_record_hits(&p, config, &under, "max_state_bytes", state);
    assert!(inst.state().bytes() <= 4 << 20);

    // 100 copies of a 1 MiB value would make the host allocate 100 MiB for
    // a plugin that can hold 32.
    let memory = LimitValue::Bytes(32 << 20);
    let limits = limits(&[("memory", memory)]);
    let config = r#"{"mode":"big-read","kib":1024,"copies":100}"#;
    let (_, message) = one_record_hits(&p, config, &limits, "memory", memory);
    assert_has(&message, "state read");
    // Within the limit the same read works.
    let config = r#"{"mode":"big-read","kib":1024,"copies":4}"#;
    let mut inst = open(&p, config, &limits, Grants::default());
    inst.process(0, &batch(1)).unwrap();
    assert_eq!(inst.take_output(0)[0].value, b"4");
}

// ---------------------------------------------------------------- emit

#[test]
fn an_emit_flood_hits_the_per_call_caps() {
    let p = load(&rt(), plugins::GUEST_EMIT_FLOOD);
    let records = LimitValue::Count(1000);
    let under = limits(&[("max_emit_records", records)]);
    let mut inst = open(&p, "{}", &under, Grants::default());
    let (result, took) = timed(|| inst.process(0, &batch(1)));
    let err = result.unwrap_err();
    assert_limit(&err, "process", "max_emit_records", records);
    assert!(took < STOPPED_WITHIN, "{took:?}");

    let bytes = LimitValue::Bytes(1 << 20);
    let under = limits(&[("max_emit_bytes", bytes)]);
    one_record_hits(&p, r#"{"size":65536}"#, &under, "max_emit_bytes", bytes);
}

// ---------------------------------------------------------------- traps

#[test]
fn a_flat_emit_with_a_span_outside_its_data_traps_naming_the_record() {
    let p = load(&rt(), plugins::GUEST_BAD_SPANS);
    assert!(p.flat(), "the fixture exports flat-lifecycle");
    let mut inst = open_default(&p, "{}");
    let err = inst.process(0, &batch(1)).unwrap_err();
    assert_trap(
        &err,
        "process",
        "flat emit to output port 0: record 1 of a flat batch points at bytes 2..7 but the batch has 3 bytes",
    );
    // Nothing of the refused emit reaches the output.
    assert!(inst.take_output(0).is_empty());
}

/// A plugin refusing records (`reject`): the host keeps each refusal by
/// index with its message, and the call's other effects stand; breaking
/// the interface's rules (an index past the batch, a record refused
/// twice, a refusal outside `process`) traps, naming the rule.
#[test]
fn refused_records_are_kept_by_index_and_bad_refusals_trap() {
    let p = load(&rt(), plugins::GUEST_PICKY);
    let mut inst = open_default(&p, "{}");
    let mut values = ["a", "bad", "b", "bad"].map(|v| Record::new(v.as_bytes().to_vec()));
    values[1].key = Some(b"k1".to_vec());
    inst.process(0, &values).unwrap();
    let kept: Vec<Vec<u8>> = inst.take_output(0).into_iter().map(|r| r.value).collect();
    assert_eq!(kept, [b"a".to_vec(), b"b".to_vec()]);
    let refused: Vec<(usize, String)> = (inst.take_rejected(&Batch::from(&values[..])).into_iter())
        .map(|(i, e)| (i, e.to_string()))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0].0, 1);
    assert_eq!(refused[1].0, 3);
    assert_has(
        &refused[1].1,
        "record 3 of the batch refused: record 3 is bad",
    );
    assert_has(
        &refused[0].1,
        "operator `op[0]`: `process` returned an error: invalid input: record 1 of the batch (key `k1`) refused: record 1 is bad",
    );
    assert!(
        inst.take_rejected(&Batch::from(&values[..])).is_empty(),
        "taken once"
    );

    for (value, needle) in [
        (
            "past",
            "refused record 1, but the batch being processed has 1 record(s)",
        ),
        ("twice", "refused record 0 of the batch twice"),
    ] {
        // A trapped instance is not entered again: one each.
        let mut inst = open_default(&p, "{}");
        let err = inst
            .process(0, &[Record::new(value.as_bytes().to_vec())])
            .unwrap_err();
        assert_trap(&err, "process", needle);
    }
    let mut inst = open_default(&p, r#"{"in_checkpoint": true}"#);
    let err = inst.on_checkpoint(1).unwrap_err();
    assert_trap(
        &err,
        "on-checkpoint",
        "records may only be refused in `process`",
    );
}

#[test]
fn a_trap_in_snapshot_is_an_error_naming_the_hook_and_the_panic() {
    let p = load(&rt(), plugins::GUEST_SNAPSHOT_TRAP);
    let mut inst = open_default(&p, r#"{"from_checkpoint":2}"#);
    inst.process(0, &batch(3)).unwrap();
    inst.on_checkpoint(1).unwrap();
    assert!(inst.snapshot().unwrap().is_empty());
    inst.on_checkpoint(2).unwrap();
    let err = inst.snapshot().unwrap_err();
    // The guest's panic message (its last stderr line) is in the error.
    assert_trap(&err, "snapshot", "deliberate panic at checkpoint 2");
    match err {
        InstanceError::Trap { backtrace, .. } => assert!(backtrace.is_some()),
        _ => unreachable!(),
    }
}

#[test]
fn a_trap_in_restore_is_an_error_naming_the_hook() {
    let p = load(&rt(), plugins::GUEST_RESTORE_TRAP);
    let mut inst = open_default(&p, "{}");
    inst.process(0, &batch(3)).unwrap();
    let state = inst.state().clone();
    let mut fresh = open_default(&p, "{}");
    let err = fresh.restore(state, 1, &[]).unwrap_err();
    assert_trap(
        &err,
        "restore",
        "deliberate panic restoring state version 1",
    );
}

#[test]
fn a_plugin_trapping_every_nth_batch_resumes_from_host_state() {
    let p = load(&rt(), plugins::GUEST_FLAKY_BATCHES);
    let config = r#"{"every":3}"#;
    let mut inst = open_default(&p, config);
    inst.process(0, &batch(2)).unwrap();
    inst.process(0, &batch(2)).unwrap();
    let checkpointed = inst.state().clone();
    let err = inst.process(0, &batch(2)).unwrap_err();
    assert_trap(
        &err,
        "process",
        "deliberate panic on batch 3 of this attempt (2 batches done",
    );
    assert_eq!(inst.take_output(0).len(), 4);
    // The next attempt restores the count and gets two more batches in.
    let mut next = open_default(&p, config);
    next.restore(checkpointed, 1, &[]).unwrap();
    next.process(0, &batch(2)).unwrap();
    next.process(0, &batch(2)).unwrap();
    let count = next.state().get(b"batches").unwrap().to_vec();
    assert_eq!(u64::from_le_bytes(count.try_into().unwrap()), 4);
    let err = next.process(0, &batch(2)).unwrap_err();
    assert_trap(&err, "process", "(4 batches done before it)");
}

// ------------------------------------------------- wrong time, odd values

#[test]
fn imports_called_at_the_wrong_time_trap() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let open_err = |config: &str| {
        OperatorInstance::with_limits(
            &p,
            "op",
            0,
            1,
            config,
            &Limits::default(),
            Grants::default(),
        )
        .unwrap_err()
    };
    let err = open_err(r#"{"mode":"emit-in-open"}"#);
    assert_trap(&err, "open", "emitted records during `open`");

    let mut inst = open_default(&p, r#"{"mode":"emit-in-restore"}"#);
    let err = inst.restore(Default::default(), 1, &[]).unwrap_err();
    assert_trap(&err, "restore", "emitted records during `restore`");

    let mut inst = open_default(&p, r#"{"mode":"write-in-snapshot"}"#);
    let err = inst.snapshot().unwrap_err();
    assert_trap(&err, "snapshot", "wrote state during `snapshot`");
}

#[test]
fn a_plugin_calling_exit_traps_instead_of_ending_the_host() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let mut inst = open_default(&p, r#"{"mode":"exit"}"#);
    let err = inst.process(0, &batch(1)).unwrap_err();
    // WASI 0.2 only knows success and failure: 3 becomes 1.
    assert_trap(&err, "process", "Exited with i32 exit status 1");
}

#[test]
fn plugin_text_in_errors_and_logs_is_one_bounded_line() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let mut inst = open_default(&p, r#"{"mode":"odd-error","kib":1024}"#);
    let err = inst.process(0, &batch(1)).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, InstanceError::Returned { .. }), "{message}");
    assert!(!message.contains(['\n', '\r', '\u{1b}']), "{message:.200}");
    assert!(
        message.contains("first line\\nsecond line \\u{1b}[31mred"),
        "{message:.200}"
    );
    assert!(message.len() < 8 << 10, "{}", message.len());
    // A huge log message does not fail the call.
    let mut inst = open_default(&p, r#"{"mode":"odd-log","kib":1024}"#);
    inst.process(0, &batch(1)).unwrap();
}

#[test]
fn describe_may_not_emit_or_return_odd_names() {
    let rt = rt();
    let describe_err = |path: &str| match rt.load(path) {
        Err(e @ PluginError::Describe { .. }) => e.to_string(),
        other => panic!("{path}: expected a describe error, got {other:?}"),
    };
    let message = describe_err(plugins::GUEST_DESCRIBE_EMIT);
    assert_has(&message, "emitted records during `describe`");
    let message = describe_err(plugins::GUEST_BAD_NAMES);
    assert_has(&message, "control characters");
    assert_has(&message, "evil\\nERROR weir: fake line \\u{1b}[31m");
    assert!(!message.contains(['\n', '\u{1b}']), "{message}");
    let message = describe_err(plugins::GUEST_BAD_UTF8_NAME);
    assert!(message.to_lowercase().contains("utf-8"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn malformed_components_are_errors_not_panics() {
    let rt = rt();
    let good = std::fs::read(plugins::WORD_COUNT).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("magic only", good[..8].to_vec()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("garbage after the header", {
            let mut b = good[..8].to_vec();
            b.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            b
        }),
    ];
    for (what, bytes) in cases {
        let err = rt.load_bytes("bad.wasm", bytes).unwrap_err();
        assert!(err.to_string().starts_with("bad.wasm: "), "{what}: {err}");
    }
    // Single-byte corruptions all over the file: each loads or is refused
    // with an error naming the file; what loads runs (or fails) under the
    // limits, with one-line errors naming the operator, never panicking the
    // host.
    let limits = limits(&[
        ("call_timeout", LimitValue::Time(Duration::from_millis(500))),
        ("memory", LimitValue::Bytes(64 << 20)),
    ]);
    // A small plugin, so that compiling the mutants is quick.
    let good = std::fs::read(plugins::GUEST_RESTORE_TRAP).unwrap();
    let mut loaded = 0;
    for i in 0..16 {
        let mut bytes = good.clone();
        let at = 8 + (i * 104_729 * 13) % (bytes.len() - 8);
        bytes[at] ^= 0x5a;
        match rt.load_bytes("mutant.wasm", bytes) {
            Err(e) => {
                let message = e.to_string();
                assert!(message.starts_with("mutant.wasm: "), "byte {at}: {message}");
            }
            Ok(p) => {
                loaded += 1;
                run_mutant(&p, &limits);
            }
        }
    }
    eprintln!("{loaded} of 16 corrupted components loaded");
    // Corruptions of the plugin's data (its panic message) always load and
    // run as before: only what the plugin says changes.
    let said = "deliberate panic restoring state version";
    let at = good
        .windows(said.len())
        .position(|w| w == said.as_bytes())
        .expect("the fixture's panic message is in its data");
    for k in [0, 11, 23, said.len() - 1] {
        let mut bytes = good.clone();
        bytes[at + k] ^= 0x20; // a lower-case letter becomes upper-case
        let mut mutated = said.to_string();
        mutated.replace_range(k..=k, &said[k..=k].to_uppercase());
        let p = rt
            .load_bytes("mutant.wasm", bytes)
            .unwrap_or_else(|e| panic!("a data mutant ({mutated}) does not load: {e}"));
        let mut inst =
            OperatorInstance::with_limits(&p, "op", 0, 1, "{}", &limits, Grants::default())
                .unwrap();
        inst.process(0, &batch(5)).unwrap();
        assert_eq!(inst.take_output(0).len(), 5, "{mutated}");
        let state = inst.state().clone();
        let mut fresh =
            OperatorInstance::with_limits(&p, "op", 0, 1, "{}", &limits, Grants::default())
                .unwrap();
        let err = fresh.restore(state, 1, &[]).unwrap_err();
        assert_trap(&err, "restore", &mutated);
    }
}

/// Instantiates a loaded mutant and runs a batch and a snapshot: each step
/// succeeds or fails with a one-line error naming the operator.
fn run_mutant(p: &Plugin, limits: &Limits) {
    let check = |e: InstanceError| {
        let message = e.to_string();
        assert!(message.starts_with("operator `op[0]`: "), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
    };
    match OperatorInstance::with_limits(p, "op", 0, 1, "{}", limits, Grants::default()) {
        Err(e) => check(e),
        Ok(mut inst) => {
            if let Err(e) = inst.process(0, &batch(5)) {
                check(e);
            }
            if let Err(e) = inst.snapshot() {
                check(e);
            }
        }
    }
}

// ---------------------------------------------------------------- WASI

fn report(inst: &mut OperatorInstance) -> Value {
    inst.process(0, &batch(1)).unwrap();
    let out = inst.take_output(0);
    serde_json::from_slice(&out[0].value).unwrap()
}

#[test]
fn without_grants_the_sandbox_has_no_clock_randomness_env_or_files() {
    let p = load(&rt(), plugins::GUEST_SANDBOX_PROBE);
    let mut a = open_default(&p, "{}");
    let mut b = open_default(&p, "{}");
    let (ra, rb) = (report(&mut a), report(&mut b));
    assert_eq!(ra["wall_secs"], 0, "{ra}");
    assert_eq!(ra["slept_ns"], 0, "{ra}");
    assert_eq!(ra["env"], 0, "{ra}");
    assert_eq!(ra["args"], 0, "{ra}");
    assert_eq!(ra["root_dir"], false, "{ra}");
    assert_eq!(ra["cwd_file"], false, "{ra}");
    // Randomness is a fixed sequence: two instances hash alike.
    assert_eq!(ra, rb);

    let all = Grants {
        clocks: true,
        random: true,
    };
    let mut a = open(&p, "{}", &Limits::default(), all);
    let mut b = open(&p, "{}", &Limits::default(), all);
    let (ra, rb) = (report(&mut a), report(&mut b));
    assert!(ra["wall_secs"].as_u64().unwrap() > 1_600_000_000, "{ra}");
    assert!(ra["slept_ns"].as_u64().unwrap() >= 20_000_000, "{ra}");
    assert_ne!(ra["hash"], rb["hash"], "random grant: {ra} {rb}");
    // Files and environment cannot be granted.
    assert_eq!(
        (&ra["env"], &ra["root_dir"]),
        (&Value::from(0), &Value::from(false))
    );
}

// ---------------------------------------------------------------- weir run

/// A job running `plugin` as operator `op`, changed by `with` (limits,
/// config, grants), on 200 words read at `rate` records/s.
fn job(op: &str, plugin: &str, rate: u64, with: impl FnOnce(Operator) -> Operator) -> JobDir {
    let sandbox = JobFile::new("sandbox")
        .checkpoint(Checkpoint::every("50ms"))
        .source(Source::file("words", "words.txt").batch_size(10).rate(rate))
        .operator(with(Operator::new(op, plugin).inputs(&["words"])))
        .sink(Sink::file("out", "out.txt").input(op));
    let words: String = (0..200).map(|i| format!("w{i}\n")).collect();
    JobDir::new(WEIR, sandbox, &[("words.txt", &words)])
}

/// Runs `weir run` and asserts it fails with one error line containing
/// every needle and no panic; returns the error line and the wall time.
fn run_fails(j: &JobDir, needles: &[&str]) -> (String, Duration) {
    let (out, took) = timed(|| j.run(&[]));
    let err = out.stderr;
    assert!(!out.status.success(), "expected failure: {err}");
    // Only the guests panic (their stderr is in the log), never the host.
    for l in err.lines().filter(|l| l.contains("panicked at")) {
        assert!(l.contains("panicked at tests/guests/"), "host panic? {l}");
    }
    // Rust's hint to set RUST_BACKTRACE means nothing inside the sandbox.
    assert_lacks(&err, "RUST_BACKTRACE");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line: {err}");
    for n in needles {
        assert!(errors[0].contains(n), "{n:?} not in {}", errors[0]);
    }
    (errors[0].to_string(), took)
}

/// `weir checkpoints` on the job's state dir: succeeds; returns its stdout.
fn checkpoints(j: &JobDir) -> String {
    j.checkpoints(&[])
}

/// Fails `weir run` within a generous bound: start-up and plugin loading
/// plus ten times the limit.
fn assert_bounded(took: Duration, limit: Duration) {
    assert!(took < STOPPED_WITHIN + 10 * limit, "weir run took {took:?}");
}

#[test]
fn weir_run_stops_an_infinite_loop_at_its_call_timeout() {
    let j = job("spin", plugins::GUEST_SPIN_LOOP, 1_000_000, |o| {
        o.limits(r#"{ call_timeout = "300ms" }"#)
    });
    let (line, took) = run_fails(
        &j,
        &[
            "operator `spin[0]`",
            "`process`",
            "call time exceeds limits.call_timeout = 300ms",
        ],
    );
    assert_bounded(took, Duration::from_millis(300));
    assert_lacks(&line, "\\n");
    assert!(j.state_dir().is_dir());
    checkpoints(&j);
}

#[test]
fn weir_run_enforces_a_fuel_budget() {
    let j = job("spin", plugins::GUEST_SPIN_LOOP, 1_000_000, |o| {
        o.limits("{ fuel = 20_000_000 }")
    });
    run_fails(
        &j,
        &[
            "operator `spin[0]`",
            "`process`",
            "fuel exceeds limits.fuel = 20000000",
        ],
    );
    checkpoints(&j);
}

#[test]
fn weir_run_stops_a_memory_bomb_deep_recursion_and_an_emit_flood() {
    type With = fn(Operator) -> Operator;
    let cases: [(&str, &str, With, &str, &str); 3] = [
        (
            "bomb",
            plugins::GUEST_MEMORY_BOMB,
            |o| o.limits(r#"{ memory = "32MiB" }"#),
            "linear memory",
            "limits.memory = 32MiB",
        ),
        (
            "flood",
            plugins::GUEST_EMIT_FLOOD,
            |o| o.verbatim("[operator.limits]\nmax_emit_records = 1000"),
            "records emitted in one call",
            "limits.max_emit_records = 1000",
        ),
        (
            "deep",
            plugins::GUEST_DEEP_RECURSION,
            |o| o,
            "operator `deep[0]`",
            "",
        ),
    ];
    for (op, plugin, with, what, limit) in cases {
        let j = job(op, plugin, 1_000_000, with);
        let operator = format!("operator `{op}[0]`");
        let (line, took) = run_fails(&j, &[&operator, "`process`", what, limit]);
        if plugin == plugins::GUEST_DEEP_RECURSION {
            assert!(
                line.contains("stack") || line.contains("out of bounds"),
                "{line}"
            );
        }
        assert_bounded(took, Limits::default().call_timeout);
        checkpoints(&j);
    }
}

#[test]
fn weir_run_reports_a_trap_in_snapshot_and_keeps_the_complete_checkpoints() {
    // 200 words at 1000/s: checkpoints every 50 ms; the second one traps.
    let j = job("snap", plugins::GUEST_SNAPSHOT_TRAP, 1000, |o| {
        o.config("{ from_checkpoint = 2 }")
    });
    run_fails(
        &j,
        &[
            "operator `snap[0]`",
            "trapped in `snapshot`",
            "deliberate panic at checkpoint",
        ],
    );
    let listed = checkpoints(&j);
    assert_has(&listed, "complete checkpoint");
}

#[test]
fn weir_run_reports_a_trap_in_restore_and_the_state_stays_restorable() {
    // 200 words at 40 a second: the first run is still reading when the
    // signal comes, however long noticing its first checkpoint takes (at
    // 400 a second a loaded machine let it finish first, and a finished
    // job's rerun never restores).
    let j = job("rt", plugins::GUEST_RESTORE_TRAP, 40, |o| o);
    // Run until a checkpoint exists, then stop it (SIGTERM checkpoints and exits).
    let mut child = j.command("run", &[]).stderr(Stdio::null()).spawn().unwrap();
    wait_until("a complete checkpoint", PATIENCE, || {
        has_checkpoint(&j).then_some(())
    });
    signal(&child, "-TERM");
    child.wait().unwrap();
    let before = checkpoints(&j);
    assert_has(&before, "complete checkpoint");
    run_fails(
        &j,
        &[
            "operator `rt[0]`",
            "trapped in `restore`",
            "deliberate panic restoring",
        ],
    );
    // Nothing was lost: the same checkpoints are still listed.
    assert_eq!(checkpoints(&j), before);
}

fn has_checkpoint(j: &JobDir) -> bool {
    let out = j.on_state("checkpoints", &[]);
    out.success() && out.stdout.contains("complete checkpoint")
}

#[test]
fn weir_run_fails_cleanly_on_a_plugin_that_traps_on_every_first_batch() {
    // `every = 1` traps on the first batch of every attempt, so no restart
    // strategy can get past it.
    let j = job("flaky", plugins::GUEST_FLAKY_BATCHES, 1_000_000, |o| {
        o.config("{ every = 1 }")
    });
    run_fails(
        &j,
        &[
            "operator `flaky[0]`",
            "trapped in `process`",
            "deliberate panic on batch 1",
        ],
    );
    checkpoints(&j);
}

/// A plugin that marks a value a row that is none: whoever reads the
/// batch (a sink, the next operator) fails the job in one line naming
/// itself and the record, and writes nothing of the batch.
#[test]
fn weir_run_fails_on_a_malformed_row_naming_its_reader_and_the_record() {
    let bad = "record 1 of a flat batch: the row's field at byte 0 has unknown type 9";
    let j = job("rows", plugins::GUEST_BAD_ROWS, 1_000_000, |o| o);
    run_fails(
        &j,
        &[
            "sink `out` received a malformed row",
            "a bug in the plugin that emitted it",
            bad,
        ],
    );
    assert_eq!(
        j.read_so_far("out.txt"),
        "",
        "nothing of the batch is written"
    );

    let words: String = (0..20).map(|i| format!("w{i}\n")).collect();
    let two = JobFile::new("sandbox")
        .source(Source::file("words", "words.txt").batch_size(10))
        .operator(Operator::new("rows", plugins::GUEST_BAD_ROWS).inputs(&["words"]))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["rows"]))
        .sink(Sink::file("out", "out.txt").input("count"));
    let j = JobDir::new(WEIR, two, &[("words.txt", &words)]);
    run_fails(
        &j,
        &[
            "input `in` of operator `count` received a malformed row",
            bad,
        ],
    );

    // A plugin that reads rows gets them checked, not converted.
    let reads_rows = JobFile::new("sandbox")
        .source(Source::file("words", "words.txt").batch_size(10))
        .operator(Operator::new("rows", plugins::GUEST_BAD_ROWS).inputs(&["words"]))
        .operator(Operator::new("fields", plugins::GUEST_ROW_FIELDS).inputs(&["rows"]))
        .sink(Sink::file("out", "out.txt").input("fields"));
    let j = JobDir::new(WEIR, reads_rows, &[("words.txt", &words)]);
    run_fails(
        &j,
        &[
            "input `in` of operator `fields` received a malformed row",
            bad,
        ],
    );
}

#[test]
fn weir_run_logs_plugin_stdout_and_stderr_with_the_operator_id() {
    let j = job("probe", plugins::GUEST_SANDBOX_PROBE, 1_000_000, |o| o);
    let out = j.run(&["-v"]);
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    let line = |needle: &str| {
        err.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not logged: {err}"))
            .to_string()
    };
    assert!(line("probe stderr: hello").contains("probe[0]"), "{err}");
    assert!(
        line("probe stdout: 10 records").contains("probe[0]"),
        "{err}"
    );
    let report: Value = serde_json::from_str(j.read("out.txt").lines().next().unwrap()).unwrap();
    assert_eq!(report["wall_secs"], 0, "{report}");

    // A granted operator sees the real clock.
    let j = job("probe", plugins::GUEST_SANDBOX_PROBE, 1_000_000, |o| {
        o.grants(&["clocks"])
    });
    j.run_ok(&[]);
    let text = j.read("out.txt");
    let report: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(
        report["wall_secs"].as_u64().unwrap() > 1_600_000_000,
        "{report}"
    );
}

#[test]
fn weir_run_keeps_plugin_log_lines_from_forging_host_lines() {
    let j = job("probe", plugins::GUEST_SANDBOX_PROBE, 1_000_000, |o| {
        o.config(r#"{ mode = "odd-log", kib = 1 }"#)
    });
    let out = j.run(&[]);
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    assert_lacks(err, "\u{1b}[31mred");
    assert_has(err, "first line\\nsecond line \\u{1b}[31mred");
    assert!(!err.lines().any(|l| l.starts_with("second line")), "{err}");
}

#[test]
fn bad_limits_and_grants_in_the_job_file_are_one_line_errors() {
    for (extra, needle) in [
        (
            "limits = { memroy = \"1MiB\" }",
            "unknown key `limits.memroy`",
        ),
        (
            "limits = { memory = \"lots\" }",
            "`limits.memory`: \"lots\" is not a size",
        ),
        (
            "limits = { call_timeout = 5 }",
            "`limits.call_timeout` must be a duration string",
        ),
        ("grants = [\"network\"]", "unknown grant \"network\""),
    ] {
        // Deliberately bad keys, as written.
        let j = job("o", plugins::WORD_COUNT, 1_000_000, |o| o.verbatim(extra));
        let (line, _) = run_fails(&j, &["operator \"o\"", needle]);
        assert_has(&line, "job.toml");
    }
}
