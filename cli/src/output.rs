//! What `weir` writes to its own stderr and stdout: log lines and messages
//! on stderr ([`stderr`], [`message`], the logging set-up [`init_logging`]),
//! command output on stdout ([`stdout`]).
//!
//! Invariants:
//! - While the live progress display is shown (`attach`), every write to
//!   stderr goes through [`stderr`], which clears the display, writes, and
//!   draws the display again below: log lines print above the display and
//!   stay on the screen.
//! - A failed write to stderr (its reader went away) is dropped: it never
//!   panics and never changes the exit status; the command runs on
//!   without its log.
//! - A failed write to stdout is an error of the command (exit status 1),
//!   never a panic.
//! - Log lines are coloured only when stderr is a terminal and `NO_COLOR`
//!   is unset or empty.

use std::ffi::OsString;
use std::io::{IsTerminal as _, Write as _};
use std::sync::{Mutex, MutexGuard};

use indicatif::MultiProgress;

/// The live progress display while it is shown.
static DISPLAY: Mutex<Option<MultiProgress>> = Mutex::new(None);

fn display() -> MutexGuard<'static, Option<MultiProgress>> {
    // A poisoned lock only means a write panicked; the handle is still good.
    DISPLAY.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on, writes to stderr print above `live`.
pub(crate) fn attach(live: &MultiProgress) {
    *display() = Some(live.clone());
}

/// Writes to stderr go straight to it again.
pub(crate) fn detach() {
    display().take();
}

/// Writes `bytes` to stderr, above the live progress display when one is
/// shown. A failed write is dropped.
pub fn stderr(bytes: &[u8]) {
    let live = display().clone();
    let write = || {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(bytes).and_then(|()| err.flush());
    };
    match live {
        Some(live) => live.suspend(write),
        None => write(),
    }
}

/// Writes `text` and a newline to stderr, as [`stderr`] does.
pub fn message(text: impl std::fmt::Display) {
    stderr(format!("{text}\n").as_bytes());
}

/// Writes `text` to stdout; fails, saying so, when stdout is closed.
pub fn stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// The error of a failed write to stdout.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot write to stdout: {e} (was the program reading it closed?)")
}

/// Whether log lines are coloured: on a terminal, unless `NO_COLOR` is set
/// to a non-empty value (<https://no-color.org>).
///
/// ```
/// use weir_cli::output::colour;
/// assert!(colour(true, None));
/// assert!(colour(true, Some("".into())));
/// assert!(!colour(true, Some("1".into())));
/// assert!(!colour(false, None));
/// ```
pub fn colour(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The log writer: each event is one [`stderr`] write.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        stderr(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Logs to stderr at `verbose` (0: warnings, and the runtime's notices
/// ([`weir::NOTICE`]); 1: info; 2: debug), unless `RUST_LOG` says
/// otherwise.
pub fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "weir={default},weir_cli={default},{}=info,warn",
            weir::NOTICE
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .log_internal_errors(false)
        .with_target(false)
        .init();
}
