//! `flat-state`, the packed state interface, from a component
//! (`tests/guests/examples/flat-state-probe.rs`, which packs by hand from
//! the layout in `wit/flat-state.wit`): it reads and writes the same state
//! as `state`, calls of both mix freely, state written either way survives a
//! restore, and a malformed buffer traps naming the function, the buffer and
//! the item, storing nothing.

use weir::config::{Grants, Limits};
use weir::keyed::state::KeyedState;
use weir::wasm::InstanceError;
use weir::{OperatorInstance, Plugin, Record, Runtime};
use weir_tests::plugins;

fn probe() -> Plugin {
    Runtime::new()
        .unwrap()
        .load(plugins::GUEST_FLAT_STATE_PROBE)
        .unwrap()
}

fn open(p: &Plugin, limits: &Limits) -> OperatorInstance {
    OperatorInstance::with_limits(p, "op", 0, 1, "{}", limits, Grants::default()).unwrap()
}

/// Runs the commands, one record each, in one batch; returns what the reads
/// emitted.
fn run(inst: &mut OperatorInstance, commands: &[&str]) -> Result<Vec<String>, InstanceError> {
    let batch: Vec<Record> = commands
        .iter()
        .map(|c| Record::new(c.as_bytes().to_vec()))
        .collect();
    inst.process(0, &batch)?;
    Ok(inst
        .take_output(0)
        .into_iter()
        .map(|r| String::from_utf8(r.value).unwrap())
        .collect())
}

/// A new instance of `p` under the default limits that ran `commands`
/// ([`run`], which must succeed), and what its reads emitted.
fn run_new(p: &Plugin, commands: &[&str]) -> (OperatorInstance, Vec<String>) {
    let mut inst = open(p, &Limits::default());
    let out = run(&mut inst, commands).unwrap();
    (inst, out)
}

fn state_of(inst: &OperatorInstance) -> Vec<(String, String)> {
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let mut out: Vec<_> = inst
        .state()
        .iter()
        .map(|(k, v)| (text(k), text(v)))
        .collect();
    out.sort();
    out
}

#[test]
fn flat_and_old_calls_read_and_write_one_state() {
    let p = probe();
    let (inst, out) = run_new(
        &p,
        &[
            "put a 1",
            "fput b=2,c=3,a=10",
            "get a",
            "fget a,b,missing,c",
            "del b",
            "fput -c,d=,e=5,e=6",
            "fget b,c,d,e",
            "get d",
            "scan ",
            "fscan ",
            "fscan e",
            "fget ",
        ],
    );
    assert_eq!(
        out,
        [
            "a=10",
            "a=10,b=2,missing?,c=3",
            "b?,c?,d=,e=6",
            "d=",
            "a=10,d=,e=6",
            "a=10,d=,e=6",
            "e=6",
            "",
        ]
    );
    assert_eq!(
        state_of(&inst),
        [("a", "10"), ("d", ""), ("e", "6")].map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

#[test]
fn state_written_flat_is_restored_and_read_both_ways() {
    let p = probe();
    let (first, _) = run_new(&p, &["fput k1=v1,k2=v2", "put k3 v3"]);
    let state =
        KeyedState::from_entries(first.state().iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
    let mut second = open(&p, &Limits::default());
    second.restore(state, 1, &[]).unwrap();
    let out = run(&mut second, &["fget k1,k2,k3", "get k1", "fscan k"]).unwrap();
    assert_eq!(out, ["k1=v1,k2=v2,k3=v3", "k1=v1", "k1=v1,k2=v2,k3=v3"]);
}

#[test]
fn limits_reports_the_instances_limits() {
    let p = probe();
    let limits = Limits {
        memory: 64 << 20,
        max_key_bytes: 100,
        max_value_bytes: 1000,
        max_state_bytes: 10_000,
        ..Limits::default()
    };
    let mut inst = open(&p, &limits);
    let out = run(&mut inst, &["limits"]).unwrap();
    assert_eq!(out, [format!("{},100,1000,10000", 64 << 20)]);
}

/// Asserts `e` is a trap in `process` whose one-line message contains
/// `needle`.
fn assert_trap(e: &InstanceError, needle: &str) {
    let message = e.to_string();
    match e {
        InstanceError::Trap { hook, .. } => assert_eq!(*hook, "process", "{message}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(message.contains(needle), "{needle:?} not in {message}");
    assert!(!message.contains('\n'), "one line: {message}");
}

#[test]
fn a_malformed_buffer_traps_naming_the_call_and_the_item_and_stores_nothing() {
    let p = probe();
    let cases = [
        // A whole entry k=v, then two bytes of a length.
        (
            "raw-put 01000000010000006b760100",
            "flat-state.put-many: malformed packed entries: item 1 (at byte 10) runs past the end of the 12-byte buffer",
        ),
        // A key length of 5 with 2 bytes after it.
        (
            "raw-put 050000000000000061",
            "flat-state.put-many: malformed packed entries: item 0 (at byte 0) runs past the end of the 9-byte buffer",
        ),
        // `absent` as a key length.
        (
            "raw-put ffffffff00000000",
            "flat-state.put-many: malformed packed entries: item 0 (at byte 0) has the absent length 0xFFFFFFFF as its key length",
        ),
        (
            "raw-get 01000000616263",
            "flat-state.get-many: malformed packed keys: item 1 (at byte 5) runs past the end of the 7-byte buffer",
        ),
        (
            "raw-get ffffffff",
            "flat-state.get-many: malformed packed keys: item 0 (at byte 0) has the absent length 0xFFFFFFFF as its key length",
        ),
    ];
    for (command, message) in cases {
        let mut inst = open(&p, &Limits::default());
        let err = run(&mut inst, &[command]).unwrap_err();
        assert_trap(&err, message);
        assert!(inst.state().is_empty(), "{command}: nothing stored");
    }
    // The well-formed buffers of the same kinds work.
    let commands = [
        "raw-put 01000000010000006b76",
        "raw-get 010000006b",
        "raw-get ",
    ];
    let (inst, out) = run_new(&p, &commands);
    assert_eq!(out, ["5 bytes", "0 bytes"]);
    assert_eq!(state_of(&inst), [("k".to_string(), "v".to_string())]);
}
