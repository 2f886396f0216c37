//! `kafka`: records per second into and out of a Kafka cluster through the
//! Kafka connectors, against librdkafka's own producer and consumer on the
//! same data and the same cluster.
//!
//! The cluster is a private one-node Apache Kafka broker
//! (`weir_tests::servers::Kafka`, started by `scripts/services.sh`) on
//! loopback, on the same two cores as the clients: what is measured is the
//! clients and the connectors against a real broker's protocol, disk and
//! transaction coordinator, with the broker's own CPU in every case.
//!
//! - sink: a file → `kafka` sink job, exactly-once (one transaction per
//!   checkpoint) and at-least-once (an idempotent producer), against an
//!   idempotent librdkafka producer writing the same values, flushed at the
//!   end;
//! - source: a bounded `kafka` source → file sink job, against a librdkafka
//!   consumer reading every partition to its end;
//! - Avro: messages in a schema registry's wire format (a private Apicurio
//!   Registry) read to JSON lines by a `format = "avro"` source → file sink
//!   job, against apache-avro (Rust's own Avro decoder) decoding the same
//!   messages from a librdkafka consumer into JSON lines;
//! - Protobuf: the same orders as Protobuf messages in the wire format,
//!   read by a `format = "protobuf"` source → file sink job, against
//!   prost-reflect (dynamic messages of the `.proto`, compiled by protox)
//!   decoding them from a librdkafka consumer into JSON lines;
//! - rows to Avro: `word-count`'s rows (`{"word","count"}`) into an Avro
//!   topic (bare datums), written from the rows by a schema of their
//!   fields in their order, against the same rows through their JSON
//!   records (a schema of the same fields in another order, which only
//!   the JSON path writes);
//! - rows to Protobuf: the same rows into a Protobuf topic, as messages
//!   of `{string word; int64 count}` made from the rows, against the same
//!   rows through their JSON records (a `count` of the wrapper type
//!   `google.protobuf.Int64Value`, which only the JSON path writes).
//!
//! The broker is warmed up first (the data produced to and read from a
//! topic of its own). The Weir cases run the `weir` binary (`--restore none`, checkpoints
//! every second) and include its start-up.

use serde_json::json;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::servers::Kafka;

use crate::connectors::{per_second, read_through_weir, run_weir};
use crate::{Report, Settings};

/// Partitions of every topic.
const PARTITIONS: i32 = 8;

/// Distinct values (words) of the data.
const WORDS: u64 = 10_000;

/// How long a baseline client waits for the cluster before giving up.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.records_or(2_000_000, 200_000, 5_000);
    let (mut report, scratch) = settings.start("kafka", crate::WHOLE_RUN_RATE)?;
    report.params(json!({"records": n, "partitions": PARTITIONS}));
    let dir = scratch.path();
    let words = dir.join("words.txt");
    crate::data::write_lines(&words, n, |i| format!("w{}", i % WORDS))?;
    let values: Vec<String> = (0..n).map(|i| format!("w{}", i % WORDS)).collect();

    settings.say("kafka: starting a private Kafka broker");
    let kafka = Kafka::start();
    report.param(
        "cluster",
        "Apache Kafka 4.1.1, one node (KRaft), on loopback on the same machine",
    );
    report.param("librdkafka", rdkafka::util::get_rdkafka_version().1);
    for topic in ["warm-up", "in", "exactly-once", "at-least-once"] {
        kafka.create_topic(topic, PARTITIONS);
    }

    // The broker's JVM compiles its produce and fetch paths during the
    // first requests: one pass through both before any measured case, so
    // that the first case is not the only one to pay for it.
    settings.say("kafka: warming the broker up");
    produce_all(&kafka.brokers(), "warm-up", &values)?;
    read_all(&kafka.brokers(), "warm-up")?;

    settings.say("kafka: librdkafka producer (baseline)");
    let produced = produce_all(&kafka.brokers(), "in", &values)?;
    report.row(
        "librdkafka produce",
        per_second(n, produced),
        "records/s",
        None,
    );

    for delivery in ["exactly-once", "at-least-once"] {
        let case = format!("weir → kafka {delivery}");
        settings.say(&format!("kafka: {case}"));
        let topic = delivery;
        let job = JobFile::new(&format!("bench-kafka-{delivery}"))
            .checkpoint(Checkpoint::every("1s"))
            .source(Source::file("in", "words.txt"))
            .sink(
                Sink::kafka("out", &kafka.brokers(), topic)
                    .input("in")
                    .string("delivery", delivery),
            );
        let wall = run_weir(settings, dir, delivery, &job)?;
        let (stored, _) = read_all(&kafka.brokers(), topic)?;
        anyhow::ensure!(
            stored == n,
            "topic {topic} holds {stored} messages, expected {n}"
        );
        report.row(
            &case,
            per_second(n, wall),
            "records/s",
            Some("librdkafka produce"),
        );
    }

    settings.say("kafka: librdkafka consumer (baseline)");
    let (read, took) = read_all(&kafka.brokers(), "in")?;
    anyhow::ensure!(read == n, "the consumer read {read} messages, expected {n}");
    report.row("librdkafka consume", per_second(n, took), "records/s", None);

    settings.say("kafka: kafka → weir");
    let source = Source::kafka("in", &kafka.brokers(), "in");
    let wall = read_through_weir(settings, dir, "kafka-source", source, n)?;
    report.row(
        "kafka → weir",
        per_second(n, wall),
        "records/s",
        Some("librdkafka consume"),
    );
    schema_formats((settings, dir, &kafka), n, &mut report)?;
    rows_to_schemas((settings, dir, &kafka), n, &mut report)?;
    Ok(report)
}

/// `word-count`'s rows into an Avro and a Protobuf topic: written from the
/// rows, against the same rows through their JSON records (module docs).
fn rows_to_schemas(
    (settings, dir, kafka): (&Settings, &std::path::Path, &Kafka),
    n: u64,
    report: &mut Report,
) -> anyhow::Result<()> {
    let plugin = settings.plugin("word-count")?;
    let proto = |count: &str| {
        format!(
            "syntax = \"proto3\";\nimport \"google/protobuf/wrappers.proto\";\n\
             message Count {{ string word = 1; {count} count = 2; }}\n"
        )
    };
    // (case, topic, format, schema file, schema, the case it is measured against)
    let cases = [
        (
            "word-count → kafka avro, through JSON",
            "avro-json",
            "avro",
            r#"{"type": "record", "name": "Count", "fields": [
              {"name": "count", "type": "long"}, {"name": "word", "type": "string"}]}"#
                .to_owned(),
            None,
        ),
        (
            "word-count → kafka avro, from rows",
            "avro-rows",
            "avro",
            r#"{"type": "record", "name": "Count", "fields": [
              {"name": "word", "type": "string"}, {"name": "count", "type": "long"}]}"#
                .to_owned(),
            Some("word-count → kafka avro, through JSON"),
        ),
        (
            "word-count → kafka protobuf, through JSON",
            "proto-json",
            "protobuf",
            proto("google.protobuf.Int64Value"),
            None,
        ),
        (
            "word-count → kafka protobuf, from rows",
            "proto-rows",
            "protobuf",
            proto("int64"),
            Some("word-count → kafka protobuf, through JSON"),
        ),
    ];
    for (case, name, format, schema, baseline) in cases {
        settings.say(&format!("kafka: {case}"));
        kafka.create_topic(name, PARTITIONS);
        let extension = if format == "avro" { "avsc" } else { "proto" };
        let schema_path = dir.join(format!("{name}.{extension}"));
        std::fs::write(&schema_path, schema)?;
        let job = JobFile::new(&format!("bench-kafka-{name}"))
            .checkpoint(Checkpoint::every("1s"))
            .source(Source::file("in", "words.txt").format("lines"))
            .operator(Operator::new("count", plugin.display().to_string()).inputs(&["in"]))
            .sink(
                Sink::kafka("out", &kafka.brokers(), name)
                    .string("format", format)
                    .string("schema", &schema_path.display().to_string())
                    .input("count"),
            );
        let wall = run_weir(settings, dir, name, &job)?;
        let (stored, _) = read_all(&kafka.brokers(), name)?;
        anyhow::ensure!(
            stored == n,
            "topic {name} holds {stored} messages, expected {n}"
        );
        report.row(case, per_second(n, wall), "records/s", baseline);
    }
    Ok(())
}

/// Writes every value to `topic` with an idempotent producer configured as
/// the at-least-once sink is (`linger.ms = 5`, the murmur2 partitioner) and
/// waits until all are acknowledged; returns the time taken.
fn produce_all(
    brokers: &str,
    topic: &str,
    values: &[impl AsRef<[u8]>],
) -> anyhow::Result<Duration> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("partitioner", "murmur2_random")
        .create()?;
    let started = Instant::now();
    for value in values {
        let mut record = BaseRecord::<(), _>::to(topic).payload(value.as_ref());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => anyhow::bail!("producing to {topic}: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(TIMEOUT)?;
    Ok(started.elapsed())
}

/// Reads every partition of `topic` from its start to its end with a
/// `read_committed` consumer; returns the messages read and the time taken.
pub(crate) fn read_all(brokers: &str, topic: &str) -> anyhow::Result<(u64, Duration)> {
    read_partitions(brokers, topic, PARTITIONS)
}

/// [`read_all`] of a topic of `partitions` partitions.
pub(crate) fn read_partitions(
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<(u64, Duration)> {
    let started = Instant::now();
    let read = for_each_message(brokers, topic, partitions, |_| Ok(()))?;
    Ok((read, started.elapsed()))
}

/// Reads every partition of `topic` (of `partitions`) from its start to
/// its end with a `read_committed` consumer, calling `each` with every
/// message's payload; returns the messages read.
fn for_each_message(
    brokers: &str,
    topic: &str,
    partitions: i32,
    mut each: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        // Never joined: librdkafka wants a group to assign by hand.
        .set("group.id", "weir-bench-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        // As the Kafka source sets it.
        .set("fetch.queue.backoff.ms", "10")
        .create()?;
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&list)?;
    let mut at_end = std::collections::BTreeSet::new();
    let mut read = 0;
    let mut last_progress = Instant::now();
    while at_end.len() < partitions as usize {
        match consumer.poll(Duration::from_millis(100)) {
            None => anyhow::ensure!(
                last_progress.elapsed() < TIMEOUT,
                "reading {topic}: nothing arrived for {TIMEOUT:?}"
            ),
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => anyhow::bail!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                use rdkafka::Message as _;
                at_end.remove(&m.partition());
                each(m.payload().unwrap_or_default())?;
                read += 1;
                last_progress = Instant::now();
            }
        }
    }
    Ok(read)
}

/// The Avro schema of the `avro` cases: an order of six fields, a decimal
/// and a timestamp among them.
const ORDER_SCHEMA: &str = r#"{"type": "record", "name": "Order", "namespace": "bench", "fields": [
  {"name": "id", "type": "long"},
  {"name": "customer", "type": "string"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
  {"name": "note", "type": ["null", "string"], "default": null}
]}"#;

/// One format of the schema-registry cases: how the orders are written in
/// it, and how the baseline decodes them.
struct Encoding<'a> {
    /// The `format` value, the topic and the subject's base.
    format: &'static str,
    /// The registry's kind of schema, and the schema.
    kind: &'static str,
    schema: &'static str,
    /// The baseline's row.
    baseline: &'static str,
    /// Appends an order (JSON) in the wire format of schema `id`.
    encode: &'a Encode<'a>,
    /// Writes a message's order as one JSON line (without the break).
    decode: &'a mut Decode<'a>,
}

/// [`Encoding::encode`].
type Encode<'a> = dyn Fn(u32, &[u8], &mut Vec<u8>) -> Result<(), String> + 'a;

/// [`Encoding::decode`].
type Decode<'a> = dyn FnMut(&[u8], &mut dyn std::io::Write) -> anyhow::Result<()> + 'a;

/// Order `i` of the schema-registry cases: six fields, a decimal and a
/// time among them.
fn order(i: u64) -> serde_json::Value {
    let state = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
    json!({
        "id": i,
        "customer": format!("c{}", i % WORDS),
        "amount": format!("{}.{:02}", i % 100_000, i % 100),
        "at": 1_700_000_000_000u64 + i,
        "state": state,
        "note": if i.is_multiple_of(4) { serde_json::Value::Null } else { json!("fragile") },
    })
}

/// Orders in `encoding` through the schema registry at `registry` (the
/// schema registered as `<format>-value`): written in the wire format,
/// then read to JSON lines by the baseline decoder over a librdkafka
/// consumer and by a `kafka` source with that `format` → file sink job.
fn through_registry(
    (settings, dir, kafka, registry): (&Settings, &std::path::Path, &Kafka, &str),
    n: u64,
    report: &mut Report,
    encoding: Encoding<'_>,
) -> anyhow::Result<()> {
    let format = encoding.format;
    kafka.create_topic(format, PARTITIONS);
    let subject = format!("{format}-value");
    let id = weir::schemas::registry::Registry::new(registry)
        .and_then(|r| r.register(&subject, encoding.kind, encoding.schema, &[]))
        .map_err(anyhow::Error::msg)?;
    let messages = (0..n)
        .map(|i| {
            let mut message = Vec::new();
            (encoding.encode)(id, order(i).to_string().as_bytes(), &mut message)?;
            Ok(message)
        })
        .collect::<Result<Vec<Vec<u8>>, String>>()
        .map_err(anyhow::Error::msg)?;
    produce_all(&kafka.brokers(), format, &messages)?;

    settings.say(&format!("kafka: {} (baseline)", encoding.baseline));
    let out = dir.join(format!("{format}-native.jsonl"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&out)?);
    let started = Instant::now();
    let read = for_each_message(&kafka.brokers(), format, PARTITIONS, |payload| {
        (encoding.decode)(payload, &mut file)?;
        std::io::Write::write_all(&mut file, b"\n")?;
        Ok(())
    })?;
    std::io::Write::flush(&mut file)?;
    let took = started.elapsed();
    anyhow::ensure!(read == n, "the decoder read {read} messages, expected {n}");
    report.row(encoding.baseline, per_second(n, took), "records/s", None);

    let case = format!("kafka {format} → weir");
    settings.say(&format!("kafka: {case}"));
    let source = Source::kafka("in", &kafka.brokers(), format)
        .string("format", format)
        .string("schema_registry", registry);
    let wall = read_through_weir(settings, dir, &format!("kafka-{format}"), source, n)?;
    report.row(
        &case,
        per_second(n, wall),
        "records/s",
        Some(encoding.baseline),
    );
    Ok(())
}

/// The registry cases: Avro against apache-avro's own decoder (the
/// writer's schema, its values as JSON by apache-avro's own conversion),
/// Protobuf against prost-reflect's dynamic messages of the `.proto`
/// compiled by protox (serialized with the `.proto`'s field names and
/// every field, as the `protobuf` format writes them).
fn schema_formats(
    (settings, dir, kafka): (&Settings, &std::path::Path, &Kafka),
    n: u64,
    report: &mut Report,
) -> anyhow::Result<()> {
    use weir::schemas::avro::{AvroSchema, AvroWriter};
    use weir::schemas::protobuf::ProtoSchema;
    use weir::schemas::wire;

    settings.say("kafka: starting a private schema registry");
    let registry = weir_tests::servers::SchemaRegistry::start();
    let url = registry.url();
    let at = (settings, dir, kafka, url.as_str());

    let writer = AvroWriter::new(&AvroSchema::parse(ORDER_SCHEMA).map_err(anyhow::Error::msg)?)
        .map_err(anyhow::Error::msg)?;
    let parsed = apache_avro::Schema::parse_str(ORDER_SCHEMA)?;
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(&parsed).build()?;
    let avro = Encoding {
        format: "avro",
        kind: "AVRO",
        schema: ORDER_SCHEMA,
        baseline: "apache-avro decode",
        encode: &|id, json, out| {
            wire::frame(id, out);
            writer.write(json, out)
        },
        decode: &mut |payload, out| {
            let value = reader.read_value(&mut header_off(payload, 5)?)?;
            serde_json::to_writer(out, &serde_json::Value::try_from(value)?)?;
            Ok(())
        },
    };
    through_registry(at, n, report, avro)?;

    let schema = ProtoSchema::compile(ORDER_PROTO, None).map_err(anyhow::Error::msg)?;
    std::fs::write(dir.join("order.proto"), ORDER_PROTO)?;
    let files = protox::compile(["order.proto"], [dir])?;
    let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(files)?;
    let message = (pool.get_message_by_name("bench.Order"))
        .ok_or_else(|| anyhow::anyhow!("order.proto has no bench.Order"))?;
    let options = prost_reflect::SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let protobuf = Encoding {
        format: "protobuf",
        kind: "PROTOBUF",
        schema: ORDER_PROTO,
        baseline: "prost-reflect decode",
        encode: &|id, json, out| {
            wire::frame(id, out);
            wire::write_indexes(&schema.indexes(), out);
            schema.encode(json, out)
        },
        // The header, then the index list `[0]` as the single byte 0.
        decode: &mut |payload, out| {
            let order =
                prost_reflect::DynamicMessage::decode(message.clone(), header_off(payload, 6)?)?;
            order.serialize_with_options(&mut serde_json::Serializer::new(out), &options)?;
            Ok(())
        },
    };
    through_registry(at, n, report, protobuf)
}

/// `payload` after its wire format's header of `len` bytes.
fn header_off(payload: &[u8], len: usize) -> anyhow::Result<&[u8]> {
    (payload.get(len..))
        .ok_or_else(|| anyhow::anyhow!("a message shorter than the wire format's header"))
}

/// The Protobuf schema of the `protobuf` case: the order of the Avro
/// case, its amount as text and its time in milliseconds.
const ORDER_PROTO: &str = r#"syntax = "proto3";
package bench;
message Order {
  int64 id = 1;
  string customer = 2;
  string amount = 3;
  int64 at = 4;
  enum State { NEW = 0; PAID = 1; SHIPPED = 2; }
  State state = 5;
  optional string note = 6;
}
"#;
