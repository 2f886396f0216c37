//! The `weir` binary run as a user runs it: [`Weir`] makes its commands, with
//! `RUST_LOG` removed so that the binary's own log level applies, and
//! [`Outcome`] is what one finished command left (exit status, stdout and
//! stderr as text).

use crate::text::assert_lacks;
use std::ffi::OsStr;
use std::process::{Command, ExitStatus, Output};

/// The `weir` binary; in the integration tests, at
/// `env!("CARGO_BIN_EXE_weir")`.
#[derive(Debug, Clone, Copy)]
pub struct Weir(&'static str);

impl Weir {
    /// The binary at `path`.
    pub const fn new(path: &'static str) -> Self {
        Weir(path)
    }

    /// `weir ARGS`, to adjust (environment, stdio) before running or
    /// spawning it.
    pub fn command<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Command {
        let mut c = Command::new(self.0);
        c.args(args).env_remove("RUST_LOG");
        c
    }

    /// Runs `weir ARGS` to the end.
    pub fn output<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Outcome {
        Outcome::of(&mut self.command(args))
    }

    /// Runs `weir ARGS` to the end and asserts that it succeeded.
    pub fn ok<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Outcome {
        self.output(args).assert_ok()
    }
}

/// What a finished command left; `weir` writes UTF-8 only.
#[derive(Debug)]
pub struct Outcome {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Outcome {
    /// Runs `cmd` to the end, its output captured.
    pub fn of(cmd: &mut Command) -> Self {
        cmd.output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
            .into()
    }

    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Its exit code, `None` when a signal ended it.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Asserts that it succeeded, showing stderr when not.
    pub fn assert_ok(self) -> Self {
        assert!(
            self.success(),
            "weir failed ({}): {}",
            self.status,
            self.stderr
        );
        self
    }

    /// Asserts that it failed with exactly one `error:` line on stderr (log
    /// lines may come before it) and returns that line.
    pub fn error_line(&self) -> &str {
        assert!(!self.success(), "it succeeded: {}", self.stderr);
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "one error line: {}", self.stderr);
        errors[0]
    }

    /// Asserts that it failed with nothing on stdout and one line on stderr
    /// that contains every needle and is no panic.
    pub fn assert_one_line_error(&self, needles: &[&str]) {
        let (stdout, stderr) = (&self.stdout, &self.stderr);
        assert_ne!(self.code(), Some(0), "{stdout}");
        assert!(stdout.is_empty(), "{stdout}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{n:?} not in {stderr}");
        }
        assert_lacks(stderr, "panicked");
    }
}

impl From<Output> for Outcome {
    fn from(out: Output) -> Self {
        let text = |bytes: Vec<u8>, stream: &str| {
            String::from_utf8(bytes).unwrap_or_else(|e| panic!("{stream} is not UTF-8: {e}"))
        };
        Outcome {
            status: out.status,
            stdout: text(out.stdout, "stdout"),
            stderr: text(out.stderr, "stderr"),
        }
    }
}
