//! A Kafka cluster for tests: librdkafka's mock cluster, hosted in the
//! test process (no broker package exists on these machines). It speaks
//! the real Kafka protocol on loopback ports, so a `weir` child process
//! connects to it as to any cluster, with consumer groups, idempotent and
//! transactional producers. It lives as long as the [`Kafka`] value.
//!
//! With `WEIR_KAFKA_BROKERS=host:port` the tests run against that real
//! cluster instead (`docs/connectors.md`, "Testing against a real Kafka").

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};

/// How long a test client waits on the cluster.
const TIMEOUT: Duration = Duration::from_secs(10);

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
}

impl KafkaMessage {
    /// The value as UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8(self.value.clone()).expect("a UTF-8 value")
    }
}

/// A Kafka cluster for one test: librdkafka's mock cluster of one or more
/// brokers on loopback ports or, with `WEIR_KAFKA_BROKERS` set, a real
/// cluster at those brokers (topics then get a name of their own per test,
/// [`Kafka::topic`]).
pub struct Kafka {
    cluster: Option<MockCluster<'static, DefaultProducerContext>>,
    brokers: String,
    /// Put before every topic name on a real cluster.
    prefix: String,
}

/// The variable naming a real cluster to test against instead of the mock.
pub const REAL_CLUSTER: &str = "WEIR_KAFKA_BROKERS";

impl Kafka {
    /// Starts a mock cluster of `brokers` brokers, or connects to the real
    /// cluster [`REAL_CLUSTER`] names.
    pub fn start(brokers: i32) -> Kafka {
        if let Ok(real) = std::env::var(REAL_CLUSTER) {
            static TESTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = TESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let since = std::time::UNIX_EPOCH.elapsed().unwrap().as_millis();
            return Kafka {
                cluster: None,
                brokers: real,
                prefix: format!("weir-test-{since}-{}-{n}-", std::process::id()),
            };
        }
        let cluster = MockCluster::new(brokers).expect("starting librdkafka's mock cluster");
        let brokers = cluster.bootstrap_servers();
        Kafka {
            cluster: Some(cluster),
            brokers,
            prefix: String::new(),
        }
    }

    /// Whether this is librdkafka's mock cluster, which keeps the messages
    /// of aborted transactions visible to `read_committed` readers and
    /// does not store offsets committed in a transaction.
    pub fn is_mock(&self) -> bool {
        self.cluster.is_some()
    }

    /// The bootstrap servers (`host:port,...`).
    pub fn brokers(&self) -> String {
        self.brokers.clone()
    }

    /// The name topic `name` of the test has on the cluster.
    pub fn topic(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn mock(&self, what: &str) -> &MockCluster<'static, DefaultProducerContext> {
        self.cluster.as_ref().unwrap_or_else(|| {
            panic!("{what} needs librdkafka's mock cluster; run without {REAL_CLUSTER}")
        })
    }

    /// Creates topic `name` ([`Kafka::topic`]) with `partitions` partitions.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        let topic = self.topic(name);
        match &self.cluster {
            Some(cluster) => cluster
                .create_topic(&topic, partitions, 1)
                .unwrap_or_else(|e| panic!("creating topic {topic}: {e}")),
            None => self.create_real_topic(&topic, partitions),
        }
    }

    fn create_real_topic(&self, topic: &str, partitions: i32) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("an admin client");
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let created = futures_executor(admin.create_topics(&[new], &AdminOptions::new()));
        for result in created.expect("creating topics") {
            result.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
        }
    }

    /// Takes broker `id` (1-based) down: its connections are closed and
    /// new ones refused until [`Kafka::broker_up`].
    pub fn broker_down(&self, id: i32) {
        self.mock("taking a broker down")
            .broker_down(id)
            .expect("taking a broker down");
    }

    /// Brings broker `id` back.
    pub fn broker_up(&self, id: i32) {
        self.mock("bringing a broker up")
            .broker_up(id)
            .expect("bringing a broker up");
    }

    /// Fails the next `count` produce requests of any client with
    /// MESSAGE_TOO_LARGE, a permanent error: a transaction that hits it can
    /// only be aborted.
    pub fn fail_next_produces(&self, count: usize) {
        let errors = vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; count];
        self.mock("injecting errors")
            .request_errors(RDKafkaApiKey::Produce, &errors);
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
        let producer = self.producer(&[("enable.idempotence", "true")]);
        send_all(&producer, &self.topic(topic), messages);
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
        send_all(&producer, &self.topic(topic), messages);
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

    fn read(&self, name: &str, isolation: &str) -> Vec<KafkaMessage> {
        let topic = &self.topic(name);
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
                    messages.push(KafkaMessage {
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec),
                        value: m.payload().unwrap_or_default().to_vec(),
                        timestamp: m.timestamp().to_millis(),
                        headers,
                    });
                }
            }
        }
        messages.sort_by_key(|m| (m.partition, m.offset));
        messages
    }

    /// The offset consumer group `group` committed for partition
    /// `partition` of `topic`, if any.
    pub fn committed(&self, group: &str, name: &str, partition: i32) -> Option<i64> {
        let topic = &self.topic(name);
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
        match committed.find_partition(topic, partition)?.offset() {
            Offset::Offset(n) => Some(n),
            _ => None,
        }
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
    for (partition, key, value, timestamp) in messages {
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(value);
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
