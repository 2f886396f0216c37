//! A private schema registry: Apicurio Registry, whose Confluent-compatible
//! API (`/apis/ccompat/v7`) is what Weir's `schema_registry` and Python's
//! `confluent-kafka` talk to. `scripts/services.sh registry-run DIR PORT`
//! becomes its JVM; schemas are kept in memory, so a restart forgets them.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::http::{Reply, request};
use crate::servers::process::ServerProcess;
use crate::servers::{PrivateServer, server_process_methods};

/// How long the registry may take to answer after its start: a JVM on a
/// busy two-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A private schema registry on 127.0.0.1. Killed when dropped.
pub struct SchemaRegistry {
    port: u16,
    process: ServerProcess,
}

impl SchemaRegistry {
    /// Starts a registry on a free port and waits until it answers;
    /// panics with the end of its log when it cannot.
    pub fn start() -> SchemaRegistry {
        let mut registry = SchemaRegistry {
            port: 0,
            process: ServerProcess::new("registry"),
        };
        registry.start_on_a_free_port();
        registry
    }

    /// The base URL of its Confluent-compatible API, as a job's
    /// `schema_registry` names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/ccompat/v7", self.port)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `method` on `path` under the API's base (`/subjects`), with a JSON
    /// `body`.
    pub fn call(&self, method: &str, path: &str, body: &str) -> Reply {
        let headers = [
            ("content-type", "application/vnd.schemaregistry.v1+json"),
            ("connection", "close"),
        ];
        request(
            self.addr(),
            method,
            &format!("/apis/ccompat/v7{path}"),
            &headers,
            body,
        )
    }

    /// Sets the compatibility rule of `subject` (`BACKWARD`, `NONE`...).
    pub fn set_compatibility(&self, subject: &str, level: &str) {
        let body = format!("{{\"compatibility\":\"{level}\"}}");
        let reply = self.call("PUT", &format!("/config/{subject}"), &body);
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

impl PrivateServer for SchemaRegistry {
    server_process_methods!("Apicurio Registry");

    fn spawn(&mut self) -> Result<(), String> {
        self.process.run_script("registry-run", self.port)?;
        let addr = self.addr();
        let answers = || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                .map_err(|e| format!("no connection on port {}: {e}", addr.port()))?;
            let reply = request(
                addr,
                "GET",
                "/apis/ccompat/v7/subjects",
                &[("connection", "close")],
                "",
            );
            match reply.status {
                200 => Ok(()),
                status => Err(format!("GET /subjects answered {status}: {}", reply.body)),
            }
        };
        let ready =
            (self.process).wait_until_ready(START_TIMEOUT, Duration::from_millis(100), answers);
        self.stopped_unless_ready(ready)
    }
}
