//! `record_inputs` and `record_max_bytes` of an `[[operator]]`:
//! [`RecordInputs`], how much of what its instances received a job keeps
//! (`weir replay`, `weir shadow`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::limits::parse_duration;
use super::limits::{format_size, parse_size};

/// Bytes of recorded input an operator keeps when `record_max_bytes` is
/// not set.
pub const DEFAULT_RECORD_MAX_BYTES: u64 = 256 << 20;

/// What an operator's recording keeps: the calls its instances received
/// in the newest checkpoint epochs the bound allows, at most `max_bytes`
/// of them (encoded) over all instances. The checkpoints a recorded epoch
/// starts from are kept as long as the epoch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordInputs {
    /// How many epochs, or for how long.
    pub keep: Keep,
    /// Most bytes of recordings kept (`record_max_bytes`).
    pub max_bytes: u64,
}

/// The span of `record_inputs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    /// The newest this many checkpoint epochs (`"20 checkpoints"`).
    Checkpoints(u32),
    /// The epochs of checkpoints started within this many milliseconds
    /// of the newest one (`"30m"`).
    Millis(u64),
}

impl std::fmt::Display for RecordInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.keep {
            Keep::Checkpoints(1) => write!(f, "the last checkpoint")?,
            Keep::Checkpoints(n) => write!(f, "the last {n} checkpoints")?,
            Keep::Millis(ms) => write!(
                f,
                "the last {}",
                humantime::format_duration(Duration::from_millis(ms))
            )?,
        }
        write!(f, ", at most {}", format_size(self.max_bytes))
    }
}

/// Reads `record_inputs` (`"N checkpoints"` or a duration) and
/// `record_max_bytes`; `None` when the operator records nothing.
pub(super) fn build_record_inputs(
    keep: Option<String>,
    max_bytes: Option<String>,
) -> Result<Option<RecordInputs>, String> {
    const HINT: &str = "use e.g. record_inputs = \"20 checkpoints\" or \"30m\"";
    let Some(text) = keep else {
        return match max_bytes {
            Some(_) => Err(format!(
                "`record_max_bytes` is set but `record_inputs` is not; {HINT}"
            )),
            None => Ok(None),
        };
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let keep = match words.as_slice() {
        [n, unit] if unit.starts_with("checkpoint") => {
            let n: u32 = n.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!(
                    "`record_inputs` = {text:?}: the count must be a whole number from 1; {HINT}"
                )
            })?;
            if !matches!(*unit, "checkpoint" | "checkpoints") {
                return Err(format!(
                    "`record_inputs` = {text:?}: unknown unit {unit:?}; {HINT}"
                ));
            }
            Keep::Checkpoints(n)
        }
        _ => {
            let d = parse_duration(&text).map_err(|e| format!("`record_inputs` = {e}; {HINT}"))?;
            if d.is_zero() {
                return Err(format!("`record_inputs` = {text:?} keeps nothing; {HINT}"));
            }
            Keep::Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
    };
    let max_bytes = match max_bytes {
        None => DEFAULT_RECORD_MAX_BYTES,
        Some(text) => match parse_size(&text) {
            Ok(0) => return Err("`record_max_bytes` = 0 keeps nothing; use e.g. \"1GiB\"".into()),
            Ok(n) => n,
            Err(e) => return Err(format!("`record_max_bytes` = {e}")),
        },
    };
    Ok(Some(RecordInputs { keep, max_bytes }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(keep: &str, max: Option<&str>) -> Result<Option<RecordInputs>, String> {
        build_record_inputs(Some(keep.into()), max.map(Into::into))
    }

    #[test]
    fn record_inputs_reads_checkpoints_or_a_duration_with_a_byte_bound() {
        let keep = |k: &str| read(k, None).unwrap().unwrap().keep;
        assert_eq!(keep("20 checkpoints"), Keep::Checkpoints(20));
        assert_eq!(keep("1 checkpoint"), Keep::Checkpoints(1));
        assert_eq!(keep("30m"), Keep::Millis(30 * 60_000));
        assert_eq!(keep("1h 30m"), Keep::Millis(90 * 60_000));
        let r = read("5 checkpoints", Some("1GiB")).unwrap().unwrap();
        assert_eq!(r.max_bytes, 1 << 30);
        assert_eq!(r.to_string(), "the last 5 checkpoints, at most 1GiB");
        assert_eq!(
            read("2s", None).unwrap().unwrap().to_string(),
            "the last 2s, at most 256MiB"
        );
        assert_eq!(build_record_inputs(None, None), Ok(None));
    }

    #[test]
    fn record_inputs_refusals_say_what_to_write() {
        let err = |k: &str, m: Option<&str>| read(k, m).unwrap_err();
        assert!(err("0 checkpoints", None).contains("a whole number from 1"));
        assert!(err("x checkpoints", None).contains("a whole number from 1"));
        assert!(err("3 checkpointz", None).contains("unknown unit"));
        assert!(err("soon", None).contains("is not a duration"));
        assert!(err("0s", None).contains("keeps nothing"));
        assert!(err("5 checkpoints", Some("0")).contains("keeps nothing"));
        assert!(err("5 checkpoints", Some("lots")).contains("`record_max_bytes` = "));
        let e = build_record_inputs(None, Some("1GiB".into())).unwrap_err();
        assert!(e.contains("`record_inputs` is not"), "{e}");
    }
}
