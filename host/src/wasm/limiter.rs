//! Limit enforcement for every plugin instance, by the operator's
//! [`Limits`] (configured in `config::limits`): the [`LimitExceeded`] error
//! raised when a limit is hit, the wasmtime [`ResourceLimiter`] that caps
//! linear memory, tables and instance counts, the mapping of wasmtime's own
//! count-limit errors, and the wasm stack size.
//!
//! See `SECURITY.md` in the repository for the threat model and what is
//! enforced.
//!
//! Invariants:
//! - Limits trap; they never panic. A host function, the resource limiter
//!   or the call deadline that hits a limit returns a [`LimitExceeded`] as a
//!   wasmtime error, which traps the call; `error.rs` turns it into
//!   [`InstanceError::Limit`](super::InstanceError::Limit).
//! - Every limit a plugin can hit is reported as a [`LimitExceeded`] naming
//!   the job-file key of the limit and its configured value.

use wasmtime::ResourceLimiter;

use crate::config::{LimitValue, Limits};

/// The stack a wasm call may use, bytes (wasmtime's default, set
/// explicitly so errors can name it). Not configurable per operator.
pub const WASM_STACK: usize = 512 << 10;

/// Most bytes the host allocates for what it copies out of the plugin in
/// one call (wasmtime's "hostcall fuel": the lists and strings of one
/// import's arguments, or of one export's results such as a snapshot):
/// twice `limits.memory`. A guest cannot hand over more distinct bytes than
/// its memory holds, and the host's form of a list of records is at most
/// about twice the guest's, so any honest copy fits; lists that alias the
/// same guest bytes many times over are stopped at this bound.
///
/// ```
/// let limits = weir::config::Limits { memory: 512 << 20, ..Default::default() };
/// assert_eq!(weir::wasm::copy_budget(&limits), 1 << 30);
/// ```
pub fn copy_budget(limits: &Limits) -> usize {
    limits.memory.saturating_mul(2)
}

/// The job-file key [`copy_budget`] follows, as a [`LimitExceeded::key`].
const COPY_BUDGET_KEY: &str = "twice limits.memory";

/// A limit a plugin exceeded. Host functions, the resource limiter and the
/// call deadline raise it as a trap; it reaches the user as
/// [`InstanceError::Limit`](crate::InstanceError::Limit).
///
/// ```
/// use weir::config::LimitValue;
/// use weir::wasm::LimitExceeded;
/// let e = LimitExceeded::new("state value size", "max_value_bytes",
///     LimitValue::Bytes(16 << 20), Some(LimitValue::Bytes(20 << 20)));
/// assert_eq!(e.to_string(),
///     "state value size (20MiB) exceeds limits.max_value_bytes = 16MiB");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    /// What was measured, e.g. `state value size` or `call time`.
    pub what: &'static str,
    /// The job-file key of the limit in the operator's `limits` table, e.g.
    /// `max_value_bytes` or `call_timeout` (or a description with spaces for a
    /// limit that is not per operator).
    pub key: &'static str,
    /// The configured value.
    pub limit: LimitValue,
    /// What the plugin tried, when known.
    pub actual: Option<LimitValue>,
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)?;
        if let Some(actual) = self.actual {
            write!(f, " ({actual})")?;
        }
        // A key with a space describes a limit that is not in `limits`.
        let prefix = if self.key.contains(' ') {
            ""
        } else {
            "limits."
        };
        write!(f, " exceeds {prefix}{} = {}", self.key, self.limit)
    }
}

impl std::error::Error for LimitExceeded {}

impl LimitExceeded {
    /// A limit error.
    pub fn new(
        what: &'static str,
        key: &'static str,
        limit: LimitValue,
        actual: Option<LimitValue>,
    ) -> Self {
        LimitExceeded {
            what,
            key,
            limit,
            actual,
        }
    }

    /// The call outlived its `call_timeout`.
    pub(super) fn call_time(limits: &Limits) -> Self {
        LimitExceeded::new(
            "call time",
            "call_timeout",
            LimitValue::Time(limits.call_timeout),
            None,
        )
    }

    /// One call copied more out of the plugin than [`copy_budget`].
    pub(super) fn copy_budget(limits: &Limits) -> Self {
        LimitExceeded::new(
            "data copied out of the plugin in one call",
            COPY_BUDGET_KEY,
            LimitValue::Bytes(copy_budget(limits) as u64),
            None,
        )
    }

    /// `Err(LimitExceeded)` when `actual > limit` bytes, as a wasmtime trap error.
    pub(super) fn check_bytes(
        what: &'static str,
        key: &'static str,
        limit: usize,
        actual: usize,
    ) -> wasmtime::Result<()> {
        Self::check(what, key, limit, actual, LimitValue::Bytes)
    }

    /// Like [`check_bytes`](Self::check_bytes) for counts.
    pub(super) fn check_count(
        what: &'static str,
        key: &'static str,
        limit: usize,
        actual: usize,
    ) -> wasmtime::Result<()> {
        Self::check(what, key, limit, actual, LimitValue::Count)
    }

    /// `Err(LimitExceeded)` when `actual > limit`, both shown in `unit`.
    fn check(
        what: &'static str,
        key: &'static str,
        limit: usize,
        actual: usize,
        unit: fn(u64) -> LimitValue,
    ) -> wasmtime::Result<()> {
        if actual > limit {
            return Err(wasmtime::Error::new(LimitExceeded::new(
                what,
                key,
                unit(limit as u64),
                Some(unit(actual as u64)),
            )));
        }
        Ok(())
    }
}

/// Linear memory, table and instance caps of one `Store`, from its
/// [`Limits`]. Memory is counted over all linear memories of the store.
#[derive(Debug, Clone)]
pub(super) struct Limiter {
    memory: usize,
    table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    /// Bytes of linear memory allocated so far.
    used: usize,
    /// The growth last allowed, undone if it then fails.
    pending: usize,
}

impl Limiter {
    pub(super) fn new(limits: &Limits) -> Self {
        Limiter {
            memory: limits.memory,
            table_elements: limits.table_elements,
            instances: limits.instances,
            tables: limits.tables,
            memories: limits.memories,
            used: 0,
            pending: 0,
        }
    }

    /// Bytes of linear memory in use.
    pub(super) fn memory_used(&self) -> usize {
        self.used
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current);
        let total = self.used.saturating_add(grow);
        if total > self.memory {
            return Err(wasmtime::Error::new(LimitExceeded::new(
                "linear memory",
                "memory",
                LimitValue::Bytes(self.memory as u64),
                Some(LimitValue::Bytes(total as u64)),
            )));
        }
        self.used = total;
        self.pending = grow;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used -= std::mem::take(&mut self.pending);
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Err(wasmtime::Error::new(LimitExceeded::new(
                "table size",
                "table_elements",
                LimitValue::Count(self.table_elements as u64),
                Some(LimitValue::Count(desired as u64)),
            )));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}

/// Maps wasmtime's own count-limit error ("resource limit exceeded: instance
/// count too high at 65") to a [`LimitExceeded`].
pub(super) fn count_limit(message: &str, limits: &Limits) -> Option<LimitExceeded> {
    let rest = message.split("resource limit exceeded: ").nth(1)?;
    let (what, key, limit) = if rest.starts_with("instance count") {
        ("core instances", "instances", limits.instances)
    } else if rest.starts_with("memory count") {
        ("linear memories", "memories", limits.memories)
    } else if rest.starts_with("table count") {
        ("tables", "tables", limits.tables)
    } else {
        return None;
    };
    let actual = rest
        .rsplit(' ')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .map(LimitValue::Count);
    Some(LimitExceeded::new(
        what,
        key,
        LimitValue::Count(limit as u64),
        actual,
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn limit_messages_name_the_key_and_value() {
        let e = LimitExceeded::new(
            "call time",
            "call_timeout",
            LimitValue::Time(Duration::from_millis(200)),
            None,
        );
        assert_eq!(
            e.to_string(),
            "call time exceeds limits.call_timeout = 200ms"
        );
        let e = count_limit(
            "resource limit exceeded: instance count too high at 65",
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(
            e.to_string(),
            "core instances (65) exceeds limits.instances = 64"
        );
        assert!(count_limit("something else", &Limits::default()).is_none());
    }

    #[test]
    fn the_limiter_counts_all_memories_and_undoes_failed_growth() {
        let limits = Limits {
            memory: 4 << 16,
            table_elements: 10,
            ..Limits::default()
        };
        let mut l = Limiter::new(&limits);
        assert!(l.memory_growing(0, 2 << 16, None).unwrap());
        assert!(l.memory_growing(0, 1 << 16, None).unwrap());
        l.memory_grow_failed(wasmtime::format_err!("no")).unwrap();
        assert_eq!(l.memory_used(), 2 << 16);
        assert!(l.memory_growing(2 << 16, 4 << 16, None).unwrap());
        let err = l.memory_growing(0, 1 << 16, None).unwrap_err();
        let e = err.downcast_ref::<LimitExceeded>().unwrap();
        assert_eq!(
            e.to_string(),
            "linear memory (320KiB) exceeds limits.memory = 256KiB"
        );
        assert!(l.table_growing(0, 10, None).unwrap());
        assert!(l.table_growing(10, 11, None).is_err());
    }
}
