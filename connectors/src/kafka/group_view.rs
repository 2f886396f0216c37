//! What `weir workers` shows of a stage's group ([`describe`]): its
//! members and their assignments, read from the group coordinator without
//! joining the group, with the anchor topic's ends and each task's commit
//! point.

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use weir::cluster::WorkerJob;

use super::client::{Context, partitions};
use super::group::{anchor, commit_points, probe_in};

/// A member of a job's group, as the group coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Member {
    /// Its client id (`weir-worker-<host>-<pid>`).
    pub client_id: String,
    /// The address it connects from.
    pub host: String,
    /// The anchor partitions assigned to it: its tasks.
    pub partitions: Vec<i32>,
}

/// What the cluster says about a job's workers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupView {
    /// The group.
    pub group: String,
    /// Its state (`Stable`, `PreparingRebalance`, `Empty`, ...).
    pub state: String,
    /// The anchor topic.
    pub topic: String,
    /// The end (high-water mark) of each of the anchor's partitions, by
    /// partition number: task *p*'s input ends before `ends[p]` for now.
    pub ends: Vec<i64>,
    /// The checkpoint each task committed (its commit point), by
    /// partition number: what a restore of task *p* takes.
    pub committed: Vec<Option<u64>>,
    /// The members.
    pub members: Vec<Member>,
}

/// Describes the group of `job`'s stage `stage`: its members and their
/// assignments, and the stage's anchor topic's ends.
pub fn describe(job: &WorkerJob, stage: u32) -> Result<GroupView, String> {
    let (client, topic) = anchor(job, stage)?;
    let group = job.stages[stage as usize].group.clone();
    let consumer = probe_in(&client, &group)?;
    let count = partitions(&consumer, &client.brokers, &topic)?.len() as i32;
    let mut ends = Vec::new();
    for p in 0..count {
        let (_, high) = consumer
            .fetch_watermarks(&topic, p, super::client::TIMEOUT)
            .map_err(|e| format!("cannot read the offsets of partition {p} of `{topic}`: {e}"))?;
        ends.push(high);
    }
    let committed = committed_points(&consumer, &group, &topic, count)?;
    let list = consumer
        .fetch_group_list(Some(&group), super::client::TIMEOUT)
        .map_err(|e| format!("cannot describe group `{group}` at {}: {e}", client.brokers))?;
    let info = list.groups().iter().find(|g| g.name() == group);
    let (state, members) = match info {
        None => ("Dead".to_owned(), Vec::new()),
        Some(info) => {
            let mut members = Vec::new();
            for m in info.members() {
                let assigned = m.assignment().map(assigned_partitions).transpose()?;
                let mut partitions: Vec<i32> = (assigned.unwrap_or_default().into_iter())
                    .filter(|(t, _)| *t == topic)
                    .map(|(_, p)| p)
                    .collect();
                partitions.sort_unstable();
                members.push(Member {
                    client_id: m.client_id().to_owned(),
                    host: m.client_host().trim_start_matches('/').to_owned(),
                    partitions,
                });
            }
            members.sort_by(|a, b| a.client_id.cmp(&b.client_id));
            (info.state().to_owned(), members)
        }
    };
    Ok(GroupView {
        group,
        state,
        topic,
        ends,
        committed,
        members,
    })
}

/// The checkpoint each of partitions `0..count` of `topic` committed in
/// group `group`, read without joining it.
fn committed_points(
    reader: &BaseConsumer<Context>,
    group: &str,
    topic: &str,
    count: i32,
) -> Result<Vec<Option<u64>>, String> {
    let mut list = TopicPartitionList::new();
    for p in 0..count {
        list.add_partition(topic, p);
    }
    let read = (reader.committed_offsets(list, super::client::TIMEOUT))
        .map_err(|e| format!("cannot read the committed offsets of group `{group}`: {e}"))?;
    commit_points(&read, group, topic, count)
}

/// The (topic, partition) pairs of a consumer protocol assignment: a
/// version (i16), then topics (an i32 count; each a string of an i16
/// length, then an i32 count of i32 partitions), big-endian; what follows
/// (user data) is not read.
fn assigned_partitions(bytes: &[u8]) -> Result<Vec<(String, i32)>, String> {
    let bad = || {
        format!(
            "a member's assignment is not the consumer protocol's ({} bytes)",
            bytes.len()
        )
    };
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let slice = bytes.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(slice)
    };
    let _version = i16::from_be_bytes(take(2)?.try_into().unwrap());
    let topics = i32::from_be_bytes(take(4)?.try_into().unwrap());
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let len = i16::from_be_bytes(take(2)?.try_into().unwrap()).max(0) as usize;
        let topic = String::from_utf8(take(len)?.to_vec()).map_err(|_| bad())?;
        let count = i32::from_be_bytes(take(4)?.try_into().unwrap());
        for _ in 0..count.max(0) {
            let p = i32::from_be_bytes(take(4)?.try_into().unwrap());
            out.push((topic.clone(), p));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An assignment as a Java or librdkafka member encodes it: version 1,
    /// two topics, user data after.
    #[test]
    fn assignments_decode_to_topic_partitions() {
        let mut b = Vec::new();
        b.extend(1i16.to_be_bytes());
        b.extend(2i32.to_be_bytes());
        for (topic, parts) in [("words", &[0i32, 3][..]), ("x", &[1][..])] {
            b.extend((topic.len() as i16).to_be_bytes());
            b.extend(topic.as_bytes());
            b.extend((parts.len() as i32).to_be_bytes());
            for p in parts {
                b.extend(p.to_be_bytes());
            }
        }
        b.extend((-1i32).to_be_bytes());
        assert_eq!(
            assigned_partitions(&b).unwrap(),
            [("words".into(), 0), ("words".into(), 3), ("x".into(), 1)]
        );
        let err = assigned_partitions(&b[..9]).unwrap_err();
        assert!(err.contains("not the consumer protocol's"), "{err}");
    }
}
