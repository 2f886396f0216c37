//! The `[cluster]` table: how `weir run --worker` processes of one job
//! share its work through a Kafka consumer group (`crate::cluster`).
//! Single-process runs ignore it.

use std::time::Duration;

use serde::Deserialize;
use toml::Table;

use crate::fields::{duration, from_table};

/// The `[cluster]` table, with its defaults when absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The consumer group the workers of the job join (`group`, default
    /// `weir-<job name>`); every worker of one job names the same.
    pub group: String,
    /// How long a worker giving a task up may take to checkpoint and stop
    /// it before the task is left to its next owner to restore
    /// (`handover_timeout`, default 30 s).
    pub handover_timeout: Duration,
    /// How long a worker may go silent before the group gives its tasks to
    /// the others (`session_timeout`, default 10 s; the broker bounds it,
    /// 6 s to 5 min by default).
    pub session_timeout: Duration,
    /// The Kafka cluster of the group (`brokers`) of a job that reads no
    /// Kafka topic (its NATS sources are one task, leased through a topic
    /// there); others use their anchor source's.
    pub brokers: Option<String>,
}

/// The `[cluster]` table (empty when absent) of job `name`.
pub(super) fn build_cluster(name: &str, table: Table) -> Result<ClusterConfig, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        group: Option<String>,
        handover_timeout: Option<String>,
        session_timeout: Option<String>,
        brokers: Option<String>,
    }
    let raw: Raw = from_table(table)?;
    let group = match raw.group {
        Some(g) if g.trim().is_empty() => {
            return Err("`group` is empty; name the workers' consumer group, or remove it".into());
        }
        Some(g) => g,
        None => format!("weir-{name}"),
    };
    let handover_timeout = duration("handover_timeout", raw.handover_timeout, "30s")?;
    let session_timeout = duration("session_timeout", raw.session_timeout, "10s")?;
    if session_timeout < Duration::from_secs(1) {
        return Err(format!(
            "`session_timeout` = {session_timeout:?} is too short; use at least \"1s\" (the broker's minimum is 6 s unless lowered)"
        ));
    }
    Ok(ClusterConfig {
        group,
        handover_timeout,
        session_timeout,
        brokers: raw.brokers.filter(|b| !b.trim().is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(text: &str) -> Result<ClusterConfig, String> {
        build_cluster("job", text.parse().unwrap())
    }

    #[test]
    fn defaults_and_settings() {
        let c = build("").unwrap();
        assert_eq!(c.group, "weir-job");
        assert_eq!(c.handover_timeout, Duration::from_secs(30));
        assert_eq!(c.session_timeout, Duration::from_secs(10));
        assert_eq!(c.brokers, None);
        let c =
            build("group = \"g\"\nhandover_timeout = \"5s\"\nsession_timeout = \"6s\"").unwrap();
        assert_eq!(
            (c.group.as_str(), c.handover_timeout, c.session_timeout),
            ("g", Duration::from_secs(5), Duration::from_secs(6))
        );
        assert!(
            build("group = \" \"")
                .unwrap_err()
                .contains("`group` is empty")
        );
        assert!(
            build("session_timeout = \"10ms\"")
                .unwrap_err()
                .contains("too short")
        );
        assert!(
            build("handover = \"1s\"")
                .unwrap_err()
                .contains("unknown field")
        );
    }
}
