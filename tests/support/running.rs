//! A `weir` process watched while it runs ([`Running`]): its stderr is read
//! line by line on a thread, so that a test can act at the moment the
//! process logs something (kill it, send it a request) instead of after a
//! guessed time; and [`log_time`], the timestamp of a log line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::wait::PATIENCE;

/// A spawned `weir` command whose stderr lines are collected as they come.
pub struct Running {
    /// The process (its stderr is taken; stdin and stdout as the command set them).
    pub child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    /// Spawns `cmd` with stderr piped (stdin and stdout as `cmd` sets them).
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the next stderr line that satisfies `pred` (`what`
    /// describes it) and returns it; panics, showing stderr so far, when the
    /// process ends or [`PATIENCE`] passes first.
    pub fn wait_for_line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(e) => {
                    let why = match e {
                        RecvTimeoutError::Timeout => format!("not within {PATIENCE:?}"),
                        RecvTimeoutError::Disconnected => "the process closed stderr".into(),
                    };
                    panic!(
                        "waited for {what}: {why}; stderr:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to exit; returns its status and all of its
    /// stderr.
    pub fn wait(mut self) -> (ExitStatus, String) {
        let status = self.child.wait().unwrap();
        self.seen.extend(self.lines.iter());
        (status, self.seen.join("\n"))
    }
}

/// The time in a log line's leading timestamp (`2026-11-29T13:04:19.589714Z`,
/// possibly wrapped in ANSI colour codes), as time since the Unix epoch;
/// `None` when the line does not start with one.
pub fn log_time(line: &str) -> Option<Duration> {
    let plain = strip_ansi(line);
    let ms = weir::time::parse_rfc3339(plain.split_whitespace().next()?)?;
    Some(Duration::from_millis(u64::try_from(ms).ok()?))
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_times_are_read_from_plain_and_coloured_lines() {
        let t = log_time("2026-11-29T13:04:19.500000Z  WARN attempt failed").unwrap();
        // 2026-11-29 is day 20_786 after 1970-01-01.
        let want = 20_786 * 86_400 + 13 * 3600 + 4 * 60 + 19;
        assert_eq!(t, Duration::from_millis(want * 1000 + 500));
        let coloured =
            log_time("\u{1b}[2m2026-11-29T13:04:19.500000Z\u{1b}[0m \u{1b}[33m WARN").unwrap();
        assert_eq!(coloured, t);
        assert!(log_time("error: no timestamp").is_none());
        assert!(log_time("job `x` finished in 0.86 s").is_none());
    }
}
