//! The tight native baselines: the `state` benchmark's jobs written as a
//! careful engineer would write them for speed alone, single-threaded: the
//! input read directly (lines found with `memchr`, CSV fields split at
//! commas, no CSV or serde parser), foldhash maps keyed by the bytes, one
//! lookup per record, and output JSON written by hand (integers with
//! `itoa`, floats with `ryu` as serde_json writes them). Their output is
//! the job's, line for line; [`super::native`]'s programs are the plain
//! ones, which parse with `csv` and serialize with serde.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use anyhow::Context as _;
use foldhash::HashMap;
use foldhash::HashMapExt as _;

/// Bytes read from an input at a time.
const CHUNK: usize = 1 << 20;

/// Calls `each` with every line of `path` (without its line break and a
/// `\r` before it), reading it in large chunks.
fn each_line(path: &Path, mut each: impl FnMut(&[u8]) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut buffer = vec![0u8; CHUNK];
    let mut start = 0; // where unread bytes begin
    let mut end = 0; // where they end
    loop {
        if start > 0 {
            buffer.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        if end == buffer.len() {
            buffer.resize(buffer.len() * 2, 0); // a line longer than the buffer
        }
        let read = file.read(&mut buffer[end..])?;
        if read == 0 {
            if start < end {
                each(trim_cr(&buffer[start..end]))?;
            }
            return Ok(());
        }
        end += read;
        while let Some(at) = memchr::memchr(b'\n', &buffer[start..end]) {
            each(trim_cr(&buffer[start..start + at]))?;
            start += at + 1;
        }
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it.
fn json_string(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..0x20 => {
                out.extend_from_slice(&bytes[from..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                from = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..i]);
        out.extend_from_slice(escape);
        from = i + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out.push(b'"');
}

/// Appends `value` as serde_json writes an `Option<f64>`.
fn json_number(value: Option<f64>, out: &mut Vec<u8>) {
    match value.filter(|v| v.is_finite()) {
        Some(v) => out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

/// Writes `line` and a line break to `w`, and empties it.
fn emit(w: &mut BufWriter<File>, line: &mut Vec<u8>) -> anyhow::Result<()> {
    line.push(b'\n');
    w.write_all(line)?;
    line.clear();
    Ok(())
}

fn finish(w: BufWriter<File>) -> anyhow::Result<()> {
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

/// Word count: each line's word (trimmed; empty lines skipped) counted in
/// a foldhash map, and `{"word":W,"count":N}` written per line. Returns the
/// lines written.
pub fn word_count(input: &Path, output: &Path) -> anyhow::Result<u64> {
    let mut counts: HashMap<Box<[u8]>, u64> = HashMap::with_capacity(1 << 16);
    let mut w = BufWriter::with_capacity(CHUNK, File::create(output)?);
    let (mut line, mut written) = (Vec::with_capacity(256), 0u64);
    let mut digits = itoa::Buffer::new();
    each_line(input, |raw| {
        let word = std::str::from_utf8(raw)
            .context("word is not UTF-8")?
            .trim();
        if word.is_empty() {
            return Ok(());
        }
        let count = match counts.get_mut(word.as_bytes()) {
            Some(count) => count,
            None => counts.entry(word.as_bytes().into()).or_insert(0),
        };
        *count += 1;
        line.extend_from_slice(b"{\"word\":");
        json_string(word, &mut line);
        line.extend_from_slice(b",\"count\":");
        line.extend_from_slice(digits.format(*count).as_bytes());
        line.push(b'}');
        emit(&mut w, &mut line)?;
        written += 1;
        Ok(())
    })?;
    finish(w)?;
    Ok(written)
}

/// What reconcile knows of one order.
#[derive(Debug, Default, Clone, Copy)]
struct Order {
    a: Option<f64>,
    b: Option<f64>,
    done: bool,
}

/// Reconcile (tolerance 0): the orders of `payments` (side a) then of
/// `bank` (side b), CSV files with a header naming `order_no` and `amount`
/// and no quoted fields (a quote is an error), each order's result written
/// once both sides are in, the one-sided ones at the end, as the
/// `reconcile` plugin writes them. Returns the lines written.
pub fn reconcile(payments: &Path, bank: &Path, output: &Path) -> anyhow::Result<u64> {
    let mut orders: HashMap<Box<[u8]>, Order> = HashMap::with_capacity(1 << 16);
    let mut w = BufWriter::with_capacity(CHUNK, File::create(output)?);
    let (mut line, mut written) = (Vec::with_capacity(256), 0u64);
    for (path, side_a) in [(payments, true), (bank, false)] {
        let mut columns: Option<(usize, usize)> = None;
        each_line(path, |row| {
            let Some((key_at, amount_at)) = columns else {
                let names: Vec<&[u8]> = row.split(|&b| b == b',').collect();
                let find = |name: &str| {
                    (names.iter().position(|n| *n == name.as_bytes()))
                        .with_context(|| format!("{} has no column `{name}`", path.display()))
                };
                columns = Some((find("order_no")?, find("amount")?));
                return Ok(());
            };
            if row.is_empty() {
                return Ok(());
            }
            anyhow::ensure!(
                memchr::memchr(b'"', row).is_none(),
                "{}: a quoted field; this program reads plain fields only",
                path.display()
            );
            let (mut key, mut amount) = (None, None);
            for (i, field) in row.split(|&b| b == b',').enumerate() {
                if i == key_at {
                    key = Some(field);
                } else if i == amount_at {
                    amount = Some(field);
                }
            }
            let (Some(key), Some(amount)) = (key, amount) else {
                anyhow::bail!("{}: a row without its key or amount", path.display());
            };
            let amount: f64 = std::str::from_utf8(amount)?
                .trim()
                .parse()
                .with_context(|| format!("an amount of {} is not a number", path.display()))?;
            let order = match orders.get_mut(key) {
                Some(order) => order,
                None => orders.entry(key.into()).or_default(),
            };
            let side = if side_a { &mut order.a } else { &mut order.b };
            if order.done || side.is_some() {
                return Ok(());
            }
            *side = Some(amount);
            if let (Some(_), Some(_)) = (order.a, order.b) {
                order.done = true;
                let order = *order;
                classified(key, &order, &mut line)?;
                emit(&mut w, &mut line)?;
                written += 1;
            }
            Ok(())
        })?;
    }
    for (key, order) in &orders {
        if !order.done {
            classified(key, order, &mut line)?;
            emit(&mut w, &mut line)?;
            written += 1;
        }
    }
    finish(w)?;
    Ok(written)
}

/// Appends the result of `key` with `order`'s amounts to `line`, as
/// `reconcile::classify`'s JSON (tolerance 0).
fn classified(key: &[u8], order: &Order, line: &mut Vec<u8>) -> anyhow::Result<()> {
    let status = match (order.a, order.b) {
        (Some(a), Some(b)) if (a - b).abs() <= 1e-9 => "MATCH",
        (Some(_), Some(_)) => "AMOUNT_MISMATCH",
        (Some(_), None) => "ONLY_A",
        (None, Some(_)) => "ONLY_B",
        (None, None) => anyhow::bail!("an order with neither side"),
    };
    line.extend_from_slice(b"{\"key\":");
    json_string(
        std::str::from_utf8(key).context("a key is not UTF-8")?,
        line,
    );
    line.extend_from_slice(b",\"status\":\"");
    line.extend_from_slice(status.as_bytes());
    line.extend_from_slice(b"\",\"a\":");
    json_number(order.a, line);
    line.extend_from_slice(b",\"b\":");
    json_number(order.b, line);
    line.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tight programs write what the plain ones write (serde's JSON),
    /// line for line (as sets: reconcile's one-sided orders come in map
    /// order), on inputs with escapes, blank lines, CRLF and lines longer
    /// than a read.
    #[test]
    fn tight_programs_write_what_the_plain_ones_write() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let long = "w".repeat(3 * CHUNK);
        let words =
            format!("a\n b \r\n\nq\"uo\\te\n\u{1}ctl\ttab\né\n{long}\na\nlast-without-break");
        std::fs::write(at("words.txt"), words).unwrap();
        let lines = |path: &Path| {
            let mut lines: Vec<String> = std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            lines.sort();
            lines
        };
        let tight = word_count(&at("words.txt"), &at("tight.jsonl")).unwrap();
        let plain =
            crate::native::word_count_program(&at("words.txt"), &at("plain.jsonl")).unwrap();
        assert_eq!(tight, plain);
        assert_eq!(lines(&at("tight.jsonl")), lines(&at("plain.jsonl")));

        crate::data::write_orders(dir.path(), 3000).unwrap();
        let (payments, bank) = (at("payments.csv"), at("bank.csv"));
        let tight = reconcile(&payments, &bank, &at("tight-r.jsonl")).unwrap();
        let plain =
            crate::native::reconcile_program(&payments, &bank, &at("plain-r.jsonl")).unwrap();
        assert_eq!(tight, plain);
        assert_eq!(lines(&at("tight-r.jsonl")), lines(&at("plain-r.jsonl")));
        std::fs::write(at("q.csv"), "order_no,amount\n\"A\",1.0\n").unwrap();
        let e = reconcile(&at("q.csv"), &bank, &at("x")).unwrap_err();
        assert!(e.to_string().contains("quoted"), "{e}");
    }
}
