//! Reading fields of the job file's TOML tables: the helpers that both the
//! job file ([`crate::config`]) and the connectors ([`crate::connectors`])
//! use to turn a table into settings, with one-line messages that name the
//! offending key and say how to fix it; and the duration syntax of every
//! duration in the job file ([`parse_duration`]).
//!
//! A leaf: imports nothing of the crate. Every helper returns the message
//! alone (`Err(String)`); the caller adds the job file and the entry.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::{Table, Value};

/// Collapses a (possibly multi-line) error message into one line.
pub(crate) fn one_line(message: &impl std::fmt::Display) -> String {
    let text = message.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "invalid value".to_owned()
    } else {
        lines.join(" ")
    }
}

/// Deserializes one entry; with `#[serde(deny_unknown_fields)]` on `T`,
/// serde's message names an unknown key and lists the known ones.
///
/// Integers are best read as `i64` (TOML's own) so that range errors come
/// from `int_in`, and fields as `Option`s so that a missing one gets a
/// message of the caller's.
pub fn from_table<T: for<'de> Deserialize<'de>>(table: Table) -> Result<T, String> {
    table.try_into().map_err(|e| one_line(&e))
}

/// Removes and returns the entry's `type`, as the index of one of `types`
/// (each a type name and the keys allowed with it, in the order messages
/// list them), after checking that the table holds only allowed keys.
pub(crate) fn entry_type(table: &mut Table, types: &[(&str, Vec<&str>)]) -> Result<usize, String> {
    let names: Vec<String> = types.iter().map(|(name, _)| format!("{name:?}")).collect();
    let hint = format!("use type = {}", names.join(" | "));
    let kind = match table.remove("type") {
        Some(Value::String(kind)) => kind,
        Some(other) => {
            return Err(format!(
                "`type` must be a string (got {}); {hint}",
                other.type_str()
            ));
        }
        None => return Err(format!("`type` is missing; {hint}")),
    };
    let Some(index) = types.iter().position(|(name, _)| *name == kind) else {
        return Err(format!("unknown type {kind:?}; {hint}"));
    };
    let allowed = &types[index].1;
    match table.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!(
            "unknown key `{key}` for type = {kind:?} (allowed: {}); remove it",
            allowed.join(", ")
        )),
        None => Ok(index),
    }
}

/// A non-empty id made of `[A-Za-z0-9_-]`.
pub(crate) fn check_id(id: Option<String>) -> Result<String, String> {
    let id = id.unwrap_or_default();
    if id.is_empty() {
        return Err("`id` is missing or empty; add id = \"...\"".into());
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "id {id:?} may only contain A-Z, a-z, 0-9, `_` and `-`; rename it"
        ));
    }
    Ok(id)
}

/// `value` (else `default`), checked to lie in `lo..=hi` and converted to `T`.
pub(crate) fn int_in<T: TryFrom<i64>>(
    key: &str,
    value: Option<i64>,
    default: i64,
    lo: i64,
    hi: i64,
) -> Result<T, String> {
    let v = value.unwrap_or(default);
    let range = if hi == i64::MAX {
        format!(">= {lo}")
    } else {
        format!("in {lo}..={hi}")
    };
    let out_of_range = || format!("`{key}` = {v} is out of range; use a value {range}");
    if !(lo..=hi).contains(&v) {
        return Err(out_of_range());
    }
    T::try_from(v).map_err(|_| out_of_range())
}

/// Parses a duration as the job file writes it: `"500ms"`, `"2s"`, `"1m 30s"`
/// (humantime). The error names the text and shows the syntax; callers put
/// the key or flag in front.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(weir::config::parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert!(weir::config::parse_duration("soon").unwrap_err().contains("is not a duration"));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| {
        format!("{text:?} is not a duration ({e}); use e.g. \"1s\", \"500ms\", \"2m\"")
    })
}

/// The duration `value` (else `default`) of setting `key`; the message
/// names the key.
pub(crate) fn duration(
    key: &str,
    value: Option<String>,
    default: &str,
) -> Result<Duration, String> {
    let text = value.unwrap_or_else(|| default.to_string());
    parse_duration(&text).map_err(|e| format!("`{key}` = {e}"))
}

/// Joins a non-empty path onto the job folder `dir` (an absolute path
/// replaces the folder).
pub(crate) fn resolve(dir: &Path, key: &str, value: Option<String>) -> Result<PathBuf, String> {
    match value {
        Some(path) if !path.is_empty() => Ok(dir.join(path)),
        _ => Err(format!(
            "`{key}` is missing or empty; add {key} = \"...\" (relative to the job file)"
        )),
    }
}

/// `(relative to DIR)`: how a message about a missing file says where a
/// relative path was looked up.
pub(crate) fn relative_to(dir: &Path) -> String {
    format!("(relative to {})", dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    #[test]
    fn entry_type_names_the_types_and_the_allowed_keys() {
        let types = [("a", vec!["id", "type", "x"]), ("b", vec!["id", "type"])];
        let mut t = table("type = \"b\"\nid = \"i\"");
        assert_eq!(entry_type(&mut t, &types), Ok(1));
        assert!(!t.contains_key("type"));
        let err = |text: &str| entry_type(&mut table(text), &types).unwrap_err();
        assert_eq!(err("id = 1"), "`type` is missing; use type = \"a\" | \"b\"");
        assert_eq!(
            err("type = 1"),
            "`type` must be a string (got integer); use type = \"a\" | \"b\""
        );
        assert_eq!(
            err("type = \"c\""),
            "unknown type \"c\"; use type = \"a\" | \"b\""
        );
        assert_eq!(
            err("type = \"b\"\nx = 1"),
            "unknown key `x` for type = \"b\" (allowed: id, type); remove it"
        );
    }

    #[test]
    fn ints_are_checked_against_their_range() {
        assert_eq!(int_in::<u32>("n", None, 3, 1, 5), Ok(3));
        assert_eq!(
            int_in::<u32>("n", Some(0), 3, 1, 5),
            Err("`n` = 0 is out of range; use a value in 1..=5".into())
        );
        assert_eq!(
            int_in::<u64>("n", Some(-1), 0, 0, i64::MAX),
            Err("`n` = -1 is out of range; use a value >= 0".into())
        );
    }

    #[test]
    fn ids_and_paths() {
        assert_eq!(check_id(Some("a-b_1".into())), Ok("a-b_1".into()));
        assert!(check_id(None).unwrap_err().contains("`id` is missing"));
        assert!(
            check_id(Some("a b".into()))
                .unwrap_err()
                .contains("may only")
        );
        let dir = Path::new("jobs");
        assert_eq!(resolve(dir, "p", Some("x".into())), Ok(dir.join("x")));
        assert_eq!(
            resolve(dir, "p", Some("/x".into())),
            Ok(PathBuf::from("/x"))
        );
        assert!(resolve(dir, "p", Some(String::new())).is_err());
        assert_eq!(one_line(&"a\n\n  b  \n"), "a b");
    }
}
