//! Tests of job-file parsing and validation, through [`Job::parse`].

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::connectors::file::records::FileFormat;
use crate::connectors::file::{FileSinkConfig, FileSourceConfig};
use crate::connectors::format::{Format, Parsing};
use crate::connectors::generator::GeneratorConfig;
use crate::connectors::sink::{Delivery, SinkFormat};
use crate::connectors::stdin::StdinConfig;
use crate::connectors::stdout::StdoutConfig;
use crate::connectors::{SinkConnector, SourceConnector};

/// A folder holding a plugin `p.wasm` and an input file `a.csv` (columns
/// `order_no`, `amount`).
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.wasm"), "x").unwrap();
    std::fs::write(dir.path().join("a.csv"), "order_no,amount\n").unwrap();
    dir
}

fn parse_in(dir: &Path, text: &str) -> Result<Job, String> {
    Job::parse(&dir.join("job.toml"), text, &Registry::builtin()).map_err(|e| e.to_string())
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
        dir: at("state/reconcile"),
        default_dir: true,
        retain: 5,
        mode: CheckpointMode::Aligned,
        alignment_timeout: None,
        store: None,
        store_options: Default::default(),
    };
    assert_eq!(job.checkpoint, checkpoint);
    let (path, key) = (at("a.csv"), Some("order_no".to_owned()));
    let file = FileSourceConfig {
        path,
        parsing: Parsing {
            format: Format::Csv,
            key,
            timestamp: None,
            ..Parsing::default()
        },
    };
    let stdin = StdinConfig {
        parsing: Parsing {
            format: Format::Jsonl,
            ..Parsing::default()
        },
    };
    let generator = GeneratorConfig {
        count: 100,
        words: 7,
        seed: 42,
        start: 0,
        step: 1,
        disorder: 0,
    };
    let connectors: Vec<&dyn SourceConnector> = job.sources.iter().map(|s| &*s.connector).collect();
    let expected: [&dyn SourceConnector; 3] = [&file, &stdin, &generator];
    assert_eq!(connectors, expected);
    let batch_sizes: Vec<usize> = job.sources.iter().map(|s| s.batch_size).collect();
    assert_eq!(batch_sizes, [16, 1024, 1024]);
    let pair = |p: &str, u: &str| (p.to_owned(), vec![Upstream::from(u)]);
    let reconcile = &job.operators[0];
    let named = Inputs::Named(vec![pair("a", "orders_a"), pair("b", "orders_b")]);
    assert_eq!((&reconcile.inputs, reconcile.parallelism), (&named, 2));
    let count = &job.operators[1];
    assert_eq!(count.inputs, Inputs::Positional(vec!["words".into()]));
    let words = Upstream {
        node: "words".into(),
        port: None,
    };
    assert_eq!(count.inputs.upstreams(), [&words]);
    assert_eq!(job.sinks[1].input, [Upstream::from("count")]);
    assert_eq!((count.parallelism, count.config.as_str()), (1, "{}"));
    let out = FileSinkConfig {
        path: at("out/reconcile.jsonl"),
        format: FileFormat::Text(SinkFormat::Jsonl),
    };
    assert_eq!(&*job.sinks[0].connector, &out as &dyn SinkConnector);
    let stdout = StdoutConfig {
        format: SinkFormat::Lines,
    };
    assert_eq!(&*job.sinks[1].connector, &stdout as &dyn SinkConnector);
    // `delivery` is common to every sink; each type has its default.
    let deliveries = [job.sinks[0].delivery, job.sinks[1].delivery];
    assert_eq!(deliveries, [Delivery::ExactlyOnce, Delivery::AtLeastOnce]);
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
    let path = job.sources[0].connector.file();
    assert_eq!(path, Some(dir.join("../a.csv").as_path()));
    assert_eq!(job.operators[0].plugin, dir.join("../p.wasm"));
    let path = job.sinks[0].connector.file();
    assert_eq!(path, Some(Path::new("/abs/out.txt")));
    let bare = Job::parse(
        Path::new("job.toml"),
        &doc(&[GEN, OUT]),
        &Registry::builtin(),
    )
    .unwrap();
    assert_eq!(bare.dir, Path::new("."));
}

#[test]
fn load_reads_the_file_or_names_it() {
    let dir = fixture();
    let path = dir.path().join("job.toml");
    let message = Job::load(&path, &Registry::builtin())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("job.toml: cannot read job file"),
        "{message}"
    );
    std::fs::write(&path, doc(&[GEN, OUT])).unwrap();
    assert_eq!(Job::load(&path, &Registry::builtin()).unwrap().name, "t");
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
    let err = Job::parse(Path::new("j.toml"), "name = \"é\" x", &Registry::builtin()).unwrap_err();
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
    let known = "operator \"o\": input \"srcc\" is not a known id (sources and operators: src, o)";
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
        doc(&[&GEN.replace("generator", "pulsar"), OUT]) => "unknown type \"pulsar\"; use type =",
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
        checkpoint("mode = \"eventual\"") => "checkpoint: `mode` = \"eventual\" is unknown; use \"aligned\" or \"unaligned\"",
        checkpoint("mode = 1") => "checkpoint: invalid type",
        checkpoint("alignment_timeout = \"soon\"") => "checkpoint: `alignment_timeout` = \"soon\" is not a duration",
        checkpoint("mode = \"unaligned\"\nalignment_timeout = \"1s\"") => "checkpoint: `alignment_timeout` applies to mode = \"aligned\" only",
    );
    assert_eq!(
        parse(&with_op("parallelism = 128\n")).unwrap().operators[0].parallelism,
        128
    );
    let job = parse(&checkpoint("interval = \"500ms\"")).unwrap();
    assert_eq!(job.checkpoint.interval, Some(Duration::from_millis(500)));
    assert_eq!(job.checkpoint.retain, 3);
    assert_eq!(
        (job.checkpoint.mode, job.checkpoint.alignment_timeout),
        (CheckpointMode::Aligned, None)
    );
    let job = parse(&checkpoint("mode = \"unaligned\"")).unwrap();
    assert_eq!(job.checkpoint.mode, CheckpointMode::Unaligned);
    let job = parse(&checkpoint("alignment_timeout = \"250ms\"")).unwrap();
    assert_eq!(
        job.checkpoint.alignment_timeout,
        Some(Duration::from_millis(250))
    );
    let job = parse(&checkpoint(
        "mode = \"aligned\"\nalignment_timeout = \"0s\"",
    ))
    .unwrap();
    assert_eq!(job.checkpoint.alignment_timeout, None, "0s: never");
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
        job.resolve_ports(
            &job.operators[op],
            &job.operators[op].plugin,
            &names(inputs),
            &names(outputs),
        )
    };
    let ports = resolve(0, &["right", "left"], &["out"]).unwrap();
    assert_eq!(ports, [(0, "b".into()), (1, "a".into())]);
    assert_eq!(resolve(1, &["in"], &["out"]).unwrap(), [(0, "src".into())]);
    let cases: [(usize, &[&str], &[&str], &str); 5] = [
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
        (1, &[], &["o"], "or union several into one port by name"),
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
    // A plugin swapped in is named, not the job file's.
    let swapped = job.operators[0].plugin.with_file_name("swapped-in.wasm");
    let message = job
        .resolve_ports(
            &job.operators[0],
            &swapped,
            &names(&["left"]),
            &names(&["o"]),
        )
        .unwrap_err()
        .to_string();
    let own = job.operators[0].plugin.display().to_string();
    assert!(
        message.contains("plugin ") && message.contains("swapped-in.wasm"),
        "{message}"
    );
    assert!(!message.contains(&own), "{message} names {own}");
}

// ---- side outputs and unions

#[test]
fn upstreams_name_an_operators_port_or_a_union() {
    let ops = [
        op("t", "[\"src\"]"),
        op("u", "{ in = [\"src\", \"t.rejected\"], side = \"t\" }"),
        op("v", "[\"t.rejected\", \"u\"]"),
    ]
    .concat();
    let sinks = "[[sink]]\nid = \"out\"\ntype = \"stdout\"\ninput = [\"v\", \"u.extra\"]\n";
    let job = parse(&doc(&[GEN, &ops, sinks])).unwrap();
    let up = |node: &str, port: Option<&str>| Upstream {
        node: node.into(),
        port: port.map(Into::into),
    };
    let (rejected, src, t) = (up("t", Some("rejected")), up("src", None), up("t", None));
    let named = vec![
        ("in".to_owned(), vec![src.clone(), rejected.clone()]),
        ("side".to_owned(), vec![t]),
    ];
    assert_eq!(job.operators[1].inputs, Inputs::Named(named));
    let positional = Inputs::Positional(vec![rejected.clone(), up("u", None)]);
    assert_eq!(job.operators[2].inputs, positional);
    assert_eq!(job.sinks[0].input, [up("v", None), up("u", Some("extra"))]);
    assert_eq!(rejected.to_string(), "t.rejected");
    // Consumers count every port; `t` feeds `u` on two ports and `v` on one.
    assert_eq!(job.consumers("t"), ["u", "v"]);
    assert_eq!(job.consumers("u"), ["v", "out"]);
    let order: Vec<&str> = job
        .topological_operators()
        .iter()
        .map(|o| o.id.as_str())
        .collect();
    assert_eq!(order, ["t", "u", "v"]);
    // A list of one is the string it holds.
    let one = |inputs: &str, input: &str| {
        let text = doc(&[
            GEN,
            &op("o", inputs),
            &sink("out", "o").replace("\"o\"\n", input),
        ]);
        let job = parse(&text).unwrap();
        (job.operators[0].inputs.clone(), job.sinks[0].input.clone())
    };
    assert_eq!(
        one("{ in = [\"src\"] }", "[\"o\"]\n"),
        one("{ in = \"src\" }", "\"o\"\n")
    );
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let resolved = job.resolve_ports(
        &job.operators[1],
        &job.operators[1].plugin,
        &names(&["side", "in"]),
        &names(&["out", "extra"]),
    );
    let expected = [(0, up("t", None)), (1, src), (1, rejected)];
    assert_eq!(resolved.unwrap(), expected);
}

#[test]
fn port_references_and_unions_are_checked() {
    let src_port = doc(&[GEN, &sink("out", "src.x")]);
    let unknown = doc(&[GEN, OUT, &sink("s2", "nope.rejected")]);
    let twice = doc(&[
        GEN,
        &op("o", "{ in = [\"src\", \"src\"] }"),
        &sink("out", "o"),
    ]);
    let sink_twice = OUT.replace("\"src\"\n", "[\"src\", \"src\"]\n");
    let nested = doc(&[GEN, &op("o", "[[\"src\"]]"), &sink("out", "o")]);
    let empty = doc(&[GEN, &op("o", "{ in = [] }"), &sink("out", "o")]);
    assert_rejects!(
        src_port => "sink \"out\": input \"src.x\": source \"src\" has one output and no named ports; write \"src\"",
        unknown => "sink \"s2\": input \"nope.rejected\": \"nope\" is not a known id (sources and operators: src); fix the id",
        twice => "operator \"o\": input port \"in\" lists \"src\" twice; list each upstream once",
        doc(&[GEN, &sink_twice]) => "sink \"out\": `input` lists \"src\" twice; list each upstream once",
        nested => "each entry of `inputs` must be an upstream id string (got array); to wire several upstreams into one port, name it",
        empty => "operator \"o\": input port \"in\" is an empty list",
        doc(&[GEN, &OUT.replace("\"src\"\n", "[]\n")]) => "sink \"out\": `input` is an empty list",
        doc(&[GEN, &OUT.replace("\"src\"\n", "3\n")]) => "`input` must be an upstream id string or a list of them (got integer)",
    );
}

#[test]
fn output_port_names_are_checked_when_the_plugin_is_known() {
    let ops = [
        op("t", "[\"src\"]"),
        op("u", "{ in = [\"t\", \"t.first\"] }"),
    ]
    .concat();
    let job = parse(&doc(&[
        GEN,
        &ops,
        &sink("out", "u"),
        &sink("bad", "t.rejectd"),
    ]))
    .unwrap();
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let resolve = |outputs: &[&str]| {
        let t = &job.operators[0];
        let result = job.resolve_ports(t, &t.plugin, &names(&["in"]), &names(outputs));
        result.unwrap_err().to_string()
    };
    let message = resolve(&["first", "rejected"]);
    assert!(!message.contains('\n'), "{message}");
    let part = "job.toml: operator \"u\": input lists \"t\" and \"t.first\", the same output port of plugin";
    assert!(message.contains(part), "{message}");
    let message = resolve(&["out", "rejected"]);
    let part = "job.toml: operator \"u\": input \"t.first\": operator \"t\" has no output port \"first\" (plugin ";
    assert!(message.contains(part), "{message}");
    assert!(
        message.contains("declares outputs: out, rejected); name one of those"),
        "{message}"
    );
    let message = resolve(&["second", "first"]);
    assert!(
        message.contains("sink \"bad\": input \"t.rejectd\""),
        "{message}"
    );
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

/// Of several errors in one entry, a value of the wrong type is reported
/// first (the first in the table), then a bad `id`, then the connector's
/// settings, then the other options.
#[test]
fn an_entry_reports_wrong_types_then_id_then_settings() {
    let bare = FILE
        .replace("id = \"src\"\n", "")
        .replace("path = \"a.csv\"\n", "");
    let source = |extra: &str| doc(&[&format!("{bare}{extra}"), OUT]);
    assert_rejects!(
        source("format = 3\nrate = \"x\"\n") => "source #1: invalid type: unit variant, expected string only",
        source("format = 3\nrate = \"x\"\n") => "in `format`",
        source("rate = 0\n") => "source #1: `id` is missing",
        source("id = \"s\"\nrate = 0\n") => "source \"s\": `path` is missing",
        source("id = \"s\"\npath = \"a.csv\"\nrate = 0\n") => "`rate` = 0 is out of range",
    );
    let sink = |extra: &str| doc(&[GEN, &format!("[[sink]]\ntype = \"file\"\n{extra}")]);
    assert_rejects!(
        sink("format = 3\ninput = 1\n") => "in `format`",
        sink("input = \"src\"\n") => "sink #1: `id` is missing",
        sink("id = \"o\"\n") => "sink \"o\": `path` is missing",
        sink("id = \"o\"\npath = \"o.txt\"\n") => "sink \"o\": `input` is missing",
    );
}

#[test]
fn the_default_checkpoint_dir_is_per_job_and_an_explicit_one_is_kept() {
    let dir = fixture();
    let named = |name: &str| format!("name = {name:?}\n{GEN}{OUT}");
    let k = parse_in(dir.path(), &named("k")).unwrap();
    let spin = parse_in(dir.path(), &named("spin job")).unwrap();
    assert_eq!(k.checkpoint.dir, dir.path().join("state/k"));
    assert_eq!(spin.checkpoint.dir, dir.path().join("state/spin_job"));
    assert!(k.checkpoint.default_dir);
    let explicit = parse_in(
        dir.path(),
        &doc(&["[checkpoint]\ndir = \"state\"\n", GEN, OUT]),
    );
    let explicit = explicit.unwrap().checkpoint;
    assert_eq!(explicit.dir, dir.path().join("state"));
    assert!(!explicit.default_dir);
    assert_rejected(
        &named(".."),
        "put a letter or digit in `name`, or set `dir`",
    );
    // With `dir` set, the name needs no letter.
    let dotted = format!("name = \"..\"\n[checkpoint]\ndir = \"ck\"\n{GEN}{OUT}");
    assert_eq!(parse(&dotted).unwrap().name, "..");
}

#[test]
fn a_folder_stands_for_its_job_toml() {
    let dir = fixture();
    let err = Job::load(dir.path(), &Registry::builtin())
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a folder without a job.toml"), "{err}");
    std::fs::write(dir.path().join("job.toml"), doc(&[GEN, OUT])).unwrap();
    let job = Job::load(dir.path(), &Registry::builtin()).unwrap();
    assert_eq!(job.path, dir.path().join("job.toml"));
}

#[test]
fn a_csv_source_needs_its_key_column_in_the_header() {
    let csv = |key: &str| doc(&[&format!("{FILE}format = \"csv\"\nkey = \"{key}\"\n"), OUT]);
    let message =
        "a.csv:1: the header row has no column `id` (columns: order_no, amount); fix `key`";
    assert_rejected(&csv("id"), message);
    assert!(parse(&csv("order_no")).is_ok());
}

/// `delivery` is read once for every sink type, with each type's default,
/// and a connector's own checks see it.
#[test]
fn delivery_is_an_option_of_every_sink_with_a_default_per_type() {
    let job = parse(&doc(&[GEN, OUT, &file_sink("f", "o.txt")])).unwrap();
    let deliveries: Vec<Delivery> = job.sinks.iter().map(|s| s.delivery).collect();
    assert_eq!(deliveries, [Delivery::AtLeastOnce, Delivery::ExactlyOnce]);
    let set = |sink: &str, value: &str| format!("{sink}delivery = \"{value}\"\n");
    let job = parse(&doc(&[
        GEN,
        &set(OUT, "exactly-once"),
        &set(&file_sink("f", "o.txt"), "at-least-once"),
    ]))
    .unwrap();
    let deliveries: Vec<Delivery> = job.sinks.iter().map(|s| s.delivery).collect();
    assert_eq!(deliveries, [Delivery::ExactlyOnce, Delivery::AtLeastOnce]);
    assert_rejects!(
        doc(&[GEN, &set(OUT, "twice")]) => "unknown variant `twice`, expected `exactly-once` or `at-least-once`",
    );
}

/// `on_error` on a source: `fail` by default, `skip`, or dead letters to a
/// sink, which then reads the source's dead-letter port (added to its
/// input, which it may otherwise lack); `max_bad` with it.
#[test]
fn on_error_sends_a_sources_bad_records_to_a_sink_it_names() {
    let job = parse(&doc(&[GEN, OUT])).unwrap();
    assert_eq!(
        (&job.sources[0].on_error, job.sources[0].max_bad),
        (&OnError::Fail, None)
    );
    let skip = GEN.replace(
        "count = 10\n",
        "count = 10\non_error = \"skip\"\nmax_bad = 5\n",
    );
    let job = parse(&doc(&[&skip, OUT])).unwrap();
    assert_eq!(
        (&job.sources[0].on_error, job.sources[0].max_bad),
        (&OnError::Skip, Some(5))
    );
    let dead = GEN.replace(
        "count = 10\n",
        "count = 10\non_error = { dead_letter = \"bad\" }\n",
    );
    let only_letters = "[[sink]]\nid = \"bad\"\ntype = \"stdout\"\n";
    let job = parse(&doc(&[&dead, OUT, only_letters])).unwrap();
    assert_eq!(job.sources[0].on_error, OnError::DeadLetter("bad".into()));
    assert_eq!(job.sinks[1].input, [Upstream::parse("src.dead-letter")]);
    // A sink of both: its own input, then the dead letters.
    let both = "[[sink]]\nid = \"bad\"\ntype = \"stdout\"\ninput = \"src\"\n";
    let job = parse(&doc(&[&dead, both])).unwrap();
    assert_eq!(
        job.sinks[0].input,
        [Upstream::parse("src"), Upstream::parse("src.dead-letter")]
    );
}

#[test]
fn on_error_mistakes_are_refused_in_one_line() {
    let with = |policy: &str| {
        let source = GEN.replace("count = 10\n", &format!("count = 10\n{policy}\n"));
        doc(&[&source, OUT])
    };
    assert_rejects!(
        with("on_error = \"ignore\"") => "`on_error` = \"ignore\" is not a policy; write on_error = \"fail\", \"skip\" or { dead_letter = \"<sink id>\" }",
        with("on_error = 3") => "`on_error` must be a string or a table (got integer)",
        with("on_error = { dead_letter = \"\" }") => "`on_error.dead_letter` is empty",
        with("on_error = { dead_letter = 1 }") => "`on_error.dead_letter` must be a sink id string",
        with("on_error = { sink = \"out\" }") => "`on_error` table has no `dead_letter`",
        with("on_error = { dead_letter = \"out\", x = 1 }") => "`on_error` has an unknown key `x`",
        with("on_error = { dead_letter = \"nope\" }") => "source \"src\": `on_error.dead_letter` = \"nope\" is not a sink of the job (sinks: out)",
        with("max_bad = 3") => "`max_bad` needs on_error = \"skip\" or { dead_letter = \"<sink id>\" }",
        with("on_error = \"skip\"\nmax_bad = 0") => "`max_bad` = 0: at least 1 bad record",
        // The dead-letter port is the named sink's alone.
        doc(&[GEN, OUT, &sink("x", "src.dead-letter")]) => "source \"src\" has one output and no named ports",
    );
}

/// A sink's `on_error` dead letters (the records its destination would
/// refuse) go to another sink, which reads `<sink>.dead-letter`; a sink
/// cannot take its own, nor send them to a sink that sends its own on.
#[test]
fn a_sinks_dead_letters_go_to_another_sink_without_dead_letters_of_its_own() {
    let out = "[[sink]]\nid = \"out\"\ntype = \"stdout\"\ninput = \"src\"\non_error = { dead_letter = \"bad\" }\nmax_bad = 4\n";
    let letters = "[[sink]]\nid = \"bad\"\ntype = \"stdout\"\n";
    let job = parse(&doc(&[GEN, out, letters])).unwrap();
    assert_eq!(
        (&job.sinks[0].on_error, job.sinks[0].max_bad),
        (&OnError::DeadLetter("bad".into()), Some(4))
    );
    assert_eq!(job.sinks[1].input, [Upstream::parse("out.dead-letter")]);
    let own = "[[sink]]\nid = \"out\"\ntype = \"stdout\"\ninput = \"src\"\non_error = { dead_letter = \"out\" }\n";
    let chained =
        "[[sink]]\nid = \"bad\"\ntype = \"stdout\"\non_error = { dead_letter = \"worse\" }\n";
    let worse = "[[sink]]\nid = \"worse\"\ntype = \"stdout\"\n";
    assert_rejects!(
        doc(&[GEN, own]) => "sink \"out\": `on_error.dead_letter` = \"out\" is this sink",
        doc(&[GEN, out, chained, worse]) => "a sink that sends its own refused records to \"worse\"",
        // Only the sink `on_error` names reads the dead-letter port.
        doc(&[GEN, out, letters, &sink("x", "out.dead-letter")]) => "input \"out.dead-letter\" is a sink, which has no output",
    );
}

/// An operator's `on_error` dead letters: the sink reads the operator's
/// `dead-letter` port, which its plugin's ports need not declare; a
/// plugin declaring a port of that name is refused.
#[test]
fn an_operators_dead_letters_go_to_the_sink_its_on_error_names() {
    let op = op("o", "[\"src\"]") + "on_error = { dead_letter = \"bad\" }\nmax_bad = 9\n";
    let letters = "[[sink]]\nid = \"bad\"\ntype = \"stdout\"\n";
    let job = parse(&doc(&[GEN, &op, &sink("out", "o"), letters])).unwrap();
    let o = &job.operators[0];
    assert_eq!(
        (&o.on_error, o.max_bad),
        (&OnError::DeadLetter("bad".into()), Some(9))
    );
    // The replay source of its dead letters sends its own to the same sink.
    let replay = job.replay_source("o").expect("a replay source");
    assert_eq!(
        (replay.id.as_str(), replay.replays()),
        ("replay:o", Some("o"))
    );
    assert_eq!(replay.on_error, o.on_error);
    assert_eq!(job.consumers("replay:o"), ["o"]);
    assert_eq!(
        job.sinks[1].input,
        [
            Upstream::parse("replay:o.dead-letter"),
            Upstream::parse("o.dead-letter")
        ]
    );
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let replayed = |port: &str| Upstream {
        node: "replay:o".into(),
        port: Some(port.into()),
    };
    let positional = job.resolve_ports(o, &o.plugin, &names(&["in"]), &names(&["out"]));
    assert_eq!(
        positional.unwrap(),
        [(0, Upstream::parse("src")), (0, replayed("in"))]
    );
    let clash = job.resolve_ports(o, &o.plugin, &names(&["in"]), &names(&["dead-letter"]));
    let err = clash.unwrap_err().to_string();
    assert!(
        err.contains("declares an output port `dead-letter`"),
        "{err}"
    );
    let clash = job.resolve_ports(o, &o.plugin, &names(&["dead-letter"]), &names(&["out"]));
    let err = clash.unwrap_err().to_string();
    assert!(
        err.contains("declares an input port `dead-letter`"),
        "{err}"
    );
    // Worker mode's job has none.
    let plain = job.clone().without_replays();
    assert!(plain.replay_source("o").is_none());
    assert_eq!(plain.sources.len(), 1);
    assert_eq!(plain.sinks[1].input, [Upstream::parse("o.dead-letter")]);
}

/// A source with an output port per name in its `ports` setting.
#[derive(Debug, PartialEq)]
struct PortedSource(Vec<String>);

impl SourceConnector for PortedSource {
    fn open(
        &self,
        _: &str,
        _: Option<&serde_json::Value>,
    ) -> Result<
        Box<dyn crate::connectors::source::SourceReader>,
        crate::connectors::source::SourceError,
    > {
        unreachable!("never opened")
    }

    fn output_ports(&self) -> Vec<String> {
        self.0.clone()
    }
}

static PORTED: crate::connectors::SourceType = crate::connectors::SourceType {
    name: "ported",
    keys: &["ports"],
    read: |table| {
        let ports: Vec<String> = (table["ports"].as_array().unwrap().iter())
            .map(|p| p.as_str().unwrap().to_owned())
            .collect();
        Ok(Box::new(move |_| {
            Ok(std::sync::Arc::new(PortedSource(ports)))
        }))
    },
};

#[test]
fn named_ports_of_a_source_are_wired_by_name_and_each_consumed() {
    let src = "[[source]]\nid = \"cdc\"\ntype = \"ported\"\nports = [\"orders\", \"shop.items\"]\n";
    let registry = Registry::builtin().with_source(&PORTED);
    let dir = fixture();
    let parse = |text: &str| {
        Job::parse(&dir.path().join("job.toml"), text, &registry).map_err(|e| e.to_string())
    };
    let job = parse(&doc(&[
        src,
        &op("o", "[\"cdc.shop.items\"]"),
        &sink("a", "cdc.orders"),
        &sink("b", "o"),
    ]))
    .unwrap();
    assert_eq!(
        job.operators[0].inputs.upstreams(),
        [&Upstream {
            node: "cdc".into(),
            port: Some("shop.items".into())
        }]
    );
    assert_eq!(job.consumers("cdc"), ["o", "a"]);
    for (text, want) in [
        (
            doc(&[src, &sink("a", "cdc"), &sink("b", "cdc.shop.items")]),
            "sink \"a\": input \"cdc\": source \"cdc\" has named output ports (orders, shop.items); name one, as in \"cdc.orders\"",
        ),
        (
            doc(&[src, &sink("a", "cdc.order"), &sink("b", "cdc.shop.items")]),
            "sink \"a\": input \"cdc.order\": source \"cdc\" has no output port \"order\" (its ports: orders, shop.items); name one of those",
        ),
        (
            doc(&[src, &sink("a", "cdc.orders")]),
            "source \"cdc\": output port \"shop.items\" is not consumed by any operator or sink; wire it (input = \"cdc.shop.items\") or remove it from the source's settings",
        ),
    ] {
        let err = parse(&text).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}

/// A csv file sink's settings are checked when the job file is read (so
/// `weir validate` reports them): one line each, naming the fix.
#[test]
fn a_csv_file_sinks_settings_are_checked_when_the_job_is_read() {
    let sink = |extra: &str| doc(&[GEN, &format!("{}{extra}", file_sink("f", "out.csv"))]);
    let csv = |extra: &str| sink(&format!("format = \"csv\"\n{extra}"));
    assert_rejects!(
        csv("delimiter = \";;\"\n") => "sink \"f\": delimiter = \";;\" is not one ASCII character",
        csv("delimiter = \"\\\"\"\n") => "would break CSV's quoting",
        csv("header = false\n") => "header = false needs `columns`",
        csv("header = \"no\"\n") => "in `header`",
        csv("codec = \"deflate\"\n") => "`codec` compresses the blocks of format = \"avro\"",
        csv("schema = \"a.csv\"\n") => "are settings of format = \"avro\", \"protobuf\" or \"json\"",
        csv("columns = { a = \"i64\" }\n") => "a table of cell types is a csv source's `columns`",
        csv("columns = [\"a\", \"a\"]\n") => "`columns` names \"a\" twice",
        csv("delivery = \"at-least-once\"\n") => "would damage the csv file after it",
        sink("columns = [\"a\"]\n") => "lay out the file of format = \"csv\"",
        sink("format = \"tsv\"\n") => "\"debezium-json\", \"csv\", \"avro\"",
    );
    let job = parse(&csv(
        "columns = [\"a\", \"b\"]\nheader = false\ndelimiter = \"\\t\"\n",
    ))
    .unwrap();
    let layout = crate::connectors::file::csv_layout::CsvLayout {
        columns: Some(vec!["a".into(), "b".into()]),
        header: false,
        delimiter: b'\t',
    };
    let dir = job.path.parent().unwrap();
    let out = FileSinkConfig {
        path: dir.join("out.csv"),
        format: FileFormat::Csv(layout),
    };
    assert_eq!(&*job.sinks[0].connector, &out as &dyn SinkConnector);
}
