//! Restart strategies: a failing attempt restarts from the last complete
//! checkpoint; output stays exactly-once through the restarts; after the
//! last attempt the job stops with a clear error and a restorable state dir.

use std::process::Command;

use weir_tests::pipeline::{JobDir, multiset};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

fn job(every: u64, restart: &str, n: usize) -> (JobDir, String) {
    let input: String = (0..n).map(|i| format!("record-{i}\n")).collect();
    let toml = format!(
        r#"
name = "flaky"
[checkpoint]
interval = "50ms"
{restart}
[[source]]
id = "lines"
type = "file"
path = "in.txt"
batch_size = 10
rate = 2000
[[operator]]
id = "flaky"
plugin = "{{plugins}}/flaky-batches.wasm"
inputs = ["lines"]
config = {{ every = {every} }}
[[sink]]
id = "out"
type = "file"
path = "out.txt"
input = "flaky"
"#
    );
    (JobDir::new(WEIR, &toml, &[("in.txt", &input)]), input)
}

#[test]
fn a_plugin_that_traps_every_nth_batch_still_completes_exactly_once() {
    let (j, input) = job(
        40,
        "[restart]\nstrategy = \"fixed-delay\"\nattempts = 1000\ndelay = \"10ms\"",
        4000,
    );
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
    let (j, _) = job(
        1,
        "[restart]\nstrategy = \"exponential-backoff\"\nattempts = 2\ninitial = \"10ms\"\nmax = \"20ms\"",
        200,
    );
    let out = j.run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
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
    let state = j.path().join("state");
    let out = Command::new(WEIR)
        .arg("checkpoints")
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn without_a_restart_strategy_the_first_failure_stops_the_job() {
    let (j, _) = job(1, "", 200);
    let out = j.run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        !err.contains("restarting") && !err.contains("gave up"),
        "{err}"
    );
}
