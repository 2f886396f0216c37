//! What `weir` writes, and where: on a terminal (a pseudo-terminal), log
//! lines print above the live progress display and stay on the screen, in
//! colour unless `NO_COLOR` is set; in a pipe, without colour codes; a
//! closed stderr or stdout is no panic and keeps the documented exit
//! codes; the first compile of a large plugin is announced; `weir run
//! --json` prints the summary as JSON on stdout.

use std::io::pipe;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use weir_tests::cli::{Outcome, Weir};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{count_words, word_count};
use weir_tests::plugins;
use weir_tests::pty::on_pty;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// A job of about a second whose plugin writes to its stderr at every batch
/// (logged as a warning, `probe stderr: hello`) and that checkpoints every
/// 100 ms (logged as `checkpoint N complete` with `-v`).
fn chatty() -> JobDir {
    let job = JobFile::new("chatty")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("words", "words.txt").batch_size(10).rate(200))
        .operator(Operator::new("probe", plugins::GUEST_SANDBOX_PROBE).inputs(&["words"]))
        .sink(Sink::file("out", "out.txt").input("probe"));
    let words: String = (0..200).map(|i| format!("w{i}\n")).collect();
    JobDir::new(WEIR, job, &[("words.txt", &words)])
}

/// The `n` words word count, `count_words`, ready to run.
fn counted(name: &str, n: usize) -> JobDir {
    let words: String = (0..n).map(|i| format!("w{}\n", i % 10)).collect();
    let job = count_words(name, Checkpoint::every("100ms"), 1_000_000, 1);
    JobDir::new(WEIR, job, &[("words.txt", &words)])
}

#[test]
fn on_a_terminal_log_lines_print_above_the_live_display_and_stay() {
    let j = chatty();
    let mut cmd = j.command("run", &["-v"]);
    cmd.env_remove("NO_COLOR");
    let run = on_pty(&mut cmd);
    let raw = run.text();
    assert!(run.status.success(), "{raw}");
    // The live display was drawn (its header has two spaces after the name).
    assert!(raw.contains("job `chatty`  "), "no live display: {raw:?}");
    let screen = run.screen().lines();
    let shown = screen.join("\n");
    for needle in ["probe stderr: hello", " complete in "] {
        let written = raw.matches(needle).count();
        assert!(written >= 2, "{needle:?} logged {written} times: {raw:?}");
        let kept = screen.iter().filter(|l| l.contains(needle)).count();
        assert_eq!(
            kept, written,
            "{needle:?}: {written} lines written, {kept} left on the screen:\n{shown}"
        );
    }
    // The display is gone at the end, and the summary is the last thing shown.
    assert!(
        !screen
            .iter()
            .any(|l| l.contains("job `chatty`  ") || l.contains("backpressure")),
        "the display left lines behind:\n{shown}"
    );
    assert!(
        screen
            .iter()
            .any(|l| l.starts_with("job `chatty` finished")),
        "{shown}"
    );
    assert!(
        screen.last().unwrap().trim_start().starts_with("sink"),
        "{shown}"
    );
    // Colour on a terminal.
    assert!(run.screen().sgr > 0, "no colour on a terminal: {raw:?}");
}

/// A job of about 1.5 s with event time: operator `probe` (timer-probe)
/// keeps one event-time and one processing-time timer per word of its
/// generator (3 words, every record at the same time).
fn timed() -> JobDir {
    let job = JobFile::new("timed")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::generator("gen", 300)
                .words(3)
                .rate(200)
                .value("start", 1_700_000_000_000i64)
                .string("step", "0s"),
        )
        .operator(Operator::new("probe", plugins::GUEST_TIMER_PROBE).inputs(&["gen"]))
        .sink(Sink::file("out", "out.txt").input("probe"));
    JobDir::new(WEIR, job, &[])
}

/// The live display shows the watermark and pending timers of a job with
/// event time, and the summary what they were at the end; a job without
/// event time shows neither.
#[test]
fn the_live_display_and_summary_show_watermarks_and_timers_of_jobs_with_event_time() {
    let j = timed();
    let run = on_pty(&mut j.command("run", &[]));
    let raw = run.text();
    assert!(run.status.success(), "{raw}");
    assert!(raw.contains("job `timed`  "), "no live display: {raw:?}");
    // While it ran: no watermark yet, timers pending.
    for needle in [
        "  watermark \u{2014}  timers ",
        " event-time, ",
        " processing-time",
    ] {
        assert!(raw.contains(needle), "{needle:?} not shown: {raw:?}");
    }
    let screen = run.screen().lines();
    let shown = screen.join("\n");
    assert!(
        !shown.contains("backpressure"),
        "the display stayed:\n{shown}"
    );
    let summary: Vec<&str> = screen
        .iter()
        .map(|l| l.trim_end())
        .skip_while(|l| !l.starts_with("job `timed` finished"))
        .collect();
    assert_eq!(
        summary[summary.len() - 3..],
        [
            "  event time:",
            "    source   gen    watermark end",
            "    operator probe  watermark end  timers 0 event-time, 3 processing-time pending",
        ],
        "{shown}"
    );

    // Plain progress lines carry the same.
    let out = timed().run(&["--progress-every", "100ms"]);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with("progress:   operator probe ") && l.contains(" processing-time")),
        "{}",
        out.stderr
    );

    let plain = chatty();
    let run = on_pty(&mut plain.command("run", &[]));
    let raw = run.text();
    assert!(
        run.status.success() && raw.contains("job `chatty`  "),
        "{raw:?}"
    );
    for needle in ["watermark", "timers", "event time"] {
        assert!(
            !raw.contains(needle),
            "{needle:?} without event time: {raw:?}"
        );
    }
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    let j = counted("plain", 100);
    let mut cmd = j.command("run", &["-v"]);
    cmd.env("NO_COLOR", "1");
    let run = on_pty(&mut cmd);
    let raw = run.text();
    assert!(run.status.success(), "{raw}");
    assert!(raw.contains("checkpoint 1 complete"), "{raw:?}");
    assert_eq!(run.screen().sgr, 0, "colour codes with NO_COLOR=1: {raw:?}");
}

#[test]
fn logs_in_a_pipe_have_no_colour_codes() {
    let j = chatty();
    let out = Outcome::of(j.command("run", &["-v"]).env_remove("NO_COLOR"));
    let err = &out.stderr;
    assert!(out.success(), "{err}");
    assert_has_all(err, &[" WARN ", "probe stderr: hello"]);
    assert_has(err, "checkpoint 1 complete");
    assert!(!err.contains('\u{1b}'), "escape codes in a pipe: {err:?}");
}

#[test]
fn a_closed_stderr_stops_the_log_not_the_job() {
    let j = counted("quiet", 2000);
    let (reader, writer) = pipe().unwrap();
    drop(reader);
    let status = j
        .command("run", &["-v"])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    assert_eq!(j.read("out.jsonl").lines().count(), 2000);
}

#[test]
fn a_closed_stdout_is_an_error_with_exit_status_1_not_a_panic() {
    let job = |delivery: &str| {
        let sink = Sink::stdout("out").value("delivery", format!("{delivery:?}"));
        word_count("printing", Source::file("words", "words.txt"), 1, sink)
    };
    let closed = || {
        let (reader, writer) = pipe().unwrap();
        drop(reader);
        writer
    };
    // At least once: the job fails at its first write.
    let j = JobDir::new(WEIR, job("at-least-once"), &[("words.txt", "a\nb\n")]);
    let out = Outcome::of(j.command("run", &[]).stdout(closed()));
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    out.assert_one_line_error(&["error: ", "sink `out`", "stdout", "Broken pipe"]);
    // Exactly once: at the first commit, after the checkpoint.
    let j = JobDir::new(WEIR, job("exactly-once"), &[("words.txt", "a\nb\n")]);
    let out = Outcome::of(j.command("run", &[]).stdout(closed()));
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    out.assert_one_line_error(&["error: ", "sink `out`", "stdout", "Broken pipe"]);
    assert!(j.checkpoints(&[]).contains("1 complete checkpoint"));
    // Commands that print a report fail the same way.
    let mut checkpoints = WEIR.command(["checkpoints", "--json"]);
    checkpoints.arg(j.state_dir()).stdout(closed());
    let out = Outcome::of(&mut checkpoints);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    out.assert_one_line_error(&["error: cannot write to stdout", "Broken pipe"]);
}

#[test]
fn run_json_prints_the_summary_as_one_json_object_on_stdout() {
    let j = counted("json", 500);
    let out = j.run(&["--json"]);
    assert!(out.success(), "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let s: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(s["job"], "json");
    assert_eq!(s["finished"], true);
    assert_eq!(s["restored_from"], Value::Null);
    assert_eq!(s["restarts"], 0);
    assert!(s["duration_secs"].as_f64().unwrap() > 0.0, "{s}");
    let checkpoints = s["checkpoints"].as_u64().unwrap();
    assert!(checkpoints >= 1, "{s}");
    assert_eq!(s["last_checkpoint"].as_u64(), Some(checkpoints), "{s}");
    let node = |id: &str| {
        let n = s["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id} in {s}"));
        (
            n["kind"].as_str().unwrap().to_string(),
            n["records_in"].as_u64().unwrap(),
            n["records_out"].as_u64().unwrap(),
        )
    };
    assert_eq!(node("words"), ("source".into(), 0, 500));
    assert_eq!(node("count"), ("operator".into(), 500, 500));
    assert_eq!(node("out").0, "sink");
    assert_eq!(node("out").1, 500);
    assert_eq!(node("out").2, 500, "a sink's out: the records it delivered");
    assert_eq!(j.read("out.jsonl").lines().count(), 500);
    // The person's summary stays on stderr.
    assert_has(&out.stderr, "job `json` finished");
}

#[test]
fn run_json_is_refused_for_a_job_that_prints_to_stdout() {
    let job = word_count(
        "printing",
        Source::file("words", "words.txt"),
        1,
        Sink::stdout("shown"),
    );
    let j = JobDir::new(WEIR, job, &[("words.txt", "a\n")]);
    let out = j.run(&["--json"]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    out.assert_one_line_error(&["--json", "sink `shown`", "type = \"stdout\""]);
    assert!(!j.state_dir().exists(), "refused before running");
}

/// `plugin` with a custom section of 1 MiB appended (the same operator, a
/// different file), written to `dir/big.wasm`.
fn padded(plugin: &str, dir: &Path) -> PathBuf {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"weir-test-padding";
    let mut section = Vec::new();
    leb128(name.len(), &mut section);
    section.extend_from_slice(name);
    section.resize(section.len() + (1 << 20), 0);
    let mut wasm = std::fs::read(plugin).unwrap();
    wasm.push(0); // a custom section
    leb128(section.len(), &mut wasm);
    wasm.extend_from_slice(&section);
    let path = dir.join("big.wasm");
    std::fs::write(&path, wasm).unwrap();
    path
}

#[test]
fn the_first_compile_of_a_large_plugin_is_announced_once() {
    let j = counted("big", 10);
    let big = padded(plugins::WORD_COUNT, j.path());
    j.write_job(
        count_words("big", Checkpoint::every("100ms"), 1_000_000, 1)
            .operator_with("count", |o| o.plugin(&big)),
    );
    let cache = j.path().join("cache");
    let run = || {
        let mut cmd = j.command("run", &["--restore", "none"]);
        cmd.env("WEIR_CACHE_DIR", &cache);
        Outcome::of(&mut cmd).assert_ok().stderr
    };
    let first = run();
    let notices: Vec<&str> = first
        .lines()
        .filter(|l| l.contains("compiling plugin"))
        .collect();
    assert_eq!(notices.len(), 1, "{first}");
    for needle in [
        big.to_str().unwrap(),
        "(1.", // MB
        &format!("cached in {} for the next run", cache.display()),
    ] {
        assert!(notices[0].contains(needle), "{needle:?} not in {first}");
    }
    let second = run();
    assert_lacks(&second, "compiling plugin");
}
