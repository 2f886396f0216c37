//! Restoring: choosing a checkpoint, refusing checkpoints that do not fit
//! the job, and damaged state files reported clearly (never a panic).

use std::process::Output;

use weir_tests::pipeline::{JobDir, multiset};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

const JOB: &str = r#"
name = "counting"
[checkpoint]
interval = "50ms"
retain = 100
[[source]]
id = "words"
type = "file"
path = "words.txt"
rate = RATE
[[operator]]
id = "count"
plugin = "{plugins}/word-count.wasm"
inputs = ["words"]
parallelism = 2
[[sink]]
id = "out"
type = "file"
path = "out.jsonl"
format = "jsonl"
input = "count"
"#;

fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{}\n", i % 37)).collect()
}

fn job(rate: u64, n: usize) -> JobDir {
    JobDir::new(
        WEIR,
        &JOB.replace("RATE", &rate.to_string()),
        &[("words.txt", &words(n))],
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a failed run with a one-line error containing every needle.
fn assert_fails(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected failure, got success: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    for n in needles {
        assert!(line.contains(n), "{n:?} not in {line}");
    }
}

fn straight_output(n: usize) -> std::collections::BTreeMap<String, usize> {
    let j = job(1_000_000, n);
    j.run_ok(&[]);
    j.lines("out.jsonl")
}

#[test]
fn rerunning_a_finished_job_does_nothing_and_restore_none_starts_over() {
    let j = job(1_000_000, 500);
    j.run_ok(&[]);
    let first = j.lines("out.jsonl");
    let err = j.run_ok(&[]);
    assert!(err.contains("already finished"), "{err}");
    assert_eq!(j.lines("out.jsonl"), first);
    j.run_ok(&["--restore", "none"]);
    assert_eq!(
        j.lines("out.jsonl"),
        first,
        "a fresh run rebuilds the same output, not appended"
    );
}

#[test]
fn restoring_an_older_checkpoint_rewinds_state_and_output() {
    let n = 3000;
    let j = job(6000, n);
    j.run_ok(&[]);
    let store = weir::store::CheckpointStore::open_existing(&j.path().join("state")).unwrap();
    let list = store.list().unwrap();
    assert!(list.len() >= 4, "only {} checkpoints", list.len());
    let middle = &list[list.len() / 2];
    assert!(!middle.final_checkpoint);
    drop(store);
    let err = j.run_ok(&["--restore", &middle.id.to_string()]);
    assert!(
        err.contains(&format!("resumed from checkpoint {}", middle.id)),
        "{err}"
    );
    assert_eq!(
        j.lines("out.jsonl"),
        straight_output(n),
        "exactly once relative to the older checkpoint"
    );
}

#[test]
fn an_unknown_checkpoint_id_is_refused() {
    let j = job(1_000_000, 100);
    j.run_ok(&[]);
    assert_fails(
        &j.run(&["--restore", "9999"]),
        &["checkpoint 9999", "weir checkpoints"],
    );
    assert_fails(&j.run(&["--restore", "soon"]), &["soon"]);
}

#[test]
fn a_state_dir_of_another_job_is_refused() {
    let j = job(1_000_000, 100);
    j.run_ok(&[]);
    let other = JobDir::new(
        WEIR,
        &JOB.replace("RATE", "1000")
            .replace("\"counting\"", "\"other\""),
        &[("words.txt", "a\n")],
    );
    let state = j.path().join("state");
    assert_fails(
        &other.run(&["--state-dir", state.to_str().unwrap()]),
        &["counting", "other"],
    );
}

/// Kills a run mid-way so that the state dir has a non-final checkpoint.
fn interrupted(n: usize) -> JobDir {
    let j = job(2000, n);
    let mut rng = weir_tests::pipeline::XorShift(7);
    let killed = j.run_killed(1, (900, 1000), &mut rng);
    assert_eq!(killed, 1);
    j
}

#[test]
fn a_changed_plugin_is_refused_without_swap() {
    let j = interrupted(20_000);
    let job_file = j.path().join("job.toml");
    let text = std::fs::read_to_string(&job_file).unwrap();
    std::fs::write(&job_file, text.replace("word-count.wasm", "dedupe.wasm")).unwrap();
    assert_fails(
        &j.run(&[]),
        &["operator `count`", "word-count", "dedupe", "sha256"],
    );
}

#[test]
fn a_changed_parallelism_is_refused() {
    let j = interrupted(20_000);
    let job_file = j.path().join("job.toml");
    let text = std::fs::read_to_string(&job_file).unwrap();
    std::fs::write(
        &job_file,
        text.replace("parallelism = 2", "parallelism = 3"),
    )
    .unwrap();
    assert_fails(&j.run(&[]), &["operator `count`", "parallelism 2", "3"]);
}

#[test]
fn a_truncated_state_file_is_reported_clearly() {
    let j = interrupted(20_000);
    let file = j.path().join("state/checkpoints.redb");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    assert_fails(&j.run(&[]), &["checkpoints.redb"]);
}

#[test]
fn a_garbage_state_file_is_reported_clearly() {
    let j = interrupted(20_000);
    let file = j.path().join("state/checkpoints.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    for (i, b) in bytes.iter_mut().enumerate().skip(64) {
        *b ^= (i % 251) as u8;
    }
    std::fs::write(&file, bytes).unwrap();
    assert_fails(&j.run(&[]), &["checkpoints.redb"]);
}

#[test]
fn a_modified_output_file_is_reported_clearly() {
    let j = interrupted(20_000);
    let committed = std::fs::metadata(j.path().join("out.jsonl")).unwrap().len();
    assert!(committed > 0, "the interrupted run committed output");
    // An emptied output cannot continue a checkpoint that had committed output.
    std::fs::write(j.path().join("out.jsonl"), "").unwrap();
    assert_fails(&j.run(&[]), &["out.jsonl", "--restore none"]);
}

#[test]
fn sigint_checkpoints_and_the_next_run_finishes_exactly_once() {
    let n = 20_000;
    let j = job(4000, n);
    let child = std::process::Command::new(WEIR)
        .arg("run")
        .arg(j.path().join("job.toml"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SIGINT, as Ctrl-C sends.
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("job `counting` stopped"), "{err}");
    let partial = multiset(&std::fs::read_to_string(j.path().join("out.jsonl")).unwrap());
    assert!(!partial.is_empty(), "the stop checkpoint committed output");
    let err = j.run_ok(&[]);
    assert!(err.contains("resumed from checkpoint"), "{err}");
    assert_eq!(j.lines("out.jsonl"), straight_output(n));
}
