//! A private one-node Apache Kafka broker: `scripts/services.sh kafka-run
//! DIR PORT` writes its configuration, formats its log dir and becomes the
//! broker's JVM, so the child process is the broker itself (a SIGKILL is a
//! crash of the broker). The folder keeps the data and the ports, so a
//! restart on it brings back every topic, transaction and group offset.

use std::fs;
use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::clients::Clients;
use crate::servers::process::ServerProcess;
use crate::servers::{failed_to_start, free_port};

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
    process: ServerProcess,
}

impl Kafka {
    /// Starts a broker on a free port and waits until it answers a
    /// metadata request; panics with the end of its log when it cannot.
    pub fn start() -> Kafka {
        let mut kafka = Kafka {
            clients: Clients::new(String::new()),
            port: 0,
            process: ServerProcess::new("kafka"),
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
                        let path = kafka.dir().join(stale);
                        let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
                    }
                }
                Err(e) => failed_to_start("Kafka", &e, &kafka.process.log_path()),
            }
        }
        kafka
    }

    fn spawn(&mut self) -> Result<(), String> {
        let script = crate::repo_root().join("scripts/services.sh");
        let log = self
            .process
            .open_log(&format!("kafka-run on port {}", self.port));
        let child = Command::new("bash")
            .arg(&script)
            .arg("kafka-run")
            .arg(self.process.dir())
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        // The script writes kafka.pid before it becomes the broker's JVM.
        self.process.set_child(child, true);
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
            if let Some(status) = self.process.exited() {
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
        self.process.dir()
    }

    /// The broker's output so far (every start of it).
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Whether the broker process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Kills the broker (SIGKILL, as a crash) and waits for it to end.
    pub fn kill(&mut self) {
        self.process.kill();
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
                &self.process.log_path(),
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
