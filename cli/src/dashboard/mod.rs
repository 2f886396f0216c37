//! The web dashboard of `weir run --ui ADDR` ([`serve`]): a page at `/`
//! (its script and style embedded in the binary, nothing fetched from
//! elsewhere; linked relatively, so the same page serves under a prefix),
//! the JSON API under `/api/` and a live stream of it. A worker's
//! (`weir run --worker --ui ADDR`, [`serve_worker`]) lists its tasks and
//! serves each one's dashboard under `/tasks/<task>/` (`tasks.rs`).
//!
//! Routes:
//! - `GET /`, `/app.js`, `/style.css`: the page.
//! - `GET /api/job`: the graph with every node's counters, rates, event
//!   time and plugin ([`api::job`]).
//! - `GET /api/checkpoints`: the recent checkpoints ([`api::checkpoints`]).
//! - `GET /api/events`: failures, restarts, swaps, savepoints ([`api::events`]).
//! - `GET /api/shadow`: each operator's last `weir shadow` report, summed
//!   up ([`api::shadow_reports`]), shown beside the swap button.
//! - `GET /api/stream`: server-sent events: `job` every [`STREAM_PERIOD`],
//!   `checkpoints` and `events` when the journal changed.
//! - `POST /api/savepoint`, `POST /api/swap`: actions, only with
//!   `--ui-actions` (`actions`).
//!
//! Invariants:
//! - The dashboard only reads the job's metrics (relaxed atomic loads and
//!   the journal's locks), and only while a request is served: with nobody
//!   watching it costs the job nothing.
//! - At most [`MAX_CONNECTIONS`] connections are served at once
//!   ([`crate::http::spawn`]).

mod actions;
pub mod api;
mod tasks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use weir::metrics::JobMetrics;

use crate::http::{self, Request, Response};
use actions::Guard;
use api::{JobView, Sampler};

pub use actions::ACTION_TIMEOUT;
pub use tasks::{Boards, serve_worker, tasks_json};

/// Connections served at once (each open page holds one for its stream).
pub const MAX_CONNECTIONS: usize = 32;
/// Time between two `job` events of the stream.
pub const STREAM_PERIOD: Duration = Duration::from_secs(1);

/// Time a stream client has to take one round of events.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the dashboard serves.
struct Shared {
    view: JobView,
    metrics: Arc<JobMetrics>,
    sampler: Sampler,
    state_dir: PathBuf,
    guard: Guard,
}

/// Serves the dashboard of `job` (running on `state_dir`, with live
/// `metrics`) on `addr` from a background thread; takes actions when
/// `actions`. Returns the bound address (useful with port 0).
pub fn serve(
    addr: SocketAddr,
    job: &weir::config::Job,
    state_dir: PathBuf,
    metrics: Arc<JobMetrics>,
    actions: bool,
) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let shared = Arc::new(Shared {
        view: JobView::new(job, &state_dir, actions),
        metrics,
        sampler: Sampler::default(),
        state_dir,
        guard: Guard::new(bound, actions),
    });
    http::spawn(listener, "dashboard", MAX_CONNECTIONS, move |conn| {
        let shared = shared.clone();
        async move { connection(conn, &shared).await }
    })?;
    Ok(bound)
}

/// Serves one connection: one request.
async fn connection(mut conn: TcpStream, shared: &Arc<Shared>) {
    let req = match http::read_request(&mut conn).await {
        Ok(req) => req,
        Err(refused) => return http::respond(&mut conn, &refused).await,
    };
    if let Err(refused) = shared.guard.host(&req) {
        return http::respond(&mut conn, &refused).await;
    }
    serve_request(conn, req, shared).await;
}

/// Serves `req`, a request the guard let through, on `conn`.
async fn serve_request(mut conn: TcpStream, req: Request, shared: &Arc<Shared>) {
    if req.method == "GET" && req.path == "/api/stream" {
        return stream(conn, shared).await;
    }
    let response = route(&req, shared).await;
    http::respond(&mut conn, &response).await;
}

/// The response to every request but the stream.
async fn route(req: &Request, shared: &Arc<Shared>) -> Response {
    let asset = |content_type, body: &'static str| Response {
        status: 200,
        content_type,
        body: body.as_bytes().to_vec(),
    };
    let action = matches!(req.path.as_str(), "/api/savepoint" | "/api/swap");
    if req.method != "GET" && !action {
        return Response::error(
            405,
            format!("{} {}: the dashboard takes GET here", req.method, req.path),
        );
    }
    let json = |v| Response::json(200, &v);
    match req.path.as_str() {
        "/" | "/index.html" => asset("text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => asset("text/javascript; charset=utf-8", APP_JS),
        "/style.css" => asset("text/css; charset=utf-8", STYLE_CSS),
        "/api/job" => json(api::job(&shared.view, &shared.metrics, &shared.sampler)),
        "/api/checkpoints" => json(api::checkpoints(&shared.metrics)),
        "/api/events" => json(api::events(&shared.metrics)),
        "/api/shadow" => {
            // Reports are files of any size: read off the serving threads.
            let shared = shared.clone();
            let read = tokio::task::spawn_blocking(move || {
                api::shadow_reports(&shared.state_dir, shared.view.operators())
            });
            read.await.map_or_else(
                |e| Response::error(500, format!("reading the shadow reports failed: {e}")),
                json,
            )
        }
        _ if action => {
            let body = match shared.guard.action(req) {
                Ok(body) => body,
                Err(refused) => return refused,
            };
            let (shared, path) = (shared.clone(), req.path.clone());
            let done = tokio::task::spawn_blocking(move || match path.as_str() {
                "/api/swap" => actions::swap(&shared.state_dir, shared.view.operators(), &body),
                _ => actions::savepoint(&shared.state_dir, &body),
            });
            done.await
                .unwrap_or_else(|e| Response::error(500, format!("the action failed: {e}")))
        }
        path if path.starts_with("/api/") => Response::error(
            404,
            format!(
                "no API `{path}`: there are /api/job, /api/checkpoints, /api/events, /api/shadow and /api/stream"
            ),
        ),
        path => Response::error(404, format!("no page `{path}`; the dashboard is at /")),
    }
}

/// `GET /api/stream`: the job every [`STREAM_PERIOD`], the checkpoints and
/// events whenever the journal changed, until the client leaves.
async fn stream(mut conn: TcpStream, shared: &Arc<Shared>) {
    if conn
        .write_all(http::event_stream_head().as_bytes())
        .await
        .is_err()
    {
        return;
    }
    let mut journal = None;
    loop {
        let mut out = String::from("retry: 2000\n");
        let job = api::job(&shared.view, &shared.metrics, &shared.sampler);
        out.push_str(&http::event("job", &job.to_string()));
        let changes = shared.metrics.journal.changes();
        if journal != Some(changes) {
            journal = Some(changes);
            let checkpoints = api::checkpoints(&shared.metrics).to_string();
            out.push_str(&http::event("checkpoints", &checkpoints));
            out.push_str(&http::event(
                "events",
                &api::events(&shared.metrics).to_string(),
            ));
        }
        // A client that stops reading is let go rather than held forever.
        let written = tokio::time::timeout(WRITE_TIMEOUT, conn.write_all(out.as_bytes())).await;
        if !matches!(written, Ok(Ok(()))) {
            return;
        }
        tokio::time::sleep(STREAM_PERIOD).await;
    }
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");
