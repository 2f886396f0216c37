//! `word-count`: counts words in host-owned keyed state.
//!
//! Each input record is one word: its key when it has one, else its value
//! with surrounding whitespace trimmed. For every record the operator
//! increments the word's count and emits `{"word": "<w>", "count": <n>}` keyed
//! by the word, one record per input record. Empty words are skipped.
//!
//! Config (JSON, optional): `{"lowercase": true}` counts words case-insensitively.

use std::borrow::Cow;

use serde::Deserialize;
use weir_sdk::{
    Batch, BatchBuf, Context, MapState, OpenContext, Operator, OperatorInfo, Record, RecordRef,
    Result,
};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    lowercase: bool,
}

/// The word-count operator.
pub struct WordCount {
    lowercase: bool,
    /// Count per word, cached in the guest by the SDK and written to host
    /// state at each checkpoint.
    counts: MapState<String, u64>,
}

/// The word of `rec`: its key when it has a UTF-8 one, else its value, with
/// surrounding whitespace trimmed.
fn word_of<'a>(rec: &RecordRef<'a>) -> Result<&'a str> {
    let raw = match rec.key_str() {
        Some(k) => k,
        None => rec.value_str()?,
    };
    // Fast path: nothing to trim when the first and last bytes are visible
    // ASCII characters, which are never whitespace.
    let visible = |b: &u8| b.is_ascii_graphic();
    Ok(match (raw.as_bytes().first(), raw.as_bytes().last()) {
        (Some(first), Some(last)) if visible(first) && visible(last) => raw,
        _ => raw.trim(),
    })
}

/// `word` lowercased; allocates only when that changes it.
fn lowercase(word: &str) -> Cow<'_, str> {
    if !word.is_ascii() {
        Cow::Owned(word.to_lowercase())
    } else if word.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(word.to_ascii_lowercase())
    } else {
        Cow::Borrowed(word)
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

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        // Every word first: a batch with a bad record counts and emits nothing.
        let mut words: Vec<Cow<'_, str>> = Vec::with_capacity(batch.len());
        for rec in batch.iter() {
            let word = word_of(&rec)?;
            words.push(if self.lowercase {
                lowercase(word)
            } else {
                Cow::Borrowed(word)
            });
        }
        let words = || words.iter().map(|w| w.as_ref()).filter(|w| !w.is_empty());
        // The counts the cache lacks, in one host call: with more distinct
        // words than the cache holds, misses would otherwise cost a call each.
        self.counts.prefetch(ctx, words())?;
        for word in words() {
            let count = self.counts.update(ctx, word, |c| c.unwrap_or(0) + 1)?;
            // A row: the JSON text is written by the host, on the thread
            // of whoever reads the record.
            ctx.emit_row(0, Some(word.as_bytes()), |row| {
                row.str("word", word).u64("count", count);
            });
        }
        Ok(())
    }
}

weir_sdk::export!(WordCount);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::Error;
    use weir_sdk::testing::{Harness, values};

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
        h.checkpoint(1).unwrap();
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

    /// The JSON emitted per input record, as `serde_json` writes it.
    #[derive(serde::Serialize)]
    struct Count<'a> {
        word: &'a str,
        count: u64,
    }

    #[test]
    fn output_is_what_serde_json_writes() {
        let words = [
            "q\"uote",
            "back\\slash",
            "tab\tand\u{1}ctl\u{7f}",
            "日本語",
            "ÉCOLE",
            "Ὀδυσσεύς",
        ];
        for lowercase in [false, true] {
            let mut h =
                Harness::<WordCount>::open(&format!(r#"{{"lowercase":{lowercase}}}"#)).unwrap();
            let input: Vec<Record> = words.iter().map(|w| Record::new(*w)).collect();
            let out = h.process("in", input).unwrap();
            for (w, rec) in words.iter().zip(&out) {
                let word = if lowercase {
                    w.to_lowercase()
                } else {
                    w.to_string()
                };
                let expected = serde_json::to_vec(&Count {
                    word: &word,
                    count: 1,
                })
                .unwrap();
                assert_eq!(rec.value, expected, "{w:?}");
                assert_eq!(rec.key.as_deref(), Some(word.as_bytes()));
            }
        }
    }

    #[test]
    fn a_key_that_is_not_utf8_falls_back_to_the_value() {
        let mut h = Harness::<WordCount>::open("{}").unwrap();
        let out = h
            .process("in", vec![Record::new(" v ").with_key(vec![0xff])])
            .unwrap();
        assert_eq!(values(&out), [r#"{"word":"v","count":1}"#]);
        let bad = vec![Record::new("v"), Record::new(vec![0xff])];
        assert!(matches!(h.process("in", bad), Err(Error::InvalidInput(_))));
        let out = h.process("in", vec![Record::new("v")]).unwrap();
        assert_eq!(
            values(&out),
            [r#"{"word":"v","count":2}"#],
            "the bad batch counted nothing"
        );
    }

    #[test]
    fn unicode_whitespace_is_trimmed() {
        let mut h = Harness::<WordCount>::open("{}").unwrap();
        let input = ["\u{a0}v\u{2003}", "\u{b}v", "v\u{85}", "\u{1}v"];
        let out = h.process("in", input.map(Record::new).to_vec()).unwrap();
        assert_eq!(out[2].value_str().unwrap(), r#"{"word":"v","count":3}"#);
        assert_eq!(
            out[3].key_str(),
            Some("\u{1}v"),
            "a control character is not whitespace"
        );
    }

    #[test]
    fn counts_reach_host_state_at_checkpoints_not_per_batch() {
        let mut h = Harness::<WordCount>::open("{}").unwrap();
        for _ in 0..3 {
            h.process("in", ["a", "b", "a"].map(Record::new).to_vec())
                .unwrap();
        }
        let calls = h.host_calls().clone();
        // The first batch reads its two misses in one call; later ones hit.
        assert_eq!(
            (calls.get, calls.get_many, calls.flat_get_many),
            (0, 0, 1),
            "{calls:?}"
        );
        assert_eq!(
            (calls.put, calls.put_many, calls.flat_put_many),
            (0, 0, 0),
            "{calls:?}"
        );
        assert!(h.state().is_empty());
        h.checkpoint(1).unwrap();
        assert_eq!(h.host_calls().flat_put_many, 1);
        assert_eq!(h.host_calls().put_many, 0);
        assert_eq!(h.state()[&b"a\0count".to_vec()], b"6");
        assert_eq!(h.state()[&b"b\0count".to_vec()], b"3");
    }

    #[test]
    fn unknown_config_is_rejected() {
        assert!(Harness::<WordCount>::open(r#"{"lowercas":true}"#).is_err());
    }
}
