//! The NATS JetStream connectors: a replayable source that reads a stream
//! by sequence ([`source`]) and an exactly-once sink that publishes with
//! message ids JetStream deduplicates ([`sink`]), over one connection
//! module (`connection`).
//!
//! Delivery guarantees:
//! - Source: the checkpoint records the next stream sequence to read, so a
//!   restore reads exactly the messages after those the checkpoint saw.
//! - Sink: records are staged with their checkpoint (`super::staged`) and
//!   published after it completes, each with the message id
//!   `<job>/<sink>/<checkpoint>/<position>`; a crash between the checkpoint
//!   and the server's acknowledgements republishes the same ids, which the
//!   stream drops as duplicates while they are within its duplicate window
//!   (`duplicate_window`, two minutes by default). Each message names its
//!   predecessor in the epoch (`ordered`), so a dropped connection never
//!   leaves the stream holding an epoch's messages out of order.

mod connection;
mod ordered;
pub mod read_back;
pub mod sink;
pub mod source;

pub use sink::SINK;
pub use source::SOURCE;
