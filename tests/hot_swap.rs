//! Hot swap: replacing an operator's plugin keeps its state, on restore
//! (`weir run --swap`) and live (`weir swap`), with rollback when the new
//! plugin fails, and refusals that explain themselves.

use std::process::Stdio;

use serde_json::Value;
use weir_tests::cli::Weir;
use weir_tests::counts::{Counts, assert_running_counts, parse_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile};
use weir_tests::jobs::count_words;
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

const WORDS: usize = 40;

fn swappable(rate: u64) -> JobFile {
    count_words("swappable", Checkpoint::every("100ms"), rate, 2)
}

fn job(rate: u64, n: usize) -> JobDir {
    let words: String = (0..n).map(|i| format!("w{}\n", (i * 7) % WORDS)).collect();
    JobDir::new(WEIR, swappable(rate), &[("words.txt", &words)])
}

/// The output's lines per word as (count, format version), in file order.
fn counts(j: &JobDir) -> Counts {
    parse_counts(&j.read("out.jsonl"))
}

/// Every input word was counted exactly once, across formats: each word
/// has exactly the counts 1, 2, ..., its number of occurrences, in this
/// order, and once a word has a line in the v2 format, every later line of
/// it is in that format.
fn assert_exactly_once(j: &JobDir, what: &str) {
    let input = j.read("words.txt");
    let want = true_counts(input.lines());
    assert_eq!(want.len(), WORDS);
    assert_running_counts(&want, &j.read("out.jsonl"), what);
}

fn formats(m: &Counts) -> (usize, usize) {
    let all = m.values().flatten();
    let v1 = all.clone().filter(|(_, f)| *f == 1).count();
    (v1, all.count() - v1)
}

/// Starts the job and stops it with SIGINT once it has committed output,
/// leaving a checkpoint.
fn stopped(j: &JobDir) {
    let out = j.run_interrupted(&[], "out.jsonl");
    assert!(out.success(), "{}", out.stderr);
}

#[test]
fn swap_on_restore_continues_counts_in_the_new_format() {
    let j = job(3000, 6000);
    stopped(&j);
    let before = formats(&counts(&j));
    assert!(before.0 > 0 && before.1 == 0, "{before:?}");
    let err = j.run_ok(&["--swap", &format!("count={}", plugins::WORD_COUNT_V2)]);
    assert_has(&err, "resumed from checkpoint");
    assert_exactly_once(&j, "after the swap on restore");
    let m = counts(&j);
    let (v1, v2) = formats(&m);
    assert_eq!(v1, before.0, "v1 output is what v1 committed");
    assert!(v2 > 0);
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
    stopped(&j);
    j.write_job(swappable(3000).operator_with("count", |o| o.plugin(plugins::WORD_COUNT_V2)));
    let out = j.run(&[]);
    let err = &out.stderr;
    assert!(!out.success());
    assert_has_all(err, &["refusing to change code silently", "--swap count="]);
}

/// Stops a job at a checkpoint and restores it with `--swap count=<plugin>`:
/// that fails with an error containing every needle, and nothing ran, so
/// the checkpoint is untouched and a normal restore counts exactly once.
/// Returns the error.
fn swap_is_refused(plugin: &str, needles: &[&str]) -> String {
    let j = job(3000, 6000);
    stopped(&j);
    let out = j.run(&["--swap", &format!("count={plugin}")]);
    assert!(!out.success());
    let err = out.stderr;
    assert!(needles.iter().all(|n| err.contains(n)), "{err}");
    j.run_ok(&[]);
    assert_exactly_once(&j, "after a refused swap");
    err
}

/// Asserts that a refused swap to reconcile's ports names reconcile's file
/// for the ports that do not fit, never the job file's word-count.
fn names_the_swapped_in_plugin(err: &str) {
    let detail = err
        .split("its ports do not fit the job")
        .nth(1)
        .unwrap_or_default();
    assert!(detail.contains(plugins::RECONCILE), "{err}");
    assert_lacks(err, plugins::WORD_COUNT);
}

#[test]
fn a_swap_to_a_plugin_with_other_ports_is_refused() {
    let err = swap_is_refused(
        plugins::RECONCILE,
        &["cannot swap operator `count`", "ports"],
    );
    names_the_swapped_in_plugin(&err);
}

#[test]
fn a_live_swap_to_a_plugin_with_other_ports_names_that_plugin() {
    let j = job(3000, 6000);
    let (ok, text) = live_swap_op(&j, "count", plugins::RECONCILE);
    assert!(!ok && text.contains("swap refused"), "{text}");
    names_the_swapped_in_plugin(&text);
}

#[test]
fn a_swap_whose_restore_fails_changes_nothing() {
    swap_is_refused(
        plugins::GUEST_SWAP_BAD_RESTORE,
        &["restore", "deliberately broken"],
    );
}

/// Starts the job (no progress lines, stderr dropped).
fn spawned(j: &JobDir) -> std::process::Child {
    j.command("run", &["--progress-every", "0"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts the job as [`spawned`] does and waits until it has committed
/// output.
fn running(j: &JobDir) -> std::process::Child {
    let mut child = spawned(j);
    assert!(
        j.wait_for_output(&mut child, "out.jsonl", 0),
        "the job ended before it committed output"
    );
    child
}

/// Runs the job, swaps `count` to `plugin` once the job has committed
/// output, and returns the `weir swap` outcome (exit success,
/// stdout+stderr).
fn live_swap(j: &JobDir, plugin: &str) -> (bool, String) {
    let mut child = running(j);
    let out = j.on_state("swap", &[&format!("count={plugin}")]);
    let text = format!("{}{}", out.stdout, out.stderr);
    let run = child.wait().unwrap();
    assert!(run.success(), "the job keeps running and finishes");
    (out.success(), text)
}

#[test]
fn live_swap_keeps_every_count_exactly_once() {
    let j = job(3000, 9000);
    let (ok, text) = live_swap(&j, plugins::WORD_COUNT_V2);
    assert!(ok, "{text}");
    assert_has(&text, "now runs the new plugin");
    assert_has(&text, "warning: its state version changed from 1 to 2");
    assert_lacks(&text, "the new plugin is `");
    assert_exactly_once(&j, "after a live swap");
    let (v1, v2) = formats(&counts(&j));
    assert!(v1 > 0 && v2 > 0, "both formats: {v1} {v2}");
}

/// Runs a job and swaps `count` to `plugin` live: the swap is rolled back
/// with a message containing every needle, and every word is still counted
/// exactly once; returns the counts.
fn live_swap_is_rolled_back(plugin: &str, needles: &[&str]) -> Counts {
    let j = job(3000, 9000);
    let (ok, text) = live_swap(&j, plugin);
    assert!(!ok, "{text}");
    assert!(
        text.contains("rolled back") && needles.iter().all(|n| text.contains(n)),
        "{text}"
    );
    assert_exactly_once(&j, "after a rolled-back swap");
    counts(&j)
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
    let out = WEIR.output(["swap", empty, "count=x.wasm", "--wait", "1"]);
    let err = &out.stderr;
    assert!(
        !out.success() && err.contains("no running job") && err.contains("waited 1 s"),
        "{err}"
    );
    let out = WEIR.output(["swap", empty, "count"]);
    assert!(!out.success() && out.stderr.contains("OPERATOR=NEW.wasm"));
    let j = job(3000, 6000);
    let (ok, text) = live_swap_op(&j, "nope", plugins::WORD_COUNT_V2);
    assert!(!ok && text.contains("no operator `nope`"), "{text}");
}

/// Starts the job and at once (`weir swap` waits for the socket) asks it
/// to swap `op` to `plugin`; kills the job and returns the `weir swap`
/// outcome (exit success, stderr).
fn live_swap_op(j: &JobDir, op: &str, plugin: &str) -> (bool, String) {
    let mut child = running(j);
    let out = j.on_state("swap", &[&format!("{op}={plugin}")]);
    let _ = child.kill();
    let _ = child.wait();
    (out.success(), out.stderr)
}

#[test]
fn a_swap_right_after_the_run_starts_waits_for_the_job() {
    let n = 9000;
    let j = job(3000, n);
    let mut child = spawned(&j);
    let out = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    assert!(out.success(), "{}", out.stderr);
    assert_has(&out.stdout, "now runs the new plugin");
    assert!(child.wait().unwrap().success());
    assert_exactly_once(&j, "after a swap right at the start");
    assert!(formats(&counts(&j)).1 > 0, "v2 output");
}

const SWAPPED_LINE: &str = "restores with the plugin it was swapped to";

/// Runs a job of `n` words, swaps `count` to word-count-v2 live, and kills
/// the job (SIGKILL) once a checkpoint with v2 completed (the swap's
/// answer), before its input ends.
fn crashed_after_a_live_swap(n: usize) -> JobDir {
    let j = job(1000, n);
    let mut child = spawned(&j);
    let out = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    assert!(
        out.success() && out.stdout.contains("now runs the new plugin"),
        "{}",
        out.stderr
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let last = store.latest().unwrap().unwrap();
    assert!(!last.final_checkpoint, "the job ended before it was killed");
    let count = &last.operators["count"];
    assert_eq!(count.plugin_version, "2.0.0");
    let swapped = count.swapped.as_ref().expect("the swap is recorded");
    assert_eq!(
        swapped.copy,
        format!("{}/{}.wasm", weir::run::KEPT_DIR, count.sha256)
    );
    assert!(
        j.state_dir().join(&swapped.copy).is_file(),
        "the copy is kept"
    );
    j
}

#[test]
fn a_crash_after_a_live_swap_restarts_with_the_swapped_plugin() {
    let n = 9000;
    let j = crashed_after_a_live_swap(n);
    let shown = j.checkpoints(&[]);
    let v2 = std::path::absolute(plugins::WORD_COUNT_V2).unwrap();
    assert_has_all(
        &shown,
        &[
            &format!("swapped in from {}", v2.display()),
            "kept as plugins/",
        ],
    );
    let err = j.run_ok(&[]);
    let said: Vec<&str> = err.lines().filter(|l| l.contains(SWAPPED_LINE)).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].contains("operator `count`") && said[0].contains("2.0.0"),
        "{err}"
    );
    assert_has(&err, "resumed from checkpoint");
    assert_exactly_once(&j, "after a crash after a live swap");
}

#[test]
fn after_a_crash_swap_and_an_edited_job_file_take_precedence_over_the_kept_plugin() {
    let n = 9000;
    let j = crashed_after_a_live_swap(n);
    // `--swap` wins: the broken plugin it names is the one restored.
    let out = j.run(&[
        "--swap",
        &format!("count={}", plugins::GUEST_SWAP_BAD_RESTORE),
    ]);
    assert!(
        !out.success() && out.stderr.contains("deliberately broken"),
        "{}",
        out.stderr
    );
    assert_lacks(&out.stderr, SWAPPED_LINE);
    // Without its copy, the restore is refused, naming the copy.
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let last = store.latest().unwrap().unwrap();
    drop(store);
    let copy = j
        .state_dir()
        .join(&last.operators["count"].swapped.as_ref().unwrap().copy);
    std::fs::remove_file(&copy).unwrap();
    let out = j.run(&[]);
    assert!(!out.success());
    assert_has_all(
        &out.stderr,
        &["is missing or damaged", &copy.display().to_string()],
    );
    // A job file pointed at v2 (edited since the swap) is used as it is,
    // and the job no longer counts as swapped.
    j.write_job(swappable(1000).operator_with("count", |o| o.plugin(plugins::WORD_COUNT_V2)));
    let err = j.run_ok(&[]);
    assert_lacks(&err, SWAPPED_LINE);
    assert_exactly_once(&j, "with the edited job file");
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let last = store.latest().unwrap().unwrap();
    assert_eq!(last.operators["count"].swapped, None);
}

/// The plugin version that the latest complete checkpoint records for
/// `count`.
fn recorded_version(j: &JobDir) -> String {
    let list: Value = serde_json::from_str(&j.checkpoints(&["--json"])).unwrap();
    let last = list
        .as_array()
        .unwrap()
        .last()
        .expect("a complete checkpoint");
    last["operators"]["count"]["plugin_version"]
        .as_str()
        .unwrap()
        .to_string()
}

/// SIGKILL right after `weir swap` reported success: the latest checkpoint
/// was completed by the new plugin, and the restore that names it with
/// `--swap` continues every count exactly once.
#[test]
fn a_job_killed_right_after_a_live_swap_resumes_exactly_once() {
    let j = job(3000, 15_000);
    let mut child = running(&j);
    let swap = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(swap.success(), "{}", swap.stderr);
    assert_eq!(recorded_version(&j), "2.0.0");
    let err = j.run_ok(&["--swap", &format!("count={}", plugins::WORD_COUNT_V2)]);
    assert_has(&err, "resumed from checkpoint");
    assert_exactly_once(&j, "after a SIGKILL right after a live swap");
    let (v1, v2) = formats(&counts(&j));
    assert!(v1 > 0 && v2 > 0, "both formats: {v1} {v2}");
}

/// SIGKILL as soon as the job logged a swap request, while it takes the
/// swap's checkpoint: the next run resumes from the latest complete
/// checkpoint, with the plugin that checkpoint records (the old one, unless
/// the new one already completed a checkpoint), and counts exactly once.
#[test]
fn a_job_killed_just_after_a_swap_was_requested_resumes_exactly_once() {
    let j = job(3000, 15_000);
    let mut run = j.spawn(&["-v", "--progress-every", "0"]);
    assert!(
        j.wait_for_output(&mut run.child, "out.jsonl", 0),
        "the job ended before it committed output"
    );
    let mut swap = WEIR.command(["swap"]);
    swap.arg(j.state_dir())
        .arg(format!("count={}", plugins::WORD_COUNT_V2))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut swap = swap.spawn().unwrap();
    run.wait_for_line("the swap request", |l| {
        l.contains("swap of `count` requested")
    });
    run.kill();
    // The job is gone, so the swap gets no outcome; only reap it.
    swap.wait().unwrap();
    let args: Vec<String> = match recorded_version(&j).as_str() {
        "0.1.0" => vec![],
        "2.0.0" => vec!["--swap".into(), format!("count={}", plugins::WORD_COUNT_V2)],
        other => panic!("checkpoint records word-count {other}"),
    };
    let old_plugin_resumes = args.is_empty();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = j.run_ok(&args);
    assert_has(&err, "resumed from checkpoint");
    assert_exactly_once(&j, "after a SIGKILL just after a swap request");
    let (v1, v2) = formats(&counts(&j));
    assert!(v1 > 0, "{v1} {v2}");
    if old_plugin_resumes {
        assert_eq!(v2, 0, "the swap never completed, so only v1 output");
    }
}

/// A job whose checkpoints go to an object store is swapped to v2 on
/// restore, from a file deleted right after, and stopped; then its state
/// directory is lost. The next plain run rebuilds it from the store with
/// the plugin the state directory kept (no `--swap`, and no file left to
/// point at) and counts on in the v2 format: every word exactly once, in
/// order, across both formats.
#[test]
fn a_swapped_in_plugin_comes_back_from_the_object_store_with_the_state() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}", store.path().display());
    let words: String = (0..6000)
        .map(|i| format!("w{}\n", (i * 7) % WORDS))
        .collect();
    let file = count_words("swappable", Checkpoint::every("100ms").store(&url), 3000, 2);
    let j = JobDir::new(WEIR, file, &[("words.txt", &words)]);
    stopped(&j);
    let v2 = j.path().join("v2-for-now.wasm");
    std::fs::copy(plugins::WORD_COUNT_V2, &v2).unwrap();
    let swap = format!("count={}", v2.display());
    let mut child = j
        .command("run", &["--swap", &swap])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(j.wait_for_output(&mut child, "out.jsonl", j.size("out.jsonl")));
    weir_tests::job_dir::signal(&child, "-INT");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, v2_lines) = formats(&counts(&j));
    assert!(v2_lines > 0, "v2 committed output before the stop");
    std::fs::remove_file(&v2).unwrap();
    std::fs::remove_dir_all(j.state_dir()).unwrap();
    let err = j.run_ok(&[]);
    assert_has(&err, "resumed from checkpoint");
    assert_exactly_once(&j, "after the state directory came back from the store");
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let last = store.latest().unwrap().unwrap();
    assert_eq!(last.operators["count"].plugin_version, "2.0.0");
}
