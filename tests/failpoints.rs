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
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::plugins;
use weir_tests::running::Running;
use weir_tests::targets::{FileOut, Jetstream, KafkaOut, Pg, Target};

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
    JobFile::new("failpoints")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("words", "words.txt")
                .rate(rate)
                .batch_size(BATCH),
        )
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["words"])
                .parallelism(parallelism),
        )
        .sink(sink.input("count"))
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

/// Runs the job to its end without failpoints; asserts that it resumed
/// from a checkpoint and returns its stderr.
fn resume(j: &JobDir) -> String {
    let stderr = j.run_ok(&[]);
    assert!(
        stderr.contains("resumed from checkpoint"),
        "the run after the crash did not restore: {stderr}"
    );
    stderr
}

/// Asserts that `delivered` (word-count lines in delivery order) holds
/// every word of the job's input exactly once and in order.
fn assert_delivered_once_in_order(j: &JobDir, delivered: &str, what: &str) {
    let input = j.read("words.txt");
    let want = true_counts(input.lines());
    assert_eq!(want.len(), DISTINCT);
    assert_running_counts(&want, delivered, what);
}

/// Counts the input into `target`, crashing at the `at`th hit of `point`,
/// then runs the job to its end: the target holds every word's counts
/// exactly once and in order.
fn crash_and_resume(target: &dyn Target, point: Failpoint, at: u32) {
    let j = job_into(target, 2, RATE);
    crash(&j, point, at);
    resume(&j);
    let what = format!("after a crash at {}", armed(point, at));
    assert_delivered_once_in_order(&j, &target.delivered(&j), &what);
}

/// One test per (sink, step): `name: target, failpoint @ hit;`. Each hit
/// comes after earlier checkpoints were delivered: a precommit or store
/// commit per checkpoint, a mid-delivery per appended epoch of the file
/// sink, and per batch after an epoch's first of a staged one (about 15
/// per epoch: `@40` comes in the third epoch or so).
macro_rules! crash_tests {
    ($($name:ident: $target:expr, $point:ident @ $at:expr;)*) => {
        $(
            #[test]
            fn $name() {
                crash_and_resume(&$target, Failpoint::$point, $at);
            }
        )*
    };
}

crash_tests! {
    file_after_precommit: FileOut, SinkAfterPrecommit @ 3;
    file_after_store_commit: FileOut, CheckpointAfterStoreCommit @ 3;
    file_mid_delivery: FileOut, SinkMidDelivery @ 2;
    file_after_delivery: FileOut, SinkAfterDelivery @ 2;
    postgres_after_precommit: Pg::start(), SinkAfterPrecommit @ 3;
    postgres_after_store_commit: Pg::start(), CheckpointAfterStoreCommit @ 3;
    postgres_mid_delivery: Pg::start(), SinkMidDelivery @ 40;
    postgres_after_delivery: Pg::start(), SinkAfterDelivery @ 2;
    nats_after_precommit: Jetstream::start(), SinkAfterPrecommit @ 3;
    nats_after_store_commit: Jetstream::start(), CheckpointAfterStoreCommit @ 3;
    nats_mid_delivery: Jetstream::start(), SinkMidDelivery @ 40;
    nats_after_delivery: Jetstream::start(), SinkAfterDelivery @ 2;
    kafka_after_precommit: KafkaOut::start(), SinkAfterPrecommit @ 3;
    kafka_after_store_commit: KafkaOut::start(), CheckpointAfterStoreCommit @ 3;
    kafka_mid_delivery: KafkaOut::start(), SinkMidDelivery @ 40;
    kafka_after_delivery: KafkaOut::start(), SinkAfterDelivery @ 2;
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
    let stderr = resume(&j);
    let delivered = j.read("out.jsonl");
    assert_delivered_once_in_order(
        &j,
        &delivered,
        &format!("after a crash at {}", point.name()),
    );
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
    assert!(!stderr.contains("swapped to"), "{stderr}");
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
    assert!(
        stderr.contains("restores with the plugin it was swapped to"),
        "{stderr}"
    );
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
    let stderr = resume(&j);
    let delivered = j.read("out.jsonl");
    assert_delivered_once_in_order(
        &j,
        &delivered,
        &format!("after a crash at {}", point.name()),
    );
    stderr
}

/// A crash with part of the new instances written: the derived checkpoint
/// never committed, so the restart rescales checkpoint 3 again.
#[test]
fn rescale_mid_derive() {
    let stderr = crash_during_rescale(Failpoint::RescaleMidDerive);
    assert!(
        stderr.contains(
            "rescaled from 2 to 3 instances by key group (checkpoint 3 restored as checkpoint 4"
        ),
        "{stderr}"
    );
}

/// A crash once the derived checkpoint is committed: the restart restores
/// it as it is, at the new parallelism.
#[test]
fn rescale_after_derive() {
    let stderr = crash_during_rescale(Failpoint::RescaleAfterDerive);
    assert!(!stderr.contains("rescaled"), "{stderr}");
    assert!(stderr.contains("resumed from checkpoint 4"), "{stderr}");
}

/// A name that is no failpoint is refused before the job runs, naming the
/// known ones: a misspelt failpoint can never let a test pass untested.
#[test]
fn an_unknown_failpoint_is_refused_naming_the_known_ones() {
    let j = job_into(&FileOut, 2, RATE);
    let out = Outcome::of(j.command("run", &[]).env(ENV, "sink.after-deliveryy"));
    let line = out.error_line();
    assert!(
        line.contains("unknown failpoint `sink.after-deliveryy`"),
        "{line}"
    );
    for point in Failpoint::ALL {
        assert!(line.contains(point.name()), "{line}");
    }
    assert!(!j.path().join("out.jsonl").exists(), "nothing ran");
}
