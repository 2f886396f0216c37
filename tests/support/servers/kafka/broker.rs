//! A private one-node Apache Kafka broker: `scripts/services.sh kafka-run
//! DIR PORT` writes its configuration, formats its log dir and becomes the
//! broker's JVM, so the child process is the broker itself (a SIGKILL is a
//! crash of the broker). The folder keeps the data and the ports, so a
//! restart on it brings back every topic, transaction and group offset.

use std::fs::{self, File};
use std::io::Write;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tempfile::TempDir;

use super::clients::Clients;
use crate::servers::{Watchdog, failed_to_start, free_port, server_dir};

/// How long the broker may take to answer a metadata request after its
/// start: a JVM on a busy two-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A private Kafka broker (controller and broker in one process) on
/// 127.0.0.1, its folder a temporary one: `run/` (the log dir),
/// `server.properties`, `kafka.log`. Killed when dropped; a watchdog
/// kills it when the test process ends without dropping it.
pub struct Kafka {
    clients: Clients,
    port: u16,
    child: Mutex<Option<Child>>,
    // Dropped in this order, after `Drop::drop` killed the broker.
    _watchdog: Watchdog,
    dir: TempDir,
}

impl Kafka {
    /// Starts a broker on a free port and waits until it answers a
    /// metadata request; panics with the end of its log when it cannot.
    pub fn start() -> Kafka {
        let dir = server_dir("weir-kafka-");
        let watchdog = Watchdog::spawn(
            dir.path(),
            "if [ -e \"$1/kafka.pid\" ]; then kill -9 \"$(cat \"$1/kafka.pid\")\"; fi",
            &[],
        );
        let mut kafka = Kafka {
            clients: Clients::new(String::new()),
            port: 0,
            child: Mutex::new(None),
            _watchdog: watchdog,
            dir,
        };
        // Another process may take the free port before the broker binds
        // it; a broker that never bound its port leaves a folder that a
        // new port cannot reuse (its configuration names the old one).
        for attempt in 1.. {
            kafka.port = free_port();
            kafka.clients = Clients::new(format!("127.0.0.1:{}", kafka.port));
            match kafka.spawn() {
                Ok(()) => break,
                Err(_) if attempt < 3 && kafka.log().contains("Address already in use") => {
                    kafka.kill();
                    for stale in ["server.properties", "run"] {
                        let path = kafka.dir.path().join(stale);
                        let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
                    }
                }
                Err(e) => failed_to_start("Kafka", &e, &kafka.log_path()),
            }
        }
        kafka
    }

    fn spawn(&mut self) -> Result<(), String> {
        let script = crate::repo_root().join("scripts/services.sh");
        let mut log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        writeln!(log, "--- weir-tests: kafka-run on port {} ---", self.port).unwrap();
        let child = Command::new("bash")
            .arg(&script)
            .arg("kafka-run")
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        *self.child.get_mut().unwrap() = Some(child);
        let ready = self.wait_until_ready();
        if ready.is_err() {
            self.kill();
        }
        ready
    }

    /// Polls with metadata requests until the broker answers, or its
    /// process ends, or [`START_TIMEOUT`] passes.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.clients.brokers())
            .set("log_level", "0")
            .create()
            .map_err(|e| format!("a metadata client: {e}"))?;
        let start = Instant::now();
        loop {
            if let Ok(metadata) = probe.fetch_metadata(None, Duration::from_millis(500))
                && !metadata.brokers().is_empty()
            {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .get_mut()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "it exited ({status}) before answering on port {}",
                    self.port
                ));
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "it did not answer a metadata request on port {} within {START_TIMEOUT:?}",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker's folder: `run/` (the log dir), `server.properties`,
    /// `kafka.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("kafka.log")
    }

    /// The broker's output so far (every start of it).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Whether the broker process is alive.
    pub fn is_running(&self) -> bool {
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

    /// Kills the broker (SIGKILL, as a crash) and waits for it to end.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.get_mut().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(self.dir.path().join("kafka.pid"));
    }

    /// Kills the broker (when running) and starts it again on the same
    /// port and log dir: topics, committed transactions and group offsets
    /// survive; transactions left open are aborted once they time out.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            failed_to_start(
                "Kafka",
                &format!("restarting on port {}: {e}", self.port),
                &self.log_path(),
            );
        }
    }
}

impl Deref for Kafka {
    type Target = Clients;

    fn deref(&self) -> &Clients {
        &self.clients
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        self.kill();
    }
}
