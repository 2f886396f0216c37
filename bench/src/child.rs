//! Child processes timed from outside: wall time from spawn to reap, and
//! the peak RSS and CPU time `wait4` reports for the child.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// One run of a child process, seen from outside.
#[derive(Debug, Clone)]
pub struct ChildRun {
    /// From spawning it until it was reaped.
    pub wall: Duration,
    /// Its peak resident set size, bytes (`ru_maxrss`).
    pub peak_rss: u64,
    /// The CPU time it used, user and system (`ru_utime + ru_stime`).
    pub cpu: Duration,
    /// What it wrote on stderr.
    pub stderr: String,
}

/// Runs `cmd` to its end with stdin closed and stdout and stderr in files
/// `<log>.stdout` and `<log>.stderr`; fails when it does not exit with 0.
pub fn run_child(cmd: Command, log: &Path) -> anyhow::Result<ChildRun> {
    run_child_with(cmd, log, |_| Ok(()))
}

/// [`run_child`], calling `during` with the child's pid once it is spawned;
/// what `during` returns lives until the child is reaped.
pub fn run_child_with<G>(
    mut cmd: Command,
    log: &Path,
    during: impl FnOnce(u32) -> anyhow::Result<G>,
) -> anyhow::Result<ChildRun> {
    let stdout = log.with_extension("stdout");
    let stderr = log.with_extension("stderr");
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout)?)
        .stderr(std::fs::File::create(&stderr)?);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let pid = libc::pid_t::try_from(child.id()).context("a pid out of range")?;
    let guard = match during(child.id()) {
        Ok(guard) => guard,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; `pid` is our own child, which
        // `Child` never waits for unless asked (it is not).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting for a child process");
        }
    }
    let wall = started.elapsed();
    drop(guard);
    drop(child);
    let stderr_text = std::fs::read_to_string(&stderr).unwrap_or_default();
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let tail: Vec<&str> = stderr_text.lines().rev().take(5).collect();
        anyhow::bail!(
            "{:?} failed (wait status {status}): {}",
            cmd,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok(ChildRun {
        wall,
        // Linux reports kilobytes.
        peak_rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        stderr: stderr_text,
    })
}

/// A fresh folder `dir/case` holding `job` as `job.toml`, and the command
/// that runs it with the `weir` binary (`--restore none`, no progress
/// lines, no `RUST_LOG`); returns the command and the log path for
/// [`run_child`].
pub fn weir_case(
    settings: &crate::Settings,
    dir: &Path,
    job: &weir_tests::job_file::JobFile,
) -> anyhow::Result<(Command, PathBuf)> {
    let case = dir.join("case");
    if case.exists() {
        std::fs::remove_dir_all(&case)?;
    }
    std::fs::create_dir_all(&case)?;
    let file = case.join("job.toml");
    std::fs::write(&file, job.to_string())?;
    Ok((weir_run(settings, &file)?, case.join("run")))
}

/// `weir run FILE --restore none --progress-every 0` with the benchmarks'
/// `weir` binary, without `RUST_LOG`.
pub fn weir_run(settings: &crate::Settings, file: &Path) -> anyhow::Result<Command> {
    let mut cmd = Command::new(settings.weir_binary()?);
    cmd.arg("run")
        .arg(file)
        .args(["--restore", "none", "--progress-every", "0"])
        .env_remove("RUST_LOG");
    Ok(cmd)
}
