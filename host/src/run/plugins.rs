//! Loading the job's plugins ([`load_plugins`], with `--swap` replacements),
//! checking each one's ports against the job ([`load_operator`]), and
//! warning about output ports nothing reads ([`warn_unconsumed_outputs`]).

use std::path::{Path, PathBuf};

use crate::config::{Job, OperatorConfig, Upstream};
use crate::run::error::RunError;
use crate::wasm::{Plugin, Runtime};

/// A loaded plugin with its input ports resolved against the job:
/// `(input port, upstream)` pairs, several per port for a union.
pub type LoadedOperator = (Plugin, Vec<(u32, Upstream)>);

/// Loads every operator's plugin, with `swaps` (`--swap OP=NEW.wasm`)
/// replacing the job's plugin for the operators they name, and checks each
/// plugin's ports against the job. Returns (plugin, resolved input ports) per
/// operator, in job order.
pub fn load_plugins(
    job: &Job,
    runtime: &Runtime,
    swaps: &[(String, PathBuf)],
) -> Result<Vec<LoadedOperator>, RunError> {
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
    job.operators
        .iter()
        .map(|op| {
            let path = swaps
                .iter()
                .rev()
                .find(|(id, _)| id == &op.id)
                .map_or(&op.plugin, |(_, p)| p);
            load_operator(job, runtime, op, path)
        })
        .collect()
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

/// Warns about every output port of a loaded plugin that no input of the
/// job names, naming the operator and the port: what a plugin emits on such
/// a port is dropped.
pub fn warn_unconsumed_outputs(job: &Job, plugins: &[LoadedOperator]) {
    let lists = job.port_lists();
    for (op, (plugin, _)) in job.operators.iter().zip(plugins) {
        let outputs = &plugin.info().outputs;
        let read = |index: u32| {
            let mut ups = lists.iter().flat_map(|(_, ups)| ups.iter());
            ups.any(|up| up.node == op.id && up.port_index(outputs) == Some(index))
        };
        for (_, port) in (0u32..).zip(outputs).filter(|(i, _)| !read(*i)) {
            tracing::warn!(
                "operator `{id}`: nothing consumes output port `{port}` of plugin {}, so records emitted on it are dropped; to read it, write \"{id}.{port}\" in an operator's `inputs` or a sink's `input`",
                plugin.path().display(),
                id = op.id,
            );
        }
    }
}
