//! Kafka for tests: [`Kafka`], a private one-node Apache Kafka broker
//! (KRaft mode, the broker's own jars from Maven Central, started by
//! `scripts/services.sh kafka-run` in a temporary folder on free loopback
//! ports), and [`MockKafka`], librdkafka's mock cluster hosted in the test
//! process, kept for the faults it injects that a real broker cannot be
//! made to produce on demand (a broker refusing requests). Both hand out
//! [`Clients`]: the test's producers, `read_committed` and
//! `read_uncommitted` readers and offset lookups.
//!
//! Exactly-once checks need the real broker: the mock shows the messages
//! of aborted transactions to `read_committed` readers and does not keep
//! offsets committed in a transaction.

mod broker;
mod clients;

pub use broker::Kafka;
pub use clients::{Clients, KafkaMessage, MockKafka, Outgoing, OutgoingHeaders, values_text};
