//! The Kafka source and sink against a private Apache Kafka broker (one
//! node, started per test by `weir_tests::servers::Kafka`): the golden
//! pipeline Kafka → word count → Kafka exactly-once and in order through
//! more than 20 SIGKILLs and through a crash of the broker, checked by a
//! `read_committed` consumer; at-least-once through SIGKILLs; start
//! positions, bounded mode, offsets of several partitions across a
//! restore, keys, timestamps and headers, message metadata as record
//! fields and headers out of a field; one-line errors for an
//! unreachable cluster and missing topics. librdkafka's mock cluster
//! (`MockKafka`) injects what a real broker cannot do on demand: produce
//! requests refused mid-transaction.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_tests::cli::Weir;
use weir_tests::counts::{assert_replayed_counts, assert_running_counts, true_counts};
use weir_tests::job_dir::{JobDir, assert_one_line_errors};
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Restart, Sink, Source};
use weir_tests::jobs::{self, copy_bounded, count_restarting, pipe, words};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::servers::{Clients, Kafka, KafkaMessage, MockKafka, OutgoingHeaders, values_text};
use weir_tests::text::{assert_has, assert_has_all};
use weir_tests::wait::{PATIENCE, wait_until};
use weir_tests::windows::{assert_windows, clicks, windows_job};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// A broker with topic `words` (3 partitions) holding `words`
/// round-robin ([`fill`]), and an empty topic `counts` (3 partitions).
fn broker_with(words: &[String]) -> Kafka {
    let kafka = Kafka::start();
    kafka.create_topic("words", 3);
    kafka.create_topic("counts", 3);
    fill(&kafka, words);
    kafka
}

/// Writes `words` to topic `words` round-robin over its 3 partitions.
fn fill(kafka: &Clients, words: &[String]) {
    fill_topic(kafka, "words", words);
}

/// Writes `values` to `topic` round-robin over its 3 partitions.
fn fill_topic(kafka: &Clients, topic: &str, values: &[String]) {
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    kafka.produce_values(topic, 3, &values);
}

/// Word count from topic `words` (bounded, at `rate` records/s) by two
/// instances, each count written to `sink` ([`count_restarting`]).
fn counting(kafka: &Clients, rate: u64, sink: Sink) -> JobFile {
    let words = Source::kafka("words", &kafka.brokers(), "words");
    count_restarting("kafka-count", words.value("bounded", true).rate(rate), sink)
}

/// [`counting`] into topic `counts` through `delivery`, in a job folder.
fn counting_to_kafka(kafka: &Clients, rate: u64, delivery: &str) -> JobDir {
    let sink =
        Sink::kafka("out", &kafka.brokers(), "counts").value("delivery", format!("{delivery:?}"));
    JobDir::new(WEIR, counting(kafka, rate, sink), &[])
}

/// Checks `committed` (every message of topic `counts` a `read_committed`
/// reader sees, partition by partition in offset order) against the true
/// counts of `input`: each word's running counts exactly once and in
/// increasing order (each word is a key, so all its counts are in one
/// partition, in the order they were committed), each keyed by its word.
fn assert_counts_in_order(input: &[String], committed: &[KafkaMessage]) {
    let text = values_text(committed);
    assert_running_counts(&true_counts(input), &text, "the committed `counts` topic");
    let mut partition_of = BTreeMap::new();
    for m in committed {
        let value: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
        let word = value["word"].as_str().unwrap_or_default();
        assert_eq!(m.key.as_deref(), Some(word.as_bytes()), "{m:?}");
        let first = *partition_of.entry(word.to_owned()).or_insert(m.partition);
        assert_eq!(first, m.partition, "word {word} in two partitions: {m:?}");
    }
}

/// Every running count of `input` is among `messages`, read partition by
/// partition: repeats allowed (an attempt's records written again after a
/// restart), but each word's counts never skip ahead.
fn assert_replayed(input: &[String], messages: &[KafkaMessage]) {
    let text = values_text(messages);
    assert_replayed_counts(&true_counts(input), &text, "the counts, in read order");
}

/// The golden pipeline's source half: every word of a 3-partition topic
/// counted exactly once and in order through SIGKILLs (the offsets of
/// every partition come back from each restored checkpoint), into the
/// file sink.
#[test]
fn word_count_from_kafka_through_kills_is_exactly_once() {
    let input = words(6000);
    let kafka = broker_with(&input);
    let job = JobDir::new(
        WEIR,
        counting(&kafka, 3000, Sink::file("out", "out.txt")),
        &[],
    );
    job.run_through_kills_after_checkpoints(3, 17);
    assert_running_counts(&true_counts(&input), &job.read("out.txt"), "out.txt");
}

/// Kafka → word count → Kafka without a crash: each checkpoint's output
/// in one transaction, every count once and in order, keyed by its word;
/// nothing aborted.
#[test]
fn word_count_from_kafka_to_kafka_is_exactly_once() {
    let input = words(3000);
    let kafka = broker_with(&input);
    let job = counting_to_kafka(&kafka, 6000, "exactly-once");
    job.run_ok(&[]);
    let committed = kafka.read_committed("counts");
    assert_counts_in_order(&input, &committed);
    assert_eq!(kafka.read_uncommitted("counts").len(), committed.len());
}

/// The golden pipeline, Kafka → word count → transactional Kafka sink,
/// SIGKILLed more than 20 times at random moments after checkpoints: a
/// `read_committed` reader sees every count exactly once and in order, a
/// `read_uncommitted` reader also the records of aborted transactions,
/// and the sink's group holds the last delivered checkpoint, committed in
/// the same transactions (nothing but the transactions writes it).
#[test]
fn the_golden_pipeline_is_exactly_once_and_in_order_through_kills() {
    let input = words(40_000);
    let kafka = broker_with(&input);
    let job = counting_to_kafka(&kafka, 2000, "exactly-once");
    let killed = job.run_through_kills_after_checkpoints(24, 23);
    assert!(killed >= 20, "only {killed} runs were killed mid-job");
    let committed = kafka.read_committed("counts");
    assert_counts_in_order(&input, &committed);
    let marker = kafka.committed("weir-kafka-count-out", "counts", 0);
    assert!(marker.is_some_and(|n| n > 0), "delivery marker {marker:?}");
    // Kills land inside open transactions (a transaction is open for
    // much of each 100 ms checkpoint interval); their records reach the
    // log and are aborted by the next run's `init_transactions`, so a
    // `read_uncommitted` reader sees them: the abort path ran.
    let aborted = kafka.read_uncommitted("counts").len() - committed.len();
    assert!(
        aborted > 0,
        "no kill of {killed} left an aborted transaction"
    );
    eprintln!(
        "{killed} kills, {} committed, {aborted} aborted records",
        committed.len()
    );
}

/// The broker SIGKILLed mid-job and started again on its data: the job
/// fails attempts while it is gone, restores, and the committed output is
/// still every count exactly once and in order.
#[test]
fn a_crash_of_the_broker_loses_and_repeats_nothing() {
    let input = words(8000);
    let mut kafka = broker_with(&input);
    let sink = Sink::kafka("out", &kafka.brokers(), "counts");
    let file = counting(&kafka, 2000, sink).restart(Restart::fixed_delay(100, "300ms"));
    let job = JobDir::new(WEIR, file, &[]);
    job.run_through_an_outage(&mut kafka, Duration::from_millis(500));
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
}

/// At-least-once through kills: every count is there (duplicates allowed),
/// and written without transactions.
#[test]
fn at_least_once_through_kills_loses_nothing() {
    let input = words(4000);
    let kafka = broker_with(&input);
    let job = counting_to_kafka(&kafka, 2500, "at-least-once");
    job.run_through_kills_after_checkpoints(2, 5);
    assert_replayed(&input, &kafka.read_committed("counts"));
}

/// Topic `in` (2 partitions): m0..m9, m<i> on partition i % 2 at time
/// 1000 * (i + 1) (a timestamp of 0 would mean "now" to the producer).
fn timed_topic() -> Kafka {
    let kafka = Kafka::start();
    kafka.create_topic("in", 2);
    let values: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    let messages: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                Some(i as i32 % 2),
                None,
                v.as_bytes(),
                Some(1000 * (i as i64 + 1)),
            )
        })
        .collect();
    kafka.produce("in", &messages);
    kafka
}

fn copying(kafka: &Kafka, extra: &[(&str, &str)]) -> JobFile {
    copy_bounded(
        "kafka-copy",
        Source::kafka("in", &kafka.brokers(), "in"),
        extra,
    )
}

/// Lines of the job's `out.txt` so far (none before its first commit).
fn output_lines(job: &JobDir) -> usize {
    job.read_so_far("out.txt").lines().count()
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort_by_key(|l| l[1..].parse::<u32>().unwrap_or(u32::MAX));
    lines
}

#[test]
fn start_positions_and_bounded_mode_pick_the_messages() {
    let kafka = timed_topic();
    let all: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    let cases: [(&str, &[String]); 4] = [
        ("\"earliest\"", &all),
        ("\"latest\"", &[]),
        ("{ timestamp = 6000 }", &all[5..]),
        ("{ timestamp = \"1970-01-01T00:00:08Z\" }", &all[7..]),
    ];
    for (start, want) in cases {
        let job = JobDir::new(WEIR, copying(&kafka, &[("start", start)]), &[]);
        job.run_ok(&["--restore", "none"]);
        assert_eq!(sorted_lines(&job.read("out.txt")), want, "start = {start}");
    }
    // Bounded at the high-water marks of the first start: what is written
    // later is not read by that job, even after a restore.
    let job = JobDir::new(WEIR, copying(&kafka, &[]), &[]);
    job.run_ok(&[]);
    kafka.produce_values("in", 2, &["m10", "m11"]);
    job.run_ok(&[]);
    assert_eq!(sorted_lines(&job.read("out.txt")), all);
}

/// An unbounded source over two partitions, killed after a checkpoint and
/// restarted while more messages arrive: each message is in the output
/// once (the offsets of both partitions came back from the checkpoint),
/// and the monitoring `group` has the offsets of the checkpoints taken;
/// client `properties` reach librdkafka.
#[test]
fn offsets_of_every_partition_survive_a_restore() {
    let kafka = timed_topic();
    let group = "monitor";
    let source = Source::kafka("in", &kafka.brokers(), "in")
        .value("group", format!("{group:?}"))
        .value("properties", "{ \"fetch.wait.max.ms\" = 20 }");
    let file = pipe("kafka-unbounded", source, Sink::file("out", "out.txt"))
        .checkpoint(Checkpoint::every("100ms"));
    let job = JobDir::new(WEIR, file, &[]);
    let mut run = job.spawn(&["-v"]);
    run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    wait_until("the first messages in the output", PATIENCE, || {
        (output_lines(&job) == 10).then_some(())
    });
    run.kill();
    let more: Vec<String> = (10..20).map(|i| format!("m{i}")).collect();
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    kafka.produce_values("in", 2, &more);
    let run = job.spawn(&["-v"]);
    wait_until("every message in the output", PATIENCE, || {
        (output_lines(&job) >= 20).then_some(())
    });
    // The group follows the checkpoints: both partitions at their end.
    wait_until("the monitoring group at the end", PATIENCE, || {
        let at = |p| kafka.committed(group, "in", p);
        (at(0) == Some(10) && at(1) == Some(10)).then_some(())
    });
    run.kill();
    let want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    assert_eq!(sorted_lines(&job.read("out.txt")), want);
}

/// jsonl values give keys and event times from fields; the sink writes
/// the record's key, its timestamp and the configured headers.
/// A windowed count over clicks read from Kafka with their event time in
/// a field (`timestamp = "ts"`), produced now but stamped months ago: the
/// watermark follows the field, not the messages' own (production) time,
/// so the windows equal a batch computation and only the replayed late
/// clicks are late.
#[test]
fn the_watermark_follows_the_timestamp_field_not_the_message_time() {
    let (text, counts, late) = clicks(&mut XorShift(seed()), 5_000);
    let kafka = Kafka::start();
    // Months-old timestamps: no time retention.
    kafka.create_topic_with("clicks", 1, &[("retention.ms", "-1")]);
    let lines: Vec<&str> = text.lines().collect();
    kafka.produce_values("clicks", 1, &lines);
    let job = windows_job(Checkpoint::every("100ms")).source_with("clicks", |_| {
        Source::kafka("clicks", &kafka.brokers(), "clicks")
            .value("bounded", true)
            .format("jsonl")
            .key("user")
            .timestamp("ts")
            .batch_size(100)
            .value(
                "watermark",
                r#"{ max_out_of_orderness = "2s", interval = "0s" }"#,
            )
            .rate(20_000)
    });
    let j = JobDir::new(WEIR, job, &[]);
    j.run_ok(&[]);
    assert_windows(&j, &counts, &late);
}

#[test]
fn keys_timestamps_and_headers() {
    let kafka = Kafka::start();
    kafka.create_topic("in", 1);
    kafka.create_topic("out", 2);
    let ann = br#"{"user":"ann","ts":5000}"#;
    let bob = br#"{"user":"bob","ts":7000}"#;
    kafka.produce("in", &[(None, None, ann, None), (None, None, bob, None)]);
    let source = Source::kafka("in", &kafka.brokers(), "in")
        .value("bounded", true)
        .format("jsonl")
        .key("user")
        .timestamp("ts");
    let sink =
        Sink::kafka("out", &kafka.brokers(), "out").value("headers", "{ origin = \"weir\" }");
    let file = pipe("kafka-fields", source, sink).checkpoint(Checkpoint::every("100ms"));
    let job = JobDir::new(WEIR, file, &[]);
    job.run_ok(&[]);
    let mut out = kafka.read_committed("out");
    out.sort_by_key(|m| m.timestamp);
    let got: Vec<String> = out
        .iter()
        .map(|m| {
            let key = String::from_utf8_lossy(m.key.as_deref().unwrap_or(b"-"));
            format!("{key} {:?} {}", m.timestamp, m.headers["origin"])
        })
        .collect();
    assert_eq!(got, ["ann Some(5000) weir", "bob Some(7000) weir"]);
}

/// A message's metadata reaches the job as fields, and headers leave as
/// headers. 300 messages on three partitions, each with its own key,
/// timestamp and headers (a text one, and on some a binary one, a header
/// without a value, a name given twice); the source adds partition,
/// offset, topic, key, timestamp and headers as fields and keys records by
/// the key field; the `filter` plugin keeps the records whose `h.trace`
/// header holds a 7; the sink writes the `h` field as the message's
/// headers. Each message out is its input's: value with the metadata
/// (the offsets and partitions the test produced to), key, timestamp and
/// headers, each name's values in order.
#[test]
fn metadata_reaches_plugins_as_fields_and_headers_leave_through_the_sink() {
    let kafka = Kafka::start();
    kafka.create_topic("in", 3);
    kafka.create_topic("out", 1);
    let values: Vec<String> = (0..300).map(|i| format!("{{\"n\":{i}}}")).collect();
    let keys: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
    let traces: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    let bins: Vec<[u8; 2]> = (0..300).map(|i| [0xff, i as u8]).collect();
    let headers = |i: usize| {
        let mut h: OutgoingHeaders<'_> = vec![("trace", Some(traces[i].as_bytes()))];
        if i.is_multiple_of(10) {
            h.push(("bin", Some(&bins[i][..])));
        }
        if i.is_multiple_of(7) {
            h.extend([("dup", Some(&b"one"[..])), ("dup", Some(&b"two"[..]))]);
        }
        if i.is_multiple_of(5) {
            h.push(("flag", None));
        }
        h
    };
    let time = |i: usize| 1_700_000_000_000 + i as i64 * 10;
    let messages: Vec<_> = (0..300)
        .map(|i| {
            let out = (
                Some(i as i32 % 3),
                Some(keys[i].as_bytes()),
                values[i].as_bytes(),
                Some(time(i)),
            );
            (out, headers(i))
        })
        .collect();
    kafka.produce_with_headers("in", &messages);
    let metadata = r#"{ partition = "p", offset = "o", topic = "t", key = "k", timestamp = "ts", headers = "h" }"#;
    let source = Source::kafka("in", &kafka.brokers(), "in")
        .value("bounded", true)
        .format("jsonl")
        .key("k")
        .value("metadata", metadata);
    let filter = Operator::new("sevens", plugins::FILTER)
        .inputs(&["in"])
        .config(r#"{ field = "h.trace", op = "contains", value = "7" }"#);
    let sink = Sink::kafka("out", &kafka.brokers(), "out")
        .input("sevens")
        .value("metadata", r#"{ headers = "h" }"#);
    let file = JobFile::new("kafka-metadata")
        .checkpoint(Checkpoint::every("100ms"))
        .source(source)
        .operator(filter)
        .sink(sink);
    JobDir::new(WEIR, file, &[]).run_ok(&[]);

    let mut want = Vec::new();
    for i in (0..300).filter(|i| i.to_string().contains('7')) {
        let value = serde_json::json!({
            "n": i, "p": i % 3, "o": i / 3, "t": "in", "k": keys[i], "ts": time(i),
        });
        // By name, each name's values in order.
        let mut h: Vec<(String, Option<Vec<u8>>)> = (headers(i).into_iter())
            .map(|(n, v)| (n.to_owned(), v.map(<[u8]>::to_vec)))
            .collect();
        h.sort_by(|a, b| a.0.cmp(&b.0));
        want.push((keys[i].clone(), value, Some(time(i)), h));
    }
    // One record per key: order by key across the input partitions.
    let mut got: Vec<_> = (kafka.read_committed("out").into_iter())
        .map(|m| {
            let key = String::from_utf8(m.key.unwrap()).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
            (key, value, m.timestamp, m.header_list)
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(&want) {
        assert_eq!(got, want);
    }
    // Within an input partition, the output keeps its order.
    let out = kafka.read_committed("out");
    let ns: Vec<(u64, u64)> = (out.iter())
        .map(|m| {
            let v: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
            (v["p"].as_u64().unwrap(), v["o"].as_u64().unwrap())
        })
        .collect();
    for p in 0..3 {
        let offsets: Vec<u64> = ns
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, o)| *o)
            .collect();
        assert!(offsets.is_sorted(), "partition {p}: {offsets:?}");
    }
}

/// `metadata` is checked in one line: an item the messages lack, a format
/// whose records are no JSON objects, a sink's item other than headers.
#[test]
fn metadata_settings_are_checked_in_one_line() {
    let kafka = Kafka::start();
    kafka.create_topic("in", 1);
    let run = |source: Source, sink: Sink| {
        let file = pipe("meta", source, sink);
        JobDir::new(WEIR, file, &[]).run(&[])
    };
    let source = || Source::kafka("in", &kafka.brokers(), "in").value("bounded", true);
    let sink = || Sink::kafka("out", &kafka.brokers(), "in");
    run(
        source()
            .format("jsonl")
            .value("metadata", r#"{ sequence = "s" }"#),
        sink(),
    )
    .assert_one_line_error(&["`metadata.sequence`", "topic, partition, offset"]);
    run(source().value("metadata", r#"{ offset = "o" }"#), sink())
        .assert_one_line_error(&["`metadata` adds fields", "jsonl"]);
    run(
        source().format("jsonl"),
        sink().value("metadata", r#"{ key = "k" }"#),
    )
    .assert_one_line_error(&["`metadata.key`", "they have: headers"]);
}

/// A transaction whose messages the cluster refuses is aborted: the
/// attempt fails, the job restores its last checkpoint and delivers the
/// epoch again in a new transaction, and every count arrives. The mock
/// cluster refuses produce requests on demand; it also shows the aborted
/// transaction's messages to `read_committed` readers, so the check is
/// "nothing lost" (the real broker's tests above check "nothing twice").
#[test]
fn a_failed_transaction_is_aborted_and_delivered_again() {
    let input = words(3000);
    let kafka = MockKafka::start(1);
    kafka.create_topic("words", 3);
    kafka.create_topic("counts", 3);
    fill(&kafka, &input);
    let job = counting_to_kafka(&kafka, 3000, "exactly-once");
    let mut run = job.spawn(&["-v"]);
    run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    kafka.fail_next_produces(3);
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("sink `out`"), "no failed attempt: {stderr}");
    assert_has(&stderr, "resumed from checkpoint");
    assert_replayed(&input, &kafka.read_committed("counts"));
}

#[test]
fn an_unreachable_cluster_missing_topics_and_bad_properties_are_one_line_errors() {
    let kafka = Kafka::start();
    kafka.create_topic("in", 1);
    kafka.produce_values("in", 1, &["a"]);
    let dead = format!("127.0.0.1:{}", weir_tests::servers::free_port());
    let job =
        |source: Source, sink: Sink| pipe("kafka-errors", source.value("bounded", true), sink);
    let file = || Sink::file("out", "out.txt");
    let (nope, missing) = ("nope", "missing");
    let (nope_error, missing_error) = (
        format!("topic `{nope}` does not exist"),
        format!("topic `{missing}` does not exist"),
    );
    let cases = [
        (
            job(Source::kafka("in", &dead, "in"), file()),
            vec!["source `in`", "no broker", &dead],
        ),
        (
            job(Source::kafka("in", &kafka.brokers(), nope), file()),
            vec!["source `in`", &nope_error],
        ),
        (
            job(
                Source::kafka("in", &kafka.brokers(), "in"),
                Sink::kafka("out", &kafka.brokers(), missing),
            ),
            vec!["sink `out`", &missing_error],
        ),
        (
            job(
                Source::kafka("in", &kafka.brokers(), "in")
                    .value("properties", "{ \"no.such.property\" = 1 }"),
                file(),
            ),
            vec!["source `in`", "no.such.property"],
        ),
        (
            job(
                Source::kafka("in", &kafka.brokers(), "in"),
                Sink::kafka("out", &kafka.brokers(), "in").string("write", "direct"),
            ),
            vec!["sink \"out\"", "write = \"direct\"", "weir run --worker"],
        ),
    ];
    assert_one_line_errors(WEIR, &[], cases);
}

/// A plugin trapping on one message of a topic read in batches of many
/// names the partition and offset of that message, once a replay one
/// record per batch found it: written round-robin over 3 partitions,
/// message `i` is at offset `i / 3` of partition `i % 3`.
#[test]
fn a_trap_on_one_message_names_its_partition_and_offset() {
    let kafka = Kafka::start();
    kafka.create_topic("poisoned", 3);
    let bad = 1234;
    let values = jobs::poison_values(3000, bad);
    fill_topic(&kafka, "poisoned", &values);
    let file = jobs::poisoned(
        "kafka-poison",
        Source::kafka("in", &kafka.brokers(), "poisoned").value("bounded", true),
    );
    let out = JobDir::new(WEIR, file, &[]).run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    let at = format!(
        "topic poisoned partition {} offset {} of source `in`)",
        bad % 3,
        bad / 3
    );
    assert_has_all(out.error_line(), &["poison: the record `poison`", &at]);
}
