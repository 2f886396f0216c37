//! The stdin source (`type = "stdin"`): records cut from standard input in
//! the format `lines` or `jsonl`, read by one thread per process.
//!
//! Stdin is read on a thread of its own, so that the source thread never
//! blocks on it and can inject barriers while stdin is quiet. It cannot
//! seek: its offset counts records, and a restore reads on from where
//! stdin is ([`SourceReader::replayable`] is false).

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toml::Table;

use super::format::{LineParser, LineReader, Parsing};
use super::source::{SourceError, SourceReader};
use super::{BuildSource, SourceConnector, SourceType};

/// The registry entry of `type = "stdin"`.
pub const SOURCE: SourceType = SourceType {
    name: "stdin",
    keys: &["format", "key", "timestamp", "on_bad_timestamp", "schema"],
    read: StdinConfig::read,
};

/// The settings of a stdin source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdinConfig {
    /// How the input is split into records (`lines` or `jsonl`; `csv` is
    /// refused).
    pub parsing: Parsing,
}

impl StdinConfig {
    fn read(mut table: Table) -> Result<BuildSource, String> {
        let parsing = Parsing::take(&mut table)?;
        parsing.refuse_csv("stdin")?;
        parsing.refuse_binary("stdin")?;
        Ok(Box::new(move |dir: &Path| {
            let parsing = parsing.check(dir)?;
            Ok(Arc::new(StdinConfig { parsing }))
        }))
    }
}

impl SourceConnector for StdinConfig {
    /// Stdin ends when its writer closes it, which a live feed never does.
    fn ends(&self) -> bool {
        false
    }

    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        let parser = LineParser::new(id.to_owned(), "stdin".into(), &self.parsing);
        let records = offset
            .and_then(|o| o.get("records"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let input = Box::new(LiveInput::stdin());
        Ok(Box::new(LineReader::new(input, parser, 0, records, false)))
    }
}

/// A live input (stdin) read by a thread of its own, so that the source
/// thread never blocks on it: [`BufRead::fill_buf`] returns what has
/// arrived, an empty slice at the end of the input, and
/// [`ErrorKind::WouldBlock`](std::io::ErrorKind::WouldBlock) when nothing
/// has arrived yet.
struct LiveInput {
    chunks: crossbeam_channel::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    ended: bool,
}

/// Chunks of a live input, read by a thread of its own.
type Chunks = crossbeam_channel::Receiver<std::io::Result<Vec<u8>>>;

/// Bytes one read of a live input asks for.
const LIVE_CHUNK: usize = 64 << 10;

/// Starts a thread named `name` that reads `input` in chunks until its end
/// or an error; at most a few chunks wait unread.
fn read_on_a_thread(name: &str, mut input: impl std::io::Read + Send + 'static) -> Chunks {
    let (tx, chunks) = crossbeam_channel::bounded(4);
    let spawned = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            loop {
                let mut chunk = vec![0; LIVE_CHUNK];
                let read = match input.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(n) => {
                        chunk.truncate(n);
                        Ok(chunk)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = read.is_err();
                // Every reader is gone: stop reading.
                if tx.send(read).is_err() || failed {
                    return;
                }
            }
        });
    // Without the thread, readers see the input end at once; `spawn` fails
    // only when the system is out of threads.
    if let Err(e) = spawned {
        tracing::error!("cannot start the thread that reads {name}: {e}");
    }
    chunks
}

impl LiveInput {
    fn new(chunks: Chunks) -> Self {
        LiveInput {
            chunks,
            chunk: Vec::new(),
            at: 0,
            ended: false,
        }
    }

    /// The process's stdin. One thread reads it for the whole process: a
    /// source reopened after a restart takes over the same stream of
    /// chunks, rather than start a second reader that would race the first
    /// for the bytes.
    fn stdin() -> Self {
        static STDIN: std::sync::OnceLock<Chunks> = std::sync::OnceLock::new();
        let chunks = STDIN.get_or_init(|| read_on_a_thread("stdin-reader", std::io::stdin()));
        LiveInput::new(chunks.clone())
    }
}

impl std::io::Read for LiveInput {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for LiveInput {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.at == self.chunk.len() && !self.ended {
            match self.chunks.try_recv() {
                Ok(chunk) => {
                    self.chunk = chunk?;
                    self.at = 0;
                }
                Err(crossbeam_channel::TryRecvError::Empty) => {
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                Err(crossbeam_channel::TryRecvError::Disconnected) => self.ended = true,
            }
        }
        Ok(&self.chunk[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.chunk.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::format::Format;
    use crate::connectors::format::tests::test_parser;

    /// Reads batches until one is not empty (a live source returns empty
    /// batches while nothing has arrived), or the end (`None`).
    fn next_records(r: &mut dyn SourceReader) -> Option<Vec<Vec<u8>>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let batch = r.read_batch(1024).unwrap()?;
            if !batch.is_empty() {
                return Some(batch.iter().map(|rec| rec.value.to_vec()).collect());
            }
            assert!(std::time::Instant::now() < deadline, "no input arrived");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A live input hands over the lines that have arrived instead of
    /// waiting for a full batch, never blocks, and keeps a line that
    /// arrives in pieces whole.
    #[test]
    fn a_live_input_returns_what_has_arrived_without_blocking() {
        use std::io::Write;
        let (input, mut feed) = std::io::pipe().unwrap();
        let live = LiveInput::new(read_on_a_thread("test-input", input));
        let mut r = LineReader::new(
            Box::new(live),
            test_parser(Format::Lines, None),
            0,
            0,
            false,
        );
        feed.write_all(b"a\nb").unwrap();
        assert_eq!(next_records(&mut r), Some(vec![b"a".to_vec()]));
        // Nothing complete has arrived since: an empty batch, at once.
        assert_eq!(r.read_batch(1024).unwrap().map(|b| b.len()), Some(0));
        feed.write_all(b"c\nd\n").unwrap();
        assert_eq!(
            next_records(&mut r),
            Some(vec![b"bc".to_vec(), b"d".to_vec()])
        );
        feed.write_all(b"no newline").unwrap();
        drop(feed);
        assert_eq!(next_records(&mut r), Some(vec![b"no newline".to_vec()]));
        assert_eq!(next_records(&mut r), None);
        assert_eq!(r.offset()["records"], 4);
    }

    /// A stdin source reopened in the same process (a restart) reads on
    /// from the same reader thread.
    #[test]
    fn stdin_sources_share_one_reader() {
        let (a, b) = (LiveInput::stdin(), LiveInput::stdin());
        assert!(a.chunks.same_channel(&b.chunks));
    }
}
