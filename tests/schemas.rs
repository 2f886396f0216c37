//! Records in Avro through Kafka with a schema registry (Apicurio
//! Registry's Confluent-compatible API), written and read by Python's own
//! clients (`confluent-kafka`'s Avro serializers): a job reads what they
//! wrote, under a newer schema (a field added with a default), and writes
//! it back registered under its own subject; what Python reads back equals
//! what it wrote, field for field, with the default filled in. A message
//! not in the registry's wire format is a dead letter naming it; a schema
//! the subject's compatibility rule refuses is a one-line error.
//!
//! The oracle is the input records, as the test made them.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Sink, Source};
use weir_tests::repo_root;
use weir_tests::servers::{Kafka, SchemaRegistry};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

const V1: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
  {"name": "note", "type": ["null", "string"], "default": null},
  {"name": "tags", "type": {"type": "map", "values": "int"}}
]}"#;

/// [`V1`] with a field added with a default: compatible.
fn v2() -> String {
    V1.replace(
        r#"{"name": "id", "type": "long"},"#,
        r#"{"name": "id", "type": "long"}, {"name": "channel", "type": "string", "default": "web"},"#,
    )
}

/// [`V1`] with `id` a string: incompatible with it.
fn v3() -> String {
    V1.replace(
        r#"{"name": "id", "type": "long"}"#,
        r#"{"name": "id", "type": "string"}"#,
    )
}

/// The python of the venv `scripts/services.sh install` makes with
/// confluent-kafka.
fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/services.sh"))
        .arg("python-clients")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Runs `avro_clients.py` with `args`, `input` on its stdin; its stdout.
fn clients(args: &[&str], input: &str) -> String {
    let script = repo_root().join("tests/support/python/avro_clients.py");
    let mut child = Command::new(python())
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "avro_clients.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Order `i`, as JSON lines give it to the Python producer.
fn order(i: u64, channel: Option<&str>) -> Value {
    let state = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
    let mut order = json!({
        "id": i,
        "amount": format!("{}.{:02}", i * 7 % 100_000, i % 100),
        "at": 1_700_000_000_000u64 + i * 1_001,
        "state": state,
        "note": if i.is_multiple_of(4) { Value::Null } else { json!(format!("n{i} \"q\"")) },
        "tags": {"a": i % 10, "b": 1},
    });
    if let Some(channel) = channel {
        order["channel"] = json!(channel);
    }
    order
}

fn lines(records: &[Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

#[test]
fn avro_from_python_clients_round_trips_through_a_job_with_an_evolved_schema() {
    let kafka = Kafka::start();
    let registry = SchemaRegistry::start();
    kafka.create_topic("orders", 1);
    kafka.create_topic("out", 1);
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (v1_file, v2_file) = (file("v1.avsc", V1), file("v2.avsc", &v2()));

    // 1,500 orders of the first schema, one message that is no Avro, then
    // 500 of the second.
    let old: Vec<Value> = (0..1500).map(|i| order(i, None)).collect();
    let new: Vec<Value> = (1500..2000).map(|i| order(i, Some("app"))).collect();
    let (brokers, url) = (kafka.brokers(), registry.url());
    clients(
        &["produce", &brokers, &url, "orders", &v1_file],
        &lines(&old),
    );
    kafka.produce_values("orders", 1, &["{\"id\": \"not avro\"}"]);
    clients(
        &["produce", &brokers, &url, "orders", &v2_file],
        &lines(&new),
    );

    let job = JobFile::new("avro")
        .checkpoint(Checkpoint::every("200ms"))
        .source(
            Source::kafka("orders", &brokers, "orders")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("schema_registry", &url)
                .string("key", "id")
                .value("bounded", true)
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(
            Sink::kafka("out", &brokers, "out")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("schema_registry", &url)
                .input("orders"),
        )
        .sink(Sink::file("bad", "bad.jsonl"));
    let job = JobDir::new(WEIR, job, &[("orders.avsc", &v2())]);
    job.run_ok(&[]);

    let got = clients(&["consume", &brokers, &url, "out", "2000"], "");
    let got: Vec<Value> = got
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want: Vec<Value> = (old.iter().map(|o| {
        let mut o = o.clone();
        o["channel"] = json!("web");
        o
    }))
    .chain(new.iter().cloned())
    .collect();
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(&want) {
        assert_eq!(got, want);
    }
    let bad = job.read("bad.jsonl");
    assert_eq!(bad.lines().count(), 1, "{bad}");
    assert!(
        bad.contains("topic orders partition 0 offset 1500"),
        "{bad}"
    );
    assert!(bad.contains("the first byte is 123"), "{bad}");

    // The sink's subject refuses an incompatible schema, in one line.
    registry.set_compatibility("out-value", "BACKWARD");
    std::fs::write(job.path().join("orders.avsc"), v3()).unwrap();
    job.run(&["--restore", "none"]).assert_one_line_error(&[
        "sink `out`",
        "subject out-value",
        "incompatible",
    ]);
}
