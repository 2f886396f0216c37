//! [`Purger`]: deletes a repartition topic's records that no checkpoint a
//! restore may pick will read again (Kafka's `DeleteRecords`), as Kafka
//! Streams purges its repartition topics: their retention is off, so only
//! this bounds them.
//!
//! Invariants:
//! - Records are deleted only below offsets a source was told are released
//!   (the oldest checkpoint a restore may still pick reads from there on).
//! - Deleting runs on a thread of its own, never the source's; requests
//!   that pile up while one runs are merged into the newest, and a failure
//!   is logged and retried with the next request.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions};

use super::client::{ClientSettings, Context, TIMEOUT};

/// Deletes a source's released records in the background.
pub struct Purger {
    requests: Option<Sender<TopicPartitionList>>,
    thread: Option<JoinHandle<()>>,
}

impl Purger {
    /// The purger of source `id`, on `client`'s cluster.
    pub fn start(client: &ClientSettings, id: &str) -> Result<Purger, String> {
        let admin: AdminClient<Context> = client
            .config(id, &[])
            .create_with_context(Context::new(format!("source `{id}`")))
            .map_err(|e| format!("cannot create a Kafka admin client: {e}"))?;
        let (requests, pending) = channel();
        let source = id.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("purge-{id}"))
            .spawn(move || purge(&admin, &source, &pending))
            .map_err(|e| format!("cannot start its purge thread: {e}"))?;
        Ok(Purger {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Deletes the records below each partition's offset in `below`.
    pub fn below(&self, below: TopicPartitionList) {
        if let Some(requests) = &self.requests {
            let _ = requests.send(below);
        }
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The purge thread: deletes up to the newest of the pending requests,
/// until the purger is dropped.
fn purge(admin: &AdminClient<Context>, source: &str, pending: &Receiver<TopicPartitionList>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::warn!("source `{source}`: cannot delete released records: {e}");
            return;
        }
    };
    let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    while let Ok(mut below) = pending.recv() {
        while let Ok(newer) = pending.try_recv() {
            below = newer;
        }
        match runtime.block_on(admin.delete_records(&below, &options)) {
            Ok(done) => {
                for e in done.elements().iter().filter(|e| e.error().is_err()) {
                    tracing::warn!(
                        "source `{source}`: deleting the released records of partition {} of `{}`: {:?}",
                        e.partition(),
                        e.topic(),
                        e.error()
                    );
                }
            }
            Err(e) => tracing::warn!("source `{source}`: deleting released records: {e}"),
        }
    }
}
