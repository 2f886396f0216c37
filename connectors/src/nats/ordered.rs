//! Publishing one staged epoch so that its stream stores the messages in
//! the epoch's order, whatever a dropped connection loses in transit.
//!
//! Messages are pipelined: up to [`IN_FLIGHT`] await their
//! acknowledgement, which is awaited oldest first. Each message *i > 0* of
//! epoch *n* carries `Nats-Expected-Last-Msg-Id: <prefix>/<n>/<i-1>`, so
//! JetStream stores it only right after its predecessor. When a
//! connection drops, the messages in transit are lost and the client
//! sends the ones it buffered once it has reconnected: those are refused
//! instead of being stored ahead of the lost ones. The first lost
//! message's acknowledgement then fails, the epoch fails, and the restore
//! publishes it again from its start (what is already stored dropped by
//! message id, stored messages being a prefix of the epoch).
//!
//! A refusal of message *i* whose predecessor was acknowledged means the
//! stream's last message id is not *i-1*'s although *i-1* is stored:
//! another publisher stored a message with an id since, or the server
//! lost track of its last id in a restart. The rest of the epoch is then
//! published one message at a time, each once the previous one is stored,
//! which keeps the order without the header.

use std::collections::VecDeque;

use async_nats::jetstream::Context;
use async_nats::jetstream::context::{PublishAckFuture, PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::{HeaderMap, Subject};
use bytes::Bytes;

/// Publishes awaiting their acknowledgement, at most.
pub(super) const IN_FLIGHT: usize = 4096;

/// One message of the epoch, kept while unacknowledged to publish it again.
/// Subject and payload are reference-counted: keeping them copies nothing.
struct Message {
    position: u64,
    subject: Subject,
    payload: Bytes,
    /// Its own headers (`metadata = { headers = ... }`), if any.
    headers: Option<HeaderMap>,
}

impl Message {
    /// A publish of it, before the ids the epoch adds.
    fn build(&self) -> PublishMessage {
        let build = PublishMessage::build().payload(self.payload.clone());
        match &self.headers {
            Some(headers) => build.headers(headers.clone()),
            None => build,
        }
    }
}

/// The publishing of one epoch, message by message in order.
pub(super) struct OrderedEpoch {
    jetstream: Context,
    /// The sink's id, for the log.
    sink: String,
    /// `<job>/<sink>/<epoch>/`, the start of the epoch's message ids.
    ids: String,
    /// The position of the next message.
    next: u64,
    /// The id of the last message published chained: the next one's
    /// expected last id.
    last_id: Option<String>,
    /// Publishes not yet acknowledged, oldest first.
    pending: VecDeque<(Message, PublishAckFuture)>,
    /// Whether messages name their predecessor; false once a refusal
    /// showed another publisher's message between two of ours.
    chained: bool,
}

impl OrderedEpoch {
    /// Starts epoch `epoch` of the sink whose message ids start with
    /// `prefix` (`<job>/<sink>`).
    pub(super) fn new(jetstream: Context, sink: &str, prefix: &str, epoch: u64) -> OrderedEpoch {
        OrderedEpoch {
            jetstream,
            sink: sink.to_owned(),
            ids: format!("{prefix}/{epoch}/"),
            next: 0,
            last_id: None,
            pending: VecDeque::new(),
            chained: true,
        }
    }

    fn id(&self, position: u64) -> String {
        format!("{}{position}", self.ids)
    }

    /// Publishes the epoch's next message, with `headers` of its own. The
    /// error says what failed.
    pub(super) async fn publish(
        &mut self,
        subject: String,
        payload: Bytes,
        headers: Option<HeaderMap>,
    ) -> Result<(), String> {
        let message = Message {
            position: self.next,
            subject: Subject::from(subject),
            payload,
            headers,
        };
        self.next += 1;
        if !self.chained {
            return self.publish_and_wait(message).await;
        }
        let id = self.id(message.position);
        let mut build = message.build().message_id(&id);
        if let Some(last) = self.last_id.replace(id) {
            build = build.expected_last_message_id(last);
        }
        let ack = self.send(&message, build).await?;
        self.pending.push_back((message, ack));
        if self.pending.len() >= IN_FLIGHT {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// Waits until every message is stored; returns how many the epoch has.
    pub(super) async fn finish(mut self) -> Result<u64, String> {
        while !self.pending.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(self.next)
    }

    async fn send(
        &self,
        message: &Message,
        build: PublishMessage,
    ) -> Result<PublishAckFuture, String> {
        self.jetstream
            .send_publish(message.subject.clone(), build)
            .await
            .map_err(|e| format!("publishing failed: {e}"))
    }

    /// Publishes `message` without naming its predecessor and waits until it
    /// is stored.
    async fn publish_and_wait(&self, message: Message) -> Result<(), String> {
        let build = message.build().message_id(self.id(message.position));
        let ack = self.send(&message, build).await?;
        ack.await.map(drop).map_err(no_ack)
    }

    /// Waits for the oldest publish's acknowledgement. Every older one was
    /// acknowledged: a refusal for a wrong last id is another publisher's
    /// doing, and the rest of the epoch goes one message at a time.
    async fn settle_oldest(&mut self) -> Result<(), String> {
        let Some((message, ack)) = self.pending.pop_front() else {
            return Ok(());
        };
        match ack.await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == PublishErrorKind::WrongLastMessageId => {
                self.unchain(message).await
            }
            Err(e) => Err(no_ack(e)),
        }
    }

    /// Publishes `refused` and every pending message again, one at a time.
    async fn unchain(&mut self, refused: Message) -> Result<(), String> {
        tracing::warn!(
            "sink `{}`: the stream refused message {} as not following {}, which it stored: \
             another publisher writes to the stream; publishing the rest of the epoch one message at a time",
            self.sink,
            self.id(refused.position),
            self.id(refused.position.saturating_sub(1)),
        );
        self.chained = false;
        let mut again = vec![refused];
        // Each of them named a refused predecessor, so is refused too; a
        // failure of another kind fails the epoch as it would have.
        for (message, ack) in std::mem::take(&mut self.pending) {
            match ack.await {
                Err(e) if e.kind() != PublishErrorKind::WrongLastMessageId => {
                    return Err(no_ack(e));
                }
                _ => again.push(message),
            }
        }
        for message in again {
            self.publish_and_wait(message).await?;
        }
        Ok(())
    }
}

fn no_ack(e: PublishError) -> String {
    format!("no acknowledgement: {e}")
}
