//! `weir deadletter replay JOB --operator X`: queues an operator's dead
//! letters for replay into it (`weir::connectors::replay`), typically after
//! a fixed plugin was swapped in. The letters come from the operator's
//! dead-letter sink, another sink (`--sink`), or a file of letters
//! (`--from`, one JSON object per line: letters exported, or fixed by
//! hand). A letter already queued is not queued again.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::Value;
use weir::config::Job;
use weir::connectors::replay::{enqueue, queue_path};
use weir::dataflow::bad_kind::BadKind;

/// Where the letters to replay are read.
#[derive(Debug, Clone)]
pub enum Letters {
    /// From a dead-letter sink of the job: the operator's own when `None`.
    Sink(Option<String>),
    /// From a file of letters, one JSON object per line.
    File(PathBuf),
}

/// What `weir deadletter replay` did.
#[derive(Debug, Serialize)]
pub struct Replay {
    /// The operator.
    pub operator: String,
    /// Where the letters were read.
    pub from: String,
    /// The queue they were added to.
    pub queue: PathBuf,
    /// The operator's letters there (of the error kind asked for).
    pub letters: usize,
    /// Those added to the queue.
    pub added: usize,
    /// Those the queue held already.
    pub already: usize,
}

/// Queues the dead letters of `operator` of the job at `path` (those of
/// `error_kind` only, if given) from `letters` for replay, in the job's
/// state directory (`state_dir` overrides it).
pub fn replay(
    path: &Path,
    operator: &str,
    letters: &Letters,
    error_kind: Option<&str>,
    state_dir: Option<&Path>,
) -> anyhow::Result<Replay> {
    let job = Job::load(path, &weir_connectors::registry())?;
    let file = job.path.display().to_string();
    let Some(op) = job.operators.iter().find(|o| o.id == operator) else {
        let ids: Vec<&str> = job.operators.iter().map(|o| o.id.as_str()).collect();
        bail!(
            "{file}: no operator `{operator}` (operators: {}); name one of them",
            super::list(&ids)
        );
    };
    let Some(own_sink) = op.on_error.dead_letter_sink() else {
        bail!(
            "{file}: operator `{operator}` sends no dead letters to a sink, where the records that fail again would go; set on_error = {{ dead_letter = \"<sink id>\" }} on it first"
        );
    };
    if let Some(kind) = error_kind.filter(|k| BadKind::ALL.iter().all(|b| b.name() != *k)) {
        let names: Vec<&str> = BadKind::ALL.iter().map(|b| b.name()).collect();
        bail!(
            "--error-kind {kind:?} is not a kind of bad record ({})",
            names.join(", ")
        );
    }
    let state_dir = weir::run::state_dir(&job, state_dir);
    if state_dir.join("tasks").is_dir() {
        bail!(
            "{}: this job runs in worker mode (its state is per task), which does not replay dead letters",
            state_dir.display()
        );
    }
    let (from, values) = match letters {
        Letters::File(file) => (file.display().to_string(), read_file(file)?),
        Letters::Sink(sink) => {
            let id = sink.as_deref().unwrap_or(own_sink);
            let Some(sink) = job.sinks.iter().find(|s| s.id == id) else {
                bail!("{file}: no sink `{id}`; name a sink of the job");
            };
            super::letters(&job, sink)?
        }
    };
    let chosen: Vec<Value> = (values.into_iter())
        .filter(|l| l["kind"] == "operator" && l["node"] == operator)
        .filter(|l| error_kind.is_none_or(|k| l["error_kind"] == k))
        .collect();
    let queue = queue_path(&state_dir, operator);
    let queued = enqueue(&queue, &job.name, operator, &chosen)
        .with_context(|| format!("queueing dead letters in {}", queue.display()))?;
    Ok(Replay {
        operator: operator.to_owned(),
        from,
        queue,
        letters: chosen.len(),
        added: queued.added,
        already: queued.already,
    })
}

/// The letters in `file`, one JSON object per line (blank lines skipped).
fn read_file(file: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    lines
        .map(|(i, line)| match serde_json::from_str::<Value>(line) {
            Ok(letter) if letter.is_object() => Ok(letter),
            _ => bail!(
                "{}:{}: not a dead letter (a JSON object per line)",
                file.display(),
                i + 1
            ),
        })
        .collect()
}

/// `replay` as text.
pub fn text(r: &Replay) -> String {
    let mut out = format!(
        "queued {} dead letter(s) of operator `{}` for replay in {} ({} of {} from {} were queued before)\n",
        r.added,
        r.operator,
        r.queue.display(),
        r.already,
        r.letters,
        r.from
    );
    if r.added > 0 {
        out.push_str(
            "a running job replays them now if one of its sources does not end; otherwise `weir run` does, resuming even a finished job\n",
        );
    }
    out
}
