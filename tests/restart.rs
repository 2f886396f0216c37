//! Restart strategies: a failing attempt restarts from the last complete
//! checkpoint; output stays exactly-once through the restarts; after the
//! last attempt the job stops with a clear error and a restorable state dir.

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Restart, Sink, Source};
use weir_tests::pipeline::multiset;
use weir_tests::plugins;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `n` lines through `flaky-batches` trapping every `every`-th batch, under
/// `restart`; returns the job and its input.
fn job(every: u64, restart: Option<Restart>, n: usize) -> (JobDir, String) {
    let input: String = (0..n).map(|i| format!("record-{i}\n")).collect();
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
    (JobDir::new(WEIR, flaky, &[("in.txt", &input)]), input)
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
    assert_eq!(
        j.lines("out.txt"),
        multiset(&input),
        "exactly once through {restarts} restarts"
    );
}

#[test]
fn after_the_last_attempt_the_job_stops_with_the_reason_and_a_restorable_state() {
    let restart = Restart::exponential_backoff(2, "10ms", "20ms");
    let (j, _) = job(1, Some(restart), 200);
    let out = j.run(&[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1), "{err}");
    let line = err.lines().find(|l| l.starts_with("error:")).unwrap();
    assert!(
        line.contains("operator `flaky[0]`") && line.contains("deliberate panic"),
        "{line}"
    );
    assert!(
        line.contains("input port `in`") && line.contains("batch of"),
        "{line}"
    );
    assert!(line.contains("gave up after 2 restart(s)"), "{line}");
    assert_eq!(
        err.matches("restarting from the last complete checkpoint")
            .count(),
        2,
        "{err}"
    );
    j.checkpoints(&[]);
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
