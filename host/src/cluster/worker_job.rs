//! [`WorkerJob`]: a job file as worker mode reads it. It runs the checks
//! a job must pass to be split into tasks, and writes each task's job: the
//! job file cut to the task's stage, with the task's name, checkpoint
//! places, partition and sink ids, and a Kafka source or sink for each
//! repartition topic the stage reads or writes.

use std::path::Path;

use toml::{Table, Value};

use super::ClusterError;
use super::stages::{self, Crossing, WorkerStage};
use crate::config::{Job, Upstream};
use crate::connectors::Registry;

/// A task: one stage of the job on one partition index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    /// The stage.
    pub stage: u32,
    /// The partition of every Kafka topic the stage reads.
    pub partition: i32,
}

impl std::fmt::Display for TaskId {
    /// `<stage>-<partition>`, as in its folder `tasks/0-3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.stage, self.partition)
    }
}

impl std::str::FromStr for TaskId {
    type Err = String;

    /// `<stage>-<partition>`, as [`TaskId`] displays it.
    fn from_str(text: &str) -> Result<TaskId, String> {
        let parsed = text
            .split_once('-')
            .and_then(|(s, p)| Some((s.parse().ok()?, p.parse().ok()?)));
        match parsed {
            Some((stage, partition)) if partition >= 0 => Ok(TaskId { stage, partition }),
            _ => Err(format!(
                "`{text}` is not a task: write <stage>-<partition>, as in 0-3 (`weir workers` lists them)"
            )),
        }
    }
}

/// What a stage's tasks are anchored on: the topic whose partitions are
/// its tasks, and the source that reads it.
#[derive(Debug, Clone, Copy)]
pub enum Anchor<'a> {
    /// A Kafka source of the stage; its first topic.
    Source(&'a crate::config::SourceConfig),
    /// A repartition topic the stage reads, on the job's anchor cluster.
    Crossing(&'a Crossing),
    /// The lease topic of a job of NATS sources ([`lease_topic`]).
    Lease,
}

/// A job that worker mode runs, and what it needs to split it.
#[derive(Debug, Clone)]
pub struct WorkerJob {
    /// The job as the file says.
    pub job: Job,
    /// The file's tables, which each task's job is written from.
    table: Table,
    /// Whether the job is one task, leased through a one-partition topic
    /// (its sources are NATS streams, each one position): the anchor is
    /// then that topic ([`lease_topic`]) on `[cluster] brokers`.
    pub singleton: bool,
    /// The folder of the tasks' local state directories (`tasks/<task>`
    /// under it): the job's `[checkpoint] dir` unless `--state-dir`.
    state_dir: std::path::PathBuf,
    /// The job's stages, cut at its repartition edges.
    pub stages: Vec<WorkerStage>,
    /// The tasks per stage: the anchor topic's partition count, once the
    /// cluster said it ([`with_tasks`](Self::with_tasks)).
    tasks: u32,
}

impl WorkerJob {
    /// Reads the job file at `path` (text `text`) and checks that worker
    /// mode can split it: every source a Kafka one, the checkpoints in an
    /// object store, no sink that writes on one machine, no operator
    /// parallelism (the partition count is the job's parallelism).
    pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<WorkerJob, ClusterError> {
        // Worker mode replays no dead letters.
        let job = Job::parse(path, text, registry)?.without_replays();
        let refuse = |message: String| ClusterError::Refused {
            path: path.display().to_string(),
            message,
        };
        if job.checkpoint.store.is_none() {
            return Err(refuse(
                "each task keeps its checkpoints in an object store, where another worker can take it over; set [checkpoint] store = \"s3://...\"".into(),
            ));
        }
        if job.checkpoint.interval.is_none() {
            return Err(refuse(
                "tasks hand over and recover through checkpoints; set [checkpoint] interval".into(),
            ));
        }
        if job.checkpoint.retain < 2 {
            return Err(refuse(
                "a task taken over may restore the checkpoint before the newest; set [checkpoint] retain to 2 or more".into(),
            ));
        }
        let of = |kind: &'static str| job.sources.iter().find(|s| s.kind == kind);
        let singleton = job.sources.iter().all(|s| s.kind == "nats");
        for s in &job.sources {
            if s.kind != "kafka" && s.kind != "nats" {
                return Err(refuse(format!(
                    "source `{}` is type = \"{}\"; worker mode reads Kafka sources (a task per partition of their topics) or NATS sources (the job one task)",
                    s.id, s.kind
                )));
            }
        }
        if let (Some(k), Some(n)) = (of("kafka"), of("nats")) {
            return Err(refuse(format!(
                "source `{}` is Kafka and source `{}` NATS; worker mode runs a job of Kafka sources (a task per partition) or of NATS sources (one task), not both",
                k.id, n.id
            )));
        }
        for s in &job.sinks {
            if s.connector.file().is_some() || s.connector.writes_stdout() {
                return Err(refuse(format!(
                    "sink `{}` writes on the machine that runs it, and a task moves between machines; use a Kafka, PostgreSQL or NATS sink",
                    s.id
                )));
            }
        }
        if let Some(op) = job.operators.iter().find(|o| o.parallelism > 1) {
            return Err(refuse(format!(
                "operator `{}` sets parallelism = {}; in worker mode the anchor topic's partition count is the parallelism: remove it",
                op.id, op.parallelism
            )));
        }
        let table: Table = text.parse().expect("parsed above");
        for s in entries(&table, "source") {
            if s.contains_key("partitions") {
                let id = s.get("id").and_then(Value::as_str).unwrap_or("?");
                return Err(refuse(format!(
                    "source `{id}` sets `partitions`; the group assigns them to tasks: remove it"
                )));
            }
            if s.get("group").and_then(Value::as_str) == Some(job.cluster.group.as_str()) {
                let id = s.get("id").and_then(Value::as_str).unwrap_or("?");
                return Err(refuse(format!(
                    "source `{id}` commits offsets to group `{}`, the workers' own group; give it another `group`",
                    job.cluster.group
                )));
            }
        }
        let stages = stages::cut(&job).map_err(&refuse)?;
        if let (true, Some(c)) = (singleton, stages.iter().find_map(|s| s.inputs.first())) {
            return Err(refuse(format!(
                "operator `{}` sets exchange = \"repartition\", but a job of NATS sources is one task: there is nothing to repartition between; remove it",
                c.operator
            )));
        }
        if singleton && job.cluster.brokers.is_none() {
            return Err(refuse(
                "the job reads no Kafka topic, so its workers lease it through one: set [cluster] brokers = \"host:9092\"".into(),
            ));
        }
        Ok(WorkerJob {
            singleton,
            state_dir: job.checkpoint.dir.clone(),
            job,
            table,
            stages,
            tasks: 1,
        })
    }

    /// Sets the number of tasks of each stage: the anchor topic's
    /// partition count, which every repartition topic has too.
    pub fn with_tasks(mut self, tasks: u32) -> WorkerJob {
        self.tasks = tasks;
        self
    }

    /// What the tasks of `stage` are anchored on: its first Kafka source
    /// (that source's first topic), else the first repartition topic it
    /// reads, else (a job of NATS sources) the lease topic.
    pub fn anchor(&self, stage: u32) -> Anchor<'_> {
        let s = &self.stages[stage as usize];
        let own = (self.job.sources.iter()).find(|k| k.kind == "kafka" && s.nodes.contains(&k.id));
        match (own, s.inputs.first()) {
            (Some(source), _) => Anchor::Source(source),
            (None, Some(crossing)) => Anchor::Crossing(crossing),
            (None, None) => Anchor::Lease,
        }
    }

    /// Every repartition topic of the job.
    pub fn crossings(&self) -> impl Iterator<Item = &Crossing> {
        self.stages.iter().flat_map(|s| &s.outputs)
    }

    /// Keeps the tasks' local state directories under `dir` instead of
    /// the job's `[checkpoint] dir` (`--state-dir`: one per worker when
    /// several run on one machine).
    pub fn with_state_dir(mut self, dir: &Path) -> WorkerJob {
        self.state_dir = dir.to_path_buf();
        self
    }

    /// The job task `task` runs: the sources, operators and sinks of its
    /// stage, plus a Kafka source (`upstream_tasks`) per repartition topic
    /// the stage reads, in place of the upstream its operator names, and a
    /// Kafka sink (`upstream_task`) per one it writes, both on the anchor
    /// source's cluster; named `<job>@<task>`, its checkpoints in
    /// `<dir>/tasks/<task>` and `<store>/tasks/<task>`, reading partition
    /// `task.partition` of every Kafka topic, each Kafka sink's explicit
    /// `transactional_id` suffixed with `-<task>`.
    pub fn task_job(&self, task: TaskId, registry: &Registry) -> Result<Job, ClusterError> {
        let mut t = self.table.clone();
        let job = &self.job;
        let stage = &self.stages[task.stage as usize];
        // The client settings of the repartition topics: the anchor's.
        let anchor = entries(&self.table, "source").next();
        let client: Vec<(String, Value)> = (anchor.into_iter())
            .flat_map(|a| ["brokers", "properties"].map(|k| (k, a.get(k))))
            .filter_map(|(k, v)| Some((k.to_owned(), v?.clone())))
            .collect();
        for key in ["source", "operator", "sink"] {
            if let Some(Value::Array(list)) = t.get_mut(key) {
                list.retain(|e| {
                    let id = e.get("id").and_then(Value::as_str).unwrap_or_default();
                    stage.nodes.contains(id)
                });
            }
        }
        for c in &stage.inputs {
            let mut source: Table = client.iter().cloned().collect();
            source.insert("id".into(), c.id.clone().into());
            source.insert("type".into(), "kafka".into());
            source.insert("topic".into(), c.topic.clone().into());
            source.insert("upstream_tasks".into(), i64::from(self.tasks).into());
            let mut watermark = Table::new();
            watermark.insert("max_out_of_orderness".into(), "0s".into());
            source.insert("watermark".into(), watermark.into());
            push_entry(&mut t, "source", source);
            for op in entries_mut(&mut t, "operator") {
                if op.get("id").and_then(Value::as_str) == Some(c.operator.as_str())
                    && let Some(inputs) = op.get_mut("inputs")
                {
                    rename_upstream(inputs, &c.upstream, &c.id);
                }
            }
        }
        for op in entries_mut(&mut t, "operator") {
            op.remove("exchange");
        }
        for c in &stage.outputs {
            let mut sink: Table = client.iter().cloned().collect();
            sink.insert("id".into(), c.id.clone().into());
            sink.insert("type".into(), "kafka".into());
            sink.insert("input".into(), c.upstream.to_string().into());
            sink.insert("topic".into(), c.topic.clone().into());
            sink.insert("upstream_task".into(), i64::from(task.partition).into());
            push_entry(&mut t, "sink", sink);
        }
        t.insert("name".into(), format!("{}@{task}", job.name).into());
        let checkpoint = t
            .entry("checkpoint")
            .or_insert_with(|| Table::new().into())
            .as_table_mut()
            .expect("checked by Job::parse");
        let dir = self.state_dir.join("tasks").join(task.to_string());
        checkpoint.insert("dir".into(), dir.display().to_string().into());
        let store = job.checkpoint.store.as_deref().expect("checked by parse");
        let store = format!("{}/tasks/{task}", store.trim_end_matches('/'));
        checkpoint.insert("store".into(), store.into());
        let kafka = |t: &Table| t.get("type").and_then(Value::as_str) == Some("kafka");
        for source in entries_mut(&mut t, "source").filter(|s| kafka(s)) {
            let partitions = vec![Value::Integer(task.partition.into())];
            source.insert("partitions".into(), partitions.into());
        }
        for sink in entries_mut(&mut t, "sink") {
            let kafka = sink.get("type").and_then(Value::as_str) == Some("kafka");
            if let Some(Value::String(id)) = sink.get_mut("transactional_id")
                && kafka
            {
                id.push_str(&format!("-{task}"));
            }
        }
        let text = toml::to_string(&t).expect("a TOML table serializes");
        Ok(Job::parse(&job.path, &text, registry)?.without_replays())
    }
}

/// The topic a job of NATS sources is leased through: one partition, its
/// one task (the group's name, made a topic name, and `-lease`).
pub fn lease_topic(group: &str) -> String {
    stages::topic_name(&format!("{group}-lease"))
}

/// Replaces every mention of `from` among an operator's `inputs` (a list,
/// or a table of ports to an upstream or a list) with `to`.
fn rename_upstream(inputs: &mut Value, from: &Upstream, to: &str) {
    match inputs {
        Value::String(up) if Upstream::parse(up) == *from => *up = to.to_owned(),
        Value::Array(list) => list.iter_mut().for_each(|v| rename_upstream(v, from, to)),
        Value::Table(ports) => ports
            .iter_mut()
            .for_each(|(_, v)| rename_upstream(v, from, to)),
        _ => {}
    }
}

/// Appends `entry` to the array of tables `key` (`[[sink]]`).
fn push_entry(table: &mut Table, key: &str, entry: Table) {
    let list = table.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        list.push(entry.into());
    }
}

/// The tables of the array `key` (`[[source]]`) whose type is Kafka.
fn entries<'a>(table: &'a Table, key: &str) -> impl Iterator<Item = &'a Table> {
    let array = table.get(key).and_then(Value::as_array);
    (array.into_iter().flatten())
        .filter_map(Value::as_table)
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("kafka"))
}

/// The tables of the array `key`, to change.
fn entries_mut<'a>(table: &'a mut Table, key: &str) -> impl Iterator<Item = &'a mut Table> {
    let array = table.get_mut(key).and_then(Value::as_array_mut);
    (array.into_iter().flatten()).filter_map(Value::as_table_mut)
}

#[cfg(test)]
mod tests {
    use super::TaskId;

    #[test]
    fn a_task_id_reads_as_it_displays_and_refuses_anything_else() {
        let task: TaskId = "1-12".parse().unwrap();
        assert_eq!((task.stage, task.partition), (1, 12));
        assert_eq!(task.to_string(), "1-12");
        for bad in ["", "1", "1-", "-2", "a-1", "1--2", "1-2-3"] {
            let err = bad.parse::<TaskId>().unwrap_err();
            assert!(err.contains("write <stage>-<partition>"), "{bad}: {err}");
        }
    }
}
