//! `filter`: a stateless operator that keeps the records whose JSON `field`
//! satisfies a predicate, and drops the others.
//!
//! Config (JSON): `{"field": "amount", "op": "gt", "value": 100}`, where `op`
//! is one of `eq`, `ne`, `gt`, `ge`, `lt`, `le` (numbers compare as numbers,
//! strings as strings), `contains` (substring of a string field), `exists`
//! (the field is present and not null; no `value`). `field` may be a dotted
//! path (`customer.country`). Records that are not JSON fail the job unless
//! `"skip_invalid": true`, which drops them; in JSON that is not an object
//! the field is absent.
//!
//! Each record is parsed only as far as the predicate needs: the field's
//! value is built, the rest of the document is checked and skipped.

mod lookup;

use serde::Deserialize;
use serde_json::Value;
use weir_sdk::{
    Batch, BatchBuf, Context, Error, LogLevel, OpenContext, Operator, OperatorInfo, Record,
    RecordRef, Result,
};

use crate::lookup::{Field, Lookup};

/// A comparison applied to the field.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Contains,
    Exists,
}

impl Op {
    /// Whether a comparison of the field with the value that came out
    /// `ord` (`None`: not comparable) passes this op; false for `contains`
    /// and `exists`, which do not compare.
    fn orders(self, ord: Option<std::cmp::Ordering>) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Op::Eq => ord == Some(Equal),
            Op::Ne => ord != Some(Equal),
            Op::Gt => ord == Some(Greater),
            Op::Ge => matches!(ord, Some(Greater | Equal)),
            Op::Lt => ord == Some(Less),
            Op::Le => matches!(ord, Some(Less | Equal)),
            Op::Contains | Op::Exists => false,
        }
    }
}

/// The operator's configuration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub field: String,
    pub op: Op,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub skip_invalid: bool,
}

/// The filter operator.
pub struct Filter {
    path: Vec<String>,
    op: Op,
    value: Value,
    skip_invalid: bool,
    skipped: u64,
}

impl Filter {
    /// The filter of `config`, checked (the plugin's `open`; benchmarks
    /// call it to run the same logic natively).
    pub fn new(config: Config) -> Result<Self> {
        if config.field.is_empty() {
            return Err(Error::InvalidConfig("`field` must not be empty".into()));
        }
        let value = match (config.op, config.value) {
            (Op::Exists, _) => Value::Null,
            (op, None) => {
                return Err(Error::InvalidConfig(
                    format!("`op = \"{op:?}\"` needs a `value` to compare with").to_lowercase(),
                ));
            }
            (Op::Contains, Some(v)) if !v.is_string() => {
                return Err(Error::InvalidConfig(
                    "`op = \"contains\"` needs a string `value`".into(),
                ));
            }
            (_, Some(v)) => v,
        };
        Ok(Filter {
            path: config.field.split('.').map(str::to_string).collect(),
            op: config.op,
            value,
            skip_invalid: config.skip_invalid,
            skipped: 0,
        })
    }

    /// Whether the record passes; an error when its value is not JSON.
    pub fn passes(&self, rec: &RecordRef<'_>) -> Result<bool> {
        let field = rec.parse_json_seed(Lookup { path: &self.path })?;
        Ok(self.keeps(field.as_ref()))
    }

    /// Whether a record whose field is `field` (`None`: absent) passes.
    fn keeps(&self, field: Option<&Field<'_>>) -> bool {
        let Some(field) = field else {
            return self.op == Op::Ne;
        };
        use std::cmp::Ordering::*;
        let ord = match (field, &self.value) {
            (Field::Other(Value::Number(a)), Value::Number(b)) => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b)),
            (Field::Str(a), Value::String(b)) => Some(a.as_ref().cmp(b.as_str())),
            (Field::Str(_), _) => None,
            (Field::Other(a), b) => (a == b).then_some(Equal),
        };
        match self.op {
            Op::Exists => *field != Field::Other(Value::Null),
            Op::Contains => {
                matches!((field, &self.value), (Field::Str(a), Value::String(b)) if a.contains(b.as_str()))
            }
            op => op.orders(ord),
        }
    }
}

impl Operator for Filter {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("filter", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        Filter::new(ctx.config_as()?)
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            match self.passes(&rec) {
                Ok(true) => ctx.emit_ref(0, rec),
                Ok(false) => {}
                Err(_) if self.skip_invalid => self.skipped += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        if self.skipped > 0 {
            ctx.log(
                LogLevel::Warn,
                &format!("dropped {} records that were not JSON", self.skipped),
            );
        }
        Ok(())
    }
}

weir_sdk::export!(Filter);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn run(config: &str, values: &[&str]) -> Vec<String> {
        let mut h = Harness::<Filter>::open(config).unwrap();
        let out = h
            .process("in", values.iter().map(|v| Record::new(*v)).collect())
            .unwrap();
        weir_sdk::testing::values(&out)
    }

    #[test]
    fn numeric_comparisons() {
        let input = [r#"{"a":1}"#, r#"{"a":5}"#, r#"{"a":10}"#, r#"{"b":5}"#];
        assert_eq!(
            run(r#"{"field":"a","op":"gt","value":4}"#, &input),
            [input[1], input[2]]
        );
        assert_eq!(
            run(r#"{"field":"a","op":"le","value":5}"#, &input),
            [input[0], input[1]]
        );
        assert_eq!(
            run(r#"{"field":"a","op":"eq","value":5.0}"#, &input),
            [input[1]]
        );
        assert_eq!(
            run(r#"{"field":"a","op":"ne","value":5}"#, &input),
            [input[0], input[2], input[3]]
        );
    }

    #[test]
    fn strings_paths_and_exists() {
        let input = [
            r#"{"c":{"n":"DE"}}"#,
            r#"{"c":{"n":"FR"}}"#,
            r#"{"c":null}"#,
        ];
        assert_eq!(
            run(r#"{"field":"c.n","op":"eq","value":"FR"}"#, &input),
            [input[1]]
        );
        assert_eq!(
            run(r#"{"field":"c.n","op":"contains","value":"D"}"#, &input),
            [input[0]]
        );
        assert_eq!(
            run(r#"{"field":"c","op":"exists"}"#, &input),
            [input[0], input[1]]
        );
    }

    #[test]
    fn bad_config_is_rejected_with_the_field_named() {
        let err = Harness::<Filter>::open(r#"{"field":"a","op":"gt"}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("needs a `value`"), "{err}");
        let err = Harness::<Filter>::open(r#"{"field":"a","op":"between","value":1}"#)
            .err()
            .unwrap();
        assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
        let err = Harness::<Filter>::open(r#"{"op":"eq","value":1}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("field"), "{err}");
    }

    /// The predicate evaluated on a full [`Value`]: the oracle the
    /// streaming lookup must agree with.
    fn oracle(config: &str, json: &[u8]) -> Option<bool> {
        let c: Config = serde_json::from_str(config).unwrap();
        let v: Value = serde_json::from_slice(json).ok()?;
        let mut field = Some(&v);
        for part in c.field.split('.') {
            field = field.and_then(|f| f.as_object()?.get(part));
        }
        let Some(field) = field else {
            return Some(c.op == Op::Ne);
        };
        let value = c.value.unwrap_or(Value::Null);
        use std::cmp::Ordering::*;
        let ord = match (field, &value) {
            (Value::Number(a), Value::Number(b)) => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b)),
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (a, b) => (a == b).then_some(Equal),
        };
        Some(match c.op {
            Op::Exists => !field.is_null(),
            Op::Contains => {
                matches!((field, &value), (Value::String(a), Value::String(b)) if a.contains(b.as_str()))
            }
            op => op.orders(ord),
        })
    }

    #[test]
    fn agrees_with_parsing_the_whole_value() {
        let configs = [
            r#"{"field":"a","op":"eq","value":1}"#,
            r#"{"field":"a","op":"ne","value":"x"}"#,
            r#"{"field":"a","op":"ge","value":1.5}"#,
            r#"{"field":"a","op":"lt","value":"m"}"#,
            r#"{"field":"a","op":"eq","value":[1,{"b":null}]}"#,
            r#"{"field":"a","op":"eq","value":{"b":[true]}}"#,
            r#"{"field":"a","op":"eq","value":false}"#,
            r#"{"field":"a","op":"contains","value":"é"}"#,
            r#"{"field":"a","op":"exists"}"#,
            r#"{"field":"a.b","op":"le","value":2}"#,
            r#"{"field":"a.b","op":"exists"}"#,
        ];
        let mut docs: Vec<Vec<u8>> = [
            r#"{"a":1}"#,
            r#"{"a":1.0,"z":[1,2,{"q":"\u00e9"}]}"#,
            r#"{"a":"x"}"#,
            r#"{"a":"caf\u00e9 é"}"#,
            r#"{"a":"\"esc\""}"#,
            r#"{"a":null}"#,
            r#"{"a":false}"#,
            r#"{"a":[1,{"b":null}]}"#,
            r#"{"a":{"b":[true]}}"#,
            r#"{"a":{"b":2}}"#,
            r#"{"a":{"b":3},"a":{"b":1}}"#,
            r#"{"a":{"b":1},"a":5}"#,
            r#"{"a":1,"a":"x"}"#,
            r#"{"a\u0000":1}"#,
            r#"{"b":1}"#,
            r#"[{"a":1}]"#,
            "42",
            r#""a""#,
            "null",
            "",
            "nope",
            r#"{"a":1} x"#,
            r#"{"a":1,"b":"\ud800"}"#,
            r#"{"a":1,"b":1e400}"#,
            r#"{"a":1,"b":"tab	inside"}"#,
            r#"{"a":1,"b":"\x"}"#,
            r#"{"a":1,"b":[1,]}"#,
            r#"{"a":18446744073709551616}"#,
            r#"{"a":-0}"#,
        ]
        .map(|d| d.as_bytes().to_vec())
        .to_vec();
        docs.push(b"{\"a\":1,\"b\":\"\xff\"}".to_vec());
        docs.push(b"{\"a\":\"\xc3\"}".to_vec());
        let deep = |n: usize| format!(r#"{{"a":1,"b":{}{}}}"#, "[".repeat(n), "]".repeat(n));
        docs.push(deep(126).into_bytes());
        docs.push(deep(200).into_bytes());
        for config in configs {
            let mut h = Harness::<Filter>::open(config).unwrap();
            for doc in &docs {
                let got = h.process("in", vec![Record::new(doc.clone())]);
                let got = got.ok().map(|out| !out.is_empty());
                assert_eq!(
                    got,
                    oracle(config, doc),
                    "{config} on {}",
                    String::from_utf8_lossy(doc)
                );
            }
        }
    }

    #[test]
    fn kept_records_are_forwarded_unchanged() {
        let mut h = Harness::<Filter>::open(r#"{"field":"a","op":"exists"}"#).unwrap();
        let rec = Record::new(r#"{"a":1}"#).with_key("k").with_timestamp(9);
        assert_eq!(h.process("in", vec![rec.clone()]).unwrap(), [rec]);
    }

    #[test]
    fn invalid_records_fail_unless_skipped() {
        let mut h = Harness::<Filter>::open(r#"{"field":"a","op":"exists"}"#).unwrap();
        assert!(matches!(
            h.process("in", vec![Record::new("nope")]),
            Err(Error::InvalidInput(_))
        ));
        let out = run(
            r#"{"field":"a","op":"exists","skip_invalid":true}"#,
            &["nope", r#"{"a":1}"#],
        );
        assert_eq!(out, [r#"{"a":1}"#]);
    }
}
