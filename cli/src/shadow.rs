//! `weir replay` and `weir shadow` (and the shadow run of `weir swap
//! --shadow`): recorded epochs run again ([`weir::shadow`]), reported as
//! text or JSON. They read the job's state directory, or its object store
//! when asked or when the state directory is gone ([`Recorded::open`]).
//! The last shadow report of an operator is kept in the state directory
//! ([`last_report_path`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weir::config::Job;

use weir::cluster::{TaskId, WorkerJob};

use crate::stored::{Inspect, Inspected, NoCheckpoints, inspected};
use weir::shadow::{PortDiff, Range, ReplayReport, ShadowReport, StateDiff};

/// Where the last shadow report of `operator` is kept.
pub fn last_report_path(state_dir: &Path, operator: &str) -> PathBuf {
    state_dir.join("shadow").join(format!("{operator}.json"))
}

/// What a replay or shadow run reads: the job, its state directory (where
/// the last shadow report is kept), and the folder of the checkpoints to
/// read, which is the state directory or a temporary copy of the job's
/// object store.
pub struct Recorded {
    /// The job.
    pub job: Job,
    /// Its state directory.
    pub state_dir: PathBuf,
    checkpoints: Inspected,
}

impl Recorded {
    /// The job file at `path` (a file or a folder holding a job.toml), or
    /// with `task` the job its worker-mode task runs; its state directory
    /// (`state_dir`, else the job's; a task's under its `tasks/`); and its
    /// checkpoints: from its object store (`[checkpoint] store`) with
    /// `from_store`, or when the state directory has no checkpoint store
    /// and the job has an object store (its machine was lost); else from
    /// the state directory.
    pub fn open(
        path: &Path,
        state_dir: Option<&Path>,
        from_store: bool,
        task: Option<TaskId>,
    ) -> anyhow::Result<Self> {
        let registry = weir_connectors::registry();
        let (job, state_dir) = match task {
            None => {
                let job = Job::load(path, &registry)?;
                let dir = weir::run::state_dir(&job, state_dir);
                (job, dir)
            }
            Some(task) => {
                let job = task_job(path, state_dir, task, &registry)?;
                let dir = weir::run::state_dir(&job, None);
                (job, dir)
            }
        };
        let store = &job.checkpoint.store;
        let local = state_dir.join(weir::store::FILE_NAME).exists();
        let what = match (store, from_store) {
            (None, true) => anyhow::bail!(
                "job `{}` has no [checkpoint] store to read from; without --from-store its state directory {} is read",
                job.name,
                state_dir.display()
            ),
            (Some(url), _) if from_store || !local => {
                if !from_store {
                    eprintln!(
                        "weir: no checkpoint store in {}; reading the checkpoints of {url}",
                        state_dir.display()
                    );
                }
                Inspect::Store(url.clone(), job.checkpoint.store_options.clone())
            }
            _ => Inspect::Dir(state_dir.clone()),
        };
        let checkpoints = match inspected(&what, None) {
            Err(e) if e.is::<NoCheckpoints>() && task.is_none() => anyhow::bail!(
                "job `{}` has no checkpoint in {} nor in its object store; a job run by `weir run --worker` keeps each task's apart: name one with --task <stage>-<partition> (`weir workers` lists them)",
                job.name,
                state_dir.display()
            ),
            checkpoints => checkpoints?,
        };
        Ok(Recorded {
            job,
            state_dir,
            checkpoints,
        })
    }

    /// The folder of the checkpoints to read.
    pub fn checkpoints(&self) -> &Path {
        &self.checkpoints.dir
    }

    /// Runs the shadow of `with` on `operator`'s recorded epochs in
    /// `range` and keeps the report as the operator's last.
    pub fn shadow(
        &self,
        operator: &str,
        with: &Path,
        range: Range,
        limit: usize,
    ) -> anyhow::Result<ShadowReport> {
        let report =
            weir::shadow::shadow(&self.job, self.checkpoints(), operator, with, range, limit)?;
        let path = last_report_path(&self.state_dir, operator);
        let keep = || -> anyhow::Result<()> {
            std::fs::create_dir_all(path.parent().expect("a folder"))?;
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(&report)?)?;
            std::fs::rename(&tmp, &path)?;
            Ok(())
        };
        keep().with_context(|| format!("keeping the report in {}", path.display()))?;
        Ok(report)
    }
}

/// The job that task `task` of the worker-mode job file at `path` runs,
/// its local state under `state_dir` (else the job's) `tasks/<task>`.
fn task_job(
    path: &Path,
    state_dir: Option<&Path>,
    task: TaskId,
    registry: &weir::connectors::Registry,
) -> anyhow::Result<Job> {
    let file = weir::config::job_file(path)?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut worker = WorkerJob::parse(&file, &text, registry)?;
    if let Some(dir) = state_dir {
        worker = worker.with_state_dir(dir);
    }
    let stages = worker.stages.len() as u32;
    if task.stage >= stages {
        anyhow::bail!(
            "job `{}` has {stages} stage(s), 0 to {}: task {task} is not one of them",
            worker.job.name,
            stages - 1
        );
    }
    // Offline, the task count only names the partitions a repartition
    // source reads, which a replay never opens.
    let tasks = task.partition as u32 + 1;
    Ok(worker.with_tasks(tasks).task_job(task, registry)?)
}

/// A replay report as text.
pub fn replay_text(r: &ReplayReport) -> String {
    let mut out = String::new();
    let from = from_text(r.from_checkpoint);
    let verdict = match r.identical {
        true => "identical",
        false => "DIFFERENT",
    };
    let _ = writeln!(
        out,
        "replay of operator `{}`, epoch of checkpoint {} (from {from}) with {} {} ({}): {verdict}",
        r.operator,
        r.checkpoint,
        r.plugin.name,
        r.plugin.version,
        &r.plugin.sha256[..12.min(r.plugin.sha256.len())]
    );
    for i in &r.instances {
        let _ = writeln!(
            out,
            "  instance {}: {} calls, {} records out: outputs {}, state {}, snapshot {}",
            i.instance,
            i.steps,
            i.records_out,
            same(i.outputs_identical),
            same(i.state_identical),
            same(i.snapshot_identical)
        );
        if let Some(d) = &i.first_difference {
            let _ = writeln!(out, "    first difference: {d}");
        }
        for e in &i.errors {
            let _ = writeln!(
                out,
                "    {} at step {} ({}): {}",
                e.kind.name(),
                e.step,
                e.call,
                e.message
            );
        }
    }
    if !r.identical {
        out.push_str("  a plugin that emits other bytes from the same input and state is not deterministic: look for clocks, randomness or iteration over unordered maps in it\n");
    }
    out
}

/// A shadow report as text.
pub fn shadow_text(r: &ShadowReport) -> String {
    let mut out = String::new();
    let epochs = match r.epochs.as_slice() {
        [one] => format!("the epoch of checkpoint {one}"),
        [first, .., last] => format!("{} epochs (checkpoints {first} to {last})", r.epochs.len()),
        [] => "no epoch".to_owned(),
    };
    let _ = writeln!(
        out,
        "shadow of operator `{}` on {epochs}, from {}, {} instance(s)",
        r.operator,
        from_text(r.from_checkpoint),
        r.instances
    );
    for (label, p) in [("v1 (recorded)", &r.v1), ("v2 (tried)", &r.v2)] {
        let _ = writeln!(
            out,
            "  {label}: {} {} {}: {} records in, {:.0} ns CPU a record, {} peak memory",
            p.name,
            p.version,
            p.path,
            p.records_in,
            p.cpu_ns_per_record,
            weir::config::format_size(p.peak_memory_bytes)
        );
    }
    if r.config_changed {
        out.push_str("  warning: the operator's config in the job file is not the one the recorded epochs ran with; both plugins ran with the job file's\n");
    }
    if !r.v1_reproduced {
        out.push_str("  warning: the recorded plugin, run again, did not emit what it had recorded (it is not deterministic): differences below may be its own\n");
    }
    for p in &r.outputs {
        port_text(&mut out, p, r.limit);
    }
    state_text(&mut out, &r.state, r.to_checkpoint, r.limit);
    match r.errors.len() {
        0 => out.push_str("  errors: none\n"),
        n => {
            let _ = writeln!(out, "  errors: {n} ({} traps)", r.traps());
            for e in r.errors.iter().take(r.limit) {
                let _ = writeln!(
                    out,
                    "    {} in instance {}, epoch {}, step {} ({}): {}",
                    e.kind.name(),
                    e.instance,
                    e.epoch,
                    e.step,
                    e.call,
                    e.message
                );
            }
        }
    }
    out
}

fn port_text(out: &mut String, p: &PortDiff, limit: usize) {
    let _ = writeln!(
        out,
        "  output `{}`: {} same, {} changed, {} only v1, {} only v2",
        p.port, p.same, p.changed, p.only_v1, p.only_v2
    );
    for d in &p.differences {
        let show = |s: &Option<weir::shadow::Shown>| match s {
            Some(s) => format!("{:?}", s.value),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "    {} key {} (epoch {}, instance {}, step {}): v1 {} v2 {}",
            d.kind.name(),
            d.key
                .as_deref()
                .map_or("-".to_owned(), |k| format!("{k:?}")),
            d.epoch,
            d.instance,
            d.step,
            show(&d.v1),
            show(&d.v2)
        );
    }
    if p.differing() as usize > p.differences.len() {
        let _ = writeln!(
            out,
            "    ... (the first {limit} listed; --limit N for more)"
        );
    }
}

fn state_text(out: &mut String, s: &StateDiff, at: u64, limit: usize) {
    let _ = writeln!(
        out,
        "  state against checkpoint {at}: {} keys same, {} changed, {} only v1, {} only v2",
        s.same, s.changed, s.only_v1, s.only_v2
    );
    for k in &s.keys {
        let _ = writeln!(
            out,
            "    {} key {:?}: v1 {:?} v2 {:?}",
            k.kind.name(),
            k.key,
            k.v1.as_deref().unwrap_or("-"),
            k.v2.as_deref().unwrap_or("-")
        );
    }
    if s.differing() as usize > s.keys.len() {
        let _ = writeln!(
            out,
            "    ... (the first {limit} listed; --limit N for more)"
        );
    }
}

fn same(b: bool) -> &'static str {
    match b {
        true => "same",
        false => "DIFFERENT",
    }
}

fn from_text(from: Option<u64>) -> String {
    match from {
        Some(id) => format!("checkpoint {id}"),
        None => "the job's start".to_owned(),
    }
}
