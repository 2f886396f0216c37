//! The control socket `weir.sock` in the state dir ([`ControlSocket`]), on
//! which a running job takes `weir swap` and `weir savepoint` requests, and
//! the client side ([`request_swap`], [`request_savepoint`]).
//!
//! Protocol: one JSON request per connection,
//! `{"swap": {"operator": ..., "plugin": ...}}` or
//! `{"savepoint": {"out": <absolute path or null>, "stop": <bool>}}`,
//! answered with one line, `{"ok": true, "message": ...}` or
//! `{"ok": false, "error": ...}`.
//!
//! Invariants (SECURITY.md, "The control socket"):
//! - The socket is reachable by its owner only, whatever the umask: it is
//!   bound in a private 0700 folder, made 0600 there, and only then renamed
//!   to `weir.sock`. Binding in place and chmodding after would leave a
//!   window in which the socket has the umask's mode and another user's
//!   `connect` succeeds (and stays queued until it is accepted).
//! - Every connection's peer is checked (`SO_PEERCRED`): only the job's own
//!   uid and root are served ([`peer_allowed`]).
//! - A connection costs the job at most [`MAX_REQUEST`] bytes and
//!   [`REQUEST_TIMEOUT`] of reading, and at most [`MAX_CONNECTIONS`] are
//!   served at once ([`Slots`]). A new connection when all are taken sheds
//!   the oldest that has not sent its request yet (answered with an error
//!   and closed), so idle or half-open clients never keep a real request
//!   out; only when every slot holds a request being carried out is the new
//!   one answered with an error and closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, bounded};

use crate::metrics::{EventKind, JobMetrics, Journal};
use crate::run::error::RunError;
use crate::run::savepoint::SavepointRequest;
use crate::run::swap::SwapRequest;

/// A request taken on the control socket, for the driver.
#[derive(Debug)]
pub(crate) enum ControlRequest {
    /// `weir swap`.
    Swap(SwapRequest),
    /// `weir savepoint`.
    Savepoint(SavepointRequest),
}

/// A request as read from its line, before it gets its reply channel.
enum Parsed {
    Swap { operator: String, plugin: PathBuf },
    Savepoint { out: Option<PathBuf>, stop: bool },
}

/// File name of the control socket in the state dir.
pub const CONTROL_SOCKET: &str = "weir.sock";
/// Longest request line the job reads, in bytes (a swap request is an
/// operator id and a path); a longer one is refused.
pub const MAX_REQUEST: usize = 8 * 1024;
/// Connections served at once; one more is answered with an error and
/// closed.
pub const MAX_CONNECTIONS: usize = 4;
/// Time a client has to send its whole request line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Time to wait for a client to take an answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The listening control socket; removed when dropped.
pub(crate) struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Listens on `<state_dir>/weir.sock` and hands every request to
    /// `requests`, answering each connection with the request's reply.
    /// Refused when another job answers on that socket.
    /// Every outcome is recorded in `metrics`' journal.
    pub(crate) fn start(
        state_dir: &Path,
        requests: Sender<ControlRequest>,
        metrics: Arc<JobMetrics>,
    ) -> Result<Self, RunError> {
        let path = state_dir.join(CONTROL_SOCKET);
        let io = |e: std::io::Error| {
            RunError::Swap(format!(
                "cannot open the control socket {}: {e}",
                path.display()
            ))
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        // A socket that accepts belongs to a job running on this state dir;
        // one that refuses was left by a killed run and is replaced.
        if UnixStream::connect(&path).is_ok() {
            return Err(RunError::Swap(format!(
                "another `weir run` is running on {} (its control socket {} answers); stop it, or use another --state-dir",
                state_dir.display(),
                path.display()
            )));
        }
        let listener = bind_owner_only(&path).map_err(io)?;
        let owner = std::fs::metadata(&path).map_err(io)?;
        let owner = std::os::unix::fs::MetadataExt::uid(&owner);
        let slots = Arc::new(Slots::default());
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
                    let id = match slots.admit(&conn) {
                        Ok(id) => id,
                        Err(refusal) => {
                            answer(&conn, Err(refusal));
                            continue;
                        }
                    };
                    let (requests, metrics, mine) =
                        (requests.clone(), metrics.clone(), slots.clone());
                    let served = std::thread::Builder::new()
                        .name("control-conn".into())
                        .spawn(move || {
                            let (kind, what, result) =
                                serve(&conn, owner, &requests, || mine.requested(id));
                            record(&metrics.journal, kind, &what, &result);
                            // A client holding its answer holds no slot.
                            mine.release(id);
                            answer(&conn, result);
                        });
                    if served.is_err() {
                        slots.release(id);
                        tracing::warn!("control socket: cannot start a thread for a connection");
                    }
                }
            })
            .map_err(io)?;
        Ok(ControlSocket { path })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The connections being served, at most [`MAX_CONNECTIONS`].
#[derive(Default)]
struct Slots(Mutex<SlotList>);

#[derive(Default)]
struct SlotList {
    /// Ids handed out so far.
    next: u64,
    /// The connections served, oldest first.
    taken: Vec<Slot>,
}

/// One connection being served.
struct Slot {
    id: u64,
    /// Its request was read whole and is being carried out.
    requested: bool,
    /// A handle on the connection, to shed it.
    conn: UnixStream,
}

impl Slots {
    /// Takes a slot for `conn`, shedding the oldest connection that has not
    /// sent its request when all are taken; `Err` is the refusal to answer
    /// when every slot holds a request being carried out.
    fn admit(&self, conn: &UnixStream) -> Result<u64, String> {
        let handle = conn
            .try_clone()
            .map_err(|e| format!("cannot serve the connection: {e}"))?;
        let (id, shed) = {
            let mut list = self.0.lock().expect("slots lock");
            let mut shed = None;
            if list.taken.len() >= MAX_CONNECTIONS {
                let Some(idle) = list.taken.iter().position(|s| !s.requested) else {
                    return Err(format!(
                        "the job is carrying out {MAX_CONNECTIONS} control requests; retry in a moment"
                    ));
                };
                shed = Some(list.taken.remove(idle));
            }
            list.next += 1;
            let id = list.next;
            list.taken.push(Slot {
                id,
                requested: false,
                conn: handle,
            });
            (id, shed)
        };
        // Answered outside the lock: the write may wait for a slow client.
        if let Some(shed) = shed {
            answer(
                &shed.conn,
                Err(format!(
                    "closed without a request: the oldest of {MAX_CONNECTIONS} idle control connections, to serve a newer one"
                )),
            );
            // Its thread's read returns, and it ends.
            let _ = shed.conn.shutdown(Shutdown::Both);
        }
        Ok(id)
    }

    /// Connection `id` sent its request: it is no longer shed.
    fn requested(&self, id: u64) {
        let mut list = self.0.lock().expect("slots lock");
        if let Some(slot) = list.taken.iter_mut().find(|s| s.id == id) {
            slot.requested = true;
        }
    }

    /// Frees connection `id`'s slot (if it was not shed).
    fn release(&self, id: u64) {
        self.0
            .lock()
            .expect("slots lock")
            .taken
            .retain(|s| s.id != id);
    }
}

/// Binds a listener at `path` that only its owner can connect to: bound in
/// a private 0700 folder beside `path`, made 0600 there, then renamed over
/// `path` (replacing a socket left by a killed run).
fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    let private = path.with_file_name(format!(".{CONTROL_SOCKET}.tmp"));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let bound = (|| {
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
        let inside = private.join(CONTROL_SOCKET);
        let listener = UnixListener::bind(&inside)?;
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inside, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// Whether a peer with uid `peer` may use the control socket of a job run
/// by uid `owner`: the same user, or root.
pub(crate) fn peer_allowed(peer: u32, owner: u32) -> bool {
    peer == owner || peer == 0
}

/// The effective uid of the process at the other end of `conn`.
#[cfg(target_os = "linux")]
fn peer_uid(conn: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes and `len` is the size of
    // `cred`, as SO_PEERCRED requires; the fd is open for the call.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// The effective uid of the process at the other end of `conn`.
#[cfg(not(target_os = "linux"))]
fn peer_uid(conn: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: both out-pointers are valid for writes; the fd is open.
    let rc = unsafe { libc::getpeereid(conn.as_raw_fd(), &raw mut uid, &raw mut gid) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(uid)
}

/// Serves one connection: checks that its peer is `owner` or root, reads
/// its request, hands it to `requests` and waits for the outcome. Returns
/// what the request was about, for the journal, with the outcome.
fn serve(
    conn: &UnixStream,
    owner: u32,
    requests: &Sender<ControlRequest>,
    requested: impl FnOnce(),
) -> (EventKind, String, Result<String, String>) {
    let parsed = (|| {
        let peer =
            peer_uid(conn).map_err(|e| format!("cannot check the client's credentials: {e}"))?;
        if !peer_allowed(peer, owner) {
            tracing::warn!(
                "control socket: refused a request from uid {peer} (the job runs as uid {owner})"
            );
            return Err(format!(
                "permission denied: only uid {owner} (the job's user) or root may control this job, not uid {peer}"
            ));
        }
        let line = read_request(conn)?;
        requested();
        parse(&line)
    })();
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return (EventKind::Control, "control request".into(), Err(e)),
    };
    let (reply, result) = bounded(1);
    let (request, kind, what) = match parsed {
        Parsed::Swap { operator, plugin } => {
            let what = format!("swap of `{operator}` to {}", plugin.display());
            let r = SwapRequest {
                operator,
                plugin,
                reply,
            };
            (ControlRequest::Swap(r), EventKind::Swap, what)
        }
        Parsed::Savepoint { out, stop } => {
            let r = SavepointRequest { out, stop, reply };
            let what = "savepoint".to_string();
            (ControlRequest::Savepoint(r), EventKind::Savepoint, what)
        }
    };
    let outcome = if requests.send(request).is_err() {
        Err("the job is shutting down".to_string())
    } else {
        result
            .recv()
            .unwrap_or_else(|_| Err(format!("the job ended before the {what} completed")))
    };
    (kind, what, outcome)
}

/// Records the outcome of request `what` in `journal`.
fn record(journal: &Journal, kind: EventKind, what: &str, result: &Result<String, String>) {
    match result {
        Ok(message) => journal.event(kind, false, message.clone()),
        Err(error) => journal.event(kind, true, format!("{what} failed: {error}")),
    }
}

/// Writes the answer line of a connection.
fn answer(mut conn: &UnixStream, result: Result<String, String>) {
    let body = match result {
        Ok(message) => serde_json::json!({"ok": true, "message": message}),
        Err(error) => serde_json::json!({"ok": false, "error": error}),
    };
    let _ = writeln!(conn, "{body}");
}

/// Reads one request line, without its newline: at most [`MAX_REQUEST`]
/// bytes, within [`REQUEST_TIMEOUT`].
fn read_request(mut conn: &UnixStream) -> Result<String, String> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let too_slow = || {
        format!(
            "no complete request line within {} s",
            REQUEST_TIMEOUT.as_secs()
        )
    };
    let mut line = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(too_slow());
        }
        conn.set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        let n = match conn.read(&mut buf) {
            Ok(0) => return Err("the request ended before its newline".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(too_slow());
            }
            Err(e) => return Err(format!("reading the request: {e}")),
        };
        let (chunk, done) = match memchr::memchr(b'\n', &buf[..n]) {
            Some(end) => (&buf[..end], true),
            None => (&buf[..n], false),
        };
        line.extend_from_slice(chunk);
        if line.len() > MAX_REQUEST {
            return Err(format!(
                "request longer than {MAX_REQUEST} bytes; a request is one JSON line"
            ));
        }
        if done {
            return String::from_utf8(line).map_err(|_| "the request is not UTF-8".into());
        }
    }
}

/// Reads a request line: a swap (the operator and the new plugin) or a
/// savepoint (where, and whether to stop after it).
fn parse(line: &str) -> Result<Parsed, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad request ({e})"))?;
    if let Some(sp) = v.get("savepoint") {
        let out = match sp.get("out") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(p))
                if Path::new(p).is_absolute() || crate::config::check_store_url(p).is_ok() =>
            {
                Some(PathBuf::from(p))
            }
            Some(other) => {
                return Err(format!(
                    "bad request: `out` must be an absolute path or an object store URL, not {other}"
                ));
            }
        };
        let stop = sp
            .get("stop")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        return Ok(Parsed::Savepoint { out, stop });
    }
    let swap = v
        .get("swap")
        .ok_or("bad request: expected {\"swap\": ...} or {\"savepoint\": ...}")?;
    let field = |k: &str| {
        swap.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or(format!("bad request: missing `{k}`"))
    };
    Ok(Parsed::Swap {
        operator: field("operator")?,
        plugin: PathBuf::from(field("plugin")?),
    })
}

/// How often [`request_swap`] retries while it waits for the socket.
const CONNECT_RETRY: Duration = Duration::from_millis(50);

/// Asks the job running on `state_dir` to swap `operator` to `plugin`, and
/// waits for the outcome (`weir swap`). Waits up to `wait` for a job that is
/// starting to open its socket, then up to `timeout` for the answer.
pub fn request_swap(
    state_dir: &Path,
    operator: &str,
    plugin: &Path,
    wait: Duration,
    timeout: Duration,
) -> Result<String, String> {
    let plugin = std::path::absolute(plugin).map_err(|e| format!("{}: {e}", plugin.display()))?;
    let req = serde_json::json!({"swap": {"operator": operator, "plugin": plugin}});
    request(state_dir, &req, wait, timeout)
}

/// Asks the job running on `state_dir` for a savepoint in `out` (the job's
/// default, `<state dir>/savepoints/savepoint-<id>`, when `None`), stopping
/// the job after it when `stop`, and waits for the outcome (`weir
/// savepoint`); `wait` and `timeout` as for [`request_swap`].
pub fn request_savepoint(
    state_dir: &Path,
    out: Option<&Path>,
    stop: bool,
    wait: Duration,
    timeout: Duration,
) -> Result<String, String> {
    // A folder is made absolute (the job runs elsewhere); an object
    // store's URL is kept as given.
    let out = out
        .map(|o| match o.to_str().is_some_and(crate::config::is_url) {
            true => Ok(o.to_path_buf()),
            false => std::path::absolute(o).map_err(|e| format!("{}: {e}", o.display())),
        })
        .transpose()?;
    let req = serde_json::json!({"savepoint": {"out": out, "stop": stop}});
    request(state_dir, &req, wait, timeout)
}

/// Sends `req` to the job on `state_dir` and reads its answer.
fn request(
    state_dir: &Path,
    req: &serde_json::Value,
    wait: Duration,
    timeout: Duration,
) -> Result<String, String> {
    let path = state_dir.join(CONTROL_SOCKET);
    let waited = Instant::now();
    let conn = loop {
        match UnixStream::connect(&path) {
            Ok(conn) => break conn,
            // Not there yet, or left by a killed run: a starting job
            // replaces it.
            Err(e) if waited.elapsed() >= wait => {
                return Err(format!(
                    "no running job on {} (waited {} s for {}: {e}); start it with `weir run`, or wait longer with --wait",
                    state_dir.display(),
                    wait.as_secs(),
                    path.display()
                ));
            }
            Err(_) => std::thread::sleep(CONNECT_RETRY),
        }
    };
    conn.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    // A job that refused the connection answered and closed it: its answer
    // says why, better than the write's broken pipe.
    let sent = (&conn).write_all(format!("{req}\n").as_bytes());
    let mut line = String::new();
    let read = BufReader::new(&conn).read_line(&mut line);
    if line.is_empty() {
        sent.map_err(|e| format!("cannot send the request to the job: {e}"))?;
        read.map_err(|e| format!("no answer from the job within {} s: {e}", timeout.as_secs()))?;
        return Err("the job closed the connection without answering".into());
    }
    let v: serde_json::Value = serde_json::from_str(&line)
        .map_err(|e| format!("bad answer from the job ({e}): {line}"))?;
    match (
        v["ok"].as_bool(),
        v["message"].as_str(),
        v["error"].as_str(),
    ) {
        (Some(true), Some(m), _) => Ok(m.to_string()),
        (_, _, Some(e)) => Err(e.to_string()),
        _ => Err(format!("bad answer from the job: {line}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_and_root_may_use_the_socket() {
        assert!(peer_allowed(1000, 1000));
        assert!(peer_allowed(0, 1000));
        assert!(peer_allowed(0, 0));
        assert!(!peer_allowed(1001, 1000));
        assert!(!peer_allowed(1000, 0));
    }

    #[test]
    fn a_request_is_read_up_to_its_newline_and_at_most_max_request_bytes() {
        let (client, server) = UnixStream::pair().unwrap();
        (&client).write_all(b"{\"swap\": 1}\nrest").unwrap();
        assert_eq!(read_request(&server).unwrap(), "{\"swap\": 1}");

        let (client, server) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let chunk = [b'x'; 4096];
            let mut sent = 0;
            while let Ok(n) = (&client).write(&chunk) {
                sent += n;
            }
            sent
        });
        let err = read_request(&server).unwrap_err();
        assert!(
            err.contains(&format!("longer than {MAX_REQUEST} bytes")),
            "{err}"
        );
        drop(server);
        assert!(writer.join().unwrap() < 1 << 20, "read far past the cap");
    }

    /// Idle connections are shed oldest first to admit new ones; only a
    /// full house of requests being carried out refuses one.
    #[test]
    fn the_oldest_idle_connection_is_shed_and_requests_are_never_shed() {
        let slots = Slots::default();
        let pairs: Vec<(UnixStream, UnixStream)> = (0..MAX_CONNECTIONS + 2)
            .map(|_| UnixStream::pair().unwrap())
            .collect();
        let ids: Vec<u64> = pairs[..MAX_CONNECTIONS]
            .iter()
            .map(|(_, server)| slots.admit(server).unwrap())
            .collect();
        // Full: the next one sheds the oldest idle connection, the first.
        slots.requested(ids[1]);
        let newer = slots.admit(&pairs[MAX_CONNECTIONS].1).unwrap();
        let mut shed = String::new();
        BufReader::new(&pairs[0].0).read_line(&mut shed).unwrap();
        assert!(shed.contains("closed without a request"), "{shed}");
        // The second sent its request: the third goes next, not the second.
        let newest = slots.admit(&pairs[MAX_CONNECTIONS + 1].1).unwrap();
        let mut shed = String::new();
        BufReader::new(&pairs[2].0).read_line(&mut shed).unwrap();
        assert!(shed.contains("closed without a request"), "{shed}");
        // Every slot holding a request: a new connection is refused.
        for id in [ids[3], newer, newest] {
            slots.requested(id);
        }
        let (_, extra) = UnixStream::pair().unwrap();
        let err = slots.admit(&extra).unwrap_err();
        assert!(err.contains("carrying out"), "{err}");
        // A released slot admits again.
        slots.release(newer);
        slots.admit(&extra).unwrap();
    }

    #[test]
    fn savepoint_requests_name_an_absolute_directory_or_none() {
        let parsed = parse(r#"{"savepoint": {"out": "/sp/one", "stop": true}}"#).unwrap();
        assert!(
            matches!(parsed, Parsed::Savepoint { out: Some(ref o), stop: true } if o == Path::new("/sp/one"))
        );
        let parsed = parse(r#"{"savepoint": {"out": null}}"#).unwrap();
        assert!(matches!(
            parsed,
            Parsed::Savepoint {
                out: None,
                stop: false
            }
        ));
        let err = parse(r#"{"savepoint": {"out": "relative/sp"}}"#)
            .err()
            .unwrap();
        assert!(err.contains("absolute path"), "{err}");
        let err = parse(r#"{"other": 1}"#).err().unwrap();
        assert!(err.contains("\"savepoint\""), "{err}");
    }
}
