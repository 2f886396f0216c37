//! Loading the job's plugins and compiling the job with them into its
//! [`Plan`] ([`load_plugins`], with `--swap` replacements), checking each
//! plugin's ports against the job ([`load_operator`]), and warning about
//! output ports nothing reads ([`warn_unconsumed_outputs`]).

use std::path::{Path, PathBuf};

use crate::config::{Job, OperatorConfig};
use crate::plan::{Plan, Resolved};
use crate::run::error::RunError;
use crate::wasm::{Plugin, Runtime};

/// A loaded plugin with its input ports resolved against the job:
/// `(input port, upstream)` pairs, several per port for a union.
pub type LoadedOperator = Resolved<Plugin>;

/// Loads every operator's plugin, with `swaps` (`--swap OP=NEW.wasm`)
/// replacing the job's plugin for the operators they name, checks each
/// plugin's ports against the job, and compiles the job's plan with them.
pub fn load_plugins<'j>(
    job: &'j Job,
    runtime: &Runtime,
    swaps: &[(String, PathBuf)],
) -> Result<Plan<'j>, RunError> {
    if let Some((op, _)) = swaps
        .iter()
        .find(|(op, _)| !job.operators.iter().any(|o| &o.id == op))
    {
        let ids: Vec<&str> = job.operators.iter().map(|o| o.id.as_str()).collect();
        return Err(RunError::Swap(format!(
            "--swap {op}=...: job `{}` has no operator `{op}` (it has: {})",
            job.name,
            ids.join(", ")
        )));
    }
    Plan::compile(job, |op| {
        let path = swaps
            .iter()
            .rev()
            .find(|(id, _)| id == &op.id)
            .map_or(&op.plugin, |(_, p)| p);
        load_operator(job, runtime, op, path)
    })
}

/// Loads the plugin at `path` for operator `op` and checks its ports against
/// the job. A port mismatch of a plugin other than the job's is reported as a
/// refused swap.
pub fn load_operator(
    job: &Job,
    runtime: &Runtime,
    op: &OperatorConfig,
    path: &Path,
) -> Result<LoadedOperator, RunError> {
    let plugin = runtime.load(path)?;
    let ports = job
        .resolve_ports(op, path, &plugin.info().inputs, &plugin.info().outputs)
        .map_err(|e| {
            if path == op.plugin {
                RunError::Job(e)
            } else {
                RunError::Swap(format!(
                    "cannot swap operator `{}` to {}: its ports do not fit the job: {e}",
                    op.id,
                    path.display()
                ))
            }
        })?;
    Ok((plugin, ports))
}

/// Warns about every output port of an operator's plugin that no input of
/// the job reads (no edge of the plan leaves it), naming the operator and
/// the port: what a plugin emits on such a port is dropped.
pub fn warn_unconsumed_outputs(plan: &Plan<'_>) {
    for (node, op, plugin) in plan.operator_plugins() {
        let ports = node.output_ports().iter().enumerate();
        for (_, port) in ports.filter(|(i, _)| node.outputs(*i as u32).is_empty()) {
            tracing::warn!(
                "operator `{id}`: nothing consumes output port `{port}` of plugin {}, so records emitted on it are dropped; to read it, write \"{id}.{port}\" in an operator's `inputs` or a sink's `input`",
                plugin.path().display(),
                id = op.id,
            );
        }
    }
}
