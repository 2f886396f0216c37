//! Rows (`weir_flat::row`) written as datums of a record schema with no
//! JSON in between: what a sink does with a plugin's rows. A row is
//! written here only when module `from_json` would write its JSON the same
//! way field by field, so both give the same bytes: its fields are the
//! record's, in the record's order, and each field's schema is null,
//! boolean, int, long, float, double, string or an enum, or a union of
//! those (the first branch the value fits). Any other row (a field left
//! to its default, another order, a decimal, a value that does not fit) is
//! left to the JSON path, which writes it or says why it cannot.

use apache_avro::Schema;
use apache_avro::schema::NamesRef;
use weir_flat::row::{Value, fields};

use crate::schemas::varint::write_signed;

/// A record schema whose rows can be written directly: its fields by name.
pub(super) struct RowPlan {
    fields: Vec<(String, Field)>,
}

/// How a record's field is written.
enum Field {
    One(Kind),
    /// A union: its branches, in order.
    Union(Vec<Kind>),
}

/// A schema a row's field is written as.
enum Kind {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    String,
    Enum(Vec<String>),
}

/// How a row's value fits a kind.
enum Fit {
    /// It fits and was written.
    Yes,
    /// `from_json` refuses it for this kind.
    No,
    /// Only the JSON path can tell.
    Unknown,
}

impl Kind {
    fn of(schema: &Schema, names: &NamesRef<'_>) -> Option<Kind> {
        Some(match super::named(schema, names).ok()? {
            Schema::Null => Kind::Null,
            Schema::Boolean => Kind::Boolean,
            Schema::Int => Kind::Int,
            Schema::Long => Kind::Long,
            Schema::Float => Kind::Float,
            Schema::Double => Kind::Double,
            Schema::String => Kind::String,
            Schema::Enum(e) => Kind::Enum(e.symbols.clone()),
            _ => return None,
        })
    }

    /// Appends `value` as this kind when it fits (as its JSON text would
    /// to `from_json`).
    fn write(&self, value: Value<'_>, out: &mut Vec<u8>) -> Fit {
        // A non-finite float's JSON is `null`.
        let value = match value {
            Value::Float(x) if !x.is_finite() => Value::Null,
            Value::Decimal(_) => return Fit::Unknown,
            value => value,
        };
        let float = || match value {
            Value::Int(n) => Some(n as f64),
            Value::Uint(n) => Some(n as f64),
            Value::Float(x) => Some(x),
            Value::Str("NaN") => Some(f64::NAN),
            Value::Str("Infinity") => Some(f64::INFINITY),
            Value::Str("-Infinity") => Some(f64::NEG_INFINITY),
            _ => None,
        };
        let integer = |fits: fn(i64) -> bool| match value {
            Value::Int(n) if fits(n) => Some(n),
            Value::Uint(n) => i64::try_from(n).ok().filter(|&n| fits(n)),
            _ => None,
        };
        match (self, value) {
            (Kind::Null, Value::Null) => {}
            (Kind::Boolean, Value::Bool(b)) => out.push(u8::from(b)),
            (Kind::Int, _) => match integer(|n| i32::try_from(n).is_ok()) {
                Some(n) => write_signed(n, out),
                None => return Fit::No,
            },
            (Kind::Long, _) => match integer(|_| true) {
                Some(n) => write_signed(n, out),
                None => return Fit::No,
            },
            (Kind::Float, _) => match float() {
                Some(x) => out.extend_from_slice(&(x as f32).to_le_bytes()),
                None => return Fit::No,
            },
            (Kind::Double, _) => match float() {
                Some(x) => out.extend_from_slice(&x.to_le_bytes()),
                None => return Fit::No,
            },
            (Kind::String, Value::Str(s)) => {
                write_signed(s.len() as i64, out);
                out.extend_from_slice(s.as_bytes());
            }
            (Kind::Enum(symbols), Value::Str(s)) => match symbols.iter().position(|x| x == s) {
                Some(i) => write_signed(i as i64, out),
                None => return Fit::No,
            },
            _ => return Fit::No,
        }
        Fit::Yes
    }
}

impl RowPlan {
    /// The plan of `schema` (whose named types are `names`), when it is a
    /// record of fields of the kinds above.
    pub(super) fn new(schema: &Schema, names: &NamesRef<'_>) -> Option<RowPlan> {
        let Schema::Record(record) = super::named(schema, names).ok()? else {
            return None;
        };
        let mut fields = Vec::with_capacity(record.fields.len());
        for field in &record.fields {
            let plan = match super::named(&field.schema, names).ok()? {
                Schema::Union(u) => Field::Union(
                    (u.variants().iter())
                        .map(|b| Kind::of(b, names))
                        .collect::<Option<_>>()?,
                ),
                schema => Field::One(Kind::of(schema, names)?),
            };
            fields.push((field.name.clone(), plan));
        }
        Some(RowPlan { fields })
    }

    /// Appends `row` as a datum and returns true, or returns false and
    /// leaves `out` as it was when the JSON path must write it.
    pub(super) fn write(&self, row: &[u8], out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let written = self.write_fields(row, out);
        if !written {
            out.truncate(start);
        }
        written
    }

    fn write_fields(&self, row: &[u8], out: &mut Vec<u8>) -> bool {
        let mut row = fields(row);
        for (name, field) in &self.fields {
            match row.next() {
                Some(Ok((read, value))) if read == name && field.write(value, out) => {}
                _ => return false,
            }
        }
        row.next().is_none()
    }
}

impl Field {
    /// Appends `value` and returns true when it fits (a union's first
    /// branch it fits, after the branch's index); false when it does not
    /// or only the JSON path can tell (what it appended is then cut by
    /// the caller).
    fn write(&self, value: Value<'_>, out: &mut Vec<u8>) -> bool {
        let branches = match self {
            Field::One(kind) => return matches!(kind.write(value, out), Fit::Yes),
            Field::Union(branches) => branches,
        };
        for (i, kind) in branches.iter().enumerate() {
            let at = out.len();
            write_signed(i as i64, out);
            match kind.write(value, out) {
                Fit::Yes => return true,
                Fit::No => out.truncate(at),
                Fit::Unknown => return false,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use weir_flat::row::RowWriter;

    use super::super::{AvroSchema, AvroWriter};
    use super::*;

    const FLAT: &str = r#"{"type": "record", "name": "Flat", "fields": [
        {"name": "n", "type": "null"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "e2", "type": "E"},
        {"name": "u1", "type": ["null", "long"]},
        {"name": "u2", "type": ["int", "string"]},
        {"name": "u3", "type": ["string", "double"]},
        {"name": "u4", "type": ["float", "null"]},
        {"name": "u5", "type": ["long", "double", "E"]}
    ]}"#;

    /// Values of every kind a row holds, at the edges of each Avro type.
    fn candidates() -> Vec<Value<'static>> {
        vec![
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Int(0),
            Value::Int(-1),
            Value::Int(i64::from(i32::MAX) + 1),
            Value::Int(i64::from(i32::MIN)),
            Value::Int(i64::MIN),
            Value::Uint(5),
            Value::Uint(1 << 63),
            Value::Uint(u64::MAX),
            Value::Float(1.5),
            Value::Float(-0.0),
            Value::Float(0.1),
            Value::Float(1e300),
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Str(""),
            Value::Str("A"),
            Value::Str("B"),
            Value::Str("NaN"),
            Value::Str("-Infinity"),
            Value::Str("x\"y\u{e9}"),
            Value::Decimal("1.50"),
            Value::Decimal("12"),
        ]
    }

    /// Values that fit field `name` of [`FLAT`], of every kind that does.
    fn fits(name: &str) -> Vec<Value<'static>> {
        match name {
            "n" => vec![Value::Null],
            "b" => vec![Value::Bool(true), Value::Bool(false)],
            "i" => vec![
                Value::Int(0),
                Value::Int(i64::from(i32::MIN)),
                Value::Uint(5),
            ],
            "l" => vec![Value::Int(i64::MIN), Value::Uint(1 << 40), Value::Int(-7)],
            "f" => vec![
                Value::Float(0.1),
                Value::Int(3),
                Value::Str("NaN"),
                Value::Uint(u64::MAX),
            ],
            "d" => vec![
                Value::Float(1e300),
                Value::Float(-0.0),
                Value::Str("-Infinity"),
            ],
            "s" => vec![Value::Str(""), Value::Str("x\"y\u{e9}")],
            "e" | "e2" => vec![Value::Str("A"), Value::Str("B")],
            "u1" => vec![Value::Null, Value::Int(7)],
            "u2" => vec![Value::Int(1), Value::Str("x")],
            "u3" => vec![Value::Str("NaN"), Value::Float(0.5), Value::Int(3)],
            "u4" => vec![Value::Float(f64::NAN), Value::Float(2.5), Value::Null],
            _ => vec![
                Value::Int(1),
                Value::Uint(u64::MAX),
                Value::Float(0.25),
                Value::Str("A"),
            ],
        }
    }

    /// The JSON path's datum of `row`, or its error.
    fn through_json(writer: &AvroWriter, row: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let json = crate::schemas::row_json(row);
        writer.write(json.as_bytes(), &mut out).map(|()| out)
    }

    /// Rows of random values for every field: what the direct path writes
    /// is byte for byte what the JSON path writes for the row's JSON, and
    /// `write_row` agrees with the JSON path on every row, written or
    /// refused.
    #[test]
    fn a_row_is_written_as_the_json_path_writes_its_json() {
        let writer = AvroWriter::new(&AvroSchema::parse(FLAT).unwrap()).unwrap();
        let plan = writer.rows.as_ref().expect("a flat schema has a plan");
        let names = [
            "n", "b", "i", "l", "f", "d", "s", "e", "e2", "u1", "u2", "u3", "u4", "u5",
        ];
        let values = candidates();
        let (mut direct, mut x) = (0, 5u64);
        for _ in 0..20_000 {
            let mut row = Vec::new();
            let mut fields = RowWriter::new(&mut row);
            for name in names {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Mostly values that fit, so that whole rows are written.
                let pick = match x >> 60 {
                    0..=13 => {
                        let fitting = fits(name);
                        fitting[(x >> 33) as usize % fitting.len()]
                    }
                    _ => values[(x >> 33) as usize % values.len()],
                };
                fields.value(name, pick);
            }
            let expected = through_json(&writer, &row);
            let mut out = Vec::new();
            if plan.write(&row, &mut out) {
                direct += 1;
                assert_eq!(
                    Ok(&out),
                    expected.as_ref(),
                    "{:?}",
                    weir_flat::row::fields(&row).collect::<Vec<_>>()
                );
            } else {
                assert!(out.is_empty(), "a row left to JSON writes nothing");
            }
            let mut out = Vec::new();
            let written = writer.write_row(&row, &mut out).map(|()| out);
            assert_eq!(written, expected);
        }
        assert!(direct > 2_000, "only {direct} rows written directly");
    }

    /// Rows whose fields are not the record's, in its order, are left to
    /// the JSON path (which fills defaults, reorders, or refuses).
    #[test]
    fn rows_of_other_fields_go_through_json() {
        let schema = r#"{"type": "record", "name": "R", "fields": [
            {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"], "default": null}]}"#;
        let writer = AvroWriter::new(&AvroSchema::parse(schema).unwrap()).unwrap();
        let plan = writer.rows.as_ref().unwrap();
        let row = |write: &dyn Fn(&mut RowWriter<'_>)| {
            let mut row = Vec::new();
            write(&mut RowWriter::new(&mut row));
            row
        };
        let whole = row(&|r| {
            r.i64("a", 1).str("b", "x");
        });
        let missing = row(&|r| {
            r.i64("a", 1);
        });
        let reordered = row(&|r| {
            r.str("b", "x").i64("a", 1);
        });
        let extra = row(&|r| {
            r.i64("a", 1).str("b", "x").bool("c", true);
        });
        assert!(plan.write(&whole, &mut Vec::new()));
        for other in [&missing, &reordered, &extra] {
            assert!(!plan.write(other, &mut Vec::new()));
            let mut out = Vec::new();
            let written = writer.write_row(other, &mut out).map(|()| out);
            assert_eq!(written, through_json(&writer, other));
        }
        assert_eq!(
            through_json(&writer, &reordered),
            through_json(&writer, &whole)
        );
        assert!(through_json(&writer, &extra).unwrap_err().contains("`c`"));
        // A schema that is no flat record has no plan.
        let nested = r#"{"type": "record", "name": "N", "fields": [
            {"name": "a", "type": {"type": "array", "items": "long"}}]}"#;
        assert!(
            AvroWriter::new(&AvroSchema::parse(nested).unwrap())
                .unwrap()
                .rows
                .is_none()
        );
    }
}
