//! Crashes at named steps of the checkpoint protocol (failpoints, armed by
//! `WEIR_FAILPOINTS`; `weir::failpoint`): for every exactly-once sink
//! (file, PostgreSQL, NATS, Kafka) and every step of a sink's epoch, a word count
//! killed by SIGKILL at that step, then run again, has delivered every
//! word's counts exactly once and in order. Likewise a crash during a live
//! swap and during a rescale restore.
//!
//! Every crashing run is asserted to have been killed at its failpoint
//! (the process's own line on stderr, and death by SIGKILL), so a point
//! that is never reached fails its test instead of passing it untested.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use weir::failpoint::{ENV, Failpoint};
use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::{assert_running_counts, parse_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Sink, Source};
use weir_tests::jobs::word_count;
use weir_tests::plugins;
use weir_tests::running::Running;
use weir_tests::targets::{FileOut, Jetstream, KafkaOut, Pg, Target};
use weir_tests::text::{assert_has, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// Words in the input.
const WORDS: usize = 3000;
/// Distinct words among them.
const DISTINCT: usize = 37;
/// Records per second the source reads: the input lasts 1.5 s, so a run
/// takes about 15 checkpoints (one every 100 ms) whatever the machine.
const RATE: u64 = 2000;
/// The rate of the live-swap tests: their input lasts 3 s, so that `weir
/// swap`, sent once output is committed, reaches the job long before the
/// end of its input even on a loaded machine.
const SWAP_RATE: u64 = 1000;
/// Records per source batch: the source sends about 8 batches per
/// checkpoint interval, each giving the sink one batch per operator
/// instance, so an epoch holds about 16 batches and its delivery a middle.
const BATCH: u64 = 25;
/// The signal a failpoint kills the process with.
const SIGKILL: i32 = 9;

/// The input: `WORDS` words, one per line.
fn input() -> String {
    (0..WORDS)
        .map(|i| format!("w{}\n", i * 7 % DISTINCT))
        .collect()
}

/// Word count: source `words` reads `words.txt` at `rate` records per
/// second, operator `count` (word-count, `parallelism` instances), into
/// `sink`.
fn counting(sink: Sink, parallelism: u32, rate: u64) -> JobFile {
    let words = Source::file("words", "words.txt")
        .rate(rate)
        .batch_size(BATCH);
    word_count("failpoints", words, parallelism, sink).checkpoint(Checkpoint::every("100ms"))
}

/// The job counting the input into `target` at `rate`, in a new folder.
fn job_into(target: &dyn Target, parallelism: u32, rate: u64) -> JobDir {
    let job = counting(target.sink(), parallelism, rate);
    JobDir::new(WEIR, job, &[("words.txt", &input())])
}

/// `name@at`, the `WEIR_FAILPOINTS` value that crashes at the `at`th hit.
fn armed(point: Failpoint, at: u32) -> String {
    format!("{}@{at}", point.name())
}

/// Asserts that a run ended by the failpoint `point`: killed by SIGKILL
/// after printing the failpoint's line.
fn assert_killed_at(status: ExitStatus, stderr: &str, point: Failpoint) {
    assert!(
        status.signal() == Some(SIGKILL) && stderr.contains(&point.crash_line()),
        "the run was not killed at failpoint {} ({status}): {stderr}",
        point.name()
    );
}

/// Runs the job with `point` armed at its `at`th hit; asserts that the
/// run was killed there.
fn crash(j: &JobDir, point: Failpoint, at: u32) {
    let out = Outcome::of(j.command("run", &[]).env(ENV, armed(point, at)));
    assert_killed_at(out.status, &out.stderr, point);
}

/// Runs the job to its end after a crash at `failpoint` (its name, or
/// `name@hit`): asserts that it resumed from a checkpoint and that
/// `target` holds every word of the job's input exactly once and in order;
/// returns the run's stderr.
fn resume_once_in_order(j: &JobDir, target: &dyn Target, failpoint: &str) -> String {
    let stderr = j.assert_resumes();
    let input = j.read("words.txt");
    let want = true_counts(input.lines());
    assert_eq!(want.len(), DISTINCT);
    let what = format!("after a crash at {failpoint}");
    assert_running_counts(&want, &target.delivered(j), &what);
    stderr
}

/// Counts the input into `target`, crashing at the `at`th hit of `point`,
/// then runs the job to its end: the target holds every word's counts
/// exactly once and in order.
fn crash_and_resume(target: &dyn Target, point: Failpoint, at: u32) {
    let j = job_into(target, 2, RATE);
    crash(&j, point, at);
    resume_once_in_order(&j, target, &armed(point, at));
}

/// One module per sink, `sink: target, mid-delivery @ hit;`, with a test
/// per step of the sink's epoch. Each hit comes after earlier checkpoints
/// were delivered: a precommit or store commit per checkpoint, a
/// mid-delivery per appended epoch of the file sink, and per batch after
/// an epoch's first of a staged one (about 15 per epoch: `@40` comes in
/// the third epoch or so).
macro_rules! crash_tests {
    ($($sink:ident: $target:expr, mid-delivery @ $mid:expr;)*) => {$(
        mod $sink {
            use super::*;

            crash_test_steps! {
                $target;
                after_precommit: SinkAfterPrecommit @ 3;
                after_store_commit: CheckpointAfterStoreCommit @ 3;
                mid_delivery: SinkMidDelivery @ $mid;
                after_delivery: SinkAfterDelivery @ 2;
            }
        }
    )*};
}

/// The tests of [`crash_tests`] for one target: `name: failpoint @ hit;`.
macro_rules! crash_test_steps {
    ($target:expr; $($name:ident: $point:ident @ $at:expr;)*) => {$(
        #[test]
        fn $name() {
            crash_and_resume(&$target, Failpoint::$point, $at);
        }
    )*};
}

crash_tests! {
    file: FileOut, mid-delivery @ 2;
    postgres: Pg::start(), mid-delivery @ 40;
    nats: Jetstream::start(), mid-delivery @ 40;
    kafka: KafkaOut::start(), mid-delivery @ 40;
}

/// Runs the file-sink word count with `point` armed, swaps `count` to
/// word-count v2 live once output is committed, and asserts that the run
/// was killed at `point` before the swap was confirmed; then runs the job
/// to its end. Returns the job and the last run's stderr.
fn crash_during_swap(point: Failpoint) -> (JobDir, String) {
    let j = job_into(&FileOut, 2, SWAP_RATE);
    let mut run = j.command("run", &[]);
    run.env(ENV, point.name()).stdout(Stdio::null());
    let mut run = Running::spawn(run);
    assert!(
        j.wait_for_output(&mut run.child, "out.jsonl", 0),
        "the job ended before it committed output"
    );
    let swap = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    let (status, stderr) = run.wait();
    assert_killed_at(status, &stderr, point);
    assert!(!swap.success(), "the swap was confirmed: {}", swap.stdout);
    let stderr = resume_once_in_order(&j, &FileOut, point.name());
    (j, stderr)
}

/// Lines of `out.jsonl` in word-count v1 and v2 formats.
fn formats(j: &JobDir) -> (usize, usize) {
    let counts = parse_counts(&j.read("out.jsonl"));
    let all = counts.values().flatten();
    let v1 = all.clone().filter(|(_, f)| *f == 1).count();
    (v1, all.count() - v1)
}

/// A crash once the new plugin restored its state, before any checkpoint
/// recorded it: the restart resumes the swap's checkpoint with the old
/// plugin, and the copy kept of the new one is collected.
#[test]
fn swap_after_migrate() {
    let (j, stderr) = crash_during_swap(Failpoint::SwapAfterMigrate);
    assert_lacks(&stderr, "swapped to");
    assert_eq!(formats(&j).1, 0, "no line of the new plugin's format");
    let kept = std::fs::read_dir(j.state_dir().join(weir::run::KEPT_DIR)).map_or(0, |d| d.count());
    assert_eq!(kept, 0, "the copy of the unrecorded plugin is collected");
}

/// A crash once a checkpoint recorded the swap, before it was confirmed:
/// the restart restores that checkpoint with the kept copy of the new
/// plugin, which carries on from the old plugin's counts.
#[test]
fn swap_after_record() {
    let (j, stderr) = crash_during_swap(Failpoint::SwapAfterRecord);
    assert_has(&stderr, "restores with the plugin it was swapped to");
    let (v1, v2) = formats(&j);
    assert!(v1 > 0 && v2 > 0, "both formats: {v1} {v2}");
    for (word, seen) in parse_counts(&j.read("out.jsonl")) {
        let first_v2 = seen.iter().position(|(_, f)| *f == 2).unwrap_or(seen.len());
        assert!(
            seen[first_v2..].iter().all(|(_, f)| *f == 2),
            "{word}: v1 output after v2 output: {seen:?}"
        );
    }
}

/// Crashes the file-sink word count (2 instances) at its third stored
/// checkpoint, restores it at 3 instances with `point` armed, which kills
/// the rescale; then runs the job to its end. Returns that run's stderr.
fn crash_during_rescale(point: Failpoint) -> String {
    let j = job_into(&FileOut, 2, RATE);
    crash(&j, Failpoint::CheckpointAfterStoreCommit, 3);
    j.write_job(counting(FileOut.sink(), 3, RATE));
    crash(&j, point, 1);

    resume_once_in_order(&j, &FileOut, point.name())
}

/// A crash with part of the new instances written: the derived checkpoint
/// never committed, so the restart rescales checkpoint 3 again.
#[test]
fn rescale_mid_derive() {
    let stderr = crash_during_rescale(Failpoint::RescaleMidDerive);
    assert_has(
        &stderr,
        "rescaled from 2 to 3 instances by key group (checkpoint 3 restored as checkpoint 4",
    );
}

/// A crash once the derived checkpoint is committed: the restart restores
/// it as it is, at the new parallelism.
#[test]
fn rescale_after_derive() {
    let stderr = crash_during_rescale(Failpoint::RescaleAfterDerive);
    assert_lacks(&stderr, "rescaled");
    assert_has(&stderr, "resumed from checkpoint 4");
}

/// A name that is no failpoint is refused before the job runs, naming the
/// known ones: a misspelt failpoint can never let a test pass untested.
#[test]
fn an_unknown_failpoint_is_refused_naming_the_known_ones() {
    let j = job_into(&FileOut, 2, RATE);
    let out = Outcome::of(j.command("run", &[]).env(ENV, "sink.after-deliveryy"));
    let line = out.error_line();
    assert_has(line, "unknown failpoint `sink.after-deliveryy`");
    for point in Failpoint::ALL {
        assert_has(line, point.name());
    }
    assert!(!j.path().join("out.jsonl").exists(), "nothing ran");
}
