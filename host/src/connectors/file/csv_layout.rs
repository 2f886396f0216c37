//! The settings of the file sink's format `csv` (`columns`, `header`,
//! `delimiter`), checked when the job file is read, and the columns a CSV
//! file that is not empty names in its header line (module `csv_out`
//! writes the lines).

use std::fmt;
use std::fs::File;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, Visitor};

/// How a file sink of format = "csv" lays out its file (`columns`,
/// `header`, `delimiter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvLayout {
    /// The columns, in order (`columns`); `None`: the header line of a
    /// file that is not empty, else the fields of the first record.
    pub columns: Option<Vec<String>>,
    /// Whether an empty file gets a header line (`header`, default true).
    pub header: bool,
    /// The byte between cells (`delimiter`, default `,`).
    pub delimiter: u8,
}

/// The keys of a file sink that only format = "csv" reads, as the job
/// file gives them.
#[derive(Debug, Clone, Default)]
pub struct CsvKeys {
    /// `columns`: a list of names.
    pub columns: Option<ColumnNames>,
    /// `header`.
    pub header: Option<bool>,
    /// `delimiter`: one ASCII character.
    pub delimiter: Option<String>,
}

impl CsvKeys {
    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        self.columns.is_none() && self.header.is_none() && self.delimiter.is_none()
    }
}

impl CsvLayout {
    /// The layout `keys` say; `Err` is one line naming the key and a fix.
    pub fn read(keys: CsvKeys) -> Result<CsvLayout, String> {
        let delimiter = match keys.delimiter.as_deref() {
            None => b',',
            Some(d) => match d.as_bytes() {
                [b'"' | b'\r' | b'\n'] => {
                    return Err(format!(
                        "delimiter = {d:?} would break CSV's quoting or its lines; use another character, such as \",\", \";\", \"|\" or \"\\t\""
                    ));
                }
                [b] if b.is_ascii() => *b,
                _ => {
                    return Err(format!(
                        "delimiter = {d:?} is not one ASCII character; write one, such as \",\", \";\", \"|\" or \"\\t\""
                    ));
                }
            },
        };
        let columns = keys.columns.map(columns).transpose()?;
        let header = keys.header.unwrap_or(true);
        if !header && columns.is_none() {
            return Err("header = false needs `columns`: without a header line a restart cannot read the columns back from the file; list them, as columns = [\"word\", \"count\"]".into());
        }
        Ok(CsvLayout {
            columns,
            header,
            delimiter,
        })
    }
}

/// The value of `columns` as the job file gives it: a list of names (a
/// table, a csv source's shape, is refused saying so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnNames(pub Vec<String>);

/// What `columns` of a csv file sink is.
const SHAPE: &str = "the list of the csv file's columns in order, as columns = [\"word\", \"count\"] (a table of cell types is a csv source's `columns`)";

impl<'de> serde::Deserialize<'de> for ColumnNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> Visitor<'de> for Names {
            type Value = ColumnNames;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(SHAPE)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ColumnNames, A::Error> {
                let mut names = Vec::new();
                while let Some(item) = seq.next_element::<toml::Value>()? {
                    let toml::Value::String(name) = item else {
                        return Err(de::Error::custom(format!(
                            "`columns` is {SHAPE}; {item} is no name"
                        )));
                    };
                    names.push(name);
                }
                Ok(ColumnNames(names))
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<ColumnNames, A::Error> {
                Err(de::Error::custom(format!("`columns` is {SHAPE}")))
            }
        }
        deserializer.deserialize_any(Names)
    }
}

/// The names of `columns = [...]`, checked.
fn columns(ColumnNames(names): ColumnNames) -> Result<Vec<String>, String> {
    if let Some(twice) = repeated(&names) {
        return Err(format!("`columns` names {twice:?} twice; list each once"));
    }
    if names.is_empty() {
        return Err(
            "`columns` is empty; list the columns, or remove it to take the first record's fields"
                .into(),
        );
    }
    Ok(names)
}

/// The first of `names` that an earlier one repeats.
fn repeated(names: &[String]) -> Option<&String> {
    (names.iter().enumerate()).find_map(|(i, n)| names[..i].contains(n).then_some(n))
}

impl CsvLayout {
    /// The columns of the header line of the CSV file `path` (not empty),
    /// checked against `columns`; `Err` says why they are not, and what
    /// to do.
    pub(crate) fn header_of(&self, path: &Path) -> Result<Vec<String>, String> {
        let shown = path.display();
        let anew = "move it away, or rerun with `--restore none` to write it anew";
        let file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(self.delimiter)
            .from_reader(file);
        let mut record = csv::StringRecord::new();
        let header: Vec<String> = match reader.read_record(&mut record) {
            Ok(true) => record.iter().map(str::to_owned).collect(),
            Ok(false) => {
                return Err(format!(
                    "{shown} is not empty but has no CSV header line: {anew}"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "{shown} is not empty and its first line is no CSV header ({e}): {anew}"
                ));
            }
        };
        let quoted = |names: &[String]| {
            let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            quoted.join(", ")
        };
        if let Some(twice) = repeated(&header) {
            return Err(format!(
                "{shown} has a header line naming the column {twice:?} twice, so it is no file this sink wrote: {anew}"
            ));
        }
        match &self.columns {
            Some(columns) if *columns != header => Err(format!(
                "{shown} holds CSV with the columns [{}] (its header line), and the sink's `columns` are [{}]: set columns = [{}] to continue it, or {anew}",
                quoted(&header),
                quoted(columns),
                quoted(&header)
            )),
            _ => Ok(header),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings are checked in one line each, naming the fix.
    #[test]
    fn layouts_are_checked() {
        let read = |columns: Option<&str>, header: Option<bool>, delimiter: Option<&str>| {
            let columns = match columns {
                None => None,
                Some(c) => {
                    let t: toml::Table = format!("c = {c}").parse().unwrap();
                    let names = t["c"].clone().try_into::<ColumnNames>();
                    Some(names.map_err(|e| crate::fields::one_line(&e))?)
                }
            };
            let delimiter = delimiter.map(str::to_owned);
            CsvLayout::read(CsvKeys {
                columns,
                header,
                delimiter,
            })
        };
        let cases = [
            (None, Some(false), None, "header = false needs `columns`"),
            (
                Some("{ a = \"i64\" }"),
                None,
                None,
                "a csv source's `columns`",
            ),
            (Some("[\"a\", 1]"), None, None, "1 is no name"),
            (Some("[]"), None, None, "`columns` is empty"),
            (Some("[\"a\", \"a\"]"), None, None, "names \"a\" twice"),
            (None, None, Some(",,"), "not one ASCII character"),
            (None, None, Some(""), "not one ASCII character"),
            (None, None, Some("é"), "not one ASCII character"),
            (None, None, Some("\""), "would break CSV's quoting"),
            (None, None, Some("\n"), "would break CSV's quoting"),
        ];
        for (columns, header, delimiter, want) in cases {
            let e = read(columns, header, delimiter).unwrap_err();
            assert!(e.contains(want), "{columns:?} {delimiter:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let ok = read(Some("[\"a\", \"b\"]"), Some(false), Some("\t")).unwrap();
        assert_eq!(
            ok,
            CsvLayout {
                columns: Some(vec!["a".into(), "b".into()]),
                header: false,
                delimiter: b'\t',
            }
        );
        let default = CsvLayout {
            columns: None,
            header: true,
            delimiter: b',',
        };
        assert_eq!(read(None, None, None).unwrap(), default);
    }
}
