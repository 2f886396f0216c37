//! State that outlives the job's shape, through the CLI: a changed
//! `parallelism` restores state and timers redistributed by key group, and
//! savepoints carry a running job's state into a new state directory, into
//! a changed job, or refuse clearly.

use std::path::Path;

use serde_json::Value;
use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink};
use weir_tests::jobs::count_words;
use weir_tests::order::{assert_in_order_per_instance, jsonl_key};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::text::assert_has;
use weir_tests::windows::{assert_windows, clicks, windows_job};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `n` words of a 500-word vocabulary, one per line.
fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{}\n", (i * 7919) % 500)).collect()
}

/// The word count at `parallelism`, checkpoints every 50 ms, all retained.
fn counting(parallelism: u32, rate: u64) -> JobFile {
    count_words(
        "counting",
        Checkpoint::every("50ms").retain(1000),
        rate,
        parallelism,
    )
}

/// Asserts that the word count in `j` counted every word of its input
/// exactly once, each word's counts in order.
fn assert_counted(j: &JobDir, what: &str) {
    let want = true_counts(j.read("words.txt").lines());
    assert_running_counts(&want, &j.read("out.jsonl"), what);
}

/// `weir checkpoints --json` of `dir`.
fn checkpoints(j: &JobDir, dir: &Path) -> Vec<Value> {
    let _ = j;
    let out = WEIR.ok(["checkpoints", "--json", dir.to_str().unwrap()]);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The rescales the checkpoints of `dir` record: `[operator, from, to]`.
fn rescales(j: &JobDir, dir: &Path) -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for c in checkpoints(j, dir) {
        if let Some(map) = c["derived"]["rescaled"].as_object() {
            for (op, ft) in map {
                out.push((op.clone(), ft[0].as_u64().unwrap(), ft[1].as_u64().unwrap()));
            }
        }
    }
    out
}

/// Kills one run of the job in `j` mid-job, asserting that it was.
fn kill_once(j: &JobDir, rng: &mut XorShift) {
    let killed = j.kill_after_output("out.jsonl", (0, 100), rng);
    assert!(killed, "the run finished before it could be killed");
}

/// The issue's test: a word count killed at p2, resumed at p3, killed
/// again and finished at p1 has every count exactly once, and each rescale
/// is logged and recorded in `weir checkpoints`.
#[test]
fn a_word_count_rescaled_p2_p3_p1_through_kills_counts_exactly_once() {
    let n = 60_000;
    let mut rng = XorShift(seed());
    let j = JobDir::new(WEIR, counting(2, 15_000), &[("words.txt", &words(n))]);
    kill_once(&j, &mut rng);
    j.write_job(counting(3, 15_000));
    kill_once(&j, &mut rng);
    j.write_job(counting(1, 15_000));
    let stderr = j.run_ok(&[]);
    assert_has(
        &stderr,
        "operator `count`: rescaled from 3 to 1 instances by key group",
    );
    assert_counted(
        &j,
        &format!("through kills at p2, p3 and p1 (seed {})", seed()),
    );
    let text = j.checkpoints(&[]);
    assert_has(&text, "rescaled count: 3 -> 1 instances");
    assert_eq!(
        rescales(&j, &j.state_dir()),
        [("count".to_string(), 2, 3), ("count".to_string(), 3, 1)]
    );
}

/// Windowed counts with pending timers, rescaled 2 → 3 → 1 across kills:
/// every window fires once with its whole count (timers and the window
/// state moved with their keys).
#[test]
fn windowed_counts_with_pending_timers_survive_rescales_exactly_once() {
    let mut rng = XorShift(seed());
    let (text, counts, late) = clicks(&mut rng, 120_000);
    let job = |p: u32| {
        windows_job(Checkpoint::every("50ms").retain(1000))
            .source_with("clicks", |s| s.rate(60_000))
            .operator_with("count", |o| o.parallelism(p))
    };
    let j = JobDir::new(WEIR, job(2), &[("clicks.jsonl", &text)]);
    for p in [3, 1] {
        assert!(j.kill_after_output("counts.jsonl", (0, 100), &mut rng));
        j.write_job(job(p));
    }
    j.run_ok(&[]);
    assert_windows(&j, &counts, &late);
    assert_eq!(rescales(&j, &j.state_dir()).len(), 2);
    // The rescales moved pending timers (not only an empty timer set).
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    for meta in store.list().unwrap().iter().filter(|m| m.derived.is_some()) {
        let p = meta.operators["count"].parallelism;
        let timers: usize = (0..p)
            .map(|i| {
                store
                    .load_instance(meta.id, "count", i)
                    .unwrap()
                    .timers
                    .len()
            })
            .sum();
        assert!(timers > p as usize, "checkpoint {} moved no timer", meta.id);
    }
}

/// An operator whose plugin keeps its state in a snapshot (dedupe) cannot
/// be rescaled: the run is refused with what to do, and the state is
/// untouched (the old parallelism still restores: each id once, each
/// instance's ids in input order).
#[test]
fn an_operator_with_snapshot_state_refuses_to_rescale() {
    let events: String = (0..20_000)
        .map(|i| format!("{{\"id\":\"e{}\"}}\n", i % 3000))
        .collect();
    let job = |p: u32| {
        JobFile::new("dedupe")
            .checkpoint(Checkpoint::every("50ms"))
            .source(
                weir_tests::job_file::Source::file("events", "events.jsonl")
                    .format("jsonl")
                    .key("id")
                    .rate(5_000),
            )
            .operator(
                Operator::new("dedupe", plugins::DEDUPE)
                    .inputs(&["events"])
                    .parallelism(p),
            )
            .sink(Sink::file("out", "out.jsonl").input("dedupe"))
    };
    let j = JobDir::new(WEIR, job(2), &[("events.jsonl", &events)]);
    let mut rng = XorShift(seed());
    assert!(j.kill_after_output("out.jsonl", (0, 100), &mut rng));
    j.write_job(job(3));
    let out = j.run(&[]);
    out.assert_one_line_error(&[
        "operator `dedupe` cannot change its parallelism",
        "snapshot",
        "Keep parallelism 2",
    ]);
    j.write_job(job(2));
    j.run_ok(&[]);
    let lines = j.lines("out.jsonl");
    assert_eq!(lines.len(), 3000, "each id once");
    assert!(lines.values().all(|&n| n == 1));
    let first: String = events
        .lines()
        .take(3000)
        .map(|l| format!("{l}\n"))
        .collect();
    let out = j.read("out.jsonl");
    let id = jsonl_key("id");
    assert_in_order_per_instance(&out, &[&first], 2, id, "after the refused rescale");
}

// ---------------------------------------------------------------- savepoints

/// Starts the word count, takes a savepoint with `weir savepoint` once it
/// has committed output (`--stop` when `stop`), and returns the savepoint
/// directory; the job ends by the stop or is killed.
fn savepoint_of_running_job(j: &JobDir, stop: bool) -> std::path::PathBuf {
    let mut run = j.spawn(&[]);
    assert!(
        j.wait_for_output(&mut run.child, "out.jsonl", 0),
        "no output"
    );
    let sp = j.path().join("sp");
    let mut args = vec!["--out", sp.to_str().unwrap()];
    if stop {
        args.push("--stop");
    }
    let out = j.weir("savepoint", &args).assert_ok();
    assert_has(&out.stdout, "savepoint of checkpoint");
    if stop {
        let (status, stderr) = run.wait();
        assert!(
            status.success(),
            "the stopped job failed: {status}: {stderr}"
        );
    } else {
        run.kill();
    }
    assert!(sp.join("savepoint.json").is_file());
    sp
}

/// `weir run --state-dir STATE --from-savepoint SP EXTRA...` of the job in `j`.
fn from_savepoint(j: &JobDir, state: &Path, sp: &Path, extra: &[&str]) -> Outcome {
    let mut args = vec![
        "--state-dir",
        state.to_str().unwrap(),
        "--from-savepoint",
        sp.to_str().unwrap(),
    ];
    args.extend(extra);
    j.run(&args)
}

/// A savepoint of a running job restores into a new state directory with
/// exactly-once output; `weir checkpoints` reads the savepoint directory,
/// and the job's own checkpoints never delete it.
#[test]
fn a_savepoint_restores_into_a_new_state_dir_exactly_once() {
    let n = 40_000;
    let j = JobDir::new(WEIR, counting(2, 10_000), &[("words.txt", &words(n))]);
    let sp = savepoint_of_running_job(&j, true);
    let listed = checkpoints(&j, &sp);
    assert_eq!(listed.len(), 1, "a savepoint holds one checkpoint");
    let fresh = j.path().join("fresh-state");
    let stderr = from_savepoint(&j, &fresh, &sp, &[]).assert_ok().stderr;
    assert_has(&stderr, "starts from savepoint");
    assert_counted(&j, "from the savepoint");
    assert!(sp.join("savepoint.json").is_file(), "the savepoint stays");
    let derived = &checkpoints(&j, &fresh)[0]["derived"];
    assert_eq!(derived["savepoint"].as_str(), sp.to_str());
    // The new state dir resumes its own checkpoints, not the savepoint.
    let again = from_savepoint(&j, &fresh, &sp, &[]);
    again.assert_one_line_error(&["fresh state directory", "without --from-savepoint"]);
    // The job moved: a run without --state-dir does not resume the
    // checkpoints left in the default state directory.
    let state_dir = format!("--state-dir {}", fresh.display());
    let default = j.run(&[]);
    default.assert_one_line_error(&["was started from savepoint", &state_dir, "moved.json"]);
    j.run(&["--state-dir", fresh.to_str().unwrap()]).assert_ok();
    assert_counted(&j, "resumed in the new state dir");
    // --restore none starts over in the default directory and forgets the move.
    j.run(&["--restore", "none"]).assert_ok();
    assert_counted(&j, "started over");
    j.run(&[]).assert_ok();
}

/// A savepoint taken while the job goes on restores into a changed job: a
/// new parallelism (redistributed) and an added operator (which starts
/// empty); the output rewinds to the savepoint and ends exactly once.
#[test]
fn a_savepoint_restores_into_a_changed_job() {
    let n = 40_000;
    let j = JobDir::new(WEIR, counting(2, 10_000), &[("words.txt", &words(n))]);
    let sp = savepoint_of_running_job(&j, false);
    let saved = checkpoints(&j, &sp).remove(0);
    let read = saved["sources"]["words"]["records"].as_u64().unwrap() as usize;
    let changed = counting(3, 1_000_000)
        .operator(Operator::new("again", plugins::WORD_COUNT).inputs(&["words"]))
        .sink(Sink::jsonl("again_out", "again.jsonl").input("again"));
    j.write_job(changed);
    let fresh = j.path().join("fresh-state");
    let stderr = from_savepoint(&j, &fresh, &sp, &[]).assert_ok().stderr;
    assert_has(&stderr, "operator `again` is not in the savepoint");
    assert_counted(&j, "from the savepoint into the changed job");
    // The added operator counted the words after the savepoint only.
    let after = true_counts(j.read("words.txt").lines().skip(read));
    assert_running_counts(&after, &j.read("again.jsonl"), "the added operator");
    assert_eq!(rescales(&j, &fresh), [("count".to_string(), 2, 3)]);
}

/// A savepoint restores into a job whose plugin changed (word-count 0.1 to
/// 2.0, state version 1 to 2) only with `--swap`, as a restore does: the
/// refusal names the plugin the savepoint ran (its path too); with it the
/// new plugin migrates the state and every word's counts continue exactly
/// once.
#[test]
fn a_savepoint_restores_into_a_changed_plugin_only_with_swap() {
    let n = 40_000;
    let j = JobDir::new(WEIR, counting(2, 10_000), &[("words.txt", &words(n))]);
    let sp = savepoint_of_running_job(&j, true);
    j.write_job(
        counting(2, 1_000_000).operator_with("count", |o| o.plugin(plugins::WORD_COUNT_V2)),
    );
    let fresh = j.path().join("fresh-state");
    let v1 = Path::new(plugins::WORD_COUNT).display().to_string();
    from_savepoint(&j, &fresh, &sp, &[]).assert_one_line_error(&[
        "operator `count`: the savepoint ran plugin word-count 0.1",
        &v1,
        "refusing to change code silently",
        "--swap count=",
    ]);
    let swap = format!("count={}", plugins::WORD_COUNT_V2);
    let stderr = from_savepoint(&j, &fresh, &sp, &["--swap", &swap])
        .assert_ok()
        .stderr;
    assert_has(&stderr, "which migrates it (--swap)");
    let text = j.read("out.jsonl");
    assert!(text.contains(r#""v":2"#), "no output of the new plugin");
    assert_counted(&j, "across the plugins");
}

/// State the job has no place for is refused, unless allowed; a savepoint
/// of another format is refused naming both versions.
#[test]
fn non_restored_state_and_other_formats_are_refused_clearly() {
    let n = 40_000;
    let with_again = |rate| {
        counting(2, rate)
            .operator(Operator::new("again", plugins::WORD_COUNT).inputs(&["words"]))
            .sink(Sink::jsonl("again_out", "again.jsonl").input("again"))
    };
    let j = JobDir::new(WEIR, with_again(10_000), &[("words.txt", &words(n))]);
    let sp = savepoint_of_running_job(&j, true);
    j.write_job(counting(2, 1_000_000));
    let fresh = j.path().join("fresh-state");
    from_savepoint(&j, &fresh, &sp, &[]).assert_one_line_error(&[
        "operator `again`",
        "sink `again_out`",
        "--allow-non-restored-state",
    ]);
    let allowed = from_savepoint(&j, &fresh, &sp, &["--allow-non-restored-state"]);
    let stderr = allowed.assert_ok().stderr;
    assert_has(&stderr, "is not restored");
    assert_counted(&j, "without the state of `again`");

    // A sink of another type under the same id cannot continue the old
    // one's output: refused naming --allow-non-restored-state, then started
    // empty with it, the state kept.
    // (At 10,000 words a second, so that the fork takes non-final checkpoints.)
    j.write_job(
        with_again(10_000).sink_with("again_out", |_| Sink::stdout("again_out").input("again")),
    );
    let forked = j.path().join("forked-state");
    from_savepoint(&j, &forked, &sp, &[]).assert_one_line_error(&[
        "sink `again_out` (a file sink in the savepoint, a stdout sink now)",
        "--allow-non-restored-state",
    ]);
    let allowed = from_savepoint(&j, &forked, &sp, &["--allow-non-restored-state"]);
    allowed.assert_ok();
    assert_counted(&j, "with the changed sink");
    // Restoring one of its own checkpoints with the sink changed back is
    // refused by type too, not by the file sink's reading of another
    // sink's record.
    j.write_job(with_again(1_000_000));
    let taken = checkpoints(&j, &forked);
    let running = taken
        .iter()
        .find(|c| c["final_checkpoint"] == false && c["sink_types"]["again_out"] == "stdout");
    let id = running.expect("a checkpoint of the running fork")["id"].to_string();
    let state_dir = forked.to_str().unwrap();
    j.run(&["--state-dir", state_dir, "--restore", &id])
        .assert_one_line_error(&[
            "sink `again_out` was a stdout sink and is a file sink now",
            "--allow-non-restored-state",
        ]);

    let manifest = sp.join("savepoint.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"format\": 1", "\"format\": 7")).unwrap();
    let other = j.path().join("other-state");
    from_savepoint(&j, &other, &sp, &[])
        .assert_one_line_error(&["savepoint format 7", "reads format 1"]);
}

/// `weir savepoint` without a running job says so.
#[test]
fn a_savepoint_needs_a_running_job() {
    let j = JobDir::new(WEIR, counting(1, 1000), &[("words.txt", "a\n")]);
    let out = j.weir("savepoint", &["--wait", "0"]);
    out.assert_one_line_error(&["no running job"]);
}
