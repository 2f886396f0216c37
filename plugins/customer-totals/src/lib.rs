//! `customer-totals`: the running total and number of orders per customer
//! of a changelog of orders (a `postgres-cdc` source, for instance), as an
//! upsert stream: each batch emits, for every customer it touched, the
//! customer's row `{"customer", "total", "orders"}` (an `update-after`), or
//! a `delete` of the customer once it has no orders left.
//!
//! Change kinds: an insert and an update's after image add their order; an
//! update's before image and a delete take theirs back (so the table's
//! replica identity must give the old row: `REPLICA IDENTITY FULL`); a
//! truncate forgets every customer of the instance, deleting each. Amounts
//! are decimal texts or numbers, summed exactly (to 6 decimal places).
//!
//! State: per customer (host state, key = the customer's name), the total
//! in millionths and the count, as `"<micros> <orders>"`.
//!
//! Config (JSON): `{"group_by": "customer", "amount": "amount"}` (those are
//! the defaults).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;
use weir_sdk::{
    Batch, Change, Context, Error, OpenContext, Operator, OperatorInfo, Record, Result,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    group_by: String,
    amount: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            group_by: "customer".into(),
            amount: "amount".into(),
        }
    }
}

/// The operator.
pub struct CustomerTotals {
    config: Config,
}

/// Decimal places kept.
const SCALE: u32 = 6;

/// `text` (`12.5`, `-3`, `0.000001`) in millionths, exactly.
fn micros(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > SCALE as usize
        || !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction: i128 = format!("{fraction:0<6}").parse().ok()?;
    let value = whole
        .checked_mul(10i128.pow(SCALE))?
        .checked_add(fraction)?;
    Some(if negative { -value } else { value })
}

/// Millionths as a decimal text without trailing zeros (`12.5`).
fn decimal(micros: i128) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let (whole, fraction) = (
        micros.abs() / 10i128.pow(SCALE),
        micros.abs() % 10i128.pow(SCALE),
    );
    let fraction = format!("{fraction:06}");
    let fraction = fraction.trim_end_matches('0');
    match fraction.is_empty() {
        true => format!("{sign}{whole}"),
        false => format!("{sign}{whole}.{fraction}"),
    }
}

impl CustomerTotals {
    /// The order's customer and amount (millionths).
    fn order(&self, value: &[u8]) -> Result<(String, i128)> {
        let row: Value = serde_json::from_slice(value)
            .map_err(|e| Error::InvalidInput(format!("an order is not a JSON object: {e}")))?;
        let field = |name: &str| {
            row.get(name).ok_or_else(|| {
                Error::InvalidInput(format!("an order has no field `{name}`: {row}"))
            })
        };
        let customer = match field(&self.config.group_by)? {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let amount = match field(&self.config.amount)? {
            Value::String(s) => micros(s),
            Value::Number(n) => micros(&n.to_string()),
            _ => None,
        };
        let amount = amount.ok_or_else(|| {
            Error::InvalidInput(format!(
                "`{}` of an order is no decimal: {row}",
                self.config.amount
            ))
        })?;
        Ok((customer, amount))
    }

    /// The customer's total and order count.
    fn load(ctx: &Context, customer: &str) -> Result<(i128, i64)> {
        let Some(bytes) = ctx.get(customer.as_bytes()) else {
            return Ok((0, 0));
        };
        let text = String::from_utf8_lossy(&bytes);
        let parsed = text
            .split_once(' ')
            .and_then(|(t, n)| Some((t.parse().ok()?, n.parse().ok()?)));
        parsed.ok_or_else(|| {
            Error::IncompatibleState(format!("customer {customer:?} holds {text:?}"))
        })
    }

    /// Emits the customer's row, or its delete once it has no orders.
    fn emit(ctx: &mut Context, customer: &str, total: i128, orders: i64) {
        let key = serde_json::to_vec(customer).expect("a string serializes");
        let value = match orders {
            0 => serde_json::json!({ "customer": customer }),
            _ => {
                let total: Value =
                    serde_json::from_str(&decimal(total)).expect("a decimal is JSON");
                serde_json::json!({ "customer": customer, "total": total, "orders": orders })
            }
        };
        let change = if orders == 0 {
            Change::Delete
        } else {
            Change::UpdateAfter
        };
        let value = serde_json::to_vec(&value).expect("JSON serializes");
        ctx.emit_change(0, change, Some(&key), &value);
    }
}

impl Operator for CustomerTotals {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("customer-totals", env!("CARGO_PKG_VERSION"))
            .input("orders")
            .output("totals")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        Ok(CustomerTotals {
            config: ctx.config_as()?,
        })
    }

    fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> {
        unreachable!("process_batch reads the batches")
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        let mut touched = BTreeSet::new();
        for rec in batch {
            if rec.change == Change::Truncate {
                for (customer, _) in ctx.scan_all(b"") {
                    let customer = String::from_utf8_lossy(&customer).into_owned();
                    ctx.delete(customer.as_bytes());
                    touched.insert(customer);
                }
                continue;
            }
            let (customer, amount) = self.order(rec.value)?;
            let (mut total, mut orders) = Self::load(ctx, &customer)?;
            match rec.change.retracts() {
                false => (total, orders) = (total + amount, orders + 1),
                true => (total, orders) = (total - amount, orders - 1),
            }
            match orders {
                0 => ctx.delete(customer.as_bytes()),
                _ => ctx.put(customer.as_bytes(), format!("{total} {orders}").as_bytes()),
            }
            touched.insert(customer);
        }
        for customer in touched {
            let (total, orders) = Self::load(ctx, &customer)?;
            Self::emit(ctx, &customer, total, orders);
        }
        Ok(())
    }
}

weir_sdk::export!(CustomerTotals);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(id: u32, customer: &str, amount: &str) -> Record {
        Record::new(format!(
            r#"{{"id":{id},"customer":"{customer}","amount":"{amount}"}}"#
        ))
    }

    fn rows(out: Vec<(Change, Record)>) -> Vec<(Change, String)> {
        (out.into_iter())
            .map(|(c, r)| (c, r.value_str().unwrap().to_owned()))
            .collect()
    }

    #[test]
    fn totals_follow_inserts_updates_deletes_and_truncates() {
        use Change::*;
        let mut h = Harness::<CustomerTotals>::open("{}").unwrap();
        let out = h
            .process_changes(
                "orders",
                vec![
                    (Insert, order(1, "ada", "12.50")),
                    (Insert, order(2, "ada", "0.25")),
                    (Insert, order(3, "bob", "3")),
                ],
            )
            .unwrap();
        assert_eq!(
            rows(out),
            [
                (
                    UpdateAfter,
                    r#"{"customer":"ada","orders":2,"total":12.75}"#.into()
                ),
                (
                    UpdateAfter,
                    r#"{"customer":"bob","orders":1,"total":3}"#.into()
                ),
            ]
        );
        // Order 2 moves to bob; bob's first order goes.
        let out = h
            .process_changes(
                "orders",
                vec![
                    (UpdateBefore, order(2, "ada", "0.25")),
                    (UpdateAfter, order(2, "bob", "0.25")),
                    (Delete, order(3, "bob", "3")),
                ],
            )
            .unwrap();
        assert_eq!(
            rows(out),
            [
                (
                    UpdateAfter,
                    r#"{"customer":"ada","orders":1,"total":12.5}"#.into()
                ),
                (
                    UpdateAfter,
                    r#"{"customer":"bob","orders":1,"total":0.25}"#.into()
                ),
            ]
        );
        let out = h
            .process_changes("orders", vec![(Delete, order(1, "ada", "12.50"))])
            .unwrap();
        assert_eq!(rows(out), [(Delete, r#"{"customer":"ada"}"#.into())]);
        let out = h
            .process_changes("orders", vec![(Truncate, Record::new("{}"))])
            .unwrap();
        assert_eq!(rows(out), [(Delete, r#"{"customer":"bob"}"#.into())]);
        assert!(h.state().is_empty());
    }

    #[test]
    fn amounts_are_exact_decimals() {
        assert_eq!(micros("12.5"), Some(12_500_000));
        assert_eq!(micros("-0.000001"), Some(-1));
        assert_eq!(micros(".5"), Some(500_000));
        for bad in ["", "-", "1.2.3", "1e5", "0.0000001", "x"] {
            assert_eq!(micros(bad), None, "{bad}");
        }
        assert_eq!(decimal(12_500_000), "12.5");
        assert_eq!(decimal(-1), "-0.000001");
        assert_eq!(decimal(3_000_000), "3");
        let mut h = Harness::<CustomerTotals>::open("{}").unwrap();
        let err = h
            .process_changes("orders", vec![(Change::Insert, order(1, "ada", "lots"))])
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`amount` of an order is no decimal"),
            "{err}"
        );
    }
}
