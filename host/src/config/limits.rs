//! Per-operator sandbox settings of the job file: [`Limits`] (the `limits`
//! table, its keys [`LIMIT_KEYS`]), [`Grants`] (the `grants` list),
//! [`LimitValue`] (a limit with its unit), the size and duration syntax
//! they are written in, and how both are read from an operator's table.
//!
//! This module is plain configuration: the Wasm layer enforces these values
//! (`wasm::limiter` the limits, `wasm::wasi` the grants).

use std::time::Duration;

use toml::Value;

use crate::fields::int_in;

/// Per-operator limits, set in the job file's `limits` table.
///
/// ```
/// let l = weir::config::Limits::default();
/// assert_eq!(l.memory, 256 << 20);
/// assert_eq!(l.call_timeout, std::time::Duration::from_secs(10));
/// assert!(l.fuel.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory of an instance, bytes, all memories together (`memory`).
    pub memory: usize,
    /// Wall-clock time of one call into the plugin (`call_timeout`).
    pub call_timeout: Duration,
    /// Fuel (about one unit per Wasm instruction) of one call into the plugin
    /// (`fuel`); `None` for no fuel budget. The plugin then runs compiled
    /// with fuel metering ([`crate::Plugin::metered`]).
    pub fuel: Option<u64>,
    /// Elements of one table (`table_elements`).
    pub table_elements: usize,
    /// Core instances a component may create (`instances`).
    pub instances: usize,
    /// Tables a component may create (`tables`).
    pub tables: usize,
    /// Linear memories a component may create (`memories`).
    pub memories: usize,
    /// Largest state key, bytes (`max_key_bytes`).
    pub max_key_bytes: usize,
    /// Largest state value, bytes (`max_value_bytes`).
    pub max_value_bytes: usize,
    /// Host-owned state of an instance, keys plus values, bytes
    /// (`max_state_bytes`).
    pub max_state_bytes: usize,
    /// Most records emitted by one call into the plugin (`max_emit_records`).
    pub max_emit_records_per_call: usize,
    /// Most bytes (keys plus values) emitted by one call into the plugin
    /// (`max_emit_bytes`).
    pub max_emit_bytes_per_call: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: 256 << 20,
            call_timeout: Duration::from_secs(10),
            fuel: None,
            table_elements: 100_000,
            instances: 64,
            tables: 64,
            memories: 16,
            max_key_bytes: 64 << 10,
            max_value_bytes: 16 << 20,
            max_state_bytes: 1 << 30,
            max_emit_records_per_call: 1_000_000,
            max_emit_bytes_per_call: 256 << 20,
        }
    }
}

/// Ambient capabilities a job grants an operator (`grants = [...]`). None by
/// default.
///
/// ```
/// let g = weir::config::Grants::default();
/// assert!(!g.clocks && !g.random);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// `"clocks"`: the host's real wall and monotonic clocks, and real sleeps
    /// (each cut short at the call's deadline). Without it the wall clock
    /// reads 1970-01-01T00:00:00Z, the monotonic clock reads 0, and sleeps
    /// return at once.
    pub clocks: bool,
    /// `"random"`: the host's random number generators. Without it random
    /// bytes come from a fixed deterministic sequence.
    pub random: bool,
}

impl Grants {
    /// Every grant name the job file accepts.
    pub const NAMES: &'static [&'static str] = &["clocks", "random"];

    /// Sets the grant called `name`; `false` when there is no such grant.
    ///
    /// ```
    /// let mut g = weir::config::Grants::default();
    /// assert!(g.grant("clocks"));
    /// assert!(!g.grant("network"));
    /// assert!(g.clocks && !g.random);
    /// ```
    pub fn grant(&mut self, name: &str) -> bool {
        match name {
            "clocks" => self.clocks = true,
            "random" => self.random = true,
            _ => return false,
        }
        true
    }
}

/// A configured or measured limit value, shown with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitValue {
    /// A size in bytes, shown as `64MiB` when a whole number of KiB/MiB/GiB.
    Bytes(u64),
    /// A count.
    Count(u64),
    /// A duration, shown as `200ms` or `5s`.
    Time(Duration),
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LimitValue::Bytes(b) => f.write_str(&format_size(b)),
            LimitValue::Count(n) => write!(f, "{n}"),
            LimitValue::Time(d) => f.write_str(&format_duration(d)),
        }
    }
}

/// `64MiB`, `1KiB`, `1000B`: the largest binary unit that divides `bytes`.
///
/// ```
/// assert_eq!(weir::config::format_size(64 << 20), "64MiB");
/// assert_eq!(weir::config::format_size(1500), "1500B");
/// ```
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// `200ms`, `5s`, `1m 30s` (humantime).
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
}

pub use crate::fields::parse_duration;

/// Parses a size: an integer (bytes) or a string such as `"64MiB"`, `"16 KiB"`,
/// `"1GiB"`, `"512B"` (`KB`/`MB`/`GB` are decimal: 1000-based).
///
/// ```
/// assert_eq!(weir::config::parse_size("64MiB"), Ok(64 << 20));
/// assert_eq!(weir::config::parse_size("2 kB"), Ok(2000));
/// assert!(weir::config::parse_size("64 MiBs").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let digits = digits.replace('_', "");
    let number: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a size; write e.g. \"64MiB\" or a number of bytes")
    })?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(format!(
                "{text:?} has an unknown unit {:?}; use B, KiB, MiB or GiB",
                unit.trim()
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Keys of an operator's `limits` table, in the order the docs list them.
pub const LIMIT_KEYS: &[&str] = &[
    "memory",
    "call_timeout",
    "fuel",
    "max_emit_records",
    "max_emit_bytes",
    "max_key_bytes",
    "max_value_bytes",
    "max_state_bytes",
    "table_elements",
    "instances",
    "tables",
    "memories",
];

/// Largest `limits.memory`: the 4 GiB address space of 32-bit Wasm.
const MAX_MEMORY: u64 = 4 << 30;

/// The `limits` table over the defaults. Sizes are integers (bytes) or strings with a
/// unit (`"64MiB"`); `call_timeout` is a duration string; counts are integers.
pub(super) fn build_limits(value: Option<Value>) -> Result<Limits, String> {
    let mut limits = Limits::default();
    let table = match value {
        None => return Ok(limits),
        Some(Value::Table(t)) => t,
        Some(other) => {
            return Err(format!(
                "`limits` must be a table (got {}), e.g. limits = {{ memory = \"64MiB\", call_timeout = \"5s\" }}",
                other.type_str()
            ));
        }
    };
    for (key, value) in table {
        let name = format!("limits.{key}");
        let size = |lo: u64, hi: u64| -> Result<usize, String> {
            let bytes = match &value {
                Value::Integer(i) => u64::try_from(*i).map_err(|_| {
                    format!("`{name}` = {i} is negative; use a size such as \"64MiB\"")
                })?,
                Value::String(text) => parse_size(text).map_err(|e| format!("`{name}`: {e}"))?,
                other => {
                    return Err(format!(
                        "`{name}` must be a size such as \"64MiB\" or a number of bytes (got {})",
                        other.type_str()
                    ));
                }
            };
            if !(lo..=hi).contains(&bytes) {
                let show = format_size;
                return Err(format!(
                    "`{name}` = {} is out of range; use a size in {}..={}",
                    show(bytes),
                    show(lo),
                    show(hi)
                ));
            }
            usize::try_from(bytes).map_err(|_| format!("`{name}` is too large for this machine"))
        };
        let count = |lo: i64| -> Result<u64, String> {
            match &value {
                Value::Integer(i) => int_in(&name, Some(*i), lo, lo, i64::MAX),
                other => Err(format!(
                    "`{name}` must be an integer (got {})",
                    other.type_str()
                )),
            }
        };
        let usize_count = |lo: i64| count(lo).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        match key.as_str() {
            "memory" => limits.memory = size(64 << 10, MAX_MEMORY)?,
            "call_timeout" => {
                let Value::String(text) = &value else {
                    return Err(format!(
                        "`{name}` must be a duration string such as \"5s\" or \"200ms\" (got {})",
                        value.type_str()
                    ));
                };
                let d = parse_duration(text).map_err(|e| format!("`{name}` = {e}"))?;
                if d < std::time::Duration::from_millis(1) {
                    return Err(format!("`{name}` = {text:?} is under 1ms; use e.g. \"5s\""));
                }
                limits.call_timeout = d;
            }
            "fuel" => limits.fuel = Some(count(1)?),
            "max_emit_records" => limits.max_emit_records_per_call = usize_count(0)?,
            "max_emit_bytes" => limits.max_emit_bytes_per_call = size(0, u64::MAX)?,
            "max_key_bytes" => limits.max_key_bytes = size(1, u64::MAX)?,
            "max_value_bytes" => limits.max_value_bytes = size(0, u64::MAX)?,
            "max_state_bytes" => limits.max_state_bytes = size(0, u64::MAX)?,
            "table_elements" => limits.table_elements = usize_count(1)?,
            "instances" => limits.instances = usize_count(1)?,
            "tables" => limits.tables = usize_count(1)?,
            "memories" => limits.memories = usize_count(1)?,
            _ => {
                return Err(format!(
                    "unknown key `{name}`; the limits are: {}",
                    LIMIT_KEYS.join(", ")
                ));
            }
        }
    }
    Ok(limits)
}

/// The `grants` list: names from [`Grants::NAMES`], none by default.
pub(super) fn build_grants(value: Option<Value>) -> Result<Grants, String> {
    let mut grants = Grants::default();
    let names = Grants::NAMES.join("\", \"");
    let list = match value {
        None => return Ok(grants),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(format!(
                "`grants` must be a list of strings (got {}), e.g. grants = [\"{names}\"]",
                other.type_str()
            ));
        }
    };
    for v in list {
        let Value::String(name) = v else {
            return Err(format!(
                "each entry of `grants` must be a string (got {})",
                v.type_str()
            ));
        };
        if !grants.grant(&name) {
            return Err(format!(
                "unknown grant {name:?}; the grants are \"{names}\" (file system, network and environment cannot be granted)"
            ));
        }
    }
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_format() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1_000"), Ok(1000));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size(" 3 GiB "), Ok(3 << 30));
        assert_eq!(parse_size("5MB"), Ok(5_000_000));
        assert!(parse_size("").unwrap_err().contains("is not a size"));
        assert!(parse_size("MiB").unwrap_err().contains("is not a size"));
        assert!(parse_size("1.5MiB").unwrap_err().contains("unknown unit"));
        assert!(
            parse_size("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(3 << 30), "3GiB");
        assert_eq!(format_size(1025), "1025B");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
    }

    #[test]
    fn grants_by_name() {
        let mut g = Grants::default();
        for n in Grants::NAMES {
            assert!(g.grant(n));
        }
        assert_eq!(
            g,
            Grants {
                clocks: true,
                random: true
            }
        );
    }
}
