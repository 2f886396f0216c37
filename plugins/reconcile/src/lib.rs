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
//! Records are read in place from flat batches: only `amount` and, for a
//! record without a key, the key field are decoded (a key field that is
//! not a string is the key as its JSON text, e.g. `42`); the other fields
//! are skipped, checked only to be well-formed JSON. A flat object (scalar
//! values, strings without escapes) is read in one pass without serde
//! (`quick`), any other JSON with serde, to the same result. A batch with a record
//! that is not JSON, has no `amount`, an `amount` that is no number, or no
//! key fails as a whole, with the record in the error.
//!
//! Config (JSON, optional): `{"tolerance": 0.0, "key_field": "key", "timeout": "30s"}`
//! (`timeout`: a duration such as `"500ms"`, `"30s"`, `"5m"`, or milliseconds).
//!
//! State (version 2): key `<k>` 0x00 `rc`, value a row value (see
//! `MapState::with_row_values`) of the fields `a` and `b` (f64), `done`
//! (true) and `t` (the first timestamp, i64; only set under `timeout`), in
//! that order, absent sides, `done: false` and `t: None` left out; its
//! JSON is `{"a": <f64>, "b": <f64>, "done": true, "t": <first
//! timestamp>}`, which is what version 1 stored, and is still read (a
//! version 1 checkpoint restores). Timers (under
//! `timeout`): one event-time timer per key, keyed by the key, at first
//! timestamp + `timeout` while the key waits, at first timestamp + 2 ×
//! `timeout` while it is a tombstone.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};
use weir_sdk::row::{self, Row};
use weir_sdk::window::DurationMs;
use weir_sdk::{
    Batch, BatchBuf, Change, Context, Encoding, Error, MapState, OpenContext, Operator,
    OperatorInfo, Record, RecordRef, Result, RowWriter, TimeDomain, Timer,
};

mod quick;

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

/// One output record: its JSON is what output `out` carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classified<'a> {
    /// The key.
    pub key: &'a str,
    /// `MATCH`, `AMOUNT_MISMATCH`, `ONLY_A` or `ONLY_B`.
    pub status: &'static str,
    /// The amount of side `a`, if seen.
    pub a: Option<f64>,
    /// The amount of side `b`, if seen.
    pub b: Option<f64>,
}

impl Classified<'_> {
    /// Appends its fields to a row, which readers get as exactly its JSON.
    ///
    /// ```
    /// let c = reconcile::classify("k", Some(1.0), None, 0.0).unwrap();
    /// let mut row = Vec::new();
    /// c.write_row(&mut weir_sdk::RowWriter::new(&mut row));
    /// let json = weir_sdk::row::Row::new(&row).unwrap().to_json();
    /// assert_eq!(json, serde_json::to_vec(&c).unwrap());
    /// ```
    pub fn write_row(&self, row: &mut RowWriter<'_>) {
        row.str("key", self.key).str("status", self.status);
        for (name, amount) in [("a", self.a), ("b", self.b)] {
            match amount {
                Some(x) => row.f64(name, x),
                None => row.null(name),
            };
        }
    }
}

/// The result of `key` with amounts `a` and `b` (those seen), `None` when
/// neither was: `MATCH` when both differ by at most `tolerance`.
///
/// ```
/// let c = reconcile::classify("k", Some(1.0), Some(1.5), 0.0).unwrap();
/// assert_eq!(c.status, "AMOUNT_MISMATCH");
/// assert_eq!(reconcile::classify("k", None, Some(2.0), 0.0).unwrap().status, "ONLY_B");
/// assert!(reconcile::classify("k", None, None, 0.0).is_none());
/// ```
pub fn classify(
    key: &str,
    a: Option<f64>,
    b: Option<f64>,
    tolerance: f64,
) -> Option<Classified<'_>> {
    let status = match (a, b) {
        (Some(a), Some(b)) if (a - b).abs() <= tolerance + 1e-9 => "MATCH",
        (Some(_), Some(_)) => "AMOUNT_MISMATCH",
        (Some(_), None) => "ONLY_A",
        (None, Some(_)) => "ONLY_B",
        (None, None) => return None,
    };
    Some(Classified { key, status, a, b })
}

/// The reconcile operator.
pub struct Reconcile {
    tolerance: f64,
    key_field: String,
    /// Milliseconds of event time a key waits for its other side; `None`
    /// waits until the end of input.
    timeout: Option<i64>,
    keys: MapState<String, Pending>,
    /// The row of the record being emitted (reused, so emitting allocates
    /// nothing per record).
    line: Vec<u8>,
}

const PORT_A: u32 = 0;
const PORT_B: u32 = 1;
const OUT: u32 = 0;
const LATE: u32 = 1;

/// A JSON value of one of the fields reconcile reads, without a document
/// tree for the scalars that inputs hold: strings borrow from the record
/// unless they contain escapes.
#[derive(Debug, Clone, PartialEq)]
enum Field<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    /// An array or object (only its text form is ever needed).
    Tree(Value),
}

impl Field<'_> {
    /// The amount it holds: a number, or a string holding one (surrounding
    /// whitespace ignored).
    fn amount(&self) -> Option<f64> {
        match self {
            Field::Number(n) => n.as_f64(),
            Field::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The key it holds: a string as is, any other non-null value as its
    /// JSON text.
    fn key(self) -> Option<Cow<'static, str>> {
        Some(Cow::Owned(match self {
            Field::Null => return None,
            Field::Str(s) => s.into_owned(),
            Field::Bool(b) => b.to_string(),
            Field::Number(n) => n.to_string(),
            Field::Tree(v) => v.to_string(),
        }))
    }
}

impl<'a> Field<'a> {
    /// The field of a row, as the same field of its JSON text reads.
    fn of_row(value: row::Value<'a>) -> Field<'a> {
        match value {
            row::Value::Null => Field::Null,
            row::Value::Bool(b) => Field::Bool(b),
            row::Value::Int(n) => Field::Number(n.into()),
            row::Value::Uint(n) => Field::Number(n.into()),
            row::Value::Float(x) => Number::from_f64(x).map_or(Field::Null, Field::Number),
            row::Value::Str(s) => Field::Str(Cow::Borrowed(s)),
            // A JSON number's text reads as one.
            row::Value::Decimal(text) => text.parse().map_or(Field::Null, Field::Number),
        }
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Null)
    }
    fn visit_bool<E>(self, b: bool) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Number(n.into()))
    }
    fn visit_i64<E>(self, n: i64) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> std::result::Result<Field<'de>, E> {
        // JSON text has no NaN or infinity, so the number is always finite.
        Ok(Number::from_f64(n).map_or(Field::Null, Field::Number))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> std::result::Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Field<'de>, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Field::Tree)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Field<'de>, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Field::Tree)
    }
}

/// The two fields of an input record that reconcile reads: `amount` and the
/// key field. A record that is not a JSON object has neither.
#[derive(Debug, Default, PartialEq)]
struct Fields<'a> {
    amount: Option<Field<'a>>,
    key: Option<Field<'a>>,
}

impl<'a> Fields<'a> {
    /// The fields of a row, in one pass (the last of a name given twice).
    fn of_row(row: &Row<'a>, key_field: Option<&str>) -> Fields<'a> {
        let mut fields = Fields::default();
        for (name, value) in row.fields() {
            if name == "amount" {
                fields.amount = Some(Field::of_row(value));
            }
            if key_field == Some(name) {
                fields.key = Some(Field::of_row(value));
            }
        }
        fields
    }
}

/// Reads [`Fields`] from a JSON value, skipping every other field with
/// [`IgnoredAny`] (so the rest of the record is only checked to be JSON).
/// Of a field given twice, the last counts, as in a `serde_json::Value`.
struct FieldsSeed<'k> {
    /// The key field's name; `None` when the record has a key of its own.
    key_field: Option<&'k str>,
}

/// Which of the fields reconcile reads a map key names.
enum Wanted {
    Amount,
    Key,
    Both,
    Neither,
}

/// Reads a map key and tells which field it names, without keeping it.
struct NameSeed<'k>(Option<&'k str>);

impl<'de> DeserializeSeed<'de> for NameSeed<'_> {
    type Value = Wanted;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Wanted, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameSeed<'_> {
    type Value = Wanted;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, name: &str) -> std::result::Result<Wanted, E> {
        Ok(match (name == "amount", self.0 == Some(name)) {
            (true, true) => Wanted::Both,
            (true, false) => Wanted::Amount,
            (false, true) => Wanted::Key,
            (false, false) => Wanted::Neither,
        })
    }
}

impl<'de> DeserializeSeed<'de> for FieldsSeed<'_> {
    type Value = Fields<'de>;
    fn deserialize<D: de::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Fields<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed<'_> {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Fields<'de>, A::Error> {
        let mut fields = Fields::default();
        while let Some(wanted) = map.next_key_seed(NameSeed(self.key_field))? {
            match wanted {
                Wanted::Amount => fields.amount = Some(map.next_value()?),
                Wanted::Key => fields.key = Some(map.next_value()?),
                Wanted::Both => {
                    let v: Field<'de> = map.next_value()?;
                    fields.amount = Some(v.clone());
                    fields.key = Some(v);
                }
                Wanted::Neither => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Fields<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Fields::default())
    }
    fn visit_unit<E>(self) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
}

/// The whole record as a JSON document, for the text of an error message
/// (only bad records pay for it).
fn document(rec: &RecordRef<'_>) -> Value {
    match rec.row() {
        Some(row) => serde_json::from_slice(&row.to_json()).unwrap_or(Value::Null),
        None => rec.parse_json().unwrap_or(Value::Null),
    }
}

/// One input record, read: its key, amount and (under `timeout`) timestamp.
struct Parsed<'a> {
    key: Cow<'a, str>,
    amount: f64,
    timestamp: Option<i64>,
}

impl Reconcile {
    /// Reads `rec`'s key, amount and timestamp, or the error that makes its
    /// batch fail.
    fn parse<'a>(&self, rec: &RecordRef<'a>, port: u32) -> Result<Parsed<'a>> {
        let own_key = rec.key_str();
        let key_field = match own_key {
            Some(_) => None,
            None => Some(self.key_field.as_str()),
        };
        let fields = match rec.row() {
            Some(row) => Fields::of_row(&row, key_field),
            None => match quick::read(rec.value, key_field) {
                Some(fields) => fields,
                None => rec.parse_json_seed(FieldsSeed { key_field })?,
            },
        };
        let timestamp = self.timestamp_of(rec, port)?;
        let key = match (own_key, fields.key) {
            (Some(k), _) => Cow::Borrowed(k),
            (None, Some(Field::Str(s))) => s,
            (None, field) => field.and_then(Field::key).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "record has no key and no `{}` field (set the source's `key` or the operator's `key_field`): {}",
                    self.key_field,
                    document(rec)
                ))
            })?,
        };
        let amount = match &fields.amount {
            None => {
                return Err(Error::InvalidInput(format!(
                    "record has no `amount`: {}",
                    document(rec)
                )));
            }
            Some(a) => a.amount().ok_or_else(|| {
                let amount = &document(rec)["amount"];
                Error::InvalidInput(format!("`amount` is not a number: {amount}"))
            })?,
        };
        Ok(Parsed {
            key,
            amount,
            timestamp,
        })
    }

    /// The record's timestamp, which `timeout` needs; `None` without
    /// `timeout`.
    fn timestamp_of(&self, rec: &RecordRef<'_>, port: u32) -> Result<Option<i64>> {
        match (self.timeout, rec.timestamp) {
            (Some(_), None) => Err(Error::InvalidInput(format!(
                "record on input `{}` has no timestamp, and `timeout` needs event time (set the source's `timestamp` to the field holding the record's time, or drop `timeout`): {}",
                if port == PORT_A { "a" } else { "b" },
                document(rec)
            ))),
            (Some(_), ts) => Ok(ts),
            (None, _) => Ok(None),
        }
    }

    /// Applies a record of `amount` at `ts` on input `port` to its key's
    /// state `p`: the first record per side counts; a done key changes no
    /// more; under `timeout` the first record sets the first timestamp and
    /// a completed key becomes a tombstone.
    fn step(&self, p: &mut Pending, port: u32, amount: f64, ts: Option<i64>) -> Step {
        let mut step = Step::default();
        if p.done {
            step.late = true;
            return step;
        }
        if let (Some(timeout), Some(ts), None) = (self.timeout, ts, p.t) {
            p.t = Some(ts);
            step.timer = Some(ts.saturating_add(timeout));
        }
        let side = if port == PORT_A { &mut p.a } else { &mut p.b };
        if side.is_none() {
            *side = Some(amount);
            if p.a.is_some() && p.b.is_some() {
                step.completed = Some(p.clone());
                if let (Some(timeout), Some(t)) = (self.timeout, p.t) {
                    step.moved_timer = Some((
                        t.saturating_add(timeout),
                        t.saturating_add(timeout.saturating_mul(2)),
                    ));
                }
                *p = tombstone(p.t);
            }
        }
        step
    }

    /// Emits the key's result on `out` with `timestamp` (`None`: the host
    /// gives it the latest timestamp of the input).
    fn emit(&mut self, ctx: &mut Context, key: &str, p: &Pending, timestamp: Option<i64>) {
        let Some(out) = classify(key, p.a, p.b, self.tolerance) else {
            return;
        };
        self.line.clear();
        out.write_row(&mut RowWriter::new(&mut self.line));
        let rec = RecordRef {
            key: Some(key.as_bytes()),
            value: &self.line,
            timestamp,
            change: Change::Insert,
            encoding: Encoding::Row,
        };
        ctx.emit_ref(OUT, rec);
    }
}

/// What one record did to its key, besides changing its state.
#[derive(Debug, Default)]
struct Step {
    /// The key was done: the record is late (output `late` under
    /// `timeout`, else ignored).
    late: bool,
    /// The key's timer to register, at first timestamp + `timeout`.
    timer: Option<i64>,
    /// Both sides are in: the key's result to emit (the key's state before
    /// it was marked done).
    completed: Option<Pending>,
    /// Under `timeout`, the completed key's timer moves from `.0` (first
    /// timestamp + `timeout`) to `.1` (+ 2 × `timeout`).
    moved_timer: Option<(i64, i64)>,
}

/// A done key: its amounts are no longer needed, only (under `timeout`)
/// its first timestamp is kept; without `timeout` it is `{"done":true}`.
fn tombstone(t: Option<i64>) -> Pending {
    Pending {
        done: true,
        t,
        ..Pending::default()
    }
}

impl Operator for Reconcile {
    /// Orders from a `csv` source arrive as rows: no JSON to parse.
    const READS_ROWS: bool = true;

    fn describe() -> OperatorInfo {
        OperatorInfo::new("reconcile", env!("CARGO_PKG_VERSION"))
            .input("a")
            .input("b")
            .output("out")
            .output("late")
            .state_version(2)
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
            keys: MapState::new("rc").with_row_values(),
            line: Vec::new(),
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, port: u32, batch: &Batch<'_>) -> Result<()> {
        if port != PORT_A && port != PORT_B {
            return Err(Error::Other(format!(
                "reconcile has inputs 0 (a) and 1 (b), got port {port}"
            )));
        }
        // Every record is checked before any is used: a bad batch changes
        // nothing.
        let parsed = batch
            .iter()
            .map(|rec| self.parse(&rec, port))
            .collect::<Result<Vec<Parsed<'_>>>>()?;
        // The states the cache lacks, in one host call.
        self.keys
            .prefetch(ctx, parsed.iter().map(|p| p.key.as_ref()))?;
        for (
            rec,
            Parsed {
                key,
                amount,
                timestamp: ts,
            },
        ) in batch.iter().zip(parsed)
        {
            // One cache lookup per record: the state changes in place and
            // what else the record causes is done after.
            let mut step = Step::default();
            self.keys.update(ctx, key.as_ref(), |p| {
                let mut p = p.unwrap_or_default();
                step = self.step(&mut p, port, amount, ts);
                p
            })?;
            let k = key.as_bytes();
            if step.late && self.timeout.is_some() {
                ctx.emit_ref(LATE, rec);
            }
            if let Some(time) = step.timer {
                ctx.register_event_timer(k, time);
            }
            if let Some(p) = &step.completed {
                self.emit(ctx, &key, p, ts);
            }
            if let Some((old, new)) = step.moved_timer {
                ctx.delete_timer(k, TimeDomain::EventTime, old);
                ctx.register_event_timer(k, new);
            }
        }
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
            self.emit(ctx, key, &p, Some(timer.time));
            self.keys.update(ctx, key, |_| tombstone(p.t))?;
            // The timer was at first timestamp + timeout.
            ctx.register_event_timer(timer.key, timer.time.saturating_add(timeout));
        }
        Ok(())
    }

    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        // Under `timeout` the end of input fired every key's timer before
        // this, so only keys of a run without `timeout` are left. A page of
        // entries at a time: the state may be far larger than the plugin's
        // memory.
        // Done keys (most of them) are passed over undecoded.
        let keys = self.keys.clone();
        let done = keys.encoded(&tombstone(None));
        keys.for_each_where(
            ctx,
            |raw| raw != done,
            |ctx, key, p| {
                if !p.done {
                    self.emit(ctx, &key, &p, None);
                    keys.put(ctx, &key, &tombstone(p.t));
                }
                Ok(())
            },
        )
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

    /// The JSON a state value stands for; panics unless it is a row value
    /// (state version 2).
    fn json_of(value: &[u8]) -> Vec<u8> {
        let [0xFF, row @ ..] = value else {
            panic!("{:?} is no row value", String::from_utf8_lossy(value));
        };
        Row::new(row).unwrap().to_json()
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
    fn rows_read_as_their_json_text_reads() {
        // Orders keyed by a field, amounts of every kind a row has: the
        // same orders as rows and as JSON text give the same output.
        type Write = fn(&mut weir_sdk::RowWriter<'_>);
        let orders: [(&str, Write); 6] = [
            ("a", |r| {
                r.str("id", "1").decimal("amount", "10.50");
            }),
            ("a", |r| {
                r.i64("id", 2).i64("amount", -3);
            }),
            ("a", |r| {
                r.str("id", "3").f64("amount", 2.5);
            }),
            ("b", |r| {
                r.str("id", "1").str("amount", " 10.5 ");
            }),
            ("b", |r| {
                r.i64("id", 2).u64("amount", 7).null("note");
            }),
            ("b", |r| {
                r.str("id", "4").decimal("amount", "1e2");
            }),
        ];
        let config = r#"{"key_field":"id"}"#;
        let (mut rows, mut text) = (
            Harness::<Reconcile>::open(config).unwrap(),
            Harness::<Reconcile>::open(config).unwrap(),
        );
        let (mut from_rows, mut from_text) = (Vec::new(), Vec::new());
        for (port, write) in orders {
            let mut batch = BatchBuf::new();
            batch.push_row_with(None, None, write);
            let mut json = BatchBuf::new();
            json.push(
                None,
                &batch.as_batch().get(0).unwrap().to_record().value,
                None,
            );
            from_rows.extend(rows.process_flat(port, &batch).unwrap());
            from_text.extend(text.process_flat(port, &json).unwrap());
        }
        from_rows.extend(rows.finish().unwrap());
        from_text.extend(text.finish().unwrap());
        assert_eq!(parse(&from_rows), parse(&from_text));
        let statuses: Vec<_> = parse(&from_rows)
            .iter()
            .map(|v| (v["key"].to_string(), v["status"].to_string()))
            .collect();
        assert_eq!(
            statuses,
            [
                (r#""1""#.into(), r#""MATCH""#.into()),
                (r#""2""#.into(), r#""AMOUNT_MISMATCH""#.into()),
                (r#""3""#.into(), r#""ONLY_A""#.into()),
                (r#""4""#.into(), r#""ONLY_B""#.into()),
            ]
        );
        // A row without the key field is refused, naming its JSON.
        let mut batch = BatchBuf::new();
        batch.push_row_with(None, None, |r| {
            r.u64("amount", 1);
        });
        let err = rows.process_flat("a", &batch).unwrap_err().to_string();
        assert!(
            err.contains(r#"no `id` field"#) && err.contains(r#"{"amount":1}"#),
            "{err}"
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
        assert_eq!(
            json_of(&h.state()[&b"x\0rc".to_vec()]),
            br#"{"done":true,"t":2000}"#
        );
        assert_eq!(
            json_of(&h.state()[&b"m\0rc".to_vec()]),
            br#"{"done":true,"t":1000}"#
        );
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

    /// Without `timeout` nothing registers timers or goes late, and the
    /// state keeps the layout from before `timeout` existed, but for a
    /// done key, now `{"done":true}` (its amounts are no longer needed);
    /// a done key of that older layout (`{"a","b","done"}`, from a
    /// checkpoint of before) is still done: `finish` passes over it.
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
        assert_eq!(json_of(&h.state()[&b"m\0rc".to_vec()]), br#"{"done":true}"#);
        assert_eq!(json_of(&h.state()[&b"x\0rc".to_vec()]), br#"{"a":2.0}"#);
        // The bytes of state version 2: 0xFF, then field `a`, a float.
        let a = [&[0xFF, 5, 1, b'a'][..], &2.0f64.to_le_bytes()].concat();
        assert_eq!(h.state()[&b"x\0rc".to_vec()], a);
        let old_done = br#"{"a":3.0,"b":4.0,"done":true}"#.to_vec();
        h.state_mut().insert(b"o\0rc".to_vec(), old_done.clone());
        h.restart().unwrap();
        assert!(
            h.process_ports("b", vec![at("o", "5", 9)])
                .unwrap()
                .is_empty()
        );
        let out = parse(&h.finish().unwrap());
        assert_eq!(
            out,
            [
                serde_json::json!({"key":"q","status":"ONLY_B","a":null,"b":1.0}),
                serde_json::json!({"key":"x","status":"ONLY_A","a":2.0,"b":null}),
            ]
        );
    }

    /// How a record was read before the fields were picked without a
    /// document tree: the whole record as a `serde_json::Value`. The oracle
    /// of the tests below, which check that nothing changed.
    fn read_through_value(
        record: &Record,
        key_field: &str,
    ) -> std::result::Result<(String, f64), String> {
        let v: Value = record.parse_json().map_err(|e| e.to_string())?;
        let key = match record.key_str() {
            Some(k) => k.to_string(),
            None => match v.get(key_field) {
                Some(Value::String(s)) => s.clone(),
                Some(other) if !other.is_null() => other.to_string(),
                _ => {
                    return Err(Error::InvalidInput(format!(
                        "record has no key and no `{key_field}` field (set the source's `key` or the operator's `key_field`): {v}"
                    ))
                    .to_string());
                }
            },
        };
        let amount = v.get("amount").ok_or_else(|| {
            Error::InvalidInput(format!("record has no `amount`: {v}")).to_string()
        })?;
        let parsed = match amount {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let amount = parsed.ok_or_else(|| {
            Error::InvalidInput(format!("`amount` is not a number: {amount}")).to_string()
        })?;
        Ok((key, amount))
    }

    /// What the operator makes of `record` alone on input `a`: its key and
    /// amount (read back from the state it wrote), or the error's text.
    fn read_by_operator(
        record: &Record,
        key_field: &str,
    ) -> std::result::Result<(String, f64), String> {
        let config = serde_json::json!({ "key_field": key_field }).to_string();
        let mut h = Harness::<Reconcile>::open(&config).unwrap();
        h.process("a", vec![record.clone()])
            .map_err(|e| e.to_string())?;
        h.checkpoint(1).unwrap();
        let [(k, v)]: [(&Vec<u8>, &Vec<u8>); 1] =
            h.state().iter().collect::<Vec<_>>().try_into().unwrap();
        let key = k.strip_suffix(b"\0rc").expect("a reconcile key");
        let p: Pending = serde_json::from_slice(&json_of(v)).unwrap();
        Ok((String::from_utf8(key.to_vec()).unwrap(), p.a.unwrap()))
    }

    #[test]
    fn fields_are_read_as_a_document_tree_reads_them() {
        let values = [
            // Amounts: numbers of every JSON form and numeric strings.
            r#"{"key":"k","amount":10}"#,
            r#"{"key":"k","amount":-3}"#,
            r#"{"key":"k","amount":10.25}"#,
            r#"{"key":"k","amount":1e2}"#,
            r#"{"key":"k","amount":-0.0}"#,
            r#"{"key":"k","amount":18446744073709551615}"#,
            r#"{"key":"k","amount":123456789012345678901234567890}"#,
            r#"{"key":"k","amount":" 7.50 "}"#,
            r#"{"key":"k","amount":"1e3"}"#,
            r#"{"key":"k","amount":"\u0031\u0032"}"#,
            // Not numbers.
            r#"{"key":"k","amount":"abc"}"#,
            r#"{"key":"k","amount":""}"#,
            r#"{"key":"k","amount":null}"#,
            r#"{"key":"k","amount":true}"#,
            r#"{"key":"k","amount":[1]}"#,
            r#"{"key":"k","amount":{"v":1}}"#,
            // Missing fields, and records that are not objects.
            r#"{"key":"k"}"#,
            r#"{"amount":1}"#,
            r#"{"key":null,"amount":1}"#,
            r#"{}"#,
            r#"[1,{"amount":2}]"#,
            r#""amount""#,
            "12",
            "null",
            // Keys of other types, as their JSON text.
            r#"{"key":42,"amount":1}"#,
            r#"{"key":-4.50,"amount":1}"#,
            r#"{"key":1e3,"amount":1}"#,
            r#"{"key":false,"amount":1}"#,
            r#"{"key":{"b":[1,"x"],"a":null},"amount":1}"#,
            r#"{"key":[],"amount":1}"#,
            // Escapes in keys, values and field names.
            r#"{"key":"q\"uote\\back\u00e9\n","amount":"2"}"#,
            r#"{"k\u0065y":"escaped-name","am\u006fount":3}"#,
            r#"{"key":"日本","amount":4}"#,
            // The last of a repeated field counts; other fields are skipped.
            r#"{"key":"first","amount":"x","key":"last","amount":5}"#,
            r#"{"nested":{"amount":9,"key":"no"},"list":[{"key":1}],"key":"top","amount":6,"s":"a\"}"}"#,
            // Not JSON, or more than one document.
            r#"{"key":"k","amount":1"#,
            r#"{"key":"k","amount":1} x"#,
            "",
        ];
        for value in values {
            let record = Record::new(value);
            for key_field in ["key", "amount", "missing"] {
                assert_eq!(
                    read_by_operator(&record, key_field),
                    read_through_value(&record, key_field),
                    "{value} with key_field {key_field}"
                );
            }
            let keyed = record.clone().with_key("own");
            assert_eq!(
                read_by_operator(&keyed, "key"),
                read_through_value(&keyed, "key"),
                "{value} with a record key"
            );
        }
    }

    #[test]
    fn bad_records_fail_with_the_messages_they_always_had() {
        let mut h = Harness::<Reconcile>::open("{}").unwrap();
        let err = |h: &mut Harness<Reconcile>, value: &str| {
            h.process("a", vec![Record::new(value)])
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(&mut h, r#"{"key":"k","n":{"b":1,"a":2}}"#),
            r#"invalid input: record has no `amount`: {"key":"k","n":{"a":2,"b":1}}"#
        );
        assert_eq!(
            err(&mut h, r#"{"key":"k","amount":"1,5"}"#),
            r#"invalid input: `amount` is not a number: "1,5""#
        );
        assert_eq!(
            err(&mut h, r#"{"amount":1,"key":null}"#),
            "invalid input: record has no key and no `key` field (set the source's `key` or the operator's `key_field`): {\"amount\":1,\"key\":null}"
        );
        // A bad record anywhere in the batch: nothing of it is used.
        let batch = vec![rec("ok", "1"), Record::new(r#"{"key":"bad"}"#)];
        assert!(h.process("a", batch).is_err());
        h.checkpoint(1).unwrap();
        assert!(h.state().is_empty(), "{:?}", h.state());
    }

    #[test]
    fn keys_with_escapes_and_of_other_types_are_emitted_as_json() {
        let mut h = Harness::<Reconcile>::open(r#"{"key_field":"id"}"#).unwrap();
        h.process(
            "a",
            vec![
                Record::new(r#"{"id":"q\"\\\u00e9","amount":1}"#),
                Record::new(r#"{"id":7,"amount":"2.5"}"#),
                Record::new(r#"{"id":0.5,"amount":3}"#),
            ],
        )
        .unwrap();
        let out = h
            .process("b", vec![Record::new(r#"{"id":"q\"\\é","amount":1.0}"#)])
            .unwrap();
        assert_eq!(
            out,
            [
                Record::new(r#"{"key":"q\"\\é","status":"MATCH","a":1.0,"b":1.0}"#)
                    .with_key("q\"\\é")
            ]
        );
        let out = h.finish().unwrap();
        assert_eq!(
            out,
            [
                Record::new(r#"{"key":"0.5","status":"ONLY_A","a":3.0,"b":null}"#).with_key("0.5"),
                Record::new(r#"{"key":"7","status":"ONLY_A","a":2.5,"b":null}"#).with_key("7"),
            ]
        );
    }

    #[test]
    fn finish_reads_the_keys_a_page_at_a_time() {
        // More keys than a page (1000): every one is emitted once, in key
        // order, and marked done, with one scan per page.
        let n = 2_500;
        let mut h = Harness::<Reconcile>::open("{}").unwrap();
        let batch: Vec<Record> = (0..n).map(|i| rec(&format!("k{i:05}"), "1")).collect();
        h.process("a", batch).unwrap();
        h.checkpoint(1).unwrap();
        let scans = h.host_calls().flat_scan;
        let out = h.finish().unwrap();
        assert_eq!(out.len(), n);
        let keys: Vec<&str> = out.iter().map(|r| r.key_str().unwrap()).collect();
        assert!(keys.is_sorted(), "in key order");
        assert_eq!(keys[0], "k00000");
        assert_eq!(h.host_calls().flat_scan - scans, n.div_ceil(1000));
        h.checkpoint(2).unwrap();
        assert!(
            h.state()
                .values()
                .all(|v| json_of(v) == br#"{"done":true}"#)
        );
        assert!(h.finish().unwrap().is_empty(), "every key is done");
    }
}
