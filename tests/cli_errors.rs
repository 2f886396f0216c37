//! Every class of bad input gives one message that names the file or
//! operator, says what is wrong and how to fix it, and a non-zero exit;
//! never a panic or a backtrace.

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::text::assert_has_all;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

const GOOD: &str = r#"
name = "errors"
[[source]]
id = "words"
type = "file"
path = "words.txt"
[[operator]]
id = "count"
plugin = "{plugins}/word-count.wasm"
inputs = ["words"]
[[sink]]
id = "out"
type = "file"
path = "out.jsonl"
input = "count"
"#;

/// Runs `weir <cmd> job.toml` on `job` and checks the one-line error.
fn fails(cmd: &str, job: &str, needles: &[&str]) {
    let j = JobDir::new(WEIR, job, &[("words.txt", "a\nb\n")]);
    let out = j.weir(cmd, &[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "{err}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in: {err}");
    }
}

fn both(job: &str, needles: &[&str]) {
    fails("validate", job, needles);
    fails("run", job, needles);
}

#[test]
fn good_job_validates() {
    let j = JobDir::new(WEIR, GOOD, &[("words.txt", "a\n")]);
    j.validate().assert_ok();
}

#[test]
fn toml_syntax_error_has_line_and_column() {
    both(
        &GOOD.replace("id = \"count\"", "id = \"count"),
        &["job.toml:8:", "TOML syntax error"],
    );
}

/// [`both`] on the good job with its source read as csv, its `setting`
/// naming the column `column`, which the header row (`a`) does not have:
/// `validate` refuses what `run` would, one check, one message.
fn csv_source_without(setting: &str, column: &str) {
    let csv = format!("path = \"words.txt\"\nformat = \"csv\"\n{setting} = \"{column}\"");
    let why = format!(
        "words.txt:1: the header row has no column `{column}` (columns: a); fix `{setting}`"
    );
    both(
        &GOOD.replacen("path = \"words.txt\"", &csv, 1),
        &["source \"words\"", &why],
    );
}

#[test]
fn csv_source_without_its_key_column() {
    csv_source_without("key", "order_no");
}

#[test]
fn unknown_upstream_id() {
    both(
        &GOOD.replace("inputs = [\"words\"]", "inputs = [\"wrods\"]"),
        &["job.toml", "operator \"count\"", "wrods", "words"],
    );
}

#[test]
fn unknown_key() {
    both(
        &GOOD.replace(
            "inputs = [\"words\"]",
            "inputs = [\"words\"]\nparalelism = 2",
        ),
        &["operator \"count\"", "paralelism"],
    );
}

#[test]
fn cycle() {
    let job = GOOD.replace("inputs = [\"words\"]", "inputs = [\"again\"]")
        + "[[operator]]\nid = \"again\"\nplugin = \"{plugins}/word-count.wasm\"\ninputs = [\"count\"]\n";
    both(&job, &["job.toml", "cycle", "count -> again -> count"]);
}

#[test]
fn missing_plugin_file() {
    both(
        &GOOD.replace("word-count.wasm", "no-such.wasm"),
        &["operator \"count\"", "no-such.wasm"],
    );
}

/// Runs `weir <cmd>` on the good job with its plugin replaced by `file`,
/// holding `bytes`: it fails, naming the file and saying `why`.
fn refuses_component(cmd: &str, file: &str, bytes: &str, why: &str) {
    let j = JobDir::new(
        WEIR,
        GOOD.replace("{plugins}/word-count.wasm", file),
        &[("words.txt", "a\n"), (file, bytes)],
    );
    let out = j.weir(cmd, &[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1));
    assert_has_all(err, &[file, why]);
}

#[test]
fn plugin_that_is_not_a_component() {
    refuses_component("run", "core.wasm", "\0asm\u{1}\0\0\0", "not a component");
}

#[test]
fn plugin_of_another_world() {
    refuses_component(
        "validate",
        "empty.wasm",
        "\0asm\r\0\u{1}\0",
        "weir:operator@0.1.0 world",
    );
}

#[test]
fn port_the_plugin_does_not_declare() {
    both(
        &GOOD.replace("inputs = [\"words\"]", "inputs = { left = \"words\" }"),
        &["operator \"count\"", "left", "in"],
    );
}

#[test]
fn output_port_the_plugin_does_not_declare() {
    both(
        &GOOD.replace("input = \"count\"", "input = \"count.rejected\""),
        &[
            "job.toml: sink \"out\": input \"count.rejected\": operator \"count\" has no output port \"rejected\"",
            "word-count.wasm declares outputs: out); name one of those",
        ],
    );
}

#[test]
fn unknown_operator_of_a_port() {
    both(
        &GOOD.replace("input = \"count\"", "input = \"cuont.out\""),
        &[
            "job.toml: sink \"out\": input \"cuont.out\": \"cuont\" is not a known id",
            "(sources and operators: words, count); fix the id",
        ],
    );
}

#[test]
fn upstream_listed_twice_in_a_union() {
    both(
        &GOOD.replace("[\"words\"]", "{ in = [\"words\", \"words\"] }"),
        &[
            "job.toml: operator \"count\": input port \"in\" lists \"words\" twice",
            "list each upstream once",
        ],
    );
    both(
        &GOOD.replace("input = \"count\"", "input = [\"count\", \"count.out\"]"),
        &[
            "job.toml: sink \"out\": input lists \"count\" and \"count.out\", the same output port",
            "list it once",
        ],
    );
}

#[test]
fn unreadable_source_file() {
    both(
        &GOOD.replace("words.txt", "missing.txt"),
        &["source \"words\"", "missing.txt"],
    );
}

#[test]
fn missing_job_file() {
    let out = WEIR.output(["run", "/nonexistent/job.toml"]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1));
    assert!(
        err.contains("/nonexistent/job.toml") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn bad_plugin_config_names_the_operator() {
    fails(
        "run",
        &GOOD.replace(
            "inputs = [\"words\"]",
            "inputs = [\"words\"]\nconfig = { lowercase = \"yes\" }",
        ),
        &["operator `count[0]`", "invalid config", "lowercase"],
    );
}

#[test]
fn malformed_input_record_names_the_file_and_line() {
    let job = GOOD.replace(
        "path = \"words.txt\"",
        "path = \"words.txt\"\nformat = \"jsonl\"\nkey = \"id\"",
    );
    let j = JobDir::new(WEIR, job, &[("words.txt", "{\"id\": 1}\nnot json\n")]);
    let out = j.run(&[]);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(1), "{err}");
    assert_has_all(err, &["source `words`", "words.txt:2", "not JSON"]);
}

#[test]
fn timestamp_on_a_source_without_fields() {
    both(
        &GOOD.replacen(
            "path = \"words.txt\"",
            "path = \"words.txt\"\ntimestamp = \"ts\"",
            1,
        ),
        &[
            "source \"words\"",
            "`timestamp` needs format = \"jsonl\" or \"csv\": a line has no fields",
        ],
    );
}

#[test]
fn csv_source_without_its_timestamp_column() {
    csv_source_without("timestamp", "ts");
}

/// A record without a valid timestamp stops the run with one line naming
/// the source, the file and line, and what the field holds.
#[test]
fn a_bad_timestamp_names_the_file_and_line() {
    let job = GOOD.replacen(
        "path = \"words.txt\"",
        "path = \"clicks.jsonl\"\nformat = \"jsonl\"\ntimestamp = \"ts\"",
        1,
    );
    let clicks = "{\"ts\":1}\n\n{\"ts\":\"yesterday\"}\n{\"ts\":4}\n";
    let j = JobDir::new(WEIR, job, &[("clicks.jsonl", clicks)]);
    let out = j.run(&[]);
    let path = j.path().join("clicks.jsonl");
    out.assert_one_line_error(&[&format!(
        "source `words`: {}:3: field `ts` is \"yesterday\", not milliseconds since the epoch \
         or an RFC 3339 time; fix the record or set on_bad_timestamp = \"skip\"",
        path.display()
    )]);
}
