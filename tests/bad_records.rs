//! Bad records (`on_error`): a source's lines it cannot read go to a
//! dead-letter sink exactly once, with what was wrong and where, through
//! SIGKILLs, from a file and from a Kafka topic into a Kafka topic; an
//! operator's plugin that traps on some records has them found by replays
//! and sent to the dead letters, the other records (of the same source
//! record too) taking effect once;
//! `skip` drops and counts them; `max_bad` bounds them per
//! checkpoint; `fail` (the default) stops at the first. Oracles come from
//! the input: which lines are bad is decided when writing it.

use std::path::Path;

use weir_tests::cli::{Outcome, Weir};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs;
use weir_tests::orders::{Orders, assert_same_json_lines};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::polyglot;
use weir_tests::servers::{Kafka, Outgoing};
use weir_tests::text::{assert_has, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// A bad line of the input: its number, its text and what is wrong.
struct Bad {
    line: u64,
    text: String,
    error: &'static str,
}

/// `n` JSON lines keyed by `word`: every 37th cut short (not JSON), every
/// 53rd without its `word` field. The input, its good lines in order, and
/// its bad ones.
fn input(n: u64) -> (String, Vec<String>, Vec<Bad>) {
    let (mut text, mut good, mut bad) = (String::new(), Vec::new(), Vec::new());
    for i in 1..=n {
        let (line, error) = match i {
            i if i % 37 == 0 => (format!("{{\"word\":\"w{i}\""), Some("not JSON")),
            i if i % 53 == 0 => (format!("{{\"other\":{i}}}"), Some("no key field `word`")),
            i => (format!("{{\"word\":\"w{}\",\"n\":{i}}}", i % 101), None),
        };
        match error {
            Some(error) => bad.push(Bad {
                line: i,
                text: line.clone(),
                error,
            }),
            None => good.push(line.clone()),
        }
        text.push_str(&line);
        text.push('\n');
    }
    (text, good, bad)
}

/// `in.jsonl` (`rate` lines/s) into `out.txt`, its bad lines as `policy`
/// says.
fn job(policy: &str, rate: u64) -> JobFile {
    JobFile::new("letters")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("in", "in.jsonl")
                .format("jsonl")
                .key("word")
                .rate(rate)
                .on_error(policy),
        )
        .sink(Sink::file("out", "out.txt").input("in"))
}

/// [`job`] sending its dead letters to sink `bad`, the file `bad.txt`.
fn dead_lettering(rate: u64) -> JobFile {
    job("{ dead_letter = \"bad\" }", rate).sink(Sink::file("bad", "bad.txt"))
}

/// The dead letters of `dir`'s `bad.txt` against the input's `bad` lines:
/// each once, in input order, saying what was wrong and where, holding
/// the line as read.
fn assert_dead_letters(job: &JobDir, bad: &[Bad]) {
    let letters: Vec<serde_json::Value> = (job.read("bad.txt").lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(letters.len(), bad.len(), "one dead letter per bad line");
    let mut checkpoints = Vec::new();
    for (letter, want) in letters.iter().zip(bad) {
        assert_eq!(letter["value"], want.text.as_str(), "{letter}");
        assert_eq!(letter["node"], "in", "{letter}");
        assert_eq!(letter["kind"], "source", "{letter}");
        assert_eq!(letter["job"], "letters", "{letter}");
        let origin = letter["origin"].as_str().unwrap();
        assert!(
            origin.ends_with(&format!("in.jsonl line {}", want.line)),
            "{letter}"
        );
        let error = letter["error"].as_str().unwrap();
        assert!(error.starts_with(want.error), "{letter}");
        checkpoints.push(letter["checkpoint"].as_u64().unwrap());
    }
    assert!(checkpoints.is_sorted(), "{checkpoints:?}");
}

/// Malformed lines and lines without their key go to the dead-letter
/// sink, each exactly once and in order, through SIGKILLs after
/// checkpoints; the good lines reach `out.txt` exactly once and in order.
#[test]
fn a_sources_bad_lines_go_to_its_dead_letter_sink_exactly_once_through_kills() {
    let (text, good, bad) = input(4000);
    let job = JobDir::new(WEIR, dead_lettering(1500), &[("in.jsonl", &text)]);
    let killed = job.run_through_kills_after_checkpoints(4, seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_eq!(
        job.read("out.txt"),
        good.iter().map(|l| format!("{l}\n")).collect::<String>()
    );
    assert_dead_letters(&job, &bad);
}

/// `skip` drops the bad lines and counts them in the summary; `fail` (the
/// default) stops at the first, naming it; more bad lines between two
/// checkpoints than `max_bad` stop the job, naming the budget.
#[test]
fn skip_counts_fail_stops_and_max_bad_bounds() {
    let (text, good, bad) = input(600);
    let skip = JobDir::new(WEIR, job("\"skip\"", 100_000), &[("in.jsonl", &text)]);
    let out = skip.run(&["--json"]);
    assert!(out.success(), "{}", out.stderr);
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let source = &summary["nodes"][0];
    assert_eq!(source["records_bad"], bad.len(), "{summary}");
    assert_eq!(source["records_out"], good.len(), "{summary}");
    assert_eq!(skip.read("out.txt").lines().count(), good.len());
    assert_has(&out.stderr, "source `in`: bad record skipped: ");

    let fail = JobDir::new(WEIR, job("\"fail\"", 100_000), &[("in.jsonl", &text)]);
    let out = fail.run(&[]);
    assert!(!out.success());
    assert_has(&out.stderr, "source `in`: ");
    assert_has(&out.stderr, "in.jsonl:37: not JSON");

    let bounded = job("\"skip\"", 100_000).source_with("in", |s| s.max_bad(3));
    let bounded = JobDir::new(WEIR, bounded, &[("in.jsonl", &text)]);
    let out = bounded.run(&[]);
    assert!(!out.success());
    assert_has(
        &out.stderr,
        "bad records since its last checkpoint, more than max_bad = 3",
    );
}

/// A Kafka topic with poison messages (not JSON, or without their key
/// field): the job does not stop on them. Each reaches the dead-letter
/// topic once, keyed as it was, naming its partition and offset; the
/// good messages reach `out` once and in order per partition, through
/// SIGKILLs.
#[test]
fn poison_messages_on_kafka_go_to_a_dead_letter_topic_exactly_once() {
    let (_, good, bad) = input(3000);
    let kafka = Kafka::start();
    for topic in ["in", "out", "dlq"] {
        kafka.create_topic(topic, 1);
    }
    let (lines, _, _) = input(3000);
    let keys: Vec<String> = (1..=3000).map(|i| format!("k{i}")).collect();
    let messages: Vec<Outgoing<'_>> = (lines.lines().zip(&keys))
        .map(|(line, key)| (Some(0), Some(key.as_bytes()), line.as_bytes(), None))
        .collect();
    kafka.produce("in", &messages);
    let file = JobFile::new("poisoned")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::kafka("in", &kafka.brokers(), "in")
                .value("bounded", true)
                .format("jsonl")
                .key("word")
                .rate(1500)
                .on_error("{ dead_letter = \"dlq\" }"),
        )
        .sink(Sink::kafka("out", &kafka.brokers(), "out").input("in"))
        .sink(Sink::kafka("dlq", &kafka.brokers(), "dlq"));
    let job = JobDir::new(WEIR, file, &[]);
    let killed = job.run_through_kills_after_checkpoints(3, seed());
    assert!(killed >= 1, "killed {killed} times");
    let out: Vec<String> = kafka
        .read_committed("out")
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(out, good);
    let letters = kafka.read_committed("dlq");
    assert_eq!(letters.len(), bad.len());
    for (m, want) in letters.iter().zip(&bad) {
        let letter: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
        assert_eq!(letter["value"], want.text.as_str(), "{letter}");
        let key = format!("k{}", want.line);
        assert_eq!(m.key.as_deref(), Some(key.as_bytes()), "{letter}");
        assert_eq!(letter["key"], key.as_str(), "{letter}");
        let origin = format!("topic in partition 0 offset {}", want.line - 1);
        assert_eq!(letter["origin"], origin.as_str(), "{letter}");
        assert!(
            letter["error"].as_str().unwrap().starts_with(want.error),
            "{letter}"
        );
    }
    // Read back from the topic: one group per kind, as many as the input
    // holds of each.
    let v = weir_tests::letters::listed(&job, &[]);
    let sink = &v["sinks"][0];
    assert_eq!(
        sink["from"],
        format!("topic `dlq` at {}", kafka.brokers()),
        "{v:#}"
    );
    assert_eq!(sink["letters"], bad.len(), "{v:#}");
    let counted: std::collections::BTreeMap<&str, u64> =
        (sink["groups"].as_array().unwrap().iter())
            .map(|g| {
                (
                    g["error_kind"].as_str().unwrap(),
                    g["count"].as_u64().unwrap(),
                )
            })
            .collect();
    let unreadable = bad.iter().filter(|b| b.error == "not JSON").count() as u64;
    let no_key = bad.len() as u64 - unreadable;
    assert_eq!(
        counted,
        [("no-key", no_key), ("unreadable", unreadable)].into(),
        "{v:#}"
    );
}

/// `n` lines `w<i>`, every 41st `poison` instead (the guest traps on it);
/// the input and its line numbers of `poison`.
fn poisoned_lines(n: u64) -> (String, Vec<u64>) {
    let mut text = String::new();
    let mut bad = Vec::new();
    for i in 1..=n {
        match i % 41 == 0 {
            true => {
                text.push_str("poison\n");
                bad.push(i);
            }
            false => text.push_str(&format!("w{i}\n")),
        }
    }
    (text, bad)
}

/// `in.txt` (`rate` lines/s) through `upstream` operators, then the guest
/// that traps on `poison`, its bad records to sink `bad`; no restart
/// strategy: `on_error` alone replays to find them.
fn trapping(upstream: Option<Operator>, rate: u64) -> JobFile {
    let mut job = JobFile::new("trapping")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "in.txt").rate(rate));
    let input = match upstream {
        Some(op) => {
            let id = op.id();
            job = job.operator(op);
            id
        }
        None => "in".to_owned(),
    };
    job.operator(
        Operator::new("poison", plugins::GUEST_POISON)
            .inputs(&[&input])
            .on_error("{ dead_letter = \"bad\" }"),
    )
    .sink(Sink::file("out", "out.txt").input("poison"))
    .sink(Sink::file("bad", "bad.txt"))
}

/// The dead letters in `bad.txt`: one per poisoned line, in order, each
/// naming the operator, its plugin, and the line it came from.
fn assert_operator_letters(job: &JobDir, bad: &[u64]) {
    let letters: Vec<serde_json::Value> = (job.read("bad.txt").lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lines: Vec<u64> = (letters.iter())
        .map(|l| {
            let origin = l["origin"].as_str().unwrap();
            let line = origin
                .split("line ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            line.parse().unwrap()
        })
        .collect();
    assert_eq!(lines, bad, "{letters:?}");
    for l in &letters {
        assert_eq!(
            (l["kind"].as_str(), l["node"].as_str()),
            (Some("operator"), Some("poison")),
            "{l}"
        );
        assert_eq!(l["value"], "poison", "{l}");
        assert_eq!(l["plugin"]["name"], "poison", "{l}");
        assert_eq!(
            l["plugin"]["sha256"].as_str().map(str::len),
            Some(64),
            "{l}"
        );
        assert_has(l["error"].as_str().unwrap(), "poison: the record `poison`");
        assert_has(l["origin"].as_str().unwrap(), "of source `in`");
    }
}

/// A plugin that traps on some records, with `on_error` sending them to
/// dead letters: replays find each, and the job runs to its end through
/// SIGKILLs with every other record exactly once and in order, and each
/// poisoned one once in the dead letters.
#[test]
fn records_a_plugin_traps_on_are_found_and_dead_lettered_exactly_once() {
    let (text, bad) = poisoned_lines(3000);
    let job = JobDir::new(WEIR, trapping(None, 1500), &[("in.txt", &text)]);
    // The plugin's own panics are in the log: only the host's must not be.
    let mut rng = XorShift(seed());
    let mut killed = 0;
    while killed < 3 && job.kill_after_a_checkpoint(&mut rng) {
        killed += 1;
    }
    let stderr = job.assert_resumes();
    assert_lacks(&stderr, "internal error");
    let good: String = (text.lines())
        .filter(|l| *l != "poison")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(job.read("out.txt"), good);
    assert_operator_letters(&job, &bad);
}

/// When one source record became several records (a line split into
/// words) and the plugin traps on one of them, the replay gives them to
/// the plugin one call each to find it: the words before and after it
/// take effect once, only it goes to the dead letters.
#[test]
fn the_bad_one_of_the_records_a_source_record_became_is_found() {
    let lines: Vec<String> = (1..=400)
        .map(|i| match i % 50 == 0 {
            true => format!("a{i} poison b{i}"),
            false => format!("a{i} b{i}"),
        })
        .collect();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let split = Operator::new("split", plugins::SPLIT).inputs(&["in"]);
    let job = JobDir::new(WEIR, trapping(Some(split), 100_000), &[("in.txt", &text)]);
    let out = job.run(&["--json"]);
    assert!(out.success(), "{}", out.stderr);
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let nodes = summary["nodes"].as_array().unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    // Sources (with the replay source of poison's dead letters) first.
    assert_eq!(
        ids,
        ["in", "replay:poison", "split", "poison", "out", "bad"]
    );
    let poison = &nodes[3];
    assert_eq!(poison["records_bad"].as_u64(), Some(8), "{poison}");
    let words: String = (lines.iter())
        .flat_map(|l| l.split(' '))
        .filter(|w| *w != "poison")
        .map(|w| format!("{w}\n"))
        .collect();
    assert_eq!(job.read("out.txt"), words);
    let bad: Vec<u64> = (1..=400).filter(|i| i % 50 == 0).collect();
    assert_operator_letters(&job, &bad);
    assert_has(
        &out.stderr,
        "giving its records to the plugin one call each to find it",
    );
}

/// The golden reconcile job with side A's amount not a number on some
/// rows: the plugin returns `invalid-input` for them. With `on_error`
/// they go to the dead letters, each once, and the output is the
/// reconciliation of the orders without those rows, computed from them.
#[test]
fn records_a_plugin_calls_invalid_go_to_the_dead_letters() {
    refused_orders_go_to_the_dead_letters(Path::new(plugins::RECONCILE), None);
}

/// [`records_a_plugin_calls_invalid_go_to_the_dead_letters`] with the
/// sources throttled, so the replays that find each bad row start from
/// checkpoints taken in the middle of the CSV files: the reopened readers
/// must name the rows' real lines, or a good row is taken for a bad one.
#[test]
fn records_a_plugin_calls_invalid_are_found_from_checkpoints_mid_file() {
    refused_orders_go_to_the_dead_letters(Path::new(plugins::RECONCILE), Some(1500));
}

/// [`records_a_plugin_calls_invalid_go_to_the_dead_letters`] with the
/// Python `reconcile`, which raises `InvalidInput` for a batch holding
/// such a row.
#[test]
fn records_a_python_plugin_raises_on_go_to_the_dead_letters() {
    let test = "records_a_python_plugin_raises_on_go_to_the_dead_letters";
    match polyglot::component(polyglot::lang("python"), "reconcile") {
        Ok(build) => refused_orders_go_to_the_dead_letters(&build, None),
        Err(reason) => polyglot::skip(test, &reason),
    }
}

/// Runs the golden reconcile job with `plugin` on orders some of whose
/// amounts are not numbers, the operator's bad records dead-lettered, its
/// sources at `rate` records a second (unthrottled without).
fn refused_orders_go_to_the_dead_letters(plugin: &Path, rate: Option<u64>) {
    let mut orders = Orders::generate(&mut XorShift(seed()), 800);
    let mut bad = std::collections::BTreeSet::new();
    for (i, row) in orders.a.iter_mut().enumerate() {
        if i % 97 == 13 {
            row.1 = "n/a".into();
            bad.insert(row.0.clone());
        }
    }
    let mut file = jobs::reconcile(plugin).checkpoint(Checkpoint::every("100ms").retain(1000));
    for id in ["payments", "bank"] {
        file = file.source_with(id, |s| s.throttle(rate));
    }
    let file = file
        .operator_with("reconcile", |o| o.on_error("{ dead_letter = \"rejects\" }"))
        .sink(Sink::file("rejects", "out/rejects.txt"));
    let job = orders.job_of(WEIR, file);
    let out = job.run(&[]);
    assert!(out.success(), "{}", out.stderr);
    let clean = Orders {
        a: orders
            .a
            .iter()
            .filter(|(_, v)| v != "n/a")
            .cloned()
            .collect(),
        b: orders.b.clone(),
    };
    let got = job.lines("out/reconcile.jsonl");
    assert_same_json_lines(&got, &clean.reference(), "reconcile without the bad rows");
    let mut rejected = std::collections::BTreeSet::new();
    for line in job.read("out/rejects.txt").lines() {
        let letter: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_has(
            letter["error"].as_str().unwrap(),
            "`amount` is not a number",
        );
        assert_eq!(letter["node"], "reconcile", "{letter}");
        assert_eq!(letter["port"], "a", "the input port it came on: {letter}");
        assert_has(letter["origin"].as_str().unwrap(), "of source `payments`");
        let key = letter["key"].as_str().unwrap().to_owned();
        assert!(rejected.insert(key), "twice: {letter}");
    }
    assert_eq!(rejected, bad);
}

/// `n` lines `w<i>`, every 29th `bad-<i>` instead (the `picky` guest
/// refuses them); the input, its good lines and its bad ones.
fn refusable_lines(n: u64) -> (String, Vec<String>, Vec<String>) {
    let (mut text, mut good, mut bad) = (String::new(), Vec::new(), Vec::new());
    for i in 1..=n {
        let line = match i % 29 == 0 {
            true => format!("bad-{i}"),
            false => format!("w{i}"),
        };
        match i % 29 == 0 {
            true => bad.push(line.clone()),
            false => good.push(line.clone()),
        }
        text.push_str(&line);
        text.push('\n');
    }
    (text, good, bad)
}

/// `in.txt` (`rate` lines/s) through the `picky` guest, which refuses
/// (`reject`) the records starting with `bad`, with `on_error` (if any).
fn refusing(on_error: Option<&str>, rate: u64) -> JobFile {
    let mut picky = Operator::new("picky", plugins::GUEST_PICKY).inputs(&["in"]);
    if let Some(policy) = on_error {
        picky = picky.on_error(policy);
    }
    JobFile::new("refusing")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "in.txt").rate(rate))
        .operator(picky)
        .sink(Sink::file("out", "out.txt").input("picky"))
}

/// A plugin that refuses its bad records itself (`reject`): each goes to
/// the dead letters once, with no replay to find it, while the rest of
/// its batch takes effect, through SIGKILLs; the summary counts them by
/// kind.
#[test]
fn records_a_plugin_refuses_are_dead_lettered_without_a_replay_through_kills() {
    let (text, good, bad) = refusable_lines(3000);
    let file = refusing(Some("{ dead_letter = \"bad\" }"), 1500).sink(Sink::file("bad", "bad.txt"));
    let job = JobDir::new(WEIR, file, &[("in.txt", &text)]);
    let (killed, stderr) = job.through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_lacks(&stderr, "replaying from the last complete checkpoint");
    assert_eq!(
        job.read("out.txt"),
        good.iter().map(|l| format!("{l}\n")).collect::<String>()
    );
    let letters = weir_tests::letters::parse(&job.read("bad.txt"));
    let values = weir_tests::letters::values(&letters);
    assert_eq!(values, bad, "each refused record once, in order");
    assert_listed(&job, bad.len());
    for l in &letters {
        assert_eq!(
            (l["node"].as_str(), l["error_kind"].as_str()),
            (Some("picky"), Some("invalid-input")),
            "{l}"
        );
        assert_has(l["error"].as_str().unwrap(), "refused: record ");
        assert_eq!(l["port"], "in", "{l}");
        assert_has(l["origin"].as_str().unwrap(), "of source `in`");
    }
}

/// With the default `on_error = "fail"`, the first record the plugin
/// refuses fails the job, naming it; `skip` counts them by kind in the
/// summary.
#[test]
fn a_refused_record_fails_the_job_by_default_and_skip_counts_them_by_kind() {
    let (text, good, bad) = refusable_lines(300);
    let failing = JobDir::new(WEIR, refusing(None, 100_000), &[("in.txt", &text)]);
    let out = failing.run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    let line = out.error_line();
    assert_has(
        line,
        "operator `picky[0]`: `process` returned an error: invalid input: record ",
    );
    assert_has(line, "refused: record ");
    assert_has(line, "(key `bad-29`)");

    let skipping = JobDir::new(
        WEIR,
        refusing(Some("\"skip\""), 100_000),
        &[("in.txt", &text)],
    );
    let out = skipping.run(&["--json"]);
    assert!(out.success(), "{}", out.stderr);
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let picky = &summary["nodes"][1];
    assert_eq!(picky["records_bad"], bad.len(), "{summary}");
    assert_eq!(
        picky["records_bad_by_kind"],
        serde_json::json!({"invalid-input": bad.len()}),
        "{summary}"
    );
    assert_eq!(picky["records_out"], good.len(), "{summary}");
}

/// `weir deadletter ls` of the [`refusing`] job: sink `bad` holds
/// `letters` dead letters, all of one shape, met by `picky`; the text
/// says so too.
fn assert_listed(job: &JobDir, letters: usize) {
    let ls = |args: &[&str]| Outcome::of(&mut job.command_of(&["deadletter", "ls"], args));
    let v = weir_tests::letters::listed(job, &[]);
    let sink = &v["sinks"][0];
    assert_eq!(
        (sink["sink"].as_str(), sink["letters"].as_u64()),
        (Some("bad"), Some(letters as u64)),
        "{v:#}"
    );
    let groups = sink["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "one shape: {v:#}");
    let g = &groups[0];
    assert_eq!(
        (
            g["node"].as_str(),
            g["kind"].as_str(),
            g["error_kind"].as_str()
        ),
        (Some("picky"), Some("operator"), Some("invalid-input")),
        "{g}"
    );
    assert_eq!(g["count"], letters, "{g}");
    assert_has(
        g["error"].as_str().unwrap(),
        "record N of the batch (key `bad-N`) refused: record N is bad",
    );
    assert_has(g["first"]["origin"].as_str().unwrap(), "of source `in`");
    let text = ls(&[]);
    assert!(text.success(), "{}", text.stderr);
    assert_has(&text.stdout, "sink `bad` (");
    assert_has(&text.stdout, &format!(": {letters} dead letter(s)"));
    assert_has(&text.stdout, "operator `picky`  invalid-input");
    let wrong = ls(&["--sink", "out"]);
    assert_eq!(wrong.code(), Some(1), "{}", wrong.stderr);
    assert_has(
        wrong.error_line(),
        "sink `out` takes no dead letters (those that do: bad)",
    );
}
