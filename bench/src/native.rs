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
use weir::Batch;
use weir::config::Job;

/// The `filter` plugin's own logic (its crate, `plugins/filter`, compiled
/// natively and called directly): the baseline runs exactly the code the
/// Wasm component runs.
pub struct NativeFilter {
    filter: filter::Filter,
}

impl NativeFilter {
    /// The filter of the JSON configuration `config`, as a job passes it.
    pub fn from_config(config: &str) -> anyhow::Result<Self> {
        let config: filter::Config = serde_json::from_str(config)?;
        let filter = filter::Filter::new(config).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        Ok(NativeFilter { filter })
    }

    /// The filter of every benchmark: `amount >= 50`.
    pub fn bench() -> Self {
        Self::from_config(crate::data::FILTER_CONFIG).expect("the benchmark's filter is valid")
    }

    /// Whether the record (JSON text) passes.
    pub fn keeps(&self, json: &[u8]) -> anyhow::Result<bool> {
        let rec = weir_sdk::RecordRef {
            key: None,
            value: json,
            timestamp: None,
            change: weir_sdk::Change::Insert,
            encoding: weir_sdk::Encoding::Bytes,
        };
        self.filter
            .passes(&rec)
            .map_err(|e| anyhow::anyhow!("record is not JSON: {e:?}"))
    }

    /// Appends the records of `batch` that pass to `out`.
    pub fn process(&mut self, batch: &Batch, out: &mut Batch) -> anyhow::Result<()> {
        for r in batch.iter() {
            if self.keeps(r.value)? {
                out.push_ref(r);
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
    /// Output value scratch space.
    line: Vec<u8>,
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
    pub fn process(&mut self, batch: &Batch, out: &mut Batch) -> anyhow::Result<()> {
        for r in batch.iter() {
            let raw = r.key.unwrap_or(r.value);
            let word = std::str::from_utf8(raw)
                .context("word is not UTF-8")?
                .trim();
            if let Some(c) = self.count(word) {
                self.line.clear();
                serde_json::to_writer(&mut self.line, &Count { word, count: c })?;
                out.push(Some(word.as_bytes()), &self.line, None);
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

/// What the reconcile program knows of one order.
#[derive(Debug, Default, Clone, Copy)]
struct Order {
    a: Option<f64>,
    b: Option<f64>,
    /// Its result was written.
    done: bool,
}

/// The `order_no` and `amount` of every row of the CSV file `path` (with a
/// header naming its columns), in order.
fn each_order(
    path: &Path,
    mut each: impl FnMut(&str, f64) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut r = csv::ReaderBuilder::new()
        .buffer_capacity(256 << 10)
        .from_path(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let headers = r.byte_headers()?.clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h == name.as_bytes())
            .with_context(|| format!("{} has no column `{name}`", path.display()))
    };
    let (key, amount) = (column("order_no")?, column("amount")?);
    let mut row = csv::ByteRecord::new();
    while r.read_byte_record(&mut row)? {
        let field = |i: usize| std::str::from_utf8(row.get(i).unwrap_or_default());
        let amount: f64 = field(amount)?
            .trim()
            .parse()
            .with_context(|| format!("an amount of {} is not a number", path.display()))?;
        each(field(key)?, amount)?;
    }
    Ok(())
}

/// The reconcile job (tolerance 0) as a native single-threaded program:
/// reads the orders of `payments` (side a), then those of `bank` (side b),
/// keeps what is known per order in a `HashMap`, writes each order's result
/// as the `reconcile` plugin does (its own [`reconcile::classify`]) as a
/// JSON line: a match or mismatch once both sides are in, the one-sided
/// orders at the end; then syncs the output. Returns the lines written.
pub fn reconcile_program(payments: &Path, bank: &Path, output: &Path) -> anyhow::Result<u64> {
    let mut orders: HashMap<String, Order> = HashMap::new();
    let mut w = BufWriter::with_capacity(256 << 10, std::fs::File::create(output)?);
    let mut written = 0u64;
    let mut write =
        |w: &mut BufWriter<std::fs::File>, key: &str, o: &Order| -> anyhow::Result<()> {
            if let Some(c) = reconcile::classify(key, o.a, o.b, 0.0) {
                serde_json::to_writer(&mut *w, &c)?;
                w.write_all(b"\n")?;
                written += 1;
            }
            Ok(())
        };
    for (path, side_a) in [(payments, true), (bank, false)] {
        each_order(path, |key, amount| {
            let o = match orders.get_mut(key) {
                Some(o) => o,
                None => orders.entry(key.to_string()).or_default(),
            };
            let side = if side_a { &mut o.a } else { &mut o.b };
            if o.done || side.is_some() {
                return Ok(());
            }
            *side = Some(amount);
            if o.a.is_some() && o.b.is_some() {
                o.done = true;
                let o = *o;
                write(&mut w, key, &o)?;
            }
            Ok(())
        })?;
    }
    for (key, o) in &orders {
        if !o.done {
            write(&mut w, key, o)?;
        }
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
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
    mut op: impl FnMut(&Batch, &mut Batch) -> anyhow::Result<()> + Send,
) -> anyhow::Result<(u64, Duration)> {
    let source = job.sources.first().context("job without source")?;
    let sink = job.sinks.first().context("job without sink")?;
    let batch_size = source.batch_size;
    std::fs::create_dir_all(staging)?;
    let started = Instant::now();
    let mut reader = source.open(None)?;
    let mut writer = sink.open(&job.name, staging, None, None)?;
    let (in_tx, in_rx) = bounded::<Batch>(16);
    let (out_tx, out_rx) = bounded::<Batch>(16);
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
                let mut out = Batch::with_capacity(batch.len(), batch.data_bytes() * 4);
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
        weir::connectors::sink::precommit_blocking(writer.as_mut(), 1)?;
        weir::connectors::sink::commit_blocking(writer.as_mut(), 1)?;
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
        let s = NativeFilter::from_config(r#"{"field":"c.n","op":"eq","value":"FR"}"#).unwrap();
        assert!(s.keeps(br#"{"c":{"n":"FR"}}"#).unwrap());
    }

    #[test]
    fn word_count_emits_what_the_plugin_emits() {
        let mut wc = NativeWordCount::default();
        let mut out = Batch::new();
        let mut batch = Batch::new();
        for w in ["a", "b", " a \n", ""] {
            batch.push(None, w.as_bytes(), None);
        }
        wc.process(&batch, &mut out).unwrap();
        let text: Vec<String> = out
            .iter()
            .map(|r| String::from_utf8(r.value.to_vec()).unwrap())
            .collect();
        assert_eq!(
            text,
            [
                r#"{"word":"a","count":1}"#,
                r#"{"word":"b","count":1}"#,
                r#"{"word":"a","count":2}"#
            ]
        );
        assert_eq!(out.get(2).key, Some(&b"a"[..]));
        assert_eq!(wc.len(), 2);
    }
}
