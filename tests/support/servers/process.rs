//! A server's process for one test ([`ServerProcess`]): a temporary folder
//! of its own (`weir-<name>-*`), its output in `<name>.log`, a watchdog
//! that SIGKILLs the pid in `<name>.pid` when the test process ends
//! without dropping it, and the child killed with SIGKILL (as a crash) on
//! [`ServerProcess::kill`] and on drop.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;

use tempfile::TempDir;

use super::{Watchdog, server_dir};

pub(super) struct ServerProcess {
    name: &'static str,
    child: Mutex<Option<Child>>,
    // Dropped in this order, after `Drop::drop` killed the child.
    _watchdog: Watchdog,
    dir: TempDir,
}

impl ServerProcess {
    /// A new folder for server `name`, no process yet.
    pub(super) fn new(name: &'static str) -> ServerProcess {
        let dir = server_dir(&format!("weir-{name}-"));
        let cleanup =
            format!("if [ -e \"$1/{name}.pid\" ]; then kill -9 \"$(cat \"$1/{name}.pid\")\"; fi");
        let watchdog = Watchdog::spawn(dir.path(), &cleanup, &[]);
        ServerProcess {
            name,
            child: Mutex::new(None),
            _watchdog: watchdog,
            dir,
        }
    }

    pub(super) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("{}.log", self.name))
    }

    /// The log file opened for appending, with a line `--- weir-tests:
    /// <start> ---` that marks where this start's output begins.
    pub(super) fn open_log(&self, start: &str) -> File {
        let mut log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        writeln!(log, "--- weir-tests: {start} ---").unwrap();
        log
    }

    /// Takes `child` as the server's process, its pid in `<name>.pid`
    /// unless `pid_written` (a script that writes it itself).
    pub(super) fn set_child(&mut self, child: Child, pid_written: bool) {
        if !pid_written {
            let pid = self.dir.path().join(format!("{}.pid", self.name));
            fs::write(pid, child.id().to_string()).unwrap();
        }
        *self.child.get_mut().unwrap() = Some(child);
    }

    /// How the process ended, if it has.
    pub(super) fn exited(&mut self) -> Option<String> {
        let child = self.child.get_mut().unwrap().as_mut()?;
        child.try_wait().ok().flatten().map(|s| s.to_string())
    }

    /// Whether the process is alive.
    pub(super) fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap();
        match child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(_) => {
                *child = None;
                false
            }
            None => false,
        }
    }

    /// Kills the process (SIGKILL, as a crash) and waits for it to end.
    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.get_mut().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(self.dir.path().join(format!("{}.pid", self.name)));
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
