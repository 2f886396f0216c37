//! The control socket `weir.sock` in the state dir ([`ControlSocket`]), on
//! which a running job takes `weir swap` requests, and the client side
//! ([`request_swap`]).
//!
//! Protocol: one JSON request per connection,
//! `{"swap": {"operator": ..., "plugin": ...}}`, answered with one line,
//! `{"ok": true, "message": ...}` or `{"ok": false, "error": ...}`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::{Sender, bounded};

use crate::run::error::RunError;
use crate::run::swap::SwapRequest;

/// File name of the control socket in the state dir.
pub const CONTROL_SOCKET: &str = "weir.sock";

/// The listening control socket; removed when dropped.
pub(crate) struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Listens on `<state_dir>/weir.sock` and hands every request to
    /// `requests`, answering each connection with the request's reply.
    pub(crate) fn start(state_dir: &Path, requests: Sender<SwapRequest>) -> Result<Self, RunError> {
        let path = state_dir.join(CONTROL_SOCKET);
        let io = |e: std::io::Error| {
            RunError::Swap(format!(
                "cannot open the control socket {}: {e}",
                path.display()
            ))
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        // A socket left by a killed run; the checkpoint store's lock already
        // guarantees no other run uses this state dir.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(io)?;
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let requests = requests.clone();
                    std::thread::spawn(move || serve(conn, &requests));
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

/// Answers one connection.
fn serve(conn: UnixStream, requests: &Sender<SwapRequest>) {
    let mut line = String::new();
    let mut reader = BufReader::new(&conn);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let answer = match parse(&line) {
        Err(e) => Err(e),
        Ok((operator, plugin)) => {
            let (reply, result) = bounded(1);
            if requests
                .send(SwapRequest {
                    operator,
                    plugin,
                    reply,
                })
                .is_err()
            {
                Err("the job is shutting down".to_string())
            } else {
                result
                    .recv()
                    .unwrap_or_else(|_| Err("the job ended before the swap completed".into()))
            }
        }
    };
    let body = match answer {
        Ok(message) => serde_json::json!({"ok": true, "message": message}),
        Err(error) => serde_json::json!({"ok": false, "error": error}),
    };
    let mut conn = &conn;
    let _ = writeln!(conn, "{body}");
}

/// Reads a request line: the operator and the new plugin.
fn parse(line: &str) -> Result<(String, PathBuf), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad request ({e})"))?;
    let swap = v
        .get("swap")
        .ok_or("bad request: expected {\"swap\": ...}")?;
    let field = |k: &str| {
        swap.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or(format!("bad request: missing `{k}`"))
    };
    Ok((field("operator")?, PathBuf::from(field("plugin")?)))
}

/// Asks the job running on `state_dir` to swap `operator` to `plugin`, and
/// waits for the outcome (`weir swap`).
pub fn request_swap(
    state_dir: &Path,
    operator: &str,
    plugin: &Path,
    timeout: Duration,
) -> Result<String, String> {
    let path = state_dir.join(CONTROL_SOCKET);
    let conn = UnixStream::connect(&path).map_err(|e| {
        format!(
            "no running job on {} ({}: {e}); start it with `weir run`",
            state_dir.display(),
            path.display()
        )
    })?;
    conn.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let plugin = std::path::absolute(plugin).map_err(|e| format!("{}: {e}", plugin.display()))?;
    let req = serde_json::json!({"swap": {"operator": operator, "plugin": plugin}});
    (&conn)
        .write_all(format!("{req}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| format!("no answer from the job within {} s: {e}", timeout.as_secs()))?;
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
