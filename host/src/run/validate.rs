//! `weir validate`: checks a job without running it ([`validate`]).

use crate::config::Job;
use crate::connectors::sink::Delivery;
use crate::run::error::RunError;
use crate::run::plugins::{load_plugins, warn_unconsumed_outputs};
use crate::wasm::OperatorInstance;
use crate::wasm::Runtime;

/// Checks `job` without running it: loads every plugin, checks its ports,
/// and instantiates one instance of each operator to call `open` with its
/// config. Returns a short human-readable report; warns (as `run` does)
/// about output ports nothing consumes and sinks that deliver nothing
/// before the input ends.
pub fn validate(job: &Job, runtime: &Runtime) -> Result<String, RunError> {
    let plan = load_plugins(job, runtime, &[])?;
    warn_unconsumed_outputs(&plan);
    warn_held_until_the_end(job);
    let mut report = format!(
        "job `{}` ({}) is valid: {} source(s), {} operator(s), {} sink(s)\n",
        job.name,
        job.path.display(),
        job.sources.len(),
        job.operators.len(),
        job.sinks.len()
    );
    for (node, op, plugin) in plan.operator_plugins() {
        OperatorInstance::for_operator(plugin, op, 0).map_err(|e| RunError::Task(e.into()))?;
        let wiring: Vec<String> = (node.wired().iter())
            .map(|(p, up)| format!("{} <- {up}", plugin.info().inputs[*p as usize]))
            .collect();
        report.push_str(&format!(
            "  operator {}: {} {} x{} ({})\n",
            op.id,
            plugin.info().name,
            plugin.info().version,
            op.parallelism,
            wiring.join(", ")
        ));
    }
    Ok(report)
}

/// Warns when the job takes no periodic checkpoints, has exactly-once
/// sinks and a source whose input may never end (stdin, an unbounded
/// stream): the sinks deliver at checkpoints, so nothing reaches them
/// before the input ends.
pub(crate) fn warn_held_until_the_end(job: &Job) {
    if let Some(warning) = held_until_the_end(job) {
        tracing::warn!("{warning}");
    }
}

fn held_until_the_end(job: &Job) -> Option<String> {
    if job.checkpoint.interval.is_some() || job.sources.iter().all(|s| s.connector.ends()) {
        return None;
    }
    let held: Vec<String> = (job.sinks.iter())
        .filter(|s| s.delivery == Delivery::ExactlyOnce)
        .map(|s| format!("`{}`", s.id))
        .collect();
    if held.is_empty() {
        return None;
    }
    Some(format!(
        "sink(s) {} deliver exactly-once, at checkpoints, and the job takes none before its input ends ([checkpoint] has no interval), which may be never: nothing reaches them until then. Set [checkpoint] interval = \"10s\", or delivery = \"at-least-once\" on a sink that may write records twice after a crash",
        held.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::Registry;

    fn job(text: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.txt"), "a\n").unwrap();
        Job::parse(&dir.path().join("job.toml"), text, &Registry::builtin()).unwrap()
    }

    #[test]
    fn exactly_once_sinks_without_a_checkpoint_interval_are_warned_of() {
        let base = "name = \"j\"\n[[source]]\nid = \"s\"\ntype = \"stdin\"\n";
        let sinks = "[[sink]]\nid = \"a\"\ntype = \"file\"\npath = \"a.txt\"\ninput = \"s\"\n\
                     [[sink]]\nid = \"b\"\ntype = \"stdout\"\ninput = \"s\"\n";
        let said = held_until_the_end(&job(&format!("{base}{sinks}"))).unwrap();
        assert!(
            said.starts_with("sink(s) `a` deliver exactly-once"),
            "{said}"
        );
        assert!(said.contains("[checkpoint] interval"), "{said}");
        let every = format!("{base}[checkpoint]\ninterval = \"1s\"\n{sinks}");
        assert_eq!(held_until_the_end(&job(&every)), None);
        // A file ends: its output arrives at the end, as asked.
        let file = base.replace("type = \"stdin\"", "type = \"file\"\npath = \"in.txt\"");
        assert_eq!(held_until_the_end(&job(&format!("{file}{sinks}"))), None);
    }
}
