//! A datum read with its writer's schema, resolved against a reader's
//! (Avro's rules, by `apache-avro`), after one fix: `apache-avro` refuses
//! to resolve a `bytes` decimal whose bytes are fewer than its precision
//! could need ("Precision 12 too small to hold decimal values with 1
//! bytes"), yet writers (Java's, fastavro) write the fewest bytes that
//! hold the value, as the specification says. The decimals are
//! sign-extended to the length the precision needs first, which keeps
//! their value.

use apache_avro::schema::{InnerDecimalSchema, NamesRef};
use apache_avro::types::Value;
use apache_avro::{Decimal, Schema};

/// `value`, of `writer` (named types `writer_names`), as a value of
/// `reader` (named types `reader_names`).
pub(super) fn resolve(
    mut value: Value,
    writer: &Schema,
    writer_names: &NamesRef<'_>,
    reader: &Schema,
    reader_names: &NamesRef<'_>,
) -> Result<Value, String> {
    widen_decimals(&mut value, writer, writer_names);
    value
        .resolve_with_names(reader, reader_names)
        .map_err(|e| format!("the datum does not resolve to the reader's schema: {e}"))
}

/// The fewest bytes whose two's complement holds every number of
/// `precision` digits.
fn bytes_for(precision: usize) -> usize {
    (1..=64)
        .find(|&n: &usize| {
            let max = 2f64.powi(8 * n as i32 - 1) - 1.0;
            max.log10().floor() as usize >= precision
        })
        .unwrap_or(64)
}

/// Sign-extends every `bytes` decimal of `value` (of `schema`) to
/// [`bytes_for`] its precision.
fn widen_decimals(value: &mut Value, schema: &Schema, names: &NamesRef<'_>) {
    let Ok(schema) = super::named(schema, names) else {
        return;
    };
    match (value, schema) {
        (Value::Decimal(decimal), Schema::Decimal(d))
            if matches!(d.inner, InnerDecimalSchema::Bytes) =>
        {
            let Ok(bytes) = Vec::<u8>::try_from(&*decimal) else {
                return;
            };
            let want = bytes_for(d.precision);
            if bytes.len() < want {
                let sign = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
                    0xFF
                } else {
                    0
                };
                let mut wide = vec![sign; want - bytes.len()];
                wide.extend_from_slice(&bytes);
                *decimal = Decimal::from(wide);
            }
        }
        (Value::Union(i, inner), Schema::Union(union)) => {
            if let Some(branch) = union.variants().get(*i as usize) {
                widen_decimals(inner, branch, names);
            }
        }
        (Value::Record(fields), Schema::Record(record)) => {
            for ((_, value), field) in fields.iter_mut().zip(&record.fields) {
                widen_decimals(value, &field.schema, names);
            }
        }
        (Value::Array(items), Schema::Array(array)) => {
            items
                .iter_mut()
                .for_each(|item| widen_decimals(item, &array.items, names));
        }
        (Value::Map(entries), Schema::Map(map)) => {
            entries
                .values_mut()
                .for_each(|v| widen_decimals(v, &map.types, names));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_take_the_bytes_their_largest_number_needs() {
        assert_eq!(bytes_for(1), 1);
        assert_eq!(bytes_for(2), 1);
        assert_eq!(bytes_for(3), 2);
        assert_eq!(bytes_for(12), 6);
        assert_eq!(bytes_for(38), 16);
    }
}
