//! The replication connection: a session of the `pgwire-replication`
//! client on a runtime of its own, opened gated (it runs replication
//! commands, such as making a slot with an exported snapshot, before it
//! streams), then streaming the slot's changes as [`Event`]s.
//!
//! Invariant: the only position reported to the server as flushed is the
//! one [`Stream::confirm`] was given (initially the start position), so
//! the slot never lets go of changes the source may still need.

use std::time::Duration;

use bytes::Bytes;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
use postgres::config::Host;

use super::SESSION_OPTIONS;

/// What the stream brings.
#[derive(Debug)]
pub(super) enum Event {
    /// A transaction starts; it commits at `final_lsn`, at `commit_time`
    /// (µs since 2000-01-01).
    Begin { final_lsn: u64, commit_time: i64 },
    /// A `pgoutput` message of the transaction (module `pgoutput`).
    Data(Bytes),
    /// The transaction ended; the stream resumes after it at `end_lsn`.
    Commit { end_lsn: u64 },
    /// The server has sent everything up to `wal_end`.
    Idle { wal_end: u64 },
    /// A logical message (`pg_logical_emit_message`) outside transactions,
    /// at `lsn`.
    Message {
        lsn: u64,
        prefix: String,
        content: Bytes,
    },
}

/// A gated or streaming replication session.
pub(super) struct Stream {
    client: ReplicationClient,
    runtime: tokio::runtime::Runtime,
}

impl Stream {
    /// Connects to the server of `config` for slot `slot` and publication
    /// `publication`, gated: nothing streams before [`start`](Self::start),
    /// which streams from `start` (0: the slot's confirmed position).
    pub(super) fn connect(
        config: &postgres::Config,
        slot: &str,
        publication: &str,
        start: u64,
    ) -> Result<Stream, String> {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(name)) => name.clone(),
            Some(Host::Unix(path)) => path.display().to_string(),
            None => (config.get_hostaddrs().first())
                .map(|a| a.to_string())
                .unwrap_or_else(|| "localhost".into()),
        };
        let password = (config.get_password())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let user = config.get_user().unwrap_or("postgres");
        let database = config.get_dbname().unwrap_or(user);
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let replication = ReplicationConfig::new(host, user, password, database, slot, publication)
            .with_port(port)
            .with_options(SESSION_OPTIONS)
            .with_application_name("weir")
            .with_start_lsn(Lsn::from_u64(start))
            .with_ack_lsn(Lsn::from_u64(start))
            .with_status_interval(Duration::from_secs(1))
            .with_wakeup_interval(Duration::from_secs(1));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-pg-replication")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the replication runtime: {e}"))?;
        let client = runtime
            .block_on(ReplicationClient::connect_gated(replication))
            .map_err(|e| format!("cannot open a replication connection: {e}"))?;
        Ok(Stream { client, runtime })
    }

    /// Runs a replication command or query before the stream starts; its
    /// rows as text (NULL as `None`).
    pub(super) fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
        let rows = self
            .runtime
            .block_on(self.client.simple_query(sql))
            .map_err(|e| e.to_string())?;
        Ok(rows
            .into_iter()
            .map(|row| {
                (row.into_iter())
                    .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
                    .collect()
            })
            .collect())
    }

    /// Starts streaming; returns once the server holds the slot for it.
    pub(super) fn start(&mut self) -> Result<(), String> {
        self.runtime
            .block_on(async {
                self.client.start().await?;
                self.client.wait_started().await
            })
            .map_err(|e| e.to_string())
    }

    /// The next event, waiting at most `wait`: `None` when none came.
    pub(super) fn next(&mut self, wait: Duration) -> Result<Option<Event>, String> {
        loop {
            let got = self
                .runtime
                .block_on(async { tokio::time::timeout(wait, self.client.recv()).await });
            let event = match got {
                Err(_) => return Ok(None),
                Ok(Err(e)) => return Err(e.to_string()),
                Ok(Ok(None)) => return Err("the server ended the replication stream".into()),
                Ok(Ok(Some(event))) => event,
            };
            return Ok(Some(match event {
                ReplicationEvent::Begin {
                    final_lsn,
                    commit_time_micros,
                    ..
                } => Event::Begin {
                    final_lsn: final_lsn.as_u64(),
                    commit_time: commit_time_micros,
                },
                ReplicationEvent::XLogData { data, .. } => Event::Data(data),
                ReplicationEvent::Commit { end_lsn, .. } => Event::Commit {
                    end_lsn: end_lsn.as_u64(),
                },
                ReplicationEvent::KeepAlive { wal_end, .. } => Event::Idle {
                    wal_end: wal_end.as_u64(),
                },
                ReplicationEvent::Message {
                    transactional: false,
                    lsn,
                    prefix,
                    content,
                } => Event::Message {
                    lsn: lsn.as_u64(),
                    prefix,
                    content,
                },
                // Transactional messages and a stop position the source
                // never sets.
                _ => continue,
            }));
        }
    }

    /// Reports everything before `lsn` as durably received: the server may
    /// drop it.
    pub(super) fn confirm(&self, lsn: u64) {
        self.client.update_applied_lsn(Lsn::from_u64(lsn));
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.client.abort();
    }
}
