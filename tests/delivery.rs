//! When a sink's output becomes visible (`delivery`): a stdout sink prints
//! records as they arrive by default (at-least-once), long before any
//! checkpoint completes, and only at commit with
//! `delivery = "exactly-once"`; a file sink with
//! `delivery = "at-least-once"` appends as records arrive and, SIGKILLed
//! repeatedly, loses nothing and only ever repeats from a checkpoint on.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use weir_tests::cli::Weir;
use weir_tests::counts::{assert_replayed_counts, assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Restart, Sink, Source};
use weir_tests::plugins;
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// stdin → word-count → stdout, with checkpoints an hour apart (none
/// completes while the test runs) and the sink's `delivery`.
fn printing(delivery: Option<&str>) -> JobDir {
    let mut sink = Sink::stdout("out").input("count");
    if let Some(d) = delivery {
        sink = sink.value("delivery", format!("{d:?}"));
    }
    let job = JobFile::new("printing")
        .checkpoint(Checkpoint::every("1h"))
        .source(Source::stdin("in"))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["in"]))
        .sink(sink);
    JobDir::new(WEIR, job, &[])
}

/// Spawns the job with piped stdin and stdout; stdout's lines arrive on the
/// returned channel as they are printed.
fn spawn(j: &JobDir) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut cmd: Command = j.command("run", &["--progress-every", "0"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

#[test]
fn at_least_once_stdout_prints_each_record_before_any_checkpoint() {
    let j = printing(None);
    let (mut child, lines) = spawn(&j);
    let mut stdin = child.stdin.take().unwrap();
    for word in ["apple", "pear", "apple"] {
        stdin.write_all(format!("{word}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        // Each count is printed while stdin stays open and no checkpoint
        // has completed (the first is an hour away).
        let line = lines.recv_timeout(PATIENCE).unwrap_or_else(|e| {
            panic!("no output for {word} with stdin open: {e}");
        });
        assert!(line.contains(word), "{line}");
    }
    drop(stdin);
    let rest: Vec<String> = lines.iter().collect();
    assert!(child.wait().unwrap().success());
    assert!(rest.is_empty(), "printed again at the end: {rest:?}");
}

#[test]
fn exactly_once_stdout_prints_at_commit_only() {
    let j = printing(Some("exactly-once"));
    let (mut child, lines) = spawn(&j);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"apple\npear\n").unwrap();
    stdin.flush().unwrap();
    // Nothing is printed while the epoch is open (a window in which the
    // at-least-once test above sees each record printed).
    let early = lines.recv_timeout(std::time::Duration::from_millis(500));
    assert!(early.is_err(), "printed before a commit: {early:?}");
    drop(stdin);
    let printed: Vec<String> = lines.iter().collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(printed.len(), 2, "{printed:?}");
    let want = true_counts(["apple", "pear"]);
    assert_running_counts(&want, &printed.join("\n"), "the printed counts");
    assert!(
        printed[0].contains("apple"),
        "in stdin's order: {printed:?}"
    );
}

#[test]
fn an_at_least_once_file_sink_appends_before_any_checkpoint() {
    let job = JobFile::new("appending")
        .checkpoint(Checkpoint::every("1h"))
        .source(Source::stdin("in"))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["in"]))
        .sink(
            Sink::file("out", "out.txt")
                .value("delivery", "\"at-least-once\"")
                .input("count"),
        );
    let j = JobDir::new(WEIR, job, &[]);
    let mut cmd = j.command("run", &["--progress-every", "0"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for word in ["apple", "pear"] {
        stdin.write_all(format!("{word}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        wait_until(
            &format!("{word} in out.txt with stdin open"),
            PATIENCE,
            || {
                let text = std::fs::read_to_string(j.path().join("out.txt")).unwrap_or_default();
                text.contains(word).then_some(())
            },
        );
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let out = j.read("out.txt");
    let want = true_counts(["apple", "pear"]);
    assert_running_counts(&want, &out, "out.txt");
    assert!(
        out.starts_with(r#"{"word":"apple""#),
        "in stdin's order: {out}"
    );
}

/// Word count into an at-least-once file, SIGKILLed repeatedly: every
/// count is in the file, each word's in order except that a restart
/// repeats counts from its checkpoint on; the repeats are counted (and
/// allowed).
#[test]
fn an_at_least_once_file_sink_through_kills_loses_nothing() {
    let words: Vec<String> = (0..6000).map(|i| format!("w{}", i * 7 % 37)).collect();
    let input: String = words.iter().map(|w| format!("{w}\n")).collect();
    let job = JobFile::new("appending-kills")
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(20, "200ms"))
        .source(Source::file("words", "words.txt").rate(3000))
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["words"])
                .parallelism(2),
        )
        .sink(
            Sink::file("out", "out.txt")
                .value("delivery", "\"at-least-once\"")
                .input("count"),
        );
    let j = JobDir::new(WEIR, job, &[("words.txt", &input)]);
    j.run_through_kills_after_checkpoints(3, 41);
    let text = j.read("out.txt");
    let all = text.lines().count();
    let want = true_counts(&words);
    assert_replayed_counts(&want, &text, "out.txt");
    eprintln!("{} lines, {} repeated", all, all - words.len());
}
