//! Reading a NATS sink's messages back whole: how `weir deadletter ls` and
//! `weir deadletter replay` read the dead letters a NATS sink published.
//! The stream capturing the sink's subject is read from its first message
//! up to its last as of the call, as a bounded source of it would.

use std::time::{Duration, Instant};

use weir::connectors::SourceConnector;
use weir::connectors::parsing::Parsing;

use super::connection::Connection;
use super::sink::{KEY, NatsSinkConfig};
use super::source::{NatsSourceConfig, Start};

/// How long reading a stream back may take in all.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// The payloads of the messages `sink` published (on its subject, in the
/// stream that captures it), in stream order; each payload a line (as the
/// sink publishes one record per message).
pub fn published(sink: &NatsSinkConfig) -> Result<Vec<Vec<u8>>, String> {
    let connection = Connection::open(&sink.url, "read-back")?;
    let sample = sink.subject.replace(KEY, "key");
    let stream = (connection.block_on(connection.jetstream.stream_by_subject(sample.clone())))
        .map_err(|e| format!("no JetStream stream captures subject `{sample}` ({e})"))?;
    let source = NatsSourceConfig {
        url: sink.url.clone(),
        stream,
        subject: Some(sink.subject.replace(KEY, "*")),
        parsing: Parsing::default(),
        message_time: false,
        start: Start::First,
        bounded: true,
        metadata: Default::default(),
    };
    let mut reader = (source.open("read-back", None)).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut values = Vec::new();
    while let Some(batch) = reader.read_batch(1024).map_err(|e| e.to_string())? {
        if batch.is_empty() {
            if Instant::now() > deadline {
                return Err(format!(
                    "reading stream `{}` took over {READ_TIMEOUT:?}; is the server overloaded?",
                    source.stream
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        values.extend((0..batch.len()).map(|i| batch.get(i).value.to_vec()));
    }
    Ok(values)
}
