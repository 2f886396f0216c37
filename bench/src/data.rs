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

/// Words of rank 0..`distinct` drawn with Zipf's law (exponent 1): rank `k`
/// comes up in proportion to 1 / (k + 1), so a few words are most of the
/// input and most words are rare.
#[derive(Debug, Clone)]
pub struct Zipf {
    /// `cdf[k]`: the probability of a rank at or below `k`.
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `distinct` words.
    pub fn new(distinct: u64) -> Self {
        let mut cdf = Vec::with_capacity(distinct as usize);
        let mut total = 0.0;
        for k in 0..distinct {
            total += 1.0 / (k + 1) as f64;
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf }
    }

    /// Word `i` of the input: `w<rank>`, like [`word`].
    pub fn word(&self, i: u64) -> String {
        let u = (mix64(i ^ 0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        let rank = self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1);
        format!("w{rank}")
    }
}

/// The inputs of the reconcile example written by [`write_orders`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Orders {
    /// Rows of `payments.csv` (side a).
    pub payments: u64,
    /// Rows of `bank.csv` (side b).
    pub bank: u64,
}

/// An amount in cents as the CSV files write it: `12.34`, `-0.50`.
fn amount_text(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

/// Writes `payments.csv` and `bank.csv` of the reconcile example to `dir`
/// for `orders` orders, with the distribution of
/// `examples/reconcile/generate.py` (deterministic, from [`mix64`] rather
/// than Python's generator): amounts of 1.00 to 999.99; 80% of orders on
/// both sides with the same amount, 5% with amounts 0.01 to 4.99 apart, 8%
/// in payments only, 7% at the bank only; the bank lists its rows in
/// another (shuffled) order. Both files are synced.
pub fn write_orders(dir: &Path, orders: u64) -> std::io::Result<Orders> {
    let mut payments =
        BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join("payments.csv"))?);
    payments.write_all(b"order_no,amount,channel\n")?;
    // (shuffle position, order, amount in cents) of every bank row.
    let mut bank: Vec<(u64, u64, i64)> = Vec::with_capacity(orders as usize);
    let mut written = Orders {
        payments: 0,
        bank: 0,
    };
    for i in 0..orders {
        let h = mix64(i ^ 0x6a09_e667_f3bc_c908);
        let cents = 100 + (h % 99_900) as i64;
        let class = (h >> 20) % 10_000;
        let channel = match class {
            0..8_000 => "alipay",
            8_000..8_500 => "wechat",
            8_500..9_300 => "card",
            _ => "",
        };
        if !channel.is_empty() {
            writeln!(payments, "ORD-{i:08},{},{channel}", amount_text(cents))?;
            written.payments += 1;
        }
        let bank_cents = match class {
            0..8_000 | 9_300.. => Some(cents),
            8_000..8_500 => {
                let delta = 1 + ((h >> 40) % 499) as i64;
                Some(if (h >> 60) & 1 == 0 {
                    cents - delta
                } else {
                    cents + delta
                })
            }
            _ => None,
        };
        if let Some(c) = bank_cents {
            bank.push((mix64(i ^ 0xbb67_ae85_84ca_a73b), i, c));
        }
    }
    payments
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    bank.sort_unstable();
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join("bank.csv"))?);
    w.write_all(b"order_no,amount,state\n")?;
    for (_, i, cents) in &bank {
        writeln!(w, "ORD-{i:08},{},settled", amount_text(*cents))?;
    }
    written.bank = bank.len() as u64;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(written)
}
