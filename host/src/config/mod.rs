//! Job files: parsing and static validation.
//!
//! A job file (TOML) wires sources, operators (Wasm plugins) and sinks into a DAG.
//! [`Job::parse`] checks everything that can be checked without loading a plugin;
//! [`Job::resolve_ports`] checks one operator's wiring, and the output port names its
//! consumers use, once its plugin's ports are known.
//!
//! Invariants of a [`Job`] returned by [`Job::load`] or [`Job::parse`]:
//! - ids are non-empty, made of `[A-Za-z0-9_-]`, and unique across sources, operators and sinks;
//! - every upstream names a source or an operator (never a sink), a port only of an
//!   operator or the dead-letter port of a source whose `on_error` names the sink,
//!   and no input lists one upstream twice; every sink has an input;
//! - operators form no cycle, and every source and operator has at least one consumer;
//! - every operator whose `on_error` sends dead letters to a sink has a replay source
//!   `replay:<id>` after the job file's sources (`replay`), wired by [`Job::resolve_ports`];
//! - every path is joined onto the job file's folder (an absolute path stays as written);
//! - plugin files and file-source paths were existing files at parse time, and no sink
//!   writes a file that a source reads or another sink writes.
//!
//! This module reads the file and orchestrates the checks; the entries are
//! built by `source`, `operator` (with `limits`) and `sink`, the tables
//! `[checkpoint]` and `[restart]` by `checkpoint`, `[cluster]` by `cluster`, upstream references are
//! read by `upstream`, the wiring is checked by `graph`, replay sources are
//! added by `replay`, and `error` holds
//! [`JobError`]. A source's or sink's own settings are parsed by the
//! connector its `type` names ([`crate::connectors`]).
//! Nothing here depends on the Wasm layer.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use toml::{Table, Value};

use crate::connectors::Registry;
use crate::fields::{entry_type, from_table, one_line, relative_to};

mod checkpoint;
mod cluster;
mod error;
mod graph;
mod limits;
mod on_error;
mod operator;
mod recording;
mod replay;
mod sink;
mod source;
#[cfg(test)]
mod tests;
mod upstream;

pub use checkpoint::{
    CheckpointConfig, CheckpointMode, RestartStrategy, STORE_SCHEMES, check_store_url,
    default_state_dir, is_url,
};
pub use cluster::ClusterConfig;
pub use error::JobError;
pub use limits::{
    Grants, LIMIT_KEYS, LimitValue, Limits, format_duration, format_size, parse_duration,
    parse_size,
};
pub use on_error::{DEAD_LETTER_PORT, OnError};
pub use operator::{Exchange, Inputs, MAX_PARALLELISM, OperatorConfig};
pub use recording::{DEFAULT_RECORD_MAX_BYTES, Keep, RecordInputs};
pub use sink::SinkConfig;
pub use source::{DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, SourceConfig};
pub use upstream::Upstream;

use checkpoint::{build_checkpoint, build_restart};
use cluster::build_cluster;
use error::label;
use operator::build_operator;
use sink::build_sink;
use source::build_source;

/// A parsed and validated job file.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The job's name (`name`).
    pub name: String,
    /// The job file.
    pub path: PathBuf,
    /// The job file's folder (`.` for a bare file name); relative paths are joined onto it.
    pub dir: PathBuf,
    /// The `[checkpoint]` table.
    pub checkpoint: CheckpointConfig,
    /// The `[[source]]` entries, in file order.
    pub sources: Vec<SourceConfig>,
    /// The `[[operator]]` entries, in file order.
    pub operators: Vec<OperatorConfig>,
    /// The `[[sink]]` entries, in file order.
    pub sinks: Vec<SinkConfig>,
    /// The `[restart]` table: what to do when an attempt fails.
    pub restart: RestartStrategy,
    /// The `[cluster]` table: how worker processes share the job.
    pub cluster: ClusterConfig,
}

// The file's top level; each table is read by the builder of its entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: Option<String>,
    checkpoint: Option<Table>,
    restart: Option<Table>,
    cluster: Option<Table>,
    #[serde(default)]
    source: Vec<Table>,
    #[serde(default)]
    operator: Vec<Table>,
    #[serde(default)]
    sink: Vec<Table>,
}

impl Job {
    /// Reads, parses and validates the job file at `path`, or the
    /// [`JOB_FILE`] of the folder at `path`, whose sources and sinks are of
    /// the types in `registry`.
    pub fn load(path: &Path, registry: &Registry) -> Result<Job, JobError> {
        let path = job_file(path)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Job::parse(&path, &text, registry),
            Err(error) => Err(JobError::Read { path, error }),
        }
    }

    /// Parses and validates job text as if it were at `path` (for tests and
    /// tools), as [`Job::load`] does.
    pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<Job, JobError> {
        let invalid = |entry: &str, message: String| JobError::invalid(path, entry, message);
        let table: Table = text.parse().map_err(|e| JobError::syntax(path, text, &e))?;
        let raw: RawJob = table.try_into().map_err(|e| {
            let message = one_line(&e);
            let hint = match message.as_str() {
                m if m.contains("expected a sequence") => {
                    "; write each entry as a [[table]] (double brackets)"
                }
                m if m.contains("unknown field") => "; check the spelling",
                _ => "",
            };
            invalid("job", format!("{message}{hint}"))
        })?;
        let Some(name) = raw.name.filter(|name| !name.trim().is_empty()) else {
            let message = "`name` is missing or empty; add name = \"...\"";
            return Err(invalid("job", message.into()));
        };
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let checkpoint = build_checkpoint(&dir, &name, raw.checkpoint.unwrap_or_default())
            .map_err(|m| invalid("checkpoint", m))?;
        let restart = match raw.restart {
            None => RestartStrategy::None,
            Some(table) => build_restart(table).map_err(|m| invalid("restart", m))?,
        };
        let cluster = build_cluster(&name, raw.cluster.unwrap_or_default())
            .map_err(|m| invalid("cluster", m))?;
        let mut job = Job {
            sources: build_all(path, raw.source, "source", |t| {
                build_source(registry, &dir, t)
            })?,
            operators: build_all(path, raw.operator, "operator", |t| build_operator(&dir, t))?,
            sinks: build_all(path, raw.sink, "sink", |t| build_sink(registry, &dir, t))?,
            name,
            path: path.to_path_buf(),
            dir,
            checkpoint,
            restart,
            cluster,
        };
        job.add_replays();
        job.wire_dead_letters()?;
        // Structure first, then the file system: a typo'd id is reported before a missing file.
        job.validate_graph()?;
        job.validate_files()?;
        Ok(job)
    }

    fn invalid(&self, entry: &str, message: String) -> JobError {
        JobError::invalid(&self.path, entry, message)
    }

    /// Checks the files the job names: see the invariants of [`Job`].
    fn validate_files(&self) -> Result<(), JobError> {
        let relative = relative_to(&self.dir);
        if self.checkpoint.dir.is_file() {
            let dir = self.checkpoint.dir.display();
            let message = format!("dir {dir} is a file; point `dir` at a folder {relative}");
            return Err(self.invalid("checkpoint", message));
        }
        for op in &self.operators {
            if !op.plugin.is_file() {
                let message = format!(
                    "plugin file {} does not exist; build the plugin or fix `plugin` {relative}",
                    op.plugin.display()
                );
                return Err(self.invalid(&label("operator", &op.id), message));
            }
        }
        // Files already read or written, lexically normalised, with who uses them.
        let mut taken: Vec<(PathBuf, String)> = Vec::new();
        for source in &self.sources {
            let fail = |message| self.invalid(&label("source", &source.id), message);
            source.connector.check_files(&self.dir).map_err(fail)?;
            if let Some(path) = source.connector.file() {
                taken.push((normalize(path), format!("source {:?} reads", source.id)));
            }
        }
        for sink in &self.sinks {
            let fail = |message| self.invalid(&label("sink", &sink.id), message);
            sink.connector.check_files(&self.dir).map_err(fail)?;
            let Some(path) = sink.connector.file() else {
                continue;
            };
            let norm = normalize(path);
            if let Some((_, user)) = taken.iter().find(|(p, _)| *p == norm) {
                return Err(fail(format!(
                    "{user} the same file {}; give this sink its own `path`",
                    path.display()
                )));
            }
            taken.push((norm, format!("sink {:?} writes", sink.id)));
        }
        Ok(())
    }
}

/// The job file a folder stands for, as in `weir run examples/wordcount`.
pub const JOB_FILE: &str = "job.toml";

/// The job file `path` names: `path` itself, or `path/`[`JOB_FILE`] when
/// `path` is a folder, which must then hold one.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// assert!(weir::config::job_file(dir.path()).is_err());
/// std::fs::write(dir.path().join("job.toml"), "").unwrap();
/// assert_eq!(weir::config::job_file(dir.path()).unwrap(), dir.path().join("job.toml"));
/// ```
pub fn job_file(path: &Path) -> Result<PathBuf, JobError> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let file = path.join(JOB_FILE);
    if file.is_file() {
        return Ok(file);
    }
    Err(JobError::NoJobFile {
        dir: path.to_path_buf(),
    })
}

/// Builds each entry on its own so that a failure names it (by id, else by position).
fn build_all<T>(
    path: &Path,
    tables: Vec<Table>,
    section: &str,
    build: impl Fn(Table) -> Result<T, String>,
) -> Result<Vec<T>, JobError> {
    let entries = tables.into_iter().enumerate().map(|(i, table)| {
        let entry = match table.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => label(section, id),
            _ => format!("{section} #{}", i + 1),
        };
        build(table).map_err(|message| JobError::invalid(path, &entry, message))
    });
    entries.collect()
}

/// Splits a `[[source]]` or `[[sink]]` table by its `type` (one of `types`:
/// name and the connector's own keys) into the options every entry of its
/// kind has (`R`, read from the keys `options`, `id` first) and what the
/// connector's `read` makes of the rest. Values of the wrong type are
/// reported first, in the table's order; messages list `id` and `type`
/// first and the other options last.
fn split_entry<R, B>(
    mut table: Table,
    types: &[(&str, &[&str])],
    options: &[&str],
    read: impl Fn(usize, Table) -> Result<B, String>,
) -> Result<(R, B), String>
where
    R: for<'de> Deserialize<'de>,
{
    let listed: Vec<(&str, Vec<&str>)> = types
        .iter()
        .map(|(name, keys)| (*name, [&["id", "type"], *keys, &options[1..]].concat()))
        .collect();
    let index = entry_type(&mut table, &listed)?;
    read_each(&table, |key, value| {
        if options.contains(&key) {
            from_table::<R>(value).map(drop)
        } else {
            read(index, value).map(drop)
        }
    })?;
    let raw: R = from_table(take(&mut table, options))?;
    Ok((raw, read(index, table)?))
}

/// Reads each value of `table` on its own, in the table's order, with `read`
/// (given the key): of several values of the wrong type the first is named,
/// as when one struct reads the whole entry.
fn read_each(
    table: &Table,
    read: impl Fn(&str, Table) -> Result<(), String>,
) -> Result<(), String> {
    for (key, value) in table {
        read(key, Table::from_iter([(key.clone(), value.clone())]))?;
    }
    Ok(())
}

/// Moves the `keys` that `table` holds into a table of their own.
fn take(table: &mut Table, keys: &[&str]) -> Table {
    let taken = keys
        .iter()
        .filter_map(|&key| Some((key.to_owned(), table.remove(key)?)));
    taken.collect()
}

/// Lexical normalisation (drops `.`, folds `name/..`) so that two spellings of one path
/// compare equal; does not touch the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out.iter().collect()
}
