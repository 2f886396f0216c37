//! The job's `[checkpoint]` table ([`CheckpointConfig`]: interval, folder,
//! retention, [`CheckpointMode`] and alignment timeout) and its `[restart]` table ([`RestartStrategy`]: what to do
//! when an attempt fails).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Table;

use crate::fields::{duration, from_table, int_in, parse_duration, resolve};

/// When to retry a failed attempt (the job file's `[restart]` table).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum RestartStrategy {
    /// Never: the first failure stops the job.
    #[default]
    None,
    /// Up to `attempts` restarts, `delay` apart.
    FixedDelay {
        /// Most restarts.
        attempts: u32,
        /// Wait before each restart.
        delay: Duration,
    },
    /// Up to `attempts` restarts; the wait starts at `initial` and is
    /// multiplied by `multiplier` after each failure, up to `max`.
    ExponentialBackoff {
        /// Most restarts.
        attempts: u32,
        /// First wait.
        initial: Duration,
        /// Longest wait.
        max: Duration,
        /// Growth factor, >= 1.
        multiplier: f64,
    },
}

impl RestartStrategy {
    /// The wait before restart number `restart` (1 = the first), or `None`
    /// when no more restarts are allowed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir::config::RestartStrategy;
    /// let s = RestartStrategy::ExponentialBackoff {
    ///     attempts: 4, initial: Duration::from_millis(100), max: Duration::from_millis(300), multiplier: 2.0,
    /// };
    /// assert_eq!(s.delay(1), Some(Duration::from_millis(100)));
    /// assert_eq!(s.delay(3), Some(Duration::from_millis(300)));
    /// assert_eq!(s.delay(5), None);
    /// ```
    pub fn delay(&self, restart: u32) -> Option<Duration> {
        match *self {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay } => {
                (restart <= attempts).then_some(delay)
            }
            RestartStrategy::ExponentialBackoff {
                attempts,
                initial,
                max,
                multiplier,
            } => (restart <= attempts).then(|| {
                let factor = multiplier
                    .max(1.0)
                    .powi(restart.saturating_sub(1).min(64) as i32);
                initial.mul_f64(factor).min(max)
            }),
        }
    }

    /// Most restarts.
    pub fn attempts(&self) -> u32 {
        match *self {
            RestartStrategy::None => 0,
            RestartStrategy::FixedDelay { attempts, .. }
            | RestartStrategy::ExponentialBackoff { attempts, .. } => attempts,
        }
    }
}

/// How operator instances take checkpoints (`[checkpoint] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckpointMode {
    /// `"aligned"`: wait at every instance until each input delivered the
    /// barrier (records behind an early barrier are held back).
    #[default]
    Aligned,
    /// `"unaligned"`: the first barrier overtakes the records queued ahead
    /// of the others, which are stored with the checkpoint (in-flight data)
    /// and replayed first on restore.
    Unaligned,
}

/// Checkpoint settings (`[checkpoint]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Time between checkpoints; `None` turns checkpoints off. Never zero.
    pub interval: Option<Duration>,
    /// Folder holding checkpoints (resolved onto the job folder; default
    /// [`default_state_dir`] of the job's name).
    pub dir: PathBuf,
    /// Whether `dir` is the default (the job file sets no `dir`).
    pub default_dir: bool,
    /// Number of complete checkpoints kept (at least 1, default 3).
    pub retain: usize,
    /// Aligned (default) or unaligned checkpoints. Sinks always align.
    pub mode: CheckpointMode,
    /// With `Aligned`: an instance whose alignment of a checkpoint lasts
    /// longer than this takes that checkpoint unaligned. `None` (absent or
    /// `"0s"`): never. Never `Some(0)`.
    pub alignment_timeout: Option<Duration>,
    /// The object store every checkpoint is copied to (`s3://bucket/prefix`,
    /// `gs://`, `az://`, `file:///path`), if any: `crate::remote`.
    pub store: Option<String>,
    /// Settings of the object store's client (`[checkpoint.store_options]`),
    /// over those of the environment.
    pub store_options: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    interval: Option<String>,
    dir: Option<String>,
    retain: Option<i64>,
    mode: Option<String>,
    alignment_timeout: Option<String>,
    store: Option<String>,
    store_options: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRestart {
    strategy: Option<String>,
    attempts: Option<i64>,
    delay: Option<String>,
    initial: Option<String>,
    max: Option<String>,
    multiplier: Option<f64>,
}

/// The checkpoint folder of job `name` when its `[checkpoint]` sets no
/// `dir`, relative to the job file's folder: `state/<name>`, where every
/// character of the name other than a letter, a digit, `-`, `_` or `.` is
/// replaced by `_`. Jobs in one folder so keep apart; a name without a
/// letter or digit (`..`) is refused.
///
/// ```
/// use std::path::PathBuf;
/// use weir::config::default_state_dir;
/// assert_eq!(default_state_dir("wordcount"), Ok(PathBuf::from("state/wordcount")));
/// assert_eq!(default_state_dir("my job/v2"), Ok(PathBuf::from("state/my_job_v2")));
/// assert!(default_state_dir("..").is_err());
/// ```
pub fn default_state_dir(name: &str) -> Result<PathBuf, String> {
    if !name.chars().any(char::is_alphanumeric) {
        return Err(format!(
            "`name` = {name:?} cannot name the default checkpoint folder state/<name>; \
             put a letter or digit in `name`, or set `dir` in [checkpoint]"
        ));
    }
    let safe = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    let folder: String = name
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    Ok(Path::new("state").join(folder))
}

/// The `[checkpoint]` table (empty when absent) of job `name`; `dir` is
/// the job folder.
pub(super) fn build_checkpoint(
    dir: &Path,
    name: &str,
    table: Table,
) -> Result<CheckpointConfig, String> {
    let raw: RawCheckpoint = from_table(table)?;
    let interval = match raw.interval.as_deref().map(parse_duration) {
        None => None,
        Some(Ok(interval)) if !interval.is_zero() => Some(interval),
        Some(Ok(_)) => {
            return Err(
                "`interval` is zero; use e.g. \"1s\", or remove it to turn checkpoints off".into(),
            );
        }
        Some(Err(e)) => return Err(format!("`interval` = {e}")),
    };
    let default_dir = raw.dir.is_none();
    let folder = match raw.dir {
        Some(folder) => folder,
        None => default_state_dir(name)?.display().to_string(),
    };
    let mode = match raw.mode.as_deref() {
        None | Some("aligned") => CheckpointMode::Aligned,
        Some("unaligned") => CheckpointMode::Unaligned,
        Some(other) => {
            return Err(format!(
                "`mode` = {other:?} is unknown; use \"aligned\" or \"unaligned\""
            ));
        }
    };
    let alignment_timeout = match raw.alignment_timeout {
        Some(_) if mode == CheckpointMode::Unaligned => {
            return Err(
                "`alignment_timeout` applies to mode = \"aligned\" only (unaligned checkpoints never wait); remove it"
                    .into(),
            );
        }
        Some(text) => {
            Some(duration("alignment_timeout", Some(text), "0s")?).filter(|d| !d.is_zero())
        }
        None => None,
    };
    if let Some(url) = &raw.store {
        check_store_url(url)?;
    } else if raw.store_options.is_some() {
        return Err("`store_options` without `store`: set `store` or remove them".into());
    }
    Ok(CheckpointConfig {
        store: raw.store,
        store_options: raw.store_options.unwrap_or_default(),
        interval,
        dir: resolve(dir, "dir", Some(folder))?,
        default_dir,
        retain: int_in("retain", raw.retain, 3, 1, i64::MAX)?,
        mode,
        alignment_timeout,
    })
}

/// The URL schemes of `store`.
pub const STORE_SCHEMES: [&str; 6] = ["s3", "s3a", "gs", "az", "abfs", "file"];

/// Whether `text`, given where a folder or an object store's URL may
/// stand (`--out`, `--from-savepoint`, `weir state`), is a URL: then it is
/// checked by [`check_store_url`] when opened.
///
/// ```
/// assert!(weir::config::is_url("s3://bucket/savepoints/wc"));
/// assert!(!weir::config::is_url("/backups/wc"));
/// ```
pub fn is_url(text: &str) -> bool {
    text.contains("://")
}

/// Refuses a `store` URL that names no object store Weir can write to.
///
/// ```
/// use weir::config::check_store_url;
/// assert!(check_store_url("s3://bucket/jobs/wordcount").is_ok());
/// assert!(check_store_url("file:///srv/checkpoints").is_ok());
/// assert!(check_store_url("s3://").is_err());
/// assert!(check_store_url("/srv/checkpoints").is_err());
/// ```
pub fn check_store_url(url: &str) -> Result<(), String> {
    let schemes = STORE_SCHEMES.map(|s| format!("{s}://")).join(", ");
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "`store` = {url:?} is not a URL; use one of {schemes} (e.g. \"s3://bucket/prefix\")"
        ));
    };
    if !STORE_SCHEMES.contains(&scheme) {
        return Err(format!(
            "`store` = {url:?}: the scheme {scheme}:// is not supported; use one of {schemes}"
        ));
    }
    let named = match scheme {
        "file" => rest.starts_with('/') && rest.len() > 1,
        _ => !rest.split('/').next().unwrap_or("").is_empty(),
    };
    if !named {
        return Err(match scheme {
            "file" => format!("`store` = {url:?} names no folder; use file:///absolute/path"),
            _ => format!("`store` = {url:?} names no bucket; use {scheme}://bucket/prefix"),
        });
    }
    Ok(())
}

/// The `[restart]` table.
pub(super) fn build_restart(table: Table) -> Result<RestartStrategy, String> {
    let raw: RawRestart = from_table(table)?;
    let strategy = raw.strategy.unwrap_or_else(|| "fixed-delay".into());
    let attempts = || int_in("attempts", raw.attempts, 3, 1, 1_000_000);
    let only = |allowed: &[&str]| -> Result<(), String> {
        let given = [
            ("delay", raw.delay.is_some()),
            ("initial", raw.initial.is_some()),
            ("max", raw.max.is_some()),
            ("multiplier", raw.multiplier.is_some()),
        ];
        match given.iter().find(|(k, set)| *set && !allowed.contains(k)) {
            Some((k, _)) => Err(format!(
                "`{k}` does not apply to strategy = {strategy:?}; remove it"
            )),
            None => Ok(()),
        }
    };
    match strategy.as_str() {
        "none" => {
            only(&[])?;
            Ok(RestartStrategy::None)
        }
        "fixed-delay" => {
            only(&["delay"])?;
            Ok(RestartStrategy::FixedDelay {
                attempts: attempts()?,
                delay: duration("delay", raw.delay.clone(), "1s")?,
            })
        }
        "exponential-backoff" => {
            only(&["initial", "max", "multiplier"])?;
            let multiplier = raw.multiplier.unwrap_or(2.0);
            if !(1.0..=100.0).contains(&multiplier) {
                return Err(format!(
                    "`multiplier` = {multiplier} is out of range; use a value in 1.0..=100.0"
                ));
            }
            let initial = duration("initial", raw.initial.clone(), "100ms")?;
            let max = duration("max", raw.max.clone(), "1m")?;
            if max < initial {
                return Err("`max` is shorter than `initial`".into());
            }
            Ok(RestartStrategy::ExponentialBackoff {
                attempts: attempts()?,
                initial,
                max,
                multiplier,
            })
        }
        other => Err(format!(
            "`strategy` = {other:?} is unknown; use \"none\", \"fixed-delay\" or \"exponential-backoff\""
        )),
    }
}
