//! The exactly-once sinks as targets of the golden word count, for tests
//! that crash a job and check what it delivered ([`Target`]): the file
//! sink, PostgreSQL, NATS JetStream and Kafka, each reading back the
//! delivered word-count lines in delivery order (file order, a `bigserial`
//! column, stream sequence, partition offsets).

use crate::job_dir::JobDir;
use crate::job_file::Sink;
use crate::servers::{Kafka, Nats, Postgres, values_text};

/// An exactly-once sink under test: the job's sink, and what it delivered.
pub trait Target {
    /// The sink (its `input` is set by the job).
    fn sink(&self) -> Sink;
    /// The delivered word-count lines, in delivery order.
    fn delivered(&self, j: &JobDir) -> String;
}

/// The file sink, into `out.jsonl`.
pub struct FileOut;

impl Target for FileOut {
    fn sink(&self) -> Sink {
        Sink::jsonl("out", "out.jsonl")
    }
    fn delivered(&self, j: &JobDir) -> String {
        j.read("out.jsonl")
    }
}

/// The PostgreSQL sink, appending to table `counts`, whose `seq` column
/// numbers the rows in the order they were inserted.
pub struct Pg(pub Postgres);

impl Pg {
    /// A private server with an empty table `counts`.
    pub fn start() -> Pg {
        let pg = Postgres::start();
        pg.psql(
            "CREATE TABLE counts (seq bigserial PRIMARY KEY, word text NOT NULL, count bigint NOT NULL)",
        );
        Pg(pg)
    }
}

impl Target for Pg {
    fn sink(&self) -> Sink {
        Sink::postgres("out", &self.0.url(), "counts")
    }
    fn delivered(&self, _: &JobDir) -> String {
        self.0
            .psql("SELECT json_build_object('word', word, 'count', count) FROM counts ORDER BY seq")
    }
}

/// The NATS sink, publishing each count to `counts.<word>`, captured by
/// stream `COUNTS`.
pub struct Jetstream(pub Nats);

impl Jetstream {
    /// A private server with an empty stream `COUNTS`.
    pub fn start() -> Jetstream {
        let nats = Nats::start();
        nats.create_stream("COUNTS", &["counts.>"]);
        Jetstream(nats)
    }
}

impl Target for Jetstream {
    fn sink(&self) -> Sink {
        Sink::nats("out", &self.0.url(), "counts.{key}")
    }
    fn delivered(&self, _: &JobDir) -> String {
        self.0.read_stream_text("COUNTS")
    }
}

/// The transactional Kafka sink, into topic `counts` (3 partitions) of a
/// private broker, read back by a `read_committed` consumer partition by
/// partition (each word is a key, so its counts are in one partition, in
/// the order they were committed).
pub struct KafkaOut(pub Kafka);

impl KafkaOut {
    /// A private broker with an empty topic `counts`.
    pub fn start() -> KafkaOut {
        let kafka = Kafka::start();
        kafka.create_topic("counts", 3);
        KafkaOut(kafka)
    }
}

impl Target for KafkaOut {
    fn sink(&self) -> Sink {
        Sink::kafka("out", &self.0.brokers(), "counts")
    }
    fn delivered(&self, _: &JobDir) -> String {
        values_text(&self.0.read_committed("counts"))
    }
}
