//! `ui`: what the web dashboard costs the data path. Word count (p1, 100K
//! distinct words, a checkpoint every second) through the `weir` binary,
//! in four cases run round-robin:
//!
//! - `baseline`: no dashboard;
//! - `baseline again`: the same, to show the run-to-run noise (A/A);
//! - `--ui, nobody watching`: the dashboard listens, nobody asks;
//! - `--ui, stream read`: a plain client reads `/api/stream` (what the page
//!   receives, without a browser rendering it);
//! - `--ui, page open`: headless Chromium shows the page from the moment
//!   the dashboard listens to the end of the job (live updates every
//!   second, a checkpoint row a second).
//!
//! Each case reports records per second over the `weir` process's wall
//! time and the process's CPU time per million records (`wait4`), both
//! against the baseline, and for `page open` the CPU time Chromium's
//! processes used meanwhile. The browser runs on the same two cores, so its
//! rendering takes CPU the job could have used: the end-to-end ratio of
//! `page open` includes that; `stream read` is what serving the page costs
//! `weir` itself.

use serde_json::json;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use std::cell::Cell;

use weir_tests::browser::{Browser, Page};

use crate::child::{ChildRun, run_child_with, weir_case};
use crate::jobs::word_count_job;
use crate::{Report, Settings, Target, data, median};

/// The cases, baseline first.
const CASES: [&str; 5] = [
    "baseline",
    "baseline again",
    "--ui, nobody watching",
    "--ui, stream read",
    "--ui, page open",
];

/// How long the dashboard may take to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let words = settings.pick(10_000_000, 3_000_000, 50_000);
    let distinct = settings.pick(100_000, 100_000, 1_000);
    let reps = settings.pick(5, 1, 1);
    let (mut report, scratch) = settings.start("ui", "records/s: input records over the weir process's wall time (median of the repetitions, cases round-robin); cpu: the weir process's user + system seconds per million records")?;
    report.params(json!({"words": words, "distinct_words": distinct, "repetitions": reps}));
    let dir = scratch.path();
    settings.say(&format!("ui: writing {words} words"));
    data::write_lines(&dir.join("words.txt"), words, |i| data::word(i, distinct))?;
    let plugin = settings.plugin("word-count")?;
    let job = word_count_job("bench-ui", &plugin, "1s");
    settings.say("ui: starting headless Chromium");
    let browser = Browser::launch().map_err(anyhow::Error::msg)?;

    let mut runs: Vec<Vec<ChildRun>> = vec![Vec::new(); CASES.len()];
    let mut pages = 0;
    let mut browser_cpu = Vec::new();
    for rep in 0..reps {
        for i in 0..CASES.len() {
            let at = (i + rep) % CASES.len();
            settings.say(&format!("ui: {} (run {})", CASES[at], rep + 1));
            let (mut cmd, log) = weir_case(settings, dir, &job)?;
            let run = match CASES[at] {
                "--ui, nobody watching" => {
                    let addr = free_address()?;
                    cmd.args(["--ui", &addr.to_string()]);
                    run_child_with(cmd, &log, |pid| listening(addr, pid).map(|_| ()))?
                }
                "--ui, stream read" => {
                    let addr = free_address()?;
                    cmd.args(["--ui", &addr.to_string()]);
                    run_child_with(cmd, &log, |pid| {
                        Ok(listening(addr, pid)?.then(|| read_stream(addr)))
                    })?
                }
                "--ui, page open" => {
                    let addr = free_address()?;
                    cmd.args(["--ui", &addr.to_string()]);
                    let before = chromium_cpu();
                    let after = Cell::new(before);
                    let run = run_child_with(cmd, &log, |pid| {
                        if !listening(addr, pid)? {
                            return Ok(None);
                        }
                        match browser.open(&format!("http://{addr}/")) {
                            Ok(page) => {
                                pages += 1;
                                Ok(Some(Watching {
                                    _page: page,
                                    cpu_at_close: &after,
                                }))
                            }
                            // The job ended first (the smallest sizes).
                            Err(_) if exited(pid) => Ok(None),
                            Err(e) => Err(anyhow::Error::msg(e)),
                        }
                    })?;
                    let used = after.get().saturating_sub(before);
                    browser_cpu.push(used.as_secs_f64() * 1e6 / words as f64);
                    run
                }
                _ => run_child_with(cmd, &log, |_| Ok(()))?,
            };
            runs[at].push(run);
        }
    }
    report.param("page_open_runs", pages);
    anyhow::ensure!(
        settings.mode == crate::Mode::Tiny || pages == reps,
        "the page was open in {pages} of {reps} runs: the job ended before Chromium loaded it; run with more words"
    );
    let per_million = |r: &ChildRun| r.cpu.as_secs_f64() * 1e6 / words as f64;
    for (i, case) in CASES.iter().enumerate() {
        let rates: Vec<f64> = runs[i]
            .iter()
            .map(|r| words as f64 / r.wall.as_secs_f64().max(1e-9))
            .collect();
        let base = (i > 0).then_some(CASES[0]);
        let row = report.row(case, median(&rates), "records/s", base);
        for (r, rate) in rates.iter().enumerate() {
            row.extra.insert(format!("rates_{}", r + 1), *rate);
        }
        let cpu: Vec<f64> = runs[i].iter().map(per_million).collect();
        let cpu_case = format!("{case}: cpu");
        let cpu_base = format!("{}: cpu", CASES[0]);
        report.row(
            &cpu_case,
            median(&cpu),
            "cpu s per 1M records",
            (i > 0).then_some(cpu_base.as_str()),
        );
    }
    report.row(
        "--ui, page open: chromium cpu",
        median(&browser_cpu),
        "cpu s per 1M records",
        None,
    );
    let ratio = |case: &str| report.get(case).and_then(|r| r.ratio).unwrap_or(f64::NAN);
    let targets = [
        Target::at_least(
            "nobody watching: records/s vs baseline (ratio)",
            ratio("--ui, nobody watching"),
            0.98,
        ),
        Target::at_most(
            "nobody watching: weir's cpu vs baseline (ratio)",
            ratio("--ui, nobody watching: cpu"),
            1.02,
        ),
        Target::at_most(
            "stream read: weir's cpu vs baseline (ratio)",
            ratio("--ui, stream read: cpu"),
            1.02,
        ),
        Target::at_least(
            "page open: records/s vs baseline, browser on the same cores (ratio)",
            ratio("--ui, page open"),
            0.98,
        ),
        Target::at_most(
            "page open: weir's cpu vs baseline (ratio)",
            ratio("--ui, page open: cpu"),
            1.02,
        ),
    ];
    let note = format!(
        "A/A noise: `baseline again` is {:.3}× `baseline` (records/s) and {:.3}× (cpu)",
        ratio("baseline again"),
        ratio("baseline again: cpu")
    );
    report.targets.extend(targets);
    report.notes.push(note);
    Ok(report)
}

/// The page open while a job runs; notes Chromium's CPU time when the job
/// is over, before the tab (and maybe its renderer process) goes.
struct Watching<'b> {
    _page: Page<'b>,
    cpu_at_close: &'b Cell<Duration>,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.cpu_at_close.set(chromium_cpu());
    }
}

/// Reads `/api/stream` at `addr` on a thread of its own until the server
/// closes it.
fn read_stream(addr: SocketAddr) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        use std::io::Write as _;
        let Ok(mut conn) = TcpStream::connect(addr) else {
            return;
        };
        if write!(conn, "GET /api/stream HTTP/1.1\r\nhost: {addr}\r\n\r\n").is_ok() {
            let _ = std::io::copy(&mut conn, &mut std::io::sink());
        }
    })
}

/// The CPU time (user and system) every process named `chrom...` used so
/// far, from `/proc/<pid>/stat` in clock ticks of 10 ms.
fn chromium_cpu() -> Duration {
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        if !head
            .split_once('(')
            .is_some_and(|(_, name)| name.starts_with("chrom"))
        {
            continue;
        }
        // After the name: state is field 3; utime and stime fields 14, 15.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        ticks += field(14).unwrap_or(0) + field(15).unwrap_or(0);
    }
    Duration::from_millis(ticks * 10)
}

/// A loopback address no one listens on now.
fn free_address() -> anyhow::Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Waits until the dashboard of process `pid` accepts connections at
/// `addr`; `false` when the process ended first.
fn listening(addr: SocketAddr, pid: u32) -> anyhow::Result<bool> {
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        if exited(pid) {
            return Ok(false);
        }
        anyhow::ensure!(
            started.elapsed() < LISTEN_TIMEOUT,
            "the dashboard did not listen on {addr} within {LISTEN_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(true)
}

/// Whether our child `pid` has exited (a zombie, not reaped yet).
fn exited(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name in parentheses, which may hold
    // spaces.
    let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
    matches!(state, None | Some(Some('Z')) | Some(Some('X')))
}
