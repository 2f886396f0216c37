//! Records in Avro and Protobuf through Kafka with a schema registry
//! (Apicurio Registry's Confluent-compatible API), written and read by
//! Python's own clients (`confluent-kafka`'s serializers): a job reads what
//! they wrote (Avro under a newer schema, a field added with a default) and
//! writes it back registered under its own subject; what Python reads back
//! equals what it wrote, field for field (the default filled in). A message
//! not in the registry's wire format is a dead letter naming it; a schema
//! the subject's compatibility rule refuses is a one-line error. The NATS
//! source reads the same wire format; schemas that reference other
//! registered schemas resolve; files of Avro and Protobuf go between jobs
//! and Python's own readers and writers.
//!
//! The oracle is the input records, as the test made them.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::plugins;
use weir_tests::repo_root;
use weir_tests::servers::{Kafka, Nats, SchemaRegistry};

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

/// A broker with topics `orders` and `out` (one partition each), and a
/// schema registry.
fn servers() -> (Kafka, SchemaRegistry) {
    let kafka = Kafka::start();
    let registry = SchemaRegistry::start();
    kafka.create_topic("orders", 1);
    kafka.create_topic("out", 1);
    (kafka, registry)
}

/// Writes `text` to file `name` in `dir`; its path.
fn written(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
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

/// Runs `schema_clients.py` with `args`, `input` on its stdin; its stdout.
fn clients(args: &[&str], input: &str) -> String {
    let script = repo_root().join("tests/support/python/schema_clients.py");
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
        "schema_clients.py {args:?}: {}",
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

/// A job reading topic `orders` of `kafka` in `format` through the
/// registry at `url` (with `source` settings) into topic `out` (with
/// `sink` settings), its source's dead letters in `bad.jsonl`.
fn job(
    format: &str,
    kafka: &Kafka,
    url: &str,
    source: &[(&str, &str)],
    sink: &[(&str, &str)],
) -> JobFile {
    let brokers = kafka.brokers();
    let mut reader = Source::kafka("orders", &brokers, "orders")
        .string("format", format)
        .string("schema_registry", url)
        .string("key", "id")
        .value("bounded", true)
        .on_error("{ dead_letter = \"bad\" }");
    for (key, value) in source {
        reader = reader.string(key, value);
    }
    let mut writer = Sink::kafka("out", &brokers, "out")
        .string("format", format)
        .string("schema_registry", url)
        .input("orders");
    for (key, value) in sink {
        writer = writer.string(key, value);
    }
    JobFile::new(format)
        .checkpoint(Checkpoint::every("200ms"))
        .source(reader)
        .sink(writer)
        .sink(Sink::file("bad", "bad.jsonl"))
}

/// Checks what Python reads of topic `out` in `format`: `want`, in order.
fn assert_out(format: &str, kafka: &Kafka, url: &str, want: &[Value]) {
    assert_topic(format, kafka, url, "out", want);
}

/// Checks what Python reads of `topic` in `format`: `want`, in order.
fn assert_topic(format: &str, kafka: &Kafka, url: &str, topic: &str, want: &[Value]) {
    let count = want.len().to_string();
    let got = clients(
        &["consume", format, &kafka.brokers(), url, topic, &count],
        "",
    );
    let got: Vec<Value> = got
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(want) {
        assert_eq!(got, want);
    }
}

/// Checks that the job's one dead letter is the message at `offset`,
/// refused for `why`.
fn assert_one_dead_letter(job: &JobDir, offset: u64, why: &str) {
    let bad = job.read("bad.jsonl");
    assert_eq!(bad.lines().count(), 1, "{bad}");
    assert!(
        bad.contains(&format!("topic orders partition 0 offset {offset}")),
        "{bad}"
    );
    assert!(bad.contains(why), "{bad}");
}

#[test]
fn avro_from_python_clients_round_trips_through_a_job_with_an_evolved_schema() {
    let (kafka, registry) = servers();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| written(dir.path(), name, text);
    let (v1_file, v2_file) = (file("v1.avsc", V1), file("v2.avsc", &v2()));

    // 1,500 orders of the first schema, one message that is no Avro, then
    // 500 of the second.
    let old: Vec<Value> = (0..1500).map(|i| order(i, None)).collect();
    let new: Vec<Value> = (1500..2000).map(|i| order(i, Some("app"))).collect();
    let (brokers, url) = (kafka.brokers(), registry.url());
    let produce = |schema: &str, records: &[Value]| {
        let args = ["produce", "avro", &brokers, &url, "orders", schema];
        clients(&args, &lines(records))
    };
    produce(&v1_file, &old);
    kafka.produce_values("orders", 1, &["{\"id\": \"not avro\"}"]);
    produce(&v2_file, &new);

    // The job reads both as the second schema and writes that.
    let schema = [("schema", "orders.avsc")];
    let files = [("orders.avsc", v2())];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let job = JobDir::new(WEIR, job("avro", &kafka, &url, &schema, &schema), &files);
    job.run_ok(&[]);
    let upgraded = old.iter().map(|o| {
        let mut o = o.clone();
        o["channel"] = json!("web");
        o
    });
    let want: Vec<Value> = upgraded.chain(new.iter().cloned()).collect();
    assert_out("avro", &kafka, &url, &want);
    assert_one_dead_letter(&job, 1500, "the first byte is 123");

    // The sink's subject refuses an incompatible schema, in one line.
    registry.set_compatibility("out-value", "BACKWARD");
    std::fs::write(job.path().join("orders.avsc"), v3()).unwrap();
    job.run(&["--restore", "none"]).assert_one_line_error(&[
        "sink `out`",
        "subject out-value",
        "incompatible",
    ]);
}

/// A JSON Schema of orders, as Confluent's clients write them (draft-07).
const JSON_ORDER: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Order",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "amount": {"type": "number", "minimum": 0},
    "at": {"type": "string", "format": "date-time"},
    "state": {"enum": ["NEW", "PAID", "SHIPPED"]},
    "note": {"type": ["string", "null"]},
    "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
    "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}}
  },
  "required": ["id", "amount", "state"],
  "additionalProperties": false,
  "definitions": {
    "line": {
      "type": "object",
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
      "required": ["sku", "qty"]
    }
  }
}"##;

/// Order `i` as JSON, fitting [`JSON_ORDER`].
fn json_order(i: u64) -> Value {
    let lines: Vec<Value> = (0..i % 3)
        .map(|n| json!({"sku": format!("s{n}"), "qty": n + 1}))
        .collect();
    let state = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
    json!({
        "id": i,
        "amount": (i % 1000) as f64 + (i % 100) as f64 / 100.0,
        "at": format!("2024-02-{:02}T10:00:{:02}.{:03}Z", i % 28 + 1, i % 60, i % 1000),
        "state": state,
        "note": if i.is_multiple_of(4) { Value::Null } else { json!(format!("n{i} \"q\" é")) },
        "tags": {"a": i % 10},
        "lines": lines,
    })
}

/// JSON Schema through the registry: Python's `JSONSerializer` writes
/// 1,500 orders (its writer's schema registered), plus one message framed
/// with that schema's id whose record does not fit it; a job reads them
/// with `format = "json"` and writes them back registered under
/// `out-value`; Python's `JSONDeserializer` (which checks each record
/// against its writer's schema) reads the 1,500 equal to the input, in
/// order; the misfit is one dead letter saying where it does not fit.
/// Lines of a file with `format = "json"` are checked against `schema`
/// alike, the misfits dead letters naming their line.
#[test]
fn json_schema_from_python_clients_round_trips_through_a_job() {
    let (kafka, registry) = servers();
    let dir = tempfile::tempdir().unwrap();
    let schema_file = written(dir.path(), "orders.schema.json", JSON_ORDER);
    let (brokers, url) = (kafka.brokers(), registry.url());
    let orders: Vec<Value> = (0..1500).map(json_order).collect();
    let produce = |records: &[Value]| {
        let args = ["produce", "json", &brokers, &url, "orders", &schema_file];
        clients(&args, &lines(records))
    };
    produce(&orders[..1000]);
    let latest = registry.call("GET", "/subjects/orders-value/versions/latest", "");
    let latest: Value = serde_json::from_str(&latest.body).unwrap();
    let id = u32::try_from(latest["id"].as_u64().unwrap()).unwrap();
    let mut misfit = vec![0u8];
    misfit.extend_from_slice(&id.to_be_bytes());
    misfit.extend_from_slice(br#"{"id": 7, "amount": -1, "state": "NEW"}"#);
    kafka.produce("orders", &[(Some(0), None, &misfit, None)]);
    produce(&orders[1000..]);

    let schema = [("schema", "orders.schema.json")];
    let files = [("orders.schema.json", JSON_ORDER)];
    let job = JobDir::new(WEIR, job("json", &kafka, &url, &schema, &schema), &files);
    job.run_ok(&[]);
    assert_out("json", &kafka, &url, &orders);
    assert_one_dead_letter(&job, 1000, "does not fit the JSON Schema at /amount");
    let subjects = registry.call("GET", "/subjects", "");
    assert!(subjects.body.contains("out-value"), "{}", subjects.body);

    // Lines of a file, checked against the schema alone.
    let mut text = lines(&orders[..300]);
    text.insert_str(0, "{\"id\": 1, \"amount\": 1, \"state\": \"LOST\"}\n");
    text.push_str("{\"id\": 2, \"amount\": 2, \"state\": \"NEW\", \"extra\": 1}\n");
    let file_job = JobFile::new("json-lines")
        .source(
            Source::file("orders", "orders.jsonl")
                .string("format", "json")
                .string("schema", "orders.schema.json")
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::file("out", "out.jsonl").input("orders"))
        .sink(Sink::file("bad", "bad.jsonl"));
    let files = [("orders.schema.json", JSON_ORDER), ("orders.jsonl", &text)];
    let file_job = JobDir::new(WEIR, file_job, &files);
    file_job.run_ok(&[]);
    let out: Vec<Value> = (file_job.read("out.jsonl").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out, orders[..300]);
    let bad: Vec<String> = file_job
        .read("bad.jsonl")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad[0].contains("line 1") && bad[0].contains("at /state"),
        "{}",
        bad[0]
    );
    assert!(
        bad[1].contains("line 302") && bad[1].contains("Additional properties"),
        "{}",
        bad[1]
    );

    // The same lines unchecked into a file sink of `format = "json"`: it
    // writes the records that fit and sends the two misfits to its dead
    // letters, in order.
    let sink_job = JobFile::new("json-file-sink")
        .source(Source::file("orders", "orders.jsonl").format("jsonl"))
        .sink(
            Sink::file("checked", "out.json")
                .string("format", "json")
                .string("schema", "orders.schema.json")
                .value("on_error", "{ dead_letter = \"rejects\" }")
                .input("orders"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let sink_job = JobDir::new(WEIR, sink_job, &files);
    sink_job.run_ok(&[]);
    let out: Vec<Value> = (sink_job.read("out.json").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out, orders[..300]);
    let letters = weir_tests::letters::parse(&sink_job.read("rejects.jsonl"));
    let refused: Vec<&str> = weir_tests::letters::values(&letters);
    assert_eq!(
        refused,
        [text.lines().next().unwrap(), text.lines().last().unwrap()]
    );
    for (l, at) in letters.iter().zip(["at /state", "Additional properties"]) {
        assert_eq!(
            (l["kind"].as_str(), l["node"].as_str()),
            (Some("sink"), Some("checked"))
        );
        assert!(l["error"].as_str().unwrap().contains(at), "{l}");
    }
}

/// Avro object container files: Python's fastavro writes 1,500 orders of
/// the first schema into a file (deflate, several blocks); a job reads it
/// with `format = "avro"` as the second schema (a field added with a
/// default) and writes the records to Kafka; Python's `AvroDeserializer`
/// reads them equal to the input with the default filled in, in order. A
/// restore after a kill in the middle of the file repeats nothing (the
/// sink's topic holds each order once).
#[test]
fn avro_files_from_fastavro_are_read_as_the_jobs_schema() {
    let (kafka, registry) = servers();
    let url = registry.url();
    let dir = tempfile::tempdir().unwrap();
    let v1_file = written(dir.path(), "v1.avsc", V1);
    let orders: Vec<Value> = (0..1500).map(|i| order(i, None)).collect();
    let data = dir.path().join("orders.avro").display().to_string();
    clients(
        &["ocf", "avro", &data, &v1_file, "deflate"],
        &lines(&orders),
    );

    let file = JobFile::new("avro-file")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("orders", &data)
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .rate(1000),
        )
        .sink(
            Sink::kafka("out", &kafka.brokers(), "out")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("schema_registry", &url)
                .input("orders"),
        );
    let files = [("orders.avsc", v2())];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let job = JobDir::new(WEIR, file, &files);
    let killed = job.kill_after_a_checkpoint(&mut weir_tests::pipeline::XorShift(7));
    assert!(killed, "the job ended before it could be killed");
    job.run_ok(&[]);
    let want: Vec<Value> = (orders.iter())
        .map(|o| {
            let mut o = o.clone();
            o["channel"] = json!("web");
            o
        })
        .collect();
    assert_out("avro", &kafka, &url, &want);
}

/// The Avro schema of the orders' keys.
const ORDER_KEY: &str = r#"{"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"}, {"name": "region", "type": "string"}
]}"#;

/// Avro keys: Python's key and value serializers write 800 orders keyed by
/// `{id, region}`, plus one message whose key is no Avro; a job reads the
/// keys with `key_format = "avro"` through the registry and writes keys and
/// values back, the keys registered under `out-key`; Python reads them
/// equal to the input, in order. The bad key is one dead letter saying it
/// is the key; a second source of the job gets the decoded key as a
/// metadata field, as JSON.
#[test]
fn avro_keys_from_python_clients_round_trip_through_a_job() {
    let (kafka, registry) = servers();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| written(dir.path(), name, text);
    let (value_file, key_file) = (file("v1.avsc", V1), file("key.avsc", ORDER_KEY));
    let (brokers, url) = (kafka.brokers(), registry.url());
    let messages: Vec<Value> = (0..800)
        .map(|i| {
            let region = ["eu", "us"][i as usize % 2];
            json!({"key": {"id": i, "region": region}, "value": order(i, None)})
        })
        .collect();
    let produce = |part: &[Value]| {
        let args = [
            "produce-keyed",
            "avro",
            &brokers,
            &url,
            "orders",
            &value_file,
            &key_file,
        ];
        clients(&args, &lines(part))
    };
    produce(&messages[..500]);
    kafka.produce("orders", &[(Some(0), Some(b"junk"), b"junk", None)]);
    produce(&messages[500..]);

    let files = [("orders.avsc", V1), ("key.avsc", ORDER_KEY)];
    let source = |id: &str, dead: &str| {
        Source::kafka(id, &brokers, "orders")
            .string("format", "avro")
            .string("schema_registry", &url)
            .string("key_format", "avro")
            .value("bounded", true)
            .on_error(&format!("{{ dead_letter = \"{dead}\" }}"))
    };
    let file = JobFile::new("avro-keys")
        .checkpoint(Checkpoint::every("200ms"))
        .source(source("orders", "bad"))
        .sink(
            Sink::kafka("out", &brokers, "out")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("schema_registry", &url)
                .string("key_format", "avro")
                .string("key_schema", "key.avsc")
                .input("orders"),
        )
        .sink(Sink::file("bad", "bad.jsonl"))
        .source(source("again", "bad2").value("metadata", r#"{ key = "k" }"#))
        .sink(Sink::file("keys", "keys.jsonl").input("again"))
        .sink(Sink::file("bad2", "bad2.jsonl"));
    let job = JobDir::new(WEIR, file, &files);
    job.run_ok(&[]);
    let count = messages.len().to_string();
    let got = clients(
        &["consume-keyed", "avro", &brokers, &url, "out", &count],
        "",
    );
    let got: Vec<Value> = got
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, messages);
    assert_one_dead_letter(&job, 500, "its key: ");
    let subjects = registry.call("GET", "/subjects", "");
    assert!(subjects.body.contains("out-key"), "{}", subjects.body);
    let keys: Vec<Value> = (job.read("keys.jsonl").lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["k"].clone())
        .collect();
    let want: Vec<Value> = messages.iter().map(|m| m["key"].clone()).collect();
    assert_eq!(keys, want);
}

/// Order `i` as the Protobuf clients take and print it (every field).
fn proto_order(i: u64) -> Value {
    let lines: Vec<Value> = (0..i % 3)
        .map(|n| json!({"sku": format!("s{n}"), "qty": n + 1}))
        .collect();
    let state = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
    json!({
        "id": i * 1_000_000_007,
        "amount": format!("{}.{:02}", i % 1000, i % 100),
        "state": state,
        "tags": if i.is_multiple_of(2) { json!({}) } else { json!({"a": i % 10}) },
        "lines": lines,
        "note": if i.is_multiple_of(5) { String::new() } else { format!("n{i}") },
    })
}

#[test]
fn protobuf_from_python_clients_round_trips_through_a_job() {
    let (kafka, registry) = servers();
    let (brokers, url) = (kafka.brokers(), registry.url());
    // Python registers its descriptor (base64), the job its .proto source.
    let input: Vec<Value> = (0..1000).map(proto_order).collect();
    let produce = |records: &[Value]| {
        clients(
            &["produce", "protobuf", &brokers, &url, "orders"],
            &lines(records),
        )
    };
    produce(&input[..600]);
    kafka.produce_values("orders", 1, &["\u{0}\u{0}\u{0}\u{0}\u{63}\u{0}junk"]);
    produce(&input[600..]);
    let proto = clients(&["proto", "protobuf"], "");

    let sink = [("schema", "orders.proto"), ("message", "shop.Order")];
    let files = [("orders.proto", proto.as_str())];
    let job = JobDir::new(WEIR, job("protobuf", &kafka, &url, &[], &sink), &files);
    job.run_ok(&[]);
    assert_out("protobuf", &kafka, &url, &input);
    assert_one_dead_letter(&job, 600, "fetching schema 99: not found");
}

/// The NATS source reads Avro in the registry's wire format as the Kafka
/// source does (one parser): messages a producer framed with the id of
/// the schema it registered come out as JSON records, keyed by a field; a
/// message naming no schema the registry has is a dead letter.
#[test]
fn a_nats_source_reads_avro_through_the_registry() {
    use weir::schemas::avro::{AvroSchema, AvroWriter};
    use weir::schemas::registry::Registry;
    use weir::schemas::wire;

    let nats = Nats::start();
    let registry = SchemaRegistry::start();
    nats.create_stream("ORDERS", &["orders"]);
    let url = registry.url();
    let id = Registry::new(&url)
        .and_then(|r| r.register("orders-value", "AVRO", V1, &[]))
        .unwrap();
    let writer = AvroWriter::new(&AvroSchema::parse(V1).unwrap()).unwrap();
    let records: Vec<String> = (0..300)
        .map(|i| {
            format!(
                r#"{{"id":{i},"amount":{}.{:02},"at":"2024-01-31T12:00:00.{:03}Z","state":"NEW","note":null,"tags":{{"a":{}}}}}"#,
                i * 3,
                i % 100,
                i % 1000,
                i % 7
            )
        })
        .collect();
    let mut messages: Vec<Vec<u8>> = records
        .iter()
        .map(|r| {
            let mut message = Vec::new();
            wire::frame(id, &mut message);
            writer.write(r.as_bytes(), &mut message).unwrap();
            message
        })
        .collect();
    let mut unknown = Vec::new();
    wire::frame(id + 1000, &mut unknown);
    messages.insert(150, unknown);
    let payloads: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    nats.publish("orders", &payloads);

    let job = JobFile::new("nats-avro")
        .checkpoint(Checkpoint::every("200ms"))
        .source(
            Source::nats("orders", &nats.url(), "ORDERS")
                .string("format", "avro")
                .string("schema_registry", &url)
                .string("key", "id")
                .value("bounded", true)
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::file("out", "out.jsonl").input("orders"))
        .sink(Sink::file("bad", "bad.jsonl"));
    let job = JobDir::new(WEIR, job, &[]);
    job.run_ok(&[]);
    let got: Vec<String> = job.read("out.jsonl").lines().map(str::to_owned).collect();
    assert_eq!(got, records);
    let bad = job.read("bad.jsonl");
    assert_eq!(bad.lines().count(), 1, "{bad}");
    assert!(bad.contains("sequence 151"), "{bad}");
    assert!(
        bad.contains(&format!("fetching schema {}: not found", id + 1000)),
        "{bad}"
    );
}

/// The NATS sink writes Avro, Protobuf and JSON Schema in the registry's
/// wire format, registering its schemas: orders (JSON lines, numbers and
/// times as JSON gives them) published to three streams, read back and
/// decoded by Python's `AvroDeserializer`, `ProtobufDeserializer` and
/// `JSONDeserializer`, equal to the input field for field and in order,
/// under the subjects each sink's `subject_strategy` names; a
/// record that does not fit is each sink's dead letter. NATS sources then
/// read the Protobuf and JSON streams back through the registry, equal to
/// the input.
#[test]
fn a_nats_sink_writes_avro_protobuf_and_json_that_pythons_clients_and_a_nats_source_read() {
    use base64::Engine as _;

    let nats = Nats::start();
    let registry = SchemaRegistry::start();
    nats.create_stream("AOUT", &["avro-out"]);
    nats.create_stream("POUT", &["proto-out"]);
    nats.create_stream("JOUT", &["json-out"]);
    let url = registry.url();
    let orders: Vec<Value> = (0..400).map(|i| order(i, None)).collect();
    let protos: Vec<Value> = (0..300).map(proto_order).collect();
    let jsons: Vec<Value> = (0..200).map(json_order).collect();
    let proto = clients(&["proto", "protobuf"], "");
    let sink = |input: &str, subject: &str, format: &str, schema: &str| {
        Sink::nats(&format!("{input}-out"), &nats.url(), subject)
            .inputs(&[input])
            .string("format", format)
            .string("schema", schema)
            .string("schema_registry", &url)
            .value("on_error", "{ dead_letter = \"rejects\" }")
    };
    let job = JobFile::new("nats-schemas")
        .checkpoint(Checkpoint::every("200ms"))
        .source(Source::file("avro", "orders.jsonl").string("format", "jsonl"))
        .source(Source::file("proto", "protos.jsonl").string("format", "jsonl"))
        .source(Source::file("json", "jsons.jsonl").string("format", "jsonl"))
        .sink(
            sink("avro", "avro-out", "avro", "orders.avsc")
                .string("subject_strategy", "topic-record"),
        )
        .sink(
            sink("proto", "proto-out", "protobuf", "orders.proto").string("message", "shop.Order"),
        )
        .sink(
            sink("json", "json-out", "json", "orders.schema.json")
                .string("subject_strategy", "record"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let misfits = [
        r#"{"id":5,"amount":"x"}"#,
        r#"{"id":6,"colour":"red"}"#,
        r#"{"id":7,"amount":-1,"state":"NEW"}"#,
    ];
    let files = [
        (
            "orders.jsonl",
            lines(&orders[..9]) + misfits[0] + "\n" + &lines(&orders[9..]),
        ),
        (
            "protos.jsonl",
            lines(&protos[..9]) + misfits[1] + "\n" + &lines(&protos[9..]),
        ),
        (
            "jsons.jsonl",
            lines(&jsons[..9]) + misfits[2] + "\n" + &lines(&jsons[9..]),
        ),
        ("orders.avsc", V1.to_owned()),
        ("orders.proto", proto),
        ("orders.schema.json", JSON_ORDER.to_owned()),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let job = JobDir::new(WEIR, job, &files);
    job.run_ok(&[]);
    for (stream, subject, format, want) in [
        ("AOUT", "avro-out", "avro", &orders),
        ("POUT", "proto-out", "protobuf", &protos),
        ("JOUT", "json-out", "json", &jsons),
    ] {
        let messages: String = (nats.read_stream(stream).into_iter())
            .map(|m| base64::engine::general_purpose::STANDARD.encode(m.2) + "\n")
            .collect();
        let got = clients(&["decode", format, &url, subject], &messages);
        let got: Vec<Value> = got
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "{stream}");
        for (got, want) in got.iter().zip(want) {
            assert_eq!(got, want, "{stream}");
        }
    }
    // Subjects as each sink's strategy names them: `topic-record`
    // (`<subject>-<record full name>`), `topic`, `record` (a JSON Schema's
    // `title`).
    let subjects: Vec<String> =
        serde_json::from_str(&registry.call("GET", "/subjects", "").body).unwrap();
    for subject in ["avro-out-shop.Order", "proto-out-value", "Order"] {
        assert!(
            subjects.iter().any(|s| s == subject),
            "{subject}: {subjects:?}"
        );
    }
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    let mut refused: Vec<(&str, &str)> = (letters.iter())
        .map(|l| (l["node"].as_str().unwrap(), l["value"].as_str().unwrap()))
        .collect();
    refused.sort();
    assert_eq!(
        refused,
        [
            ("avro-out", misfits[0]),
            ("json-out", misfits[2]),
            ("proto-out", misfits[1])
        ]
    );

    // NATS sources read the Protobuf and JSON Schema messages back through
    // the registry.
    let source = |id: &str, stream: &str, format: &str| {
        Source::nats(id, &nats.url(), stream)
            .string("format", format)
            .string("schema_registry", &url)
            .value("bounded", true)
    };
    let back = JobFile::new("nats-schemas-back")
        .source(source("proto", "POUT", "protobuf"))
        .source(source("json", "JOUT", "json"))
        .sink(Sink::file("proto-back", "protos.jsonl").input("proto"))
        .sink(Sink::file("json-back", "jsons.jsonl").input("json"));
    let back = JobDir::new(WEIR, back, &[]);
    back.run_ok(&[]);
    for (file, want) in [("protos.jsonl", &protos), ("jsons.jsonl", &jsons)] {
        let got: Vec<Value> = (back.read(file).lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(&got, want, "{file}");
    }
}

/// A Kafka sink whose `on_error` takes records that do not fit its Avro
/// schema sends them to a dead-letter sink: through SIGKILLs, Python reads
/// every good order once, in order, and the dead letters hold each misfit
/// once, in order, saying why.
#[test]
fn records_that_do_not_fit_a_kafka_sinks_schema_are_its_dead_letters_exactly_once() {
    let (kafka, registry) = servers();
    let (brokers, url) = (kafka.brokers(), registry.url());
    let n = 2000;
    let (mut input, mut good, mut bad) = (String::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let line = match i % 97 == 40 {
            true => {
                let mut o = order(i, None);
                o["state"] = json!("LOST");
                bad.push(o.to_string());
                o.to_string()
            }
            false => {
                good.push(order(i, None));
                order(i, None).to_string()
            }
        };
        input.push_str(&line);
        input.push('\n');
    }
    let file = JobFile::new("sink-misfits")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("in", "orders.jsonl")
                .format("jsonl")
                .rate(2000),
        )
        .sink(
            Sink::kafka("out", &brokers, "out")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("schema_registry", &url)
                .value("on_error", "{ dead_letter = \"rejects\" }")
                .input("in"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let job = JobDir::new(WEIR, file, &[("orders.jsonl", &input), ("orders.avsc", V1)]);
    let killed = job.run_through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_out("avro", &kafka, &url, &good);
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    assert_eq!(weir_tests::letters::values(&letters), bad);
    for l in &letters {
        assert_eq!(l["node"], "out", "{l}");
        let error = l["error"].as_str().unwrap();
        assert!(error.contains("LOST"), "{error}");
    }
}

/// Files in Avro and Protobuf between jobs and Python's own readers and
/// writers. A job reads JSON lines of orders and writes them as an Avro
/// object container file (deflate, [`V1`]) and as a file of
/// length-delimited `shop.Order` messages, SIGKILLed after checkpoints and
/// restored: fastavro and Python's protobuf read every order once, in
/// order, equal to the input; a record that does not fit a sink's schema
/// is that sink's dead letter (each once, in order). Then a job reads a
/// file of messages Python's protobuf wrote, through kills, into JSON
/// lines: equal to what Python was given, in order.
#[test]
fn avro_and_protobuf_files_round_trip_between_jobs_and_python() {
    let n = 1500;
    let orders: Vec<Value> = (0..n).map(|i| order(i, None)).collect();
    let messages: Vec<Value> = (0..n).map(proto_order).collect();
    let misfit_order =
        json!({"id": 1, "amount": "1.00", "at": 5, "state": "LOST", "note": null, "tags": {}});
    let misfit_message = json!({"id": 2, "colour": "red"});
    let with_misfit = |records: &[Value], misfit: &Value| {
        lines(&records[..700]) + &format!("{misfit}\n") + &lines(&records[700..])
    };
    let proto = clients(&["proto", "protobuf"], "");
    let file = JobFile::new("files-out")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("orders", "orders.jsonl")
                .format("jsonl")
                .rate(1500),
        )
        .source(
            Source::file("messages", "messages.jsonl")
                .format("jsonl")
                .rate(1500),
        )
        .sink(
            Sink::file("avro", "out/orders.avro")
                .string("format", "avro")
                .string("schema", "orders.avsc")
                .string("codec", "deflate")
                .value("on_error", "{ dead_letter = \"rejects\" }")
                .input("orders"),
        )
        .sink(
            Sink::file("pb", "out/orders.pb")
                .string("format", "protobuf")
                .string("schema", "orders.proto")
                .string("message", "shop.Order")
                .value("on_error", "{ dead_letter = \"rejects\" }")
                .input("messages"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let inputs = [
        ("orders.jsonl", with_misfit(&orders, &misfit_order)),
        ("messages.jsonl", with_misfit(&messages, &misfit_message)),
        ("orders.avsc", V1.to_owned()),
        ("orders.proto", proto.clone()),
    ];
    let inputs: Vec<(&str, &str)> = inputs.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let job = JobDir::new(WEIR, file, &inputs);
    let killed = job.run_through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    let read = |verb: &str, kind: &str, file: &str| -> Vec<Value> {
        let path = job.path().join(file).display().to_string();
        let out = clients(&[verb, kind, &path], "");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(read("read-ocf", "avro", "out/orders.avro"), orders);
    assert_eq!(
        read("read-delimited", "protobuf", "out/orders.pb"),
        messages
    );
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    let refused: Vec<(String, String)> = (letters.iter())
        .map(|l| {
            (
                l["node"].as_str().unwrap().to_owned(),
                l["error"].to_string(),
            )
        })
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0].0.as_str().min(refused[1].0.as_str()), "avro");
    for (node, error) in &refused {
        let why = if node == "avro" { "LOST" } else { "colour" };
        assert!(error.contains(why), "{node}: {error}");
    }
    let values = weir_tests::letters::values(&letters);
    let mut values: Vec<Value> = values
        .iter()
        .map(|v| serde_json::from_str(v).unwrap())
        .collect();
    values.sort_by_key(|v| v["id"].as_u64());
    assert_eq!(values, [misfit_order, misfit_message]);

    let source = Source::file("messages", "messages.pb")
        .string("format", "protobuf")
        .string("schema", "orders.proto")
        .string("message", "shop.Order")
        .rate(1500);
    let file = JobFile::new("files-in")
        .checkpoint(Checkpoint::every("100ms"))
        .source(source)
        .sink(
            Sink::file("out", "out.jsonl")
                .string("format", "jsonl")
                .input("messages"),
        );
    let job = JobDir::new(WEIR, file, &[("orders.proto", &proto)]);
    let data = job.path().join("messages.pb").display().to_string();
    clients(&["write-delimited", "protobuf", &data], &lines(&messages));
    let killed = job.run_through_kills_after_checkpoints(2, weir_tests::pipeline::seed());
    assert!(killed >= 1, "killed {killed} times");
    let got: Vec<Value> = (job.read("out.jsonl").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, messages);
}

/// Shipment `i`: an id and an address (Avro: also a billing address, a
/// union with null).
fn shipment(i: u64, avro: bool) -> Value {
    let address = |n: u64| {
        let kind = ["HOME", "WORK"][n as usize % 2];
        json!({"city": format!("c{}", n % 7), "kind": kind})
    };
    let mut shipment = json!({"id": i, "ship": address(i)});
    if avro {
        shipment["bill"] = if i.is_multiple_of(3) {
            Value::Null
        } else {
            address(i + 1)
        };
    }
    shipment
}

/// Schema references: Python's clients write shipments whose schema takes
/// its `Address` from another registered schema (Avro: a named type of
/// subject `shop.Address`; Protobuf: the import `shop/address.proto`,
/// which the serializer registers; JSON Schema: the `$ref` `address.json`).
/// A job reads all three through the registry, each writer's schema
/// compiled with what it references, into JSON lines equal to the input,
/// in order. A job then writes the Protobuf shipments with a `.proto` of
/// its folder that imports another: the sink registers the import as a
/// subject of its own and its schema with the reference, and a job reading
/// that topic through the registry gets the shipments back.
#[test]
fn schema_references_resolve_for_sources_and_sinks() {
    let (kafka, registry) = servers();
    let (brokers, url) = (kafka.brokers(), registry.url());
    let kinds = ["avro", "protobuf", "json"];
    for kind in kinds {
        kafka.create_topic(kind, 1);
    }
    kafka.create_topic("proto-out", 1);
    let n = 400;
    let input =
        |kind: &str| -> Vec<Value> { (0..n).map(|i| shipment(i, kind == "avro")).collect() };
    for kind in kinds {
        clients(
            &["produce-referenced", kind, &brokers, &url, kind],
            &lines(&input(kind)),
        );
    }
    let mut file = JobFile::new("references").checkpoint(Checkpoint::every("200ms"));
    for kind in kinds {
        file = file
            .source(
                Source::kafka(kind, &brokers, kind)
                    .string("format", kind)
                    .string("schema_registry", &url)
                    .value("bounded", true),
            )
            .sink(Sink::file(&format!("{kind}-out"), &format!("{kind}.jsonl")).input(kind));
    }
    let protos = clients(&["shipment-protos", "protobuf"], "");
    let (address, own) = protos
        .strip_prefix("== shop/address.proto ==\n")
        .and_then(|rest| rest.split_once("== shipment.proto ==\n"))
        .expect("two .proto files");
    file = file.sink(
        Sink::kafka("back", &brokers, "proto-out")
            .string("format", "protobuf")
            .string("schema", "protos/shipment.proto")
            .string("schema_registry", &url)
            .input("protobuf"),
    );
    let files = [
        ("protos/shipment.proto", own),
        ("protos/shop/address.proto", address),
    ];
    let job = JobDir::new(WEIR, file, &files);
    job.run_ok(&[]);
    let read = |job: &JobDir, file: &str| -> Vec<Value> {
        (job.read(file).lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    for kind in kinds {
        assert_eq!(read(&job, &format!("{kind}.jsonl")), input(kind), "{kind}");
    }

    let latest = registry
        .call("GET", "/subjects/proto-out-value/versions/latest", "")
        .json();
    let references = latest["references"].as_array().cloned().unwrap_or_default();
    assert_eq!(references.len(), 1, "{latest}");
    assert_eq!(references[0]["name"], "shop/address.proto", "{latest}");
    assert_eq!(references[0]["subject"], "shop/address.proto", "{latest}");
    let back = JobFile::new("references-back")
        .source(
            Source::kafka("in", &brokers, "proto-out")
                .string("format", "protobuf")
                .string("schema_registry", &url)
                .value("bounded", true),
        )
        .sink(Sink::file("out", "out.jsonl").input("in"));
    let back = JobDir::new(WEIR, back, &[]);
    back.run_ok(&[]);
    assert_eq!(read(&back, "out.jsonl"), input("protobuf"));
}

/// A flat Avro record (every field one scalar) of a Kafka source reaches
/// a plugin that reads rows as its typed fields, and a plugin that reads
/// text as the same JSON as ever; keyed by its `id` field and timed by its
/// `at` field, read from the row by the JSON path's rules (the keys the
/// Kafka sink writes, the timestamps the text plugin shows). With a
/// metadata field to append, the records go as JSON to both.
#[test]
fn flat_avro_records_reach_plugins_as_rows_and_as_their_json() {
    const FLAT: &str = r#"{"type": "record", "name": "Flat", "fields": [
      {"name": "id", "type": "long"},
      {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
      {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
      {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
      {"name": "note", "type": ["null", "string"], "default": null}
    ]}"#;
    let kafka = Kafka::start();
    kafka.create_topic("flat", 1);
    kafka.create_topic("out", 1);
    let schema = weir::schemas::avro::AvroSchema::parse(FLAT).unwrap();
    let writer = weir::schemas::avro::AvroWriter::new(&schema).unwrap();
    let n = 40;
    let (mut rows, mut text, mut meta, mut datums) =
        (String::new(), String::new(), String::new(), Vec::new());
    for i in 0..n {
        let amount = format!("{}.{:02}", i * 3, i % 100);
        let at = format!("2024-01-31T12:00:{i:02}.000Z");
        let ms = 1_706_702_400_000i64 + i * 1000;
        let state = ["NEW", "PAID"][i as usize % 2];
        let (note_json, note_field) = match i % 3 {
            0 => ("null".to_owned(), "note:null=".to_owned()),
            _ => (format!("\"n\\\"{i}\""), format!("note:str=n\"{i}")),
        };
        let json = format!(
            r#"{{"id":{i},"amount":{amount},"at":"{at}","state":"{state}","note":{note_json}}}"#
        );
        let mut datum = Vec::new();
        writer.write(json.as_bytes(), &mut datum).unwrap();
        datums.push(datum);
        rows.push_str(&format!(
            "row id:int={i} amount:decimal={amount} at:str={at} state:str={state} {note_field}\n"
        ));
        text.push_str(&format!("{ms} {json}\n"));
        let with_offset = format!("{},\"offset\":{i}}}", &json[..json.len() - 1]);
        meta.push_str(&format!("text {with_offset}\n"));
    }
    let messages: Vec<_> = (datums.iter())
        .map(|d| (None, None, d.as_slice(), None))
        .collect();
    kafka.produce("flat", &messages);
    let source = |id: &str| {
        Source::kafka(id, &kafka.brokers(), "flat")
            .string("format", "avro")
            .string("schema", "flat.avsc")
            .value("bounded", true)
    };
    let file = JobFile::new("avro-rows")
        .source(source("in").key("id").timestamp("at"))
        .source(source("with-offsets").value("metadata", "{ offset = \"offset\" }"))
        .operator(Operator::new("fields", plugins::GUEST_ROW_FIELDS).inputs(&["in"]))
        .operator(Operator::new("text", plugins::GUEST_SHOW_TIMESTAMPS).inputs(&["in"]))
        .operator(Operator::new("meta", plugins::GUEST_ROW_FIELDS).inputs(&["with-offsets"]))
        .sink(Sink::file("rows", "rows.txt").input("fields"))
        .sink(Sink::file("json", "json.txt").input("text"))
        .sink(Sink::file("metadata", "meta.txt").input("meta"))
        .sink(Sink::kafka("keys", &kafka.brokers(), "out").input("text"));
    let job = JobDir::new(WEIR, file, &[("flat.avsc", FLAT)]);
    job.run_ok(&[]);
    assert_eq!(
        job.read("rows.txt"),
        rows,
        "what the plugin that reads rows got"
    );
    assert_eq!(
        job.read("json.txt"),
        text,
        "what the plugin that reads text got"
    );
    assert_eq!(
        job.read("meta.txt"),
        meta,
        "records with metadata go as JSON"
    );
    let keys: Vec<String> = (kafka.read_committed("out").iter())
        .map(|m| String::from_utf8(m.key.clone().unwrap()).unwrap())
        .collect();
    let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    assert_eq!(keys, want, "keyed by the `id` field");
}

/// A plugin's rows reach Kafka, NATS and file sinks with an Avro schema,
/// and Kafka and file sinks with a Protobuf one (`word-count` emits each
/// `{"word","count"}` as a row), written from the rows where they fit the
/// schema field for field: through SIGKILLs after
/// checkpoints, Python's clients read every count once, in order, the
/// input's running count, from sinks whose schema the rows fit (written
/// without JSON) and from one whose field order and union send them
/// through the JSON path; with an enum of some of the words, the rows of
/// the others are that sink's dead letters, each once, in order.
#[test]
fn a_plugins_rows_reach_kafka_nats_and_file_sinks_avro_and_protobuf_schemas_exactly_once() {
    use base64::Engine as _;

    const DIRECT: &str = r#"{"type": "record", "name": "Count", "fields": [
      {"name": "word", "type": "string"}, {"name": "count", "type": "long"}]}"#;
    const REORDERED: &str = r#"{"type": "record", "name": "Count", "fields": [
      {"name": "count", "type": ["null", "long"]}, {"name": "word", "type": "string"}]}"#;
    const SOME_WORDS: &str = r#"{"type": "record", "name": "Count", "fields": [
      {"name": "word", "type": {"type": "enum", "name": "Word", "symbols": ["ant", "bee", "cat", "dog"]}},
      {"name": "count", "type": "int"}]}"#;
    const PROTO: &str =
        "syntax = \"proto3\";\nmessage Count { string word = 1; int64 count = 2; }\n";
    let (kafka, registry) = servers();
    let (brokers, url) = (kafka.brokers(), registry.url());
    for topic in ["direct", "reordered", "some", "proto"] {
        kafka.create_topic(topic, 1);
    }
    let nats = Nats::start();
    nats.create_stream("COUNTS", &["counts"]);
    let words = ["ant", "bee", "cat", "dog", "eel"];
    let (mut input, mut counts, mut all, mut some, mut refused) = (
        String::new(),
        std::collections::HashMap::<&str, u64>::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for i in 0..3000usize {
        let word = words[(i * 7 + i / 13) % words.len()];
        input.push_str(word);
        input.push('\n');
        let count = counts.entry(word).or_default();
        *count += 1;
        let record = json!({"word": word, "count": *count});
        match word {
            // A dead letter holds the row's JSON, fields in its order.
            "eel" => refused.push(format!(r#"{{"word":"eel","count":{count}}}"#)),
            _ => some.push(record.clone()),
        }
        all.push(record);
    }
    let sink = |id: &str, schema: &str| {
        Sink::kafka(id, &brokers, id)
            .string("format", "avro")
            .string("schema", schema)
            .string("schema_registry", &url)
            .input("count")
    };
    let file = JobFile::new("rows-to-avro")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "words.txt").format("lines").rate(2000))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["in"]))
        .sink(sink("direct", "direct.avsc"))
        .sink(sink("reordered", "reordered.avsc"))
        .sink(sink("some", "some.avsc").value("on_error", "{ dead_letter = \"rejects\" }"))
        .sink(
            Sink::kafka("proto", &brokers, "proto")
                .string("format", "protobuf")
                .string("schema", "count.proto")
                .string("schema_registry", &url)
                .input("count"),
        )
        .sink(
            Sink::nats("nats", &nats.url(), "counts")
                .inputs(&["count"])
                .string("format", "avro")
                .string("schema", "direct.avsc")
                .string("schema_registry", &url),
        )
        .sink(
            Sink::file("file", "out/counts.avro")
                .input("count")
                .string("format", "avro")
                .string("schema", "direct.avsc"),
        )
        .sink(
            Sink::file("pb", "out/counts.pb")
                .input("count")
                .string("format", "protobuf")
                .string("schema", "count.proto"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let job = JobDir::new(
        WEIR,
        file,
        &[
            ("words.txt", &input),
            ("direct.avsc", DIRECT),
            ("reordered.avsc", REORDERED),
            ("some.avsc", SOME_WORDS),
            ("count.proto", PROTO),
        ],
    );
    let killed = job.run_through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_topic("avro", &kafka, &url, "direct", &all);
    assert_topic("avro", &kafka, &url, "reordered", &all);
    assert_topic("avro", &kafka, &url, "some", &some);
    assert_topic("protobuf-count", &kafka, &url, "proto", &all);
    let messages: String = (nats.read_stream("COUNTS").into_iter())
        .map(|m| base64::engine::general_purpose::STANDARD.encode(m.2) + "\n")
        .collect();
    let got: Vec<Value> = (clients(&["decode", "avro", &url, "counts"], &messages).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, all, "what the NATS sink wrote");
    let path = job.path().join("out/counts.avro").display().to_string();
    let got: Vec<Value> = (clients(&["read-ocf", "avro", &path], "").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, all, "what the Avro file sink wrote");
    let path = job.path().join("out/counts.pb").display().to_string();
    let got: Vec<Value> = (clients(&["read-delimited", "protobuf-count", &path], "").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, all, "what the Protobuf file sink wrote");
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    assert_eq!(weir_tests::letters::values(&letters), refused);
    for l in &letters {
        let error = l["error"].as_str().unwrap();
        assert!(error.contains("enum Word"), "{error}");
    }
}
