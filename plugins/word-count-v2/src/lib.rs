//! `word-count` 2.0: the hot-swap successor of `word-count` 0.1.
//!
//! Changes from 0.1, on purpose, to show a migration:
//! - Output format: `{"w": "<word>", "n": <count>, "v": 2}`.
//! - State encoding (state version 2): the count of a word lives under the
//!   key `<word>` 0x00 `n` as 8 little-endian bytes, instead of `<word>` 0x00
//!   `count` holding JSON text (state version 1).
//!
//! Restoring a version-1 checkpoint migrates every entry in `restore`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use weir_sdk::{
    Batch, BatchBuf, Context, Error, LogLevel, OpenContext, Operator, OperatorInfo, Record, Result,
};

const STATE_VERSION: u32 = 2;
const V1_SUFFIX: &[u8] = b"\0count";
const V2_SUFFIX: &[u8] = b"\0n";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    lowercase: bool,
}

/// The word-count 2.0 operator.
pub struct WordCountV2 {
    lowercase: bool,
}

fn key(word: &str) -> Vec<u8> {
    [word.as_bytes(), V2_SUFFIX].concat()
}

fn decode(bytes: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        Error::IncompatibleState(format!("a v2 count is 8 bytes, found {}", bytes.len()))
    })?;
    Ok(u64::from_le_bytes(arr))
}

impl Operator for WordCountV2 {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("word-count", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
            .state_version(STATE_VERSION)
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: Config = ctx.config_as()?;
        Ok(WordCountV2 {
            lowercase: config.lowercase,
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        let mut words = Vec::with_capacity(batch.len());
        for rec in batch {
            let raw = match rec.key_str() {
                Some(k) => k,
                None => rec.value_str()?,
            };
            let w = raw.trim();
            if !w.is_empty() {
                words.push(if self.lowercase {
                    Cow::Owned(w.to_lowercase())
                } else {
                    Cow::Borrowed(w)
                });
            }
        }
        // One state read and one write per batch, not per record.
        let mut distinct: Vec<&str> = words.iter().map(|w| w.as_ref()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let keys: Vec<Vec<u8>> = distinct.iter().map(|w| key(w)).collect();
        let mut counts: HashMap<&str, u64> = HashMap::with_capacity(distinct.len());
        for (w, v) in distinct.iter().zip(ctx.get_many(&keys)) {
            counts.insert(w, v.map(|b| decode(&b)).transpose()?.unwrap_or(0));
        }
        for w in &words {
            let n = counts.get_mut(w.as_ref()).expect("looked up");
            *n += 1;
            ctx.emit_with(0, Some(w.as_bytes()), |out| {
                out.push_str(r#"{"w":"#);
                out.push_json_str(w);
                out.push_str(r#","n":"#);
                out.push_decimal(*n);
                out.push_str(r#","v":2}"#);
            });
        }
        ctx.put_many(
            counts
                .into_iter()
                .map(|(w, n)| (key(w), n.to_le_bytes().to_vec()))
                .collect(),
        );
        Ok(())
    }

    fn restore(&mut self, ctx: &mut Context, state_version: u32, bytes: &[u8]) -> Result<()> {
        if !bytes.is_empty() {
            return Err(Error::IncompatibleState(
                "word-count keeps no snapshot bytes".into(),
            ));
        }
        match state_version {
            STATE_VERSION => Ok(()),
            1 => {
                let mut migrated = 0;
                let mut puts = Vec::new();
                for (k, v) in ctx.scan_all(b"") {
                    let Some(word) = k.strip_suffix(V1_SUFFIX) else {
                        continue;
                    };
                    let n: u64 = serde_json::from_slice(&v).map_err(|e| {
                        Error::IncompatibleState(format!("a v1 count is a JSON number: {e}"))
                    })?;
                    ctx.delete(&k);
                    puts.push(([word, V2_SUFFIX].concat(), n.to_le_bytes().to_vec()));
                    migrated += 1;
                }
                ctx.put_many(puts);
                ctx.log(
                    LogLevel::Info,
                    &format!("migrated {migrated} counts from state version 1 to 2"),
                );
                Ok(())
            }
            other => Err(Error::IncompatibleState(format!(
                "word-count {} reads state versions 1 and 2, not {other}",
                env!("CARGO_PKG_VERSION")
            ))),
        }
    }
}

weir_sdk::export!(WordCountV2);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::{Harness, values};

    #[test]
    fn counts_in_the_v2_format() {
        let mut h = Harness::<WordCountV2>::open("{}").unwrap();
        let out = h
            .process("in", ["a", "b", "a"].map(Record::new).to_vec())
            .unwrap();
        let text = values(&out);
        assert_eq!(
            text,
            [
                r#"{"w":"a","n":1,"v":2}"#,
                r#"{"w":"b","n":1,"v":2}"#,
                r#"{"w":"a","n":2,"v":2}"#
            ]
        );
        assert_eq!(h.state()[&b"a\0n".to_vec()], 2u64.to_le_bytes());
    }

    #[test]
    fn output_is_what_serde_json_writes() {
        let mut h = Harness::<WordCountV2>::open(r#"{"lowercase":true}"#).unwrap();
        let out = h.process("in", vec![Record::new("Q\"É\u{1}")]).unwrap();
        #[derive(serde::Serialize)]
        struct Out<'a> {
            w: &'a str,
            n: u64,
            v: u8,
        }
        let expected = Out {
            w: "q\"é\u{1}",
            n: 1,
            v: 2,
        };
        assert_eq!(out[0].value, serde_json::to_vec(&expected).unwrap());
        assert_eq!(out[0].key.as_deref(), Some("q\"é\u{1}".as_bytes()));
    }

    #[test]
    fn migrates_version_1_state() {
        let mut h = Harness::<WordCountV2>::open("{}").unwrap();
        h.state_mut().insert(b"a\0count".to_vec(), b"41".to_vec());
        h.state_mut().insert(b"b\0count".to_vec(), b"1".to_vec());
        h.restore(1, &[]).unwrap();
        assert!(!h.state().contains_key(&b"a\0count".to_vec()));
        let out = h.process("in", vec![Record::new("a")]).unwrap();
        assert_eq!(out[0].value_str().unwrap(), r#"{"w":"a","n":42,"v":2}"#);
    }

    #[test]
    fn refuses_unknown_versions_and_bad_v1_values() {
        let mut h = Harness::<WordCountV2>::open("{}").unwrap();
        assert!(h.restore(3, &[]).is_err());
        h.state_mut().insert(b"a\0count".to_vec(), b"x".to_vec());
        assert!(matches!(
            h.restore(1, &[]),
            Err(Error::IncompatibleState(_))
        ));
    }
}
