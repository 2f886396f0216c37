//! Hot swap: replacing an operator's plugin keeps its state, on restore
//! (`weir run --swap`) and live (`weir swap`), with rollback when the new
//! plugin fails, and refusals that explain themselves.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use weir_tests::pipeline::JobDir;
use weir_tests::plugins;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

const JOB: &str = r#"
name = "swappable"
[checkpoint]
interval = "100ms"
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

const WORDS: usize = 40;

fn job(rate: u64, n: usize) -> JobDir {
    let words: String = (0..n).map(|i| format!("w{}\n", (i * 7) % WORDS)).collect();
    JobDir::new(
        WEIR,
        &JOB.replace("RATE", &rate.to_string()),
        &[("words.txt", &words)],
    )
}

/// Output lines per word as (count, format version), in file order.
fn counts(j: &JobDir) -> BTreeMap<String, Vec<(u64, u8)>> {
    let text = std::fs::read_to_string(j.path().join("out.jsonl")).unwrap();
    let mut m: BTreeMap<String, Vec<(u64, u8)>> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (w, n, fmt) = match v.get("v") {
            Some(_) => (&v["w"], &v["n"], 2),
            None => (&v["word"], &v["count"], 1),
        };
        m.entry(w.as_str().unwrap().to_string())
            .or_default()
            .push((n.as_u64().unwrap(), fmt));
    }
    m
}

/// Every word was counted exactly once per occurrence, across formats.
fn assert_exactly_once(m: &BTreeMap<String, Vec<(u64, u8)>>, n: usize) {
    assert_eq!(m.len(), WORDS);
    let total: usize = m.values().map(Vec::len).sum();
    assert_eq!(total, n, "one output line per input word");
    for (w, seen) in m {
        let mut ns: Vec<u64> = seen.iter().map(|(c, _)| *c).collect();
        ns.sort_unstable();
        assert!(
            ns.iter().enumerate().all(|(i, c)| *c == i as u64 + 1),
            "{w}: counts {ns:?} are not 1..={}",
            ns.len()
        );
    }
}

fn formats(m: &BTreeMap<String, Vec<(u64, u8)>>) -> (usize, usize) {
    let all = m.values().flatten();
    let v1 = all.clone().filter(|(_, f)| *f == 1).count();
    (v1, all.count() - v1)
}

/// Starts the job and stops it with SIGINT after `ms`, leaving a checkpoint.
fn stopped(j: &JobDir, ms: u64) {
    let child = Command::new(WEIR)
        .arg("run")
        .arg(j.path().join("job.toml"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn swap_on_restore_continues_counts_in_the_new_format() {
    let n = 6000;
    let j = job(3000, n);
    stopped(&j, 1200);
    let before = formats(&counts(&j));
    assert!(before.0 > 0 && before.1 == 0, "{before:?}");
    let err = j.run_ok(&["--swap", &format!("count={}", plugins::WORD_COUNT_V2)]);
    assert!(err.contains("resumed from checkpoint"), "{err}");
    let m = counts(&j);
    assert_exactly_once(&m, n);
    let (v1, v2) = formats(&m);
    assert_eq!(v1, before.0, "v1 output is what v1 committed");
    assert!(v2 > 0);
    // Every line after the swap is in the v2 format, continuing v1's counts.
    for seen in m.values() {
        let first_v2 = seen.iter().position(|(_, f)| *f == 2).unwrap_or(seen.len());
        assert!(seen[first_v2..].iter().all(|(_, f)| *f == 2));
    }
    // The state now uses the v2 encoding.
    let store = weir::store::CheckpointStore::open_existing(&j.path().join("state")).unwrap();
    let last = store.latest().unwrap().unwrap();
    assert_eq!(last.operators["count"].state_version, 2);
    assert_eq!(last.operators["count"].plugin_version, "2.0.0");
    let state = store.operator_state(last.id, "count").unwrap();
    assert_eq!(state.len(), WORDS);
    assert!(
        state
            .iter()
            .all(|(_, k, v)| k.ends_with(b"\0n") && v.len() == 8)
    );
}

#[test]
fn a_changed_plugin_without_swap_is_refused_with_a_hint() {
    let j = job(3000, 6000);
    stopped(&j, 800);
    let job_file = j.path().join("job.toml");
    let text = std::fs::read_to_string(&job_file).unwrap();
    std::fs::write(
        &job_file,
        text.replace("word-count.wasm", "word-count-v2.wasm"),
    )
    .unwrap();
    let out = j.run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("refusing to change code silently") && err.contains("--swap count="),
        "{err}"
    );
}

#[test]
fn a_swap_to_a_plugin_with_other_ports_is_refused() {
    let j = job(3000, 6000);
    stopped(&j, 800);
    let out = j.run(&["--swap", &format!("count={}", plugins::RECONCILE)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cannot swap operator `count`") && err.contains("ports"),
        "{err}"
    );
    // Nothing ran: the checkpoint is untouched and a normal restore works.
    j.run_ok(&[]);
    assert_exactly_once(&counts(&j), 6000);
}

#[test]
fn a_swap_whose_restore_fails_changes_nothing() {
    let j = job(3000, 6000);
    stopped(&j, 800);
    let out = j.run(&[
        "--swap",
        &format!("count={}", plugins::GUEST_SWAP_BAD_RESTORE),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("restore") && err.contains("deliberately broken"),
        "{err}"
    );
    j.run_ok(&[]);
    assert_exactly_once(&counts(&j), 6000);
}

/// Runs the job, swaps `count` to `plugin` after `after_ms`, and returns the
/// `weir swap` outcome (exit success, stdout+stderr).
fn live_swap(j: &JobDir, plugin: &str, after_ms: u64) -> (bool, String) {
    let mut child = Command::new(WEIR)
        .arg("run")
        .arg(j.path().join("job.toml"))
        .args(["--progress-every", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(after_ms));
    let state = j.path().join("state");
    let out = Command::new(WEIR)
        .arg("swap")
        .arg(&state)
        .arg(format!("count={plugin}"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = child.wait().unwrap();
    assert!(run.success(), "the job keeps running and finishes");
    let _ = child.stderr.take();
    (out.status.success(), text)
}

#[test]
fn live_swap_keeps_every_count_exactly_once() {
    let n = 9000;
    let j = job(3000, n);
    let (ok, text) = live_swap(&j, plugins::WORD_COUNT_V2, 1200);
    assert!(ok, "{text}");
    assert!(text.contains("now runs the new plugin"), "{text}");
    let m = counts(&j);
    assert_exactly_once(&m, n);
    let (v1, v2) = formats(&m);
    assert!(v1 > 0 && v2 > 0, "both formats: {v1} {v2}");
}

#[test]
fn live_swap_to_a_plugin_that_fails_restore_rolls_back() {
    let n = 9000;
    let j = job(3000, n);
    let (ok, text) = live_swap(&j, plugins::GUEST_SWAP_BAD_RESTORE, 1200);
    assert!(!ok, "{text}");
    assert!(
        text.contains("rolled back") && text.contains("deliberately broken"),
        "{text}"
    );
    let m = counts(&j);
    assert_exactly_once(&m, n);
    assert_eq!(formats(&m).1, 0, "only v1 output");
}

#[test]
fn live_swap_to_a_plugin_that_traps_rolls_back() {
    let n = 9000;
    let j = job(3000, n);
    let (ok, text) = live_swap(&j, plugins::GUEST_SWAP_TRAP_FIRST_BATCH, 1200);
    assert!(!ok, "{text}");
    assert!(
        text.contains("rolled back")
            && text.contains("trapped in `process`")
            && text.contains("deliberate trap"),
        "{text}"
    );
    assert_exactly_once(&counts(&j), n);
}

#[test]
fn swap_requests_are_checked() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(WEIR)
        .arg("swap")
        .arg(empty.path())
        .arg("count=x.wasm")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no running job"),
        "{err}"
    );
    let out = Command::new(WEIR)
        .arg("swap")
        .arg(empty.path())
        .arg("count")
        .output()
        .unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("OPERATOR=NEW.wasm")
    );
    let j = job(3000, 6000);
    let (ok, text) = live_swap_op(&j, "nope", plugins::WORD_COUNT_V2);
    assert!(!ok && text.contains("no operator `nope`"), "{text}");
}

fn live_swap_op(j: &JobDir, op: &str, plugin: &str) -> (bool, String) {
    let mut child = Command::new(WEIR)
        .arg("run")
        .arg(j.path().join("job.toml"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let out = Command::new(WEIR)
        .arg("swap")
        .arg(j.path().join("state"))
        .arg(format!("{op}={plugin}"))
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
