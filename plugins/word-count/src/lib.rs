//! `word-count`: counts words in host-owned keyed state.
//!
//! Each input record is one word: its key when it has one, else its value
//! with surrounding whitespace trimmed. For every record the operator
//! increments the word's count and emits `{"word": "<w>", "count": <n>}` keyed
//! by the word, one record per input record. Empty words are skipped.
//!
//! Config (JSON, optional): `{"lowercase": true}` counts words case-insensitively.

use std::collections::HashMap;

use serde::Deserialize;
use weir_sdk::{Context, MapState, OpenContext, Operator, OperatorInfo, Record, Result};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    lowercase: bool,
}

/// The word-count operator.
pub struct WordCount {
    lowercase: bool,
    counts: MapState<String, u64>,
}

/// The JSON emitted per input record.
#[derive(serde::Serialize)]
struct Count<'a> {
    word: &'a str,
    count: u64,
}

impl WordCount {
    fn word_of(&self, rec: &Record) -> Result<String> {
        let raw = match rec.key_str() {
            Some(k) => k,
            None => rec.value_str()?,
        };
        let w = raw.trim();
        Ok(if self.lowercase {
            w.to_lowercase()
        } else {
            w.to_string()
        })
    }
}

impl Operator for WordCount {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("word-count", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: Config = ctx.config_as()?;
        Ok(WordCount {
            lowercase: config.lowercase,
            counts: MapState::new("count"),
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        let words = batch
            .iter()
            .map(|r| self.word_of(r))
            .collect::<Result<Vec<_>>>()?;
        // One state read and one write per batch, not per record.
        let mut distinct: Vec<String> = words.iter().filter(|w| !w.is_empty()).cloned().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let stored = self.counts.get_many(ctx, &distinct)?;
        let mut counts: HashMap<&str, u64> = distinct
            .iter()
            .zip(stored)
            .map(|(w, c)| (w.as_str(), c.unwrap_or(0)))
            .collect();
        for word in words.iter().filter(|w| !w.is_empty()) {
            let c = counts
                .get_mut(word.as_str())
                .expect("every word was looked up");
            *c += 1;
            ctx.emit(
                0,
                Record::json(&Count { word, count: *c }).with_key(word.as_bytes()),
            );
        }
        let updated: Vec<(String, u64)> = counts
            .into_iter()
            .map(|(w, c)| (w.to_string(), c))
            .collect();
        self.counts
            .put_many(ctx, updated.iter().map(|(w, c)| (w, c)));
        Ok(())
    }
}

weir_sdk::export!(WordCount);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn values(out: &[Record]) -> Vec<String> {
        out.iter()
            .map(|r| r.value_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn counts_each_word_and_emits_one_record_per_input() {
        let mut h = Harness::<WordCount>::open("{}").unwrap();
        let out = h
            .process("in", ["a", "b", "a"].map(Record::new).to_vec())
            .unwrap();
        assert_eq!(
            values(&out),
            [
                r#"{"word":"a","count":1}"#,
                r#"{"word":"b","count":1}"#,
                r#"{"word":"a","count":2}"#
            ]
        );
        assert_eq!(out[2].key_str(), Some("a"));
        let out = h.process("in", vec![Record::new(" a \n")]).unwrap();
        assert_eq!(values(&out), [r#"{"word":"a","count":3}"#]);
        assert_eq!(h.state().get(&b"a\0count".to_vec()).unwrap(), b"3");
    }

    #[test]
    fn key_wins_over_value_and_lowercase_works() {
        let mut h = Harness::<WordCount>::open(r#"{"lowercase":true}"#).unwrap();
        let out = h
            .process(
                "in",
                vec![Record::new("ignored").with_key("Hi"), Record::new("HI")],
            )
            .unwrap();
        assert_eq!(
            values(&out),
            [r#"{"word":"hi","count":1}"#, r#"{"word":"hi","count":2}"#]
        );
    }

    #[test]
    fn counts_survive_a_restart_because_state_is_host_owned() {
        let mut h = Harness::<WordCount>::open("{}").unwrap();
        h.process("in", vec![Record::new("x"), Record::new("x")])
            .unwrap();
        h.restart().unwrap();
        let out = h
            .process("in", vec![Record::new("x"), Record::new("")])
            .unwrap();
        assert_eq!(values(&out), [r#"{"word":"x","count":3}"#]);
    }

    #[test]
    fn unknown_config_is_rejected() {
        assert!(Harness::<WordCount>::open(r#"{"lowercas":true}"#).is_err());
    }
}
