//! What a plugin writes, made safe for the host: its stdout and stderr
//! ([`GuestOutput`], the streams WASI hands out), logged line by line with
//! the operator's id, and [`sanitize`], through which every text from a
//! plugin passes (output lines, log messages, returned errors, names).
//!
//! Invariants:
//! - Text from a plugin reaches the log or an error message only
//!   sanitized: on one line, without terminal escapes, and at most about
//!   [`MAX_MESSAGE`] bytes.
//! - At most [`MAX_OUTPUT_PER_CALL`] bytes of stdout plus stderr are kept per
//!   call; the rest is dropped with one warning.

use std::sync::{Arc, Mutex};

use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::config::format_size;

/// Escapes control characters (newlines, ANSI escapes) and cuts `text` to
/// about `max` bytes, so that text from a plugin cannot forge log lines or
/// break one-line error messages.
pub(super) fn sanitize(text: &str, max: usize) -> String {
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
pub(super) const MAX_MESSAGE: usize = 4096;

/// Stderr lines of a call kept to explain a trap.
const STDERR_KEPT: usize = 16;

/// Most bytes of stdout plus stderr a plugin may write in one call; the rest
/// is dropped (with one warning).
pub(super) const MAX_OUTPUT_PER_CALL: usize = 1 << 20;

/// Which output stream of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

/// The stdout and stderr of one instance, logged line by line with the
/// operator's id. Shared by the streams WASI hands out.
#[derive(Clone)]
pub(super) struct GuestOutput {
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
    pub(super) fn new(label: &str) -> Self {
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

    pub(super) fn stream(&self, which: Stream) -> LogStream {
        LogStream {
            output: self.clone(),
            which,
        }
    }

    /// Starts a call: resets the per-call output budget and the last stderr
    /// line.
    pub(super) fn begin_call(&self) {
        let mut s = self.lock();
        s.written = 0;
        s.suppressed = false;
        s.last_stderr.clear();
    }

    /// Logs unfinished lines and returns what the call's stderr says about
    /// a failure, on one line: a Rust panic message (`panicked at FILE:
    /// MESSAGE`), after the exception of a Python traceback printed before
    /// it (componentize-py prints the traceback, then panics with a
    /// generic message), when there is one; else the last stderr line.
    pub(super) fn end_call(&self) -> Option<String> {
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
                let panic = lines[i..].join(" ");
                match python_exception(&lines[..i]) {
                    Some(exception) => format!("{exception}; {panic}"),
                    None => panic,
                }
            }
            None => lines.last()?.clone(),
        };
        Some(sanitize(&summary, MAX_MESSAGE))
    }
}

/// The first line of a Python traceback.
const TRACEBACK: &str = "Traceback (most recent call last):";

/// The exception a Python traceback at the end of `lines` reports: the
/// lines after its last frame (`  File "...", line N, in f` and the
/// indented source lines below it), e.g. `ValueError: bad count`.
fn python_exception(lines: &[String]) -> Option<String> {
    let frame = lines
        .iter()
        .rposition(|l| l == TRACEBACK || l.starts_with("  File \""))?;
    let exception: Vec<&str> = lines[frame + 1..]
        .iter()
        .map(String::as_str)
        .skip_while(|l| l.starts_with(' '))
        .collect();
    (!exception.is_empty()).then(|| exception.join(" "))
}

/// Whether a plugin's stderr line is Rust's hint to set `RUST_BACKTRACE`,
/// which the sandbox has no environment for: it is dropped.
fn is_backtrace_hint(line: &str) -> bool {
    line.starts_with("note: ") && line.contains("RUST_BACKTRACE")
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
        if text.is_empty() || (which == Stream::Stderr && is_backtrace_hint(&text)) {
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
pub(super) struct LogStream {
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
    fn guest_output_is_logged_by_line_and_capped() {
        let out = GuestOutput::new("op[0]");
        out.begin_call();
        let mut s = out.lock();
        s.write(Stream::Stderr, b"\nthread 'x' panicked at x.rs:1:\nbo");
        s.write(
            Stream::Stderr,
            b"om\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        );
        // The hint to set RUST_BACKTRACE is dropped: the sandbox has no environment.
        assert_eq!(s.last_stderr, ["thread 'x' panicked at x.rs:1:", "boom"]);
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

    /// What componentize-py writes when Python code raises: the traceback,
    /// then the panic of its runtime with a generic message.
    #[test]
    fn a_python_exception_is_in_the_failure_before_the_panic() {
        let out = GuestOutput::new("op[0]");
        out.begin_call();
        out.lock().write(
            Stream::Stderr,
            b"Traceback (most recent call last):\n  File \"/app.py\", line 9, in process\n    counts[w] = int(v)\n                ^^^^^^\nValueError: invalid literal for int() with base 10: 'x'\nthread '<unnamed>' panicked at runtime/src/lib.rs:560:21:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        );
        assert_eq!(
            out.end_call().as_deref(),
            Some(
                "ValueError: invalid literal for int() with base 10: 'x'; thread '<unnamed>' panicked at runtime/src/lib.rs:560:21: Python function threw an unexpected exception"
            )
        );
        // A Rust panic after other stderr output carries only the panic.
        out.begin_call();
        out.lock().write(
            Stream::Stderr,
            b"  indented\nplain\nthread 'x' panicked at x.rs:1:\nboom\n",
        );
        assert_eq!(
            out.end_call().as_deref(),
            Some("thread 'x' panicked at x.rs:1: boom")
        );
    }

    #[test]
    fn sanitize_escapes_and_cuts() {
        assert_eq!(sanitize("a\nb\u{1b}[31m", 100), "a\\nb\\u{1b}[31m");
        assert_eq!(sanitize("abcdef", 3), "abc… (6 bytes)");
        assert_eq!(sanitize("plain", 10), "plain");
        assert_eq!(sanitize("tab\there", 100), "tab\\there");
        assert_eq!(sanitize("ééé", 2), "é… (6 bytes)");
    }
}
