//! The NATS JetStream source and sink against a real, private
//! `nats-server` (started per test by `weir_tests::servers`): exactly-once
//! through SIGKILLs and a server restart, into JetStream and into two
//! PostgreSQL tables (the golden pipeline of `examples/nats-to-postgres`),
//! start positions, formats, and one-line errors for a bad URL, a missing
//! stream and a subject no stream captures.

use std::time::Duration;

use weir_tests::cli::Weir;
use weir_tests::counts::{
    assert_count_tables, assert_replayed_counts, assert_running_counts, true_counts,
};
use weir_tests::job_dir::{JobDir, assert_one_line_errors, signal};
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{self, copy_bounded, count_restarting, pipe, word_count, words};
use weir_tests::plugins;
use weir_tests::servers::{Nats, Postgres, StreamMsg};
use weir_tests::text::{assert_has, assert_has_all};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// A server with stream `WORDS` (subjects `words.>`) holding `words`, one
/// message each on `words.in`, and stream `COUNTS` (`counts.>`).
fn server_with(words: &[String]) -> Nats {
    let nats = Nats::start();
    nats.create_stream("WORDS", &["words.>"]);
    nats.create_stream("COUNTS", &["counts.>"]);
    publish(&nats, "words.in", words);
    nats
}

/// Publishes each of `words` to `subject`.
fn publish(nats: &Nats, subject: &str, words: &[String]) {
    let payloads: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    nats.publish(subject, &payloads);
}

/// Source `words`: stream `WORDS`, bounded, at `rate` records/s.
fn bounded_words(nats: &Nats, rate: u64) -> Source {
    Source::nats("words", &nats.url(), "WORDS")
        .value("bounded", true)
        .rate(rate)
}

/// Word count from stream `WORDS` (bounded, at `rate` records/s) by two
/// instances, each count published to `counts.<word>`.
fn counting(nats: &Nats, rate: u64) -> JobFile {
    counting_into(nats, rate, Sink::nats("out", &nats.url(), "counts.{key}"))
}

/// [`counting`] into `sink` ([`count_restarting`]).
fn counting_into(nats: &Nats, rate: u64, sink: Sink) -> JobFile {
    count_restarting("nats-count", bounded_words(nats, rate), sink)
}

/// Asserts that stream `COUNTS` holds every running count of `input`
/// exactly once and in order.
fn assert_counts_in_order(nats: &Nats, input: &[String]) {
    let text = nats.read_stream_text("COUNTS");
    assert_running_counts(&true_counts(input), &text, "the COUNTS stream");
}

/// The payloads of `messages`, as text.
fn payloads<'a>(messages: impl IntoIterator<Item = &'a StreamMsg>) -> Vec<String> {
    messages
        .into_iter()
        .map(|m| String::from_utf8(m.2.clone()).unwrap())
        .collect()
}

/// Every word counted exactly once in the output stream, each word's
/// counts in stream order, however the runs were killed; and the same
/// message ids never stored twice.
#[test]
fn a_bounded_stream_counted_through_kills_is_published_exactly_once() {
    let input = words(6000);
    let nats = server_with(&input);
    let job = JobDir::new(WEIR, counting(&nats, 3000), &[]);
    job.run_through_kills_after_checkpoints(3, 17);
    assert_counts_in_order(&nats, &input);
    let messages = nats.read_stream("COUNTS");
    let mut ids: Vec<&str> = messages.iter().filter_map(|m| m.3.as_deref()).collect();
    assert_eq!(ids.len(), messages.len(), "every message has an id");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), messages.len(), "no id stored twice");
    let subject = &messages[0].1;
    assert!(subject.starts_with("counts.w"), "{subject}");
}

/// `delivery = "at-least-once"` through kills: every count is in the
/// stream, each word's in stream order except that a restart repeats
/// counts from its checkpoint on; published without message ids.
#[test]
fn an_at_least_once_sink_through_kills_loses_nothing() {
    let input = words(5000);
    let nats = server_with(&input);
    let sink =
        Sink::nats("out", &nats.url(), "counts.{key}").value("delivery", "\"at-least-once\"");
    let file = counting_into(&nats, 2500, sink);
    let job = JobDir::new(WEIR, file, &[]);
    job.run_through_kills_after_checkpoints(3, 31);
    let text = nats.read_stream_text("COUNTS");
    assert_replayed_counts(&true_counts(&input), &text, "the COUNTS stream");
    let messages = nats.read_stream("COUNTS");
    assert!(
        messages.iter().all(|m| m.3.is_none()),
        "a message id was set"
    );
}

/// The server goes away mid-job and comes back on the same port: the job
/// reconnects (or fails an attempt and restores), and nothing is lost or
/// repeated.
#[test]
fn a_server_restart_during_the_job_loses_and_repeats_nothing() {
    let input = words(5000);
    let mut nats = server_with(&input);
    let job = JobDir::new(WEIR, counting(&nats, 2500), &[]);
    let stderr = job.run_through_an_outage(&mut nats, Duration::from_millis(700));
    assert_has(&stderr, "lost the connection");
    assert_counts_in_order(&nats, &input);
}

/// Another publisher writes to the job's output stream all along, with
/// and without message ids: the job's messages still reach the stream
/// exactly once and in order, and the other publisher's all of them.
#[test]
fn another_publisher_on_the_output_stream_leaves_the_order_intact() {
    let input = words(5000);
    let nats = server_with(&input);
    let job = JobDir::new(WEIR, counting(&nats, 5000), &[]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (stderr, others) = std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            nats.publish_until("counts.other", &stop, |i| {
                let id = (i % 2 == 0).then(|| format!("other/{i}"));
                (id, i.to_string().into_bytes())
            })
        });
        let stderr = job.run_ok(&["-v"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (stderr, other.join().unwrap())
    });
    assert!(
        stderr.contains("another publisher writes to the stream"),
        "no publish of the job was refused for following another publisher's: {stderr}"
    );
    let messages = nats.read_stream("COUNTS");
    let (theirs, ours): (Vec<_>, Vec<_>) = messages.iter().partition(|m| m.1 == "counts.other");
    let want: Vec<String> = (0..others).map(|i| i.to_string()).collect();
    assert_eq!(payloads(theirs), want, "the other publisher's messages");
    let want = true_counts(&input);
    let ours = payloads(ours).join("\n");
    assert_running_counts(&want, &ours, "the job's messages in COUNTS");
}

/// A job that copies stream `WORDS` to the file `out.txt`, with `extra`
/// settings on the source.
fn copying(nats: &Nats, extra: &[(&str, &str)]) -> JobFile {
    copy_bounded("nats-copy", Source::nats("in", &nats.url(), "WORDS"), extra)
}

/// Source `in`: stream `WORDS` (bounded) of jsonl records keyed by `user`.
fn users(nats: &Nats) -> Source {
    Source::nats("in", &nats.url(), "WORDS")
        .value("bounded", true)
        .format("jsonl")
        .key("user")
}

#[test]
fn start_positions_pick_the_first_message() {
    let input: Vec<String> = (1..=10).map(|i| format!("m{i}")).collect();
    let nats = server_with(&input);
    let cases: [(&str, &[&str]); 5] = [
        (
            "\"first\"",
            &["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"],
        ),
        ("{ sequence = 8 }", &["m8", "m9", "m10"]),
        ("\"last\"", &["m10"]),
        ("\"new\"", &[]),
        (
            "{ time = \"2000-01-01T00:00:00Z\" }",
            &["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"],
        ),
    ];
    for (start, want) in cases {
        let job = JobDir::new(WEIR, copying(&nats, &[("start", start)]), &[]);
        job.run_ok(&["--restore", "none"]);
        let got = job.read("out.txt");
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got, want, "start = {start}");
    }
}

/// `jsonl` payloads with a key field and the event time from a field, or
/// from the message's own time.
#[test]
fn jsonl_messages_give_keys_and_timestamps() {
    let input = vec![
        r#"{"user":"ann","ts":1000}"#.to_string(),
        r#"{"user":"bob","ts":2000}"#.to_string(),
    ];
    let nats = server_with(&input);
    let sink = Sink::file("out", "out.txt");
    let keyed = word_count("nats-keys", users(&nats).timestamp("ts"), 1, sink);
    let job = JobDir::new(WEIR, keyed, &[]);
    job.run_ok(&[]);
    let out = job.read("out.txt");
    assert_has_all(&out, &[r#""word":"ann""#, r#""word":"bob""#]);
}

/// A message's subject, stream sequence, stored time and headers become
/// fields of its record (`metadata`), and `key` may name one: each line
/// out is its message's payload with them, the sequences those the stream
/// gave when the test published. A NATS sink with `metadata = { headers
/// = "hh" }` publishes that field of the records as the message's
/// headers, without it in the payload.
#[test]
fn message_metadata_becomes_fields_of_the_record() {
    let nats = Nats::start();
    nats.create_stream("WORDS", &["words.*"]);
    nats.create_stream("COPY", &["copy"]);
    let acks: Vec<(u64, String)> = (0..20)
        .map(|i| {
            let subject = format!("words.s{}", i % 2);
            let payload = format!(r#"{{"n":{i},"hh":{{"trace":"t{i}","multi":["a","b"]}}}}"#);
            let ack = nats.publish_with_id(&subject, &format!("id-{i}"), payload.as_bytes());
            (ack.seq, subject)
        })
        .collect();
    let source = Source::nats("in", &nats.url(), "WORDS")
        .value("bounded", true)
        .format("jsonl")
        .key("s")
        .value(
            "metadata",
            r#"{ subject = "s", sequence = "q", timestamp = "at", headers = "h" }"#,
        );
    let copy = Sink::nats("copy", &nats.url(), "copy")
        .input("in")
        .value("metadata", r#"{ headers = "hh" }"#);
    let file = pipe("nats-meta", source, Sink::file("out", "out.jsonl")).sink(copy);
    let job = JobDir::new(WEIR, file, &[]);
    job.run_ok(&[]);
    let out = job.read("out.jsonl");
    let lines: Vec<serde_json::Value> = (out.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 20);
    for (i, (line, (seq, subject))) in lines.iter().zip(&acks).enumerate() {
        assert_eq!(line["n"], i, "{line}");
        assert_eq!(line["q"], *seq, "{line}");
        assert_eq!(line["s"], subject.as_str(), "{line}");
        assert_eq!(
            line["h"],
            serde_json::json!({"Nats-Msg-Id": format!("id-{i}")}),
            "{line}"
        );
        assert!(line["at"].as_i64().unwrap() > 1_700_000_000_000, "{line}");
    }
    let copies = nats.read_stream_with_headers("COPY");
    assert_eq!(copies.len(), 20);
    for (i, (((_, _, payload, _), headers), line)) in copies.iter().zip(&lines).enumerate() {
        let mut want = line.clone();
        want.as_object_mut().unwrap().remove("hh");
        let got: serde_json::Value = serde_json::from_slice(payload).unwrap();
        assert_eq!(got, want);
        let of = |name: &str| -> Vec<&str> {
            (headers.iter().filter(|(n, _)| n == name))
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert_eq!(of("trace"), [format!("t{i}")], "{headers:?}");
        assert_eq!(of("multi"), ["a", "b"], "{headers:?}");
        // The sink's own message id (exactly-once).
        let ids = of("Nats-Msg-Id");
        assert!(
            ids.len() == 1 && ids[0].starts_with("nats-meta/copy/"),
            "{headers:?}"
        );
    }
}

/// With `message_time = true` each record's event time is the time the
/// stream stored its message: hour windows over messages published now
/// are the current hour's, and fire on the watermarks the source makes.
#[test]
fn message_times_are_event_times_for_windows() {
    let hour = 3_600_000;
    let now = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.unwrap().as_millis() as i64 / hour * hour
    };
    let before = now();
    let nats = server_with(&[
        r#"{"user":"ann"}"#.into(),
        r#"{"user":"ann"}"#.into(),
        r#"{"user":"bob"}"#.into(),
    ]);
    let after = now();
    let windows = JobFile::new("nats-windows")
        .source(
            users(&nats)
                .value("message_time", true)
                .value("watermark", "{ max_out_of_orderness = \"1s\" }"),
        )
        .operator(
            Operator::new("count", plugins::WINDOW_COUNT)
                .inputs(&["in"])
                .config("{ size = \"1h\" }"),
        )
        .sink(Sink::file("out", "out.txt").input("count"));
    let job = JobDir::new(WEIR, windows, &[]);
    job.run_ok(&[]);
    let out = job.read("out.txt");
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for row in &rows {
        let start = row["window_start"].as_i64().unwrap();
        assert!(start == before || start == after, "{row} (hour {before})");
        let want = if row["key"] == "ann" { 2 } else { 1 };
        assert_eq!(row["count"], want, "{row}");
    }
}

#[test]
fn a_bad_url_a_missing_stream_and_an_uncaptured_subject_are_one_line_errors() {
    let nats = server_with(&[]);
    let dead = format!("nats://127.0.0.1:{}", weir_tests::servers::free_port());
    let job = |source: Source, sink: Sink| pipe("nats-errors", source.value("bounded", true), sink);
    let file = || Sink::file("out", "out.txt");
    let cases = [
        (
            job(Source::nats("in", &dead, "WORDS"), file()),
            vec!["source `in`", "cannot connect", "127.0.0.1"],
        ),
        (
            job(Source::nats("in", &nats.url(), "NOPE"), file()),
            vec!["source `in`", "stream `NOPE`"],
        ),
        (
            job(
                Source::nats("in", &nats.url(), "WORDS"),
                Sink::nats("out", &nats.url(), "nowhere"),
            ),
            vec!["sink `out`", "nowhere", "no JetStream stream"],
        ),
    ];
    assert_one_line_errors(WEIR, &[], cases);
}

/// The golden pipeline: a bounded stream → word count (2 instances) → an
/// upsert of totals and an append of every (word, count) into PostgreSQL,
/// SIGKILLed repeatedly. The totals are the true counts and every
/// (word, count) pair is in the append table exactly once, each word's in
/// order of insertion (the table's `id`, a sequence that COPY takes in row
/// order; every row names the same columns, so the sink copies an epoch's
/// rows in record order).
#[test]
fn nats_to_postgres_through_kills_is_exactly_once() {
    let input = words(6000);
    let nats = server_with(&input);
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE totals (word text PRIMARY KEY, count bigint NOT NULL);\
         CREATE TABLE events (id bigserial PRIMARY KEY, word text NOT NULL, count bigint NOT NULL);",
    );
    let totals = Sink::postgres("totals", &pg.url(), "totals")
        .string("mode", "upsert")
        .value("key", "[\"word\"]");
    let events = Sink::postgres("events", &pg.url(), "events").input("count");
    let file =
        count_restarting("nats-to-postgres", bounded_words(&nats, 3000), totals).sink(events);
    let job = JobDir::new(WEIR, file, &[]);
    job.run_through_kills_after_checkpoints(4, 29);

    assert_count_tables(&true_counts(&input), |sql| pg.psql(sql));
    let marks = pg.psql("SELECT count(*) FROM weir_sink_commits WHERE job = 'nats-to-postgres'");
    assert_eq!(marks, "2", "one bookkeeping row per sink");
}

/// An unbounded source keeps running until stopped: Ctrl-C (SIGINT)
/// checkpoints and stops it, and the next run reads exactly the messages
/// published meanwhile (none lost, none read twice), from a subject filter.
#[test]
fn an_unbounded_source_stopped_and_restarted_reads_every_message_once() {
    let nats = server_with(&[]);
    let first: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
    let second: Vec<String> = (0..200).map(|i| format!("b{i}")).collect();
    publish(&nats, "words.in", &first);
    publish(&nats, "words.other", &first[..50]);
    let source = Source::nats("in", &nats.url(), "WORDS").string("subject", "words.in");
    let file = pipe("nats-unbounded", source, Sink::file("out", "out.txt"))
        .checkpoint(Checkpoint::every("100ms"));
    let job = JobDir::new(WEIR, file, &[]);
    let lines = || job.read_so_far("out.txt");
    let run_until = |n: usize| {
        let run = job.spawn(&[]);
        wait_until("the output", PATIENCE, || {
            (lines().lines().count() >= n).then_some(())
        });
        signal(&run.child, "-INT");
        let (status, stderr) = run.wait();
        assert!(status.success(), "{stderr}");
    };
    run_until(first.len());
    publish(&nats, "words.in", &second);
    run_until(first.len() + second.len());
    let want: Vec<&str> = first.iter().chain(&second).map(String::as_str).collect();
    assert_eq!(lines().lines().collect::<Vec<_>>(), want);
}

/// A plugin trapping on one message of a stream read in batches of many
/// names the stream sequence of that message, once a replay one record
/// per batch found it: message `i` (from 0) of an empty stream has
/// sequence `i + 1`.
#[test]
fn a_trap_on_one_message_names_its_stream_sequence() {
    let nats = Nats::start();
    nats.create_stream("POISONED", &["p.>"]);
    let bad = 1234;
    let values = jobs::poison_values(3000, bad);
    publish(&nats, "p.in", &values);
    let file = jobs::poisoned(
        "nats-poison",
        Source::nats("in", &nats.url(), "POISONED").value("bounded", true),
    );
    let out = JobDir::new(WEIR, file, &[]).run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    let at = format!("stream POISONED sequence {} of source `in`)", bad + 1);
    assert_has_all(out.error_line(), &["poison: the record `poison`", &at]);
}

/// A NATS subject as the dead-letter sink: the lines of a file that are
/// not JSON reach the stream on `letters` once each, in input order,
/// through SIGKILLs (the sink's message ids drop what a restart publishes
/// again); the good lines reach `out.txt` once, in order.
#[test]
fn dead_letters_go_to_a_nats_subject_exactly_once_through_kills() {
    let nats = Nats::start();
    nats.create_stream("LETTERS", &["letters"]);
    let (mut input, mut good, mut bad) = (String::new(), String::new(), Vec::new());
    for i in 1..=3000 {
        let line = match i % 37 == 0 {
            true => format!("{{\"word\":\"w{i}\""),
            false => format!("{{\"word\":\"w{}\",\"n\":{i}}}", i % 101),
        };
        match i % 37 == 0 {
            true => bad.push(line.clone()),
            false => good.push_str(&format!("{line}\n")),
        }
        input.push_str(&line);
        input.push('\n');
    }
    let file = JobFile::new("nats-letters")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("in", "in.jsonl")
                .format("jsonl")
                .key("word")
                .rate(1500)
                .on_error("{ dead_letter = \"letters\" }"),
        )
        .sink(Sink::file("out", "out.txt").input("in"))
        .sink(Sink::nats("letters", &nats.url(), "letters"));
    let job = JobDir::new(WEIR, file, &[("in.jsonl", &input)]);
    let killed = job.run_through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_eq!(job.read("out.txt"), good);
    let letters = weir_tests::letters::parse(&nats.read_stream_text("LETTERS"));
    let values = weir_tests::letters::values(&letters);
    assert_eq!(values, bad, "each bad line once, in order");
    for l in &letters {
        assert_eq!(
            (l["node"].as_str(), l["error_kind"].as_str()),
            (Some("in"), Some("unreadable")),
            "{l}"
        );
    }
    // `weir deadletter ls` reads them back from the subject.
    let listed = weir_tests::letters::listed(&job, &[]);
    let sink = &listed["sinks"][0];
    assert_eq!(sink["letters"], bad.len(), "{listed:#}");
    let from = sink["from"].as_str().unwrap();
    assert!(from.starts_with("subject `letters` at nats://"), "{from}");
}
