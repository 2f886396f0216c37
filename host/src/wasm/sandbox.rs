//! The sandbox around every plugin instance, enforcing the operator's
//! [`Limits`] and [`Grants`] (configured in `config::limits`): the
//! [`LimitExceeded`] error raised when a limit is hit, the
//! wasmtime [`ResourceLimiter`] that caps linear memory and tables, the WASI
//! context (an empty sandbox with deterministic clocks and randomness unless
//! granted), and the stream that sends a plugin's stdout and stderr to the
//! host log.
//!
//! See `SECURITY.md` in the repository for the threat model and what is
//! enforced.
//!
//! Invariants:
//! - Every limit a plugin can hit is reported as a [`LimitExceeded`] naming
//!   the job-file key of the limit and its configured value.
//! - Nothing a plugin does makes the host allocate more than a bounded amount
//!   per call: strings and lists it passes in live in its capped linear
//!   memory, and host replies (state reads) are capped by [`Limits::memory`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;

use crate::config::{Grants, LimitValue, Limits, format_size};
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

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

    /// `Err(LimitExceeded)` when `actual > limit`, as a wasmtime trap error.
    pub(crate) fn check_bytes(
        what: &'static str,
        key: &'static str,
        limit: usize,
        actual: usize,
    ) -> wasmtime::Result<()> {
        if actual > limit {
            return Err(wasmtime::Error::new(LimitExceeded::new(
                what,
                key,
                LimitValue::Bytes(limit as u64),
                Some(LimitValue::Bytes(actual as u64)),
            )));
        }
        Ok(())
    }

    /// Like [`check_bytes`](Self::check_bytes) for counts.
    pub(crate) fn check_count(
        what: &'static str,
        key: &'static str,
        limit: usize,
        actual: usize,
    ) -> wasmtime::Result<()> {
        if actual > limit {
            return Err(wasmtime::Error::new(LimitExceeded::new(
                what,
                key,
                LimitValue::Count(limit as u64),
                Some(LimitValue::Count(actual as u64)),
            )));
        }
        Ok(())
    }
}

/// Linear memory, table and instance caps of one `Store`, from its
/// [`Limits`]. Memory is counted over all linear memories of the store.
#[derive(Debug, Clone)]
pub(crate) struct Limiter {
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
    pub(crate) fn new(limits: &Limits) -> Self {
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
    pub(crate) fn memory_used(&self) -> usize {
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
pub(crate) fn count_limit(message: &str, limits: &Limits) -> Option<LimitExceeded> {
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

/// Escapes control characters (newlines, ANSI escapes) and cuts `text` to
/// about `max` bytes, so that text from a plugin cannot forge log lines or
/// break one-line error messages.
///
/// ```
/// assert_eq!(weir::wasm::instance::sanitize("a\nb\u{1b}[31m", 100), "a\\nb\\u{1b}[31m");
/// assert_eq!(weir::wasm::instance::sanitize("abcdef", 3), "abc… (6 bytes)");
/// ```
pub fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for (i, c) in text.char_indices() {
        if i >= max {
            out.push_str(&format!("… ({} bytes)", text.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Longest message from a plugin (log message, error, stdout line) kept, bytes.
pub(crate) const MAX_MESSAGE: usize = 4096;

/// Stderr lines of a call kept to explain a trap.
const STDERR_KEPT: usize = 8;

/// Most bytes of stdout plus stderr a plugin may write in one call; the rest
/// is dropped (with one warning).
pub const MAX_OUTPUT_PER_CALL: usize = 1 << 20;

/// The WASI context of an instance: no preopened directories, environment,
/// arguments or network; stdin closed; stdout and stderr to the host log;
/// fixed clocks and deterministic randomness unless granted.
pub(crate) fn wasi_ctx(grants: Grants, output: &GuestOutput) -> WasiCtx {
    let mut b = WasiCtxBuilder::new();
    b.stdout(output.stream(Stream::Stdout))
        .stderr(output.stream(Stream::Stderr))
        .max_random_size(1 << 20)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if !grants.clocks {
        b.wall_clock(FixedClock).monotonic_clock(FixedClock);
    }
    if !grants.random {
        b.secure_random(wasmtime_wasi::Deterministic::new(fixed_random_bytes()))
            .insecure_random(wasmtime_wasi::Deterministic::new(fixed_random_bytes()))
            .insecure_random_seed(0x5745_4952_5f53_4545_445f_5f5f_5f5f_5f5f);
    }
    b.build()
}

/// A clock that never moves: the wall clock reads the Unix epoch, the
/// monotonic clock 0.
struct FixedClock;

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        0
    }
}

/// 4 KiB of fixed pseudo-random bytes (splitmix64 from a constant seed), the
/// cycle the deterministic generators repeat.
fn fixed_random_bytes() -> Vec<u8> {
    let mut x: u64 = 0x5745_4952; // "WEIR"
    let mut out = Vec::with_capacity(4096);
    while out.len() < 4096 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out
}

/// A pollable for `wasi:clocks/monotonic-clock.subscribe-*`: ready at
/// `until` (real time), or at once.
struct Sleep {
    until: Option<tokio::time::Instant>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        if let Some(until) = self.until {
            tokio::time::sleep_until(until).await;
        }
    }
}

/// The pollable for a sleep of `nanos` requested by a plugin. Without the
/// clocks grant it is ready at once (time does not pass in the sandbox);
/// with it, it is ready after `nanos` but no later than `deadline`, so a
/// sleeping plugin cannot hold its thread past its call deadline.
pub(crate) fn subscribe_sleep(
    table: &mut ResourceTable,
    nanos: u64,
    granted: bool,
    deadline: Option<Instant>,
) -> wasmtime::Result<Resource<DynPollable>> {
    let until = granted.then(|| {
        let now = Instant::now();
        let mut until = now + Duration::from_nanos(nanos.min(u64::MAX / 2));
        if let Some(d) = deadline {
            until = until.min(d.max(now));
        }
        tokio::time::Instant::from_std(until)
    });
    let sleep = table.push(Sleep { until })?;
    subscribe(table, sleep)
}

/// Which output stream of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The stdout and stderr of one instance, logged line by line with the
/// operator's id. Shared by the streams WASI hands out.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    inner: Arc<Mutex<OutputState>>,
}

struct OutputState {
    label: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// The last stderr lines of the call (a guest panic message), for errors.
    last_stderr: Vec<String>,
    /// Bytes written in the current call.
    written: usize,
    suppressed: bool,
}

impl GuestOutput {
    pub(crate) fn new(label: &str) -> Self {
        GuestOutput {
            inner: Arc::new(Mutex::new(OutputState {
                label: label.to_string(),
                stdout: Vec::new(),
                stderr: Vec::new(),
                last_stderr: Vec::new(),
                written: 0,
                suppressed: false,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutputState> {
        // A poisoned lock only means a logging call panicked; the buffers are
        // still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stream(&self, which: Stream) -> LogStream {
        LogStream {
            output: self.clone(),
            which,
        }
    }

    /// Starts a call: resets the per-call output budget and the last stderr
    /// line.
    pub(crate) fn begin_call(&self) {
        let mut s = self.lock();
        s.written = 0;
        s.suppressed = false;
        s.last_stderr.clear();
    }

    /// Logs unfinished lines and returns what the call's stderr says about
    /// a failure, on one line: a Rust panic message (`panicked at FILE:
    /// MESSAGE`) when there is one, else the last stderr line.
    pub(crate) fn end_call(&self) -> Option<String> {
        let mut s = self.lock();
        for which in [Stream::Stdout, Stream::Stderr] {
            let rest = std::mem::take(s.buf(which));
            if !rest.is_empty() {
                s.line(which, &rest);
            }
        }
        let lines = &s.last_stderr;
        let summary = match lines.iter().rposition(|l| l.contains("panicked at")) {
            Some(i) => {
                let message = lines[i + 1..]
                    .iter()
                    .take_while(|l| !l.starts_with("note: "))
                    .cloned();
                std::iter::once(lines[i].clone())
                    .chain(message)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            None => lines.last()?.clone(),
        };
        Some(sanitize(&summary, MAX_MESSAGE))
    }
}

impl OutputState {
    fn buf(&mut self, which: Stream) -> &mut Vec<u8> {
        match which {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    fn line(&mut self, which: Stream, bytes: &[u8]) {
        let text = sanitize(String::from_utf8_lossy(bytes).trim_end(), MAX_MESSAGE);
        if text.is_empty() {
            return;
        }
        let op = &self.label;
        match which {
            Stream::Stdout => tracing::info!(operator = %op, stream = "stdout", "{text}"),
            Stream::Stderr => {
                tracing::warn!(operator = %op, stream = "stderr", "{text}");
                if self.last_stderr.len() == STDERR_KEPT {
                    self.last_stderr.remove(0);
                }
                self.last_stderr.push(text);
            }
        }
    }

    fn write(&mut self, which: Stream, bytes: &[u8]) {
        self.written = self.written.saturating_add(bytes.len());
        if self.written > MAX_OUTPUT_PER_CALL {
            if !self.suppressed {
                self.suppressed = true;
                tracing::warn!(
                    operator = %self.label,
                    "the plugin wrote over {} to stdout/stderr in one call; dropping the rest of this call's output",
                    format_size(MAX_OUTPUT_PER_CALL as u64)
                );
            }
            return;
        }
        let mut buf = std::mem::take(self.buf(which));
        buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            self.line(which, &buf[start..start + nl]);
            start += nl + 1;
        }
        buf.drain(..start);
        if buf.len() > MAX_MESSAGE {
            self.line(which, &buf);
            buf.clear();
        }
        *self.buf(which) = buf;
    }
}

/// One WASI output stream of a plugin (stdout or stderr).
struct LogStream {
    output: GuestOutput,
    which: Stream,
}

impl wasmtime_wasi::cli::IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(LogStream {
            output: self.output.clone(),
            which: self.which,
        })
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LogStream {
            output: self.output.clone(),
            which: self.which,
        })
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogStream {
    async fn ready(&mut self) {}
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.output.lock().write(self.which, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for LogStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.output.lock().write(self.which, buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn guest_output_is_logged_by_line_and_capped() {
        let out = GuestOutput::new("op[0]");
        out.begin_call();
        let mut s = out.lock();
        s.write(Stream::Stderr, b"\nthread 'x' panicked at x.rs:1:\nbo");
        s.write(Stream::Stderr, b"om\nnote: run with RUST_BACKTRACE=1\n");
        assert_eq!(s.last_stderr.len(), 3);
        s.write(Stream::Stdout, &vec![b'x'; MAX_OUTPUT_PER_CALL]);
        assert!(s.suppressed && s.stdout.is_empty());
        drop(s);
        let panic = out.end_call();
        assert_eq!(
            panic.as_deref(),
            Some("thread 'x' panicked at x.rs:1: boom")
        );
        out.begin_call();
        out.lock().write(Stream::Stderr, b"one\ntwo\npartial");
        assert_eq!(out.end_call().as_deref(), Some("partial"));
    }

    #[test]
    fn sanitize_escapes_and_cuts() {
        assert_eq!(sanitize("plain", 10), "plain");
        assert_eq!(sanitize("tab\there", 100), "tab\\there");
        assert_eq!(sanitize("ééé", 2), "é… (6 bytes)");
    }
}
