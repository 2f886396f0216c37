//! The baselines: the logic of the `filter` and `word-count` plugins
//! compiled natively, as operators called directly, as single-threaded
//! programs, and inside a host-like pipeline (Weir's own source and sink
//! with threads and bounded channels, and no Wasm).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use crossbeam_channel::bounded;
use serde_json::Value;
use weir::Record;
use weir::job::{Job, SourceKind};

/// A comparison of the filter plugin (the ones the benchmarks use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`.
    Eq,
    /// `>=`.
    Ge,
    /// `<`.
    Lt,
}

/// The `filter` plugin's predicate, natively: parse the record as JSON,
/// look up a (dotted) field, compare numbers as numbers and strings as
/// strings.
#[derive(Debug, Clone)]
pub struct NativeFilter {
    path: Vec<String>,
    op: Op,
    value: Value,
}

impl NativeFilter {
    /// A filter keeping records whose `field` compares to `value` by `op`.
    pub fn new(field: &str, op: Op, value: Value) -> Self {
        NativeFilter {
            path: field.split('.').map(str::to_string).collect(),
            op,
            value,
        }
    }

    /// The filter of every benchmark: `amount >= 50`.
    pub fn bench() -> Self {
        Self::new("amount", Op::Ge, Value::from(50))
    }

    /// Whether the record (JSON text) passes.
    pub fn keeps(&self, json: &[u8]) -> anyhow::Result<bool> {
        let v: Value = serde_json::from_slice(json).context("record is not JSON")?;
        let mut field = &v;
        for part in &self.path {
            match field.as_object().and_then(|o| o.get(part)) {
                Some(f) => field = f,
                None => return Ok(false),
            }
        }
        use std::cmp::Ordering::*;
        let ord = match (field, &self.value) {
            (Value::Number(a), Value::Number(b)) => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b)),
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (a, b) => (a == b).then_some(Equal),
        };
        Ok(match self.op {
            Op::Eq => ord == Some(Equal),
            Op::Ge => matches!(ord, Some(Greater | Equal)),
            Op::Lt => ord == Some(Less),
        })
    }

    /// Appends the records of `batch` that pass to `out`.
    pub fn process(&mut self, batch: &[Record], out: &mut Vec<Record>) -> anyhow::Result<()> {
        for r in batch {
            if self.keeps(&r.value)? {
                out.push(r.clone());
            }
        }
        Ok(())
    }
}

/// The JSON the word-count plugin emits per input record.
#[derive(serde::Serialize)]
struct Count<'a> {
    word: &'a str,
    count: u64,
}

/// The `word-count` plugin's logic, natively: counts in a `HashMap`, one
/// `{"word", "count"}` record keyed by the word per input record.
#[derive(Debug, Default)]
pub struct NativeWordCount {
    counts: HashMap<String, u64>,
}

impl NativeWordCount {
    /// Counts `word` (already trimmed); returns its new count. Empty words
    /// are not counted (`None`).
    pub fn count(&mut self, word: &str) -> Option<u64> {
        if word.is_empty() {
            return None;
        }
        let c = match self.counts.get_mut(word) {
            Some(c) => c,
            None => self.counts.entry(word.to_string()).or_insert(0),
        };
        *c += 1;
        Some(*c)
    }

    /// The output line of `word` at `count`.
    pub fn json(word: &str, count: u64) -> Vec<u8> {
        serde_json::to_vec(&Count { word, count }).expect("serializing to memory")
    }

    /// Counts every record of `batch` (its key, else its value) and appends
    /// the output records to `out`.
    pub fn process(&mut self, batch: &[Record], out: &mut Vec<Record>) -> anyhow::Result<()> {
        for r in batch {
            let raw = r.key.as_deref().unwrap_or(&r.value);
            let word = std::str::from_utf8(raw)
                .context("word is not UTF-8")?
                .trim();
            if let Some(c) = self.count(word) {
                out.push(Record::new(Self::json(word, c)).with_key(word.as_bytes().to_vec()));
            }
        }
        Ok(())
    }

    /// Distinct words counted.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// Reads `input` line by line and calls `each` with every line (without
/// its line break) and the writer to `output`, which is flushed and synced
/// at the end (the file sink syncs too).
fn line_program(
    input: &Path,
    output: &Path,
    mut each: impl FnMut(&[u8], &mut BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut r = BufReader::with_capacity(256 << 10, std::fs::File::open(input)?);
    let mut w = BufWriter::with_capacity(256 << 10, std::fs::File::create(output)?);
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        each(&line, &mut w)?;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

/// The filter job as a native single-threaded program: read JSON lines,
/// keep `amount >= 50`, write the kept lines. Returns the lines kept.
pub fn filter_program(input: &Path, output: &Path) -> anyhow::Result<u64> {
    let f = NativeFilter::bench();
    let mut kept = 0;
    line_program(input, output, |line, w| {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        if f.keeps(line)? {
            w.write_all(line)?;
            w.write_all(b"\n")?;
            kept += 1;
        }
        Ok(())
    })?;
    Ok(kept)
}

/// The word-count job as a native single-threaded program: read lines,
/// count in a `HashMap`, write one JSON line per word. Returns the lines
/// written.
pub fn word_count_program(input: &Path, output: &Path) -> anyhow::Result<u64> {
    let mut wc = NativeWordCount::default();
    let mut written = 0;
    line_program(input, output, |line, w| {
        let word = std::str::from_utf8(line)
            .context("word is not UTF-8")?
            .trim();
        if let Some(c) = wc.count(word) {
            serde_json::to_writer(&mut *w, &Count { word, count: c })?;
            w.write_all(b"\n")?;
            written += 1;
        }
        Ok(())
    })?;
    Ok(written)
}

/// Runs `job` (one source, one operator, one file sink) with the operator
/// replaced by native code: Weir's source reader and file sink, one thread
/// each plus one for the operator, bounded channels of 16 batches between
/// them, as the host wires a job, but no Wasm, barriers or coordinator.
/// Returns (records out of the operator, wall time).
pub fn host_pipeline(
    job: &Job,
    staging: &Path,
    mut op: impl FnMut(&[Record], &mut Vec<Record>) -> anyhow::Result<()> + Send,
) -> anyhow::Result<(u64, Duration)> {
    let source = job.sources.first().context("job without source")?;
    let sink = job.sinks.first().context("job without sink")?;
    let batch_size = match &source.kind {
        SourceKind::File { batch_size, .. }
        | SourceKind::Generator { batch_size, .. }
        | SourceKind::Stdin { batch_size, .. } => *batch_size,
    };
    std::fs::create_dir_all(staging)?;
    let started = Instant::now();
    let mut reader = weir::source::open(source, None)?;
    let mut writer = weir::sink::open(sink, staging, None)?;
    let (in_tx, in_rx) = bounded::<Vec<Record>>(16);
    let (out_tx, out_rx) = bounded::<Vec<Record>>(16);
    let out = std::thread::scope(|s| -> anyhow::Result<u64> {
        let src = s.spawn(move || -> anyhow::Result<()> {
            while let Some(batch) = reader.read_batch(batch_size)? {
                if in_tx.send(batch).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let opt = s.spawn(move || -> anyhow::Result<u64> {
            let mut n = 0;
            for batch in in_rx {
                let mut out = Vec::with_capacity(batch.len());
                op(&batch, &mut out)?;
                n += out.len() as u64;
                if !out.is_empty() && out_tx.send(out).is_err() {
                    break;
                }
            }
            Ok(n)
        });
        for batch in out_rx {
            writer.write(&batch)?;
        }
        writer.precommit(1)?;
        writer.commit(1)?;
        src.join().expect("source thread")?;
        opt.join().expect("operator thread")
    })?;
    Ok((out, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_compares_like_the_plugin() {
        let f = NativeFilter::bench();
        assert!(f.keeps(br#"{"amount":50}"#).unwrap());
        assert!(f.keeps(br#"{"amount":99.5}"#).unwrap());
        assert!(!f.keeps(br#"{"amount":49}"#).unwrap());
        assert!(!f.keeps(br#"{"amount":"x"}"#).unwrap());
        assert!(!f.keeps(br#"{"b":1}"#).unwrap());
        assert!(f.keeps(b"nope").is_err());
        let s = NativeFilter::new("c.n", Op::Eq, Value::from("FR"));
        assert!(s.keeps(br#"{"c":{"n":"FR"}}"#).unwrap());
    }

    #[test]
    fn word_count_emits_what_the_plugin_emits() {
        let mut wc = NativeWordCount::default();
        let mut out = Vec::new();
        let batch = ["a", "b", " a \n", ""].map(|w| Record::new(w.as_bytes().to_vec()));
        wc.process(&batch, &mut out).unwrap();
        let text: Vec<String> = out
            .iter()
            .map(|r| String::from_utf8(r.value.clone()).unwrap())
            .collect();
        assert_eq!(
            text,
            [
                r#"{"word":"a","count":1}"#,
                r#"{"word":"b","count":1}"#,
                r#"{"word":"a","count":2}"#
            ]
        );
        assert_eq!(out[2].key.as_deref(), Some(&b"a"[..]));
        assert_eq!(wc.len(), 2);
    }
}
