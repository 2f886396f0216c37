//! What the dashboard lets a request do: every request passes [`Guard::host`]
//! (a page served on loopback answers only to loopback names, so a web page
//! elsewhere cannot reach it through DNS rebinding); an action (a savepoint,
//! a swap) also [`Guard::action`], and then runs as a control-socket request,
//! exactly as `weir savepoint` and `weir swap` do ([`savepoint`], [`swap`]).
//!
//! Invariants (SECURITY.md, "The dashboard"):
//! - Without `--ui-actions` no request changes the job.
//! - An action is a `POST` with a JSON body (`content-type:
//!   application/json`, which a cross-origin page cannot send without a
//!   preflight the dashboard never approves) and, when the client names its
//!   origin (browsers always do on `POST`), from the dashboard's own origin.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{Request, Response};

/// Time an action waits for the job's answer (as `weir swap` by default).
pub const ACTION_TIMEOUT: Duration = Duration::from_secs(120);
/// Time an action waits for the control socket to accept.
const CONNECT_WAIT: Duration = Duration::from_secs(2);

/// The checks of one dashboard server.
#[derive(Debug, Clone)]
pub struct Guard {
    bound: SocketAddr,
    actions: bool,
}

impl Guard {
    /// The checks of a dashboard listening on `bound`, taking actions when
    /// `actions`.
    pub fn new(bound: SocketAddr, actions: bool) -> Guard {
        Guard { bound, actions }
    }

    /// Refuses a request naming another host when the dashboard listens on
    /// loopback: only `127.0.0.1:PORT`, `localhost:PORT` and `[::1]:PORT`
    /// (or no `host` header, which no browser sends) reach it there.
    pub fn host(&self, req: &Request) -> Result<(), Response> {
        if !self.bound.ip().is_loopback() {
            return Ok(());
        }
        let Some(host) = req.header("host") else {
            return Ok(());
        };
        let port = self.bound.port();
        let allowed = [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        if allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) {
            return Ok(());
        }
        Err(Response::error(
            421,
            format!(
                "this dashboard listens on {} and answers to {} only, not to host `{host}`",
                self.bound, allowed[0]
            ),
        ))
    }

    /// Checks that `req` may change the job and returns its JSON body.
    pub fn action(&self, req: &Request) -> Result<Value, Response> {
        if !self.actions {
            return Err(Response::error(
                403,
                "actions are off: start the job with `weir run --ui ADDR --ui-actions` to take savepoints and swap plugins from the dashboard",
            ));
        }
        if req.method != "POST" {
            return Err(Response::error(
                405,
                format!("{} {} changes the job: use POST", req.method, req.path),
            ));
        }
        let json = (req.header("content-type"))
            .is_some_and(|t| t.split(';').next().unwrap_or_default().trim() == "application/json");
        if !json {
            return Err(Response::error(
                415,
                "an action's body is JSON: send content-type: application/json",
            ));
        }
        if let Some(origin) = req.header("origin") {
            let own = req.header("host").map(|h| format!("http://{h}"));
            if own.as_deref() != Some(origin) {
                return Err(Response::error(
                    403,
                    format!(
                        "refused an action from origin `{origin}`: only the dashboard's own page may act on the job"
                    ),
                ));
            }
        }
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| Response::error(400, format!("the body is not JSON: {e}")))?;
        if !body.is_object() {
            return Err(Response::error(400, "the body must be a JSON object"));
        }
        Ok(body)
    }
}

/// The answer to an action: 200 with the job's message, or 409 with its
/// error.
fn answer(result: Result<String, String>) -> Response {
    match result {
        Ok(message) => Response::json(200, &json!({"ok": true, "message": message})),
        Err(error) => Response::json(409, &json!({"ok": false, "error": error})),
    }
}

/// An optional string field of an action's body.
fn string<'a>(body: &'a Value, field: &str) -> Result<Option<&'a str>, Response> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Response::error(
            400,
            format!("`{field}` must be a string, not {other}"),
        )),
    }
}

/// `POST /api/swap {"operator": ID, "plugin": PATH}`: swaps the operator's
/// plugin as `weir swap` does (a relative path is relative to the folder
/// `weir run` started in). Blocks until the job answers.
pub fn swap(state_dir: &Path, operators: &[String], body: &Value) -> Response {
    let (operator, plugin) = match (string(body, "operator"), string(body, "plugin")) {
        (Err(e), _) | (_, Err(e)) => return e,
        (Ok(Some(op)), Ok(Some(plugin))) if !plugin.trim().is_empty() => (op, plugin.trim()),
        (Ok(None), _) => return Response::error(400, "`operator` is missing"),
        _ => return Response::error(400, "`plugin` is missing: the path of the new .wasm"),
    };
    if !operators.iter().any(|o| o == operator) {
        return Response::error(
            400,
            format!(
                "the job has no operator `{operator}` (it has: {})",
                operators.join(", ")
            ),
        );
    }
    answer(weir::run::request_swap(
        state_dir,
        operator,
        Path::new(plugin),
        CONNECT_WAIT,
        ACTION_TIMEOUT,
    ))
}

/// `POST /api/savepoint {"stop": BOOL, "out": PATH}` (both optional): takes
/// a savepoint as `weir savepoint` does. Blocks until the job answers.
pub fn savepoint(state_dir: &Path, body: &Value) -> Response {
    let out = match string(body, "out") {
        Err(e) => return e,
        Ok(out) => out.filter(|o| !o.trim().is_empty()).map(PathBuf::from),
    };
    let stop = match body.get("stop") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Response::error(400, format!("`stop` must be true or false, not {other}"));
        }
    };
    answer(weir::run::request_savepoint(
        state_dir,
        out.as_deref(),
        stop,
        CONNECT_WAIT,
        ACTION_TIMEOUT,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, headers: &[(&str, &str)], body: &str) -> Request {
        Request {
            method: method.into(),
            path: "/api/swap".into(),
            headers: (headers.iter())
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    const JSON: (&str, &str) = ("content-type", "application/json");
    const HOST: (&str, &str) = ("host", "127.0.0.1:9");

    #[test]
    fn on_loopback_only_loopback_host_names_are_answered() {
        let g = Guard::new("127.0.0.1:9".parse().unwrap(), false);
        for host in ["127.0.0.1:9", "localhost:9", "LOCALHOST:9", "[::1]:9"] {
            assert!(
                g.host(&request("GET", &[("host", host)], "")).is_ok(),
                "{host}"
            );
        }
        for host in ["evil.example:9", "127.0.0.1:10", "localhost"] {
            let e = g.host(&request("GET", &[("host", host)], "")).unwrap_err();
            assert_eq!(e.status, 421, "{host}");
        }
        assert!(g.host(&request("GET", &[], "")).is_ok(), "no host header");
        let open = Guard::new("0.0.0.0:9".parse().unwrap(), false);
        assert!(open.host(&request("GET", &[("host", "box:9")], "")).is_ok());
    }

    #[test]
    fn an_action_needs_actions_on_post_json_and_the_own_origin() {
        let off = Guard::new("127.0.0.1:9".parse().unwrap(), false);
        let ok = request("POST", &[HOST, JSON], "{}");
        assert_eq!(off.action(&ok).unwrap_err().status, 403);
        let on = Guard::new("127.0.0.1:9".parse().unwrap(), true);
        assert_eq!(on.action(&ok).unwrap(), json!({}));
        let status = |r: &Request| on.action(r).unwrap_err().status;
        assert_eq!(status(&request("GET", &[HOST, JSON], "{}")), 405);
        assert_eq!(status(&request("POST", &[HOST], "{}")), 415);
        let form = ("content-type", "text/plain");
        assert_eq!(status(&request("POST", &[HOST, form], "{}")), 415);
        let evil = ("origin", "http://evil.example");
        assert_eq!(status(&request("POST", &[HOST, JSON, evil], "{}")), 403);
        let own = ("origin", "http://127.0.0.1:9");
        assert!(
            on.action(&request("POST", &[HOST, JSON, own], "{}"))
                .is_ok()
        );
        let charset = ("content-type", "application/json; charset=utf-8");
        assert!(on.action(&request("POST", &[HOST, charset], "{}")).is_ok());
        assert_eq!(status(&request("POST", &[HOST, JSON], "[1]")), 400);
        assert_eq!(status(&request("POST", &[HOST, JSON], "{")), 400);
    }

    #[test]
    fn a_swap_names_one_of_the_operators_and_a_plugin() {
        let ops = ["count".to_string()];
        let dir = Path::new("/nonexistent-weir-state");
        let status = |body: Value| swap(dir, &ops, &body).status;
        assert_eq!(status(json!({"plugin": "x.wasm"})), 400);
        assert_eq!(status(json!({"operator": "count"})), 400);
        assert_eq!(status(json!({"operator": "count", "plugin": " "})), 400);
        assert_eq!(status(json!({"operator": 1, "plugin": "x"})), 400);
        let other = swap(dir, &ops, &json!({"operator": "nope", "plugin": "x.wasm"}));
        assert_eq!(other.status, 400);
        assert!(String::from_utf8_lossy(&other.body).contains("(it has: count)"));
        assert_eq!(savepoint(dir, &json!({"stop": "yes"})).status, 400);
        assert_eq!(savepoint(dir, &json!({"out": 3})).status, 400);
    }
}
