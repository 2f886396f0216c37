//! `weir validate`: checks a job without running it ([`validate`]).

use crate::config::Job;
use crate::run::error::RunError;
use crate::run::plugins::{load_plugins, warn_unconsumed_outputs};
use crate::wasm::OperatorInstance;
use crate::wasm::Runtime;

/// Checks `job` without running it: loads every plugin, checks its ports,
/// and instantiates one instance of each operator to call `open` with its
/// config. Returns a short human-readable report; warns (as `run` does)
/// about output ports nothing consumes.
pub fn validate(job: &Job, runtime: &Runtime) -> Result<String, RunError> {
    let plan = load_plugins(job, runtime, &[])?;
    warn_unconsumed_outputs(&plan);
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
