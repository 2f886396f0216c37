//! The web dashboard of `weir run --ui`: its JSON API on a running job, and
//! its page in headless Chromium (the graph names every node, counters move,
//! checkpoints and failures appear, actions work from the keyboard and a
//! failed swap shows its error), and the rules of its actions.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::Value;
use weir_tests::browser::{Browser, Page};
use weir_tests::cli::Weir;
use weir_tests::http::{self, Events};
use weir_tests::job_dir::{JobDir, signal};
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Restart, Sink, Source};
use weir_tests::jobs::count_words;
use weir_tests::plugins;
use weir_tests::running::Running;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// [`count_words`] over a generator (2,000 words a second for hours), with
/// `count` feeding a second sink, `copy`.
fn job(name: &str) -> JobFile {
    count_words(name, Checkpoint::every("300ms"), 2000, 2)
        .source_with("words", |_| {
            Source::generator("words", 100_000_000).rate(2000)
        })
        .sink(Sink::jsonl("copy", "copy.jsonl").input("count"))
}

/// A job running with its dashboard.
struct Dashboard {
    j: JobDir,
    run: Running,
    addr: SocketAddr,
}

impl Dashboard {
    /// Runs `job` with `--ui 0` and `args`; returns once the dashboard
    /// listens.
    fn start(job: JobFile, args: &[&str]) -> Dashboard {
        let j = JobDir::new(WEIR, job, &[]);
        let mut all = vec!["--ui", "0", "--progress-every", "0"];
        all.extend(args);
        let mut run = j.spawn(&all);
        let line = run.wait_for_line("the dashboard's address", |l| {
            l.contains("dashboard: http://")
        });
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Dashboard { j, run, addr }
    }

    fn get(&self, path: &str) -> Value {
        let reply = http::get(self.addr, path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        reply.json()
    }

    /// Waits until `/api/<path>` satisfies `done`; returns that document.
    fn wait_api(&self, what: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_until(what, PATIENCE, || {
            let v = self.get(path);
            done(&v).then_some(v)
        })
    }

    /// Stops the job with SIGTERM; returns its stderr.
    fn stop(self) -> String {
        signal(&self.run.child, "-TERM");
        let (status, stderr) = self.run.wait();
        assert!(status.success(), "{stderr}");
        stderr
    }

    /// The dashboard opened in `browser`, once each of `steps` held in
    /// turn ([`wait_page`]).
    fn page<'b>(&self, browser: &'b Browser, steps: &[(&str, &str)]) -> Page<'b> {
        let page = browser.open(&format!("http://{}/", self.addr));
        let page = page.unwrap_or_else(|e| panic!("opening the dashboard: {e}"));
        for (what, js) in steps {
            wait_page(&page, what, js);
        }
        page
    }
}

fn browser() -> Browser {
    Browser::launch().unwrap_or_else(|e| panic!("{e}"))
}

/// Waits up to [`PATIENCE`] for `js` to be truthy on `page`.
fn wait_page(page: &Page<'_>, what: &str, js: &str) -> Value {
    page.wait_for(what, js, PATIENCE)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn node<'a>(job: &'a Value, id: &str) -> &'a Value {
    let nodes = job["nodes"].as_array().unwrap();
    nodes.iter().find(|n| n["id"] == id).unwrap()
}

#[test]
fn api_job_is_the_graph_with_every_node_its_plugin_and_live_counters() {
    let d = Dashboard::start(job("api"), &[]);
    let first = d.get("/api/job");
    assert_eq!(first["job"], "api");
    let ids: Vec<&str> = (first["nodes"].as_array().unwrap().iter())
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["words", "count", "out", "copy"]);
    let kinds: Vec<&str> = (first["nodes"].as_array().unwrap().iter())
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["source", "operator", "sink", "sink"]);
    assert_eq!(node(&first, "words")["type"], "generator");
    assert_eq!(node(&first, "out")["type"], "file");
    assert_eq!(node(&first, "count")["instances"], 2);
    let edges: Vec<(&str, &str)> = (first["edges"].as_array().unwrap().iter())
        .map(|e| (e["from"].as_str().unwrap(), e["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        edges,
        [("words", "count"), ("count", "out"), ("count", "copy")]
    );
    assert_eq!(first["actions"], false);

    // The plugin behind the operator, by the sha256 of its bytes.
    let bytes = std::fs::read(plugins::WORD_COUNT).unwrap();
    let plugin = &d.wait_api("the plugin record", "/api/job", |v| {
        !node(v, "count")["plugin"].is_null()
    });
    let plugin = &node(plugin, "count")["plugin"];
    assert_eq!(plugin["sha256"], weir::wasm::sha256_hex(&bytes));
    assert_eq!(plugin["name"], "word-count");
    assert_eq!(plugin["size"], bytes.len() as u64);

    // Counters move, and rates follow over two samples.
    let records = |v: &Value| node(v, "count")["records_in"].as_u64().unwrap();
    let before = records(&d.get("/api/job"));
    let later = d.wait_api("the operator's input to grow", "/api/job", |v| {
        records(v) > before && !node(v, "count")["rates"].is_null()
    });
    let rates = &node(&later, "count")["rates"];
    assert!(rates["in_per_s"].as_f64().unwrap() > 0.0, "{rates}");
    let bp = rates["backpressure"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&bp), "{rates}");

    // A sink's record latency: exactly-once `out` observes its records at
    // each commit, with checkpoints every 300 ms.
    let out = d.wait_api("the sink's record latency", "/api/job", |v| {
        node(v, "out")["record_latency"]["count"].as_u64() > Some(0)
    });
    let latency = &node(&out, "out")["record_latency"];
    let buckets = latency["buckets"].as_array().unwrap();
    let in_buckets: u64 = buckets.iter().map(|b| b[1].as_u64().unwrap()).sum();
    assert!(
        in_buckets > 0 && in_buckets <= latency["count"].as_u64().unwrap(),
        "{latency}"
    );
    assert!(latency["sum_seconds"].as_f64().unwrap() > 0.0, "{latency}");
    assert!(
        node(&out, "count")["record_latency"].is_null(),
        "only sinks"
    );

    // The checkpoint history, newest first.
    let cps = d.wait_api("two completed checkpoints", "/api/checkpoints", |v| {
        v["history"].as_array().unwrap().len() >= 2
    });
    let history = cps["history"].as_array().unwrap();
    let (newest, older) = (&history[0], &history[1]);
    assert!(newest["id"].as_u64() > older["id"].as_u64(), "{cps}");
    assert_eq!(newest["error"], Value::Null);
    assert!(newest["bytes_written"].as_u64().unwrap() > 0, "{newest}");
    assert!(cps["completed"].as_u64().unwrap() >= 2);

    // The stream: the job at once, then the journal's documents.
    let mut events = Events::open(d.addr, "/api/stream");
    let (name, data) = events.next_event();
    assert_eq!(name, "job");
    let streamed: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(streamed["nodes"].as_array().unwrap().len(), 4);
    let (name, data) = events.next_event();
    assert_eq!(name, "checkpoints");
    assert!(serde_json::from_str::<Value>(&data).unwrap()["history"].is_array());
    assert_eq!(events.next_event().0, "events");

    // Read-only: no action without --ui-actions, and the job runs on.
    let json = ("content-type", "application/json");
    let refused = http::request(d.addr, "POST", "/api/savepoint", &[json], "{}");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_has(&refused.body, "--ui-actions");
    assert!(!d.j.state_dir().join("savepoints").exists());
    // Another host name (DNS rebinding), an unknown API, another method.
    let as_host = |name: &str| {
        let host = format!("{name}:{}", d.addr.port());
        http::request(d.addr, "GET", "/api/job", &[("host", &host)], "")
    };
    let rebound = as_host("evil.example");
    assert_eq!(rebound.status, 421, "{}", rebound.body);
    assert_eq!(as_host("localhost").status, 200);
    assert_eq!(http::get(d.addr, "/api/nope").status, 404);
    assert_eq!(
        http::request(d.addr, "DELETE", "/api/job", &[], "").status,
        405
    );
    let page = http::get(d.addr, "/");
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-security-policy")
            .is_some_and(|c| c.contains("script-src 'self'"))
    );
    let after = records(&d.get("/api/job"));
    d.wait_api("the job to go on", "/api/job", |v| records(v) > after);
    d.stop();
}

#[test]
fn the_page_draws_every_node_with_moving_counters_and_the_checkpoints() {
    let d = Dashboard::start(job("page"), &[]);
    let b = browser();
    let page = d.page(&b, &[]);
    let ids = wait_page(
        &page,
        "the graph's nodes",
        "(() => { const ids = [...document.querySelectorAll('#graph svg [data-node-id]')].map(n => n.dataset.nodeId); return ids.length === 4 && ids; })()",
    );
    let mut ids: Vec<String> = serde_json::from_value(ids).unwrap();
    ids.sort();
    assert_eq!(ids, ["copy", "count", "out", "words"]);
    // Drawn as a graph: an edge per connection, each node's name as text.
    let edges = page
        .eval("document.querySelectorAll('#graph path.edge').length")
        .unwrap();
    assert_eq!(edges, 3);
    let names = page
        .eval("[...document.querySelectorAll('#graph .node-id')].map(t => t.textContent).sort()")
        .unwrap();
    assert_eq!(names, serde_json::json!(["copy", "count", "out", "words"]));
    assert_eq!(
        page.eval("document.getElementById('job-name').textContent")
            .unwrap(),
        "page"
    );

    // The operator's counters move without a reload.
    let totals = "document.querySelector('[data-node-id=\"count\"] .node-totals').textContent";
    let first = wait_page(
        &page,
        "the operator's totals",
        &format!(
            "(() => {{ const t = {totals}; return /\\d/.test(t) && !t.startsWith('0 in') && t; }})()"
        ),
    );
    wait_page(
        &page,
        "the operator's totals to change",
        &format!("{totals} !== {first}"),
    );
    wait_page(
        &page,
        "a rate",
        "/in [0-9.]+[KM]?\\/s/.test(document.querySelector('[data-node-id=\"count\"] .node-rates').textContent)",
    );
    page.eval("window.__loaded = true").unwrap();

    // A completed checkpoint appears in the history.
    wait_page(
        &page,
        "a completed checkpoint row",
        "document.querySelector('#checkpoints tbody tr.completed')",
    );
    let row = page
        .eval("document.querySelector('#checkpoints tbody tr.completed').textContent")
        .unwrap();
    assert!(row.as_str().unwrap().contains("completed"), "{row}");
    // A newer checkpoint is added above it; the row already shown stays
    // the same element (the table is not rebuilt on every update).
    let first_id = page
        .eval(
            "(() => { const r = document.querySelector('#checkpoints tbody tr.completed'); \
             r.dataset.seen = 'yes'; return r.dataset.checkpoint; })()",
        )
        .unwrap();
    wait_page(
        &page,
        "a newer checkpoint row",
        &format!(
            "document.querySelector('#checkpoints tbody tr').dataset.checkpoint !== {first_id}"
        ),
    );
    let kept = page
        .eval(&format!(
            "document.querySelector('#checkpoints tbody tr[data-checkpoint=\"' + {first_id} + '\"]').dataset.seen"
        ))
        .unwrap();
    assert_eq!(kept, "yes", "checkpoint {first_id}'s row was rebuilt");

    // From the keyboard: Tab to the operator, Enter shows its instances
    // and the plugin's sha256.
    tab_to(
        &page,
        "document.activeElement.dataset && document.activeElement.dataset.nodeId === 'count'",
    );
    page.press("Enter").unwrap();
    let sha = weir::wasm::sha256_hex(&std::fs::read(plugins::WORD_COUNT).unwrap());
    wait_page(
        &page,
        "the operator's details",
        &format!("document.getElementById('node-details').textContent.includes('{sha}')"),
    );
    let instances = page
        .eval("document.querySelectorAll('#node-details table.instances tbody tr').length")
        .unwrap();
    assert_eq!(instances, 2);
    // Arrow keys move between nodes: right of the operator, a sink; its
    // details show the record latency as a histogram.
    page.press("ArrowRight").unwrap();
    let focused = page.eval("document.activeElement.dataset.kind").unwrap();
    assert_eq!(focused, "sink");
    page.press("Enter").unwrap();
    wait_page(
        &page,
        "the sink's latency histogram",
        "document.getElementById('node-details').textContent.includes('p99') && \
         document.querySelectorAll('#node-details table.histogram tr').length > 0",
    );
    assert_eq!(
        page.eval("window.__loaded").unwrap(),
        true,
        "never reloaded"
    );
    let errors = page.console_errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:?}");
    d.stop();
}

/// Presses Tab until `js` holds (at most 40 times).
fn tab_to(page: &Page<'_>, js: &str) {
    for _ in 0..40 {
        if page.eval(js).unwrap() == true {
            return;
        }
        page.press("Tab").unwrap();
    }
    panic!("Tab never reached {js}");
}

#[test]
fn from_the_keyboard_a_failed_swap_shows_its_error_and_a_savepoint_is_taken() {
    let d = Dashboard::start(job("actions"), &["--ui-actions"]);
    let b = browser();
    let page = d.page(
        &b,
        &[
            (
                "the actions",
                "!document.getElementById('actions-on').hidden && document.querySelectorAll('#swap-operator option').length === 1",
            ),
            (
                "a completed checkpoint",
                "document.querySelector('#checkpoints tbody tr.completed')",
            ),
        ],
    );
    // A plugin that cannot load: the swap is refused, the job goes on.
    let missing = d.j.path().join("no-such-plugin.wasm");
    tab_to(&page, "document.activeElement.id === 'swap-plugin'");
    page.type_text(&missing.display().to_string()).unwrap();
    page.press("Enter").unwrap();
    let error = wait_page(
        &page,
        "the swap's error",
        "(() => { const r = document.getElementById('action-result'); return r.className === 'error' && r.textContent; })()",
    );
    let error = error.as_str().unwrap();
    assert_has_all(error, &["swap refused", "no-such-plugin.wasm"]);
    wait_page(
        &page,
        "the swap in the events",
        "document.querySelector('#events li.error[data-kind=\"swap\"]')",
    );
    // Back to the savepoint button (Shift+Tab) and Enter.
    for _ in 0..10 {
        if page.eval("document.activeElement.id").unwrap() == "savepoint-button" {
            break;
        }
        page.press_with_shift("Tab").unwrap();
    }
    assert_eq!(
        page.eval("document.activeElement.id").unwrap(),
        "savepoint-button"
    );
    page.press("Enter").unwrap();
    let ok = wait_page(
        &page,
        "the savepoint's answer",
        "(() => { const r = document.getElementById('action-result'); return r.className === 'ok' && r.textContent; })()",
    );
    let ok = ok.as_str().unwrap().to_string();
    assert_has(&ok, "savepoint of checkpoint");
    let dir = ok.split(" written to ").nth(1).unwrap();
    assert!(Path::new(dir).join("savepoint.json").is_file(), "{ok}");
    assert!(
        dir.starts_with(&d.j.state_dir().display().to_string()),
        "{ok}"
    );
    let events = d.get("/api/events");
    let kinds: Vec<&str> = (events["events"].as_array().unwrap().iter())
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["savepoint", "swap"], "{events}");
    // The refused swap's 409 is the one error Chromium logs.
    let errors: Vec<String> = (page.console_errors().into_iter())
        .filter(|e| !(e.contains("status of 409") && e.ends_with("/api/swap")))
        .collect();
    assert!(errors.is_empty(), "the page logged errors: {errors:?}");
    d.stop();
}

#[test]
fn an_action_comes_from_the_own_page_as_json() {
    let d = Dashboard::start(job("origin"), &["--ui-actions"]);
    let json = ("content-type", "application/json");
    let evil = ("origin", "http://evil.example");
    let cross = http::request(d.addr, "POST", "/api/savepoint", &[json, evil], "{}");
    assert_eq!(cross.status, 403, "{}", cross.body);
    let form = ("content-type", "text/plain");
    let simple = http::request(d.addr, "POST", "/api/savepoint", &[form], "{}");
    assert_eq!(simple.status, 415, "{}", simple.body);
    let get = http::get(d.addr, "/api/savepoint");
    assert_eq!(get.status, 405, "{}", get.body);
    let bad = http::request(
        d.addr,
        "POST",
        "/api/swap",
        &[json],
        r#"{"operator": "nope", "plugin": "x.wasm"}"#,
    );
    assert_eq!(bad.status, 400);
    assert_has(&bad.body, "(it has: count)");
    assert!(!d.j.state_dir().join("savepoints").exists());
    // The page's own origin (or a client without one) may.
    let own = format!("http://{}", d.addr);
    let out = d.j.path().join("sp");
    let body = serde_json::json!({"out": out}).to_string();
    let taken = http::request(
        d.addr,
        "POST",
        "/api/savepoint",
        &[json, ("origin", &own)],
        &body,
    );
    assert_eq!(taken.status, 200, "{}", taken.body);
    assert_eq!(taken.json()["ok"], true);
    assert!(out.join("savepoint.json").is_file());
    let twice = http::request(d.addr, "POST", "/api/savepoint", &[json], &body);
    assert_eq!(twice.status, 409, "the directory exists: {}", twice.body);
    assert_eq!(twice.json()["ok"], false);
    d.stop();
}

#[test]
fn failed_checkpoints_errors_and_restarts_are_shown() {
    // The operator's snapshot traps from checkpoint 2 on: the first
    // attempt completes checkpoint 1 and fails at 2; the restart fails at 2
    // again, with no checkpoint completed since, so the job stops there
    // (a failure that recurs); --ui-linger keeps the page up to show it.
    let job = JobFile::new("failing")
        .checkpoint(Checkpoint::every("200ms"))
        .restart(Restart::fixed_delay(20, "500ms"))
        .source(Source::generator("words", 100_000_000).rate(1000))
        .operator(
            Operator::new("trap", plugins::GUEST_SNAPSHOT_TRAP)
                .inputs(&["words"])
                .config("{ from_checkpoint = 2 }"),
        )
        .sink(Sink::jsonl("out", "out.jsonl").input("trap"));
    let d = Dashboard::start(job, &["--ui-linger"]);
    let cps = d.wait_api("a failed checkpoint", "/api/checkpoints", |v| {
        v["failed"].as_u64() > Some(0)
    });
    let failed = (cps["history"].as_array().unwrap().iter())
        .find(|c| !c["error"].is_null())
        .unwrap();
    let error = failed["error"].as_str().unwrap();
    assert_has_all(error, &["in flight", "snapshot"]);
    let events = d.wait_api("a restart", "/api/events", |v| {
        v["restarts"].as_u64() > Some(0)
    });
    let list = events["events"].as_array().unwrap();
    assert!(
        list.iter()
            .any(|e| e["kind"] == "failure" && e["error"] == true),
        "{events}"
    );
    assert!(list.iter().any(|e| e["kind"] == "restart"), "{events}");

    let b = browser();
    let _page = d.page(
        &b,
        &[
            (
                "a failed checkpoint row",
                "(() => { const r = document.querySelector('#checkpoints tbody tr.failed'); return r && r.textContent.includes('failed:'); })()",
            ),
            (
                "the failure in the events",
                "document.querySelector('#events li.error[data-kind=\"failure\"]')",
            ),
            (
                "restarts in the header",
                "Number(document.getElementById('restarts').textContent) > 0",
            ),
        ],
    );
    let (mut d, _page) = (d, _page);
    let ended = d
        .run
        .wait_for_line("the job's end", |l| l.contains("--ui-linger"));
    assert_has(&ended, "the job failed");
    assert_has(&ended, "snapshot-trap: deliberate panic at checkpoint 2");
    signal(&d.run.child, "-INT");
    let (status, stderr) = d.run.wait();
    assert!(!status.success(), "the job failed: {stderr}");
    assert_has(
        &stderr,
        "not restarting: the attempt failed as the one before",
    );
}

#[test]
fn ui_flags_fail_with_a_message_a_person_can_act_on() {
    let j = JobDir::new(WEIR, job("flags"), &[]);
    let alone = j.run(&["--ui-actions"]);
    assert!(!alone.success());
    assert_has(&alone.stderr, "--ui <ADDR>");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let busy = j.run(&["--ui", &port]);
    busy.assert_one_line_error(&["--ui 127.0.0.1:", "in use", "pick another port"]);
    let bad = j.run(&["--ui", "nowhere"]);
    assert!(!bad.success());
    assert_has(&bad.stderr, "is not a port");
    drop(taken);
}

/// A dashboard on every interface says, in the line that gives its
/// address, that other machines can reach it; one on the loopback does not.
#[test]
fn a_dashboard_on_every_interface_says_other_machines_reach_it() {
    let words = count_words("exposed", Checkpoint::every("100ms"), 1_000_000, 1);
    let j = JobDir::new(WEIR, words, &[("words.txt", "a b a\n")]);
    let open = j.run(&["--ui", "0.0.0.0:0", "--restore", "none"]);
    assert!(open.success(), "{}", open.stderr);
    let line = open
        .stderr
        .lines()
        .find(|l| l.contains("dashboard: http://"));
    let line = line.unwrap_or_else(|| panic!("no dashboard line: {}", open.stderr));
    assert_has(line, "read-only, and reachable from other machines");
    let local = j.run(&["--ui", "0", "--restore", "none"]);
    assert!(local.success(), "{}", local.stderr);
    assert_lacks(&local.stderr, "reachable from other machines");
}

/// The example job `examples/dashboard` (event-time windows over the
/// generator): the page shows each operator's watermark and pending timers.
/// With `WEIR_DASHBOARD_SCREENSHOT=FILE` it writes the screenshot in docs/tour.md.
#[test]
fn the_example_job_shows_watermarks_and_pending_timers() {
    let example = weir_tests::repo_root().join("examples/dashboard/job.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let text = text.replace("../../plugins/target", "{plugins}");
    let j = JobDir::new(WEIR, text, &[]);
    let mut run = j.spawn(&["--ui", "0", "--progress-every", "0"]);
    let line = run.wait_for_line("the dashboard's address", |l| {
        l.contains("dashboard: http://")
    });
    let url = line
        .split("dashboard: ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let b = browser();
    let page = b.open(url).unwrap();
    let timers = wait_page(
        &page,
        "the windows' watermark and timers",
        "(() => { const t = document.querySelector('[data-node-id=\"windows\"] .node-time').textContent; return /^watermark [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} · [1-9][0-9.K]* timers$/.test(t) && t; })()",
    );
    assert!(timers.as_str().unwrap().contains("timers"), "{timers}");
    // Per instance, in the operator's details.
    page.eval("document.querySelector('[data-node-id=\"windows\"]').focus()")
        .unwrap();
    page.press("Enter").unwrap();
    let rows = wait_page(
        &page,
        "each instance's watermark",
        "(() => { const r = [...document.querySelectorAll('#node-details table.instances tbody tr')].map(r => r.textContent); return r.length === 2 && r.every(t => t.includes('2026-12-01')) && r; })()",
    );
    assert_eq!(rows.as_array().unwrap().len(), 2);
    wait_page(
        &page,
        "a checkpoint",
        "document.querySelector('#checkpoints tbody tr.completed')",
    );
    if let Some(path) = std::env::var_os("WEIR_DASHBOARD_SCREENSHOT") {
        // Let the rates settle over a few samples first.
        std::thread::sleep(std::time::Duration::from_secs(4));
        page.screenshot(Path::new(&path), 1400, 1020).unwrap();
    }
    drop(page);
    signal(&run.child, "-TERM");
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
}

/// With `--ui-linger` the dashboard outlives the job: a job that finished
/// (or failed) is still shown, with how it ended, until Ctrl-C ends the
/// process, which then prints the summary and exits as the job did.
#[test]
fn with_ui_linger_the_dashboard_stays_up_after_the_job_ends() {
    let job = count_words("lingering", Checkpoint::every("100ms"), 100_000, 1)
        .source_with("words", |_| Source::generator("words", 500));
    let mut d = Dashboard::start(job, &["--ui-linger"]);
    let said = d
        .run
        .wait_for_line("the job's end", |l| l.contains("--ui-linger"));
    assert!(said.contains("the job finished"), "{said}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let job = d.get("/api/job");
    let sink = job["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "out");
    assert_eq!(sink.unwrap()["records_in"], 500, "{job}");
    weir_tests::job_dir::signal(&d.run.child, "-INT");
    let (status, stderr) = d.run.wait();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("job `lingering` finished"), "{stderr}");
}

/// A node's bad records are on the page by kind: the `picky` guest
/// refuses every tenth line (`on_error = "skip"`), and its details say how
/// many, of which kind.
#[test]
fn a_nodes_bad_records_are_shown_by_kind() {
    let text: String = (1..=300)
        .map(|i| match i % 10 {
            0 => format!("bad-{i}\n"),
            _ => format!("w{i}\n"),
        })
        .collect();
    let file = JobFile::new("picky-ui")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "in.txt"))
        .operator(
            Operator::new("picky", plugins::GUEST_PICKY)
                .inputs(&["in"])
                .on_error("\"skip\""),
        )
        .sink(Sink::file("out", "out.txt").input("picky"));
    let j = JobDir::new(WEIR, file, &[("in.txt", &text)]);
    let mut run = j.spawn(&["--ui", "0", "--progress-every", "0", "--ui-linger"]);
    let line = run.wait_for_line("the dashboard's address", |l| {
        l.contains("dashboard: http://")
    });
    let url = (line.split("dashboard: ").nth(1).unwrap())
        .split(' ')
        .next()
        .unwrap();
    let b = browser();
    let page = b.open(url).unwrap();
    wait_page(
        &page,
        "the picky node",
        "document.querySelector('[data-node-id=\"picky\"]')",
    );
    page.eval("document.querySelector('[data-node-id=\"picky\"]').focus()")
        .unwrap();
    page.press("Enter").unwrap();
    let facts = wait_page(
        &page,
        "picky's bad records by kind",
        "(() => { const t = document.querySelector('#node-details').textContent; return t.includes('Bad records (on_error)30: 30 invalid-input') && t; })()",
    );
    assert_has(facts.as_str().unwrap(), "Bad records (on_error)");
    drop(page);
    signal(&run.child, "-INT");
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
}

#[test]
fn the_last_shadow_run_of_an_operator_is_shown_beside_the_swap_button() {
    let job =
        job("shadowed").operator_with("count", |o| o.string("record_inputs", "1000 checkpoints"));
    let d = Dashboard::start(job, &["--ui-actions"]);
    let b = browser();
    let page = d.page(
        &b,
        &[
            ("the actions", "!document.getElementById('actions-on').hidden"),
            (
                "no shadow run yet",
                "document.getElementById('shadow-report').textContent.startsWith('No shadow run of count yet')",
            ),
            (
                "a completed checkpoint",
                "document.querySelector('#checkpoints tbody tr.completed')",
            ),
        ],
    );
    // A plugin that traps on the running job's recorded input.
    let out = d.j.weir(
        "shadow",
        &[
            "--operator",
            "count",
            "--with",
            plugins::GUEST_SWAP_TRAP_FIRST_BATCH,
        ],
    );
    assert_eq!(out.code(), Some(4), "{}{}", out.stdout, out.stderr);
    let shadow = d.get("/api/shadow");
    let r = &shadow["operators"]["count"];
    assert_eq!(r["v2"]["version"], "9.0.0-trap", "{shadow}");
    assert!(r["traps"].as_u64().unwrap() >= 1, "{shadow}");
    let text = wait_page(
        &page,
        "the report",
        "(() => { const r = document.getElementById('shadow-report'); return r.className === 'error' && r.textContent.startsWith('Last shadow run') && r.textContent; })()",
    );
    let text = text.as_str().unwrap();
    assert_has_all(text, &["word-count 9.0.0-trap", "traps)", "recorded epoch"]);
    assert!(
        page.console_errors().is_empty(),
        "{:?}",
        page.console_errors()
    );
    d.stop();
}
