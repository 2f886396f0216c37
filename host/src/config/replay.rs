//! The implicit sources that replay dead letters into operators
//! ([`crate::connectors::replay`]): the parser gives every operator whose
//! `on_error` sends dead letters to a sink one, `replay:<operator>`, whose
//! own bad records (queue lines that are no letter) go to the same sink,
//! and which sends one letter a batch.
//! [`Job::resolve_ports`] wires its output ports, one per input port of
//! the operator's plugin, into those ports.

use std::sync::Arc;

use super::{Job, SourceConfig, Upstream};
use crate::connectors::replay::{self, ReplayQueue};

impl Job {
    /// Adds the replay source of each operator with a dead-letter sink,
    /// after the job file's sources.
    pub(super) fn add_replays(&mut self) {
        let replays = self.operators.iter().filter_map(|op| {
            op.on_error.dead_letter_sink()?;
            Some(SourceConfig {
                id: replay::source_id(&op.id),
                kind: replay::KIND,
                connector: Arc::new(ReplayQueue {
                    operator: op.id.clone(),
                }),
                // One letter a batch: one that fails again names exactly
                // where it first came from (a batch names its lines only).
                batch_size: 1,
                rate: None,
                watermark: None,
                on_error: op.on_error.clone(),
                max_bad: None,
            })
        });
        let replays: Vec<SourceConfig> = replays.collect();
        self.sources.extend(replays);
    }

    /// The job without its replay sources (worker mode, which replays no
    /// dead letters), nor their dead-letter ports in sinks' inputs.
    pub fn without_replays(mut self) -> Job {
        let replays: Vec<String> = (self.sources.iter())
            .filter(|s| s.replays().is_some())
            .map(|s| s.id.clone())
            .collect();
        self.sources.retain(|s| s.replays().is_none());
        for sink in &mut self.sinks {
            sink.input.retain(|up| !replays.contains(&up.node));
        }
        self
    }

    /// The source replaying dead letters into `operator`, if it has one.
    pub fn replay_source(&self, operator: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.replays() == Some(operator))
    }

    /// The upstream feeding input port `port` of `operator` with its
    /// replayed dead letters, if it has a replay source.
    pub(super) fn replay_upstream(&self, operator: &str, port: &str) -> Option<Upstream> {
        let source = self.replay_source(operator)?;
        Some(Upstream {
            node: source.id.clone(),
            port: Some(port.to_owned()),
        })
    }
}

impl SourceConfig {
    /// The operator this source replays dead letters into, if it is a
    /// replay source.
    pub fn replays(&self) -> Option<&str> {
        let any = self.connector.as_ref() as &dyn std::any::Any;
        let queue = any.downcast_ref::<ReplayQueue>()?;
        Some(&queue.operator)
    }
}
