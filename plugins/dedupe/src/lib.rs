//! `dedupe`: forwards the first record of every identity and drops repeats.
//!
//! The identity is the record's key when it has one, else the JSON `field`
//! named in the config, else the whole value. The seen-set lives in the
//! plugin's own memory and is saved in checkpoints through `snapshot` and
//! `restore` (state version 1: a sequence of little-endian `u32` length +
//! bytes).
//!
//! Config (JSON, optional): `{"field": "id"}`.

use std::collections::HashSet;

use serde::Deserialize;
use weir_sdk::{Context, Error, OpenContext, Operator, OperatorInfo, Record, Result};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    field: Option<String>,
}

/// The dedupe operator.
pub struct Dedupe {
    field: Option<String>,
    seen: HashSet<Vec<u8>>,
}

const STATE_VERSION: u32 = 1;

impl Dedupe {
    fn identity(&self, rec: &Record) -> Result<Vec<u8>> {
        if let Some(k) = &rec.key {
            return Ok(k.clone());
        }
        match &self.field {
            None => Ok(rec.value.clone()),
            Some(f) => {
                let v: serde_json::Value = rec.parse_json()?;
                let id = v
                    .get(f)
                    .ok_or_else(|| Error::InvalidInput(format!("record has no field `{f}`")))?;
                Ok(match id {
                    serde_json::Value::String(s) => s.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                })
            }
        }
    }

    /// Number of identities seen.
    pub fn seen(&self) -> usize {
        self.seen.len()
    }
}

impl Operator for Dedupe {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("dedupe", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
            .state_version(STATE_VERSION)
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: Config = ctx.config_as()?;
        Ok(Dedupe {
            field: config.field,
            seen: HashSet::new(),
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for rec in batch {
            if self.seen.insert(self.identity(&rec)?) {
                ctx.emit(0, rec);
            }
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Vec<u8> {
        let mut ids: Vec<&Vec<u8>> = self.seen.iter().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(ids.iter().map(|i| i.len() + 4).sum());
        for id in ids {
            out.extend_from_slice(&(id.len() as u32).to_le_bytes());
            out.extend_from_slice(id);
        }
        out
    }

    fn restore(&mut self, _ctx: &mut Context, state_version: u32, mut bytes: &[u8]) -> Result<()> {
        if state_version != STATE_VERSION {
            return Err(Error::IncompatibleState(format!(
                "dedupe {} reads state version {STATE_VERSION}, the checkpoint has version {state_version}",
                env!("CARGO_PKG_VERSION")
            )));
        }
        let mut seen = HashSet::new();
        while !bytes.is_empty() {
            let truncated = || Error::IncompatibleState("dedupe snapshot is truncated".into());
            let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(truncated)?;
            let len = u32::from_le_bytes(*len) as usize;
            let id = rest.get(..len).ok_or_else(truncated)?;
            seen.insert(id.to_vec());
            bytes = &rest[len..];
        }
        self.seen = seen;
        Ok(())
    }
}

weir_sdk::export!(Dedupe);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn vals(out: Vec<Record>) -> Vec<String> {
        weir_sdk::testing::values(&out)
    }

    #[test]
    fn drops_repeats_by_value_key_or_field() {
        let mut h = Harness::<Dedupe>::open("{}").unwrap();
        assert_eq!(
            vals(
                h.process("in", ["a", "b", "a"].map(Record::new).to_vec())
                    .unwrap()
            ),
            ["a", "b"]
        );
        let out = h
            .process(
                "in",
                vec![
                    Record::new("c").with_key("a"),
                    Record::new("c").with_key("z"),
                ],
            )
            .unwrap();
        assert_eq!(out.len(), 1);
        let mut h = Harness::<Dedupe>::open(r#"{"field":"id"}"#).unwrap();
        let out = h
            .process(
                "in",
                [r#"{"id":1,"v":1}"#, r#"{"id":1,"v":2}"#]
                    .map(Record::new)
                    .to_vec(),
            )
            .unwrap();
        assert_eq!(vals(out), [r#"{"id":1,"v":1}"#]);
    }

    #[test]
    fn seen_set_survives_restart_through_snapshot() {
        let mut h = Harness::<Dedupe>::open("{}").unwrap();
        h.process("in", ["a", "b"].map(Record::new).to_vec())
            .unwrap();
        h.restart().unwrap();
        assert_eq!(h.operator().seen(), 2);
        assert!(h.state().is_empty(), "dedupe keeps no host state");
        assert_eq!(
            vals(
                h.process("in", ["b", "c"].map(Record::new).to_vec())
                    .unwrap()
            ),
            ["c"]
        );
    }

    #[test]
    fn bad_snapshots_are_refused() {
        let mut h = Harness::<Dedupe>::open("{}").unwrap();
        assert!(matches!(
            h.restore(1, &[9, 0, 0, 0, b'x']),
            Err(Error::IncompatibleState(_))
        ));
        assert!(matches!(
            h.restore(2, &[]),
            Err(Error::IncompatibleState(_))
        ));
    }
}
