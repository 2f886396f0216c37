//! Job files built in code: [`JobFile`] and its tables ([`Checkpoint`],
//! [`Restart`], [`Cluster`], [`Source`], [`Operator`], [`Sink`]), rendered as the TOML
//! that `weir run` reads (its `Display`); values are written by the `toml`
//! crate. What a key means is the job format's (docs/reference/job-file.md
//! and docs/reference/connectors.md).
//!
//! A table's keys are rendered in the order they were first set; setting a
//! key again replaces its value in place, so a job can be varied after it
//! was built ([`JobFile::operator_with`]).

use std::fmt;
use std::path::Path;

/// A job file: its name, `[checkpoint]`, `[restart]`, and the sources,
/// operators and sinks in the order added.
#[derive(Debug, Clone)]
pub struct JobFile {
    name: String,
    checkpoint: Option<Checkpoint>,
    restart: Option<Restart>,
    cluster: Option<Cluster>,
    sources: Vec<Source>,
    operators: Vec<Operator>,
    sinks: Vec<Sink>,
}

impl JobFile {
    /// A job called `name`, with nothing in it yet.
    pub fn new(name: &str) -> Self {
        JobFile {
            name: name.to_string(),
            checkpoint: None,
            restart: None,
            cluster: None,
            sources: Vec::new(),
            operators: Vec::new(),
            sinks: Vec::new(),
        }
    }

    /// The `[cluster]` table (none: the defaults).
    pub fn cluster(mut self, cluster: Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The `[checkpoint]` table (none: the defaults).
    pub fn checkpoint(mut self, checkpoint: Checkpoint) -> Self {
        self.checkpoint = Some(checkpoint);
        self
    }

    /// The `[restart]` table (none: no restarts).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = Some(restart);
        self
    }

    /// Adds a `[[source]]`.
    pub fn source(mut self, source: Source) -> Self {
        self.sources.push(source);
        self
    }

    /// Adds an `[[operator]]`.
    pub fn operator(mut self, operator: Operator) -> Self {
        self.operators.push(operator);
        self
    }

    /// Adds a `[[sink]]`.
    pub fn sink(mut self, sink: Sink) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Changes the source `id` with `change`.
    pub fn source_with(mut self, id: &str, change: impl FnOnce(Source) -> Source) -> Self {
        change_entry(&mut self.sources, id, change);
        self
    }

    /// Changes the sink `id` with `change`.
    pub fn sink_with(mut self, id: &str, change: impl FnOnce(Sink) -> Sink) -> Self {
        change_entry(&mut self.sinks, id, change);
        self
    }

    /// Changes the operator `id` with `change`.
    pub fn operator_with(mut self, id: &str, change: impl FnOnce(Operator) -> Operator) -> Self {
        change_entry(&mut self.operators, id, change);
        self
    }
}

impl fmt::Display for JobFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "name = {}", quote(&self.name))?;
        let tables = self
            .checkpoint
            .iter()
            .map(|c| ("[checkpoint]", c.table()))
            .chain(self.restart.iter().map(|r| ("[restart]", r.table())))
            .chain(self.cluster.iter().map(|c| ("[cluster]", c.table())))
            .chain(self.sources.iter().map(|s| ("[[source]]", s.table())))
            .chain(self.operators.iter().map(|o| ("[[operator]]", o.table())))
            .chain(self.sinks.iter().map(|s| ("[[sink]]", s.table())));
        for (header, table) in tables {
            write!(f, "\n{header}\n{table}")?;
        }
        Ok(())
    }
}

/// Setters of one key each on a table type: `name(arg: Type) => string
/// "key";` sets a TOML string ([`Entry::string`]), `=> value "key";` a
/// TOML value ([`Entry::value`]).
macro_rules! setters {
    ($t:ident { $($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $how:ident $key:literal;)* }) => {
        impl $t {
            $(
                $(#[$doc])*
                pub fn $name(self, $arg: $ty) -> Self {
                    self.$how($key, $arg)
                }
            )*
        }
    };
}

/// The `[checkpoint]` table.
#[derive(Debug, Clone, Default)]
pub struct Checkpoint(Table);

impl Checkpoint {
    /// A checkpoint every `interval` (a duration: `"100ms"`).
    pub fn every(interval: &str) -> Self {
        Checkpoint::final_only().interval(interval)
    }

    /// No periodic checkpoints: only the final one.
    pub fn final_only() -> Self {
        Checkpoint::default()
    }
}

setters! {
    Checkpoint {
        /// `interval`: the time between two checkpoints.
        interval(interval: &str) => string "interval";
        /// `retain`: how many complete checkpoints are kept.
        retain(n: u64) => value "retain";
        /// `dir`: the state folder, relative to the job file.
        dir(dir: &str) => string "dir";
        /// `mode`: `"aligned"` or `"unaligned"`.
        mode(mode: &str) => string "mode";
        /// `alignment_timeout`: after how long an alignment goes unaligned.
        alignment_timeout(timeout: &str) => string "alignment_timeout";
        /// `store`: the object store checkpoints are copied to.
        store(url: &str) => string "store";
    }
}

/// The `[cluster]` table: worker mode's settings.
#[derive(Debug, Clone, Default)]
pub struct Cluster(Table);

setters! {
    Cluster {
        /// `group`: the workers' consumer group.
        group(group: &str) => string "group";
        /// `handover_timeout`: how long a task revoked may take to stop.
        handover_timeout(timeout: &str) => string "handover_timeout";
        /// `session_timeout`: how long a silent worker keeps its tasks.
        session_timeout(timeout: &str) => string "session_timeout";
        /// `brokers`: the group's cluster, for a job reading no Kafka topic.
        brokers(brokers: &str) => string "brokers";
    }
}

/// The `[restart]` table.
#[derive(Debug, Clone, Default)]
pub struct Restart(Table);

impl Restart {
    /// `strategy = "<strategy>"` with up to `attempts` restarts.
    fn of(strategy: &str, attempts: u64) -> Self {
        Restart::default()
            .string("strategy", strategy)
            .value("attempts", attempts)
    }

    /// `fixed-delay`: up to `attempts` restarts, `delay` apart.
    pub fn fixed_delay(attempts: u64, delay: &str) -> Self {
        Restart::of("fixed-delay", attempts).string("delay", delay)
    }

    /// `exponential-backoff`: up to `attempts` restarts, the delay doubling
    /// from `initial` up to `max`.
    pub fn exponential_backoff(attempts: u64, initial: &str, max: &str) -> Self {
        Restart::of("exponential-backoff", attempts)
            .string("initial", initial)
            .string("max", max)
    }
}

/// A `[[source]]`.
#[derive(Debug, Clone, Default)]
pub struct Source(Table);

impl Source {
    /// Source `id` generating `count` words.
    pub fn generator(id: &str, count: u64) -> Self {
        Source::of(id, "generator").value("count", count)
    }

    /// Source `id` reading standard input.
    pub fn stdin(id: &str) -> Self {
        Source::of(id, "stdin")
    }

    /// Source `id` reading the changes of `table` in the PostgreSQL
    /// database at `url` (`type = "postgres-cdc"`).
    pub fn postgres_cdc(id: &str, url: &str, table: &str) -> Self {
        Source::of(id, "postgres-cdc")
            .string("url", url)
            .string("table", table)
    }

    /// A `postgres-cdc` source of several `tables`, an output port each.
    pub fn postgres_cdc_tables(id: &str, url: &str, tables: &[&str]) -> Self {
        Source::of(id, "postgres-cdc")
            .string("url", url)
            .value("tables", toml::Value::from(tables.to_vec()))
    }

    /// The source's `id`.
    pub fn id(&self) -> String {
        self.0.string_of("id").expect("a source has an id")
    }

    /// [`Source::rate`] when `per_second` is some; unthrottled when none.
    pub fn throttle(self, per_second: Option<u64>) -> Self {
        match per_second {
            Some(r) => self.rate(r),
            None => self,
        }
    }
}

setters! {
    Source {
        /// `format`: `lines`, `jsonl` or `csv`.
        format(format: &str) => string "format";
        /// `key`: the field whose value is each record's key.
        key(field: &str) => string "key";
        /// `timestamp`: the field (or column) holding each record's event time.
        timestamp(field: &str) => string "timestamp";
        /// `on_bad_timestamp`: `fail` or `skip`.
        on_bad_timestamp(what: &str) => string "on_bad_timestamp";
        /// `on_error`: `"fail"`, `"skip"` or `{ dead_letter = "<sink>" }`,
        /// as TOML.
        on_error(policy: &str) => value "on_error";
        /// `max_bad`: at most this many bad records per checkpoint.
        max_bad(records: u64) => value "max_bad";
        /// `rate`: at most this many records per second.
        rate(per_second: u64) => value "rate";
        /// `batch_size`: at most this many records per batch.
        batch_size(records: u64) => value "batch_size";
        /// `words`: the generator's number of distinct words.
        words(distinct: u64) => value "words";
    }
}

/// An `[[operator]]`.
#[derive(Debug, Clone, Default)]
pub struct Operator(Table);

impl Operator {
    /// The operator's `id`.
    pub fn id(&self) -> String {
        self.0.string_of("id").expect("an operator has an id")
    }

    /// Operator `id` running the component at `plugin`.
    pub fn new(id: &str, plugin: impl AsRef<Path>) -> Self {
        Operator::default().string("id", id).plugin(plugin)
    }

    /// `plugin`: the component file.
    pub fn plugin(self, plugin: impl AsRef<Path>) -> Self {
        let path = plugin.as_ref().to_str().expect("a UTF-8 plugin path");
        self.string("plugin", path)
    }

    /// `inputs = [...]`: one upstream (`id` or `id.port`) per input port,
    /// in port order.
    pub fn inputs(self, upstream: &[&str]) -> Self {
        self.value("inputs", toml::Value::from(upstream.to_vec()))
    }

    /// `inputs = { port = "upstream", ... }`: one upstream node per named
    /// input port.
    pub fn ports(self, ports: &[(&str, &str)]) -> Self {
        let table: toml::Table = ports
            .iter()
            .map(|(port, upstream)| (port.to_string(), toml::Value::from(*upstream)))
            .collect();
        self.value("inputs", toml::Value::Table(table))
    }

    /// `inputs = { port = [...] }`: every one of `upstreams` into input
    /// `port` (a union).
    pub fn union(self, port: &str, upstreams: &[&str]) -> Self {
        let table = toml::Table::from_iter([(port.to_string(), upstreams.to_vec().into())]);
        self.value("inputs", toml::Value::Table(table))
    }

    /// `grants`: what the sandbox lets the plugin see (`clocks`, `random`).
    pub fn grants(self, grants: &[&str]) -> Self {
        self.value("grants", toml::Value::from(grants.to_vec()))
    }
}

setters! {
    Operator {
        /// `parallelism`: the number of instances.
        parallelism(instances: u32) => value "parallelism";
        /// `exchange`: `local` or `repartition`.
        exchange(kind: &str) => string "exchange";
        /// `config`: the plugin's configuration, an inline TOML table
        /// (`{ lowercase = true }`).
        config(inline_table: &str) => value "config";
        /// `limits`: an inline TOML table (`{ call_timeout = "300ms" }`).
        limits(inline_table: &str) => value "limits";
        /// `on_error`: `"fail"`, `"skip"` or `{ dead_letter = "<sink>" }`,
        /// as TOML.
        on_error(policy: &str) => value "on_error";
    }
}

/// A `[[sink]]`.
#[derive(Debug, Clone, Default)]
pub struct Sink(Table);

impl Sink {
    /// Sink `id` writing the file `path` in format `jsonl`.
    pub fn jsonl(id: &str, path: &str) -> Self {
        Sink::file(id, path).format("jsonl")
    }

    /// Sink `id` writing to standard output.
    pub fn stdout(id: &str) -> Self {
        Sink::of(id, "stdout")
    }

    /// Sink `id` writing rows into `table` of the PostgreSQL database at
    /// `url`.
    pub fn postgres(id: &str, url: &str, table: &str) -> Self {
        Sink::of(id, "postgres")
            .string("url", url)
            .string("table", table)
    }

    /// `input = [...]`: a union of the upstream nodes.
    pub fn inputs(self, upstreams: &[&str]) -> Self {
        self.value("input", toml::Value::from(upstreams.to_vec()))
    }
}

setters! {
    Sink {
        /// `input`: the upstream node (`id` or `id.port`).
        input(upstream: &str) => string "input";
        /// `format`: `lines` or `jsonl`.
        format(format: &str) => string "format";
    }
}

/// What sources and sinks have alike: the table of an `id` and a `type`,
/// and the types both are of (with the key that names a NATS source's
/// stream or a NATS sink's subject).
macro_rules! endpoints {
    ($($t:ident: nats $nats_key:literal),*) => {$(
        impl $t {
            /// The source or sink `id` of `type`.
            fn of(id: &str, kind: &str) -> Self {
                $t::default().string("id", id).string("type", kind)
            }

            /// The source or sink `id` on the file `path` (relative to the
            /// job file).
            pub fn file(id: &str, path: &str) -> Self {
                $t::of(id, "file").string("path", path)
            }

            /// The source or sink `id` on `topic` of the Kafka cluster at
            /// `brokers` (a source reads `a,b` for several topics).
            pub fn kafka(id: &str, brokers: &str, topic: &str) -> Self {
                $t::of(id, "kafka")
                    .string("brokers", brokers)
                    .string("topic", topic)
            }

            /// The source or sink `id` on the NATS server at `url`: a source
            /// reads the JetStream stream `target`, a sink publishes to the
            /// subject `target`.
            pub fn nats(id: &str, url: &str, target: &str) -> Self {
                $t::of(id, "nats")
                    .string("url", url)
                    .string($nats_key, target)
            }
        }
    )*};
}

endpoints!(Source: nats "stream", Sink: nats "subject");

/// The keys every table can have, beyond its own setters.
pub trait Entry: Sized {
    /// The table's lines.
    fn table(&self) -> &Table;

    /// The table's lines, to change.
    fn table_mut(&mut self) -> &mut Table;

    /// `key = value`, where `value` is TOML already (a number, a boolean, an
    /// array, an inline table).
    fn value(mut self, key: &str, toml: impl fmt::Display) -> Self {
        self.table_mut().set(key, toml.to_string());
        self
    }

    /// `key = "text"`: a TOML string.
    fn string(self, key: &str, text: &str) -> Self {
        self.value(key, quote(text))
    }

    /// `text` as it is, as the table's last lines: a sub-table such as
    /// `[operator.limits]`, or a deliberately odd key.
    fn verbatim(mut self, text: &str) -> Self {
        self.table_mut().tail.push(text.to_string());
        self
    }
}

macro_rules! entries {
    ($($t:ident),*) => {
        $(impl Entry for $t {
            fn table(&self) -> &Table {
                &self.0
            }

            fn table_mut(&mut self) -> &mut Table {
                &mut self.0
            }
        })*
    };
}

entries!(Checkpoint, Restart, Cluster, Source, Operator, Sink);

/// The lines of one table: `key = value` in the order keys were first set,
/// then verbatim text.
#[derive(Debug, Clone, Default)]
pub struct Table {
    keys: Vec<(String, String)>,
    tail: Vec<String>,
}

impl Table {
    fn set(&mut self, key: &str, value: String) {
        match self.keys.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.keys.push((key.to_string(), value)),
        }
    }

    /// The text of the string `key`, when it is set to one.
    fn string_of(&self, key: &str) -> Option<String> {
        let (_, value) = self.keys.iter().find(|(k, _)| k == key)?;
        let doc: toml::Table = format!("v = {value}").parse().ok()?;
        doc["v"].as_str().map(str::to_owned)
    }

    fn has_id(&self, id: &str) -> bool {
        self.keys.iter().any(|(k, v)| k == "id" && *v == quote(id))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (key, value) in &self.keys {
            writeln!(f, "{key} = {value}")?;
        }
        for text in &self.tail {
            writeln!(f, "{text}")?;
        }
        Ok(())
    }
}

/// Replaces the entry of `entries` whose id is `id` by `change` of it.
fn change_entry<E: Entry + Default>(entries: &mut [E], id: &str, change: impl FnOnce(E) -> E) {
    let entry = entries
        .iter_mut()
        .find(|e| e.table().has_id(id))
        .unwrap_or_else(|| panic!("the job has no entry `{id}`"));
    *entry = change(std::mem::take(entry));
}

/// `text` as a TOML string.
fn quote(text: &str) -> String {
    toml::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_renders_as_the_toml_it_was_built_as() {
        let job = JobFile::new("odd \"name\"\n")
            .checkpoint(Checkpoint::every("100ms").retain(3))
            .restart(Restart::fixed_delay(2, "10ms"))
            .source(Source::file("in", "in.txt").rate(10).throttle(None))
            .operator(
                Operator::new("op", "/p/op.wasm")
                    .ports(&[("a", "in"), ("b", "in")])
                    .grants(&["clocks"])
                    .config("{ x = 1 }")
                    .verbatim("[operator.limits]\nfuel = 5"),
            )
            .operator(Operator::new("u", "/p/u.wasm").union("in", &["op", "op.side"]))
            .sink(Sink::file("out", "out.jsonl").input("op"))
            .sink(Sink::stdout("all").inputs(&["in", "u"]))
            .operator_with("op", |o| o.parallelism(2).parallelism(3));
        let text = job.to_string();
        let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(doc["name"].as_str(), Some("odd \"name\"\n"));
        assert_eq!(doc["checkpoint"]["interval"].as_str(), Some("100ms"));
        assert_eq!(doc["restart"]["attempts"].as_integer(), Some(2));
        assert_eq!(doc["source"][0]["rate"].as_integer(), Some(10));
        let op = &doc["operator"][0];
        assert_eq!(op["plugin"].as_str(), Some("/p/op.wasm"));
        assert_eq!(op["inputs"]["b"].as_str(), Some("in"));
        assert_eq!(op["grants"][0].as_str(), Some("clocks"));
        assert_eq!(op["config"]["x"].as_integer(), Some(1));
        assert_eq!(op["limits"]["fuel"].as_integer(), Some(5));
        // A key set again keeps its place and its last value.
        assert_eq!(op["parallelism"].as_integer(), Some(3));
        assert_eq!(text.matches("parallelism").count(), 1, "{text}");
        assert_eq!(doc["sink"][0]["input"].as_str(), Some("op"));
        let union = doc["operator"][1]["inputs"]["in"].as_array().unwrap();
        assert_eq!(union[1].as_str(), Some("op.side"));
        let union = doc["sink"][1]["input"].as_array().unwrap();
        assert_eq!(
            (union[0].as_str(), union[1].as_str()),
            (Some("in"), Some("u"))
        );
    }
}
