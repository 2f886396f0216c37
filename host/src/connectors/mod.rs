//! Sources and sinks: the contracts a connector implements, the
//! [`Registry`] of connector types by the job file's `type`, and the
//! built-in connectors (files, standard input and output, the generator).
//! The connectors to servers (NATS, PostgreSQL, Kafka) live in the crate
//! `weir-connectors`, which builds on what this module makes public: the
//! contracts ([`source`], [`sink`]), staged delivery ([`staged`]), record
//! formats (`format`) and [`from_table`].
//!
//! A connector is one module that owns its settings (a struct read from its
//! `[[source]]` or `[[sink]]` table: accepted keys, defaults, messages),
//! their checks, and how they open a [`SourceReader`] or a [`Sink`]. The
//! job file ([`crate::config`]) looks the `type` up in the [`Registry`] it
//! is parsed with and keeps the options every entry has (`id`, a source's
//! `batch_size` and `rate`, a sink's `input`); the connector gets the rest
//! of the table. Adding a connector is one new module plus one line where
//! its registry is built.
//!
//! Connectors know nothing of the job file: they import the data path
//! ([`crate::dataflow`]) and the TOML field helpers, never `config`.

pub mod cells;
pub mod changelog;
mod csv_file;
pub mod debezium;
pub mod file;
pub mod format;
pub mod generator;
mod jsonl;
pub mod metadata;
pub mod parsing;
pub mod replay;
pub mod schema_format;
pub mod sink;
pub mod source;
pub mod staged;
pub mod stdin;
pub mod stdout;
mod worker;

pub use crate::fields::from_table;

use std::any::Any;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toml::Table;

use sink::{Delivery, Sink, SinkContext, SinkError};
use source::{SourceError, SourceReader};

/// The source and sink types a job file may name, in the order the
/// unknown-type messages list them. The runtime knows only the built-in
/// ones ([`Registry::builtin`]); a program adds the others (the CLI:
/// every type of `weir-connectors`).
#[derive(Debug, Clone)]
pub struct Registry {
    sources: Vec<&'static SourceType>,
    sinks: Vec<&'static SinkType>,
}

impl Registry {
    /// The built-in types: `file`, `generator` and `stdin` sources, `file`
    /// and `stdout` sinks.
    pub fn builtin() -> Registry {
        Registry {
            sources: vec![&file::SOURCE, &generator::SOURCE, &stdin::SOURCE],
            sinks: vec![&file::SINK, &stdout::SINK],
        }
    }

    /// The registry with source type `t` added last.
    ///
    /// # Panics
    /// When a source type of the same name is registered: a program's bug.
    pub fn with_source(mut self, t: &'static SourceType) -> Registry {
        assert!(
            self.source(t.name).is_none(),
            "source type `{}` registered twice",
            t.name
        );
        self.sources.push(t);
        self
    }

    /// The registry with sink type `t` added last.
    ///
    /// # Panics
    /// When a sink type of the same name is registered: a program's bug.
    pub fn with_sink(mut self, t: &'static SinkType) -> Registry {
        assert!(
            self.sink(t.name).is_none(),
            "sink type `{}` registered twice",
            t.name
        );
        self.sinks.push(t);
        self
    }

    /// The source types.
    pub fn sources(&self) -> &[&'static SourceType] {
        &self.sources
    }

    /// The sink types.
    pub fn sinks(&self) -> &[&'static SinkType] {
        &self.sinks
    }

    /// The source type named `name`.
    pub fn source(&self, name: &str) -> Option<&'static SourceType> {
        self.sources.iter().copied().find(|t| t.name == name)
    }

    /// The sink type named `name`.
    pub fn sink(&self, name: &str) -> Option<&'static SinkType> {
        self.sinks.iter().copied().find(|t| t.name == name)
    }

    /// Checks that every key each type declares is one its settings reader
    /// reads (a value of the wrong type for it is a type error, not an
    /// unknown key), for the tests of a program that builds a registry.
    /// The error names the type and the key.
    pub fn check_keys(&self) -> Result<(), String> {
        // Two probes of types no one key takes both of (a list; a date and
        // time, which text keys also accept): a key that is read fails
        // with a type error for at least one, an unread one with neither.
        let datetime: toml::value::Datetime =
            "1979-05-27T07:32:00Z".parse().expect("a TOML datetime");
        let probes = [
            toml::Value::Array(Vec::new()),
            toml::Value::Datetime(datetime),
        ];
        let typed = |read: &dyn Fn(Table) -> Option<String>, key: &str| {
            let errors: Vec<String> = (probes.iter())
                .map(|probe| {
                    let mut table = Table::new();
                    table.insert(key.to_owned(), probe.clone());
                    read(table).unwrap_or_default()
                })
                .collect();
            match errors.iter().any(|e| e.contains("invalid type")) {
                true => None,
                false => Some(errors.join("; ")),
            }
        };
        let sources = self.sources.iter().flat_map(|t| {
            t.keys.iter().map(move |k| {
                let read = |table: Table| (t.read)(table).err();
                ("source", t.name, *k, typed(&read, k))
            })
        });
        let sinks = self.sinks.iter().flat_map(|t| {
            t.keys.iter().map(move |k| {
                let read = |table: Table| (t.read)(table).err();
                ("sink", t.name, *k, typed(&read, k))
            })
        });
        for (kind, name, key, err) in sources.chain(sinks) {
            if let Some(err) = err {
                return Err(format!("{kind} type `{name}`: declared key `{key}`: {err}"));
            }
        }
        Ok(())
    }
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::builtin()
    }
}

/// Reads a source's settings from its table, which holds only keys of its
/// type. A value of the wrong type is an error here; everything else is
/// checked by the [`BuildSource`] it returns. Messages name the key and
/// say how to fix it.
pub type ReadSource = fn(Table) -> Result<BuildSource, String>;

/// Checks the settings a [`ReadSource`] read, fills in the defaults and
/// joins relative paths onto the job folder (its argument).
pub type BuildSource = Box<dyn FnOnce(&Path) -> Result<Arc<dyn SourceConnector>, String>>;

/// Reads a sink's settings, as [`ReadSource`] does a source's.
pub type ReadSink = fn(Table) -> Result<BuildSink, String>;

/// Checks the settings a [`ReadSink`] read, as [`BuildSource`] does, for a
/// sink with the given guarantee (the common option `delivery`).
pub type BuildSink = Box<dyn FnOnce(&Path, Delivery) -> Result<Arc<dyn SinkConnector>, String>>;

/// One source type of the job file (`type = "<name>"`).
#[derive(Debug)]
pub struct SourceType {
    /// The `type` value.
    pub name: &'static str,
    /// The keys of the type's own settings, in the order messages list them.
    pub keys: &'static [&'static str],
    /// Reads the settings.
    pub read: ReadSource,
}

impl SourceType {
    /// The settings this type makes of `text` (a source table without `id`
    /// and `type`, in a job folder `.`), as `T`: for tests of a type's
    /// settings.
    ///
    /// # Panics
    /// When `text` is not TOML or the type's settings are not a `T`.
    pub fn settings<T: SourceConnector + Clone + 'static>(&self, text: &str) -> Result<T, String> {
        let build = (self.read)(text.parse().expect("a TOML table"))?;
        let config = build(Path::new("."))?;
        let any: &dyn Any = config.as_ref() as &dyn Any;
        Ok(any
            .downcast_ref::<T>()
            .expect("the type's settings")
            .clone())
    }
}

/// One sink type of the job file (`type = "<name>"`).
#[derive(Debug)]
pub struct SinkType {
    /// The `type` value.
    pub name: &'static str,
    /// The keys of the type's own settings, in the order messages list them.
    pub keys: &'static [&'static str],
    /// The guarantee of a sink of this type whose table sets no `delivery`.
    pub delivery: Delivery,
    /// Reads the settings.
    pub read: ReadSink,
}

impl SinkType {
    /// The settings this type makes of `text` (a sink table without `id`,
    /// `type`, `input` and `delivery`, in a job folder `.`) with `delivery`,
    /// as `T`: for tests of a type's settings.
    ///
    /// # Panics
    /// When `text` is not TOML or the type's settings are not a `T`.
    pub fn settings<T: SinkConnector + Clone + 'static>(
        &self,
        text: &str,
        delivery: Delivery,
    ) -> Result<T, String> {
        let build = (self.read)(text.parse().expect("a TOML table"))?;
        let config = build(Path::new("."), delivery)?;
        let any: &dyn Any = config.as_ref() as &dyn Any;
        Ok(any
            .downcast_ref::<T>()
            .expect("the type's settings")
            .clone())
    }
}

/// The settings of one source, as its type read and checked them.
pub trait SourceConnector: DynEq + Debug + Send + Sync {
    /// Opens source `id` positioned at `offset` (a [`SourceReader::offset`]
    /// recorded by a checkpoint) or, without one, at the beginning.
    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError>;

    /// The file the source reads, if any (no sink may write it).
    fn file(&self) -> Option<&Path> {
        None
    }

    /// Checks the files the settings name; `dir` is the job folder. Runs
    /// after the job's wiring checks.
    fn check_files(&self, dir: &Path) -> Result<(), String> {
        let _ = dir;
        Ok(())
    }

    /// Whether the input ends by itself (a file, a bounded stream), so
    /// that a job without periodic checkpoints still delivers its output.
    fn ends(&self) -> bool {
        true
    }

    /// The names of the source's output ports when it has several (one
    /// per table of a change-data-capture source), in the order
    /// [`SourceReader::output_port`] numbers them; consumers name one as
    /// `source.port`. Empty, the default: one unnamed output port.
    fn output_ports(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The settings of one sink, as its type read and checked them.
pub trait SinkConnector: DynEq + Debug + Send + Sync {
    /// Opens the sink `at` says, with the guarantee it names, recovering to
    /// the checkpoint it restores (or starting fresh).
    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError>;

    /// The file the sink writes, if any (no other source or sink may use it).
    fn file(&self) -> Option<&Path> {
        None
    }

    /// Whether the sink writes to the process's standard output.
    fn writes_stdout(&self) -> bool {
        false
    }

    /// Why the sink runs only where the run's commit point carries
    /// transactions it writes into ([`SinkContext::transactions`]: worker
    /// mode), if it does; `None` for most sinks.
    fn needs_transactions(&self) -> Option<&'static str> {
        None
    }

    /// Checks the files the settings name; `dir` is the job folder. Runs
    /// after the job's wiring checks.
    fn check_files(&self, dir: &Path) -> Result<(), String> {
        let _ = dir;
        Ok(())
    }
}

/// Equality of connector settings behind a trait object, so that parsed
/// jobs compare. Implemented for every `PartialEq` type.
pub trait DynEq: Any {
    /// Whether `other` is a `Self` equal to `self`.
    fn dyn_eq(&self, other: &dyn Any) -> bool;
}

impl<T: Any + PartialEq> DynEq for T {
    fn dyn_eq(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
}

impl PartialEq for dyn SourceConnector {
    fn eq(&self, other: &Self) -> bool {
        self.dyn_eq(other as &dyn Any)
    }
}

impl Eq for dyn SourceConnector {}

impl PartialEq for dyn SinkConnector {
    fn eq(&self, other: &Self) -> bool {
        self.dyn_eq(other as &dyn Any)
    }
}

impl Eq for dyn SinkConnector {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_keys_are_the_parsed_ones() {
        Registry::builtin().check_keys().unwrap();
    }

    #[test]
    fn settings_compare_through_the_trait_object() {
        let parse =
            |t: &SourceType, text: &str| (t.read)(text.parse().unwrap()).unwrap()(Path::new("."));
        let a = parse(&generator::SOURCE, "count = 1").unwrap();
        let b = parse(&generator::SOURCE, "count = 1").unwrap();
        let c = parse(&generator::SOURCE, "count = 2").unwrap();
        let d = parse(&stdin::SOURCE, "").unwrap();
        assert!(a == b && a != c && a != d);
    }
}
