//! The Python SDK's own tests and the harness tests of the Python plugins
//! (`sdk/python/tests`, `plugins/python/*/tests`), run with pytest in plain
//! CPython through `scripts/python-sdk.sh test`, which installs pytest and
//! componentize-py when missing; and what only a component shows: logging
//! through the host and `weir_sdk` errors as WIT errors. A toolchain that cannot be installed fails
//! this test, as it fails `scripts/build-polyglot.sh`: the suite never
//! passes by skipping.

use std::process::Command;

use weir_tests::cli::Weir;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

#[test]
fn python_sdk_and_plugin_harness_tests_pass_under_pytest() {
    let root = weir_tests::repo_root();
    let out = Command::new("bash")
        .arg(root.join("scripts/python-sdk.sh"))
        .args(["test", "-q", "sdk/python/tests", "plugins/python"])
        .current_dir(&root)
        .output()
        .expect("running scripts/python-sdk.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pytest failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The summary line names how many passed: not zero, none skipped.
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.contains(" passed") && !summary.contains("skipped"),
        "unexpected pytest summary: {summary}\n{stdout}"
    );
}

/// Builds the Python package `pkg` to the component `pkg/<name>.wasm`
/// with `scripts/python-sdk.sh build`, which must succeed.
fn build(pkg: &std::path::Path, name: &str) -> std::path::PathBuf {
    let wasm = pkg.join(format!("{name}.wasm"));
    let out = Command::new("bash")
        .arg(weir_tests::repo_root().join("scripts/python-sdk.sh"))
        .arg("build")
        .arg(pkg)
        .arg(&wasm)
        .output()
        .expect("running scripts/python-sdk.sh build");
    assert!(
        out.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wasm
}

/// A Python operator on `weir_sdk`, built to a component with
/// `scripts/python-sdk.sh build` and run by `weir run`: its log lines
/// (`weir_sdk.log` and the `logging` logger `weir`) reach the host's log
/// tagged with the operator, what it emits keeps the input's timestamp, and
/// an `InvalidInput` it raises is the job's one error line, as a plugin
/// error of kind invalid input, not a trap.
#[test]
fn a_python_operator_logs_through_the_host_and_its_errors_are_wit_errors() {
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(
        pkg.path().join("app.py"),
        r#"
import logging

import weir_sdk
from weir_sdk import InvalidInput, Operator


class Shout(Operator):
    name = "shout"

    def open(self, ctx):
        weir_sdk.log.warn(f"shout opened as {ctx.operator_id}[{ctx.instance}]")

    def process(self, ctx, port, batch):
        for rec in batch:
            text = rec.value_str()
            if "boom" in text:
                raise InvalidInput("the record `boom` cannot be shouted")
            logging.getLogger("weir.shout").warning("shouting %s", text)
            ctx.emit(text.upper() + "@" + str(rec.timestamp))


weir_sdk.export(Shout, globals())
"#,
    )
    .unwrap();
    let wasm = build(pkg.path(), "shout");

    let job = |input: &str| {
        let file = weir_tests::job_file::JobFile::new("shout")
            .checkpoint(weir_tests::job_file::Checkpoint::final_only())
            .source(
                weir_tests::job_file::Source::file("in", "in.jsonl")
                    .format("jsonl")
                    .timestamp("t"),
            )
            .operator(weir_tests::job_file::Operator::new("up", &wasm).inputs(&["in"]))
            .sink(weir_tests::job_file::Sink::file("out", "out.txt").input("up"));
        weir_tests::job_dir::JobDir::new(WEIR, file, &[("in.jsonl", input)])
    };
    let ok = job("{\"t\": 5, \"w\": \"hi\"}\n");
    let out = ok.run(&[]);
    assert!(out.success(), "{}", out.stderr);
    assert_has_all(&out.stderr, &["shout opened as up[0]", "shouting {"]);
    let line = out.stderr.lines().find(|l| l.contains("shouting")).unwrap();
    assert_has(line, "up");
    let written = ok.read("out.txt");
    assert!(written.ends_with("}@5\n"), "{written}");

    let bad = job("{\"t\": 1}\n{\"t\": 2, \"w\": \"boom\"}\n");
    let out = bad.run(&[]);
    let error = out.error_line();
    assert!(
        error.contains("invalid input: the record `boom` cannot be shouted")
            && error.contains("operator `up[0]`")
            && !error.contains("Traceback"),
        "{error}"
    );
}

/// A Python operator that raises on some records and refuses them with
/// `batch.each` (here `float()` of an amount that is not a number): with
/// a dead-letter sink, `weir run` goes past each once, with no replay,
/// while the other records of its batch are summed exactly once and in
/// order, through SIGKILLs; each dead letter carries the exception.
#[test]
fn a_python_operator_refuses_the_records_it_raises_on_and_they_are_dead_lettered() {
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(
        pkg.path().join("app.py"),
        r#"
import weir_sdk
from weir_sdk import InvalidInput, Operator, ValueState


class Total(Operator):
    name = "total"

    def open(self, ctx):
        self.total = ValueState("total")

    def process(self, ctx, port, batch):
        def add(rec):
            total = (self.total.get() or 0.0) + float(rec.value_str())
            self.total.set(total)
            ctx.emit(f"{total:.1f}")

        batch.each(add, refuse=(InvalidInput, ValueError))


weir_sdk.export(Total, globals())
"#,
    )
    .unwrap();
    let wasm = build(pkg.path(), "total");
    // Amounts 1..=n, every 17th `x<i>` instead.
    let n = 1500;
    let (mut input, mut totals, mut bad) = (String::new(), String::new(), Vec::new());
    let mut total = 0.0;
    for i in 1..=n {
        if i % 17 == 0 {
            input.push_str(&format!("x{i}\n"));
            bad.push(format!("x{i}"));
        } else {
            input.push_str(&format!("{i}\n"));
            total += f64::from(i);
            totals.push_str(&format!("{total:.1}\n"));
        }
    }
    use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
    let file = JobFile::new("total")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "in.txt").rate(1000))
        .operator(
            Operator::new("total", &wasm)
                .inputs(&["in"])
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::file("out", "out.txt").input("total"))
        .sink(Sink::file("bad", "bad.txt"));
    let job = weir_tests::job_dir::JobDir::new(WEIR, file, &[("in.txt", &input)]);
    let (killed, stderr) = job.through_kills_after_checkpoints(2, weir_tests::pipeline::seed());
    assert!(killed >= 1, "killed {killed} times");
    assert!(
        !stderr.contains("replaying from the last complete checkpoint"),
        "{stderr}"
    );
    assert_eq!(job.read("out.txt"), totals);
    let letters = weir_tests::letters::parse(&job.read("bad.txt"));
    let values = weir_tests::letters::values(&letters);
    assert_eq!(values, bad, "each refused record once, in order");
    for l in &letters {
        assert_has(
            l["error"].as_str().unwrap(),
            "ValueError: could not convert string to float",
        );
        assert_eq!(l["error_kind"], "invalid-input", "{l}");
    }
}

/// A package that is not an operator fails its build with the SDK's own
/// words at the end, not a componentize-py backtrace; a folder without
/// `app.py` says so.
#[test]
fn a_bad_python_package_fails_to_build_with_an_error_a_person_can_act_on() {
    let root = weir_tests::repo_root();
    let build = |dir: &std::path::Path| {
        Command::new("bash")
            .arg(root.join("scripts/python-sdk.sh"))
            .arg("build")
            .arg(dir)
            .arg(dir.join("x.wasm"))
            .output()
            .expect("running scripts/python-sdk.sh build")
    };
    let pkg = tempfile::tempdir().unwrap();
    let out = build(pkg.path());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no app.py"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(
        pkg.path().join("app.py"),
        "import weir_sdk\n\nclass Nameless(weir_sdk.Operator):\n    pass\n\nweir_sdk.export(Nameless, globals())\n",
    )
    .unwrap();
    let out = build(pkg.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    assert!(
        tail.iter()
            .any(|l| l.contains("Nameless.name must be the plugin's name")),
        "{stderr}"
    );
    assert_lacks(&stderr, "Stack backtrace");
    assert!(!pkg.path().join("x.wasm").exists());
}

/// A Python operator that reads rows (`reads_rows = True`, world
/// `operator-rows`) gets a `csv` source's typed cells as typed Python
/// values and a `jsonl` source's records as text, and the rows it emits
/// with `emit_row` reach a sink as the JSON object of their fields, the
/// decimals digit for digit; the oracles are written from the input.
#[test]
fn a_python_operator_reads_typed_csv_rows_and_emits_rows() {
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(
        pkg.path().join("app.py"),
        r#"
import weir_sdk
from weir_sdk import Operator


class Fields(Operator):
    name = "row-fields"
    inputs = ["csv", "json"]
    outputs = ["out", "seen"]
    reads_rows = True

    def process(self, ctx, port, batch):
        for r in batch:
            if not r.is_row:
                ctx.emit("text " + r.value_str(), port="seen")
                continue
            f = r.row()
            seen = " ".join(f"{k}:{type(v).__name__}={v}" for k, v in f.items())
            ctx.emit("row " + seen, port="seen")
            amount = f["amount"]
            cents = None if amount is None else int(amount * 100)
            fields = {"id": f["id"], "amount": amount, "paid": f["paid"], "cents": cents}
            ctx.emit_row({**fields, "note": f["note"], "half": f["id"] / 2}, r.key)


weir_sdk.export(Fields, globals())
"#,
    )
    .unwrap();
    let wasm = build(pkg.path(), "row-fields");
    let inspected = WEIR.ok([std::path::Path::new("inspect"), &wasm]);
    assert_has(&inspected.stdout, "rows:          read as rows");

    let mut rng = weir_tests::pipeline::XorShift(weir_tests::pipeline::seed() ^ 46);
    let mut csv = String::from("id,amount,paid,note\n");
    let (mut seen_rows, mut rows) = (String::new(), String::new());
    for id in 0..300u64 {
        // Decimals keep their digits (trailing zeros too); an empty typed
        // cell is null.
        let (whole, tenth) = (rng.range(0, 100_000), rng.range(0, 10));
        let amount = (tenth != 0).then(|| format!("{whole}.{tenth}0"));
        let paid = rng.range(0, 2) == 1;
        let note = format!("n{} \"q\" é", rng.range(0, 1000));
        csv.push_str(&format!(
            "{id},{},{paid},\"{}\"\n",
            amount.as_deref().unwrap_or(""),
            note.replace('"', "\"\"")
        ));
        let (amount_seen, amount_json, cents) = match &amount {
            Some(a) => (
                format!("Decimal={a}"),
                a.clone(),
                (whole * 100 + tenth * 10).to_string(),
            ),
            None => ("NoneType=None".into(), "null".into(), "null".into()),
        };
        let py_bool = if paid { "True" } else { "False" };
        seen_rows.push_str(&format!(
            "row id:int={id} amount:{amount_seen} paid:bool={py_bool} note:str={note}\n"
        ));
        rows.push_str(&format!(
            "{{\"id\":{id},\"amount\":{amount_json},\"paid\":{paid},\"cents\":{cents},\"note\":{},\"half\":{:?}}}\n",
            serde_json::to_string(&note).unwrap(),
            id as f64 / 2.0
        ));
    }
    let json_in: String = (0..50).map(|i| format!("{{\"j\": {i}}}\n")).collect();
    let seen_text: String = json_in.lines().map(|l| format!("text {l}\n")).collect();

    use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
    let file = JobFile::new("python-rows")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("csv", "in.csv").format("csv").key("id").value(
            "columns",
            "{ id = \"i64\", amount = \"decimal\", paid = \"bool\" }",
        ))
        .source(Source::file("json", "in.jsonl").format("jsonl"))
        .operator(Operator::new("fields", &wasm).ports(&[("csv", "csv"), ("json", "json")]))
        .sink(Sink::jsonl("rows", "rows.jsonl").input("fields"))
        .sink(Sink::file("seen", "seen.txt").input("fields.seen"));
    let job =
        weir_tests::job_dir::JobDir::new(WEIR, file, &[("in.csv", &csv), ("in.jsonl", &json_in)]);
    job.run_ok(&[]);
    let seen = job.read("seen.txt");
    let only = |prefix: &str| -> String {
        seen.lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(
        only("row "),
        seen_rows,
        "what the operator read of each row, in order"
    );
    assert_eq!(
        only("text "),
        seen_text,
        "the jsonl records, as text, in order"
    );
    assert_eq!(
        job.read("rows.jsonl"),
        rows,
        "the rows it emitted, as JSON, in order"
    );
}
