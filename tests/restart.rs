//! Restart strategies: a failing attempt restarts from the last complete
//! checkpoint, after the delay the strategy gives; output stays
//! exactly-once and in input order (one source, one instance) through the
//! restarts and through a SIGKILL while the job restarts; after the last attempt the job stops with a clear error and a
//! state dir that a fixed job restores and finishes exactly once.

use std::time::Duration;

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Restart, Sink, Source};
use weir_tests::order::assert_same_order;
use weir_tests::plugins;
use weir_tests::running::log_time;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// What the supervisor logs when it restarts an attempt.
const RESTARTING: &str = "restarting from the last complete checkpoint";

/// `flaky-batches` trapping every `every`-th batch of an attempt, on lines
/// read 10 per batch at 2000 per second, under `restart`.
fn flaky(every: u64, restart: Option<Restart>) -> JobFile {
    let mut flaky = JobFile::new("flaky")
        .checkpoint(Checkpoint::every("50ms"))
        .source(Source::file("lines", "in.txt").batch_size(10).rate(2000))
        .operator(
            Operator::new("flaky", plugins::GUEST_FLAKY_BATCHES)
                .inputs(&["lines"])
                .config(&format!("{{ every = {every} }}")),
        )
        .sink(Sink::file("out", "out.txt").input("flaky"));
    if let Some(restart) = restart {
        flaky = flaky.restart(restart);
    }
    flaky
}

/// [`flaky`] on `n` lines; returns the job and its input.
fn job(every: u64, restart: Option<Restart>, n: usize) -> (JobDir, String) {
    let input: String = (0..n).map(|i| format!("record-{i}\n")).collect();
    let j = JobDir::new(WEIR, flaky(every, restart), &[("in.txt", &input)]);
    (j, input)
}

/// Runs the job in `j` to its end: it resumes from a checkpoint, and
/// `out.txt` holds every line of `input` exactly once and in order (`how`).
fn resumes_exactly_once(j: &JobDir, input: &str, how: &str) {
    j.assert_resumes();
    assert_same_order(&j.read("out.txt"), input, &format!("exactly once {how}"));
}

#[test]
fn a_plugin_that_traps_every_nth_batch_still_completes_exactly_once() {
    let (j, input) = job(40, Some(Restart::fixed_delay(1000, "10ms")), 4000);
    let err = j.run_ok(&[]);
    let restarts: u32 = err
        .lines()
        .find_map(|l| {
            l.split(", ")
                .find_map(|p| p.strip_suffix(" restart(s) after failures"))
        })
        .unwrap_or_else(|| panic!("no restarts reported: {err}"))
        .parse()
        .unwrap();
    assert!(restarts >= 3, "{err}");
    assert_same_order(
        &j.read("out.txt"),
        &input,
        &format!("exactly once through {restarts} restarts"),
    );
}

#[test]
fn after_the_last_attempt_the_job_stops_with_the_reason_and_a_restorable_state() {
    // Each attempt gets at most 39 batches (390 records) past the last
    // checkpoint, so three attempts cannot finish 4000 records.
    let restart = Restart::exponential_backoff(2, "10ms", "20ms");
    let (j, input) = job(40, Some(restart), 4000);
    let out = j.run(&[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1), "{err}");
    let line = err.lines().find(|l| l.starts_with("error:")).unwrap();
    assert_has_all(line, &["operator `flaky[0]`", "deliberate panic"]);
    assert_has_all(line, &["input port `in`", "batch of"]);
    assert_has(line, "gave up after 2 restart(s)");
    assert_eq!(err.matches(RESTARTING).count(), 2, "{err}");
    let committed = j.lines("out.txt");
    assert!(!committed.is_empty(), "the attempts committed output");
    // Restorable: the same plugin, configured not to trap, resumes from the
    // last complete checkpoint and finishes exactly once.
    j.write_job(flaky(1_000_000, None));
    resumes_exactly_once(&j, &input, "after restoring the state the failed job left");
}

#[test]
fn without_a_restart_strategy_the_first_failure_stops_the_job() {
    let (j, _) = job(1, None, 200);
    let out = j.run(&[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1));
    assert!(
        !err.contains("restarting") && !err.contains("gave up"),
        "{err}"
    );
}

/// Every attempt fails on its first batch, so each restart's line is
/// followed by the next attempt's failure: the time between two restart
/// lines is at least the delay the first one announced, and the announced
/// delays are the strategy's. (Lower bounds only: a slow machine only
/// lengthens the gaps.)
#[test]
fn observed_restart_delays_follow_the_strategy() {
    let cases: [(Restart, &[u64]); 2] = [
        (
            Restart::exponential_backoff(5, "100ms", "400ms"),
            &[100, 200, 400, 400, 400],
        ),
        (Restart::fixed_delay(3, "250ms"), &[250, 250, 250]),
    ];
    for (restart, delays) in cases {
        let (j, _) = job(1, Some(restart), 200);
        let out = j.run(&[]);
        let err = &out.stderr;
        assert_eq!(out.code(), Some(1), "{err}");
        let restarts: Vec<(Duration, u64)> = err
            .lines()
            .filter(|l| l.contains(RESTARTING))
            .map(|l| {
                let at = log_time(l).unwrap_or_else(|| panic!("no timestamp: {l}"));
                let ms = l
                    .split_once(&format!("{RESTARTING} in "))
                    .and_then(|(_, rest)| rest.split(" ms").next())
                    .and_then(|ms| ms.parse().ok())
                    .unwrap_or_else(|| panic!("no delay in: {l}"));
                (at, ms)
            })
            .collect();
        let announced: Vec<u64> = restarts.iter().map(|(_, ms)| *ms).collect();
        assert_eq!(announced, delays, "{err}");
        for (k, pair) in restarts.windows(2).enumerate() {
            let gap = pair[1].0.saturating_sub(pair[0].0);
            assert!(
                gap >= Duration::from_millis(pair[0].1),
                "restart {} announced {} ms but the next attempt failed {gap:?} later: {err}",
                k + 1,
                pair[0].1
            );
        }
    }
}

/// SIGKILL while the job restarts after an injected failure (it logged the
/// restart and waits out the delay), three runs in a row; the next run
/// resumes and finishes exactly once.
#[test]
fn a_job_killed_while_restarting_after_a_failure_resumes_exactly_once() {
    let (j, input) = job(40, Some(Restart::fixed_delay(1000, "500ms")), 4000);
    for _ in 0..3 {
        let mut run = j.spawn(&["--progress-every", "0"]);
        run.wait_for_line("a restart after the injected failure", |l| {
            l.contains(RESTARTING)
        });
        run.kill();
    }
    j.write_job(flaky(40, Some(Restart::fixed_delay(1000, "10ms"))));
    resumes_exactly_once(&j, &input, "through three kills while restarting");
}

/// A stop requested (SIGINT) while the job waits to restart after a
/// failure ends it there, with the failure, instead of starting another
/// attempt (a worker's task revoked in that moment must not run on); the
/// next run resumes and finishes exactly once.
#[test]
fn a_stop_requested_while_restarting_ends_the_job_without_another_attempt() {
    let (j, input) = job(40, Some(Restart::fixed_delay(1000, "2s")), 4000);
    let mut run = j.spawn(&["--progress-every", "0"]);
    run.wait_for_line("a restart after the injected failure", |l| {
        l.contains(RESTARTING)
    });
    weir_tests::job_dir::signal(&run.child, "-INT");
    let (status, stderr) = run.wait();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_has(&stderr, "not restarting: a stop was requested");
    assert_eq!(stderr.matches(RESTARTING).count(), 1, "{stderr}");
    j.write_job(flaky(40, Some(Restart::fixed_delay(1000, "10ms"))));
    resumes_exactly_once(&j, &input, "after a stop while restarting");
}

/// A plugin that calls a record invalid (`dedupe` on a record without its
/// id field) would do so again on every replay: the job fails after one
/// replay that finds the record (one per batch) and says why, however many
/// restarts its strategy allows; the error names the record's line.
#[test]
fn a_record_a_plugin_calls_invalid_is_not_retried() {
    let input = "{\"id\":1}\n{\"other\":2}\n";
    let file = JobFile::new("invalid")
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(5, "10ms"))
        .source(Source::file("in", "in.jsonl").format("jsonl"))
        .operator(
            Operator::new("dedupe", plugins::DEDUPE)
                .inputs(&["in"])
                .config("{ field = \"id\" }"),
        )
        .sink(Sink::file("out", "out.jsonl").input("dedupe"));
    let j = JobDir::new(WEIR, file, &[("in.jsonl", input)]);
    let out = j.run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert_lacks(&out.stderr, RESTARTING);
    assert_has(
        &out.stderr,
        "not restarting: a plugin that calls a record invalid",
    );
    assert_has(out.error_line(), "invalid input: record has no field `id`");
    assert_has(out.error_line(), "job.toml: operator `dedupe[0]`");
    assert_has(out.error_line(), "in.jsonl line 2 of source `in`)");
    assert_eq!(out.stderr.matches(NARROWING).count(), 1, "{}", out.stderr);
}

/// What the supervisor logs when it replays one record per batch.
const NARROWING: &str = "replaying from the last complete checkpoint one record per batch";

/// `split` then `poison`, which traps on any batch holding the word
/// `poison`, over `n` lines of three words, the one at line `bad` (from 1)
/// holding it; checkpoints every 20 ms.
fn poisoned(n: usize, bad: usize) -> JobDir {
    let input: String = (1..=n)
        .map(|i| match i == bad {
            true => format!("x{i} poison y{i}\n"),
            false => format!("x{i} z{i} y{i}\n"),
        })
        .collect();
    let file = JobFile::new("poisoned")
        .checkpoint(Checkpoint::every("20ms"))
        .restart(Restart::fixed_delay(5, "10ms"))
        .source(Source::file("lines", "in.txt").batch_size(500))
        .operator(Operator::new("split", plugins::SPLIT).inputs(&["lines"]))
        .operator(Operator::new("poison", plugins::GUEST_POISON).inputs(&["split"]))
        .sink(Sink::file("out", "out.txt").input("poison"));
    JobDir::new(WEIR, file, &[("in.txt", &input)])
}

/// A plugin that traps on one record of a batch of many, downstream of
/// another operator: the first failure names only the lines of the source
/// batch; one replay, one source record per batch, fails again and names
/// the line the record came from, and the job stops there (a restart would
/// fail on it again) instead of using up its restarts.
#[test]
fn a_trap_on_one_record_of_a_batch_names_the_line_it_came_from() {
    let j = poisoned(3000, 2345);
    let out = j.run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    let first = out.stderr.lines().find(|l| l.contains(NARROWING));
    let first = first.unwrap_or_else(|| panic!("no narrowing: {}", out.stderr));
    assert_has_all(
        first,
        &[
            "poison: the record `poison`",
            "lines 2001–2500 of source `lines`",
        ],
    );
    assert_eq!(out.stderr.matches(NARROWING).count(), 1, "{}", out.stderr);
    assert_has(
        &out.stderr,
        "not restarting: replayed one record per batch, the plugin fails on the same record again",
    );
    assert_lacks(&out.stderr, RESTARTING);
    assert_has_all(
        out.error_line(),
        &[
            "operator `poison[0]`",
            "poison: the record `poison`",
            "in.txt line 2345 of source `lines`)",
        ],
    );
}

/// A replay one record per batch that fails otherwise than the attempt
/// before it (a fault of the moment: `flaky-batches` traps on every
/// `every`-th batch, whatever it holds) is an attempt like any other: the
/// job restarts as its strategy says and completes exactly once, in order.
#[test]
fn a_narrowed_replay_that_fails_otherwise_restarts_and_stays_exactly_once() {
    let (j, input) = job(25, Some(Restart::fixed_delay(1000, "10ms")), 2000);
    let err = j.run_ok(&[]);
    assert_has(&err, NARROWING);
    assert_lacks(&err, "not restarting");
    assert_same_order(
        &j.read("out.txt"),
        &input,
        "exactly once through narrowed replays",
    );
}

/// A plugin that fails the same way on the same records (a stack overflow
/// on every batch) fails every attempt alike, with no checkpoint completed
/// in between: the job stops after the first repeat, not after all the
/// restarts its strategy allows, and says why. (One record: a batch of
/// many would be narrowed first, as above.)
#[test]
fn a_plugin_failure_that_recurs_on_the_same_records_is_not_retried_again() {
    let file = JobFile::new("recurs")
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(5, "10ms"))
        .source(Source::file("lines", "in.txt"))
        .operator(Operator::new("deep", plugins::GUEST_DEEP_RECURSION).inputs(&["lines"]))
        .sink(Sink::file("out", "out.txt").input("deep"));
    let j = JobDir::new(WEIR, file, &[("in.txt", "a\n")]);
    let out = j.run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert_lacks(&out.stderr, NARROWING);
    let restarts = out.stderr.matches(RESTARTING).count();
    assert_eq!(
        restarts, 1,
        "one restart, then the repeat stops it: {}",
        out.stderr
    );
    let said = "not restarting: the attempt failed as the one before";
    assert!(out.stderr.contains(said), "{}", out.stderr);
}
