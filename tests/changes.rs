//! Change kinds through plugins (world `operator-changes`): a plugin emits
//! inserts, updates, deletes and truncates; a plugin built with the SDK
//! sees them and passes them on; a plugin of an older world sees every
//! record as an insert (and the log says so once); an append sink writes
//! a record that is not an insert with its kind in the field `op`; an
//! upsert Kafka topic gets tombstones for deletes.

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Entry, JobFile, Operator, Sink, Source};
use weir_tests::plugins;
use weir_tests::servers::{Kafka, values_text};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

const INPUT: &str = "insert a\nupdate-before a\nupdate-after a\ndelete a\ntruncate t\nplain\n";

/// `changelog` (turning the input into changes), then `then` (if any),
/// into `out.txt`: the output and the run's stderr.
fn run(then: Option<&str>) -> (String, String) {
    let mut job = JobFile::new("changes")
        .source(Source::file("in", "in.txt"))
        .operator(Operator::new("changes", plugins::GUEST_CHANGELOG).inputs(&["in"]));
    let mut last = "changes";
    if let Some(plugin) = then {
        job = job.operator(Operator::new("then", plugin).inputs(&["changes"]));
        last = "then";
    }
    let job = job.sink(Sink::file("out", "out.txt").input(last));
    let job = JobDir::new(WEIR, job, &[("in.txt", INPUT)]);
    let stderr = job.run_ok(&[]);
    (job.read("out.txt"), stderr)
}

const CHANGES: &str = r#"{"word":"a"}
{"op":"update-before","word":"a"}
{"op":"update-after","word":"a"}
{"op":"delete","word":"a"}
{"op":"truncate","word":"t"}
plain
"#;

#[test]
fn plugins_emit_and_see_change_kinds_and_older_plugins_see_inserts() {
    let (out, stderr) = run(None);
    assert_eq!(out, CHANGES);
    assert!(!stderr.contains("as inserts"), "{stderr}");

    // A plugin of world `operator-changes` gets each kind and forwards it.
    let (out, _) = run(Some(plugins::GUEST_CHANGELOG));
    assert_eq!(out, CHANGES);

    // One of world `operator-flat` gets inserts, and echoes inserts.
    let (out, stderr) = run(Some(plugins::GUEST_FLAT_ECHO));
    assert_eq!(
        out,
        "{\"word\":\"a\"}\n".repeat(4) + "{\"word\":\"t\"}\nplain\n"
    );
    assert_eq!(
        stderr.matches("reach this plugin as inserts").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("operator then[0]: updates"),
        "the warning names the operator: {stderr}"
    );
}

/// Into Kafka: an upsert topic gets a tombstone for a delete and skips an
/// update's before image and a truncate (saying so); an append topic gets
/// every record, its kind in `op`.
#[test]
fn a_kafka_upsert_topic_gets_tombstones_and_an_append_topic_the_kinds() {
    let kafka = Kafka::start();
    kafka.create_topic("table", 1);
    kafka.create_topic("log", 1);
    let job = JobFile::new("changes-kafka")
        .source(Source::file("in", "in.txt"))
        .operator(Operator::new("changes", plugins::GUEST_CHANGELOG).inputs(&["in"]))
        .sink(
            Sink::kafka("table", &kafka.brokers(), "table")
                .string("mode", "upsert")
                .input("changes"),
        )
        .sink(Sink::kafka("log", &kafka.brokers(), "log").input("changes"));
    let job = JobDir::new(WEIR, job, &[("in.txt", INPUT)]);
    let stderr = job.run_ok(&[]);
    assert!(
        stderr.contains("a truncate reached upsert topic `table`"),
        "{stderr}"
    );
    let table: Vec<(String, String)> = (kafka.read_committed("table").iter())
        .map(|m| (String::from_utf8(m.key.clone().unwrap()).unwrap(), m.text()))
        .collect();
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        table,
        [
            pair("a", r#"{"word":"a"}"#),
            pair("a", r#"{"word":"a"}"#),
            pair("a", ""),
            pair("plain", "plain"),
        ]
    );
    assert_eq!(values_text(&kafka.read_committed("log")) + "\n", CHANGES);
}

/// Debezium change events in, Debezium change events out: a file of
/// events read with `format = "debezium-json"` and written by a file sink
/// and a Kafka sink in that format comes out as it went in; read back from
/// Kafka, the events are the same changes again.
#[test]
fn debezium_events_round_trip_through_files_and_kafka() {
    let events = concat!(
        r#"{"before":null,"after":{"id":1,"n":"a"},"op":"c","ts_ms":10}"#,
        "\n",
        r#"{"before":{"id":1,"n":"a"},"after":{"id":1,"n":"b"},"op":"u","ts_ms":11}"#,
        "\n",
        r#"{"before":null,"after":{"id":2,"n":"c"},"op":"u","ts_ms":12}"#,
        "\n",
        r#"{"before":{"id":1,"n":"b"},"after":null,"op":"d","ts_ms":13}"#,
        "\n",
        r#"{"before":null,"after":null,"op":"t","ts_ms":14}"#,
        "\n",
    );
    let kafka = Kafka::start();
    kafka.create_topic("events", 1);
    let job = JobFile::new("debezium")
        .source(
            Source::file("in", "in.jsonl")
                .format("debezium-json")
                .string("key", "id"),
        )
        .sink(
            Sink::file("out", "out.jsonl")
                .format("debezium-json")
                .input("in"),
        )
        .sink(
            Sink::kafka("events", &kafka.brokers(), "events")
                .string("format", "debezium-json")
                .input("in"),
        );
    let job = JobDir::new(WEIR, job, &[("in.jsonl", events)]);
    job.run_ok(&[]);
    assert_eq!(job.read("out.jsonl"), events);
    assert_eq!(values_text(&kafka.read_committed("events")) + "\n", events);

    let back = JobFile::new("debezium-back")
        .source(
            Source::kafka("events", &kafka.brokers(), "events")
                .format("debezium-json")
                .value("bounded", true),
        )
        .sink(Sink::file("out", "changes.jsonl").input("events"));
    let back = JobDir::new(WEIR, back, &[]);
    back.run_ok(&[]);
    assert_eq!(
        back.read("changes.jsonl"),
        concat!(
            r#"{"id":1,"n":"a"}"#,
            "\n",
            r#"{"id":1,"n":"a","op":"update-before"}"#,
            "\n",
            r#"{"id":1,"n":"b","op":"update-after"}"#,
            "\n",
            r#"{"id":2,"n":"c","op":"update-after"}"#,
            "\n",
            r#"{"id":1,"n":"b","op":"delete"}"#,
            "\n",
            r#"{"op":"truncate"}"#,
            "\n",
        )
    );
}
