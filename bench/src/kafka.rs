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
//!   decoding them from a librdkafka consumer into JSON lines.
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
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Sink, Source};
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
    avro(settings, dir, &kafka, n, &mut report)?;
    protobuf(settings, dir, &kafka, n, &mut report)?;
    Ok(report)
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

/// Avro messages through a schema registry: written in the wire format
/// (registered as `avro-value`), then read to JSON lines by Rust's own
/// Avro decoder (apache-avro's, the reader of the writer's schema, its
/// values as JSON) and by a `kafka` source with `format = "avro"` → file
/// sink job.
fn avro(
    settings: &Settings,
    dir: &std::path::Path,
    kafka: &Kafka,
    n: u64,
    report: &mut Report,
) -> anyhow::Result<()> {
    use weir::schemas::avro::{AvroSchema, AvroWriter};
    use weir::schemas::registry::Registry;
    use weir::schemas::wire;

    settings.say("kafka: starting a private schema registry");
    let registry = weir_tests::servers::SchemaRegistry::start();
    kafka.create_topic("avro", PARTITIONS);
    let schema = AvroSchema::parse(ORDER_SCHEMA).map_err(anyhow::Error::msg)?;
    let id = Registry::new(&registry.url())
        .and_then(|r| r.register("avro-value", "AVRO", ORDER_SCHEMA))
        .map_err(anyhow::Error::msg)?;
    let writer = AvroWriter::new(&schema).map_err(anyhow::Error::msg)?;
    let states = ["NEW", "PAID", "SHIPPED"];
    let messages = (0..n)
        .map(|i| {
            let order = json!({
                "id": i,
                "customer": format!("c{}", i % WORDS),
                "amount": format!("{}.{:02}", i % 100_000, i % 100),
                "at": 1_700_000_000_000u64 + i,
                "state": states[i as usize % 3],
                "note": if i % 4 == 0 { serde_json::Value::Null } else { json!("fragile") },
            });
            let mut message = Vec::new();
            wire::frame(id, &mut message);
            writer.write(order.to_string().as_bytes(), &mut message)?;
            Ok(message)
        })
        .collect::<Result<Vec<Vec<u8>>, String>>()
        .map_err(anyhow::Error::msg)?;
    produce_all(&kafka.brokers(), "avro", &messages)?;

    settings.say("kafka: apache-avro decoding (baseline)");
    let parsed = apache_avro::Schema::parse_str(ORDER_SCHEMA)?;
    let out = dir.join("avro-native.jsonl");
    let (read, took) = decode_all(&kafka.brokers(), "avro", &parsed, &out)?;
    anyhow::ensure!(read == n, "the decoder read {read} messages, expected {n}");
    report.row("apache-avro decode", per_second(n, took), "records/s", None);

    settings.say("kafka: kafka avro → weir");
    let source = Source::kafka("in", &kafka.brokers(), "avro")
        .string("format", "avro")
        .string("schema_registry", &registry.url());
    let wall = read_through_weir(settings, dir, "kafka-avro", source, n)?;
    report.row(
        "kafka avro → weir",
        per_second(n, wall),
        "records/s",
        Some("apache-avro decode"),
    );
    Ok(())
}

/// The Protobuf schema of the `protobuf` case: the order of the Avro
/// cases, its amount as text and its time in milliseconds.
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

/// Protobuf messages through a schema registry (registered as
/// `protobuf-value`), read to JSON lines by prost-reflect's dynamic
/// messages (the baseline) and by a `kafka` source with `format =
/// "protobuf"` → file sink job.
fn protobuf(
    settings: &Settings,
    dir: &std::path::Path,
    kafka: &Kafka,
    n: u64,
    report: &mut Report,
) -> anyhow::Result<()> {
    use weir::schemas::protobuf::ProtoSchema;
    use weir::schemas::registry::Registry;
    use weir::schemas::wire;

    settings.say("kafka: starting a private schema registry");
    let registry = weir_tests::servers::SchemaRegistry::start();
    kafka.create_topic("protobuf", PARTITIONS);
    let id = Registry::new(&registry.url())
        .and_then(|r| r.register("protobuf-value", "PROTOBUF", ORDER_PROTO))
        .map_err(anyhow::Error::msg)?;
    let schema = ProtoSchema::compile(ORDER_PROTO, None).map_err(anyhow::Error::msg)?;
    let states = ["NEW", "PAID", "SHIPPED"];
    let messages = (0..n)
        .map(|i| {
            let mut order = json!({
                "id": i,
                "customer": format!("c{}", i % WORDS),
                "amount": format!("{}.{:02}", i % 100_000, i % 100),
                "at": 1_700_000_000_000u64 + i,
                "state": states[i as usize % 3],
            });
            if i % 4 != 0 {
                order["note"] = json!("fragile");
            }
            let mut message = Vec::new();
            wire::frame(id, &mut message);
            wire::write_indexes(&schema.indexes(), &mut message);
            schema.encode(order.to_string().as_bytes(), &mut message)?;
            Ok(message)
        })
        .collect::<Result<Vec<Vec<u8>>, String>>()
        .map_err(anyhow::Error::msg)?;
    produce_all(&kafka.brokers(), "protobuf", &messages)?;

    settings.say("kafka: prost-reflect decoding (baseline)");
    std::fs::write(dir.join("order.proto"), ORDER_PROTO)?;
    let files = protox::compile(["order.proto"], [dir])?;
    let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(files)?;
    let order = (pool.get_message_by_name("bench.Order"))
        .ok_or_else(|| anyhow::anyhow!("order.proto has no bench.Order"))?;
    let out = dir.join("protobuf-native.jsonl");
    let (read, took) = decode_protobuf(&kafka.brokers(), "protobuf", &order, &out)?;
    anyhow::ensure!(read == n, "the decoder read {read} messages, expected {n}");
    report.row(
        "prost-reflect decode",
        per_second(n, took),
        "records/s",
        None,
    );

    settings.say("kafka: kafka protobuf → weir");
    let source = Source::kafka("in", &kafka.brokers(), "protobuf")
        .string("format", "protobuf")
        .string("schema_registry", &registry.url());
    let wall = read_through_weir(settings, dir, "kafka-protobuf", source, n)?;
    report.row(
        "kafka protobuf → weir",
        per_second(n, wall),
        "records/s",
        Some("prost-reflect decode"),
    );
    Ok(())
}

/// Reads every partition of `topic` to its end, decoding each message
/// (Confluent's wire format with the message index `0`, of `order`) with
/// prost-reflect into JSON lines written to `out` (every field, with the
/// `.proto`'s names, as the `protobuf` format writes them); returns the
/// messages read and the time.
fn decode_protobuf(
    brokers: &str,
    topic: &str,
    order: &prost_reflect::MessageDescriptor,
    out: &std::path::Path,
) -> anyhow::Result<(u64, Duration)> {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let options = prost_reflect::SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let started = Instant::now();
    let read = for_each_message(brokers, topic, PARTITIONS, |payload| {
        // The header, then the index list `[0]` as the single byte 0.
        let datum = payload
            .get(6..)
            .ok_or_else(|| anyhow::anyhow!("a message shorter than the wire format's header"))?;
        let message = prost_reflect::DynamicMessage::decode(order.clone(), datum)?;
        let mut serializer = serde_json::Serializer::new(&mut file);
        message.serialize_with_options(&mut serializer, &options)?;
        file.write_all(b"\n")?;
        Ok(())
    })?;
    file.flush()?;
    Ok((read, started.elapsed()))
}

/// Reads every partition of `topic` to its end, decoding each message
/// (Confluent's wire format, the writer's `schema`) with apache-avro into
/// JSON lines written to `out`; returns the messages read and the time.
fn decode_all(
    brokers: &str,
    topic: &str,
    schema: &apache_avro::Schema,
    out: &std::path::Path,
) -> anyhow::Result<(u64, Duration)> {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema).build()?;
    let started = Instant::now();
    let read = for_each_message(brokers, topic, PARTITIONS, |payload| {
        let mut datum = payload
            .get(5..)
            .ok_or_else(|| anyhow::anyhow!("a message shorter than the wire format's header"))?;
        let value = reader.read_value(&mut datum)?;
        let json = serde_json::Value::try_from(value)?;
        serde_json::to_writer(&mut file, &json)?;
        file.write_all(b"\n")?;
        Ok(())
    })?;
    file.flush()?;
    Ok((read, started.elapsed()))
}
