//! Reading a topic back whole: how `weir deadletter ls` reads the dead
//! letters a Kafka sink wrote. Only committed transactions are read
//! (`read_committed`), each partition from its beginning up to its end.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::client::{ClientSettings, Context, partitions};

/// How long reading a topic back may take in all.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// The values of the committed messages of `topic` on `client`'s cluster,
/// partition by partition, each in offset order.
pub fn committed_values(client: &ClientSettings, topic: &str) -> Result<Vec<Vec<u8>>, String> {
    let own = [
        ("group.id", "weir-read-back"),
        ("enable.auto.commit", "false"),
        ("enable.partition.eof", "true"),
        ("isolation.level", "read_committed"),
    ];
    let consumer: BaseConsumer<Context> = (client.config("read-back", &own))
        .create_with_context(Context::new(format!("topic `{topic}`")))
        .map_err(|e| format!("cannot create a Kafka client: {e}"))?;
    let ids = partitions(&consumer, &client.brokers, topic)?;
    let mut list = TopicPartitionList::new();
    for &p in &ids {
        (list.add_partition_offset(topic, p, Offset::Beginning))
            .map_err(|e| format!("cannot read partition {p} of `{topic}`: {e}"))?;
    }
    consumer
        .assign(&list)
        .map_err(|e| format!("cannot read topic `{topic}`: {e}"))?;
    consumer.context().opened();
    // Kept by partition until all are read.
    let mut read: Vec<Vec<Vec<u8>>> = vec![Vec::new(); ids.len()];
    let mut ended = BTreeSet::new();
    let deadline = Instant::now() + READ_TIMEOUT;
    while ended.len() < ids.len() {
        if Instant::now() >= deadline {
            return Err(format!(
                "reading topic `{topic}` at {} took over {} s; is the cluster up?",
                client.brokers,
                READ_TIMEOUT.as_secs()
            ));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                ended.insert(p);
            }
            Some(Err(e)) => return Err(format!("reading topic `{topic}`: {e}")),
            Some(Ok(m)) => {
                ended.remove(&m.partition());
                let i = ids.binary_search(&m.partition()).unwrap_or_default();
                read[i].push(m.payload().unwrap_or_default().to_vec());
            }
        }
    }
    Ok(read.into_iter().flatten().collect())
}
