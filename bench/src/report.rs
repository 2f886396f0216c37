//! What a benchmark reports: rows of measurements, each with an optional
//! baseline (another row of the same report, measured in the same run) and
//! the ratio `value / baseline value`, plus the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// The result of one benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The benchmark's name (`boundary`, `end-to-end`, ...).
    pub benchmark: String,
    /// What was measured and how (sizes, settings), for the record.
    pub params: BTreeMap<String, serde_json::Value>,
    /// The measurements.
    pub rows: Vec<Row>,
    /// The targets, checked against the rows.
    pub targets: Vec<Target>,
    /// Remarks: what a number means, anything odd seen during the run.
    pub notes: Vec<String>,
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What was measured (unique within the report).
    pub case: String,
    /// The headline number.
    pub value: f64,
    /// Its unit (`ns/record`, `records/s`, `ms`, `bytes`).
    pub unit: String,
    /// The case this one is compared with, if any.
    pub baseline: Option<String>,
    /// `value / baseline's value`; `None` without a baseline or when the
    /// baseline is 0.
    pub ratio: Option<f64>,
    /// Further numbers (absolute times, counts, secondary ratios).
    pub extra: BTreeMap<String, f64>,
}

/// A target of the issue: `measured` compared with `threshold`.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What the target says, in words.
    pub name: String,
    /// The measured number (a ratio or an absolute value).
    pub measured: f64,
    /// `>=`, `<=`, `>` or `<`.
    pub comparison: String,
    /// The threshold.
    pub threshold: f64,
    /// Whether `measured comparison threshold` holds.
    pub met: bool,
}

impl Target {
    /// A target that holds when `measured >= threshold`.
    pub fn at_least(name: &str, measured: f64, threshold: f64) -> Self {
        Self::new(name, measured, ">=", threshold, measured >= threshold)
    }

    /// A target that holds when `measured <= threshold`.
    pub fn at_most(name: &str, measured: f64, threshold: f64) -> Self {
        Self::new(name, measured, "<=", threshold, measured <= threshold)
    }

    /// A target that holds when `measured > threshold`.
    pub fn above(name: &str, measured: f64, threshold: f64) -> Self {
        Self::new(name, measured, ">", threshold, measured > threshold)
    }

    /// A target that holds when `measured < threshold`.
    pub fn below(name: &str, measured: f64, threshold: f64) -> Self {
        Self::new(name, measured, "<", threshold, measured < threshold)
    }

    fn new(name: &str, measured: f64, comparison: &str, threshold: f64, met: bool) -> Self {
        Target {
            name: name.to_string(),
            measured,
            comparison: comparison.to_string(),
            threshold,
            met: met && measured.is_finite(),
        }
    }
}

impl Report {
    /// An empty report for `benchmark`.
    pub fn new(benchmark: &str) -> Self {
        Report {
            benchmark: benchmark.to_string(),
            params: BTreeMap::new(),
            rows: Vec::new(),
            targets: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records a parameter.
    pub fn param(&mut self, name: &str, value: impl Into<serde_json::Value>) {
        self.params.insert(name.to_string(), value.into());
    }

    /// Records how many times each case ran and which statistic of the
    /// runs the rows show.
    pub fn repetitions(&mut self, reps: usize, statistic: &str) {
        self.param("repetitions", reps);
        self.param("statistic", statistic);
    }

    /// Records every field of the JSON object `values` as a parameter.
    pub fn params(&mut self, values: serde_json::Value) {
        let serde_json::Value::Object(fields) = values else {
            panic!("report parameters are a JSON object, got {values}");
        };
        self.params.extend(fields);
    }

    /// Adds a row compared with the row `baseline` (added before), and
    /// returns it for more `extra` fields.
    pub fn row(&mut self, case: &str, value: f64, unit: &str, baseline: Option<&str>) -> &mut Row {
        let base_value = baseline.and_then(|b| self.value(b));
        let ratio = base_value
            .filter(|b| *b != 0.0 && b.is_finite())
            .map(|b| value / b);
        self.rows.push(Row {
            case: case.to_string(),
            value,
            unit: unit.to_string(),
            baseline: baseline.map(str::to_string),
            ratio: ratio.filter(|r| r.is_finite()),
            extra: BTreeMap::new(),
        });
        self.rows.last_mut().expect("just pushed")
    }

    /// The value of row `case`.
    pub fn value(&self, case: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.case == case).map(|r| r.value)
    }

    /// The row `case`.
    pub fn get(&self, case: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.case == case)
    }

    /// The report as a readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== {} ==", self.benchmark);
        if !self.params.is_empty() {
            let params: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    v => format!("{k}={v}"),
                })
                .collect();
            let _ = writeln!(out, "{}", params.join("  "));
        }
        let width = self
            .rows
            .iter()
            .map(|r| r.case.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let bwidth = self
            .rows
            .iter()
            .filter_map(|r| r.baseline.as_ref().map(String::len))
            .max()
            .unwrap_or(8)
            .max(8);
        let _ = writeln!(
            out,
            "{:<width$}  {:>14} {:<10}  {:<bwidth$}  {:>8}  details",
            "case", "value", "unit", "baseline", "ratio"
        );
        for r in &self.rows {
            let extra: Vec<String> = r
                .extra
                .iter()
                .map(|(k, v)| format!("{k}={}", short(*v)))
                .collect();
            let _ = writeln!(
                out,
                "{:<width$}  {:>14} {:<10}  {:<bwidth$}  {:>8}  {}",
                r.case,
                human(r.value),
                r.unit,
                r.baseline.as_deref().unwrap_or("-"),
                r.ratio.map_or("-".to_string(), |x| format!("{x:.3}")),
                extra.join(" ")
            );
        }
        if !self.targets.is_empty() {
            let _ = writeln!(out, "targets:");
            for t in &self.targets {
                let _ = writeln!(
                    out,
                    "  [{}] {}: {} {} {}",
                    if t.met { "met" } else { "MISSED" },
                    t.name,
                    short(t.measured),
                    t.comparison,
                    short(t.threshold)
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}

/// A number with thousands separators (integers) or 3 significant decimals.
pub fn human(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    if v.abs() >= 1000.0 || v.fract() == 0.0 {
        let n = v.round() as i128;
        let digits = n.unsigned_abs().to_string();
        let mut s = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                s.push(',');
            }
            s.push(c);
        }
        if n < 0 { format!("-{s}") } else { s }
    } else {
        format!("{v:.3}")
    }
}

/// A compact number for the details column.
fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_value_over_baseline() {
        let mut r = Report::new("x");
        r.row("native", 100.0, "ns/record", None);
        r.row("wasm", 250.0, "ns/record", Some("native"));
        r.row("zero", 0.0, "ms", None);
        r.row("vs-zero", 5.0, "ms", Some("zero"));
        assert_eq!(r.get("wasm").unwrap().ratio, Some(2.5));
        assert_eq!(r.get("vs-zero").unwrap().ratio, None);
        let t = r.table();
        assert!(t.contains("2.500") && t.contains("native"), "{t}");
    }

    #[test]
    fn numbers_are_readable() {
        assert_eq!(human(1234567.0), "1,234,567");
        assert_eq!(human(12.0), "12");
        assert_eq!(human(0.5), "0.500");
        assert!(Target::at_least("t", 0.6, 0.5).met);
        assert!(!Target::below("t", f64::NAN, 2.0).met);
    }
}
