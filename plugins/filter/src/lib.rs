//! `filter`: a stateless operator that keeps the records whose JSON `field`
//! satisfies a predicate, and drops the others.
//!
//! Config (JSON): `{"field": "amount", "op": "gt", "value": 100}`, where `op`
//! is one of `eq`, `ne`, `gt`, `ge`, `lt`, `le` (numbers compare as numbers,
//! strings as strings), `contains` (substring of a string field), `exists`
//! (the field is present and not null; no `value`). `field` may be a dotted
//! path (`customer.country`). Records that are not JSON objects fail the job
//! unless `"skip_invalid": true`, which drops them.

use serde::Deserialize;
use serde_json::Value;
use weir_sdk::{Context, Error, LogLevel, OpenContext, Operator, OperatorInfo, Record, Result};

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

fn lookup<'a>(mut v: &'a Value, path: &[String]) -> Option<&'a Value> {
    for part in path {
        v = v.as_object()?.get(part)?;
    }
    Some(v)
}

impl Filter {
    /// Whether a parsed record passes the predicate.
    pub fn keeps(&self, record: &Value) -> bool {
        let Some(field) = lookup(record, &self.path) else {
            return self.op == Op::Ne;
        };
        use std::cmp::Ordering::*;
        let ord = match (field, &self.value) {
            (Value::Number(a), Value::Number(b)) => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b)),
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (a, b) => (a == b).then_some(Equal),
        };
        match self.op {
            Op::Exists => !field.is_null(),
            Op::Contains => {
                matches!((field, &self.value), (Value::String(a), Value::String(b)) if a.contains(b.as_str()))
            }
            Op::Eq => ord == Some(Equal),
            Op::Ne => ord != Some(Equal),
            Op::Gt => ord == Some(Greater),
            Op::Ge => matches!(ord, Some(Greater | Equal)),
            Op::Lt => ord == Some(Less),
            Op::Le => matches!(ord, Some(Less | Equal)),
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
        let config: Config = ctx.config_as()?;
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

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for rec in batch {
            let parsed: Value = match rec.parse_json() {
                Ok(v) => v,
                Err(_) if self.skip_invalid => {
                    self.skipped += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if self.keeps(&parsed) {
                ctx.emit(0, rec);
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
        out.iter()
            .map(|r| r.value_str().unwrap().to_string())
            .collect()
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
