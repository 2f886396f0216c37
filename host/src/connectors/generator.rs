//! The generator source (`type = "generator"`): `count` records `w<N>`
//! drawn from `words` distinct words, for tests, examples and benchmarks.
//!
//! Invariant: record `i` is a function of `i` and `seed` alone, so the
//! generator replays exactly from any offset (`{"records": i}`).

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use toml::Table;

use super::source::{SourceError, SourceReader};
use super::{BuildSource, SourceConnector, SourceType};
use crate::dataflow::Batch;
use crate::dataflow::partition::mix64;
use crate::fields::{from_table, int_in};

/// The registry entry of `type = "generator"`.
pub const SOURCE: SourceType = SourceType {
    name: "generator",
    keys: &["count", "words", "seed"],
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
}

impl GeneratorConfig {
    fn read(table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            count: Option<i64>,
            words: Option<i64>,
            seed: Option<i64>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |_: &Path| {
            let Some(count) = raw.count else {
                return Err("`count` is missing; add count = <records to produce>".into());
            };
            Ok(Arc::new(GeneratorConfig {
                count: int_in("count", Some(count), 0, 0, i64::MAX)?,
                words: int_in("words", raw.words, 1000, 1, i64::MAX)?,
                seed: int_in("seed", raw.seed, 0, 0, i64::MAX)?,
            }))
        }))
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
            count: self.count,
            words: self.words.max(1),
            seed: self.seed,
            next,
        }))
    }
}

/// The generator's reader: the next record to produce, of `count`.
struct Generator {
    count: u64,
    words: u64,
    seed: u64,
    next: u64,
}

impl SourceReader for Generator {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        use std::fmt::Write;
        let end = self.count.min(self.next + max as u64);
        if self.next >= end {
            return Ok(None);
        }
        let mut batch = Batch::with_capacity((end - self.next) as usize, 0);
        let mut word = String::new();
        for i in self.next..end {
            word.clear();
            let n = mix64(i ^ self.seed.rotate_left(17)) % self.words;
            write!(word, "w{n}").expect("writing to a String");
            batch.push_keyed_by_value(word.as_bytes(), None);
        }
        self.next = end;
        Ok(Some(batch))
    }

    fn offset(&self) -> Value {
        json!({"records": self.next})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(reader: &mut dyn SourceReader, max: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(batch) = reader.read_batch(max).unwrap() {
            out.extend(batch.iter().map(|r| r.value.to_vec()));
        }
        out
    }

    /// Reopened at the offset after some records, the generator produces
    /// exactly the rest.
    #[test]
    fn reopening_at_an_offset_replays_the_rest() {
        let config = GeneratorConfig {
            count: 50,
            words: 7,
            seed: 3,
        };
        let all = words(config.open("g", None).unwrap().as_mut(), 8);
        assert_eq!(all.len(), 50);
        let mut first = config.open("g", None).unwrap();
        assert_eq!(first.read_batch(20).unwrap().unwrap().len(), 20);
        let offset = first.offset();
        let rest = words(config.open("g", Some(&offset)).unwrap().as_mut(), 8);
        assert_eq!(rest, all[20..]);
    }
}
