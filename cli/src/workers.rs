//! `weir workers JOB`: a job in worker mode as the cluster sees it: per
//! stage, the workers in its group and the tasks (anchor partitions) each
//! runs, and
//! every task's checkpoint (the committed one, which a restore takes) with
//! its lag (the messages of its anchor partition after the checkpoint's
//! offset).

use std::path::Path;

use serde::Serialize;
use weir::cluster::{Anchor, TaskId, WorkerJob};
use weir::remote::RemoteStore;
use weir_connectors::kafka::group_view::{GroupView, describe};

/// One task as `weir workers` shows it.
#[derive(Debug, Serialize)]
pub struct TaskView {
    /// `<stage>-<p>`.
    pub task: String,
    /// The client id of the worker the group assigned it to, if any.
    pub owner: Option<String>,
    /// The checkpoint a restore of it takes: its committed one (its commit
    /// point in the group), else its newest in the store.
    pub checkpoint: Option<u64>,
    /// Its newest checkpoint in the store, when that is not committed
    /// (yet: the next commit point, or never: its writer stopped first).
    pub uncommitted: Option<u64>,
    /// Whether that checkpoint is its final one (its input ended).
    pub finished: bool,
    /// When that checkpoint started, RFC 3339.
    pub time: Option<String>,
    /// The anchor partition's next offset to read as of that checkpoint.
    pub next: Option<i64>,
    /// The anchor partition's end (high-water mark) now.
    pub end: i64,
    /// Messages of the anchor partition after the checkpoint's offset.
    pub lag: Option<i64>,
}

/// One stage of a job as `weir workers` shows it.
#[derive(Debug, Serialize)]
pub struct StageView {
    /// The stage's number.
    pub stage: u32,
    /// Its group.
    pub group: GroupView,
    /// Its tasks.
    pub tasks: Vec<TaskView>,
}

/// The job at `path` in worker mode: each stage's group and tasks.
pub fn view(path: &Path) -> anyhow::Result<Vec<StageView>> {
    let path = weir::config::job_file(path)?;
    let text = std::fs::read_to_string(&path)?;
    let job = WorkerJob::parse(&path, &text, &weir_connectors::registry())?;
    let mut stages = Vec::new();
    for stage in &job.stages {
        let group =
            describe(&job, stage.id).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let tasks = tasks(&job, stage.id, &group)?;
        stages.push(StageView {
            stage: stage.id,
            group,
            tasks,
        });
    }
    Ok(stages)
}

/// The tasks of `job`'s stage `stage`, whose group is `group`.
fn tasks(job: &WorkerJob, stage: u32, group: &GroupView) -> anyhow::Result<Vec<TaskView>> {
    let store = job
        .job
        .checkpoint
        .store
        .clone()
        .expect("checked by WorkerJob");
    let options = &job.job.checkpoint.store_options;
    // The source that reads the anchor topic.
    let anchor_id = match job.anchor(stage) {
        Anchor::Source(s) => s.id.as_str(),
        Anchor::Crossing(c) => c.id.as_str(),
        Anchor::Lease => "",
    };
    let mut tasks = Vec::new();
    for (p, &end) in group.ends.iter().enumerate() {
        let id = TaskId {
            stage,
            partition: p as i32,
        };
        let owner = (group.members.iter())
            .find(|m| m.partitions.contains(&id.partition))
            .map(|m| m.client_id.clone());
        let url = format!("{}/tasks/{id}", store.trim_end_matches('/'));
        let remote = RemoteStore::open(&url, options)?;
        let ids = remote.manifest_ids()?;
        let committed = group.committed.get(p).copied().flatten();
        let restored = committed
            .filter(|c| ids.contains(c))
            .or(ids.last().copied());
        let meta = match restored {
            Some(id) => Some(remote.manifest(id)?.meta),
            None => None,
        };
        let uncommitted = ids.last().copied().filter(|&n| Some(n) != restored);
        let next = meta.as_ref().and_then(|m| {
            let parts = m.sources.get(anchor_id)?.get("partitions")?.as_array()?;
            (parts.iter())
                .find(|e| {
                    e["topic"].as_str() == Some(group.topic.as_str())
                        && e["partition"].as_i64() == Some(p as i64)
                })
                .and_then(|e| e["next"].as_i64())
        });
        tasks.push(TaskView {
            task: id.to_string(),
            owner,
            checkpoint: meta.as_ref().map(|m| m.id),
            uncommitted,
            finished: meta.as_ref().is_some_and(|m| m.final_checkpoint),
            time: meta
                .clone()
                .map(|m| crate::inspect::CheckpointReport::of(m).time),
            lag: next.map(|n| (end - n).max(0)),
            next,
            end,
        });
    }
    Ok(tasks)
}

/// `view` as text: per stage, its group, its members, then one line per
/// task.
pub fn text(stages: &[StageView]) -> String {
    stages.iter().map(stage_text).collect()
}

fn stage_text(stage: &StageView) -> String {
    let (group, tasks) = (&stage.group, &stage.tasks);
    let mut out = format!(
        "stage {}: group `{}` ({}) on topic `{}`: {} worker(s), {} task(s)\n",
        stage.stage,
        group.group,
        group.state,
        group.topic,
        group.members.len(),
        tasks.len()
    );
    for m in &group.members {
        let owned: Vec<String> = (m.partitions.iter())
            .map(|&partition| {
                let stage = stage.stage;
                TaskId { stage, partition }.to_string()
            })
            .collect();
        out.push_str(&format!(
            "  worker {} ({}): task(s) {}\n",
            m.client_id,
            m.host,
            if owned.is_empty() {
                "none".into()
            } else {
                owned.join(", ")
            }
        ));
    }
    for t in tasks {
        let checkpoint = match (t.checkpoint, &t.time) {
            (Some(id), Some(time)) => format!(
                "checkpoint {id}{} at {time}{}",
                if t.finished { " (final)" } else { "" },
                t.uncommitted
                    .map_or(String::new(), |n| format!(" ({n} not committed)"))
            ),
            _ => "no checkpoint yet".into(),
        };
        let lag = match t.lag {
            Some(lag) => format!("offset {} of {}, lag {lag}", t.next.unwrap_or(0), t.end),
            None => format!("end {}", t.end),
        };
        out.push_str(&format!(
            "task {}  {}  {checkpoint}  {lag}\n",
            t.task,
            t.owner
                .as_deref()
                .map_or("unassigned".into(), |o| format!("on {o}")),
        ));
    }
    out
}
