//! [`Worker`]: the tasks one worker process owns. The group's calls
//! ([`Owner`]) start a task when its partition is assigned and hand it
//! over when revoked; [`Worker::run`] serves the group and restarts a
//! task that failed while this worker still owns it.
//!
//! Invariants:
//! - A task runs at most once in this process at a time: it is started
//!   only when its partition is assigned and no run of it is still
//!   stopping here (lost, or past its handover), and a run asked to stop
//!   starts no further attempt.
//! - A revoked task is asked to stop (a checkpoint, then the end) and
//!   waited for up to `handover_timeout` before the revocation returns to
//!   the group; past that, or when the partition was lost, it is left to
//!   stop on its own, and commits no checkpoint after the revocation
//!   returned (its [`TaskCommitPoint`] refuses them).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ClusterError, CommitRefused, Membership, Owner, StageCommits, TaskId, WorkerJob};
use crate::config::Job;
use crate::connectors::Registry;
use crate::metrics::JobMetrics;
use crate::run::{CommitPoint, RestoreMode, RunOptions, RunSummary};
use crate::wasm::Runtime;

/// The first wait before a failed task runs again; doubled per failure
/// in a row, up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait before a failed task runs again.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long one poll of the group lasts: how soon a stop request, a task's
/// end or a retry is seen.
const POLL: Duration = Duration::from_millis(100);

/// The thread of one run of a task's job, ending with its summary or
/// error.
type Run = JoinHandle<Result<RunSummary, String>>;

/// Where a task this worker owns stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Its job runs.
    Running,
    /// Its input ended and its final checkpoint is taken.
    Finished,
    /// Its last run failed with this error; it runs again at `retry`.
    Failed {
        /// Why.
        error: String,
        /// When it runs again.
        retry: Instant,
    },
}

/// A task this worker owns.
struct Task {
    state: TaskState,
    /// Failures in a row.
    failures: u32,
    shutdown: Arc<AtomicBool>,
    thread: Option<Run>,
    /// The live metrics of its current run.
    metrics: Option<Arc<JobMetrics>>,
    /// The job its runs run, once one started.
    job: Option<Arc<Job>>,
    /// Whether its runs may still commit checkpoints: until the worker
    /// gives the task up.
    owned: Arc<RwLock<bool>>,
}

impl Task {
    /// A task just assigned, not started yet.
    fn assigned() -> Task {
        Task {
            state: TaskState::Running,
            failures: 0,
            shutdown: Arc::new(AtomicBool::new(false)),
            thread: None,
            metrics: None,
            job: None,
            owned: Arc::new(RwLock::new(true)),
        }
    }
}

/// The commit point of a task's runs in this worker: its stage's
/// ([`StageCommits`]), while the worker owns the task.
#[derive(Clone)]
struct TaskCommitPoint {
    task: TaskId,
    stage: Arc<dyn StageCommits>,
    owned: Arc<RwLock<bool>>,
    /// How long a commit is tried again while the group is busy (a
    /// rebalance in progress) before it fails.
    patience: Duration,
}

/// The wait between two tries of a commit while the group is busy.
const COMMIT_RETRY: Duration = Duration::from_millis(100);

impl std::fmt::Debug for TaskCommitPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TaskCommitPoint({})", self.task)
    }
}

impl TaskCommitPoint {
    /// Tries `write` (`what`, for the log) while the worker owns the task,
    /// again while the group is busy, up to the patience.
    fn while_owned(
        &self,
        what: &str,
        write: impl Fn() -> Result<(), CommitRefused>,
    ) -> Result<(), String> {
        let deadline = Instant::now() + self.patience;
        loop {
            // Held while writing: giving the task up waits for a try
            // under way, and none starts after it.
            let owned = self.owned.read().unwrap_or_else(PoisonError::into_inner);
            self.owned(*owned)?;
            match write() {
                Ok(()) => return Ok(()),
                Err(CommitRefused::Fenced(why)) => return Err(why),
                Err(CommitRefused::Busy(why)) if Instant::now() >= deadline => {
                    return Err(format!(
                        "the group stayed busy for {} s: {why}",
                        self.patience.as_secs()
                    ));
                }
                Err(CommitRefused::Busy(why)) => {
                    tracing::debug!("task {}: {what}: {why}; trying again", self.task);
                }
            }
            drop(owned);
            std::thread::sleep(COMMIT_RETRY);
        }
    }

    /// An error unless `owned`.
    fn owned(&self, owned: bool) -> Result<(), String> {
        match owned {
            true => Ok(()),
            false => Err(format!(
                "task {} is no longer this worker's (its partition was revoked or lost)",
                self.task
            )),
        }
    }
}

impl CommitPoint for TaskCommitPoint {
    fn commit(&self, id: u64, sources: &BTreeMap<String, serde_json::Value>) -> Result<(), String> {
        self.while_owned(&format!("committing checkpoint {id}"), || {
            self.stage.commit(self.task.partition, id, sources)
        })
    }

    fn committed(&self) -> Result<Option<u64>, String> {
        self.owned(*self.owned.read().unwrap_or_else(PoisonError::into_inner))?;
        self.stage.committed(self.task.partition)
    }

    fn claim(&self, committed: Option<u64>) -> Result<(), String> {
        self.while_owned("claiming the task", || {
            self.stage.claim(self.task.partition, committed)
        })
    }

    fn transactions(&self) -> Result<Option<crate::run::Transactions>, String> {
        self.stage.transactions(self.task.partition)
    }
}

/// Gives up `task`'s runs in this worker: none commits a checkpoint from
/// now on (waiting for a commit under way).
fn give_up(owned: &RwLock<bool>) {
    *owned.write().unwrap_or_else(PoisonError::into_inner) = false;
}

/// A task this worker owns whose job started here, as a dashboard shows it.
#[derive(Clone)]
pub struct TaskRun {
    /// The task.
    pub id: TaskId,
    /// Where it stands.
    pub state: TaskState,
    /// Its job.
    pub job: Arc<Job>,
    /// The live metrics of its current run.
    pub metrics: Arc<JobMetrics>,
}

/// One worker process's share of a job.
pub struct Worker {
    job: WorkerJob,
    registry: Registry,
    runtime: Runtime,
    tasks: Mutex<BTreeMap<TaskId, Task>>,
    /// Runs of tasks given up (lost, or not handed over in time) that are
    /// still stopping: a task starts again here only once its run ended.
    leftovers: Mutex<Vec<(TaskId, Run)>>,
    /// The commit points of each stage's tasks, by stage, from its
    /// membership ([`Worker::run`]).
    commits: Mutex<Vec<Arc<dyn StageCommits>>>,
}

impl Worker {
    /// A worker of `job` that owns no task yet.
    pub fn new(job: WorkerJob, registry: Registry, runtime: Runtime) -> Arc<Worker> {
        Arc::new(Worker {
            job,
            registry,
            runtime,
            tasks: Mutex::new(BTreeMap::new()),
            leftovers: Mutex::new(Vec::new()),
            commits: Mutex::new(Vec::new()),
        })
    }

    /// The job.
    pub fn job(&self) -> &WorkerJob {
        &self.job
    }

    /// The live metrics of the tasks this worker runs (each labelled with
    /// its task's job name, `<job>@<stage>-<p>`).
    pub fn metrics(&self) -> Vec<Arc<JobMetrics>> {
        let tasks = self.tasks.lock().unwrap();
        tasks.values().filter_map(|t| t.metrics.clone()).collect()
    }

    /// The tasks this worker owns whose job started, with their jobs and
    /// live metrics.
    pub fn runs(&self) -> Vec<TaskRun> {
        let tasks = self.tasks.lock().unwrap();
        (tasks.iter())
            .filter_map(|(id, t)| {
                Some(TaskRun {
                    id: *id,
                    state: t.state.clone(),
                    job: t.job.clone()?,
                    metrics: t.metrics.clone()?,
                })
            })
            .collect()
    }

    /// Serves `memberships` (stage *s*'s at index *s*) until `shutdown`,
    /// then leaves their groups (its tasks handed over first). Restarts a
    /// task that failed once its wait is over; reports tasks that end.
    pub fn run(
        &self,
        memberships: &mut [Box<dyn Membership>],
        shutdown: &AtomicBool,
    ) -> Result<(), ClusterError> {
        *self.commits.lock().unwrap() = memberships.iter().map(|m| m.commits()).collect();
        let group = |message: String| ClusterError::Group {
            job: self.job.job.name.clone(),
            message,
        };
        let each = POLL / memberships.len().max(1) as u32;
        while !shutdown.load(Ordering::Relaxed) {
            for m in memberships.iter_mut() {
                m.poll(each).map_err(group)?;
            }
            self.tend();
        }
        tracing::info!("worker: leaving the groups, handing its tasks over");
        for m in memberships.iter_mut() {
            m.leave().map_err(group)?;
        }
        // The commit points hold the memberships' clients.
        self.commits.lock().unwrap().clear();
        Ok(())
    }

    /// Collects the tasks whose run ended, and runs again those whose
    /// retry time came.
    fn tend(&self) {
        let mut tasks = self.tasks.lock().unwrap();
        let now = Instant::now();
        let ended: Vec<(TaskId, Run)> = (self.leftovers.lock().unwrap())
            .extract_if(.., |(_, thread)| thread.is_finished())
            .collect();
        for (id, thread) in ended {
            match thread.join() {
                Ok(Err(e)) => {
                    tracing::info!("worker: the run of task {id} given up here ended: {e}")
                }
                _ => tracing::info!("worker: the run of task {id} given up here ended"),
            }
        }
        for (id, task) in tasks.iter_mut() {
            if task.thread.as_ref().is_some_and(JoinHandle::is_finished) {
                let ended = task.thread.take().expect("checked").join();
                let ended = ended.unwrap_or_else(|_| Err("its thread panicked".into()));
                match ended {
                    Ok(summary) if summary.finished => {
                        tracing::info!(
                            "worker: task {id} finished (checkpoint {:?})",
                            summary.last_checkpoint
                        );
                        task.state = TaskState::Finished;
                        task.failures = 0;
                    }
                    Ok(_) => {
                        // Stopped without a revocation: run it again.
                        task.state = TaskState::Failed {
                            error: "it stopped".into(),
                            retry: now,
                        };
                    }
                    Err(error) => {
                        let wait =
                            (FIRST_RETRY * 2u32.saturating_pow(task.failures)).min(MAX_RETRY);
                        task.failures += 1;
                        tracing::error!(
                            "worker: task {id} failed: {error}; running it again in {} s",
                            wait.as_secs()
                        );
                        task.state = TaskState::Failed {
                            error,
                            retry: now + wait,
                        };
                    }
                }
            }
            if let TaskState::Failed { retry, .. } = task.state
                && retry <= now
                && task.thread.is_none()
            {
                self.start(*id, task);
            }
        }
    }

    /// Starts `task`'s job on a thread of its own, once no earlier run of
    /// it in this process is still stopping (it holds the task's local
    /// state directory).
    fn start(&self, id: TaskId, task: &mut Task) {
        let leftovers = self.leftovers.lock().unwrap();
        if leftovers
            .iter()
            .any(|(t, thread)| *t == id && !thread.is_finished())
        {
            task.state = TaskState::Failed {
                error: "its run given up here is still stopping".into(),
                retry: Instant::now() + POLL,
            };
            return;
        }
        drop(leftovers);
        let job = match self.job.task_job(id, &self.registry) {
            Ok(job) => job,
            Err(e) => {
                task.state = TaskState::Failed {
                    error: e.to_string(),
                    retry: Instant::now() + MAX_RETRY,
                };
                return;
            }
        };
        let Some(stage) = self.commits.lock().unwrap().get(id.stage as usize).cloned() else {
            task.state = TaskState::Failed {
                error: format!("the worker is not in the group of stage {}", id.stage),
                retry: Instant::now() + MAX_RETRY,
            };
            return;
        };
        let point = TaskCommitPoint {
            task: id,
            stage,
            owned: task.owned.clone(),
            patience: self.job.job.cluster.handover_timeout,
        };
        let runtime = self.runtime.clone();
        let shutdown = Arc::new(AtomicBool::new(false));
        let stop = shutdown.clone();
        let metrics = JobMetrics::for_job(&job);
        let live = metrics.clone();
        let shown = Arc::new(job.clone());
        let thread = std::thread::Builder::new()
            .name(format!("task-{id}"))
            .spawn(move || {
                let options = RunOptions {
                    restore: RestoreMode::Latest,
                    metrics: Some(live),
                    commit_point: Some(Arc::new(point)),
                    ..RunOptions::default()
                };
                crate::run::run(&job, &runtime, &options, &stop).map_err(|e| e.to_string())
            });
        match thread {
            Ok(thread) => {
                tracing::info!("worker: task {id} runs");
                task.state = TaskState::Running;
                task.shutdown = shutdown;
                task.thread = Some(thread);
                task.metrics = Some(metrics);
                task.job = Some(shown);
            }
            Err(e) => {
                task.state = TaskState::Failed {
                    error: format!("cannot start its thread: {e}"),
                    retry: Instant::now() + FIRST_RETRY,
                };
            }
        }
    }
}

impl Owner for Worker {
    fn assigned(&self, stage: u32, partitions: &[i32]) {
        let mut tasks = self.tasks.lock().unwrap();
        for &partition in partitions {
            let id = TaskId { stage, partition };
            if tasks.contains_key(&id) {
                continue;
            }
            let mut task = Task::assigned();
            self.start(id, &mut task);
            tasks.insert(id, task);
        }
    }

    fn revoked(&self, stage: u32, partitions: &[i32], lost: bool) {
        let mut handing: Vec<(TaskId, Run, Arc<RwLock<bool>>)> = Vec::new();
        {
            let mut tasks = self.tasks.lock().unwrap();
            for &partition in partitions {
                let id = TaskId { stage, partition };
                if let Some(task) = tasks.remove(&id) {
                    task.shutdown.store(true, Ordering::Relaxed);
                    match task.thread {
                        Some(thread) => handing.push((id, thread, task.owned)),
                        None => give_up(&task.owned),
                    }
                }
            }
        }
        if lost {
            for (id, _, owned) in &handing {
                give_up(owned);
                tracing::warn!(
                    "worker: task {id} was lost (this worker left the group too long); it stops, and its checkpoints meet the new owner's fence"
                );
            }
            let runs = handing.into_iter().map(|(id, thread, _)| (id, thread));
            self.leftovers.lock().unwrap().extend(runs);
            return;
        }
        let deadline = Instant::now() + self.job.job.cluster.handover_timeout;
        for (id, thread, owned) in handing {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            give_up(&owned);
            if !thread.is_finished() {
                tracing::warn!(
                    "worker: task {id} did not hand over within handover_timeout; its next owner restores its last checkpoint"
                );
                self.leftovers.lock().unwrap().push((id, thread));
                continue;
            }
            match thread.join() {
                Ok(Ok(s)) => tracing::info!(
                    "worker: task {id} handed over at checkpoint {:?}",
                    s.last_checkpoint
                ),
                Ok(Err(e)) => tracing::warn!("worker: task {id} failed while handing over: {e}"),
                Err(_) => tracing::warn!("worker: task {id}'s thread panicked"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    /// A stage's commit points that answer each try from a script, then
    /// `Ok`, counting the tries begun and ended; a try can be made to
    /// last `slow`.
    #[derive(Default)]
    struct Scripted {
        answers: Mutex<Vec<CommitRefused>>,
        tries: AtomicU32,
        ended: AtomicU32,
        slow: Duration,
    }

    impl StageCommits for Scripted {
        fn commit(
            &self,
            _: i32,
            _: u64,
            _: &BTreeMap<String, serde_json::Value>,
        ) -> Result<(), CommitRefused> {
            self.tries.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.slow);
            self.ended.fetch_add(1, Ordering::SeqCst);
            let mut answers = self.answers.lock().unwrap();
            match answers.is_empty() {
                true => Ok(()),
                false => Err(answers.remove(0)),
            }
        }
        fn committed(&self, _: i32) -> Result<Option<u64>, String> {
            Ok(None)
        }
        fn claim(&self, p: i32, _: Option<u64>) -> Result<(), CommitRefused> {
            self.commit(p, 0, &BTreeMap::new())
        }
    }

    fn point(stage: Arc<Scripted>, patience: Duration) -> TaskCommitPoint {
        TaskCommitPoint {
            task: TaskId {
                stage: 0,
                partition: 3,
            },
            stage,
            owned: Arc::new(RwLock::new(true)),
            patience,
        }
    }

    fn busy(n: usize) -> Vec<CommitRefused> {
        vec![CommitRefused::Busy("rebalance in progress".into()); n]
    }

    /// A busy group is tried again until the commit is made; for longer
    /// than the patience, the commit fails saying so.
    #[test]
    fn a_commit_waits_out_a_busy_group_for_its_patience() {
        let stage = Arc::new(Scripted {
            answers: Mutex::new(busy(3)),
            ..Scripted::default()
        });
        point(stage.clone(), Duration::from_secs(30))
            .commit(7, &BTreeMap::new())
            .unwrap();
        assert_eq!(stage.tries.load(Ordering::SeqCst), 4);
        let stage = Arc::new(Scripted {
            answers: Mutex::new(busy(1000)),
            ..Scripted::default()
        });
        let err = point(stage, Duration::ZERO)
            .commit(7, &BTreeMap::new())
            .unwrap_err();
        assert!(
            err.contains("stayed busy") && err.contains("rebalance in progress"),
            "{err}"
        );
    }

    /// A fenced commit fails at once, with the group's reason.
    #[test]
    fn a_fenced_commit_is_not_tried_again() {
        let stage = Arc::new(Scripted {
            answers: Mutex::new(vec![CommitRefused::Fenced("unknown member".into())]),
            ..Scripted::default()
        });
        let err = point(stage.clone(), Duration::from_secs(30))
            .commit(7, &BTreeMap::new())
            .unwrap_err();
        assert_eq!(err, "unknown member");
        assert_eq!(stage.tries.load(Ordering::SeqCst), 1);
    }

    /// Giving a task up waits for a commit under way, and no commit of it
    /// is tried after.
    #[test]
    fn a_task_given_up_commits_nothing_after() {
        let stage = Arc::new(Scripted {
            slow: Duration::from_millis(300),
            ..Scripted::default()
        });
        let p = point(stage.clone(), Duration::from_secs(30));
        let committing = {
            let p = p.clone();
            std::thread::spawn(move || p.commit(7, &BTreeMap::new()))
        };
        while stage.tries.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        give_up(&p.owned);
        assert_eq!(stage.ended.load(Ordering::SeqCst), 1, "giving up waited");
        committing.join().unwrap().unwrap();
        let err = p.commit(8, &BTreeMap::new()).unwrap_err();
        assert!(err.contains("task 0-3 is no longer this worker's"), "{err}");
        assert_eq!(stage.tries.load(Ordering::SeqCst), 1);
    }

    /// A run of a task given up can neither read its commit point (a
    /// restore would fence its new owner's transactions) nor claim it (a
    /// restore would delete its new owner's manifests); a claim while the
    /// task is owned is tried again while the group is busy.
    #[test]
    fn a_task_given_up_is_neither_read_nor_claimed() {
        let stage = Arc::new(Scripted {
            answers: Mutex::new(busy(2)),
            ..Scripted::default()
        });
        let p = point(stage.clone(), Duration::from_secs(30));
        p.claim(Some(4)).unwrap();
        assert_eq!(stage.tries.load(Ordering::SeqCst), 3);
        give_up(&p.owned);
        for err in [p.committed().unwrap_err(), p.claim(Some(4)).unwrap_err()] {
            assert!(err.contains("task 0-3 is no longer this worker's"), "{err}");
        }
        assert_eq!(stage.tries.load(Ordering::SeqCst), 3);
    }
}
