//! The `timers` interface: the instance's watermark, the host's clock, and
//! its host-owned [`Timers`](crate::keyed::timers::Timers) in the
//! store data.
//!
//! Invariants:
//! - Timers are registered and deleted only where state may be written
//!   (`check_write`), with keys within `max_key_bytes`; their bytes count
//!   towards `max_state_bytes` with the keyed state's.
//! - The watermark a plugin reads is the instance's, as of the batch or
//!   timers being processed: it only grows.

use super::shown;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::keyed::timers::{Domain, Timers};
use crate::wasm::instance_state::InstanceState;
use crate::wasm::limiter::LimitExceeded;
use crate::wit::timers::{self, TimeDomain};

impl From<TimeDomain> for Domain {
    fn from(d: TimeDomain) -> Self {
        match d {
            TimeDomain::EventTime => Domain::EventTime,
            TimeDomain::ProcessingTime => Domain::ProcessingTime,
        }
    }
}

impl From<Domain> for TimeDomain {
    fn from(d: Domain) -> Self {
        match d {
            Domain::EventTime => TimeDomain::EventTime,
            Domain::ProcessingTime => TimeDomain::ProcessingTime,
        }
    }
}

/// The host's wall clock, milliseconds since the Unix epoch.
pub(crate) fn now_millis() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

impl InstanceState {
    /// Checks that a timer of `key` may be registered: state may be
    /// written, the key is within `max_key_bytes`, and the timer keeps the
    /// state within `max_state_bytes`.
    fn check_new_timer(&self, key: &[u8]) -> wasmtime::Result<()> {
        self.check_write()?;
        self.check_key(key)?;
        let after = self.state.bytes() + self.timers.bytes() + Timers::cost(key);
        LimitExceeded::check_bytes(
            "host state size (keyed state and timers)",
            "max_state_bytes",
            self.limits.max_state_bytes,
            after,
        )
    }
}

impl timers::Host for InstanceState {
    fn current_watermark(&mut self) -> wasmtime::Result<Option<i64>> {
        let w = self.timers.watermark();
        self.trace(|| format!("timers.current-watermark -> {w:?}"));
        Ok(w)
    }

    fn processing_time(&mut self) -> wasmtime::Result<i64> {
        let now = self.clock.unwrap_or_else(now_millis);
        self.trace(|| format!("timers.processing-time -> {now}"));
        Ok(now)
    }

    fn register_timer(
        &mut self,
        key: Vec<u8>,
        domain: TimeDomain,
        time: i64,
    ) -> wasmtime::Result<()> {
        self.check_new_timer(&key)?;
        let d = Domain::from(domain).name();
        self.trace(|| format!("timers.register-timer {} {d} {time}", shown(&key)));
        self.timers.register(domain.into(), time, &key);
        Ok(())
    }

    fn delete_timer(
        &mut self,
        key: Vec<u8>,
        domain: TimeDomain,
        time: i64,
    ) -> wasmtime::Result<()> {
        self.check_write()?;
        let d = Domain::from(domain).name();
        self.trace(|| format!("timers.delete-timer {} {d} {time}", shown(&key)));
        self.timers.delete(domain.into(), time, &key);
        Ok(())
    }
}
