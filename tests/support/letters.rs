//! Dead letters as tests read them: one JSON object a line, and what
//! `weir deadletter ls` says of a job's.

use serde_json::Value;

use crate::cli::Outcome;
use crate::job_dir::JobDir;

/// The dead letters in `text`, one JSON object a line.
pub fn parse(text: &str) -> Vec<Value> {
    (text.lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The `value` of each of `letters` (the record as it was met).
pub fn values(letters: &[Value]) -> Vec<&str> {
    (letters.iter())
        .map(|l| {
            l["value"]
                .as_str()
                .unwrap_or_else(|| panic!("no value: {l}"))
        })
        .collect()
}

/// `weir deadletter ls job.toml --json ARGS` of `job`, which must succeed:
/// its JSON document.
pub fn listed(job: &JobDir, args: &[&str]) -> Value {
    deadletter(job, "ls", args)
}

/// `weir deadletter replay job.toml --json ARGS` of `job`, which must
/// succeed: what it queued (`letters`, `added`, `already`, ...).
pub fn replayed(job: &JobDir, args: &[&str]) -> Value {
    deadletter(job, "replay", args)
}

/// `weir deadletter VERB job.toml --json ARGS` of `job`, which must
/// succeed: its JSON document.
fn deadletter(job: &JobDir, verb: &str, args: &[&str]) -> Value {
    let args = [args, &["--json"]].concat();
    let out = Outcome::of(&mut job.command_of(&["deadletter", verb], &args));
    assert!(out.success(), "weir deadletter {verb}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}
