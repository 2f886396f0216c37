//! Job files: parsing and static validation.
//!
//! A job file (TOML) wires sources, operators (Wasm plugins) and sinks into a DAG.
//! [`Job::parse`] checks everything that can be checked without loading a plugin;
//! [`Job::resolve_ports`] checks one operator's wiring once its plugin's ports are known.
//!
//! Invariants of a [`Job`] returned by [`Job::load`] or [`Job::parse`]:
//! - ids are non-empty, made of `[A-Za-z0-9_-]`, and unique across sources, operators and sinks;
//! - every upstream id names a source or an operator (never a sink);
//! - operators form no cycle, and every source and operator has at least one consumer;
//! - every path is joined onto the job file's folder (an absolute path stays as written);
//! - plugin files and file-source paths were existing files at parse time.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::{Table, Value};

mod limits;

pub use limits::{Grants, LimitValue, Limits, format_duration, format_size, parse_size};

/// Records per batch when a source does not set `batch_size`.
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// Largest accepted `batch_size`.
pub const MAX_BATCH_SIZE: usize = 65536;
/// Largest accepted operator `parallelism`.
pub const MAX_PARALLELISM: u32 = 128;

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
}

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

/// Checkpoint settings (`[checkpoint]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Time between checkpoints; `None` turns checkpoints off. Never zero.
    pub interval: Option<Duration>,
    /// Folder holding checkpoints (resolved; default `state`).
    pub dir: PathBuf,
    /// Number of complete checkpoints kept (at least 1, default 3).
    pub retain: usize,
}

/// One `[[source]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// The source's id.
    pub id: String,
    /// What the source reads.
    pub kind: SourceKind,
    /// At most this many records per second (`rate`); unlimited when absent.
    pub rate: Option<u64>,
}

/// The kind of a source (`type`) with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceKind {
    /// Reads a file (`type = "file"`).
    File {
        /// The file (resolved).
        path: PathBuf,
        /// How the file is split into records.
        format: Format,
        /// Field or column used as record key (jsonl/csv); ignored for `lines`.
        key: Option<String>,
        /// Records per batch.
        batch_size: usize,
    },
    /// Produces `count` lines `w<N>` drawn from `words` distinct words (`type = "generator"`).
    Generator {
        /// Records to produce.
        count: u64,
        /// Distinct words (at least 1).
        words: u64,
        /// Random seed.
        seed: u64,
        /// Records per batch.
        batch_size: usize,
    },
    /// Reads standard input (`type = "stdin"`).
    Stdin {
        /// How the input is split into records.
        format: Format,
        /// Field or column used as record key (jsonl/csv); ignored for `lines`.
        key: Option<String>,
        /// Records per batch.
        batch_size: usize,
    },
}

/// Record format of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One record per line; the line is both key and value.
    Lines,
    /// One JSON value per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
}

/// One `[[operator]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorConfig {
    /// The operator's id.
    pub id: String,
    /// The plugin `.wasm` file (resolved).
    pub plugin: PathBuf,
    /// Upstream wiring; never empty.
    pub inputs: Inputs,
    /// Number of parallel instances, 1..=[`MAX_PARALLELISM`].
    pub parallelism: u32,
    /// The `config` table as JSON object text (`{}` when absent; datetimes become strings).
    pub config: String,
    /// The `limits` table over [`Limits::default`] (see `SECURITY.md`).
    pub limits: Limits,
    /// The `grants` list (none by default).
    pub grants: Grants,
}

/// How an operator's input ports are wired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {
    /// `inputs = { port = "upstream" }`: (port, upstream id) pairs, sorted by port name.
    Named(Vec<(String, String)>),
    /// `inputs = ["upstream"]`: upstream ids for the plugin's input ports in declared order.
    Positional(Vec<String>),
}

impl Inputs {
    /// The upstream ids, in wiring order (an upstream wired to two ports appears twice).
    pub fn upstreams(&self) -> Vec<&str> {
        match self {
            Inputs::Named(pairs) => pairs.iter().map(|(_, up)| up.as_str()).collect(),
            Inputs::Positional(ups) => ups.iter().map(String::as_str).collect(),
        }
    }
}

/// One `[[sink]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// The sink's id.
    pub id: String,
    /// Where the sink writes.
    pub kind: SinkKind,
    /// The upstream id (a source or an operator).
    pub input: String,
}

/// The kind of a sink (`type`) with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkKind {
    /// Writes a file (`type = "file"`); its folder is created if missing.
    File {
        /// The file (resolved).
        path: PathBuf,
        /// How record values are written.
        format: SinkFormat,
    },
    /// Writes standard output (`type = "stdout"`).
    Stdout {
        /// How record values are written.
        format: SinkFormat,
    },
}

/// How a sink writes record values: one value per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkFormat {
    /// Values written as they are.
    Lines,
    /// Values written as they are; each value is expected to be JSON.
    Jsonl,
}

/// Why a job file was rejected. Each message is one line naming the job file.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job file could not be read.
    #[error("{}: cannot read job file: {error}; check the path", path.display())]
    Read {
        /// The job file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The job file is not valid TOML.
    #[error("{}:{line}:{column}: TOML syntax error: {message}", path.display())]
    Syntax {
        /// The job file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What the TOML parser expected.
        message: String,
    },
    /// The job file is valid TOML but not a valid job.
    #[error("{}: {entry}: {message}", path.display())]
    Invalid {
        /// The job file.
        path: PathBuf,
        /// The offending entry, e.g. `operator "x"`, `checkpoint` or `job`.
        entry: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

// Raw shapes of the file. Fields are optional so that a missing one gets a message naming
// its entry; integers are i64 (TOML's own) so that range errors are ours, not serde's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: Option<String>,
    checkpoint: Option<Table>,
    restart: Option<Table>,
    #[serde(default)]
    source: Vec<Table>,
    #[serde(default)]
    operator: Vec<Table>,
    #[serde(default)]
    sink: Vec<Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    interval: Option<String>,
    dir: Option<String>,
    retain: Option<i64>,
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

// `type` is removed (and the keys checked against it) by `entry_type` before these are read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    id: Option<String>,
    path: Option<String>,
    format: Option<Format>,
    key: Option<String>,
    batch_size: Option<i64>,
    count: Option<i64>,
    words: Option<i64>,
    seed: Option<i64>,
    rate: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperator {
    id: Option<String>,
    plugin: Option<String>,
    inputs: Option<Value>,
    parallelism: Option<i64>,
    config: Option<Value>,
    limits: Option<Value>,
    grants: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    id: Option<String>,
    path: Option<String>,
    format: Option<SinkFormat>,
    input: Option<String>,
}

// Keys accepted per `type`; a key of another type is rejected as unknown.
const SOURCE_TYPES: &[(&str, &[&str])] = &[
    (
        "file",
        &["id", "type", "path", "format", "key", "batch_size", "rate"],
    ),
    (
        "generator",
        &["id", "type", "count", "words", "seed", "batch_size", "rate"],
    ),
    (
        "stdin",
        &["id", "type", "format", "key", "batch_size", "rate"],
    ),
];
const SINK_TYPES: &[(&str, &[&str])] = &[
    ("file", &["id", "type", "path", "format", "input"]),
    ("stdout", &["id", "type", "format", "input"]),
];

impl Job {
    /// Reads, parses and validates the job file.
    pub fn load(path: &Path) -> Result<Job, JobError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Job::parse(path, &text),
            Err(error) => Err(JobError::Read {
                path: path.to_path_buf(),
                error,
            }),
        }
    }

    /// Parses and validates job text as if it were at `path` (for tests and tools).
    pub fn parse(path: &Path, text: &str) -> Result<Job, JobError> {
        let invalid = |entry: &str, message: String| JobError::Invalid {
            path: path.to_path_buf(),
            entry: entry.to_owned(),
            message,
        };
        let table: Table = text.parse().map_err(|e| syntax_error(path, text, &e))?;
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
        let checkpoint = build_checkpoint(&dir, raw.checkpoint.unwrap_or_default())
            .map_err(|m| invalid("checkpoint", m))?;
        let restart = match raw.restart {
            None => RestartStrategy::None,
            Some(table) => build_restart(table).map_err(|m| invalid("restart", m))?,
        };
        let job = Job {
            sources: build_all(path, raw.source, "source", |t| build_source(&dir, t))?,
            operators: build_all(path, raw.operator, "operator", |t| build_operator(&dir, t))?,
            sinks: build_all(path, raw.sink, "sink", |t| build_sink(&dir, t))?,
            name,
            path: path.to_path_buf(),
            dir,
            checkpoint,
            restart,
        };
        // Structure first, then the file system: a typo'd id is reported before a missing file.
        job.validate_graph()?;
        job.validate_files()?;
        Ok(job)
    }

    /// Operators in topological order (upstreams first, ties in file order); sources and
    /// sinks excluded. On a job not built by `parse`, operators on a cycle come last.
    pub fn topological_operators(&self) -> Vec<&OperatorConfig> {
        let ups = self.operator_upstreams();
        let mut order = kahn(&ups);
        let rest: Vec<usize> = (0..ups.len()).filter(|i| !order.contains(i)).collect();
        order.extend(rest);
        order.into_iter().map(|i| &self.operators[i]).collect()
    }

    /// Checks an operator's inputs against the plugin's declared input port names and
    /// resolves them to (port index, upstream id) pairs, ordered by port index.
    ///
    /// Fails if a named port is not declared by the plugin, a declared port is left
    /// unwired, a positional list's length differs from the number of declared ports, or
    /// the plugin declares no output port while something consumes the operator.
    pub fn resolve_ports(
        &self,
        operator: &OperatorConfig,
        plugin_inputs: &[String],
        plugin_outputs: &[String],
    ) -> Result<Vec<(u32, String)>, JobError> {
        let fail = |message: String| self.invalid(&label("operator", &operator.id), message);
        let plugin = operator.plugin.display();
        let declared = match plugin_inputs {
            [] => "none".to_owned(),
            ports => ports.join(", "),
        };
        // wired[i] is the upstream of declared port i.
        let mut wired: Vec<Option<&str>> = vec![None; plugin_inputs.len()];
        match &operator.inputs {
            Inputs::Named(pairs) => {
                for (port, up) in pairs {
                    let Some(i) = plugin_inputs.iter().position(|p| p == port) else {
                        return Err(fail(format!(
                            "input port {port:?} is not declared by plugin {plugin} \
                             (declared inputs: {declared}); rename or remove it in `inputs`"
                        )));
                    };
                    wired[i] = Some(up);
                }
            }
            Inputs::Positional(ups) if ups.len() != plugin_inputs.len() => {
                return Err(fail(format!(
                    "`inputs` lists {} upstream(s) but plugin {plugin} declares {} input \
                     port(s) ({declared}); list one upstream per port",
                    ups.len(),
                    plugin_inputs.len()
                )));
            }
            Inputs::Positional(ups) => wired = ups.iter().map(|up| Some(up.as_str())).collect(),
        }
        let mut resolved = Vec::with_capacity(wired.len());
        for ((index, port), up) in (0u32..).zip(plugin_inputs).zip(wired) {
            let Some(up) = up else {
                return Err(fail(format!(
                    "input port {port:?} of plugin {plugin} is not wired; add \
                     {port} = \"<upstream id>\" to `inputs`"
                )));
            };
            resolved.push((index, up.to_owned()));
        }
        let consumers = self.consumers(&operator.id);
        if plugin_outputs.is_empty() && !consumers.is_empty() {
            return Err(fail(format!(
                "plugin {plugin} declares no output port but {} consume(s) this operator; \
                 use a plugin with an output or rewire the consumers",
                consumers.join(", ")
            )));
        }
        Ok(resolved)
    }

    /// Ids of everything that consumes `id`: operators (file order, each once), then sinks.
    pub fn consumers(&self, id: &str) -> Vec<&str> {
        let ops = self
            .operators
            .iter()
            .filter(|op| op.inputs.upstreams().contains(&id));
        let sinks = self.sinks.iter().filter(|sink| sink.input == id);
        ops.map(|op| op.id.as_str())
            .chain(sinks.map(|s| s.id.as_str()))
            .collect()
    }

    fn invalid(&self, entry: &str, message: String) -> JobError {
        JobError::Invalid {
            path: self.path.clone(),
            entry: entry.to_owned(),
            message,
        }
    }

    /// For each operator, the indices of its upstream operators (sources are left out).
    fn operator_upstreams(&self) -> Vec<Vec<usize>> {
        // Reversed so that, were ids duplicated, the first operator with an id wins.
        let ids = self.operators.iter().enumerate().rev();
        let index: HashMap<&str, usize> = ids.map(|(i, op)| (op.id.as_str(), i)).collect();
        let ups = |op: &OperatorConfig| {
            let ups = op.inputs.upstreams();
            ups.iter().filter_map(|up| index.get(up).copied()).collect()
        };
        self.operators.iter().map(ups).collect()
    }

    fn validate_graph(&self) -> Result<(), JobError> {
        if self.sources.is_empty() {
            return Err(self.invalid("job", "no source; add a [[source]] table".into()));
        }
        if self.sinks.is_empty() {
            return Err(self.invalid("job", "no sink; add a [[sink]] table".into()));
        }
        let sources = self.sources.iter().map(|s| ("source", s.id.as_str()));
        let operators = self.operators.iter().map(|o| ("operator", o.id.as_str()));
        let sinks = self.sinks.iter().map(|s| ("sink", s.id.as_str()));
        let all: Vec<(&str, &str)> = sources.chain(operators).chain(sinks).collect();
        let mut kinds: HashMap<&str, &str> = HashMap::new();
        for &(kind, id) in &all {
            if let Some(first) = kinds.insert(id, kind) {
                let message = format!("{first} {id:?} has the same id; ids must be unique");
                return Err(self.invalid(&label(kind, id), message));
            }
        }
        // Upstreams are sources and operators; sinks have no output.
        let known: Vec<&str> = all.iter().filter(|e| e.0 != "sink").map(|e| e.1).collect();
        let op_edges = self.operators.iter().flat_map(|op| {
            let entry = label("operator", &op.id);
            op.inputs
                .upstreams()
                .into_iter()
                .map(move |up| (entry.clone(), up))
        });
        let sink_edges = self
            .sinks
            .iter()
            .map(|s| (label("sink", &s.id), s.input.as_str()));
        for (entry, up) in op_edges.chain(sink_edges) {
            let message = match kinds.get(up) {
                Some(&"sink") => format!(
                    "input {up:?} is a sink, which has no output; use that sink's input instead"
                ),
                Some(_) => continue,
                None => format!(
                    "input {up:?} is not a known id (sources and operators: {}); fix the id",
                    known.join(", ")
                ),
            };
            return Err(self.invalid(&entry, message));
        }
        let ups = self.operator_upstreams();
        let order = kahn(&ups);
        if order.len() < ups.len() {
            let cycle = find_cycle(&ups, &order);
            let ids: Vec<&str> = cycle
                .iter()
                .map(|&i| self.operators[i].id.as_str())
                .collect();
            let message = format!("operators form a cycle {}; break it", ids.join(" -> "));
            return Err(self.invalid(
                &label("operator", ids.first().copied().unwrap_or_default()),
                message,
            ));
        }
        for (kind, id) in all.into_iter().filter(|e| e.0 != "sink") {
            if self.consumers(id).is_empty() {
                let message = format!(
                    "output is not consumed by any operator or sink; add a sink with \
                     input = {id:?} or remove this {kind}"
                );
                return Err(self.invalid(&label(kind, id), message));
            }
        }
        Ok(())
    }

    fn validate_files(&self) -> Result<(), JobError> {
        let relative = format!("(relative to {})", self.dir.display());
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
            let SourceKind::File { path, .. } = &source.kind else {
                continue;
            };
            if !path.is_file() {
                let message = format!(
                    "input file {} does not exist or is not a file; fix `path` {relative}",
                    path.display()
                );
                return Err(self.invalid(&label("source", &source.id), message));
            }
            taken.push((normalize(path), format!("source {:?} reads", source.id)));
        }
        for sink in &self.sinks {
            let SinkKind::File { path, .. } = &sink.kind else {
                continue;
            };
            let norm = normalize(path);
            let message = if path.is_dir() {
                format!(
                    "path {} is a directory; set `path` to a file",
                    path.display()
                )
            } else if let Some((_, user)) = taken.iter().find(|(p, _)| *p == norm) {
                format!(
                    "{user} the same file {}; give this sink its own `path`",
                    path.display()
                )
            } else {
                taken.push((norm, format!("sink {:?} writes", sink.id)));
                continue;
            };
            return Err(self.invalid(&label("sink", &sink.id), message));
        }
        Ok(())
    }
}

/// `kind "id"`, how messages name an entry.
fn label(kind: &str, id: &str) -> String {
    format!("{kind} {id:?}")
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
        build(table).map_err(|message| JobError::Invalid {
            path: path.into(),
            entry,
            message,
        })
    });
    entries.collect()
}

/// Kahn's algorithm over operator indices; each round takes the first ready operator in
/// file order, so the order is deterministic. Shorter than `ups` iff there is a cycle.
fn kahn(ups: &[Vec<usize>]) -> Vec<usize> {
    let mut done = vec![false; ups.len()];
    let mut order = Vec::with_capacity(ups.len());
    while let Some(i) = (0..ups.len()).find(|&i| !done[i] && ups[i].iter().all(|&u| done[u])) {
        done[i] = true;
        order.push(i);
    }
    order
}

/// A cycle among the operators `kahn` left out, in data-flow order, starting and ending at
/// its first-declared operator. Every left-out operator has a left-out upstream, so
/// walking upstream from one of them must revisit an operator: that closes the cycle.
fn find_cycle(ups: &[Vec<usize>], order: &[usize]) -> Vec<usize> {
    let left_out = |i: &usize| !order.contains(i);
    let mut walk: Vec<usize> = (0..ups.len()).find(left_out).into_iter().collect();
    while let Some(&current) = walk.last() {
        let Some(up) = ups[current].iter().copied().find(left_out) else {
            break;
        };
        if let Some(pos) = walk.iter().position(|&w| w == up) {
            // walk[k + 1] feeds walk[k] and walk[pos] feeds `current`: reverse for flow order.
            let mut cycle: Vec<usize> = walk[pos..].iter().rev().copied().collect();
            let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.extend(cycle.first().copied());
            return cycle;
        }
        walk.push(up);
    }
    walk // unreachable for a left-out set built by `kahn`
}

fn syntax_error(path: &Path, text: &str, error: &toml::de::Error) -> JobError {
    let mut offset = error.span().map_or(0, |span| span.start).min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1; // terminates: 0 is a char boundary
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let message = one_line(&error.message());
    JobError::Syntax {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// Collapses a (possibly multi-line) error message into one line.
fn one_line(message: &impl std::fmt::Display) -> String {
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

/// Deserializes one entry; serde's message names an unknown key and lists the known ones.
fn from_table<T: for<'de> Deserialize<'de>>(table: Table) -> Result<T, String> {
    table.try_into().map_err(|e| one_line(&e))
}

/// Removes and returns the entry's `type`, one of `types`, after checking that the table
/// holds only keys allowed for that type.
fn entry_type(
    table: &mut Table,
    types: &[(&'static str, &[&str])],
) -> Result<&'static str, String> {
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
    let Some(&(kind, allowed)) = types.iter().find(|(name, _)| *name == kind) else {
        return Err(format!("unknown type {kind:?}; {hint}"));
    };
    match table.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!(
            "unknown key `{key}` for type = {kind:?} (allowed: {}); remove it",
            allowed.join(", ")
        )),
        None => Ok(kind),
    }
}

fn check_id(id: Option<String>) -> Result<String, String> {
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
fn int_in<T: TryFrom<i64>>(
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

/// Joins a non-empty path onto the job folder (an absolute path replaces the folder).
fn resolve(dir: &Path, key: &str, value: Option<String>) -> Result<PathBuf, String> {
    match value {
        Some(path) if !path.is_empty() => Ok(dir.join(path)),
        _ => Err(format!(
            "`{key}` is missing or empty; add {key} = \"...\" (relative to the job file)"
        )),
    }
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

fn build_checkpoint(dir: &Path, table: Table) -> Result<CheckpointConfig, String> {
    let raw: RawCheckpoint = from_table(table)?;
    let interval = match raw
        .interval
        .map(|text| (humantime::parse_duration(&text), text))
    {
        None => None,
        Some((Ok(interval), _)) if !interval.is_zero() => Some(interval),
        Some((Ok(_), _)) => {
            return Err(
                "`interval` is zero; use e.g. \"1s\", or remove it to turn checkpoints off".into(),
            );
        }
        Some((Err(e), text)) => {
            return Err(format!(
                "`interval` = {text:?} is not a duration ({e}); use e.g. \"1s\", \"500ms\", \"2m\""
            ));
        }
    };
    Ok(CheckpointConfig {
        interval,
        dir: resolve(dir, "dir", Some(raw.dir.unwrap_or_else(|| "state".into())))?,
        retain: int_in("retain", raw.retain, 3, 1, i64::MAX)?,
    })
}

fn duration(key: &str, value: Option<String>, default: &str) -> Result<Duration, String> {
    let text = value.unwrap_or_else(|| default.to_string());
    humantime::parse_duration(&text).map_err(|e| {
        format!("`{key}` = {text:?} is not a duration ({e}); use e.g. \"1s\", \"500ms\"")
    })
}

fn build_restart(table: Table) -> Result<RestartStrategy, String> {
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

fn build_source(dir: &Path, mut table: Table) -> Result<SourceConfig, String> {
    let kind = entry_type(&mut table, SOURCE_TYPES)?;
    let raw: RawSource = from_table(table)?;
    let id = check_id(raw.id)?;
    let max = MAX_BATCH_SIZE as i64;
    let batch_size = int_in(
        "batch_size",
        raw.batch_size,
        DEFAULT_BATCH_SIZE as i64,
        1,
        max,
    )?;
    let (format, key) = (raw.format.unwrap_or(Format::Lines), raw.key);
    let kind = match kind {
        "file" => {
            let path = resolve(dir, "path", raw.path)?;
            SourceKind::File {
                path,
                format,
                key,
                batch_size,
            }
        }
        "stdin" => SourceKind::Stdin {
            format,
            key,
            batch_size,
        },
        _ => SourceKind::Generator {
            count: match raw.count {
                Some(count) => int_in("count", Some(count), 0, 0, i64::MAX)?,
                None => return Err("`count` is missing; add count = <records to produce>".into()),
            },
            words: int_in("words", raw.words, 1000, 1, i64::MAX)?,
            seed: int_in("seed", raw.seed, 0, 0, i64::MAX)?,
            batch_size,
        },
    };
    let rate = match raw.rate {
        None => None,
        Some(r) => Some(int_in("rate", Some(r), 1, 1, i64::MAX)?),
    };
    Ok(SourceConfig { id, kind, rate })
}

fn build_operator(dir: &Path, table: Table) -> Result<OperatorConfig, String> {
    const HINT: &str = "use inputs = { port = \"upstream\" } or inputs = [\"upstream\"]";
    let raw: RawOperator = from_table(table)?;
    let id = check_id(raw.id)?;
    let upstream = |what: &str, value: Value| match value {
        Value::String(up) => Ok(up),
        other => Err(format!(
            "{what} must be an upstream id string (got {})",
            other.type_str()
        )),
    };
    let inputs = match raw.inputs {
        Some(Value::Table(table)) => {
            let pairs = table.into_iter().map(|(port, v)| {
                let up = upstream(&format!("input port {port:?}"), v)?;
                Ok((port, up))
            });
            let mut pairs: Vec<(String, String)> = pairs.collect::<Result<_, String>>()?;
            pairs.sort(); // table order depends on toml's `preserve_order` feature
            Inputs::Named(pairs)
        }
        Some(Value::Array(list)) => {
            let ups = list
                .into_iter()
                .map(|v| upstream("each entry of `inputs`", v));
            Inputs::Positional(ups.collect::<Result<_, _>>()?)
        }
        Some(other) => {
            return Err(format!(
                "`inputs` must be a table or a list (got {}); {HINT}",
                other.type_str()
            ));
        }
        None => return Err(format!("`inputs` is missing; {HINT}")),
    };
    if inputs.upstreams().is_empty() {
        return Err(format!("`inputs` is empty; {HINT}"));
    }
    let config = match raw.config {
        None => "{}".to_owned(),
        Some(table @ Value::Table(_)) => to_json(table)?.to_string(),
        Some(other) => {
            return Err(format!(
                "`config` must be a table (got {}), e.g. config = {{ k = 1 }}",
                other.type_str()
            ));
        }
    };
    let max = i64::from(MAX_PARALLELISM);
    Ok(OperatorConfig {
        id,
        plugin: resolve(dir, "plugin", raw.plugin)?,
        inputs,
        parallelism: int_in("parallelism", raw.parallelism, 1, 1, max)?,
        config,
        limits: build_limits(raw.limits)?,
        grants: build_grants(raw.grants)?,
    })
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
fn build_limits(value: Option<Value>) -> Result<Limits, String> {
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
                let d = humantime::parse_duration(text).map_err(|e| {
                    format!(
                        "`{name}` = {text:?} is not a duration ({e}); use e.g. \"5s\" or \"200ms\""
                    )
                })?;
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
fn build_grants(value: Option<Value>) -> Result<Grants, String> {
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

/// TOML to JSON; datetimes become strings, non-finite floats (not JSON) are rejected.
fn to_json(value: Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as Json;
    Ok(match value {
        Value::String(s) => Json::String(s),
        Value::Integer(i) => Json::from(i),
        Value::Float(f) => Json::Number(serde_json::Number::from_f64(f).ok_or_else(|| {
            format!("`config` contains the float {f}, which JSON cannot represent; use a string")
        })?),
        Value::Boolean(b) => Json::Bool(b),
        Value::Datetime(d) => Json::String(d.to_string()),
        Value::Array(a) => Json::Array(a.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Table(t) => {
            let entries = t.into_iter().map(|(k, v)| Ok((k, to_json(v)?)));
            Json::Object(entries.collect::<Result<_, String>>()?)
        }
    })
}

fn build_sink(dir: &Path, mut table: Table) -> Result<SinkConfig, String> {
    let kind = entry_type(&mut table, SINK_TYPES)?;
    let raw: RawSink = from_table(table)?;
    let id = check_id(raw.id)?;
    let format = raw.format.unwrap_or(SinkFormat::Lines);
    let kind = match kind {
        "file" => SinkKind::File {
            path: resolve(dir, "path", raw.path)?,
            format,
        },
        _ => SinkKind::Stdout { format },
    };
    match raw.input {
        Some(input) if !input.is_empty() => Ok(SinkConfig { id, kind, input }),
        _ => Err("`input` is missing; add input = \"<source or operator id>\"".into()),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A folder holding a plugin `p.wasm` and an input file `a.csv`.
    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in ["p.wasm", "a.csv"] {
            std::fs::write(dir.path().join(file), "x").unwrap();
        }
        dir
    }

    fn parse_in(dir: &Path, text: &str) -> Result<Job, String> {
        Job::parse(&dir.join("job.toml"), text).map_err(|e| e.to_string())
    }

    fn parse(text: &str) -> Result<Job, String> {
        parse_in(fixture().path(), text)
    }

    /// Asserts that `text` is rejected with one line naming the job file and containing `part`.
    fn assert_rejected(text: &str, part: &str) {
        let message = parse(text).expect_err(text);
        assert!(
            !message.contains('\n') && message.contains("job.toml"),
            "{message}"
        );
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }

    /// `assert_rejects!(text => part, ...)`: [`assert_rejected`] for each pair.
    macro_rules! assert_rejects {
        ($($text:expr => $part:expr),+ $(,)?) => { $(assert_rejected(&$text, $part);)+ };
    }

    const GEN: &str = "[[source]]\nid = \"src\"\ntype = \"generator\"\ncount = 10\n";
    const OUT: &str = "[[sink]]\nid = \"out\"\ntype = \"stdout\"\ninput = \"src\"\n";
    const FILE: &str = "[[source]]\nid = \"src\"\ntype = \"file\"\npath = \"a.csv\"\n";

    /// A job named `t` made of `parts` (tables).
    fn doc(parts: &[&str]) -> String {
        format!("name = \"t\"\n{}", parts.concat())
    }

    fn op(id: &str, inputs: &str) -> String {
        format!("[[operator]]\nid = \"{id}\"\nplugin = \"p.wasm\"\ninputs = {inputs}\n")
    }

    fn sink(id: &str, input: &str) -> String {
        format!("[[sink]]\nid = \"{id}\"\ntype = \"stdout\"\ninput = \"{input}\"\n")
    }

    fn file_sink(id: &str, path: &str) -> String {
        format!("[[sink]]\nid = \"{id}\"\ntype = \"file\"\npath = \"{path}\"\ninput = \"src\"\n")
    }

    /// A job `src -> o -> out` whose operator table ends with `extra`.
    fn with_op(extra: &str) -> String {
        doc(&[GEN, &op("o", "[\"src\"]"), extra, &sink("out", "o")])
    }

    const FULL: &str = r#"
name = "reconcile"
[checkpoint]
interval = "1s"
retain = 5
[[source]]
id = "orders_a"
type = "file"
path = "a.csv"
format = "csv"
key = "order_no"
batch_size = 16
[[source]]
id = "orders_b"
type = "stdin"
format = "jsonl"
[[source]]
id = "words"
type = "generator"
count = 100
words = 7
seed = 42
[[operator]]
id = "reconcile"
plugin = "p.wasm"
inputs = { b = "orders_b", a = "orders_a" }
parallelism = 2
config = { tolerance = 0.5, nested = { list = [1, 2.25, "x"], on = true } }
[[operator]]
id = "count"
plugin = "./p.wasm"
inputs = ["words"]
[[sink]]
id = "out"
type = "file"
path = "out/reconcile.jsonl"
format = "jsonl"
input = "reconcile"
[[sink]]
id = "counts"
type = "stdout"
input = "count"
"#;

    #[test]
    fn full_job_parses_with_both_input_syntaxes() {
        let dir = fixture();
        let job = parse_in(dir.path(), FULL).unwrap();
        let at = |file: &str| dir.path().join(file);
        assert_eq!(
            (job.name.as_str(), job.dir.as_path()),
            ("reconcile", dir.path())
        );
        let checkpoint = CheckpointConfig {
            interval: Some(Duration::from_secs(1)),
            dir: at("state"),
            retain: 5,
        };
        assert_eq!(job.checkpoint, checkpoint);
        let (path, key) = (at("a.csv"), Some("order_no".to_owned()));
        let file = SourceKind::File {
            path,
            format: Format::Csv,
            key,
            batch_size: 16,
        };
        let stdin = SourceKind::Stdin {
            format: Format::Jsonl,
            key: None,
            batch_size: 1024,
        };
        let generator = SourceKind::Generator {
            count: 100,
            words: 7,
            seed: 42,
            batch_size: 1024,
        };
        let kinds: Vec<&SourceKind> = job.sources.iter().map(|s| &s.kind).collect();
        assert_eq!(kinds, [&file, &stdin, &generator]);
        let pair = |p: &str, u: &str| (p.to_owned(), u.to_owned());
        let reconcile = &job.operators[0];
        let named = Inputs::Named(vec![pair("a", "orders_a"), pair("b", "orders_b")]);
        assert_eq!((&reconcile.inputs, reconcile.parallelism), (&named, 2));
        let count = &job.operators[1];
        assert_eq!(count.inputs, Inputs::Positional(vec!["words".into()]));
        assert_eq!((count.parallelism, count.config.as_str()), (1, "{}"));
        let out = SinkKind::File {
            path: at("out/reconcile.jsonl"),
            format: SinkFormat::Jsonl,
        };
        assert_eq!(job.sinks[0].kind, out);
        assert_eq!(
            job.sinks[1].kind,
            SinkKind::Stdout {
                format: SinkFormat::Lines
            }
        );
        assert_eq!(job.consumers("reconcile"), ["out"]);
    }

    #[test]
    fn config_table_becomes_a_json_object() {
        let job = parse(FULL).unwrap();
        let config: serde_json::Value = serde_json::from_str(&job.operators[0].config).unwrap();
        let expected = serde_json::json!({
            "tolerance": 0.5, "nested": { "list": [1, 2.25, "x"], "on": true }
        });
        assert_eq!(config, expected);
        assert_rejects!(
            with_op("config = 3\n") => "operator \"o\": `config` must be a table (got integer)",
            with_op("config = { x = nan }\n") => "the float NaN, which JSON cannot represent",
        );
    }

    #[test]
    fn paths_resolve_against_the_job_folder() {
        let root = fixture();
        let dir = root.path().join("jobs");
        std::fs::create_dir(&dir).unwrap();
        let source = FILE.replace("a.csv", "../a.csv");
        let op = op("o", "[\"src\"]").replace("p.wasm", "../p.wasm");
        let out = file_sink("s", "/abs/out.txt").replace("\"src\"", "\"o\"");
        let job = parse_in(
            &dir,
            &doc(&["[checkpoint]\ndir = \"ck\"\n", &source, &op, &out]),
        );
        let job = job.unwrap();
        assert_eq!(
            (job.path, job.checkpoint.dir),
            (dir.join("job.toml"), dir.join("ck"))
        );
        assert_eq!(job.checkpoint.interval, None);
        let SourceKind::File { path, .. } = &job.sources[0].kind else {
            panic!()
        };
        assert_eq!(*path, dir.join("../a.csv"));
        assert_eq!(job.operators[0].plugin, dir.join("../p.wasm"));
        let SinkKind::File { path, .. } = &job.sinks[0].kind else {
            panic!()
        };
        assert_eq!(path, Path::new("/abs/out.txt"));
        let bare = Job::parse(Path::new("job.toml"), &doc(&[GEN, OUT])).unwrap();
        assert_eq!(bare.dir, Path::new("."));
    }

    #[test]
    fn load_reads_the_file_or_names_it() {
        let dir = fixture();
        let path = dir.path().join("job.toml");
        let message = Job::load(&path).unwrap_err().to_string();
        assert!(
            message.contains("job.toml: cannot read job file"),
            "{message}"
        );
        std::fs::write(&path, doc(&[GEN, OUT])).unwrap();
        assert_eq!(Job::load(&path).unwrap().name, "t");
    }

    #[test]
    fn limits_default_and_parse_sizes_durations_and_counts() {
        let job = parse(&with_op("")).unwrap();
        assert_eq!(job.operators[0].limits, Limits::default());
        assert_eq!(job.operators[0].grants, Grants::default());
        let inline = with_op(
            "limits = { memory = \"64MiB\", call_timeout = \"250ms\", fuel = 1_000_000, \
             max_emit_records = 10, max_emit_bytes = 4096, max_key_bytes = \"1KiB\", \
             max_value_bytes = \"2 MiB\", max_state_bytes = \"1GB\", table_elements = 50, \
             instances = 8, tables = 9, memories = 2 }\ngrants = [\"clocks\", \"random\"]\n",
        );
        let op = parse(&inline).unwrap().operators.remove(0);
        let expected = Limits {
            memory: 64 << 20,
            call_timeout: Duration::from_millis(250),
            fuel: Some(1_000_000),
            max_emit_records_per_call: 10,
            max_emit_bytes_per_call: 4096,
            max_key_bytes: 1024,
            max_value_bytes: 2 << 20,
            max_state_bytes: 1_000_000_000,
            table_elements: 50,
            instances: 8,
            tables: 9,
            memories: 2,
        };
        assert_eq!(op.limits, expected);
        assert_eq!(
            op.grants,
            Grants {
                clocks: true,
                random: true
            }
        );
        // A `[operator.limits]` table works too; unset limits keep their default.
        let table = with_op("[operator.limits]\nmemory = 131072\n");
        let limits = parse(&table).unwrap().operators.remove(0).limits;
        assert_eq!(limits.memory, 128 << 10);
        assert_eq!(limits.call_timeout, Limits::default().call_timeout);
        // The documented key list is the parsed one.
        for key in LIMIT_KEYS {
            let text = with_op(&format!("limits = {{ {key} = 1 }}\n"));
            let err = parse(&text).err().unwrap_or_default();
            assert!(!err.contains("unknown key"), "{key}: {err}");
        }
    }

    #[test]
    fn bad_limits_and_grants_are_rejected_by_name() {
        assert_rejects!(
            with_op("limits = 3\n") => "operator \"o\": `limits` must be a table (got integer)",
            with_op("limits = { memroy = 1 }\n") => "unknown key `limits.memroy`; the limits are: memory,",
            with_op("limits = { memory = \"lots\" }\n") => "`limits.memory`: \"lots\" is not a size",
            with_op("limits = { memory = \"1 PiB\" }\n") => "unknown unit \"PiB\"; use B, KiB, MiB or GiB",
            with_op("limits = { memory = \"1KiB\" }\n") => "`limits.memory` = 1KiB is out of range; use a size in 64KiB..=4GiB",
            with_op("limits = { memory = \"8GiB\" }\n") => "is out of range",
            with_op("limits = { memory = -1 }\n") => "`limits.memory` = -1 is negative",
            with_op("limits = { memory = true }\n") => "must be a size such as \"64MiB\" or a number of bytes (got boolean)",
            with_op("limits = { call_timeout = 5 }\n") => "`limits.call_timeout` must be a duration string",
            with_op("limits = { call_timeout = \"soon\" }\n") => "`limits.call_timeout` = \"soon\" is not a duration",
            with_op("limits = { call_timeout = \"0s\" }\n") => "is under 1ms",
            with_op("limits = { fuel = 0 }\n") => "`limits.fuel` = 0 is out of range; use a value >= 1",
            with_op("limits = { instances = \"3\" }\n") => "`limits.instances` must be an integer (got string)",
            with_op("grants = \"clocks\"\n") => "`grants` must be a list of strings (got string)",
            with_op("grants = [1]\n") => "each entry of `grants` must be a string (got integer)",
            with_op("grants = [\"network\"]\n") => "unknown grant \"network\"; the grants are \"clocks\", \"random\"",
        );
    }

    #[test]
    fn syntax_errors_give_line_and_column_on_one_line() {
        let text = "name = \"t\"\n\n[[source]]\nid \"x\"\n".to_owned();
        assert_rejects!(text => "job.toml:4:4: TOML syntax error: key with no value");
        let err = Job::parse(Path::new("j.toml"), "name = \"é\" x").unwrap_err();
        assert!(
            matches!(
                err,
                JobError::Syntax {
                    line: 1,
                    column: 12,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let op = format!("{}paralelism = 2\n", op("o", "[\"src\"]"));
        assert_rejects!(
            format!("nmae = \"t\"\n{GEN}{OUT}") => "job: unknown field `nmae`",
            doc(&["[[sources]]\n", GEN, OUT]) => "job: unknown field `sources`",
            doc(&[&GEN.replace("count", "path = \"a\"\ncount"), OUT]) => "unknown key `path`",
            doc(&[GEN, &op, &sink("out", "o")]) => "operator \"o\": unknown field `paralelism`",
            doc(&["[checkpoint]\nevery = \"1s\"\n", GEN, OUT]) => "checkpoint: unknown field",
            doc(&[GEN, &OUT.replace("input", "path = \"x\"\ninput")]) => "for type = \"stdout\"",
        );
        let message = parse(&doc(&[&FILE.replace("path", "count = 1\npath"), OUT])).unwrap_err();
        assert!(message.contains("source \"src\": unknown key `count` for type = \"file\""));
    }

    #[test]
    fn name_and_ids_must_be_valid_and_unique() {
        assert_rejects!(
            format!("{GEN}{OUT}") => "job: `name` is missing",
            format!("name = \" \"\n{GEN}{OUT}") => "job: `name` is missing or empty",
            doc(&[&GEN.replace("\"src\"", "\"a b\""), OUT]) => "source \"a b\": id \"a b\" may",
            doc(&[&GEN.replace("id = \"src\"\n", ""), OUT]) => "source #1: `id` is missing",
            doc(&[GEN, OUT, &sink("src", "src")]) => "sink \"src\": source \"src\" has the same",
        );
    }

    #[test]
    fn a_source_and_a_sink_are_required() {
        assert_rejects!(
            doc(&[OUT]) => "job: no source; add a [[source]] table",
            doc(&[GEN]) => "job: no sink; add a [[sink]] table",
        );
    }

    #[test]
    fn upstreams_must_be_known_sources_or_operators() {
        let known =
            "operator \"o\": input \"srcc\" is not a known id (sources and operators: src, o)";
        assert_rejects!(
            doc(&[GEN, &op("o", "[\"srcc\"]"), &sink("out", "o")]) => known,
            doc(&[GEN, &sink("out", "nope")]) => "sink \"out\": input \"nope\" is not a known",
            doc(&[GEN, OUT, &sink("s2", "out")]) => "sink \"s2\": input \"out\" is a sink",
            doc(&[GEN, OUT, &op("o", "{ x = \"out\" }"), &sink("s2", "o")]) => "is a sink",
        );
    }

    #[test]
    fn operator_cycles_are_named() {
        let ops = [
            op("a", "[\"src\", \"c\"]"),
            op("b", "[\"a\"]"),
            op("c", "[\"b\"]"),
        ]
        .concat();
        let self_loop = op("a", "[\"src\", \"a\"]");
        assert_rejects!(
            doc(&[GEN, &ops, &sink("out", "c")]) => "operators form a cycle a -> b -> c -> a",
            doc(&[GEN, &self_loop, &sink("out", "a")]) =>
                "operator \"a\": operators form a cycle a -> a",
        );
    }

    #[test]
    fn every_output_must_be_consumed() {
        let idle = GEN.replace("\"src\"", "\"idle\"");
        assert_rejects!(
            doc(&[GEN, &idle, OUT]) => "source \"idle\": output is not consumed by any operator",
            doc(&[GEN, OUT, &op("o", "[\"src\"]")]) => "add a sink with input = \"o\"",
        );
    }

    #[test]
    fn referenced_files_must_exist() {
        let missing_plugin = op("o", "[\"src\"]").replace("p.wasm", "q.wasm");
        assert_rejects!(
            doc(&[GEN, &missing_plugin, &sink("out", "o")]) => "q.wasm does not exist; build",
            doc(&[&FILE.replace("a.csv", "b.csv"), OUT]) => "source \"src\": input file",
            doc(&[&FILE.replace("a.csv", "."), OUT]) => "is not a file; fix `path`",
            doc(&[GEN, &file_sink("f", ".")]) => "is a directory; set `path` to a file",
            doc(&["[checkpoint]\ndir = \"a.csv\"\n", GEN, OUT]) => "checkpoint: dir",
        );
        assert!(parse(&doc(&[GEN, &file_sink("f", "new/dir/out.txt")])).is_ok());
    }

    #[test]
    fn entries_need_their_required_keys() {
        let stdin = "[[source]]\nid = \"src\"\ntype = \"stdin\"\n";
        assert!(parse(&doc(&[stdin, OUT])).is_ok());
        let xml = stdin.replace("stdin\"", "stdin\"\nformat = \"xml\"");
        assert_rejects!(
            doc(&[&GEN.replace("count = 10\n", ""), OUT]) => "source \"src\": `count` is missing",
            doc(&[&FILE.replace("path = \"a.csv\"\n", ""), OUT]) => "`path` is missing",
            doc(&[&GEN.replace("generator", "kafka"), OUT]) => "unknown type \"kafka\"; use type =",
            doc(&[&GEN.replace("type = \"generator\"\n", ""), OUT]) => "`type` is missing",
            doc(&[&xml, OUT]) => "source \"src\": unknown variant `xml`, expected one of",
            doc(&[GEN, &OUT.replace("input = \"src\"\n", "")]) => "sink \"out\": `input` is",
            doc(&[GEN, &op("o", "[]"), &sink("out", "o")]) => "`inputs` is empty",
        );
    }

    #[test]
    fn numbers_must_be_in_range() {
        let gen_with = |extra: &str| doc(&[&format!("{GEN}{extra}\n"), OUT]);
        let checkpoint = |body: &str| doc(&[&format!("[checkpoint]\n{body}\n"), GEN, OUT]);
        assert_rejects!(
            gen_with("batch_size = 0") => "`batch_size` = 0 is out of range; use a value in 1..=",
            gen_with("batch_size = 65537") => "source \"src\": `batch_size` = 65537",
            gen_with("seed = -1") => "`seed` = -1 is out of range; use a value >= 0",
            with_op("parallelism = 0\n") => "operator \"o\": `parallelism` = 0 is out of range",
            with_op("parallelism = 129\n") => "use a value in 1..=128",
            checkpoint("retain = 0") => "checkpoint: `retain` = 0 is out of range",
            checkpoint("interval = \"0s\"") => "checkpoint: `interval` is zero",
            checkpoint("interval = \"soon\"") => "`interval` = \"soon\" is not a duration",
        );
        assert_eq!(
            parse(&with_op("parallelism = 128\n")).unwrap().operators[0].parallelism,
            128
        );
        let job = parse(&checkpoint("interval = \"500ms\"")).unwrap();
        assert_eq!(job.checkpoint.interval, Some(Duration::from_millis(500)));
        assert_eq!(job.checkpoint.retain, 3);
    }

    #[test]
    fn file_sinks_need_distinct_paths() {
        let (x, y) = (
            file_sink("x", "out/o.txt"),
            file_sink("y", "out/../out/./o.txt"),
        );
        assert_rejects!(
            doc(&[GEN, &x, &y]) => "sink \"y\": sink \"x\" writes the same file",
            doc(&[FILE, &file_sink("x", "a.csv")]) => "sink \"x\": source \"src\" reads the same",
        );
    }

    /// src -> a, src -> b, a + b -> c, declared c, b, a.
    fn diamond() -> Job {
        let c = op("c", "{ left = \"a\", right = \"b\" }");
        parse(&doc(&[
            GEN,
            &c,
            &op("b", "[\"src\"]"),
            &op("a", "[\"src\"]"),
            &sink("out", "c"),
        ]))
        .unwrap()
    }

    #[test]
    fn topological_order_puts_upstreams_first() {
        let job = diamond();
        let order: Vec<&str> = job
            .topological_operators()
            .iter()
            .map(|o| o.id.as_str())
            .collect();
        assert_eq!(order, ["b", "a", "c"]);
        assert_eq!(job.consumers("src"), ["b", "a"]);
        assert_eq!(job.consumers("c"), ["out"]);
    }

    #[test]
    fn resolve_ports_orders_by_declared_port() {
        let job = diamond();
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let resolve = |op: usize, inputs: &[&str], outputs: &[&str]| {
            job.resolve_ports(&job.operators[op], &names(inputs), &names(outputs))
        };
        let ports = resolve(0, &["right", "left"], &["out"]).unwrap();
        assert_eq!(ports, [(0, "b".to_owned()), (1, "a".to_owned())]);
        assert_eq!(
            resolve(1, &["in"], &["out"]).unwrap(),
            [(0, "src".to_owned())]
        );
        let cases: [(usize, &[&str], &[&str], &str); 4] = [
            (
                0,
                &["left", "other"],
                &["o"],
                "input port \"right\" is not declared by plugin",
            ),
            (
                0,
                &["left", "right", "extra"],
                &["o"],
                "input port \"extra\" of plugin",
            ),
            (1, &["x", "y"], &["o"], "lists 1 upstream(s) but plugin"),
            (
                0,
                &["left", "right"],
                &[],
                "declares no output port but out consume(s)",
            ),
        ];
        for (op, inputs, outputs, part) in cases {
            let message = resolve(op, inputs, outputs).unwrap_err().to_string();
            assert!(message.contains("job.toml: operator \""), "{message}");
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }

    // ---- restart strategies

    #[test]
    fn restart_table_is_parsed_with_defaults() {
        let job = |table: &str| parse(&format!("{}\n{table}", doc(&[GEN, &sink("out", "src")])));
        assert_eq!(job("").unwrap().restart, RestartStrategy::None);
        assert_eq!(
            job("[restart]\nattempts = 5").unwrap().restart,
            RestartStrategy::FixedDelay {
                attempts: 5,
                delay: Duration::from_secs(1)
            }
        );
        let backoff =
            job("[restart]\nstrategy = \"exponential-backoff\"\ninitial = \"10ms\"\nmax = \"1s\"")
                .unwrap();
        assert_eq!(
            backoff.restart,
            RestartStrategy::ExponentialBackoff {
                attempts: 3,
                initial: Duration::from_millis(10),
                max: Duration::from_secs(1),
                multiplier: 2.0
            }
        );
        let err = job("[restart]\nstrategy = \"sometimes\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("restart") && err.contains("sometimes"),
            "{err}"
        );
        let err = job("[restart]\ndelay = \"1s\"\nmultiplier = 3.0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`multiplier` does not apply"), "{err}");
        let err = job("[restart]\nattempts = 0").unwrap_err().to_string();
        assert!(err.contains("attempts"), "{err}");
    }

    #[test]
    fn fixed_delay_allows_exactly_its_attempts() {
        let s = RestartStrategy::FixedDelay {
            attempts: 2,
            delay: Duration::from_secs(1),
        };
        assert_eq!(s.delay(1), Some(Duration::from_secs(1)));
        assert_eq!(s.delay(2), Some(Duration::from_secs(1)));
        assert_eq!(s.delay(3), None);
        assert_eq!(RestartStrategy::None.delay(1), None);
    }

    #[test]
    fn backoff_grows_and_caps() {
        let s = RestartStrategy::ExponentialBackoff {
            attempts: 10,
            initial: Duration::from_millis(10),
            max: Duration::from_secs(1),
            multiplier: 3.0,
        };
        let waits: Vec<u128> = (1..=6).map(|i| s.delay(i).unwrap().as_millis()).collect();
        assert_eq!(waits, [10, 30, 90, 270, 810, 1000]);
        assert_eq!(s.delay(11), None);
    }
}
