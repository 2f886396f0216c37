//! When a sink's output becomes visible (`delivery`): a stdout sink prints
//! records as they arrive by default (at-least-once), long before any
//! checkpoint completes, and only at commit with
//! `delivery = "exactly-once"`; a file sink with
//! `delivery = "at-least-once"` appends as records arrive and, SIGKILLed
//! repeatedly, loses nothing and only ever repeats from a checkpoint on.

use weir_tests::cli::Weir;
use weir_tests::counts::{assert_replayed_counts, assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, Sink, Source};
use weir_tests::jobs::{count_restarting, word_count, words};
use weir_tests::running::Running;
use weir_tests::text::assert_has;
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// stdin → word-count → `sink`, with checkpoints an hour apart (none
/// completes while the test runs).
fn from_stdin(name: &str, sink: Sink) -> JobDir {
    let job = word_count(name, Source::stdin("in"), 1, sink).checkpoint(Checkpoint::every("1h"));
    JobDir::new(WEIR, job, &[])
}

/// [`from_stdin`] into stdout with the sink's `delivery`, spawned with
/// stdin and stdout piped.
fn printing(delivery: Option<&str>) -> (JobDir, Running) {
    let mut sink = Sink::stdout("out");
    if let Some(d) = delivery {
        sink = sink.value("delivery", format!("{d:?}"));
    }
    let j = from_stdin("printing", sink);
    let run = j.spawn_printing(&["--progress-every", "0"]);
    (j, run)
}

#[test]
fn at_least_once_stdout_prints_each_record_before_any_checkpoint() {
    let (_j, mut run) = printing(None);
    for word in ["apple", "pear", "apple"] {
        run.send(&format!("{word}\n"));
        // Each count is printed while stdin stays open and no checkpoint
        // has completed (the first is an hour away).
        let line = run.next_printed(PATIENCE).unwrap_or_else(|e| {
            panic!("no output for {word} with stdin open: {e}");
        });
        assert_has(&line, word);
    }
    run.close_stdin();
    let rest = run.rest_printed();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert!(rest.is_empty(), "printed again at the end: {rest:?}");
}

#[test]
fn exactly_once_stdout_prints_at_commit_only() {
    let (_j, mut run) = printing(Some("exactly-once"));
    run.send("apple\npear\n");
    // Nothing is printed while the epoch is open (a window in which the
    // at-least-once test above sees each record printed).
    let early = run.next_printed(std::time::Duration::from_millis(500));
    assert!(early.is_err(), "printed before a commit: {early:?}");
    run.close_stdin();
    let printed = run.rest_printed();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
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
    let sink = Sink::file("out", "out.txt").value("delivery", "\"at-least-once\"");
    let j = from_stdin("appending", sink);
    let mut run = j.spawn_fed(&["--progress-every", "0"]);
    for word in ["apple", "pear"] {
        run.send(&format!("{word}\n"));
        wait_until(
            &format!("{word} in out.txt with stdin open"),
            PATIENCE,
            || j.read_so_far("out.txt").contains(word).then_some(()),
        );
    }
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
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
    let words = words(6000);
    let input: String = words.iter().map(|w| format!("{w}\n")).collect();
    let source = Source::file("words", "words.txt").rate(3000);
    let sink = Sink::file("out", "out.txt").value("delivery", "\"at-least-once\"");
    let job = count_restarting("appending-kills", source, sink);
    let j = JobDir::new(WEIR, job, &[("words.txt", &input)]);
    j.run_through_kills_after_checkpoints(3, 41);
    let text = j.read("out.txt");
    let all = text.lines().count();
    let want = true_counts(&words);
    assert_replayed_counts(&want, &text, "out.txt");
    eprintln!("{} lines, {} repeated", all, all - words.len());
}
