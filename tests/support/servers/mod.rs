//! Real servers for the connectors' integration tests, each a private
//! instance: [`Nats`] (nats-server with JetStream), [`Postgres`]
//! (PostgreSQL) and [`Kafka`] (an Apache Kafka broker; [`MockKafka`] is
//! librdkafka's mock cluster for fault injection). Each server process runs
//! in a temporary folder of its own (its data and its logs), on a free
//! loopback port, and is stopped when dropped. A watchdog process also
//! stops it and removes the folder when the test process ends without
//! dropping it (a `static` shared server, a killed test binary).
//!
//! The binaries come from the Debian packages `nats-server`, `postgresql`
//! and a Java runtime, and the Kafka broker's jars from Maven Central
//! (`scripts/services.sh install`, which `scripts/test.sh` runs). A missing
//! binary fails the test with a message saying how to install it: tests
//! never skip silently.

pub mod kafka;
pub mod nats_client;
mod process;

pub use kafka::{Clients, Kafka, KafkaMessage, MockKafka, Outgoing};

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
    panic!(
        "{server} is not installed ({reason}); run `scripts/services.sh install` (or apt-get install nats-server postgresql)"
    );
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

/// Polls until a NATS server on 127.0.0.1:`port` accepts a connection
/// and greets it with `INFO` (a connection alone could be another
/// process's that holds the port); an error when `exited` reports that the
/// server ended, or after [`START_TIMEOUT`].
fn wait_for_nats(port: u16, mut exited: impl FnMut() -> Option<String>) -> Result<(), String> {
    let start = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let greets = |stream: TcpStream| {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut first = [0; 5];
        stream.take(5).read_exact(&mut first).is_ok() && &first == b"INFO "
    };
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok_and(greets) {
            return Ok(());
        }
        if let Some(why) = exited() {
            return Err(format!(
                "it exited ({why}) before accepting connections on port {port}"
            ));
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(format!(
                "it did not accept connections on port {port} within {START_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
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

/// What a JetStream publish acknowledgement says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubAck {
    pub stream: String,
    pub seq: u64,
    /// The message id was seen within the stream's duplicate window: the
    /// message was not stored again (`seq` is the first one's).
    pub duplicate: bool,
}

/// A message read back from a stream: sequence, subject, payload, and its
/// `Nats-Msg-Id` header.
pub type StreamMsg = (u64, String, Vec<u8>, Option<String>);

/// A private nats-server with JetStream (store in `DIR/js`), its output in
/// `DIR/nats.log`.
pub struct Nats {
    port: u16,
    bin: PathBuf,
    process: ServerProcess,
}

impl Nats {
    /// Starts a server on a free port; panics (with its log) when it cannot.
    pub fn start() -> Nats {
        let bin = nats_bin().unwrap_or_else(|| {
            not_installed(
                "NATS (nats-server)",
                "no nats-server on PATH or in /usr/sbin",
            )
        });
        let mut nats = Nats {
            port: 0,
            bin,
            process: ServerProcess::new("nats"),
        };
        // Another process may take the free port before the server binds it.
        for attempt in 1.. {
            nats.port = free_port();
            match nats.spawn() {
                Ok(()) => break,
                Err(_) if attempt < 3 && nats.log().contains("address already in use") => {}
                Err(e) => failed_to_start("NATS (nats-server)", &e, &nats.process.log_path()),
            }
        }
        nats
    }

    fn spawn(&mut self) -> Result<(), String> {
        let js = self.process.dir().join("js");
        let log = self
            .process
            .open_log(&format!("{} -p {}", self.bin.display(), self.port));
        let child = Command::new(&self.bin)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&js)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", self.bin.display()))?;
        self.process.set_child(child, false);
        let ready = wait_for_nats(self.port, || self.process.exited());
        if ready.is_err() {
            self.stop();
        }
        ready
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's folder: `js/` (the JetStream store), `nats.log`.
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The server's output so far (every start of it).
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Kills the server (SIGKILL, as a crash) and waits for it to end.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Stops the server (when running) and starts it again on the same
    /// port with the same store: streams and their messages survive.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            failed_to_start(
                "NATS (nats-server)",
                &format!("restarting on port {}: {e}", self.port),
                &self.process.log_path(),
            );
        }
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
            .unwrap_or_else(|e| panic!("connecting to NATS at {}: {e}", self.url()))
    }

    /// Sends a JetStream API request (`$JS.API.<api>`, `body` as JSON, none
    /// when null) and returns the reply, errors included (`{"error":
    /// {"code":404,"err_code":10059,"description":"stream not found"},..}`).
    pub fn js_api(&self, api: &str, body: &Value) -> Value {
        js_request(&mut self.client(), api, body)
    }

    /// Creates a file-backed stream `name` on `subjects` with a two-minute
    /// duplicate window (creating the same stream again is no error).
    pub fn create_stream(&self, name: &str, subjects: &[&str]) {
        let body = json!({
            "name": name,
            "subjects": subjects,
            "storage": "file",
            "duplicate_window": 120_000_000_000u64,
        });
        let reply = self.js_api(&format!("STREAM.CREATE.{name}"), &body);
        assert!(
            reply.get("error").is_none(),
            "creating stream {name} on {}: {reply}",
            self.url()
        );
    }

    /// The `STREAM.INFO` reply of stream `name` (its `config` and `state`),
    /// `None` when there is no such stream.
    pub fn stream_info(&self, name: &str) -> Option<Value> {
        let reply = self.js_api(&format!("STREAM.INFO.{name}"), &Value::Null);
        if reply["error"]["err_code"] == 10059 {
            return None;
        }
        assert!(
            reply.get("error").is_none(),
            "STREAM.INFO.{name} on {}: {reply}",
            self.url()
        );
        Some(reply)
    }

    /// Publishes each payload to `subject` and waits for its JetStream ack.
    pub fn publish(&self, subject: &str, payloads: &[&[u8]]) -> Vec<PubAck> {
        let mut client = self.client();
        payloads
            .iter()
            .map(|p| self.publish_one(&mut client, subject, &[], p))
            .collect()
    }

    /// Publishes `payload` to `subject` with header `Nats-Msg-Id: id` and
    /// waits for its ack (`duplicate` when `id` was published before).
    pub fn publish_with_id(&self, subject: &str, id: &str, payload: &[u8]) -> PubAck {
        self.publish_one(&mut self.client(), subject, &[("Nats-Msg-Id", id)], payload)
    }

    /// Publishes message `i` = `message(i)` (an optional message id and a
    /// payload) to `subject` for `i` = 0, 1, ..., each once the previous one
    /// is acknowledged, until `stop` is set; returns how many it published.
    pub fn publish_until(
        &self,
        subject: &str,
        stop: &std::sync::atomic::AtomicBool,
        message: impl Fn(u64) -> (Option<String>, Vec<u8>),
    ) -> u64 {
        let mut client = self.client();
        let mut i = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let (id, payload) = message(i);
            let headers: Vec<(&str, &str)> =
                id.iter().map(|id| ("Nats-Msg-Id", id.as_str())).collect();
            self.publish_one(&mut client, subject, &headers, &payload);
            i += 1;
        }
        i
    }

    fn publish_one(
        &self,
        client: &mut Client,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> PubAck {
        let reply = client
            .request(subject, headers, payload)
            .unwrap_or_else(|e| {
                panic!(
                    "publishing to {subject} on {} (is a stream bound to it?): {e}",
                    self.url()
                )
            });
        let ack: Value = serde_json::from_slice(&reply.payload).unwrap_or_else(|e| {
            panic!(
                "the ack of a publish to {subject} is not JSON ({e}): {:?}",
                reply.payload
            )
        });
        match (ack["stream"].as_str(), ack["seq"].as_u64()) {
            (Some(stream), Some(seq)) if ack.get("error").is_none() => PubAck {
                stream: stream.to_owned(),
                seq,
                duplicate: ack["duplicate"] == true,
            },
            _ => panic!("publishing to {subject} on {}: {ack}", self.url()),
        }
    }

    /// Every message of `stream`, in order (first to last sequence, deleted
    /// ones left out).
    pub fn read_stream(&self, stream: &str) -> Vec<StreamMsg> {
        let mut client = self.client();
        let info = js_request(&mut client, &format!("STREAM.INFO.{stream}"), &Value::Null);
        let state = &info["state"];
        let (Some(first), Some(last), Some(count)) = (
            state["first_seq"].as_u64(),
            state["last_seq"].as_u64(),
            state["messages"].as_u64(),
        ) else {
            panic!("STREAM.INFO.{stream} on {}: {info}", self.url());
        };
        let mut messages = Vec::new();
        for seq in first..=last {
            if count == 0 {
                break;
            }
            let reply = js_request(
                &mut client,
                &format!("STREAM.MSG.GET.{stream}"),
                &json!({ "seq": seq }),
            );
            if reply["error"]["err_code"] == 10037 {
                continue; // no message found: deleted
            }
            let message = &reply["message"];
            let (Some(subject), Some(got)) = (message["subject"].as_str(), message["seq"].as_u64())
            else {
                panic!(
                    "STREAM.MSG.GET.{stream} seq {seq} on {}: {reply}",
                    self.url()
                );
            };
            // An empty payload and a message without headers leave out
            // `data` and `hdrs`.
            let decode = |field: &str| match message[field].as_str() {
                Some(b64) => BASE64
                    .decode(b64)
                    .unwrap_or_else(|e| panic!("{field} of {reply}: {e}")),
                None => Vec::new(),
            };
            let payload = decode("data");
            let hdrs = decode("hdrs");
            let id = if hdrs.is_empty() {
                None
            } else {
                let headers =
                    Headers::parse(&hdrs).unwrap_or_else(|e| panic!("hdrs of {reply}: {e}"));
                headers.get("Nats-Msg-Id").map(str::to_owned)
            };
            messages.push((got, subject.to_owned(), payload, id));
        }
        messages
    }
}

fn js_request(client: &mut Client, api: &str, body: &Value) -> Value {
    let payload = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let reply = client
        .request(&format!("$JS.API.{api}"), &[], &payload)
        .unwrap_or_else(|e| panic!("$JS.API.{api}: {e}"));
    serde_json::from_slice(&reply.payload).unwrap_or_else(|e| {
        panic!(
            "the reply to $JS.API.{api} is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&reply.payload)
        )
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// nats-server on PATH, else where Debian puts it (`/usr/sbin`, not on a
/// normal user's PATH).
fn nats_bin() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|bin| is_executable(bin))
}

/// A private PostgreSQL: data in `DIR/pg`, log in `DIR/pg.log`, its Unix
/// socket in `DIR/sock`; user `postgres`, trusted, database `postgres`.
/// As root, initdb and the server run as user `postgres`.
pub struct Postgres {
    port: u16,
    /// The folder of initdb, pg_ctl and psql.
    bin: PathBuf,
    as_postgres: bool,
    running: bool,
    // Dropped in this order, after `Drop::drop` stopped the server.
    _watchdog: Watchdog,
    dir: TempDir,
}

impl Postgres {
    /// Creates a cluster and starts it on a free port; panics (with its
    /// log) when it cannot.
    pub fn start() -> Postgres {
        let bin = pg_bindir()
            .unwrap_or_else(|| not_installed("PostgreSQL", "no /usr/lib/postgresql/*/bin/initdb"));
        let dir = server_dir("weir-pg-");
        fs::create_dir(dir.path().join("sock")).unwrap();
        let as_postgres = is_root();
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .output();
            match chown {
                Ok(out) if out.status.success() => {}
                Ok(out) => not_installed(
                    "PostgreSQL",
                    &format!(
                        "chown to user postgres: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                ),
                Err(e) => panic!("running chown: {e}"),
            }
        }
        let pg_ctl = bin.join("pg_ctl");
        let mut stop: Vec<&Path> = Vec::new();
        if as_postgres {
            stop.extend(["runuser", "-u", "postgres", "--"].map(Path::new));
        }
        stop.push(&pg_ctl);
        let watchdog = Watchdog::spawn(
            dir.path(),
            "d=$1; shift; if [ -e \"$d/pg/postmaster.pid\" ]; then \"$@\" -D \"$d/pg\" -m immediate stop; fi; set -- \"$d\"",
            &stop,
        );
        let mut pg = Postgres {
            port: 0,
            bin,
            as_postgres,
            running: false,
            _watchdog: watchdog,
            dir,
        };

        let log = pg.dir.path().join("initdb.log");
        let out = File::create(&log).unwrap();
        let status = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.dir.path().join("pg"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => failed_to_start("PostgreSQL", &format!("initdb: {s}"), &log),
            Err(e) => failed_to_start("PostgreSQL", &format!("running initdb: {e}"), &log),
        }
        for attempt in 1.. {
            pg.port = free_port();
            match pg.spawn() {
                Ok(()) => break,
                Err(_) if attempt < 3 && pg.log().contains("Address already in use") => {}
                Err(e) => failed_to_start("PostgreSQL", &e, &pg.log_path()),
            }
        }
        pg
    }

    /// `bin/<program>`, run as user postgres when the tests run as root.
    fn command(&self, program: &str) -> Command {
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"])
                .arg(self.bin.join(program));
            cmd
        } else {
            Command::new(self.bin.join(program))
        };
        // A folder user postgres can enter (the tests' may be under /root).
        cmd.current_dir(self.dir.path()).stdin(Stdio::null());
        cmd
    }

    fn spawn(&mut self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().join("sock").display()
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("pg"))
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "30", "start", "-o", &options])
            .output()
            .map_err(|e| format!("running pg_ctl: {e}"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            return Err(format!("pg_ctl start: {}: {}", out.status, said.trim()));
        }
        self.running = true;
        Ok(())
    }

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's folder: `pg/` (the data), `pg.log`, `sock/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("pg.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Whether the server was started and not stopped since.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Stops the server at once (`pg_ctl -m immediate stop`: as a crash;
    /// committed transactions survive) and waits for it to end.
    pub fn stop(&mut self) {
        if !std::mem::replace(&mut self.running, false) {
            return;
        }
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("pg"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "pg_ctl stop: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("running pg_ctl stop: {e}"),
        }
    }

    /// Stops the server (when running) and starts it again on the same
    /// port with the same data.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            failed_to_start(
                "PostgreSQL",
                &format!("restarting on port {}: {e}", self.port),
                &self.log_path(),
            );
        }
    }

    /// Runs `sql` with psql (one `-c`: several statements run in one
    /// transaction) and returns its output, unaligned and tuples only
    /// (`1|a` a row, rows a line each), trimmed; panics with psql's stderr
    /// when it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.try_psql(sql)
            .unwrap_or_else(|e| panic!("psql -c {sql:?} on {}: {e}", self.url()))
    }

    /// As [`Postgres::psql`], with psql's stderr as the error.
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        let psql = self.bin.join("psql");
        let psql = if psql.is_file() {
            psql
        } else {
            PathBuf::from("psql")
        };
        let out = Command::new(&psql)
            .args([
                "-X",
                "-A",
                "-t",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                &self.url(),
                "-c",
                sql,
            ])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", psql.display()));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with initdb and pg_ctl,
/// else the folder of the pg_ctl on PATH.
fn pg_bindir() -> Option<PathBuf> {
    let complete =
        |dir: &Path| is_executable(&dir.join("initdb")) && is_executable(&dir.join("pg_ctl"));
    let newest = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: Vec<u32> = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|n| n.parse().ok())
                .collect::<Option<_>>()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| complete(bin))
        .max();
    if let Some((_, bin)) = newest {
        return Some(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter_map(|dir| fs::canonicalize(dir.join("pg_ctl")).ok())
        .filter_map(|pg_ctl| pg_ctl.parent().map(Path::to_path_buf))
        .find(|dir| complete(dir))
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
