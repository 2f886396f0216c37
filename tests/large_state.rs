//! One call that copies hundreds of MB between a plugin and the host: a
//! snapshot or a record larger than wasmtime's default per-call copy budget
//! (128 MiB) works within the operator's `limits.memory`, whose double is
//! the budget (`weir::wasm::copy_budget`). Fixture:
//! `tests/guests/examples/big-state.rs`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use weir::config::{Grants, Limits};
use weir::{OperatorInstance, Record, Runtime};
use weir_tests::cli::Weir;
use weir_tests::job_dir::{JobDir, signal};
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::order::assert_same_order;
use weir_tests::plugins;
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));
const MIB: usize = 1 << 20;
/// Debug builds copy lists element by element (wasmtime's generic lifting
/// code is compiled into crate `weir` at the test profile's opt-level 0):
/// tens of MB/s, where a release build copies at memory speed. These tests
/// are about how much one call may copy, not how fast.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn a_300_mib_record_is_emitted_within_the_operators_memory() {
    let rt = Runtime::new().unwrap();
    let plugin = rt.load(plugins::GUEST_BIG_STATE).unwrap();
    let limits = Limits {
        memory: 1024 * MIB,
        max_emit_bytes_per_call: 1024 * MIB,
        call_timeout: CALL_TIMEOUT,
        ..Limits::default()
    };
    let mut inst = OperatorInstance::with_limits(
        &plugin,
        "big",
        0,
        1,
        r#"{"record_mib":300}"#,
        &limits,
        Grants::default(),
    )
    .unwrap();
    inst.process(0, &[Record::new(b"x".to_vec())]).unwrap();
    let out = inst.take_output(0);
    let sizes: Vec<usize> = out.iter().map(|r| r.value.len()).collect();
    assert_eq!(sizes, [300 * MIB, 1]);
    assert!(
        out[0]
            .value
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8),
        "the record arrived intact"
    );
}

#[test]
fn a_200_mib_snapshot_checkpoints_and_restores() {
    let job = JobFile::new("big")
        .checkpoint(Checkpoint::every("1s"))
        .source(Source::file("lines", "in.txt").batch_size(10).rate(200))
        .operator(
            Operator::new("big", plugins::GUEST_BIG_STATE)
                .inputs(&["lines"])
                .config("{ snapshot_mib = 200 }")
                .limits(&format!(
                    r#"{{ memory = "512MiB", call_timeout = "{}s" }}"#,
                    CALL_TIMEOUT.as_secs()
                )),
        )
        .sink(Sink::file("out", "out.txt").input("big"));
    // 10 s at 200 records/s: stopped after the first checkpoint, long
    // before the end.
    let input: String = (0..2000).map(|i| format!("r{i}\n")).collect();
    let j = JobDir::new(WEIR, job, &[("in.txt", &input)]);

    let mut child = j
        .command("run", &[])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let listed = j.on_state("checkpoints", &[]);
        if listed.success() && listed.stdout.contains("complete checkpoint") {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "weir run exited ({status}) before a checkpoint: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            start.elapsed() < CALL_TIMEOUT,
            "no checkpoint after {CALL_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGTERM checkpoints (another 200 MiB snapshot) and stops.
    signal(&child, "-TERM");
    let first = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(
        !j.read("out.txt").contains("seen="),
        "the first run reached the end of its input; the test needs it stopped mid-way"
    );

    // The restore checks all 200 MiB byte for byte, and brings back the
    // count that `seen=` reports at the end.
    let stderr = j.run_ok(&[]);
    assert_has(&stderr, "resumed from checkpoint");
    // One source and one instance: the input's lines in order, then `seen=`.
    assert_same_order(
        &j.read("out.txt"),
        &format!("{input}seen=2000\n"),
        "out.txt",
    );
}
