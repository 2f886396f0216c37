//! Golden pipelines: wordcount, reconcile and dedupe run straight through
//! must produce exactly the output of an independent reference; run again
//! with `weir` killed by SIGKILL again and again, each time after the run
//! committed output (at a random moment of the checkpoints that follow), and
//! restarted, the visible output must be the same multiset of lines:
//! nothing lost, nothing duplicated. Where the input defines an order, the
//! output keeps it: each word's running counts in order, each dedupe
//! instance's first occurrences in input order. (Reconcile's output has
//! none: when a key is classified depends on how its two inputs
//! interleave.) A `csv` file sink keeps the same promises, read back by
//! Python's `csv` module.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use weir_tests::cli::Weir;
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs;
use weir_tests::order::{assert_in_order_per_instance, jsonl_key};
use weir_tests::orders::{Orders, assert_same_json_lines};
use weir_tests::pipeline::{XorShift, multiset, seed, wordcount_words};
use weir_tests::plugins;
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// Kills per crash test, and how long after a run's first committed
/// output (ms) a kill lands.
const KILLS: usize = 4;
const KILL_JITTER: (u64, u64) = (0, 300);

/// Runs `job` through `kills` SIGKILLs and to the end; asserts its output
/// `out` is `expected`; returns how many runs were killed.
fn check_crash_run(
    job: &JobDir,
    out: &str,
    expected: &BTreeMap<String, usize>,
    kills: usize,
    rng: &mut XorShift,
) -> usize {
    let killed = job.run_through_kills(kills, out, KILL_JITTER, rng);
    assert_same_json_lines(
        &job.lines(out),
        expected,
        &format!("output after {killed} crashes"),
    );
    killed
}

// ---------------------------------------------------------------- wordcount

/// Every occurrence of a word yields `{"word": w, "count": k}` for k = 1..=n.
fn wordcount_reference(text: &str) -> BTreeMap<String, usize> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut out = String::new();
    for w in wordcount_words(text) {
        let c = counts.entry(w.clone()).or_insert(0);
        *c += 1;
        out.push_str(&format!("{}\n", json!({"word": w, "count": *c})));
    }
    multiset(&out)
}

/// Asserts that the wordcount job in `job` wrote each word's running
/// counts over `input` in order (the reference's lines, in order per word).
fn assert_counts_in_order(job: &JobDir, input: &str, what: &str) {
    let want = true_counts(wordcount_words(input));
    let what = format!("{what} (seed {})", seed());
    assert_running_counts(&want, &job.read("out/counts.jsonl"), &what);
}

#[test]
fn wordcount_straight_through_matches_the_reference() {
    let mut rng = XorShift(seed());
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 400, 3000);
    let wordcount = jobs::wordcount(plugins::WORD_COUNT, None);
    let job = JobDir::new(WEIR, wordcount, &[("input.txt", &input)]);
    let stderr = job.run_ok(&[]);
    assert_has(&stderr, "job `wordcount` finished");
    assert_same_json_lines(
        &job.lines("out/counts.jsonl"),
        &wordcount_reference(&input),
        "wordcount output",
    );
    assert_counts_in_order(&job, &input, "wordcount output");
}

/// Twelve kills, every one after the run committed output: kills land in
/// checkpoints being taken, committed and appended, again and again.
#[test]
fn wordcount_survives_a_dozen_sigkills_exactly_once() {
    let mut rng = XorShift(seed() ^ 1);
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 400, 40_000);
    let wordcount = jobs::wordcount(plugins::WORD_COUNT, Some(5000));
    let job = JobDir::new(WEIR, wordcount, &[("input.txt", &input)]);
    let killed = check_crash_run(
        &job,
        "out/counts.jsonl",
        &wordcount_reference(&input),
        12,
        &mut rng,
    );
    assert!(killed >= 10, "only {killed} of 12 kills landed mid-job");
    assert_counts_in_order(&job, &input, &format!("output after {killed} crashes"));
}

/// word-count (rows, 2 instances) after `split`, then `filter` keeping the
/// counts above 2 (it reads the rows as JSON text), into
/// `out/often.jsonl`, with `checkpoint`, the text source sending 20 lines
/// a batch; with `delay_ms`, the `slow-pass` guest (passing records on
/// unchanged after sleeping that long per batch) between the word count
/// and the filter, so that rows queue on its input.
fn word_count_then_filter(checkpoint: Checkpoint, delay_ms: Option<u32>) -> JobFile {
    let job = JobFile::new("wordcount")
        .checkpoint(checkpoint)
        .source(Source::file("text", "input.txt").batch_size(20))
        .operator(Operator::new("split", plugins::SPLIT).inputs(&["text"]))
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["split"])
                .parallelism(2),
        );
    let (job, counts) = match delay_ms {
        Some(ms) => {
            let delay = Operator::new("delay", plugins::GUEST_SLOW_PASS)
                .inputs(&["count"])
                .config(&format!("{{ delay_ms = {ms} }}"))
                .grants(&["clocks"]);
            (job.operator(delay), "delay")
        }
        None => (job, "count"),
    };
    job.operator(
        Operator::new("often", plugins::FILTER)
            .inputs(&[counts])
            .config(r#"{ field = "count", op = "gt", value = 2 }"#),
    )
    .sink(Sink::jsonl("out", "out/often.jsonl").input("often"))
}

/// Asserts that `job`'s `out/often.jsonl` holds, for each word of `input`
/// counted n > 2 times, the counts 3..=n in order, each line exactly
/// `{"word":…,"count":…}` as serde_json writes it.
fn assert_often_counts(job: &JobDir, input: &str, what: &str) {
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in job.read("out/often.jsonl").lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (word, count) = (v["word"].as_str().unwrap(), v["count"].as_u64().unwrap());
        let text = format!(r#"{{"word":{},"count":{count}}}"#, json!(word));
        assert_eq!(line, text, "{what}: as serde_json writes it");
        seen.entry(word.to_owned()).or_default().push(count);
    }
    let want: BTreeMap<String, Vec<u64>> = true_counts(wordcount_words(input))
        .into_iter()
        .filter(|(_, n)| *n > 2)
        .map(|(w, n)| (w, (3..=n).collect()))
        .collect();
    assert!(want.len() > 10, "the input repeats words: {}", want.len());
    assert_eq!(seen, want, "{what} (seed {})", seed());
}

/// The word count emits rows (typed fields, no text); the operator after
/// it reads them as the JSON text the host writes, byte for byte what the
/// word count wrote as text before.
#[test]
fn an_operator_after_the_word_count_reads_its_rows_as_json_text() {
    let mut rng = XorShift(seed() ^ 4);
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 60, 3000);
    let job = word_count_then_filter(Checkpoint::every("100ms"), None);
    let job = JobDir::new(WEIR, job, &[("input.txt", &input)]);
    job.run_ok(&[]);
    assert_often_counts(&job, &input, "straight through");
}

/// Rows queued on the input of a slow operator cross unaligned
/// checkpoints as in-flight data (some checkpoint keeps some) and restores
/// after SIGKILLs: nothing lost, nothing repeated, each word's counts in
/// order.
#[test]
fn rows_cross_unaligned_checkpoints_and_sigkills_exactly_once() {
    let mut rng = XorShift(seed() ^ 5);
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 60, 6000);
    let checkpoint = Checkpoint::every("50ms").mode("unaligned").retain(1000);
    let job = word_count_then_filter(checkpoint, Some(5));
    let job = JobDir::new(WEIR, job, &[("input.txt", &input)]);
    let killed = job.run_through_kills(KILLS, "out/often.jsonl", KILL_JITTER, &mut rng);
    assert_often_counts(&job, &input, &format!("after {killed} SIGKILLs"));
    let report = job.checkpoints(&[]);
    let in_flight = report.lines().filter(|l| {
        l.split_once("in flight ")
            .is_some_and(|(_, rest)| !rest.starts_with("0 bytes"))
    });
    assert!(
        in_flight.count() > 0,
        "no checkpoint kept in-flight data: {report}"
    );
}

/// A `csv` source's typed cells reach a plugin that reads rows as typed
/// fields, in order, and a plugin that does not as the JSON object of the
/// same cells; the oracle is written from the input.
#[test]
fn a_plugin_that_reads_rows_gets_a_csv_sources_typed_cells_as_fields() {
    let mut rng = XorShift(seed() ^ 6);
    let mut csv = String::from("id,amount,paid,at,note\n");
    let (mut fields, mut text) = (String::new(), String::new());
    for id in 0..200u64 {
        // Decimals keep their digits (trailing zeros too); an empty typed
        // cell is null.
        let amount = match rng.range(0, 10) {
            0 => String::new(),
            n => format!("{}.{}0", rng.range(0, 100_000), n),
        };
        let paid = rng.range(0, 2) == 1;
        let at = format!(
            "2024-01-{:02}T12:00:00.{:03}Z",
            1 + rng.range(0, 28),
            rng.range(0, 1000)
        );
        let note = format!("n{} \"q\"", rng.range(0, 1000));
        csv.push_str(&format!(
            "{id},{amount},{},{at},\"{}\"\n",
            if paid { "t" } else { "f" },
            note.replace('"', "\"\"")
        ));
        let amount_field = match amount.as_str() {
            "" => "amount:null=".to_owned(),
            a => format!("amount:decimal={a}"),
        };
        fields.push_str(&format!(
            "row id:int={id} {amount_field} paid:bool={paid} at:str={at} note:str={note}\n"
        ));
        let amount_json = if amount.is_empty() { "null" } else { &amount };
        let object = format!(
            r#"{{"id":{id},"amount":{amount_json},"paid":{paid},"at":"{at}","note":{}}}"#,
            json!(note)
        );
        text.push_str(&format!("- {object}\n"));
    }
    let job = JobFile::new("rows-in")
        .source(Source::file("in", "in.csv").format("csv").key("id").value(
            "columns",
            "{ id = \"i64\", amount = \"decimal\", paid = \"bool\", at = \"timestamp\" }",
        ))
        .operator(Operator::new("fields", plugins::GUEST_ROW_FIELDS).inputs(&["in"]))
        .operator(Operator::new("text", plugins::GUEST_SHOW_TIMESTAMPS).inputs(&["in"]))
        .sink(Sink::file("rows", "rows.txt").input("fields"))
        .sink(Sink::file("json", "json.txt").input("text"));
    let job = JobDir::new(WEIR, job, &[("in.csv", &csv)]);
    job.run_ok(&[]);
    assert_eq!(
        job.read("rows.txt"),
        fields,
        "what the plugin that reads rows got"
    );
    assert_eq!(
        job.read("json.txt"),
        text,
        "what the plugin that reads text got"
    );
}

// ---------------------------------------------------------------- csv sinks

/// The rows of the CSV file `path` with cells split at `delimiter`, as
/// Python's `csv` module reads them.
fn python_csv(path: &Path, delimiter: char) -> Vec<Vec<String>> {
    let script = "import csv, json, sys\n\
                  with open(sys.argv[1], newline='') as f:\n    \
                      for row in csv.reader(f, delimiter=sys.argv[2]):\n        \
                          print(json.dumps(row))\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .arg(delimiter.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python3's csv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asserts that `got` is `want`, row for row, naming the first that is not.
fn assert_rows(got: &[Vec<String>], want: &[Vec<String>], what: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: {} rows, {} expected; row {i} is {:?}, expected {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

/// The word count's rows go to a `csv` file sink, written from their
/// fields: SIGKILLed again and again after it committed output and
/// restarted, the file Python's `csv` module reads holds one header line,
/// then every running count of the input once, in the input's order (one
/// instance).
#[test]
fn a_csv_file_of_the_word_counts_rows_survives_sigkills_exactly_once_in_order() {
    let mut rng = XorShift(seed() ^ 7);
    let input = weir_tests::pipeline::wordcount_input(&mut rng, 300, 12_000);
    let job = JobFile::new("counts-csv")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("text", "input.txt").rate(5000))
        .operator(Operator::new("split", plugins::SPLIT).inputs(&["text"]))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["split"]))
        .sink(
            Sink::file("out", "out/counts.csv")
                .string("format", "csv")
                .input("count"),
        );
    let job = JobDir::new(WEIR, job, &[("input.txt", &input)]);
    let killed = job.run_through_kills(KILLS, "out/counts.csv", KILL_JITTER, &mut rng);
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut want = vec![vec!["word".to_owned(), "count".to_owned()]];
    for word in wordcount_words(&input) {
        let count = counts.entry(word.clone()).or_default();
        *count += 1;
        want.push(vec![word, count.to_string()]);
    }
    let got = python_csv(&job.path().join("out/counts.csv"), ',');
    let what = format!("after {killed} SIGKILLs (seed {})", seed());
    assert_rows(&got, &want, &what);
}

/// JSON lines go to a `csv` file sink with no plugin between, each
/// object's members in the cells of `columns` (whatever their order; a
/// missing one and a null empty, a decimal's digits as written, a nested
/// value its JSON text, quoted where the delimiter, a quote or a line
/// break is inside): through SIGKILLs Python's `csv` module reads every
/// record once, in order, and the one with a field that is no column is
/// the sink's dead letter, once, saying which field and which columns.
#[test]
fn json_lines_reach_a_csv_file_and_a_record_with_another_field_its_dead_letters_once() {
    let mut rng = XorShift(seed() ^ 8);
    let names = [
        "plain",
        "a;b",
        "a,b",
        "say \"hi\"",
        "two\nlines",
        " lead",
        "",
        "é",
    ];
    let header = ["id", "name", "amount", "note"].map(str::to_owned).to_vec();
    let (mut input, mut want, mut bad) = (String::new(), vec![header], Vec::new());
    for i in 0..4000u64 {
        let name = names[rng.range(0, names.len() as u64) as usize];
        let amount = format!("{}.{:02}", i * 7 % 1000, i % 100);
        let (note, cell) = match i % 4 {
            0 => (Value::Null, String::new()),
            1 => (
                json!({"tags": ["x", i]}),
                format!(r#"{{"tags":["x",{i}]}}"#),
            ),
            2 => (json!(i % 3 == 0), (i % 3 == 0).to_string()),
            _ => (Value::Null, String::new()),
        };
        let (id, name_json) = (format!("\"id\":{i}"), format!("\"name\":{}", json!(name)));
        let line = match i % 4 {
            // A missing field, and members in another order than the columns.
            3 => format!("{{\"amount\": {amount}, {name_json}, {id}}}"),
            _ => format!("{{{id},{name_json},\"amount\":{amount},\"note\":{note}}}"),
        };
        if i == 1234 {
            let extra = format!("{}, \"extra\": 1}}", &line[..line.len() - 1]);
            input.push_str(&format!("{extra}\n"));
            bad.push(extra);
            continue;
        }
        input.push_str(&format!("{line}\n"));
        want.push(vec![i.to_string(), name.to_owned(), amount, cell]);
    }
    let job = JobFile::new("orders-csv")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("in", "orders.jsonl")
                .format("jsonl")
                .rate(2000),
        )
        .sink(
            Sink::file("out", "out/orders.csv")
                .string("format", "csv")
                .string("delimiter", ";")
                .value("columns", r#"["id", "name", "amount", "note"]"#)
                .value("on_error", "{ dead_letter = \"rejects\" }")
                .input("in"),
        )
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let job = JobDir::new(WEIR, job, &[("orders.jsonl", &input)]);
    let killed = job.run_through_kills(KILLS, "out/orders.csv", KILL_JITTER, &mut rng);
    let got = python_csv(&job.path().join("out/orders.csv"), ';');
    let what = format!("after {killed} SIGKILLs (seed {})", seed());
    assert_rows(&got, &want, &what);
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    assert_eq!(weir_tests::letters::values(&letters), bad, "{what}");
    let error = letters[0]["error"].as_str().unwrap();
    assert_has(error, "the field `extra`");
    assert_has(error, "(id, name, amount, note)");
}

// ---------------------------------------------------------------- reconcile

#[test]
fn reconcile_straight_through_matches_the_reference() {
    let orders = Orders::generate(&mut XorShift(seed() ^ 2), 2000);
    let job = orders.job(WEIR, None, None);
    job.run_ok(&[]);
    assert_same_json_lines(
        &job.lines("out/reconcile.jsonl"),
        &orders.reference(),
        "reconcile output",
    );
}

#[test]
fn reconcile_survives_sigkill_exactly_once() {
    let mut rng = XorShift(seed() ^ 3);
    let orders = Orders::generate(&mut rng, 20_000);
    let job = orders.job(WEIR, Some(3000), Some(3000));
    check_crash_run(
        &job,
        "out/reconcile.jsonl",
        &orders.reference(),
        KILLS,
        &mut rng,
    );
}

/// The issue's test: a reconcile rescaled mid-run (killed at 2 instances,
/// resumed at 3, killed again, finished at 1) equals the batch answer.
#[test]
fn reconcile_rescaled_mid_run_equals_the_batch_answer() {
    let mut rng = XorShift(seed() ^ 5);
    let orders = Orders::generate(&mut rng, 20_000);
    let job = orders.job(WEIR, Some(3000), Some(3000));
    for p in [3, 1] {
        let killed = job.kill_after_output("out/reconcile.jsonl", (0, 100), &mut rng);
        assert!(killed, "the run at the old parallelism finished first");
        let changed = Orders::job_file(Some(3000), Some(3000))
            .operator_with("reconcile", |o| o.parallelism(p));
        job.write_job(changed);
    }
    let stderr = job.run_ok(&[]);
    assert_has(&stderr, "rescaled from 3 to 1 instances");
    assert_same_json_lines(
        &job.lines("out/reconcile.jsonl"),
        &orders.reference(),
        "reconcile output",
    );
}

/// With one input ten times slower than the other, every checkpoint's
/// operator state must be exactly the state after the records up to the
/// checkpoint's source offsets: the barriers were aligned.
#[test]
fn checkpoints_of_skewed_inputs_are_consistent_cuts() {
    let orders = Orders::generate(&mut XorShift(seed() ^ 4), 3000);
    let job = orders.job(WEIR, Some(4000), Some(400));
    job.run_ok(&[]);
    let store = weir::store::CheckpointStore::open_existing(&job.state_dir()).unwrap();
    let checkpoints = store.list().unwrap();
    let mut intermediate = 0;
    for meta in checkpoints.iter().filter(|m| !m.final_checkpoint) {
        let records = |s: &str| meta.sources[s]["records"].as_u64().unwrap() as usize;
        let (ka, kb) = (records("payments"), records("bank"));
        if ka > 0 && kb > 0 && kb < orders.b.len() {
            intermediate += 1;
        }
        let mut expected: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
        for (k, (a, b)) in orders.sides(ka, kb) {
            // A done key (both sides in) keeps no amounts.
            let v = match (a, b) {
                (Some(_), Some(_)) => json!({"done": true}),
                (Some(a), None) => json!({"a": a}),
                (None, Some(b)) => json!({"b": b}),
                (None, None) => json!({}),
            };
            expected.insert(format!("{k}\0rc").into_bytes(), v);
        }
        let got: BTreeMap<Vec<u8>, Value> = store
            .operator_state(meta.id, "reconcile")
            .unwrap()
            .into_iter()
            .map(|(_, k, v)| {
                let json = weir::keyed::value::row_json(&v).unwrap_or_else(|| {
                    panic!("reconcile's state value {v:?} is a row value (state version 2)")
                });
                (k, serde_json::from_slice(&json).unwrap())
            })
            .collect();
        assert_eq!(
            got.len(),
            expected.len(),
            "checkpoint {} at offsets a={ka} b={kb}",
            meta.id
        );
        assert!(
            got == expected,
            "checkpoint {} state differs from the cut a={ka} b={kb}",
            meta.id
        );
    }
    assert!(
        intermediate >= 3,
        "only {intermediate} checkpoints caught both inputs mid-stream"
    );
}

// ---------------------------------------------------------------- dedupe

/// Events keyed by `id` through `dedupe` (2 instances), at `rate` records
/// per second or unthrottled.
fn dedupe_job(rate: Option<u64>) -> JobFile {
    let events = Source::file("events", "events.jsonl").format("jsonl");
    JobFile::new("dedupe")
        .checkpoint(Checkpoint::every("100ms"))
        .source(events.key("id").throttle(rate))
        .operator(
            Operator::new("dedupe", plugins::DEDUPE)
                .inputs(&["events"])
                .parallelism(2),
        )
        .sink(Sink::jsonl("out", "out/unique.jsonl").input("dedupe"))
}

/// `n` events with ids drawn from `n / 4`: the input, and the first
/// event of each id in input order.
fn dedupe_input(rng: &mut XorShift, n: usize) -> (String, String) {
    let (mut text, mut first, mut seen) = (String::new(), String::new(), HashSet::new());
    for i in 0..n {
        let id = rng.range(0, n as u64 / 4);
        let line = json!({"id": format!("e{id}"), "seq": i}).to_string();
        if seen.insert(id) {
            first.push_str(&line);
            first.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
    }
    (text, first)
}

/// Asserts that the dedupe job in `job` (2 instances) forwarded the first
/// events `first` in input order per instance: each instance gets the
/// events of its ids in input order and forwards each first one at once.
fn assert_first_events_in_order(job: &JobDir, first: &str, what: &str) {
    let what = format!("{what} (seed {})", seed());
    let out = job.read("out/unique.jsonl");
    assert_in_order_per_instance(&out, &[first], 2, jsonl_key("id"), &what);
}

#[test]
fn dedupe_straight_through_matches_the_reference() {
    let (input, first) = dedupe_input(&mut XorShift(seed() ^ 5), 4000);
    let job = JobDir::new(WEIR, dedupe_job(None), &[("events.jsonl", &input)]);
    job.run_ok(&[]);
    let out = job.lines("out/unique.jsonl");
    assert_same_json_lines(&out, &multiset(&first), "dedupe output");
    assert_first_events_in_order(&job, &first, "dedupe output");
}

#[test]
fn dedupe_survives_sigkill_exactly_once() {
    let mut rng = XorShift(seed() ^ 6);
    let (input, first) = dedupe_input(&mut rng, 60_000);
    let job = JobDir::new(WEIR, dedupe_job(Some(10000)), &[("events.jsonl", &input)]);
    let killed = check_crash_run(&job, "out/unique.jsonl", &multiset(&first), KILLS, &mut rng);
    assert_first_events_in_order(&job, &first, &format!("output after {killed} crashes"));
}
