//! Hot swap: replacing an operator's plugin keeps its state, on restore
//! (`weir run --swap`) and live (`weir swap`), with rollback when the new
//! plugin fails, and refusals that explain themselves.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile};
use weir_tests::jobs::count_words;
use weir_tests::plugins;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

const WORDS: usize = 40;

fn swappable(rate: u64) -> JobFile {
    count_words("swappable", Checkpoint::every("100ms"), rate, 2)
}

fn job(rate: u64, n: usize) -> JobDir {
    let words: String = (0..n).map(|i| format!("w{}\n", (i * 7) % WORDS)).collect();
    JobDir::new(WEIR, swappable(rate), &[("words.txt", &words)])
}

/// Output lines per word as (count, format version), in file order.
type Counts = BTreeMap<String, Vec<(u64, u8)>>;

/// The [`Counts`] of the job's output.
fn counts(j: &JobDir) -> Counts {
    let mut m = Counts::new();
    for line in j.read("out.jsonl").lines() {
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
fn assert_exactly_once(m: &Counts, n: usize) {
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

fn formats(m: &Counts) -> (usize, usize) {
    let all = m.values().flatten();
    let v1 = all.clone().filter(|(_, f)| *f == 1).count();
    (v1, all.count() - v1)
}

/// Starts the job and stops it with SIGINT after `ms`, leaving a checkpoint.
fn stopped(j: &JobDir, ms: u64) {
    let out = j.run_interrupted(&[], Duration::from_millis(ms));
    assert!(out.success(), "{}", out.stderr);
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
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
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
    j.write_job(swappable(3000).operator_with("count", |o| o.plugin(plugins::WORD_COUNT_V2)));
    let out = j.run(&[]);
    let err = &out.stderr;
    assert!(!out.success());
    assert!(
        err.contains("refusing to change code silently") && err.contains("--swap count="),
        "{err}"
    );
}

/// Stops a job at a checkpoint and restores it with `--swap count=<plugin>`:
/// that fails with an error containing every needle, and nothing ran, so
/// the checkpoint is untouched and a normal restore counts exactly once.
fn swap_is_refused(plugin: &str, needles: &[&str]) {
    let j = job(3000, 6000);
    stopped(&j, 800);
    let out = j.run(&["--swap", &format!("count={plugin}")]);
    let err = &out.stderr;
    assert!(!out.success());
    assert!(needles.iter().all(|n| err.contains(n)), "{err}");
    j.run_ok(&[]);
    assert_exactly_once(&counts(&j), 6000);
}

#[test]
fn a_swap_to_a_plugin_with_other_ports_is_refused() {
    swap_is_refused(
        plugins::RECONCILE,
        &["cannot swap operator `count`", "ports"],
    );
}

#[test]
fn a_swap_whose_restore_fails_changes_nothing() {
    swap_is_refused(
        plugins::GUEST_SWAP_BAD_RESTORE,
        &["restore", "deliberately broken"],
    );
}

/// Runs the job, swaps `count` to `plugin` after `after_ms`, and returns the
/// `weir swap` outcome (exit success, stdout+stderr).
fn live_swap(j: &JobDir, plugin: &str, after_ms: u64) -> (bool, String) {
    let mut child = j
        .command("run", &["--progress-every", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(after_ms));
    let out = j.on_state("swap", &[&format!("count={plugin}")]);
    let text = format!("{}{}", out.stdout, out.stderr);
    let run = child.wait().unwrap();
    assert!(run.success(), "the job keeps running and finishes");
    let _ = child.stderr.take();
    (out.success(), text)
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

/// Runs a job and swaps `count` to `plugin` live: the swap is rolled back
/// with a message containing every needle, and every word is still counted
/// exactly once; returns the counts.
fn live_swap_is_rolled_back(plugin: &str, needles: &[&str]) -> Counts {
    let n = 9000;
    let j = job(3000, n);
    let (ok, text) = live_swap(&j, plugin, 1200);
    assert!(!ok, "{text}");
    assert!(
        text.contains("rolled back") && needles.iter().all(|n| text.contains(n)),
        "{text}"
    );
    let m = counts(&j);
    assert_exactly_once(&m, n);
    m
}

#[test]
fn live_swap_to_a_plugin_that_fails_restore_rolls_back() {
    let m = live_swap_is_rolled_back(plugins::GUEST_SWAP_BAD_RESTORE, &["deliberately broken"]);
    assert_eq!(formats(&m).1, 0, "only v1 output");
}

#[test]
fn live_swap_to_a_plugin_that_traps_rolls_back() {
    live_swap_is_rolled_back(
        plugins::GUEST_SWAP_TRAP_FIRST_BATCH,
        &["trapped in `process`", "deliberate trap"],
    );
}

#[test]
fn swap_requests_are_checked() {
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().to_str().unwrap();
    let out = WEIR.output(["swap", empty, "count=x.wasm"]);
    let err = &out.stderr;
    assert!(!out.success() && err.contains("no running job"), "{err}");
    let out = WEIR.output(["swap", empty, "count"]);
    assert!(!out.success() && out.stderr.contains("OPERATOR=NEW.wasm"));
    let j = job(3000, 6000);
    let (ok, text) = live_swap_op(&j, "nope", plugins::WORD_COUNT_V2);
    assert!(!ok && text.contains("no operator `nope`"), "{text}");
}

fn live_swap_op(j: &JobDir, op: &str, plugin: &str) -> (bool, String) {
    let mut child = j.command("run", &[]).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let out = j.on_state("swap", &[&format!("{op}={plugin}")]);
    let _ = child.kill();
    let _ = child.wait();
    (out.success(), out.stderr)
}
