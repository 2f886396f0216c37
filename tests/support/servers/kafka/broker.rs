//! A private one-node Apache Kafka broker: `scripts/services.sh kafka-run
//! DIR PORT` writes its configuration, formats its log dir and becomes the
//! broker's JVM, so the child process is the broker itself (a SIGKILL is a
//! crash of the broker). The folder keeps the data and the ports, so a
//! restart on it brings back every topic, transaction and group offset.

use std::fs;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::clients::Clients;
use crate::servers::process::ServerProcess;
use crate::servers::{PrivateServer, server_process_methods};

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
        kafka.start_on_a_free_port();
        kafka
    }

    /// Polls with metadata requests until the broker answers, or its
    /// process ends, or [`START_TIMEOUT`] passes.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let probe: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.clients.brokers())
            .set("log_level", "0")
            .create()
            .map_err(|e| format!("a metadata client: {e}"))?;
        let port = self.port;
        let answers = || match probe.fetch_metadata(None, Duration::from_millis(500)) {
            Ok(metadata) if !metadata.brokers().is_empty() => Ok(()),
            _ => Err(format!("no answer to a metadata request on port {port}")),
        };
        (self.process).wait_until_ready(START_TIMEOUT, Duration::from_millis(100), answers)
    }
}

/// Its folder holds `run/` (the log dir), `server.properties` and
/// `kafka.log`; a stop is a SIGKILL, and a restart keeps topics, committed
/// transactions and group offsets (transactions left open are aborted once
/// they time out).
impl PrivateServer for Kafka {
    server_process_methods!("Kafka");

    fn spawn(&mut self) -> Result<(), String> {
        self.clients = Clients::new(format!("127.0.0.1:{}", self.port));
        self.process.run_script("kafka-run", self.port)?;
        let ready = self.wait_until_ready();
        self.stopped_unless_ready(ready)
    }

    /// A broker that never bound its port leaves a folder that a new port
    /// cannot reuse (its configuration names the old one).
    fn forget_port(&mut self) {
        self.stop();
        for stale in ["server.properties", "run"] {
            let path = self.dir().join(stale);
            let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
        }
    }
}

impl Deref for Kafka {
    type Target = Clients;

    fn deref(&self) -> &Clients {
        &self.clients
    }
}
