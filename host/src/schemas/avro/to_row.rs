//! Avro records as rows (`weir_flat::row`): a record whose every field is
//! one JSON scalar (after unions and named types) becomes a row of those
//! fields, in field order, each of the type its JSON has; a row's JSON is
//! then exactly the record's JSON of `to_json` (the mapping is
//! [`Scalar`]'s). Any other datum (nested records, arrays, maps,
//! durations, a name over 255 bytes) is not a row: its readers get JSON.

use apache_avro::Schema;
use apache_avro::schema::NamesRef;
use apache_avro::types::Value;
use weir_flat::json;
use weir_flat::row::RowWriter;

use super::to_json::{Scalar, non_finite, scalar};

/// Appends `value`, of `schema` (whose named types are `names`), to `row`
/// as a row and returns true, or returns false and leaves `row` as it was
/// when it is no flat record.
pub(super) fn write(
    value: &Value,
    schema: &Schema,
    names: &NamesRef<'_>,
    row: &mut Vec<u8>,
) -> Result<bool, String> {
    let (Value::Record(fields), Schema::Record(record)) = (value, super::named(schema, names)?)
    else {
        return Ok(false);
    };
    let start = row.len();
    for ((name, value), field) in fields.iter().zip(&record.fields) {
        let (value, schema) = branch(value, &field.schema, names)?;
        let flat = name.len() <= usize::from(u8::MAX)
            && !matches!(
                value,
                Value::Record(_) | Value::Array(_) | Value::Map(_) | Value::Duration(_)
            );
        if !flat {
            row.truncate(start);
            return Ok(false);
        }
        let fields = &mut RowWriter::new(row);
        match scalar(value, schema)? {
            Scalar::Null => fields.null(name),
            Scalar::Bool(b) => fields.bool(name, b),
            Scalar::Int(n) => fields.i64(name, n),
            Scalar::Float(x) => match non_finite(x) {
                Some(text) => fields.str(name, text),
                None => fields.f64(name, x),
            },
            Scalar::Text(text) => fields.str(name, &text),
            Scalar::Number(text) if json::is_number(text.as_bytes()) => fields.decimal(name, &text),
            Scalar::Number(_) => {
                row.truncate(start);
                return Ok(false);
            }
        };
    }
    Ok(true)
}

/// `value` of `schema` with its unions' branches and named types followed.
fn branch<'v, 's>(
    mut value: &'v Value,
    schema: &'s Schema,
    names: &NamesRef<'s>,
) -> Result<(&'v Value, &'s Schema), String> {
    let mut schema = super::named(schema, names)?;
    while let (Value::Union(i, inner), Schema::Union(union)) = (value, schema) {
        let chosen = (union.variants().get(*i as usize))
            .ok_or_else(|| format!("a union value names branch {i}, which it lacks"))?;
        (value, schema) = (inner, super::named(chosen, names)?);
    }
    Ok((value, schema))
}
