//! `reconcile` (对账): coGroup two inputs by key and classify every key.
//!
//! Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a
//! string holding one, as CSV sources produce). The key is the record key,
//! else the JSON field named by `key_field` (default `"key"`). For each key the
//! operator emits exactly one record, keyed by the key:
//!
//! `{"key": "<k>", "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B", "a": <amount or null>, "b": <amount or null>}`
//!
//! as soon as both sides are present (`MATCH` when `|a - b| <= tolerance`),
//! and for keys seen on one side only, at `finish`. The first record per key
//! and side counts; later records for a side already seen are ignored.
//!
//! Config (JSON, optional): `{"tolerance": 0.0, "key_field": "key"}`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weir_sdk::{Context, Error, MapState, OpenContext, Operator, OperatorInfo, Record, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    tolerance: f64,
    #[serde(default = "default_key_field")]
    key_field: String,
}

fn default_key_field() -> String {
    "key".into()
}

/// What is known about one key, kept in host state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b: Option<f64>,
    /// The key's result was emitted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    done: bool,
}

/// One output record.
#[derive(Debug, Serialize)]
struct Classified<'a> {
    key: &'a str,
    status: &'static str,
    a: Option<f64>,
    b: Option<f64>,
}

/// The reconcile operator.
pub struct Reconcile {
    tolerance: f64,
    key_field: String,
    keys: MapState<String, Pending>,
}

const PORT_A: u32 = 0;
const PORT_B: u32 = 1;

fn amount_of(v: &Value) -> Result<f64> {
    let amount = v
        .get("amount")
        .ok_or_else(|| Error::InvalidInput(format!("record has no `amount`: {v}")))?;
    match amount {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| Error::InvalidInput(format!("`amount` is not a number: {amount}")))
}

impl Reconcile {
    fn key_of(&self, rec: &Record, v: &Value) -> Result<String> {
        if let Some(k) = rec.key_str() {
            return Ok(k.to_string());
        }
        match v.get(&self.key_field) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) if !other.is_null() => Ok(other.to_string()),
            _ => Err(Error::InvalidInput(format!(
                "record has no key and no `{}` field (set the source's `key` or the operator's `key_field`): {v}",
                self.key_field
            ))),
        }
    }

    fn emit(&self, ctx: &mut Context, key: &str, p: &Pending) {
        let status = match (p.a, p.b) {
            (Some(a), Some(b)) if (a - b).abs() <= self.tolerance + 1e-9 => "MATCH",
            (Some(_), Some(_)) => "AMOUNT_MISMATCH",
            (Some(_), None) => "ONLY_A",
            (None, Some(_)) => "ONLY_B",
            (None, None) => return,
        };
        let out = Classified {
            key,
            status,
            a: p.a,
            b: p.b,
        };
        ctx.emit(0, Record::json(&out).with_key(key.as_bytes()));
    }
}

impl Operator for Reconcile {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("reconcile", env!("CARGO_PKG_VERSION"))
            .input("a")
            .input("b")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: Config = ctx.config_as()?;
        if config.tolerance.is_nan() || config.tolerance < 0.0 {
            return Err(Error::InvalidConfig(format!(
                "`tolerance` must be >= 0, got {}",
                config.tolerance
            )));
        }
        Ok(Reconcile {
            tolerance: config.tolerance,
            key_field: config.key_field,
            keys: MapState::new("rc"),
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        if port != PORT_A && port != PORT_B {
            return Err(Error::Other(format!(
                "reconcile has inputs 0 (a) and 1 (b), got port {port}"
            )));
        }
        let mut parsed = Vec::with_capacity(batch.len());
        for rec in &batch {
            let v: Value = rec.parse_json()?;
            parsed.push((self.key_of(rec, &v)?, amount_of(&v)?));
        }
        // One state read and one write per batch.
        let mut keys: Vec<String> = parsed.iter().map(|(k, _)| k.clone()).collect();
        keys.sort_unstable();
        keys.dedup();
        let stored = self.keys.get_many(ctx, &keys)?;
        let mut pending: HashMap<String, (Pending, bool)> = keys
            .into_iter()
            .zip(stored)
            .map(|(k, p)| (k, (p.unwrap_or_default(), false)))
            .collect();
        for (key, amount) in parsed {
            let (p, changed) = pending.get_mut(&key).expect("every key was looked up");
            let side = if port == PORT_A { &mut p.a } else { &mut p.b };
            if p.done || side.is_some() {
                continue;
            }
            *side = Some(amount);
            *changed = true;
            if p.a.is_some() && p.b.is_some() {
                self.emit(ctx, &key, p);
                p.done = true;
            }
        }
        let updates: Vec<(String, Pending)> = pending
            .into_iter()
            .filter(|(_, (_, changed))| *changed)
            .map(|(k, (p, _))| (k, p))
            .collect();
        self.keys.put_many(ctx, updates.iter().map(|(k, p)| (k, p)));
        Ok(())
    }

    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        for (key, p) in self.keys.entries(ctx)? {
            if !p.done {
                self.emit(ctx, &key, &p);
                self.keys.put(ctx, &key, &Pending { done: true, ..p });
            }
        }
        Ok(())
    }
}

weir_sdk::export!(Reconcile);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn rec(key: &str, amount: &str) -> Record {
        Record::new(format!(r#"{{"amount":{amount}}}"#)).with_key(key)
    }

    fn parse(out: &[Record]) -> Vec<Value> {
        out.iter().map(|r| r.parse_json().unwrap()).collect()
    }

    #[test]
    fn classifies_every_key_once() {
        let mut h = Harness::<Reconcile>::open(r#"{"tolerance": 0.01}"#).unwrap();
        let out = h
            .process("a", vec![rec("1", "10"), rec("2", "20"), rec("3", "30")])
            .unwrap();
        assert!(out.is_empty());
        let out = h
            .process(
                "b",
                vec![rec("1", "10.005"), rec("2", "\"21\""), rec("4", "40")],
            )
            .unwrap();
        let out = parse(&out);
        assert_eq!(out[0]["status"], "MATCH");
        assert_eq!(
            out[1],
            serde_json::json!({"key":"2","status":"AMOUNT_MISMATCH","a":20.0,"b":21.0})
        );
        assert_eq!(out.len(), 2);
        // A repeat of a matched key is ignored.
        assert!(h.process("a", vec![rec("1", "99")]).unwrap().is_empty());
        let out = parse(&h.finish().unwrap());
        assert_eq!(
            out,
            [
                serde_json::json!({"key":"3","status":"ONLY_A","a":30.0,"b":null}),
                serde_json::json!({"key":"4","status":"ONLY_B","a":null,"b":40.0}),
            ]
        );
    }

    #[test]
    fn pending_keys_survive_a_restart() {
        let mut h = Harness::<Reconcile>::open("{}").unwrap();
        h.process("a", vec![rec("k", "5")]).unwrap();
        h.restart().unwrap();
        let out = parse(&h.process("b", vec![rec("k", "5")]).unwrap());
        assert_eq!(out[0]["status"], "MATCH");
        assert!(h.finish().unwrap().is_empty());
    }

    #[test]
    fn key_field_and_errors() {
        let mut h = Harness::<Reconcile>::open(r#"{"key_field":"order_no"}"#).unwrap();
        h.process("a", vec![Record::new(r#"{"order_no":"x","amount":"1.5"}"#)])
            .unwrap();
        h.checkpoint(1).unwrap(); // typed state reaches the host at checkpoints
        assert!(h.state().contains_key(&b"x\0rc".to_vec()));
        let err = h
            .process("a", vec![Record::new(r#"{"amount":1}"#)])
            .unwrap_err();
        assert!(err.to_string().contains("order_no"), "{err}");
        let err = h.process("b", vec![rec("y", "\"abc\"")]).unwrap_err();
        assert!(err.to_string().contains("not a number"), "{err}");
        assert!(Harness::<Reconcile>::open(r#"{"tolerance": -1}"#).is_err());
    }
}
