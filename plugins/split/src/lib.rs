//! `split`: splits text lines into words and emits one record per word,
//! keyed by the word (so a downstream keyed operator gets each word on one
//! instance).
//!
//! A word is a maximal run of alphanumeric characters (Unicode) and
//! apostrophes inside a word (`don't`). Config (JSON, optional):
//! `{"lowercase": true}` (default true), `{"min_len": 1}`.

use serde::Deserialize;
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "yes")]
    lowercase: bool,
    #[serde(default = "one")]
    min_len: usize,
}

fn yes() -> bool {
    true
}

fn one() -> usize {
    1
}

/// The split operator.
pub struct Split {
    lowercase: bool,
    min_len: usize,
}

/// The words of `line`.
pub fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
}

impl Operator for Split {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("split", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        Ok(Split {
            lowercase: c.lowercase,
            min_len: c.min_len,
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for rec in batch {
            let line = String::from_utf8_lossy(&rec.value);
            for w in words(&line) {
                if w.chars().count() < self.min_len {
                    continue;
                }
                let w = if self.lowercase {
                    w.to_lowercase()
                } else {
                    w.to_string()
                };
                ctx.emit(0, Record::new(w.clone()).with_key(w));
            }
        }
        Ok(())
    }
}

weir_sdk::export!(Split);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::{Harness, values};

    #[test]
    fn splits_lines_into_keyed_words() {
        let mut h = Harness::<Split>::open("{}").unwrap();
        let out = h
            .process("in", vec![Record::new("The cat, the HAT -- don't 42!")])
            .unwrap();
        let words = values(&out);
        assert_eq!(words, ["the", "cat", "the", "hat", "don't", "42"]);
        assert!(
            out.iter()
                .all(|r| r.key.as_deref() == Some(r.value.as_slice()))
        );
    }

    #[test]
    fn min_len_and_case() {
        let mut h = Harness::<Split>::open(r#"{"lowercase":false,"min_len":3}"#).unwrap();
        let out = h
            .process("in", vec![Record::new("a Bb Ccc 'quoted'")])
            .unwrap();
        let words = values(&out);
        assert_eq!(words, ["Ccc", "quoted"]);
    }
}
