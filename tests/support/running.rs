//! A `weir` process watched while it runs ([`Running`]): its stderr is read
//! line by line on a thread, so that a test can act at the moment the
//! process logs something (kill it, send it a request) instead of after a
//! guessed time; a piped stdin is fed while it runs, a piped stdout read
//! line by line as it prints. And [`log_time`], the timestamp of a log
//! line.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::wait::PATIENCE;

/// A spawned `weir` command whose stderr lines are collected as they come.
pub struct Running {
    /// The process (its stdio is taken by this).
    pub child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stdin: Option<ChildStdin>,
    printed: Option<Receiver<String>>,
}

/// The lines of `reader`, sent one by one from a thread as they come.
fn lines_of(reader: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

impl Running {
    /// Spawns `cmd` with stderr piped (stdin and stdout as `cmd` sets them:
    /// a piped stdin is kept open for [`Running::send`], a piped stdout's
    /// lines are read for [`Running::next_printed`]).
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let lines = lines_of(child.stderr.take().unwrap());
        Running {
            stdin: child.stdin.take(),
            printed: child.stdout.take().map(lines_of),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Writes `text` to the process's stdin and flushes it.
    pub fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("a piped stdin, still open");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the process's stdin: the end of its input.
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// The next line the process prints on stdout, waiting up to `timeout`.
    pub fn next_printed(&self, timeout: Duration) -> Result<String, RecvTimeoutError> {
        let printed = self.printed.as_ref().expect("a piped stdout");
        printed.recv_timeout(timeout)
    }

    /// The lines the process prints on stdout until it closes it.
    pub fn rest_printed(&self) -> Vec<String> {
        let printed = self.printed.as_ref().expect("a piped stdout");
        printed.iter().collect()
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

    /// The stderr lines read so far (by [`wait_for_line`](Self::wait_for_line)).
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Closes its stdin, waits for the process to exit; returns its status
    /// and all of its stderr.
    pub fn wait(mut self) -> (ExitStatus, String) {
        self.close_stdin();
        let status = self.child.wait().unwrap();
        self.seen.extend(self.lines.iter());
        (status, self.seen.join("\n"))
    }
}

/// A process still running when its test ends (a failed assertion, a
/// panic) is killed, so that no `weir` outlives its test: a worker left
/// running would go on joining groups and connecting to ports that later
/// tests' servers reuse.
impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
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

    /// A process dropped while running (its test failed) is killed and
    /// reaped.
    #[test]
    fn a_process_still_running_when_dropped_is_killed() {
        let mut sleep = Command::new("sleep");
        sleep.arg("600");
        let running = Running::spawn(sleep);
        let pid = running.child.id();
        drop(running);
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        assert!(!alive, "process {pid} outlived its Running");
    }
}
