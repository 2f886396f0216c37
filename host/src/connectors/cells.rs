//! The types of a `csv` source's columns (`columns`), and its cells written
//! as fields of a row of those types ([`CellType::write`]), which readers
//! that want text get as JSON (`weir_flat::row`).
//!
//! `columns = { amount = "decimal", qty = "i64", ts = "timestamp" }` types
//! the columns it names (the others stay strings); `columns = "infer"`
//! types each cell by what it looks like. An empty cell of a typed column
//! is `null`; a cell that is not of its column's type makes the row a bad
//! record.

use serde::Deserialize;
use weir_flat::row::RowWriter;

use crate::time::{format_rfc3339, parse_cell};

/// What a column's cells become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    /// A JSON string, as written (the type of columns `columns` leaves out).
    String,
    /// A JSON integer (a 64-bit signed one).
    I64,
    /// A JSON number read as a 64-bit float (finite).
    F64,
    /// A JSON number with the cell's digits, exactly (`12.50` stays
    /// `12.50`): for money and `numeric` columns.
    Decimal,
    /// `true` or `false` (from `true`/`false`, `t`/`f`, `yes`/`no`,
    /// `1`/`0`, any case).
    Bool,
    /// An RFC 3339 time in UTC with milliseconds, from an RFC 3339 time or
    /// integer milliseconds since the Unix epoch.
    Timestamp,
}

/// How a `csv` source types its columns (`columns`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Columns {
    /// Every cell a string (the default).
    #[default]
    Strings,
    /// The named columns of those types, the others strings.
    Typed(Vec<(String, CellType)>),
    /// Each cell by what it looks like (`columns = "infer"`): an integer
    /// (no leading zeros, within 64 bits) or another JSON number as a
    /// number, `true`/`false` as a boolean, anything else a string.
    Infer,
}

impl<'de> Deserialize<'de> for Columns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Columns;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "\"infer\" or a table of column types such as { amount = \"decimal\", qty = \"i64\" }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Columns, E> {
                match text {
                    "infer" => Ok(Columns::Infer),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Columns, A::Error> {
                let mut typed = Vec::new();
                while let Some((column, kind)) = map.next_entry::<String, CellType>()? {
                    typed.push((column, kind));
                }
                Ok(Columns::Typed(typed))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Columns {
    /// The type of each of `headers`' columns: `None` for one left a
    /// string; with `Infer`, every column's `None` too and
    /// [`infer`](Self::is_infer) says so.
    pub fn types(&self, headers: &[String]) -> Vec<Option<CellType>> {
        headers
            .iter()
            .map(|h| match self {
                Columns::Typed(typed) => (typed.iter())
                    .find(|(c, _)| c == h)
                    .map(|(_, t)| *t)
                    .filter(|t| *t != CellType::String),
                _ => None,
            })
            .collect()
    }

    /// Whether cells are typed by what they look like.
    pub fn is_infer(&self) -> bool {
        *self == Columns::Infer
    }

    /// The columns the header must have.
    pub fn named(&self) -> impl Iterator<Item = &str> {
        let typed = match self {
            Columns::Typed(typed) => typed.as_slice(),
            _ => &[],
        };
        typed.iter().map(|(c, _)| c.as_str())
    }
}

impl CellType {
    /// The name the job file writes.
    pub fn name(self) -> &'static str {
        match self {
            CellType::String => "string",
            CellType::I64 => "i64",
            CellType::F64 => "f64",
            CellType::Decimal => "decimal",
            CellType::Bool => "bool",
            CellType::Timestamp => "timestamp",
        }
    }

    /// Appends `cell` to `row` as field `name` of this type (an empty
    /// cell: `null`); `Err` says what the cell is not, `row` untouched.
    pub fn write(self, name: &str, cell: &str, row: &mut RowWriter) -> Result<(), String> {
        let text = cell.trim();
        if text.is_empty() && self != CellType::String {
            row.null(name);
            return Ok(());
        }
        let not = |what: &str| Err(format!("{} is not {what}", shown(cell)));
        match self {
            CellType::String => row.str(name, cell),
            CellType::I64 => match text.parse::<i64>() {
                Ok(n) => row.i64(name, n),
                Err(_) => return not("a 64-bit integer"),
            },
            CellType::F64 => match text.parse::<f64>() {
                Ok(x) if x.is_finite() => row.f64(name, x),
                _ => return not("a finite number"),
            },
            CellType::Decimal => match decimal(text) {
                Some(number) => row.decimal(name, &number),
                None => return not("a decimal number"),
            },
            CellType::Bool => match text.to_ascii_lowercase().as_str() {
                "true" | "t" | "yes" | "y" | "1" => row.bool(name, true),
                "false" | "f" | "no" | "n" | "0" => row.bool(name, false),
                _ => return not("a boolean (true/false, t/f, yes/no, 1/0)"),
            },
            CellType::Timestamp => match parse_cell(text).and_then(format_rfc3339) {
                Some(time) => row.str(name, &time),
                None => {
                    return not(
                        "a time (RFC 3339, or milliseconds since the epoch, in the years 0 to 9999)",
                    );
                }
            },
        };
        Ok(())
    }
}

/// Appends `cell` to `row` as field `name` of the type it looks like
/// (`columns = "infer"`): a 64-bit integer without leading zeros, another
/// JSON number as written (a decimal), `true` or `false`, else a string.
pub fn write_inferred(name: &str, cell: &str, row: &mut RowWriter) {
    let number = weir_flat::json::is_number(cell.as_bytes());
    // A JSON integer; `-0` is kept as written, a decimal.
    let integer = number && !cell.contains(['.', 'e', 'E']) && cell != "-0";
    match cell.parse::<i64>() {
        Ok(n) if integer => row.i64(name, n),
        // Past 64 bits.
        _ if integer => row.str(name, cell),
        _ if number => row.decimal(name, cell),
        _ if cell == "true" || cell == "false" => row.bool(name, cell == "true"),
        _ => row.str(name, cell),
    };
}

/// A cell for messages: quoted, at most 40 characters.
fn shown(cell: &str) -> String {
    match cell.char_indices().nth(40) {
        Some((end, _)) => format!("{:?}...", &cell[..end]),
        None => format!("{cell:?}"),
    }
}

/// The sign-less integer digits, fraction digits and exponent of a
/// decimal number `[+-]digits[.digits][(e|E)[+-]digits]`, at least one
/// digit before or after the point.
fn decimal_parts(text: &str) -> Option<(&str, Option<&str>, Option<&str>)> {
    let unsigned = text
        .strip_prefix('-')
        .or_else(|| text.strip_prefix('+'))
        .unwrap_or(text);
    let (mantissa, exp) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (mantissa, None),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && all_digits(e)
    });
    let digits_ok = all_digits(int)
        && frac.is_none_or(all_digits)
        && !(int.is_empty() && frac.is_none_or(str::is_empty));
    (exp_ok && digits_ok).then_some((int, frac, exp))
}

/// `text`, a decimal number, as a JSON number with the same digits: no
/// `+`, no leading zeros, `0` before a bare point, no bare trailing point.
fn decimal(text: &str) -> Option<String> {
    let (int, frac, exp) = decimal_parts(text)?;
    let mut out = String::with_capacity(text.len() + 1);
    if text.starts_with('-') {
        out.push('-');
    }
    match int.trim_start_matches('0') {
        "" => out.push('0'),
        int => out.push_str(int),
    }
    if let Some(frac) = frac.filter(|f| !f.is_empty()) {
        out.push('.');
        out.push_str(frac);
    }
    if let Some(exp) = exp {
        out.push('e');
        out.push_str(exp.strip_prefix('+').unwrap_or(exp));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON text of the one field `c` of `row`.
    fn field_json(row: &[u8]) -> String {
        let mut json = Vec::new();
        weir_flat::row::write_json(row, &mut json).unwrap();
        let json = String::from_utf8(json).unwrap();
        let value = json.strip_prefix(r#"{"c":"#).unwrap().strip_suffix('}');
        value.unwrap().to_owned()
    }

    /// A row of the one field `c` that `write` writes, and its JSON text.
    fn json_of_field(write: impl FnOnce(&mut RowWriter)) -> (Vec<u8>, String) {
        let mut row = Vec::new();
        write(&mut RowWriter::new(&mut row));
        let json = field_json(&row);
        (row, json)
    }

    fn cell(kind: CellType, text: &str) -> Result<String, String> {
        let mut row = Vec::new();
        kind.write("c", text, &mut RowWriter::new(&mut row))?;
        Ok(field_json(&row))
    }

    #[test]
    fn cells_become_values_of_their_column_type() {
        use CellType::*;
        for (kind, text, want) in [
            (I64, "42", "42"),
            (I64, " -7 ", "-7"),
            (I64, "+5", "5"),
            (I64, "", "null"),
            (F64, "2.5", "2.5"),
            (F64, "1e3", "1000.0"),
            (Decimal, "12.50", "12.50"),
            (Decimal, "-0012.5", "-12.5"),
            (Decimal, ".5", "0.5"),
            (Decimal, "5.", "5"),
            (Decimal, "+1.5E+3", "1.5e3"),
            (
                Decimal,
                "123456789012345678901234567890.01",
                "123456789012345678901234567890.01",
            ),
            (Bool, "TRUE", "true"),
            (Bool, "f", "false"),
            (Bool, "1", "true"),
            (
                Timestamp,
                "2024-01-31T12:00:00.25+01:00",
                "\"2024-01-31T11:00:00.250Z\"",
            ),
            (Timestamp, "0", "\"1970-01-01T00:00:00.000Z\""),
            (String, "", "\"\""),
            (String, " a\"b ", "\" a\\\"b \""),
        ] {
            assert_eq!(cell(kind, text).as_deref(), Ok(want), "{kind:?} {text:?}");
            let value: serde_json::Value = serde_json::from_str(want).unwrap();
            assert!(!value.is_string() || matches!(kind, String | Timestamp));
        }
        for (kind, text, want) in [
            (I64, "4.5", "\"4.5\" is not a 64-bit integer"),
            (I64, "99999999999999999999", "not a 64-bit integer"),
            (F64, "NaN", "\"NaN\" is not a finite number"),
            (F64, "inf", "not a finite number"),
            (Decimal, "1.2.3", "\"1.2.3\" is not a decimal number"),
            (Decimal, "0x10", "not a decimal number"),
            (Decimal, ".", "not a decimal number"),
            (Decimal, "1e", "not a decimal number"),
            (Bool, "maybe", "\"maybe\" is not a boolean"),
            (Timestamp, "yesterday", "\"yesterday\" is not a time"),
        ] {
            let err = cell(kind, text).unwrap_err();
            assert!(err.contains(want), "{kind:?} {text:?}: {err}");
        }
    }

    #[test]
    fn each_type_is_a_field_of_its_kind() {
        use weir_flat::row::{Value, fields};
        let field = |write: &dyn Fn(&mut RowWriter)| {
            let (row, _) = json_of_field(write);
            match fields(&row).next().unwrap().unwrap().1 {
                Value::Null => "null",
                Value::Bool(_) => "bool",
                Value::Int(_) => "int",
                Value::Uint(_) => "uint",
                Value::Float(_) => "float",
                Value::Str(_) => "str",
                Value::Decimal(_) => "decimal",
            }
        };
        let typed = |kind: CellType, text: &'static str| {
            field(&move |row: &mut RowWriter| kind.write("c", text, row).unwrap())
        };
        assert_eq!(typed(CellType::I64, "1"), "int");
        assert_eq!(typed(CellType::I64, ""), "null");
        assert_eq!(typed(CellType::F64, "1"), "float");
        assert_eq!(typed(CellType::Decimal, "1.5"), "decimal");
        assert_eq!(typed(CellType::Bool, "no"), "bool");
        assert_eq!(typed(CellType::Timestamp, "0"), "str");
        assert_eq!(typed(CellType::String, "1"), "str");
        let inferred =
            |text: &'static str| field(&move |row: &mut RowWriter| write_inferred("c", text, row));
        assert_eq!(inferred("-3"), "int");
        assert_eq!(inferred("2.50"), "decimal");
        assert_eq!(inferred("false"), "bool");
        assert_eq!(inferred("01"), "str");
    }

    #[test]
    fn inferred_cells_keep_what_is_not_plainly_a_number_as_text() {
        for (text, want) in [
            ("42", "42"),
            ("-3", "-3"),
            ("0", "0"),
            ("2.50", "2.50"),
            ("-1e-3", "-1e-3"),
            ("-0", "-0"),
            ("true", "true"),
            ("01234", "\"01234\""),
            ("+5", "\"+5\""),
            ("1.", "\"1.\""),
            ("99999999999999999999", "\"99999999999999999999\""),
            ("", "\"\""),
            ("TRUE", "\"TRUE\""),
            ("n/a", "\"n/a\""),
        ] {
            let (_, json) = json_of_field(|row| write_inferred("c", text, row));
            assert_eq!(json, want, "{text:?}");
        }
    }

    #[test]
    fn the_setting_is_infer_or_a_table_of_types() {
        let read = |text: &str| -> Result<Columns, String> {
            #[derive(Deserialize)]
            struct T {
                columns: Columns,
            }
            toml::from_str::<T>(text)
                .map(|t| t.columns)
                .map_err(|e| e.to_string())
        };
        assert_eq!(read("columns = \"infer\""), Ok(Columns::Infer));
        let typed = read("columns = { qty = \"i64\", note = \"string\" }").unwrap();
        let Columns::Typed(mut list) = typed.clone() else {
            panic!("{typed:?}");
        };
        list.sort();
        assert_eq!(
            list,
            [
                ("note".into(), CellType::String),
                ("qty".into(), CellType::I64)
            ]
        );
        let headers = ["note".to_owned(), "qty".to_owned(), "x".to_owned()];
        assert_eq!(typed.types(&headers), [None, Some(CellType::I64), None]);
        let mut named: Vec<&str> = typed.named().collect();
        named.sort();
        assert_eq!(named, ["note", "qty"]);
        assert!(read("columns = \"guess\"").is_err());
        let err = read("columns = { qty = \"int\" }").unwrap_err();
        assert!(err.contains("unknown variant `int`"), "{err}");
        assert!(err.contains("i64"), "{err}");
    }
}
