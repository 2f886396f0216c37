//! What the tests do with a Kafka cluster as a client: create topics,
//! produce (plainly or in a transaction), read every message back as a
//! `read_committed` or `read_uncommitted` consumer, and look up a group's
//! committed offsets; and [`MockKafka`], librdkafka's mock cluster with
//! its fault injection.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};

/// How long a test client waits on the cluster (a broker just restarted
/// loads its transaction and group state first).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A message to write: its partition (or where its key hashes to), key,
/// value and timestamp (or the time it is sent).
pub type Outgoing<'a> = (Option<i32>, Option<&'a [u8]>, &'a [u8], Option<i64>);

/// A message read back from a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaMessage {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value.
    pub value: Vec<u8>,
    /// Its timestamp, milliseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// Its headers, as UTF-8.
    pub headers: BTreeMap<String, String>,
    /// Its headers as they are, in order (`None`: a header without a
    /// value).
    pub header_list: Vec<(String, Option<Vec<u8>>)>,
}

/// A message's headers to produce: name and value (`None`: no value).
pub type OutgoingHeaders<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

impl KafkaMessage {
    /// The value as UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8(self.value.clone()).expect("a UTF-8 value")
    }
}

/// The values of `messages` as UTF-8, one a line.
pub fn values_text(messages: &[KafkaMessage]) -> String {
    let lines: Vec<String> = messages.iter().map(KafkaMessage::text).collect();
    lines.join("\n")
}

/// The test's clients of one cluster, at its bootstrap servers.
pub struct Clients {
    brokers: String,
}

impl Clients {
    pub(super) fn new(brokers: String) -> Clients {
        Clients { brokers }
    }

    /// The bootstrap servers (`host:port,...`).
    pub fn brokers(&self) -> String {
        self.brokers.clone()
    }

    /// Creates topic `topic` with `partitions` partitions of one replica.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.create_topic_with(topic, partitions, &[]);
    }

    /// Creates topic `topic` with `partitions` partitions and the topic
    /// configuration `config` (`("max.message.bytes", "1000")`, ...).
    pub fn create_topic_with(&self, topic: &str, partitions: i32, config: &[(&str, &str)]) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("an admin client");
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        for (key, value) in config {
            new = new.set(key, value);
        }
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let created = futures_executor(admin.create_topics(&[new], &options));
        for result in created.expect("creating topics") {
            result.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
        }
    }

    fn producer(&self, extra: &[(&str, &str)]) -> BaseProducer {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.brokers)
            .set("partitioner", "murmur2_random");
        for (k, v) in extra {
            config.set(*k, *v);
        }
        config.create().expect("a test producer")
    }

    /// Writes `messages` (`partition`, `key`, `value`, `timestamp`) to
    /// `topic` and waits until each is acknowledged. A message without a
    /// partition goes where its key hashes to.
    pub fn produce(&self, topic: &str, messages: &[Outgoing<'_>]) {
        let with: Vec<_> = messages.iter().map(|m| (*m, Vec::new())).collect();
        self.produce_with_headers(topic, &with);
    }

    /// [`produce`](Self::produce) of messages with headers.
    pub fn produce_with_headers(
        &self,
        topic: &str,
        messages: &[(Outgoing<'_>, OutgoingHeaders<'_>)],
    ) {
        let producer = self.producer(&[("enable.idempotence", "true")]);
        send_with_headers(&producer, topic, messages);
        producer.flush(TIMEOUT).expect("flushing the test producer");
    }

    /// Writes each of `values` as a message without a key to partition
    /// `i % partitions`.
    pub fn produce_values(&self, topic: &str, partitions: i32, values: &[&str]) {
        let messages: Vec<_> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (Some(i as i32 % partitions), None, v.as_bytes(), None))
            .collect();
        self.produce(topic, &messages);
    }

    /// Writes `messages` in one transaction of transactional id `id`, then
    /// commits it or, with `commit = false`, aborts it.
    pub fn produce_in_transaction(
        &self,
        id: &str,
        topic: &str,
        messages: &[Outgoing<'_>],
        commit: bool,
    ) {
        let producer = self.producer(&[("transactional.id", id)]);
        producer
            .init_transactions(TIMEOUT)
            .expect("init_transactions");
        producer.begin_transaction().expect("begin_transaction");
        send_all(&producer, topic, messages);
        if commit {
            producer
                .commit_transaction(TIMEOUT)
                .expect("commit_transaction");
        } else {
            producer.flush(TIMEOUT).expect("flush");
            producer
                .abort_transaction(TIMEOUT)
                .expect("abort_transaction");
        }
    }

    /// Every committed message of `topic`, partition by partition, in
    /// offset order, as a `read_committed` consumer sees them.
    pub fn read_committed(&self, topic: &str) -> Vec<KafkaMessage> {
        self.read(topic, "read_committed")
    }

    /// Every message of `topic`, also of open or aborted transactions.
    pub fn read_uncommitted(&self, topic: &str) -> Vec<KafkaMessage> {
        self.read(topic, "read_uncommitted")
    }

    fn read(&self, topic: &str, isolation: &str) -> Vec<KafkaMessage> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("enable.partition.eof", "true")
            .set("isolation.level", isolation)
            // Never joined: librdkafka wants a group to assign by hand.
            .set("group.id", "weir-tests-reader")
            .create()
            .expect("a test consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), TIMEOUT)
            .expect("topic metadata");
        let partitions: Vec<i32> = metadata.topics()[0]
            .partitions()
            .iter()
            .map(|p| p.id())
            .collect();
        assert!(!partitions.is_empty(), "topic {topic} has no partitions");
        let mut list = TopicPartitionList::new();
        for p in &partitions {
            list.add_partition_offset(topic, *p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&list).expect("assigning the partitions");
        let mut at_end = std::collections::BTreeSet::new();
        let mut messages = Vec::new();
        let deadline = Instant::now() + TIMEOUT * 3;
        while at_end.len() < partitions.len() {
            assert!(Instant::now() < deadline, "reading {topic} took too long");
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                Some(Ok(m)) => {
                    at_end.remove(&m.partition());
                    let headers = m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| {
                                    let value = h.value.map(|v| String::from_utf8_lossy(v).into());
                                    (h.key.to_owned(), value.unwrap_or_default())
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let header_list = (m.headers().into_iter())
                        .flat_map(|h| h.iter())
                        .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                        .collect();
                    messages.push(KafkaMessage {
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec),
                        value: m.payload().unwrap_or_default().to_vec(),
                        timestamp: m.timestamp().to_millis(),
                        headers,
                        header_list,
                    });
                }
            }
        }
        messages.sort_by_key(|m| (m.partition, m.offset));
        messages
    }

    /// The low and high offsets (the first kept, the end) of each
    /// partition of `topic`, by partition number.
    pub fn offsets(&self, topic: &str, partitions: i32) -> Vec<(i64, i64)> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("a test consumer");
        (0..partitions)
            .map(|p| {
                (consumer.fetch_watermarks(topic, p, TIMEOUT))
                    .unwrap_or_else(|e| panic!("the offsets of {topic} partition {p}: {e}"))
            })
            .collect()
    }

    /// The offset consumer group `group` committed for partition
    /// `partition` of `topic`, if any.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.committed_with_metadata(group, topic, partition)
            .map(|(offset, _)| offset)
    }

    /// The offset consumer group `group` committed for partition
    /// `partition` of `topic`, with the commit's metadata, if any.
    pub fn committed_with_metadata(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Option<(i64, String)> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("group.id", group)
            .create()
            .expect("a test consumer");
        let mut list = TopicPartitionList::new();
        list.add_partition(topic, partition);
        let committed = consumer
            .committed_offsets(list, TIMEOUT)
            .expect("reading committed offsets");
        let e = committed.find_partition(topic, partition)?;
        match e.offset() {
            Offset::Offset(n) => Some((n, e.metadata().to_owned())),
            _ => None,
        }
    }
}

/// librdkafka's mock cluster of one or more brokers on loopback ports,
/// hosted in the test process, for the faults it injects. It is no place
/// for exactly-once checks: it shows the messages of aborted transactions
/// to `read_committed` readers and does not keep offsets committed in a
/// transaction.
pub struct MockKafka {
    cluster: MockCluster<'static, DefaultProducerContext>,
    clients: Clients,
}

impl MockKafka {
    /// Starts a mock cluster of `brokers` brokers.
    pub fn start(brokers: i32) -> MockKafka {
        let cluster = MockCluster::new(brokers).expect("starting librdkafka's mock cluster");
        let clients = Clients::new(cluster.bootstrap_servers());
        MockKafka { cluster, clients }
    }

    /// Creates topic `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.cluster
            .create_topic(topic, partitions, 1)
            .unwrap_or_else(|e| panic!("creating topic {topic}: {e}"));
    }

    /// Takes broker `id` (1-based) down: its connections are closed and
    /// new ones refused until [`MockKafka::broker_up`].
    pub fn broker_down(&self, id: i32) {
        self.cluster.broker_down(id).expect("taking a broker down");
    }

    /// Brings broker `id` back.
    pub fn broker_up(&self, id: i32) {
        self.cluster.broker_up(id).expect("bringing a broker up");
    }

    /// Fails the next `count` produce requests of any client with
    /// MESSAGE_TOO_LARGE, a permanent error: a transaction that hits it can
    /// only be aborted.
    pub fn fail_next_produces(&self, count: usize) {
        let errors = vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; count];
        self.cluster.request_errors(RDKafkaApiKey::Produce, &errors);
    }
}

impl Deref for MockKafka {
    type Target = Clients;

    fn deref(&self) -> &Clients {
        &self.clients
    }
}

/// Runs an admin request's future to its end (librdkafka completes it from
/// its own thread).
fn futures_executor<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for an admin request")
        .block_on(future)
}

fn send_all(producer: &BaseProducer, topic: &str, messages: &[Outgoing<'_>]) {
    let with: Vec<_> = messages.iter().map(|m| (*m, Vec::new())).collect();
    send_with_headers(producer, topic, &with);
}

/// [`send_all`] of messages with headers.
fn send_with_headers(
    producer: &BaseProducer,
    topic: &str,
    messages: &[(Outgoing<'_>, OutgoingHeaders<'_>)],
) {
    for ((partition, key, value, timestamp), headers) in messages {
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(value);
        if !headers.is_empty() {
            let mut all = rdkafka::message::OwnedHeaders::new_with_capacity(headers.len());
            for &(key, value) in headers {
                all = all.insert(rdkafka::message::Header { key, value });
            }
            record = record.headers(all);
        }
        if let Some(p) = partition {
            record = record.partition(*p);
        }
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(t) = timestamp {
            record = record.timestamp(*t);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(_), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("producing to {topic}: {e}"),
            }
        }
    }
}
