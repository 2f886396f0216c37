//! The `log` interface: a plugin's log messages, sanitized, to the host log
//! with the operator's id.

use crate::wasm::guest_output::{MAX_MESSAGE, sanitize};
use crate::wasm::instance_state::InstanceState;
use crate::wit::log;

impl log::Host for InstanceState {
    fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        // The plugin's text: no forged log lines, no terminal escapes.
        let message = sanitize(&message, MAX_MESSAGE);
        self.trace(|| format!("log {level:?}: {message}"));
        let op = &self.label;
        match level {
            log::Level::Trace => tracing::trace!(operator = %op, "{message}"),
            log::Level::Debug => tracing::debug!(operator = %op, "{message}"),
            log::Level::Info => tracing::info!(operator = %op, "{message}"),
            log::Level::Warn => tracing::warn!(operator = %op, "{message}"),
            log::Level::Error => tracing::error!(operator = %op, "{message}"),
        }
        Ok(())
    }
}
