//! Weir's connectors to servers: a NATS JetStream source and sink
//! ([`nats`]), a PostgreSQL sink and change-data-capture source
//! ([`postgres`]) and a Kafka source and sink
//! ([`kafka`]), each one module that reads its own settings and implements
//! the runtime's contracts ([`weir::connectors`]).
//!
//! The runtime crate links no server client; a program that runs jobs
//! hands [`registry`] (the built-in types and these) to the job-file
//! parser.

#![warn(missing_docs)]

pub mod kafka;
pub mod nats;
pub mod postgres;

use weir::connectors::Registry;

/// Every source and sink type: the runtime's built-in ones, then NATS,
/// PostgreSQL and Kafka, in the order an unknown-type message lists them.
pub fn registry() -> Registry {
    Registry::builtin()
        .with_source(&nats::SOURCE)
        .with_source(&kafka::SOURCE)
        .with_source(&postgres::cdc::SOURCE)
        .with_sink(&nats::SINK)
        .with_sink(&postgres::SINK)
        .with_sink(&kafka::SINK)
}

#[cfg(test)]
mod tests {
    /// Every key a type declares is one its settings reader reads.
    #[test]
    fn declared_keys_are_the_parsed_ones() {
        super::registry().check_keys().unwrap();
    }

    #[test]
    fn every_type_is_registered_once_in_message_order() {
        let registry = super::registry();
        let names = |n: Vec<&str>| n.join(", ");
        let sources = registry.sources().iter().map(|t| t.name).collect();
        let sinks = registry.sinks().iter().map(|t| t.name).collect();
        assert_eq!(
            names(sources),
            "file, generator, stdin, nats, kafka, postgres-cdc"
        );
        assert_eq!(names(sinks), "file, stdout, nats, postgres, kafka");
    }
}
