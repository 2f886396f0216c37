//! `weir run` as users see it: progress lines, Prometheus metrics, the
//! summary, and `weir validate`.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::parse_counts;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{self, count_words};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn metered(rate: u64) -> JobFile {
    count_words("metered", Checkpoint::every("100ms"), rate, 1)
}

fn job(rate: u64, n: usize) -> JobDir {
    let words: String = (0..n).map(|i| format!("w{}\n", i % 10)).collect();
    JobDir::new(WEIR, metered(rate), &[("words.txt", &words)])
}

/// The endpoint's whole response (head and body), or `None` when it does
/// not answer.
fn try_scrape(addr: &str) -> Option<String> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    Some(text)
}

/// [`try_scrape`], which must answer.
fn scrape(addr: &str) -> String {
    try_scrape(addr).unwrap_or_else(|| panic!("no answer from the metrics endpoint {addr}"))
}

/// The value of the first sample whose line starts with `line_start`.
fn sample(text: &str, line_start: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(line_start))?;
    Some(line.rsplit(' ').next().unwrap().parse().unwrap())
}

/// [`sample`], which must exist.
fn metric(text: &str, line_start: &str) -> f64 {
    sample(text, line_start).unwrap_or_else(|| panic!("no {line_start} in {text}"))
}

#[test]
fn metrics_are_served_while_the_job_runs() {
    let j = job(3000, 9000);
    let mut child = j
        .command(
            "run",
            &["--metrics", "127.0.0.1:0", "--progress-every", "0"],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("metrics: http://")
        .and_then(|a| a.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{first}"));
    // Scrape until the job has counted records and completed a checkpoint.
    let count_in = "weir_records_in_total{job=\"metered\",node=\"count\",kind=\"operator\"}";
    let text = wait_until("a scrape after a checkpoint", PATIENCE, || {
        let text = try_scrape(addr)?;
        let ready = sample(&text, count_in).is_some_and(|v| v > 0.0)
            && sample(&text, "weir_checkpoints_total{job=\"metered\"}").is_some_and(|v| v >= 1.0);
        ready.then_some(text)
    });
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert_has(&text, "content-type: text/plain; version=0.0.4");
    let counted = metric(&text, count_in);
    assert!(metric(&text, "weir_bytes_in_total{job=\"metered\",node=\"count\"") > 0.0);
    assert!(
        metric(&text, "weir_checkpoints_total{job=\"metered\"}") >= 1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "weir_batch_latency_seconds_count{job=\"metered\",node=\"count\""
        ) > 0.0
    );
    for name in [
        "weir_records_out_total",
        "weir_bytes_out_total",
        "weir_checkpoint_duration_seconds_bucket",
        "weir_checkpoint_last_bytes",
        "weir_alignment_duration_seconds_count",
        "weir_alignment_buffered_bytes",
        "weir_checkpoint_pause_last_milliseconds",
        "weir_checkpoint_pause_duration_seconds_count",
        "weir_restarts_total",
        "weir_backpressure_seconds_total",
    ] {
        assert!(text.contains(name), "{name} missing");
    }
    let later = scrape(addr);
    assert!(
        metric(
            &later,
            "weir_records_in_total{job=\"metered\",node=\"count\",kind=\"operator\"}"
        ) >= counted
    );
    // What the endpoint does not serve: another method, an endless head.
    let ask = |request: &[u8]| {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        let _ = conn.write_all(request);
        let mut text = String::new();
        let _ = conn.read_to_string(&mut text);
        text
    };
    let post = ask(b"POST /metrics HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    let mut huge = b"GET /metrics HTTP/1.1\r\nx: ".to_vec();
    huge.resize(64 * 1024, b'a');
    let refused = ask(&huge);
    assert!(refused.starts_with("HTTP/1.1 431"), "{refused}");
    let status = child.wait().unwrap();
    assert!(status.success());
}

/// The endpoint's body once a job has committed all it was given (its
/// stdin stays open, so the counters hold still): every metric has its
/// HELP and TYPE, the node samples are what the job processed, and the job
/// name's `"`, `\` and newline are escaped in every label, as the text
/// format requires.
#[test]
fn the_metrics_body_counts_what_the_job_did_and_escapes_labels() {
    let odd = jobs::count_stdin("we\"ir\\job\nx", Checkpoint::every("100ms").dir("state"));
    let j = JobDir::new(WEIR, odd, &[]);
    let mut run = j.spawn_fed(&["--metrics", "127.0.0.1:0", "--progress-every", "0"]);
    let first = run.wait_for_line("the metrics address", |l| l.starts_with("metrics: "));
    let addr = first
        .strip_prefix("metrics: http://")
        .and_then(|a| a.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let words: Vec<String> = (0..50).map(|i| format!("w{}", i % 5)).collect();
    run.send(&format!("{}\n", words.join("\n")));
    wait_until("all 50 counts in the output", PATIENCE, || {
        (j.lines("out.jsonl").values().sum::<usize>() == 50).then_some(())
    });
    // Every record the sink committed has its latency observed (once the
    // commit's completion is reported, just after the output is visible).
    let latency_count =
        r#"weir_sink_record_latency_seconds_count{job="we\"ir\\job\nx",node="out"} "#;
    let text = wait_until("the sink's record latencies", PATIENCE, || {
        let text = try_scrape(&addr)?;
        (sample(&text, latency_count) == Some(50.0)).then_some(text)
    });
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");

    let job = r#"job="we\"ir\\job\nx""#;
    let node = |id: &str, kind: &str| format!("{{{job},node=\"{id}\",kind=\"{kind}\"}}");
    let value = |name: &str, labels: &str| metric(body, &format!("{name}{labels} "));
    let (source, count, sink) = (
        node("in", "source"),
        node("count", "operator"),
        node("out", "sink"),
    );
    assert_eq!(value("weir_records_out_total", &source), 50.0, "{body}");
    assert_eq!(value("weir_records_in_total", &count), 50.0, "{body}");
    assert_eq!(value("weir_records_out_total", &count), 50.0, "{body}");
    assert_eq!(value("weir_records_in_total", &sink), 50.0, "{body}");
    // A `lines` record's key points at its value, the line: its bytes
    // count once.
    let line_bytes: usize = words.iter().map(String::len).sum();
    assert_eq!(value("weir_bytes_out_total", &source), line_bytes as f64);
    assert_eq!(value("weir_bytes_in_total", &count), line_bytes as f64);
    // word-count's records: the word as key, and as value a row (fields
    // `word`, a string, and `count`, a u64) where it is emitted, the JSON
    // line where the sink reads it.
    let words_out: Vec<String> = (j.read("out.jsonl").lines())
        .map(|l| parse_counts(l).into_keys().next().unwrap())
        .collect();
    let row_bytes = |w: &str| (2 + "word".len() + 4 + w.len()) + (2 + "count".len() + 8);
    let emitted: usize = words_out.iter().map(|w| w.len() + row_bytes(w)).sum();
    assert_eq!(value("weir_bytes_out_total", &count), emitted as f64);
    let out_bytes: usize = (j.read("out.jsonl").lines())
        .zip(&words_out)
        .map(|(l, w)| l.len() + w.len())
        .sum();
    assert_eq!(value("weir_bytes_in_total", &sink), out_bytes as f64);
    let checkpoints = value("weir_checkpoints_total", &format!("{{{job}}}"));
    assert!(checkpoints >= 1.0, "{body}");
    assert_eq!(
        value("weir_checkpoint_last_id", &format!("{{{job}}}")),
        checkpoints,
        "a fresh run numbers its checkpoints from 1"
    );
    assert_eq!(value("weir_restarts_total", &format!("{{{job}}}")), 0.0);
    let calls = value(
        "weir_batch_latency_seconds_count",
        &format!("{{{job},node=\"count\",kind=\"operator\"}}"),
    );
    assert!(calls >= 1.0, "{body}");
    let all_calls = metric(
        body,
        &format!(
            "weir_batch_latency_seconds_bucket{{{job},node=\"count\",kind=\"operator\",le=\"+Inf\"}} "
        ),
    );
    assert_eq!(all_calls, calls);
    let sink_only = format!("{{{job},node=\"out\"}}");
    let latencies = value("weir_sink_record_latency_seconds_count", &sink_only);
    assert_eq!(latencies, 50.0, "{body}");
    assert!(value("weir_sink_record_latency_seconds_sum", &sink_only) > 0.0);
    let all_latencies = metric(
        body,
        &format!("weir_sink_record_latency_seconds_bucket{{{job},node=\"out\",le=\"+Inf\"}} "),
    );
    assert_eq!(all_latencies, 50.0);
    for (name, kind) in [
        ("weir_records_in_total", "counter"),
        ("weir_records_out_total", "counter"),
        ("weir_bytes_in_total", "counter"),
        ("weir_bytes_out_total", "counter"),
        ("weir_backpressure_seconds_total", "counter"),
        ("weir_batch_latency_seconds", "histogram"),
        ("weir_sink_record_latency_seconds", "histogram"),
        ("weir_checkpoints_total", "counter"),
        ("weir_checkpoints_unaligned_total", "counter"),
        ("weir_checkpoint_inflight_bytes_total", "counter"),
        ("weir_restarts_total", "counter"),
        ("weir_checkpoint_last_id", "gauge"),
        ("weir_checkpoint_last_bytes", "gauge"),
        ("weir_checkpoint_last_duration_milliseconds", "gauge"),
        ("weir_alignment_last_milliseconds", "gauge"),
        ("weir_alignment_buffered_bytes", "gauge"),
        ("weir_checkpoint_pause_last_milliseconds", "gauge"),
        ("weir_checkpoint_duration_seconds", "histogram"),
        ("weir_alignment_duration_seconds", "histogram"),
        ("weir_checkpoint_pause_duration_seconds", "histogram"),
    ] {
        let help = format!("# HELP {name} ");
        assert!(
            body.lines().any(|l| l.starts_with(&help)),
            "no HELP for {name}"
        );
        let kind_line = format!("# TYPE {name} {kind}");
        assert!(
            body.lines().any(|l| l == kind_line),
            "{name} is not a {kind}"
        );
    }
    // Every sample is one line with the escaped job label and a number.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.starts_with("weir_") && line.contains(job), "{line}");
        let v = line.rsplit(' ').next().unwrap();
        assert!(v.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn plain_progress_lines_and_summary_when_not_a_terminal() {
    let j = job(4000, 8000);
    let out = j.run(&["--progress-every", "1"]);
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("progress: job `metered`")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("progress:   operator count") && l.contains("/s")),
        "{err}"
    );
    assert_has(err, "job `metered` finished");
    assert!(
        err.lines().any(
            |l| l.contains("operator count") && l.contains("in         8000  out         8000")
        ),
        "{err}"
    );
}

#[test]
fn verbose_logs_checkpoints() {
    let j = job(1_000_000, 100);
    let out = j.run(&["-v"]);
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    assert_has(err, "checkpoint 1 complete");
}

#[test]
fn validate_loads_every_plugin_and_calls_open() {
    let j = job(1, 1);
    let out = j.validate();
    let text = &out.stdout;
    assert!(out.success(), "{}", out.stderr);
    assert_has_all(text, &["job `metered`", "is valid"]);
    assert_has(text, "operator count: word-count 0.1.0 x1 (in <- words)");
    assert!(
        !j.state_dir().exists() && !j.path().join("state").exists(),
        "validate must not create state"
    );
    // A config the plugin rejects in `open`.
    let bad = JobDir::new(
        WEIR,
        metered(1).operator_with("count", |o| o.config("{ lowercas = true }")),
        &[("words.txt", "a\n")],
    );
    let out = bad.validate();
    let err = &out.stderr;
    assert!(!out.success());
    assert_has_all(err, &["operator `count[0]`", "invalid config", "lowercas"]);
}

#[test]
fn weir_profiler_perfmap_names_the_plugins_functions_for_perf() {
    let j = job(1_000_000, 100);
    let run = |profiler: &str| {
        let mut c = j.command("run", &["--progress-every", "0"]);
        c.env("WEIR_PROFILER", profiler);
        c
    };
    let child = run("perfmap").spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let map = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let text = std::fs::read_to_string(&map).unwrap();
    std::fs::remove_file(&map).unwrap();
    assert!(
        text.lines().any(|l| l.contains("word_count::")),
        "no word-count function in {map:?}"
    );

    let out = Outcome::of(&mut run("vtune"));
    assert!(!out.success());
    let stderr = &out.stderr;
    assert_has(
        stderr,
        r#"WEIR_PROFILER="vtune" is not a profiling agent: use `perfmap` or `none`"#,
    );
}

/// Records from a live stdin reach the output at the next checkpoint, not
/// when a full batch has arrived or stdin closes.
#[test]
fn stdin_records_are_output_while_stdin_stays_open() {
    let live = jobs::word_count("live", Source::stdin("in"), 1, Sink::stdout("out"))
        .checkpoint(Checkpoint::every("100ms"));
    let j = JobDir::new(WEIR, live, &[]);
    let mut run = j.spawn_printing(&["--progress-every", "0"]);
    run.send("a\nb\n");
    let wait = std::time::Duration::from_secs(60);
    let first = run.next_printed(wait).expect("output while stdin is open");
    let second = run.next_printed(wait).unwrap();
    assert_eq!(
        [first, second],
        [r#"{"word":"a","count":1}"#, r#"{"word":"b","count":1}"#]
    );
    run.send("a\n");
    run.close_stdin();
    assert_eq!(run.next_printed(wait).unwrap(), r#"{"word":"a","count":2}"#);
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
}

/// `weir run DIR` and `weir validate DIR` take the folder's job.toml; a
/// folder without one is refused, saying so.
#[test]
fn a_job_folder_stands_for_its_job_toml() {
    let j = job(1_000_000, 10);
    let out = WEIR.ok([OsStr::new("validate"), j.path().as_os_str()]);
    assert_has(&out.stdout, "is valid");
    let out = WEIR.ok([OsStr::new("run"), j.path().as_os_str()]);
    assert_has(&out.stderr, "job `metered` finished");
    let empty = tempfile::tempdir().unwrap();
    for verb in ["run", "validate", "checkpoints"] {
        let out = WEIR.output([OsStr::new(verb), empty.path().as_os_str()]);
        let needles: &[&str] = match verb {
            // A folder without a job.toml is taken for a state directory.
            "checkpoints" => &["has no checkpoints.redb"],
            _ => &["is a folder without a job.toml; pass the path of the job file itself"],
        };
        out.assert_one_line_error(needles);
    }
}

/// `--progress-every` takes durations as job files write them, and a bare
/// number of seconds; anything else is a usage error naming the syntax.
#[test]
fn progress_every_takes_a_duration() {
    let j = job(4000, 8000);
    for every in ["500ms", "0.5"] {
        let out = j.run(&["--restore", "none", "--progress-every", every]);
        assert!(out.success(), "{}", out.stderr);
        let lines = out.stderr.lines();
        assert!(
            lines
                .into_iter()
                .any(|l| l.starts_with("progress: job `metered`")),
            "{every}: {}",
            out.stderr
        );
    }
    let out = j.run(&["--progress-every", "soon"]);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert_has(&out.stderr, "\"soon\" is not a duration");
}

/// `--metrics PORT` listens on the loopback interface; a bad address and a
/// port in use get distinct messages.
#[test]
fn metrics_takes_a_bare_port_and_explains_failures() {
    let j = job(1_000_000, 10);
    let out = j.run(&["--metrics", "0", "--progress-every", "0"]);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stderr.starts_with("metrics: http://127.0.0.1:"),
        "{}",
        out.stderr
    );

    let out = j.run(&["--metrics", "nonsense"]);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    let said = "`nonsense` is not a port (9400) or an address HOST:PORT (127.0.0.1:9400)";
    assert_has(&out.stderr, said);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = j.run(&["--metrics", &port]);
    out.assert_one_line_error(&[
        &format!("--metrics 127.0.0.1:{port}: the port is in use by another process"),
        "pick another port, or 0 for a free one",
    ]);
    assert_lacks(&out.stderr, "invalid socket address");
}

/// An output port that nothing reads is warned about, naming the operator
/// and the port, by `validate` and at the start of `run`; once it is wired,
/// it is not.
#[test]
fn an_unconsumed_output_port_is_warned_about() {
    let routed = jobs::route_words("routed", 1).sink(Sink::file("out", "out.txt").input("route"));
    let j = JobDir::new(WEIR, routed.clone(), &[("words.txt", "a\nb\n")]);
    let warning = "operator `route`: nothing consumes output port `rejected` of plugin ";
    let dropped = "so records emitted on it are dropped; to read it, write \"route.rejected\" \
                   in an operator's `inputs` or a sink's `input`";
    for out in [j.validate(), j.run(&[])] {
        let err = &out.stderr;
        assert!(out.success(), "{err}");
        assert_has_all(err, &[warning, dropped]);
        assert_has(err, "WARN");
        assert_lacks(err, "port `out`");
    }
    assert_eq!(j.read("out.txt"), "a\nb\n");

    // Both ports wired: no warning.
    let both = routed.sink(Sink::file("rejected", "rejected.txt").input("route.rejected"));
    let j = JobDir::new(WEIR, both, &[("words.txt", "a\nb\n")]);
    for out in [j.validate(), j.run(&[])] {
        let err = &out.stderr;
        assert!(out.success(), "{err}");
        assert_lacks(err, "nothing consumes");
    }
    assert_eq!(j.read("rejected.txt"), "a\nb\n");

    // Only `rejected` wired: `out` is the port nothing reads.
    let side_only = jobs::route_words("side", 1)
        .sink(Sink::file("rejected", "rejected.txt").input("route.rejected"));
    let j = JobDir::new(WEIR, side_only, &[("words.txt", "a\nb\n")]);
    let err = j.validate().assert_ok().stderr;
    assert_has_all(
        &err,
        &[
            "nothing consumes output port `out` of plugin ",
            "\"route.out\"",
        ],
    );
    assert_lacks(&err, "port `rejected`");
}

/// The event-time job: `clicks` (a jsonl file, timestamps in field `ts`)
/// through `show-timestamps` (which writes each record's timestamp in front
/// of its value) to `out.txt`.
fn timestamped(source: Source) -> JobFile {
    JobFile::new("timestamps")
        .source(source)
        .operator(Operator::new("show", plugins::GUEST_SHOW_TIMESTAMPS).inputs(&["clicks"]))
        .sink(Sink::file("out", "out.txt").input("show"))
}

/// A jsonl source's `timestamp` field becomes each record's timestamp, in
/// either notation; a record without a valid one stops the job.
#[test]
fn jsonl_timestamps_reach_the_operators() {
    let clicks = concat!(
        "{\"user\":\"a\",\"ts\":1700000000000}\n",
        "{\"user\":\"b\",\"ts\":\"2026-12-01T15:30:00.250+01:00\"}\n",
        "{\"user\":\"c\",\"ts\":-5}\n",
    );
    let source = Source::file("clicks", "clicks.jsonl")
        .format("jsonl")
        .timestamp("ts");
    let j = JobDir::new(WEIR, timestamped(source), &[("clicks.jsonl", clicks)]);
    j.run_ok(&[]);
    let want = concat!(
        "1700000000000 {\"user\":\"a\",\"ts\":1700000000000}\n",
        "1796135400250 {\"user\":\"b\",\"ts\":\"2026-12-01T15:30:00.250+01:00\"}\n",
        "-5 {\"user\":\"c\",\"ts\":-5}\n",
    );
    assert_eq!(j.read("out.txt"), want);
}

/// With `on_bad_timestamp = "skip"`, records without a valid timestamp are
/// dropped, and the summary (text and JSON) counts them.
#[test]
fn skipped_timestamps_are_dropped_and_counted() {
    let clicks = concat!(
        "{\"user\":\"a\",\"ts\":1}\n",
        "{\"user\":\"b\",\"ts\":\"yesterday\"}\n",
        "{\"user\":\"c\"}\n",
        "{\"user\":\"d\",\"ts\":4}\n",
    );
    let source = Source::file("clicks", "clicks.jsonl")
        .format("jsonl")
        .timestamp("ts")
        .on_bad_timestamp("skip");
    let j = JobDir::new(WEIR, timestamped(source), &[("clicks.jsonl", clicks)]);
    let out = j.run(&["--json"]);
    assert!(out.success(), "{}", out.stderr);
    let want = "1 {\"user\":\"a\",\"ts\":1}\n4 {\"user\":\"d\",\"ts\":4}\n";
    assert_eq!(j.read("out.txt"), want);
    let line = out
        .stderr
        .lines()
        .find(|l| l.trim_start().starts_with("source"))
        .unwrap_or_else(|| panic!("no source line in {}", out.stderr));
    assert!(
        line.ends_with("out            2  skipped 2 (bad timestamp)"),
        "{line}"
    );
    let s: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let source = &s["nodes"][0];
    assert_eq!(source["id"], "clicks", "{s}");
    assert_eq!(source["records_out"], 2, "{s}");
    assert_eq!(source["records_skipped"], 2, "{s}");
    assert!(s["nodes"][1].get("records_skipped").is_none(), "{s}");
}

/// Generated records carry timestamps `start + i * step`.
#[test]
fn the_generator_sets_timestamps() {
    let source = Source::generator("clicks", 3)
        .words(1)
        .value("start", "\"2026-12-01T15:30:00Z\"")
        .value("step", "\"1s\"");
    let j = JobDir::new(WEIR, timestamped(source), &[]);
    j.run_ok(&[]);
    let want = "1796139000000 w0\n1796139001000 w0\n1796139002000 w0\n";
    assert_eq!(j.read("out.txt"), want);
}
