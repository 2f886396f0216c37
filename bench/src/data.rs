//! Deterministic inputs: the same bytes on every run.

use std::io::{BufWriter, Write};
use std::path::Path;

use weir::Record;

/// SplitMix64, a well-mixed function of `x`.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Distinct words in the word-count inputs.
pub const WORDS: u64 = 10_000;

/// Event `i` of the filter input: a JSON object with an `amount` in 0..100,
/// so the filter `amount >= 50` keeps about half.
pub fn event(i: u64) -> String {
    let h = mix64(i);
    format!(
        r#"{{"id":{i},"user":"u{}","amount":{}}}"#,
        (h >> 8) % 1000,
        h % 100
    )
}

/// Word `i` of the word-count input, one of `words` distinct words.
pub fn word(i: u64, words: u64) -> String {
    format!("w{}", mix64(i ^ 0x5bd1_e995) % words)
}

/// The filter's configuration in every benchmark.
pub const FILTER_CONFIG: &str = r#"{"field":"amount","op":"ge","value":50}"#;

/// `n` events as records without key (as a `jsonl` source without `key`
/// reads them).
pub fn event_records(n: u64) -> Vec<Record> {
    (0..n).map(|i| Record::new(event(i).into_bytes())).collect()
}

/// `n` words as records whose key and value are the word (as a `lines`
/// source reads them).
pub fn word_records(n: u64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let w = word(i, WORDS).into_bytes();
            Record::new(w.clone()).with_key(w)
        })
        .collect()
}

/// Writes `n` lines made by `line` to `path`; returns the bytes written.
pub fn write_lines(path: &Path, n: u64, line: impl Fn(u64) -> String) -> std::io::Result<u64> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut bytes = 0;
    for i in 0..n {
        let l = line(i);
        w.write_all(l.as_bytes())?;
        w.write_all(b"\n")?;
        bytes += l.len() as u64 + 1;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(bytes)
}
