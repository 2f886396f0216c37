//! The generator source (`type = "generator"`): `count` records `w<N>`
//! drawn from `words` distinct words, for tests, examples and benchmarks,
//! each with an event time: record `i` has the timestamp `start + i * step`,
//! minus a jitter of 0 to `disorder` milliseconds, so timestamps are out of
//! order by at most `disorder`.
//!
//! Invariant: record `i` (its word and its timestamp) is a function of `i`
//! and the settings alone, so the generator replays exactly from any offset
//! (`{"records": i}`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Value, json};
use toml::Table;

use super::source::{SourceError, SourceReader};
use super::{BuildSource, SourceConnector, SourceType};
use crate::dataflow::Batch;
use crate::dataflow::partition::mix64;
use crate::dataflow::provenance::numbered;
use crate::fields::{duration, from_table, int_in};
use crate::time::parse_rfc3339;

/// The registry entry of `type = "generator"`.
pub const SOURCE: SourceType = SourceType {
    name: "generator",
    keys: &["count", "words", "seed", "start", "step", "disorder"],
    read: GeneratorConfig::read,
};

/// The settings of a generator source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// Records to produce (`count`, required).
    pub count: u64,
    /// Distinct words, at least 1 (`words`, default 1000).
    pub words: u64,
    /// Random seed (`seed`, default 0).
    pub seed: u64,
    /// Timestamp of record 0, milliseconds since the Unix epoch (`start`:
    /// integer milliseconds or an RFC 3339 time; default 0).
    pub start: i64,
    /// Milliseconds from one record's timestamp to the next's, before
    /// jitter (`step`, a duration; default `"1ms"`).
    pub step: i64,
    /// Most milliseconds a record's timestamp lies before `start + i * step`
    /// (`disorder`, a duration; default `"0s"`: timestamps in order).
    pub disorder: i64,
}

impl GeneratorConfig {
    fn read(table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            count: Option<i64>,
            words: Option<i64>,
            seed: Option<i64>,
            start: Option<Start>,
            step: Option<String>,
            disorder: Option<String>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |_: &Path| {
            let Some(count) = raw.count else {
                return Err("`count` is missing; add count = <records to produce>".into());
            };
            let start = match raw.start {
                None => 0,
                Some(Start::Millis(ms)) => ms,
                Some(Start::Text(text)) => parse_rfc3339(&text).ok_or_else(|| {
                    format!(
                        "`start` = {text:?} is not an RFC 3339 time; use e.g. \
                         \"2026-12-01T15:30:00Z\" or integer milliseconds since the epoch"
                    )
                })?,
            };
            let config = GeneratorConfig {
                count: int_in("count", Some(count), 0, 0, i64::MAX)?,
                words: int_in("words", raw.words, 1000, 1, i64::MAX)?,
                seed: int_in("seed", raw.seed, 0, 0, i64::MAX)?,
                start,
                step: millis("step", duration("step", raw.step, "1ms")?)?,
                disorder: millis("disorder", duration("disorder", raw.disorder, "0s")?)?,
            };
            config.check_time_range()?;
            Ok(Arc::new(config))
        }))
    }

    /// Every timestamp fits an `i64`: the earliest is at least
    /// `start - disorder`, the latest at most `start + (count - 1) * step`.
    fn check_time_range(&self) -> Result<(), String> {
        let last = i128::from(self.count.saturating_sub(1));
        let latest = i128::from(self.start) + last * i128::from(self.step);
        let earliest = i128::from(self.start) - i128::from(self.disorder);
        let range = i128::from(i64::MIN)..=i128::from(i64::MAX);
        if range.contains(&latest) && range.contains(&earliest) {
            return Ok(());
        }
        Err(format!(
            "timestamps from `start` = {} by `step` = {}ms over `count` = {} records \
             (less up to `disorder` = {}ms) leave the range of milliseconds since the epoch; \
             lower them",
            self.start, self.step, self.count, self.disorder
        ))
    }
}

/// A duration setting as whole milliseconds.
fn millis(key: &str, d: Duration) -> Result<i64, String> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(format!(
            "`{key}` = {d:?} is not a whole number of milliseconds; round it to ms"
        ));
    }
    i64::try_from(d.as_millis()).map_err(|_| format!("`{key}` = {d:?} is too long"))
}

/// The `start` setting as written: integer milliseconds, or an RFC 3339
/// time as a string or a TOML offset date-time.
enum Start {
    Millis(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for Start {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Start;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("integer milliseconds since the epoch or an RFC 3339 time")
            }
            fn visit_i64<E>(self, ms: i64) -> Result<Start, E> {
                Ok(Start::Millis(ms))
            }
            fn visit_str<E>(self, text: &str) -> Result<Start, E> {
                Ok(Start::Text(text.to_owned()))
            }
            /// A TOML date-time (`start = 2026-12-01T15:30:00Z`, unquoted).
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Start, A::Error> {
                let at = toml::value::Datetime::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )?;
                Ok(Start::Text(at.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl SourceConnector for GeneratorConfig {
    fn open(
        &self,
        _id: &str,
        offset: Option<&Value>,
    ) -> Result<Box<dyn SourceReader>, SourceError> {
        let next = offset
            .and_then(|o| o.get("records"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok(Box::new(Generator {
            config: GeneratorConfig {
                words: self.words.max(1),
                ..self.clone()
            },
            next,
            first: next,
        }))
    }
}

/// The generator's reader: the next record to produce, of `count`.
struct Generator {
    config: GeneratorConfig,
    next: u64,
    /// The first record of the last batch.
    first: u64,
}

impl Generator {
    /// Record `i`'s word number (in `0..words`) and timestamp.
    fn record(&self, i: u64) -> (u64, i64) {
        let c = &self.config;
        let hash = mix64(i ^ c.seed.rotate_left(17));
        let jitter = match c.disorder {
            0 => 0,
            d => (mix64(hash ^ 0x9e37_79b9_7f4a_7c15) % (d as u64 + 1)) as i64,
        };
        // In range: `check_time_range`, and `i < count`.
        (hash % c.words, c.start + i as i64 * c.step - jitter)
    }
}

impl SourceReader for Generator {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        use std::fmt::Write;
        let end = self.config.count.min(self.next + max as u64);
        if self.next >= end {
            return Ok(None);
        }
        let mut batch = Batch::with_capacity((end - self.next) as usize, 0);
        let mut word = String::new();
        for i in self.next..end {
            let (n, timestamp) = self.record(i);
            word.clear();
            write!(word, "w{n}").expect("writing to a String");
            batch.push_keyed_by_value(word.as_bytes(), Some(timestamp));
        }
        self.first = self.next;
        self.next = end;
        Ok(Some(batch))
    }

    fn place(&self) -> Option<String> {
        (self.next > self.first).then(|| numbered("generator", "record", self.first + 1, self.next))
    }

    fn offset(&self) -> Value {
        json!({"records": self.next})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record's word and timestamp, reading batches of at most `max`.
    fn records(reader: &mut dyn SourceReader, max: usize) -> Vec<(Vec<u8>, i64)> {
        let mut out = Vec::new();
        while let Some(batch) = reader.read_batch(max).unwrap() {
            out.extend(
                batch
                    .iter()
                    .map(|r| (r.value.to_vec(), r.timestamp.unwrap())),
            );
        }
        out
    }

    fn config(text: &str) -> Result<Arc<dyn SourceConnector>, String> {
        (SOURCE.read)(text.parse().unwrap())?(Path::new("."))
    }

    fn generated(text: &str) -> Vec<(Vec<u8>, i64)> {
        records(config(text).unwrap().open("g", None).unwrap().as_mut(), 8)
    }

    /// Reopened at the offset after some records, the generator produces
    /// exactly the rest, words and timestamps.
    #[test]
    fn reopening_at_an_offset_replays_the_rest() {
        let config = config("count = 50\nwords = 7\nseed = 3\ndisorder = \"20ms\"").unwrap();
        let all = records(config.open("g", None).unwrap().as_mut(), 8);
        assert_eq!(all.len(), 50);
        let mut first = config.open("g", None).unwrap();
        assert_eq!(first.read_batch(20).unwrap().unwrap().len(), 20);
        let offset = first.offset();
        let rest = records(config.open("g", Some(&offset)).unwrap().as_mut(), 8);
        assert_eq!(rest, all[20..]);
    }

    /// A batch names the numbers of its records, counted from 1 across a
    /// reopening.
    #[test]
    fn a_batch_names_its_record_numbers() {
        let config = config("count = 5").unwrap();
        let mut g = config.open("g", None).unwrap();
        assert_eq!(g.place(), None);
        g.read_batch(3).unwrap();
        assert_eq!(g.place().as_deref(), Some("generator records 1–3"));
        let mut g = config.open("g", Some(&g.offset())).unwrap();
        g.read_batch(3).unwrap();
        assert_eq!(g.place().as_deref(), Some("generator records 4–5"));
    }

    /// Record `i`'s timestamp lies in `[start + i * step - disorder, start +
    /// i * step]`, depends on the seed, and uses the whole range.
    #[test]
    fn timestamps_are_out_of_order_by_at_most_disorder() {
        let text = "count = 2000\nstart = 1000\nstep = \"10ms\"\ndisorder = \"25ms\"";
        let got = generated(text);
        for (i, (_, ts)) in got.iter().enumerate() {
            let base = 1000 + 10 * i as i64;
            assert!(
                (base - 25..=base).contains(ts),
                "record {i}: {ts} vs {base}"
            );
        }
        let jitters: std::collections::BTreeSet<i64> = got
            .iter()
            .enumerate()
            .map(|(i, (_, ts))| 1000 + 10 * i as i64 - ts)
            .collect();
        assert_eq!(jitters, (0..=25).collect(), "every jitter occurs");
        assert!(
            got.windows(2).any(|w| w[1].1 < w[0].1),
            "some are out of order"
        );
        assert_ne!(got, generated(&format!("{text}\nseed = 1")));
        assert_eq!(got, generated(text));
    }

    #[test]
    fn without_disorder_timestamps_increase_by_step() {
        let got = generated("count = 100\nstart = \"2026-12-01T15:30:00Z\"");
        let want: Vec<i64> = (0..100).map(|i| 1_796_139_000_000 + i).collect();
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), want);
        let got = generated("count = 3\nstart = 2026-12-01T15:30:00.5+01:00\nstep = \"1m\"");
        let times: Vec<i64> = got.iter().map(|r| r.1).collect();
        assert_eq!(
            times,
            [1_796_135_400_500, 1_796_135_460_500, 1_796_135_520_500]
        );
        let got = generated("count = 3\nstart = -5\nstep = \"0s\"");
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), [-5, -5, -5]);
    }

    #[test]
    fn bad_time_settings_are_refused() {
        let err = |text: &str| config(text).unwrap_err();
        assert!(err("count = 1\nstart = \"today\"").contains("`start` = \"today\" is not"));
        assert!(err("count = 1\nstart = 2026-12-01").contains("`start` = \"2026-12-01\""));
        assert!(err("count = 1\nstart = 1.5").contains("invalid type"));
        assert!(err("count = 1\nstep = \"soon\"").contains("`step` = \"soon\" is not a duration"));
        assert!(err("count = 1\nstep = \"1500us\"").contains("whole number of milliseconds"));
        assert!(err("count = 1\ndisorder = \"1us\"").contains("`disorder`"));
        let far = format!("count = 3\nstart = {}\nstep = \"1ms\"", i64::MAX - 1);
        assert!(err(&far).contains("leave the range"));
        assert!(config(&format!("count = 2\nstart = {}", i64::MAX - 1)).is_ok());
        let early = format!("count = 1\nstart = {}\ndisorder = \"1ms\"", i64::MIN);
        assert!(err(&early).contains("leave the range"));
    }
}
