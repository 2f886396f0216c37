//! Worker mode's group membership (`weir::cluster::Membership`): one
//! consumer per worker in the job's group, subscribed to the anchor topic
//! with cooperative (incremental) rebalancing. It reads no message: its
//! partitions are paused as soon as they are assigned, and each task's
//! own Kafka source reads its partition at the task's checkpointed
//! offsets. The group only decides who owns which partition, and so which
//! task.
//!
//! Invariants:
//! - Revocations reach the [`Owner`] before the partitions are given up
//!   (`pre_rebalance`), so a task hands over before its next owner starts
//!   it; assignments after they are taken (`post_rebalance`).
//! - Only incremental rebalancing is accepted: an eager one would stop
//!   every task at every change of membership.
//! - The group's committed offset of anchor partition *p* is task *p*'s
//!   commit point ([`GroupCommits`]): its metadata `weir:<n>` names the
//!   checkpoint to restore; it is written only through this consumer, so
//!   by a member of the group's current generation that holds *p*.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol,
};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use weir::cluster::{
    Anchor, CommitRefused, Membership, Owner, StageCommits, WorkerJob, lease_topic,
};
use weir::config::SourceConfig;
use weir::run::Transactions;

use super::client::{ClientSettings, Context, partitions};
use super::direct::TaskTransactions;
use super::sink::{KafkaSinkConfig, Write};
use super::source::{KafkaSourceConfig, from_offset};

/// The consumer context: the owner to call, and the log context.
struct GroupContext {
    owner: Arc<dyn Owner>,
    /// The stage whose group this is.
    stage: u32,
    /// The stage's anchor topic.
    topic: String,
    log: Context,
}

impl ClientContext for GroupContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.log.error(error, reason);
    }
}

impl GroupContext {
    /// The anchor topic's partition numbers in `rebalance`.
    fn partitions(&self, rebalance: &Rebalance<'_>) -> Vec<i32> {
        let tpl = match rebalance {
            Rebalance::Assign(tpl) | Rebalance::Revoke(tpl) => tpl,
            Rebalance::Error(_) => return Vec::new(),
        };
        let mut parts: Vec<i32> = (tpl.elements().iter())
            .filter(|e| e.topic() == self.topic)
            .map(|e| e.partition())
            .collect();
        parts.sort_unstable();
        parts
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(_) => {
                let parts = self.partitions(rebalance);
                let lost = consumer.assignment_lost();
                tracing::info!(
                    "worker: the group of stage {} revokes partition(s) {parts:?}{}",
                    self.stage,
                    match lost {
                        true => " (lost)",
                        false => "",
                    }
                );
                self.owner.revoked(self.stage, &parts, lost);
            }
            Rebalance::Error(e) => tracing::warn!("worker: rebalance failed: {e}"),
            Rebalance::Assign(_) => {}
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            if !matches!(
                consumer.rebalance_protocol(),
                RebalanceProtocol::Cooperative
            ) {
                tracing::error!(
                    "worker: the group rebalances eagerly; every worker of a job must use cooperative rebalancing (do not set partition.assignment.strategy)"
                );
            }
            // The tasks read their partitions; this consumer reads none.
            if let Err(e) = consumer.pause(tpl) {
                tracing::warn!("worker: cannot pause the group's partitions: {e}");
            }
            let parts = self.partitions(rebalance);
            tracing::info!(
                "worker: the group of stage {} assigns partition(s) {parts:?}",
                self.stage
            );
            self.owner.assigned(self.stage, &parts);
        }
    }
}

/// A worker's membership: the group consumer.
pub struct GroupMembership {
    consumer: Arc<BaseConsumer<GroupContext>>,
    /// How long leaving may take: every task's handover.
    leave_timeout: Duration,
    /// The commit points made through the consumer.
    commits: Arc<GroupCommits>,
}

/// The commit points of a stage's tasks: offset commits of the anchor
/// partitions, with metadata `weir:<checkpoint>`, made by the worker's
/// member of the stage's group.
pub struct GroupCommits {
    consumer: Arc<BaseConsumer<GroupContext>>,
    group: String,
    /// The anchor topic.
    topic: String,
    /// Where the stage's direct Kafka sinks write, if it has any: then
    /// each task's commits are carried by its transactions.
    direct: Option<Direct>,
    /// The open transactions of each task, by partition.
    transactions: Mutex<BTreeMap<i32, Arc<TaskTransactions>>>,
}

/// The transactions of a stage whose sinks write directly
/// ([`super::direct`]).
struct Direct {
    /// The cluster of the stage's direct sinks.
    client: ClientSettings,
    /// `weir-<job>@<stage>`: task *p*'s ids are `<base>-<p>#a` and `#b`.
    base: String,
}

/// The metadata of a commit point, before the checkpoint id (none after
/// it: a claim made while nothing was committed).
const COMMITTED: &str = "weir:";

/// Whether the group coordinator refused a commit because the member is
/// not one of the group's (removed, or replaced by another with its
/// instance id): final. An old generation (`ILLEGAL_GENERATION`) is not:
/// a member commits with it while a rebalance it takes part in
/// completes, and one removed from the group finds out at its next
/// heartbeat (its assignment lost).
fn fenced(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::UnknownMemberId | RDKafkaErrorCode::FencedInstanceId
    )
}

impl GroupCommits {
    /// The next offset of anchor partition `partition` that `sources`
    /// (a checkpoint's source offsets) hold; 0 when no source reads it
    /// (a lease topic).
    fn anchor_offset(&self, partition: i32, sources: &BTreeMap<String, serde_json::Value>) -> i64 {
        (sources.values())
            .filter_map(from_offset)
            .flatten()
            .find(|s| s.topic == self.topic && s.partition == partition)
            .map_or(0, |s| s.next)
    }

    /// Task `partition`'s transactions, opened anew, fencing every earlier
    /// producer of their ids.
    fn fence(&self, direct: &Direct, partition: i32) -> Result<Arc<TaskTransactions>, String> {
        let base = format!("{}-{partition}", direct.base);
        let opened = TaskTransactions::open(&direct.client, &base)?;
        let mut all = self
            .transactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.insert(partition, opened.clone());
        Ok(opened)
    }

    /// Task `partition`'s transactions, if this worker opened them.
    fn opened(&self, partition: i32) -> Option<Arc<TaskTransactions>> {
        let all = self
            .transactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.get(&partition).cloned()
    }

    /// Commits `list` as this worker's member of the group, outside any
    /// transaction.
    fn commit_offsets(&self, list: &TopicPartitionList) -> Result<(), CommitRefused> {
        let error = match self.consumer.commit(list, CommitMode::Sync) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let what = format!("group `{}`: {error}", self.group);
        Err(match error.rdkafka_error_code() {
            Some(code) if fenced(code) => CommitRefused::Fenced(format!(
                "{what}: this worker is no longer a member of the group; the task's next owner restores its last committed checkpoint"
            )),
            _ => CommitRefused::Busy(what),
        })
    }

    /// The group's committed offset of anchor partition `partition`, and
    /// the checkpoint its metadata names.
    fn fetch(&self, partition: i32) -> Result<(Offset, Option<u64>), String> {
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.topic, partition);
        let read = (self.consumer)
            .committed_offsets(list, super::client::TIMEOUT)
            .map_err(|e| {
                format!(
                    "reading the committed offsets of group `{}`: {e}",
                    self.group
                )
            })?;
        let Some(e) = read.find_partition(&self.topic, partition) else {
            return Ok((Offset::Invalid, None));
        };
        // An offset still in an open transaction, say, is no answer.
        e.error().map_err(|error| {
            format!(
                "reading the committed offset of partition {partition} of `{}` in group `{}`: {error}",
                self.topic, self.group
            )
        })?;
        Ok((e.offset(), commit_point(&e, &self.group, &self.topic)?))
    }

    /// Whether this member holds `partition` now (its assignment not
    /// lost).
    fn holds(&self, partition: i32) -> bool {
        if self.consumer.assignment_lost() {
            return false;
        }
        (self.consumer.assignment().ok()).is_some_and(|a| {
            (a.elements().iter()).any(|e| e.topic() == self.topic && e.partition() == partition)
        })
    }
}

impl StageCommits for GroupCommits {
    fn commit(
        &self,
        partition: i32,
        id: u64,
        sources: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(), CommitRefused> {
        if !self.holds(partition) {
            return Err(CommitRefused::Fenced(format!(
                "this worker no longer holds partition {partition} of `{}` in group `{}`",
                self.topic, self.group
            )));
        }
        let offset = self.anchor_offset(partition, sources);
        let mut list = TopicPartitionList::new();
        (list.add_partition_offset(&self.topic, partition, Offset::Offset(offset)))
            .map_err(|e| CommitRefused::Fenced(e.to_string()))?;
        if let Some(mut e) = list.find_partition(&self.topic, partition) {
            e.set_metadata(format!("{COMMITTED}{id}"));
        }
        if self.direct.is_some() {
            let opened = self.opened(partition);
            let Some(transactions) = opened else {
                return Err(CommitRefused::Fenced(format!(
                    "task {partition}'s transactions are not open in this worker"
                )));
            };
            let Some(group) = self.consumer.group_metadata() else {
                return Err(CommitRefused::Busy(format!(
                    "group `{}` has no member metadata yet",
                    self.group
                )));
            };
            return transactions.commit(id, &list, &group);
        }
        self.commit_offsets(&list)
    }

    fn committed(&self, partition: i32) -> Result<Option<u64>, String> {
        if let Some(direct) = &self.direct {
            // A commit point an earlier owner left in an open transaction
            // resolves only once that transaction ends.
            self.fence(direct, partition)?;
        }
        Ok(self.fetch(partition)?.1)
    }

    fn claim(&self, partition: i32, committed: Option<u64>) -> Result<(), CommitRefused> {
        if !self.holds(partition) {
            return Err(CommitRefused::Fenced(format!(
                "this worker no longer holds partition {partition} of `{}` in group `{}`",
                self.topic, self.group
            )));
        }
        let (offset, held) = self.fetch(partition).map_err(CommitRefused::Busy)?;
        if held != committed {
            let named = |c: Option<u64>| c.map_or_else(|| "none".to_owned(), |c| c.to_string());
            return Err(CommitRefused::Fenced(format!(
                "group `{}` holds checkpoint {} as task {partition}'s, not {} as read before: another worker committed it, so it owns the task",
                self.group,
                named(held),
                named(committed)
            )));
        }
        let offset = match offset {
            Offset::Offset(o) => o,
            _ => 0,
        };
        let mut list = TopicPartitionList::new();
        (list.add_partition_offset(&self.topic, partition, Offset::Offset(offset)))
            .map_err(|e| CommitRefused::Fenced(e.to_string()))?;
        if let Some(mut e) = list.find_partition(&self.topic, partition) {
            let id = committed.map_or_else(String::new, |c| c.to_string());
            e.set_metadata(format!("{COMMITTED}{id}"));
        }
        self.commit_offsets(&list)
    }

    fn transactions(&self, partition: i32) -> Result<Option<Transactions>, String> {
        let Some(direct) = &self.direct else {
            return Ok(None);
        };
        let opened = self.opened(partition);
        let transactions = match opened {
            Some(t) => t,
            None => self.fence(direct, partition)?,
        };
        Ok(Some(transactions))
    }
}

/// Where the direct Kafka sinks of `job`'s stage `stage` write, if it has
/// any; all of them must write to one cluster (a transaction spans one).
fn direct_sinks(job: &WorkerJob, stage: u32) -> Result<Option<Direct>, String> {
    let nodes = &job.stages[stage as usize].nodes;
    let mut direct: Option<(&str, &ClientSettings)> = None;
    for sink in job.job.sinks.iter().filter(|s| nodes.contains(&s.id)) {
        let Some(k) = (sink.connector.as_ref() as &dyn Any).downcast_ref::<KafkaSinkConfig>()
        else {
            continue;
        };
        if k.write != Write::Direct {
            continue;
        }
        match direct {
            Some((first, client)) if *client != k.client => {
                return Err(format!(
                    "sinks `{first}` and `{}` write directly to two Kafka clusters (or with other properties); a task's transactions span one: give them the same brokers and properties, or use write = \"staged\" on one",
                    sink.id
                ));
            }
            Some(_) => {}
            None => direct = Some((&sink.id, &k.client)),
        }
    }
    Ok(direct.map(|(_, client)| Direct {
        client: client.clone(),
        base: format!("weir-{}@{stage}", job.job.name),
    }))
}

/// The checkpoint the committed offset `e` (of group `group`, on `topic`)
/// names, if it is a commit point; `None` when nothing is committed.
fn commit_point(
    e: &rdkafka::topic_partition_list::TopicPartitionListElem<'_>,
    group: &str,
    topic: &str,
) -> Result<Option<u64>, String> {
    let metadata = e.metadata();
    match metadata.strip_prefix(COMMITTED).map(str::parse::<u64>) {
        Some(Ok(id)) => Ok(Some(id)),
        // A claim while nothing was committed.
        _ if metadata == COMMITTED => Ok(None),
        _ if metadata.is_empty() && !matches!(e.offset(), Offset::Offset(_)) => Ok(None),
        _ => Err(format!(
            "group `{group}` holds an offset of partition {} of `{topic}` that no worker committed (metadata {metadata:?}); the group is the job's own: give other consumers another group",
            e.partition()
        )),
    }
}

/// The checkpoint each of partitions `0..count` of `topic` has committed
/// in `list` (group `group`'s committed offsets), if any.
pub(super) fn commit_points(
    list: &TopicPartitionList,
    group: &str,
    topic: &str,
    count: i32,
) -> Result<Vec<Option<u64>>, String> {
    let mut points = vec![None; count.max(0) as usize];
    for e in list.elements().into_iter().filter(|e| e.topic() == topic) {
        if let Some(point) = usize::try_from(e.partition())
            .ok()
            .and_then(|p| points.get_mut(p))
        {
            *point = commit_point(&e, group, topic)?;
        }
    }
    Ok(points)
}

/// The Kafka sources of `job`, as their type parsed them.
fn kafka_sources(job: &WorkerJob) -> impl Iterator<Item = &KafkaSourceConfig> {
    job.job.sources.iter().filter_map(as_kafka)
}

/// `source`'s settings, if it is a Kafka source.
fn as_kafka(source: &SourceConfig) -> Option<&KafkaSourceConfig> {
    (source.connector.as_ref() as &dyn Any).downcast_ref::<KafkaSourceConfig>()
}

/// The anchor's cluster and topic of `stage`: the stage's first Kafka
/// source's first topic, or its first repartition topic (on the job's
/// anchor cluster), or, for a job of NATS sources, its lease topic on
/// `[cluster] brokers`.
pub(super) fn anchor(job: &WorkerJob, stage: u32) -> Result<(ClientSettings, String), String> {
    match (job.anchor(stage), kafka_sources(job).next()) {
        (Anchor::Source(s), _) => {
            let k = as_kafka(s).expect("a Kafka source anchors");
            Ok((k.client.clone(), k.topics[0].clone()))
        }
        (Anchor::Crossing(c), Some(k)) => Ok((k.client.clone(), c.topic.clone())),
        _ => {
            let client = ClientSettings::read(job.job.cluster.brokers.clone(), None)?;
            Ok((client, lease_topic(&job.job.cluster.group)))
        }
    }
}

/// Gets the cluster ready for `job`'s workers and says how many tasks
/// each stage has (the anchor topic's partition count): checks that every
/// Kafka topic the job reads has as many partitions as the anchor (task
/// *p* reads partition *p* of each), and creates the lease topic of a job
/// of NATS sources and the repartition topics, with as many, where
/// missing.
pub fn prepare(job: &WorkerJob) -> Result<u32, String> {
    let (client, topic) = anchor(job, 0)?;
    if job.singleton {
        create_topic(&client, &topic, 1, "lease", &[])?;
    }
    let count = partitions(&probe(&client)?, &client.brokers, &topic)?.len();
    for source in kafka_sources(job) {
        let other = probe(&source.client)?;
        for t in &source.topics {
            let n = partitions(&other, &source.client.brokers, t)?.len();
            if n != count {
                return Err(format!(
                    "topic `{t}` has {n} partition(s) and the anchor topic `{topic}` {count}: task p reads partition p of every topic, so they must have as many (and be partitioned by the same key)"
                ));
            }
        }
    }
    let probe = probe(&client)?;
    for c in job.crossings() {
        // Records keep their event time as their timestamp, which may be
        // older than any time retention: only the downstream stage's
        // checkpoints drop them (`DeleteRecords`).
        let retention = [("retention.ms", "-1")];
        create_topic(&client, &c.topic, count as i32, "repartition", &retention)?;
        let n = partitions(&probe, &client.brokers, &c.topic)?.len();
        if n != count {
            return Err(format!(
                "the repartition topic `{}` has {n} partition(s) and the anchor topic `{topic}` {count}; delete it (the job's stages then start over) or give the anchor as many",
                c.topic
            ));
        }
    }
    Ok(count as u32)
}

/// A client that reads `client`'s cluster's metadata.
fn probe(client: &ClientSettings) -> Result<BaseConsumer<Context>, String> {
    probe_in(client, "weir-worker-probe")
}

/// A client that reads `client`'s cluster's metadata and group `group`'s
/// committed offsets, without joining it.
pub(super) fn probe_in(
    client: &ClientSettings,
    group: &str,
) -> Result<BaseConsumer<Context>, String> {
    client
        .config("worker-probe", &[("group.id", group)])
        .create_with_context(Context::new("worker".into()))
        .map_err(|e| format!("cannot create a Kafka client: {e}"))
}

impl GroupMembership {
    /// Joins the group of `job`'s stage `stage` as a worker whose tasks
    /// `owner` runs (after [`prepare`]).
    ///
    /// With `instance_id`, the worker is a static member of the group
    /// (`group.instance.id`): it leaves without a rebalance, and started
    /// again with the same id within the session timeout it gets its tasks
    /// back with none (and finds their local state directories as it left
    /// them); a second process with the same id fences the first.
    pub fn join(
        job: &WorkerJob,
        stage: u32,
        owner: Arc<dyn Owner>,
        instance_id: Option<&str>,
    ) -> Result<GroupMembership, String> {
        let (client, topic) = anchor(job, stage)?;
        let direct = direct_sinks(job, stage)?;
        let cluster = &job.job.cluster;
        let group = &job.stages[stage as usize].group;
        let session = cluster.session_timeout.as_millis().to_string();
        let heartbeat = (cluster.session_timeout.as_millis() / 3)
            .max(100)
            .to_string();
        // A revocation blocks the poll thread for up to handover_timeout.
        let poll_interval = (cluster.handover_timeout * 2 + Duration::from_secs(60))
            .as_millis()
            .to_string();
        let mut config = client.config(
            &format!("worker-{}-{}", host_name(), std::process::id()),
            &[
                ("group.id", group),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("auto.offset.reset", "latest"),
                ("session.timeout.ms", &session),
                ("heartbeat.interval.ms", &heartbeat),
                ("max.poll.interval.ms", &poll_interval),
            ],
        );
        config.set("partition.assignment.strategy", "cooperative-sticky");
        if let Some(id) = instance_id {
            config.set("group.instance.id", id);
        }
        let log = Context::new(format!("worker group `{group}`"));
        log.opened();
        let context = GroupContext {
            owner,
            stage,
            topic: topic.clone(),
            log,
        };
        let consumer: Arc<BaseConsumer<GroupContext>> = Arc::new(
            config
                .create_with_context(context)
                .map_err(|e| format!("cannot create the group's Kafka client: {e}"))?,
        );
        let count = partitions(&probe(&client)?, &client.brokers, &topic)?.len();
        consumer
            .subscribe(&[&topic])
            .map_err(|e| format!("cannot join group `{group}` on topic `{topic}`: {e}"))?;
        tracing::info!(
            "worker: joined group `{group}` on topic `{topic}` ({count} partitions: tasks {stage}-0 to {stage}-{})",
            count - 1
        );
        let commits = Arc::new(GroupCommits {
            consumer: consumer.clone(),
            group: group.clone(),
            topic,
            direct,
            transactions: Mutex::default(),
        });
        Ok(GroupMembership {
            consumer,
            leave_timeout: cluster.handover_timeout + Duration::from_secs(10),
            commits,
        })
    }
}

impl Membership for GroupMembership {
    fn poll(&mut self, timeout: Duration) -> Result<(), String> {
        let polled = self.consumer.poll(timeout);
        // A fatal error (this member fenced by another with its
        // group.instance.id) may come as an event or only through the
        // error callback: the client keeps it either way.
        if let Some((code, why)) = self.consumer.client().fatal_error() {
            return Err(format!(
                "the group failed: {why} ({code}); another worker may run with the same --instance-id"
            ));
        }
        match polled {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => {
                tracing::warn!("worker: the group: {e}");
                Ok(())
            }
        }
    }

    fn leave(&mut self) -> Result<(), String> {
        self.consumer.unsubscribe();
        let deadline = Instant::now() + self.leave_timeout;
        while Instant::now() < deadline {
            let _ = self.consumer.poll(Duration::from_millis(50));
            match self.consumer.assignment() {
                Ok(a) if a.count() == 0 => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(format!("leaving the group: {e}")),
            }
        }
        Err("leaving the group took longer than handover_timeout".into())
    }

    fn commits(&self) -> Arc<dyn StageCommits> {
        self.commits.clone()
    }
}

/// Creates the `what` topic `topic` (lease or repartition) with `count`
/// partitions and the topic settings `config` (its replication the
/// cluster's default), unless it exists.
fn create_topic(
    client: &ClientSettings,
    topic: &str,
    count: i32,
    what: &str,
    config: &[(&str, &str)],
) -> Result<(), String> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::types::RDKafkaErrorCode;
    let admin: AdminClient<Context> = client
        .config("worker-admin", &[])
        .create_with_context(Context::new("worker".into()))
        .map_err(|e| format!("cannot create a Kafka admin client: {e}"))?;
    let mut new = NewTopic::new(topic, count, TopicReplication::Fixed(-1));
    for (key, value) in config {
        new = new.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(super::client::TIMEOUT));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let created = runtime
        .block_on(admin.create_topics(&[new], &options))
        .map_err(|e| {
            format!(
                "cannot create the {what} topic `{topic}` at {}: {e}",
                client.brokers
            )
        })?;
    for result in created {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => {
                return Err(format!(
                    "cannot create the {what} topic `{t}` at {}: {e}; create it with {count} partition(s), or allow this client to",
                    client.brokers
                ));
            }
        }
    }
    Ok(())
}

/// This machine's name, for the worker's client id (`weir-worker-<host>-<pid>`),
/// which `weir workers` and Kafka's tools show.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commit points read back: `weir:<n>` names checkpoint n; a partition
    /// with no committed offset has none; an offset another consumer
    /// committed is an error naming the group.
    #[test]
    fn commit_points_are_read_from_the_offsets_metadata() {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset("t", 0, Offset::Offset(40))
            .unwrap();
        list.add_partition("t", 2);
        let mut e = list.find_partition("t", 0).unwrap();
        e.set_metadata("weir:17");
        list.add_partition_offset("t", 3, Offset::Offset(0))
            .unwrap();
        list.find_partition("t", 3).unwrap().set_metadata("weir:");
        assert_eq!(
            commit_points(&list, "g", "t", 4).unwrap(),
            [Some(17), None, None, None]
        );
        list.add_partition_offset("t", 1, Offset::Offset(5))
            .unwrap();
        let err = commit_points(&list, "g", "t", 3).unwrap_err();
        assert!(
            err.contains("group `g` holds an offset of partition 1"),
            "{err}"
        );
    }
}
