//! A server's process for one test ([`ServerProcess`]): a temporary folder
//! of its own (`weir-<name>-*`), its output in `<name>.log`, a watchdog
//! that SIGKILLs the pid in `<name>.pid` when the test process ends
//! without dropping it, and the child killed with SIGKILL (as a crash) on
//! [`ServerProcess::kill`] and on drop. Files the process leaves outside
//! its folder when killed are removed after it (by the watchdog too).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use tempfile::TempDir;

use super::{Watchdog, server_dir};

pub(super) struct ServerProcess {
    name: &'static str,
    child: Mutex<Option<Child>>,
    /// [`ServerProcess::set_outside_files`], also listed in `<name>.outside`.
    outside: Vec<PathBuf>,
    // Dropped in this order, after `Drop::drop` killed the child.
    _watchdog: Watchdog,
    dir: TempDir,
}

impl ServerProcess {
    /// A new folder for server `name` in the system's temporary folder, no
    /// process yet.
    pub(super) fn new(name: &'static str) -> ServerProcess {
        ServerProcess::new_in(name, None)
    }

    /// [`ServerProcess::new`] with the folder in `parent` when given.
    pub(super) fn new_in(name: &'static str, parent: Option<&Path>) -> ServerProcess {
        let dir = server_dir(&format!("weir-{name}-"), parent);
        let cleanup = format!(
            "if [ -e \"$1/{name}.pid\" ]; then kill -9 \"$(cat \"$1/{name}.pid\")\"; \
             if [ -e \"$1/{name}.outside\" ]; then \
             while IFS= read -r f; do rm -f \"$f\"; done <\"$1/{name}.outside\"; fi; fi"
        );
        let watchdog = Watchdog::spawn(dir.path(), &cleanup, &[]);
        ServerProcess {
            name,
            child: Mutex::new(None),
            outside: Vec::new(),
            _watchdog: watchdog,
            dir,
        }
    }

    /// `<name>.<extension>` in the folder.
    fn file(&self, extension: &str) -> PathBuf {
        self.dir.path().join(format!("{}.{extension}", self.name))
    }

    pub(super) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.file("log")
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

    /// Starts `scripts/services.sh VERB <folder> PORT` as the server's
    /// process, its output appended to the log; the script writes its pid
    /// file itself before it becomes the server (`kafka-run`, `s3-run`).
    pub(super) fn run_script(&mut self, verb: &str, port: u16) -> Result<(), String> {
        let script = crate::repo_root().join("scripts/services.sh");
        let log = self.open_log(&format!("{verb} on port {port}"));
        let child = Command::new("bash")
            .arg(&script)
            .arg(verb)
            .arg(self.dir())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        self.set_child(child, true);
        Ok(())
    }

    /// Takes `child` as the server's process, its pid in `<name>.pid`
    /// unless `pid_written` (a script that writes it itself).
    pub(super) fn set_child(&mut self, child: Child, pid_written: bool) {
        if !pid_written {
            fs::write(self.file("pid"), child.id().to_string()).unwrap();
        }
        *self.child.get_mut().unwrap() = Some(child);
    }

    /// Takes `files` as what the running process makes outside its folder
    /// and leaves behind when killed (SeaweedFS's gRPC sockets, at fixed
    /// places under /tmp): [`ServerProcess::kill`] removes them after the
    /// process, and so does the watchdog when the test process ends first.
    pub(super) fn set_outside_files(&mut self, files: Vec<PathBuf>) {
        let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
        fs::write(self.file("outside"), list).unwrap();
        self.outside = files;
    }

    /// How the process ended, if it has.
    pub(super) fn exited(&mut self) -> Option<String> {
        let child = self.child.get_mut().unwrap().as_mut()?;
        child.try_wait().ok().flatten().map(|s| s.to_string())
    }

    /// Polls `ready` every `every` until it holds, the process ends, or
    /// `timeout` passes; the error says which, with what `ready` last said.
    pub(super) fn wait_until_ready(
        &mut self,
        timeout: std::time::Duration,
        every: std::time::Duration,
        mut ready: impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = std::time::Instant::now();
        loop {
            let why = match ready() {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            if let Some(how) = self.exited() {
                return Err(format!("it exited ({how}) before it was ready: {why}"));
            }
            if start.elapsed() > timeout {
                return Err(format!("it was not ready within {timeout:?}: {why}"));
            }
            std::thread::sleep(every);
        }
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

    /// Kills the process (SIGKILL, as a crash), waits for it to end and
    /// removes what it left outside its folder.
    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.get_mut().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(self.file("pid"));
        for file in self.outside.drain(..) {
            let _ = fs::remove_file(file);
        }
        let _ = fs::remove_file(self.file("outside"));
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
