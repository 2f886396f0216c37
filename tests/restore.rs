//! Restoring: choosing a checkpoint, refusing checkpoints that do not fit
//! the job, and damaged state files reported clearly (never a panic).

use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::{JobDir, names_in};
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{self, count_words};
use weir_tests::pipeline::multiset;
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_lacks};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn counting(name: &str, rate: u64) -> JobFile {
    count_words(name, Checkpoint::every("50ms").retain(100), rate, 2)
}

fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{}\n", i % 37)).collect()
}

fn job(rate: u64, n: usize) -> JobDir {
    JobDir::new(
        WEIR,
        counting("counting", rate),
        &[("words.txt", &words(n))],
    )
}

/// Asserts a failed run with a one-line error containing every needle.
fn assert_fails(out: &Outcome, needles: &[&str]) {
    let err = &out.stderr;
    assert!(!out.success(), "expected failure, got success: {err}");
    assert_lacks(err, "panicked");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    for n in needles {
        assert!(line.contains(n), "{n:?} not in {line}");
    }
}

/// Asserts that the job in `j` counted its words exactly once, each
/// word's counts in order.
fn assert_counted(j: &JobDir, what: &str) {
    let want = true_counts(j.read("words.txt").lines());
    assert_running_counts(&want, &j.read("out.jsonl"), what);
}

#[test]
fn rerunning_a_finished_job_does_nothing_and_restore_none_starts_over() {
    let j = job(1_000_000, 500);
    j.run_ok(&[]);
    let first = j.lines("out.jsonl");
    let err = j.run_ok(&[]);
    assert_has(&err, "already finished");
    assert_eq!(j.lines("out.jsonl"), first);
    j.run_ok(&["--restore", "none"]);
    assert_eq!(
        j.lines("out.jsonl"),
        first,
        "a fresh run rebuilds the same output, not appended"
    );
    assert_counted(&j, "the fresh run");
}

#[test]
fn restoring_an_older_checkpoint_rewinds_state_and_output() {
    let n = 3000;
    let j = job(6000, n);
    j.run_ok(&[]);
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let list = store.list().unwrap();
    assert!(list.len() >= 4, "only {} checkpoints", list.len());
    let middle = &list[list.len() / 2];
    assert!(!middle.final_checkpoint);
    let dropped = list.last().unwrap().id;
    drop(store);
    let err = j.run_ok(&["--restore", &middle.id.to_string()]);
    assert_has(&err, &format!("resumed from checkpoint {}", middle.id));
    assert_counted(&j, "exactly once relative to the older checkpoint");
    // The checkpoints after the older one are new ids, none of a dropped
    // checkpoint's (whose epochs a sink may have seen).
    let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
    let ids: Vec<u64> = store.list().unwrap().iter().map(|m| m.id).collect();
    let after: Vec<u64> = ids.iter().copied().filter(|&id| id > middle.id).collect();
    assert!(
        !after.is_empty() && after.iter().all(|&id| id > dropped),
        "{ids:?} after dropping up to {dropped}"
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
    let other = JobDir::new(WEIR, counting("other", 1000), &[("words.txt", "a\n")]);
    let state = j.state_dir();
    assert_fails(
        &other.run(&["--state-dir", state.to_str().unwrap()]),
        &["counting", "other"],
    );
}

/// Kills a run once it has committed output, so that the state dir has a
/// non-final checkpoint.
fn interrupted(n: usize) -> JobDir {
    let j = job(2000, n);
    let mut rng = weir_tests::pipeline::XorShift(7);
    assert!(j.kill_after_output("out.jsonl", (0, 100), &mut rng));
    j
}

#[test]
fn a_changed_plugin_is_refused_without_swap() {
    let j = interrupted(20_000);
    j.write_job(counting("counting", 2000).operator_with("count", |o| o.plugin(plugins::DEDUPE)));
    assert_fails(
        &j.run(&[]),
        &["operator `count`", "word-count", "dedupe", "sha256"],
    );
}

/// A parallelism beyond the key groups is refused by the job file's
/// checks, before anything is restored.
#[test]
fn a_parallelism_beyond_the_key_groups_is_refused() {
    let j = interrupted(20_000);
    j.write_job(counting("counting", 2000).operator_with("count", |o| o.parallelism(129)));
    assert_fails(&j.run(&[]), &["parallelism", "128"]);
}

#[test]
fn a_truncated_state_file_is_reported_clearly() {
    let j = interrupted(20_000);
    let file = j.state_dir().join("checkpoints.redb");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    assert_fails(&j.run(&[]), &["checkpoints.redb"]);
}

#[test]
fn a_garbage_state_file_is_reported_clearly() {
    let j = interrupted(20_000);
    let file = j.state_dir().join("checkpoints.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    for (i, b) in bytes.iter_mut().enumerate().skip(64) {
        *b ^= (i % 251) as u8;
    }
    std::fs::write(&file, bytes).unwrap();
    assert_fails(&j.run(&[]), &["checkpoints.redb"]);
}

#[test]
fn an_empty_state_file_is_refused_not_taken_for_a_new_job() {
    let j = job(1_000_000, 500);
    j.run_ok(&[]);
    let output = j.read("out.jsonl");
    assert!(!output.is_empty());
    let file = j.state_dir().join("checkpoints.redb");
    std::fs::File::create(&file).unwrap(); // truncated to 0 bytes
    assert_fails(&j.run(&[]), &["checkpoints.redb", "is damaged"]);
    let shown = j.on_state("checkpoints", &[]);
    assert!(!shown.success());
    assert_has(&shown.stderr, "is damaged");
    assert_eq!(
        j.read("out.jsonl"),
        output,
        "the committed output was rewritten"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
    // `--restore none` is the way to start over: it keeps the damaged file
    // beside the new store and says where.
    let err = j.run_ok(&["--restore", "none"]);
    assert_has(&err, "kept the damaged file as");
    let aside = names_in(&j.state_dir(), |n| {
        n.starts_with("checkpoints.redb.damaged-")
    });
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::metadata(j.state_dir().join(&aside[0]))
            .unwrap()
            .len(),
        0
    );
    // Two instances write to the sink, so only the set of lines is fixed.
    assert_eq!(
        j.lines("out.jsonl"),
        multiset(&output),
        "the same input, the same output"
    );
    assert_counted(&j, "the run after --restore none");
    assert!(j.checkpoints(&[]).contains("complete checkpoint"));
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
    // SIGINT, as Ctrl-C sends.
    let out = j.run_interrupted(&[], "out.jsonl");
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    assert_has(err, "job `counting` stopped");
    let partial = multiset(&j.read("out.jsonl"));
    assert!(!partial.is_empty(), "the stop checkpoint committed output");
    let err = j.run_ok(&[]);
    assert_has(&err, "resumed from checkpoint");
    assert_counted(&j, "after the stop and the resumed run");
}

/// stdin cannot be replayed (docs/reference/connectors.md, stdin source): after a crash, the next
/// run warns, restores the operators' state and the committed output, and
/// reads on from wherever stdin is.
#[test]
fn a_job_reading_stdin_restores_its_state_and_reads_on_from_the_new_stdin() {
    let live = jobs::count_stdin("live", Checkpoint::every("100ms"));
    let j = JobDir::new(WEIR, live, &[]);
    let mut first = j.spawn_fed(&[]);
    first.send("a\nb\n");
    // Both counts are committed, and stdin stays open: the job is mid-way.
    let committed = r#"{"word":"a","count":1}
{"word":"b","count":1}
"#;
    wait_until("both records in the output", PATIENCE, || {
        (j.size("out.jsonl") == committed.len() as u64).then_some(())
    });
    first.kill(); // SIGKILL
    assert_eq!(j.read("out.jsonl"), committed);

    let mut second = j.spawn_fed(&[]);
    second.send("a\nc\n");
    let (status, err) = second.wait();
    assert!(status.success(), "{err}");
    assert_has(&err, "resumed from checkpoint");
    assert_has(&err, "source `in` reads stdin, which cannot be replayed");
    // One source and one instance: the output is in stdin's order.
    let want =
        format!("{committed}{{\"word\":\"a\",\"count\":2}}\n{{\"word\":\"c\",\"count\":1}}\n");
    assert_eq!(
        j.read("out.jsonl"),
        want,
        "the restored count of `a` goes on; the new stdin is read from its start"
    );
}

/// Two jobs in one folder, both with the default checkpoint folder, keep
/// apart: each runs, even with `--restore none`, and restores its own.
#[test]
fn two_jobs_in_one_folder_keep_their_own_checkpoints() {
    let j = JobDir::new(
        WEIR,
        counting("k", 1_000_000),
        &[("words.txt", &words(200))],
    );
    let spin = JobFile::new("spin")
        .source(Source::file("words", "words.txt"))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["words"]))
        .sink(Sink::jsonl("out", "spin.jsonl").input("count"));
    let spin_file = j.path().join("spin.toml");
    std::fs::write(&spin_file, spin.to_string()).unwrap();
    let run_spin = |args: &[&str]| {
        let mut c = WEIR.command(["run"]);
        c.arg(&spin_file).args(args);
        Outcome::of(&mut c).assert_ok().stderr
    };
    j.run_ok(&[]);
    run_spin(&["--restore", "none"]);
    run_spin(&[]);
    let k = j.run_ok(&[]);
    assert_has(&k, "job `k` already finished");
    let spin = run_spin(&[]);
    assert_has(&spin, "job `spin` already finished");
    for (job, name) in [
        (j.path().join("job.toml"), "k"),
        (spin_file.clone(), "spin"),
    ] {
        let mut c = WEIR.command(["checkpoints"]);
        let shown = Outcome::of(c.arg(&job)).assert_ok().stdout;
        assert!(shown.starts_with(&format!("job `{name}`: ")), "{shown}");
        assert!(
            j.path()
                .join("state")
                .join(name)
                .join("checkpoints.redb")
                .is_file()
        );
    }
    let want = true_counts(words(200).lines());
    assert_running_counts(&want, &j.read("out.jsonl"), "job `k`");
    assert_running_counts(&want, &j.read("spin.jsonl"), "job `spin`");
}

/// A job whose checkpoints are in `state`, the default of older versions,
/// resumes from them (it does not start over and repeat its output), warns
/// with the commands that move them, and after those resumes from the new
/// default folder.
#[test]
fn checkpoints_in_the_old_default_folder_are_used_and_can_be_moved() {
    let j = job(1_000_000, 300);
    let old = j.path().join("state");
    j.run_ok(&["--state-dir", old.to_str().unwrap()]);
    let output = j.read("out.jsonl");
    let err = j.run_ok(&[]);
    let warning = err
        .lines()
        .find(|l| l.contains("the default folder of older versions"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert_has(
        warning,
        &format!("job `counting` keeps its checkpoints in {}", old.display()),
    );
    assert_has(&err, "job `counting` already finished");
    assert!(!j.state_dir().exists());
    assert_eq!(j.read("out.jsonl"), output);
    // Follow the advice.
    let commands = warning.split("stop the job and run: ").nth(1).unwrap();
    let commands = commands.split('\x1b').next().unwrap(); // before any colour code
    let moved = std::process::Command::new("sh")
        .args(["-c", commands])
        .status()
        .unwrap();
    assert!(moved.success(), "{commands}");
    assert!(j.state_dir().join("checkpoints.redb").is_file());
    let err = j.run_ok(&[]);
    assert_lacks(&err, "older versions");
    assert_has(&err, "job `counting` already finished");
    assert_eq!(j.read("out.jsonl"), output);
}
