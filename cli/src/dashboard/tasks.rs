//! The dashboard of a worker (`weir run --worker --ui ADDR`,
//! [`serve_worker`]): `/` lists the tasks the worker runs, and each task
//! has the whole dashboard of its job at `/tasks/<task>/` (the same page,
//! API and stream, under that prefix; no actions: a task's savepoints and
//! swaps are not worker mode's).
//!
//! Routes:
//! - `GET /`: the tasks, each linked to its dashboard.
//! - `GET /api/tasks`: the tasks as JSON ([`tasks_json`]).
//! - `/tasks/<task>/...`: that task's dashboard ([`super::route`]).
//!
//! Invariant: a task's dashboard reads the metrics of the task's current
//! run; a new run (a restart, a takeover) gets a fresh view.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::net::TcpStream;
use weir::cluster::{TaskRun, TaskState};

use super::actions::Guard;
use super::api::{JobView, Sampler};
use super::{MAX_CONNECTIONS, Shared};
use crate::http::{self, Request, Response};

/// The last checkpoint `run` completed, if any.
fn last_checkpoint(run: &TaskRun) -> Option<u64> {
    let id = run.metrics.checkpoints.last_id.load(Ordering::Relaxed);
    (id > 0).then_some(id)
}

/// Where `run` stands, in a word or its error.
fn state(run: &TaskRun) -> String {
    match &run.state {
        TaskState::Running => "running".into(),
        TaskState::Finished => "finished".into(),
        TaskState::Failed { error, .. } => format!("failed: {error}"),
    }
}

/// Lists the tasks a worker runs now.
pub type Boards = Box<dyn Fn() -> Vec<TaskRun> + Send + Sync>;

/// Everything a worker's dashboard serves.
struct WorkerShared {
    boards: Boards,
    guard: Guard,
    /// Each task's dashboard, for the run whose metrics it reads.
    views: Mutex<BTreeMap<String, Arc<Shared>>>,
}

/// Serves the dashboard of the worker whose tasks `boards` lists on `addr`
/// from a background thread. Returns the bound address.
pub fn serve_worker(addr: SocketAddr, boards: Boards) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let shared = Arc::new(WorkerShared {
        boards,
        guard: Guard::new(bound, false),
        views: Mutex::new(BTreeMap::new()),
    });
    http::spawn(listener, "dashboard", MAX_CONNECTIONS, move |conn| {
        let shared = shared.clone();
        async move { connection(conn, &shared).await }
    })?;
    Ok(bound)
}

/// Serves one connection: one request.
async fn connection(mut conn: TcpStream, shared: &Arc<WorkerShared>) {
    let mut req = match http::read_request(&mut conn).await {
        Ok(req) => req,
        Err(refused) => return http::respond(&mut conn, &refused).await,
    };
    if let Err(refused) = shared.guard.host(&req) {
        return http::respond(&mut conn, &refused).await;
    }
    let Some(rest) = req.path.strip_prefix("/tasks/") else {
        let response = route(&req, shared);
        return http::respond(&mut conn, &response).await;
    };
    let (task, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (task, path) = (task.to_owned(), format!("/{path}"));
    if path == "/" && !req.path.ends_with('/') {
        // The page's links resolve under the task only with the slash.
        return http::respond(&mut conn, &to_slash(&task)).await;
    }
    let Some(view) = shared.view(&task) else {
        let missing = Response::error(
            404,
            format!("this worker runs no task `{task}`; its tasks are at /"),
        );
        return http::respond(&mut conn, &missing).await;
    };
    req.path = path;
    super::serve_request(conn, req, &view).await;
}

/// The worker's own pages.
fn route(req: &Request, shared: &WorkerShared) -> Response {
    if req.method != "GET" {
        return Response::error(
            405,
            format!("{} {}: the dashboard takes GET here", req.method, req.path),
        );
    }
    match req.path.as_str() {
        "/" | "/index.html" => Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: index(&(shared.boards)()).into_bytes(),
        },
        "/api/tasks" => Response::json(200, &tasks_json(&(shared.boards)())),
        path => Response::error(
            404,
            format!("no page `{path}`; the worker's tasks are at /"),
        ),
    }
}

impl WorkerShared {
    /// The dashboard of `task`'s current run, made on first sight of it.
    fn view(&self, task: &str) -> Option<Arc<Shared>> {
        let board = (self.boards)()
            .into_iter()
            .find(|b| b.id.to_string() == task)?;
        let metrics = board.metrics;
        let mut views = self.views.lock().unwrap();
        if let Some(view) = views
            .get(task)
            .filter(|v| Arc::ptr_eq(&v.metrics, &metrics))
        {
            return Some(view.clone());
        }
        let state_dir: PathBuf = board.job.checkpoint.dir.clone();
        let view = Arc::new(Shared {
            view: JobView::new(&board.job, &state_dir, false),
            metrics,
            sampler: Sampler::default(),
            state_dir,
            guard: self.guard.clone(),
        });
        views.insert(task.to_owned(), view.clone());
        Some(view)
    }
}

/// `GET /api/tasks`: `[{"task", "job", "state", "checkpoint", "url"}]`.
pub fn tasks_json(boards: &[TaskRun]) -> Value {
    let tasks = boards.iter().map(|b| {
        json!({
            "task": b.id.to_string(),
            "job": b.job.name,
            "state": state(b),
            "checkpoint": last_checkpoint(b),
            "url": format!("/tasks/{}/", b.id),
        })
    });
    Value::Array(tasks.collect())
}

/// `GET /`: the tasks, as a page that refreshes itself.
fn index(boards: &[TaskRun]) -> String {
    let mut rows = String::new();
    for b in boards {
        let checkpoint = last_checkpoint(b);
        rows.push_str(&format!(
            "<tr><td><a href=\"/tasks/{task}/\">{task}</a></td><td>{job}</td><td>{state}</td><td>{checkpoint}</td></tr>\n",
            task = escape(&b.id.to_string()),
            job = escape(&b.job.name),
            state = escape(&state(b)),
            checkpoint = checkpoint.map_or("none yet".into(), |c| c.to_string()),
        ));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\"><title>weir worker</title></head>\n<body><h1>Tasks of this worker</h1>\n<table id=\"tasks\"><thead><tr><th>task</th><th>job</th><th>state</th><th>last checkpoint</th></tr></thead><tbody>\n{rows}</tbody></table>\n<p>{} task(s). Each task's dashboard is its job's; the cluster's view is <code>weir workers JOB</code>.</p></body></html>\n",
        boards.len()
    )
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A page that sends the browser on to `/tasks/<task>/`.
fn to_slash(task: &str) -> Response {
    let to = format!("/tasks/{}/", escape(task));
    Response {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: format!(
            "<!doctype html>\n<meta http-equiv=\"refresh\" content=\"0; url={to}\"><a href=\"{to}\">{to}</a>\n"
        )
        .into_bytes(),
    }
}
