//! `reconcile` (对账): coGroup two inputs by key and classify every key.
//!
//! Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a
//! string holding one, as CSV sources produce). The key is the record key,
//! else the JSON field named by `key_field` (default `"key"`). For each key the
//! operator emits exactly one record on output `out` (port 0), keyed by the
//! key:
//!
//! `{"key": "<k>", "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B", "a": <amount or null>, "b": <amount or null>}`
//!
//! as soon as both sides are present (`MATCH` when `|a - b| <= tolerance`).
//! The first record per key and side counts; later records for a side
//! already seen are ignored. When a key seen on one side only is emitted
//! depends on `timeout`:
//!
//! - Without `timeout` (batch reconcile): at `finish`, the end of input.
//!   Records for a key already emitted are ignored, and the state of every
//!   key is kept until the end.
//! - With `timeout` (streaming reconcile, event time): once the watermark
//!   reaches the key's first timestamp + `timeout` (an event-time timer
//!   registered when the key's first record arrives); the record gets that
//!   time as its timestamp, and a `MATCH`/`AMOUNT_MISMATCH` the timestamp of
//!   the record that completed it. Every record then needs a timestamp (set
//!   the source's `timestamp`). A record for a key already emitted goes
//!   unchanged to output `late` (port 1). After its result, a key keeps a
//!   tombstone (its first timestamp) until the watermark reaches first
//!   timestamp + 2 × `timeout`, then nothing: a record for the key arriving
//!   after that starts a new key, so state does not grow with the keys
//!   emitted.
//!
//! Config (JSON, optional): `{"tolerance": 0.0, "key_field": "key", "timeout": "30s"}`
//! (`timeout`: a duration such as `"500ms"`, `"30s"`, `"5m"`, or milliseconds).
//!
//! State (version 1): key `<k>` 0x00 `rc`, value JSON `{"a": <f64>, "b":
//! <f64>, "done": true, "t": <first timestamp>}`, absent sides, `done:
//! false` and `t` (only set under `timeout`) omitted. Timers (under
//! `timeout`): one event-time timer per key, keyed by the key, at first
//! timestamp + `timeout` while the key waits, at first timestamp + 2 ×
//! `timeout` while it is a tombstone.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weir_sdk::window::DurationMs;
use weir_sdk::{
    Context, Error, MapState, OpenContext, Operator, OperatorInfo, Record, Result, TimeDomain,
    Timer,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    tolerance: f64,
    #[serde(default = "default_key_field")]
    key_field: String,
    #[serde(default)]
    timeout: Option<DurationMs>,
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
    /// The timestamp of the key's first record; set only under `timeout`,
    /// where the key's timer is at `t + timeout` until it is done and at
    /// `t + 2 × timeout` after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<i64>,
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
    /// Milliseconds of event time a key waits for its other side; `None`
    /// waits until the end of input.
    timeout: Option<i64>,
    keys: MapState<String, Pending>,
}

const PORT_A: u32 = 0;
const PORT_B: u32 = 1;
const OUT: u32 = 0;
const LATE: u32 = 1;

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

    /// The record's timestamp, which `timeout` needs; `None` without
    /// `timeout`.
    fn timestamp_of(&self, rec: &Record, port: u32, v: &Value) -> Result<Option<i64>> {
        match (self.timeout, rec.timestamp) {
            (Some(_), None) => Err(Error::InvalidInput(format!(
                "record on input `{}` has no timestamp, and `timeout` needs event time (set the source's `timestamp` to the field holding the record's time, or drop `timeout`): {v}",
                if port == PORT_A { "a" } else { "b" }
            ))),
            (Some(_), ts) => Ok(ts),
            (None, _) => Ok(None),
        }
    }

    /// Emits the key's result on `out`, with `timestamp` if given (else the
    /// SDK's current one).
    fn emit(&self, ctx: &mut Context, key: &str, p: &Pending, timestamp: Option<i64>) {
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
        let mut rec = Record::json(&out).with_key(key.as_bytes());
        rec.timestamp = timestamp;
        ctx.emit(OUT, rec);
    }
}

/// A done key under `timeout`: only its first timestamp is kept.
fn tombstone(t: Option<i64>) -> Pending {
    Pending {
        done: true,
        t,
        ..Pending::default()
    }
}

impl Operator for Reconcile {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("reconcile", env!("CARGO_PKG_VERSION"))
            .input("a")
            .input("b")
            .output("out")
            .output("late")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: Config = ctx.config_as()?;
        if config.tolerance.is_nan() || config.tolerance < 0.0 {
            return Err(Error::InvalidConfig(format!(
                "`tolerance` must be >= 0, got {}",
                config.tolerance
            )));
        }
        if config.timeout == Some(DurationMs(0)) {
            return Err(Error::InvalidConfig(
                "`timeout` must be longer than 0ms (leave it out to wait for the end of input)"
                    .into(),
            ));
        }
        Ok(Reconcile {
            tolerance: config.tolerance,
            key_field: config.key_field,
            timeout: config.timeout.map(|d| d.0),
            keys: MapState::new("rc"),
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        if port != PORT_A && port != PORT_B {
            return Err(Error::Other(format!(
                "reconcile has inputs 0 (a) and 1 (b), got port {port}"
            )));
        }
        // Every record is checked before any is used: a bad batch changes
        // nothing.
        let mut parsed = Vec::with_capacity(batch.len());
        for rec in &batch {
            let v: Value = rec.parse_json()?;
            let ts = self.timestamp_of(rec, port, &v)?;
            parsed.push((self.key_of(rec, &v)?, amount_of(&v)?, ts));
        }
        // One state read and one write per batch.
        let mut keys: Vec<String> = parsed.iter().map(|(k, _, _)| k.clone()).collect();
        keys.sort_unstable();
        keys.dedup();
        let stored = self.keys.get_many(ctx, &keys)?;
        let mut pending: HashMap<String, (Pending, bool)> = keys
            .into_iter()
            .zip(stored)
            .map(|(k, p)| (k, (p.unwrap_or_default(), false)))
            .collect();
        for ((key, amount, ts), rec) in parsed.into_iter().zip(batch) {
            let (p, changed) = pending.get_mut(&key).expect("every key was looked up");
            if p.done {
                if self.timeout.is_some() {
                    ctx.emit(LATE, rec);
                }
                continue;
            }
            if let (Some(timeout), Some(ts), None) = (self.timeout, ts, p.t) {
                p.t = Some(ts);
                *changed = true;
                ctx.register_event_timer(key.as_bytes(), ts.saturating_add(timeout));
            }
            let side = if port == PORT_A { &mut p.a } else { &mut p.b };
            if side.is_some() {
                continue;
            }
            *side = Some(amount);
            *changed = true;
            if p.a.is_some() && p.b.is_some() {
                self.emit(ctx, &key, p, ts);
                p.done = true;
                if let (Some(timeout), Some(t)) = (self.timeout, p.t) {
                    let k = key.as_bytes();
                    ctx.delete_timer(k, TimeDomain::EventTime, t.saturating_add(timeout));
                    ctx.register_event_timer(k, t.saturating_add(timeout.saturating_mul(2)));
                    *p = tombstone(p.t);
                }
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

    /// Only `timeout` registers timers: at first timestamp + `timeout` a
    /// waiting key is emitted and becomes a tombstone, at first timestamp +
    /// 2 × `timeout` a tombstone is dropped.
    fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
        let (Some(timeout), Some(key)) = (self.timeout, timer.key_str()) else {
            return Ok(());
        };
        let Some(p) = self.keys.get(ctx, key)? else {
            return Ok(());
        };
        if p.done {
            self.keys.remove(ctx, key);
        } else {
            // Without a timestamp of its own, the record gets the timer's.
            self.emit(ctx, key, &p, None);
            self.keys.put(ctx, &key.to_string(), &tombstone(p.t));
            // The timer was at first timestamp + timeout.
            ctx.register_event_timer(timer.key, timer.time.saturating_add(timeout));
        }
        Ok(())
    }

    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        // Under `timeout` the end of input fired every key's timer before
        // this, so only keys of a run without `timeout` are left.
        for (key, p) in self.keys.entries(ctx)? {
            if !p.done {
                self.emit(ctx, &key, &p, None);
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

    /// A record of `key` at event time `ts`.
    fn at(key: &str, amount: &str, ts: i64) -> Record {
        rec(key, amount).with_timestamp(ts)
    }

    fn timers(h: &Harness<Reconcile>) -> Vec<(i64, String)> {
        h.pending_timers(TimeDomain::EventTime)
            .into_iter()
            .map(|(t, k)| (t, String::from_utf8(k).unwrap()))
            .collect()
    }

    const TIMEOUT_10S: &str = r#"{"timeout": "10s"}"#;

    #[test]
    fn timeout_emits_a_one_sided_key_once_the_watermark_passes_its_first_timestamp() {
        let mut h = Harness::<Reconcile>::open(TIMEOUT_10S).unwrap();
        assert!(
            h.process("a", vec![at("m", "1", 1_000), at("x", "2", 2_000)])
                .unwrap()
                .is_empty()
        );
        assert_eq!(timers(&h), [(11_000, "m".into()), (12_000, "x".into())]);
        // A match is emitted at once, with the completing record's timestamp;
        // its timer moves to first timestamp + 2 × timeout.
        let out = h
            .process("b", vec![at("m", "1", 1_500), at("y", "1", 1_700)])
            .unwrap();
        assert_eq!(
            out,
            [
                Record::new(r#"{"key":"m","status":"MATCH","a":1.0,"b":1.0}"#)
                    .with_key("m")
                    .with_timestamp(1_500)
            ]
        );
        assert_eq!(
            timers(&h),
            [
                (11_700, "y".into()),
                (12_000, "x".into()),
                (21_000, "m".into())
            ]
        );
        let out = parse(&h.advance_watermark(11_999).unwrap());
        assert_eq!(
            out,
            [serde_json::json!({"key":"y","status":"ONLY_B","a":null,"b":1.0})]
        );
        let out = h.advance_watermark(12_000).unwrap();
        assert_eq!(
            out,
            [
                Record::new(r#"{"key":"x","status":"ONLY_A","a":2.0,"b":null}"#)
                    .with_key("x")
                    .with_timestamp(12_000)
            ]
        );
        assert_eq!(
            timers(&h),
            [
                (21_000, "m".into()),
                (21_700, "y".into()),
                (22_000, "x".into())
            ]
        );
        // Emitted keys are tombstones: only the first timestamp is kept.
        h.checkpoint(1).unwrap();
        assert_eq!(h.state()[&b"x\0rc".to_vec()], br#"{"done":true,"t":2000}"#);
        assert_eq!(h.state()[&b"m\0rc".to_vec()], br#"{"done":true,"t":1000}"#);
        // The end of input emits nothing more and leaves no state.
        assert!(h.finish().unwrap().is_empty());
        assert!(h.state().is_empty(), "{:?}", h.state());
        assert!(timers(&h).is_empty());
    }

    #[test]
    fn timeout_routes_records_of_emitted_keys_unchanged_to_late() {
        let mut h = Harness::<Reconcile>::open(TIMEOUT_10S).unwrap();
        h.process("a", vec![at("m", "1", 0), at("x", "2", 0)])
            .unwrap();
        h.process("b", vec![at("m", "1", 5)]).unwrap();
        assert_eq!(h.advance_watermark(10_000).unwrap().len(), 1, "x is ONLY_A");
        let late_b = at("x", "2", 9_000);
        let late_a = Record::new(r#"{"key":"m","amount":7}"#).with_timestamp(3);
        let out = h.process_ports("b", vec![late_b.clone()]).unwrap();
        assert_eq!(out, [(LATE, late_b)]);
        let out = h.process_ports("a", vec![late_a.clone()]).unwrap();
        assert_eq!(
            out,
            [(LATE, late_a)],
            "unchanged: still without a record key"
        );
        // A repeat of a side of a waiting key is not late: it is ignored.
        h.process("a", vec![at("w", "1", 20_000)]).unwrap();
        assert!(
            h.process_ports("a", vec![at("w", "9", 20_001)])
                .unwrap()
                .is_empty()
        );
        let out = parse(&h.finish().unwrap());
        assert_eq!(
            out,
            [serde_json::json!({"key":"w","status":"ONLY_A","a":1.0,"b":null})]
        );
    }

    #[test]
    fn timeout_drops_a_tombstone_at_twice_the_timeout_and_the_key_starts_again() {
        let mut h = Harness::<Reconcile>::open(TIMEOUT_10S).unwrap();
        h.process("b", vec![at("k", "4", 1_000)]).unwrap();
        let out = parse(&h.advance_watermark(11_000).unwrap());
        assert_eq!(
            out,
            [serde_json::json!({"key":"k","status":"ONLY_B","a":null,"b":4.0})]
        );
        // Still a tombstone just before first timestamp + 2 × timeout.
        h.advance_watermark(20_999).unwrap();
        let out = h.process_ports("a", vec![at("k", "4", 20_000)]).unwrap();
        assert_eq!(out[0].0, LATE);
        assert!(h.advance_watermark(21_000).unwrap().is_empty());
        h.checkpoint(1).unwrap();
        assert!(h.state().is_empty(), "{:?}", h.state());
        assert!(timers(&h).is_empty());
        // After that, a record of the key is a new key with a timer of its own.
        assert!(
            h.process_ports("a", vec![at("k", "4", 30_000)])
                .unwrap()
                .is_empty()
        );
        assert_eq!(timers(&h), [(40_000, "k".into())]);
        let out = parse(&h.advance_watermark(40_000).unwrap());
        assert_eq!(
            out,
            [serde_json::json!({"key":"k","status":"ONLY_A","a":4.0,"b":null})]
        );
    }

    #[test]
    fn timeout_state_and_timers_survive_a_restart() {
        let mut h = Harness::<Reconcile>::open(TIMEOUT_10S).unwrap();
        h.process("a", vec![at("m", "1", 0), at("x", "2", 100)])
            .unwrap();
        h.restart().unwrap();
        assert_eq!(timers(&h), [(10_000, "m".into()), (10_100, "x".into())]);
        let out = parse(&h.process("b", vec![at("m", "3", 50)]).unwrap());
        assert_eq!(
            out,
            [serde_json::json!({"key":"m","status":"AMOUNT_MISMATCH","a":1.0,"b":3.0})]
        );
        h.restart().unwrap();
        let out = h.advance_watermark(10_100).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].timestamp, Some(10_100));
        assert_eq!(parse(&out)[0]["status"], "ONLY_A");
        h.restart().unwrap();
        assert_eq!(timers(&h), [(20_000, "m".into()), (20_100, "x".into())]);
        assert_eq!(
            h.process_ports("b", vec![at("x", "2", 0)]).unwrap()[0].0,
            LATE
        );
    }

    #[test]
    fn timeout_refuses_records_without_a_timestamp_and_bad_durations() {
        let mut h = Harness::<Reconcile>::open(r#"{"timeout": 250}"#).unwrap();
        let err = h.process("b", vec![rec("k", "1")]).unwrap_err().to_string();
        assert!(
            err.contains("input `b` has no timestamp")
                && err.contains("set the source's `timestamp`"),
            "{err}"
        );
        // The bad batch changed nothing.
        assert!(timers(&h).is_empty());
        for (config, needle) in [
            (r#"{"timeout": "0s"}"#, "longer than 0ms"),
            (r#"{"timeout": "soon"}"#, "not a duration"),
            (r#"{"timeout": -5}"#, "negative"),
        ] {
            let err = Harness::<Reconcile>::open(config)
                .err()
                .expect(config)
                .to_string();
            assert!(err.contains(needle), "{config}: {err}");
        }
    }

    #[test]
    fn without_timeout_no_timer_no_late_record_and_the_old_state_layout() {
        let mut h = Harness::<Reconcile>::open("{}").unwrap();
        h.process("a", vec![at("m", "1", 0), at("x", "2", 0)])
            .unwrap();
        // The host gives the match the batch's latest timestamp, as before
        // `timeout` existed.
        let out = h
            .process_ports("b", vec![at("m", "1", 5), at("q", "1", 9)])
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, out[0].1.timestamp), (OUT, Some(9)));
        assert!(timers(&h).is_empty());
        assert!(h.advance_watermark(1_000_000).unwrap().is_empty());
        // A record of a matched key is ignored, not late.
        assert!(
            h.process_ports("a", vec![at("m", "1", 9)])
                .unwrap()
                .is_empty()
        );
        h.checkpoint(1).unwrap();
        assert_eq!(
            h.state()[&b"m\0rc".to_vec()],
            br#"{"a":1.0,"b":1.0,"done":true}"#
        );
        assert_eq!(h.state()[&b"x\0rc".to_vec()], br#"{"a":2.0}"#);
        let out = parse(&h.finish().unwrap());
        assert_eq!(
            out,
            [
                serde_json::json!({"key":"q","status":"ONLY_B","a":null,"b":1.0}),
                serde_json::json!({"key":"x","status":"ONLY_A","a":2.0,"b":null}),
            ]
        );
    }
}
