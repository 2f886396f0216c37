//! `weir checkpoints` and `weir state` read a state dir without loading any
//! plugin, as text and with `--json`.

use std::ffi::OsStr;

use serde_json::Value;
use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use weir_tests::jobs::{count_words, wordcount};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn finished_job() -> JobDir {
    let words: String = (0..1500)
        .map(|i| format!("w{}\n", i % 3))
        .chain(["caf\u{e9}\n".to_string()])
        .collect();
    let checkpoint = Checkpoint::every("50ms").retain(1000);
    let j = JobDir::new(
        WEIR,
        count_words("counted", checkpoint, 3000, 2),
        &[("words.txt", &words)],
    );
    j.run_ok(&[]);
    j
}

/// `weir VERB <state dir of j> ARGS`: whether it succeeded, stdout, stderr.
fn weir(j: &JobDir, verb: &str, args: &[&str]) -> (bool, String, String) {
    let out = j.on_state(verb, args);
    (out.success(), out.stdout, out.stderr)
}

#[test]
fn checkpoints_lists_complete_checkpoints_as_text_and_json() {
    let j = finished_job();
    let (ok, text, err) = weir(&j, "checkpoints", &[]);
    assert!(ok, "{err}");
    assert!(text.starts_with("job `counted`: "), "{text}");
    assert_has_all(&text, &["(final)", "source   words: offset {\"byte\":"]);
    assert_has(
        &text,
        "operator count: word-count 0.1.0 (state version 1, parallelism 2, sha256 ",
    );

    let (ok, json, err) = weir(&j, "checkpoints", &["--json"]);
    assert!(ok, "{err}");
    let list: Vec<Value> = serde_json::from_str(&json).unwrap();
    assert!(list.len() >= 2, "{json}");
    let ids: Vec<u64> = list.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ascending ids: {ids:?}"
    );
    let last = list.last().unwrap();
    let mut keys: Vec<&str> = last
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "alignment_ms",
            "bytes_written",
            "duration_ms",
            "final_checkpoint",
            "id",
            "inflight_bytes",
            "job",
            "key_groups",
            "operators",
            "pause_ms",
            "recorded_bytes",
            "sink_types",
            "sinks",
            "sources",
            "started_at_ms",
            "state_keys",
            "time",
            "unaligned"
        ]
    );
    assert_eq!(last["final_checkpoint"], true);
    assert_eq!(
        (
            &last["unaligned"],
            &last["inflight_bytes"],
            &last["recorded_bytes"]
        ),
        (&false.into(), &0.into(), &0.into())
    );
    assert_eq!(last["sources"]["words"]["records"], 1501);
    assert_eq!(last["operators"]["count"]["plugin_name"], "word-count");
    assert_eq!(
        last["operators"]["count"]["sha256"].as_str().unwrap().len(),
        64
    );
    assert!(last["time"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn state_prints_json_lines_and_filters_by_key_and_checkpoint() {
    let j = finished_job();
    let (ok, text, err) = weir(&j, "state", &["--operator", "count"]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines.contains(&serde_json::json!({"key": "w0", "state": "count", "value": 500})),
        "{text}"
    );
    assert!(
        lines.contains(&serde_json::json!({"key": "caf\u{e9}", "state": "count", "value": 1})),
        "{text}"
    );

    let (ok, text, _) = weir(&j, "state", &["--operator", "count", "--key", "w1"]);
    assert!(ok);
    assert_eq!(text.trim(), r#"{"key":"w1","state":"count","value":500}"#);

    // An earlier checkpoint holds the counts of the records before its
    // source offset.
    let (_, json, _) = weir(&j, "checkpoints", &["--json"]);
    let list: Vec<Value> = serde_json::from_str(&json).unwrap();
    let early = list
        .iter()
        .find(|c| c["sources"]["words"]["records"].as_u64().unwrap() < 1500)
        .unwrap_or_else(|| panic!("no checkpoint before the end of input: {json}"));
    let records = early["sources"]["words"]["records"].as_u64().unwrap();
    let id = early["id"].as_u64().unwrap().to_string();
    let (ok, doc, err) = weir(
        &j,
        "state",
        &["--operator", "count", "--checkpoint", &id, "--json"],
    );
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["checkpoint"].as_u64().unwrap().to_string(), id);
    assert_eq!(doc["operator"], "count");
    let entries = doc["entries"].as_array().unwrap();
    assert_eq!(entries.len() as u64, records.min(3), "{doc}");
    for e in entries {
        let k: u64 = e["key"].as_str().unwrap()[1..2].parse().unwrap();
        // Line i holds word w(i % 3).
        let expected = (0..records).filter(|i| i % 3 == k).count() as u64;
        assert_eq!(
            e["value"].as_u64().unwrap(),
            expected,
            "{e} at {records} records"
        );
        assert_eq!(e["value_encoding"], "json");
        assert_eq!(e["key_encoding"], "utf8");
        assert!(e["instance"].as_u64().unwrap() < 2);
    }
}

#[test]
fn state_errors_are_clear() {
    let j = finished_job();
    let (ok, _, err) = weir(&j, "state", &["--operator", "nope"]);
    assert!(
        !ok && err.contains("no operator `nope`") && err.contains("count"),
        "{err}"
    );
    let (ok, _, err) = weir(
        &j,
        "state",
        &["--operator", "count", "--checkpoint", "99999"],
    );
    assert!(!ok && err.contains("no complete checkpoint 99999"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let out = WEIR.output(["checkpoints", empty.path().to_str().unwrap()]);
    let (ok, err) = (out.success(), out.stderr);
    assert!(!ok && err.contains("no checkpoints in"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `weir checkpoints` and `weir state` take a job file or a job folder for
/// the job's state directory, as well as the state directory itself.
#[test]
fn checkpoints_and_state_take_the_job_file_or_its_folder() {
    let j = finished_job();
    let (file, state) = (j.path().join("job.toml"), j.state_dir());
    for arg in [file.as_os_str(), j.path().as_os_str(), state.as_os_str()] {
        let out = WEIR.ok([OsStr::new("checkpoints"), arg]);
        assert!(out.stdout.starts_with("job `counted`: "), "{}", out.stdout);
        let args = ["--operator", "count", "--key", "w1"].map(OsStr::new);
        let out = WEIR.ok([OsStr::new("state"), arg].into_iter().chain(args));
        assert_eq!(
            out.stdout.trim(),
            r#"{"key":"w1","state":"count","value":500}"#
        );
    }
    // `weir swap` looks for the running job in the job's state directory.
    let swap = format!("count={}", plugins::WORD_COUNT_V2);
    let out = WEIR.output([OsStr::new("swap"), file.as_os_str(), OsStr::new(&swap)]);
    let said = format!("no running job on {}", state.display());
    assert!(
        !out.success() && out.stderr.contains(&said),
        "{}",
        out.stderr
    );
}

/// A folder without checkpoints says what to pass instead, and doing so
/// works; no hint names a flag the verb does not have.
#[test]
fn a_folder_without_checkpoints_says_what_to_pass() {
    let j = finished_job();
    let bare = j.path().join("state"); // the parent of the default state/counted
    for (verb, args) in [
        ("checkpoints", &[][..]),
        ("state", &["--operator", "count"][..]),
    ] {
        let args = args.iter().map(OsStr::new);
        let on = |dir: &std::path::Path| {
            let verb_dir = [OsStr::new(verb), dir.as_os_str()];
            weir_tests::cli::Outcome::of(
                &mut WEIR.command(verb_dir.into_iter().chain(args.clone())),
            )
        };
        let out = on(&bare);
        out.assert_one_line_error(&[
            "has no checkpoints.redb",
            "pass the state directory of a job that has run, or its job file",
        ]);
        assert_lacks(&out.stderr, "--state-dir");
        on(&j.path().join("job.toml")).assert_ok();
    }
}

/// `weir state` says why it prints nothing, with exit status 3.
#[test]
fn state_of_an_operator_without_keyed_state_says_so() {
    let split = JobDir::new(
        WEIR,
        wordcount(plugins::WORD_COUNT, None),
        &[("input.txt", "a b\nc\n")],
    );
    split.run_ok(&[]);
    let out = split.on_state("state", &["--operator", "split"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let said = ": it has no keyed state and no snapshot";
    assert_has_all(
        &out.stderr,
        &["operator `split` is stateless at checkpoint ", said],
    );
    let out = split.on_state("state", &["--operator", "count", "--key", "zzz"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    let said = " (3 entries); drop --key to list them";
    assert_has_all(
        &out.stderr,
        &["operator `count` has no key \"zzz\" at checkpoint ", said],
    );

    let dedupe = JobFile::new("dedupe")
        .checkpoint(Checkpoint::final_only())
        .source(
            Source::file("events", "events.jsonl")
                .format("jsonl")
                .key("id"),
        )
        .operator(Operator::new("dedupe", plugins::DEDUPE).inputs(&["events"]))
        .sink(Sink::file("out", "out.jsonl").input("dedupe"));
    let events = "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"a\"}\n";
    let dedupe = JobDir::new(WEIR, dedupe, &[("events.jsonl", events)]);
    dedupe.run_ok(&[]);
    let out = dedupe.on_state("state", &["--operator", "dedupe"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    assert_has_all(
        &out.stderr,
        &[
            "operator `dedupe` keeps only a snapshot (",
            " bytes at checkpoint 1); it has no keyed state to print",
        ],
    );
}

/// word-count-v2 keeps 8-byte little-endian counters: shown as hex by
/// default, and in the encoding `--format` asks for.
#[test]
fn binary_values_are_shown_as_hex_or_in_the_format_asked_for() {
    let v2 = count_words("counted", Checkpoint::final_only(), 1_000_000, 2)
        .operator_with("count", |o| o.plugin(plugins::WORD_COUNT_V2));
    let words: String = (0..300).map(|i| format!("w{}\n", i % 3)).collect();
    let j = JobDir::new(WEIR, v2, &[("words.txt", &words)]);
    j.run_ok(&[]);
    let value = |args: &[&str]| {
        let out = j.on_state(
            "state",
            &[&["--operator", "count", "--key", "w1"], args].concat(),
        );
        let line: Value = serde_json::from_str(out.assert_ok().stdout.trim()).unwrap();
        line["value"].clone()
    };
    // 100 = 0x64, little-endian.
    assert_eq!(value(&[]), serde_json::json!({"hex": "6400000000000000"}));
    assert_eq!(value(&["--format", "hex"]), "6400000000000000");
    assert_eq!(value(&["--format", "base64"]), "ZAAAAAAAAAA=");
    assert_eq!(
        value(&["--format", "utf8"]),
        "d\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}"
    );
    let out = j.on_state("state", &["--operator", "count", "--key", "w1", "--json"]);
    let doc: Value = serde_json::from_str(&out.assert_ok().stdout).unwrap();
    assert_eq!(doc["entries"][0]["value_encoding"], "hex");
    let out = j.on_state("state", &["--operator", "count", "--format", "octal"]);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
}

/// reconcile keeps its state as row values (state version 2): `weir state`
/// shows each as the JSON object of its fields, says `row` with `--json`,
/// and gives the bytes (0xFF first) with `--format hex`.
#[test]
fn row_values_are_shown_as_the_json_of_their_fields() {
    let job = weir_tests::jobs::reconcile(plugins::RECONCILE)
        .checkpoint(Checkpoint::final_only())
        .operator_with("reconcile", |o| o.parallelism(1));
    let payments = "order_no,amount,channel\nboth,12.50,web\nonly-a,-0.25,shop\n";
    let bank = "order_no,amount,state\nboth,12.5,ok\nonly-b,7,ok\n";
    let j = JobDir::new(WEIR, job, &[("payments.csv", payments), ("bank.csv", bank)]);
    j.run_ok(&[]);
    let out = j.on_state("state", &["--operator", "reconcile"]);
    let lines: Vec<Value> = (out.assert_ok().stdout.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every key is done at the end (one-sided ones at `finish`), and a done
    // key keeps no amounts.
    let done = serde_json::json!({"done": true});
    let want: Vec<Value> = ["both", "only-a", "only-b"]
        .iter()
        .map(|k| serde_json::json!({"key": k, "state": "rc", "value": done}))
        .collect();
    assert_eq!(lines, want);
    let out = j.on_state(
        "state",
        &["--operator", "reconcile", "--key", "both", "--json"],
    );
    let doc: Value = serde_json::from_str(&out.assert_ok().stdout).unwrap();
    assert_eq!(doc["entries"][0]["value_encoding"], "row");
    assert_eq!(doc["entries"][0]["value"], done);
    let out = j.on_state(
        "state",
        &[
            "--operator",
            "reconcile",
            "--key",
            "both",
            "--format",
            "hex",
        ],
    );
    let line: Value = serde_json::from_str(out.assert_ok().stdout.trim()).unwrap();
    // 0xFF, then field `done` (type 2, true; name of 4 bytes).
    assert_eq!(line["value"], "ff0204646f6e65");
}

/// `name`: a generator of `count` records over 3 words (at most `rate` per
/// second), operator `probe` (timer-probe, 2 instances: per key one
/// event-time timer at 2023-11-14T23:13:20Z and one processing-time timer
/// at 2100-01-01T00:00:00Z) and a file sink `out.txt` of the records
/// passed through and `fired <key>` per event-time timer.
fn timer_job(name: &str, count: u64, rate: u64) -> JobDir {
    let job = JobFile::new(name)
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            // Every record at 2023-11-14T22:13:20Z: one timer per key.
            Source::generator("gen", count)
                .words(3)
                .rate(rate)
                .value("start", 1_700_000_000_000i64)
                .string("step", "0s"),
        )
        .operator(
            Operator::new("probe", plugins::GUEST_TIMER_PROBE)
                .inputs(&["gen"])
                .parallelism(2),
        )
        .sink(Sink::file("out", "out.txt").input("probe"));
    JobDir::new(WEIR, job, &[])
}

/// The keys of the timers of `domain` in a `weir state --timers --json`
/// document of one operator, and the instances' watermarks.
fn timer_keys(doc: &Value, domain: &str) -> (Vec<String>, Vec<Value>) {
    let instances = doc["operators"][0]["instances"].as_array().unwrap();
    let mut keys = Vec::new();
    for i in instances {
        for t in i["timers"].as_array().unwrap() {
            if t["domain"] == domain {
                assert_eq!(t["key_encoding"], "utf8", "{t}");
                keys.push(t["key"].as_str().unwrap().to_string());
            }
        }
    }
    keys.sort();
    let watermarks = instances.iter().map(|i| i["watermark"].clone()).collect();
    (keys, watermarks)
}

/// At the end of input every event-time timer fires; the processing-time
/// ones stay pending in the final checkpoint, listed per instance with the
/// watermark, the end of time.
#[test]
fn state_timers_lists_the_pending_timers_of_a_finished_job() {
    let j = timer_job("timers", 300, 1_000_000);
    j.run_ok(&[]);
    let out = j.read("out.txt");
    let mut fired: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("fired "))
        .map(String::from)
        .collect();
    fired.sort();
    assert_eq!(fired.len(), 3, "one event-time timer per word fired: {out}");

    let text = j
        .on_state("state", &["--timers", "--operator", "probe"])
        .assert_ok()
        .stdout
        .clone();
    assert!(
        text.starts_with("operator `probe` at checkpoint ")
            && text
                .lines()
                .next()
                .unwrap()
                .ends_with(": 3 pending timer(s)"),
        "{text}"
    );
    assert_has(&text, "  instance 0: watermark end, ");
    assert_has(&text, "  instance 1: watermark end, ");
    for key in &fired {
        let line = format!(
            "    processing-time         4102444800000  2100-01-01T00:00:00.000Z  key \"{key}\""
        );
        assert!(text.contains(&line), "{line:?} missing:\n{text}");
    }
    assert_lacks(&text, "event-time");

    let out = j.on_state("state", &["--timers", "--operator", "probe", "--json"]);
    let doc: Value = serde_json::from_str(&out.assert_ok().stdout).unwrap();
    let (keys, watermarks) = timer_keys(&doc, "processing-time");
    assert_eq!(keys, fired, "{doc}");
    let end = Value::from(i64::MAX);
    assert_eq!(watermarks, [end.clone(), end], "{doc}");
    let first = &doc["operators"][0]["instances"][0];
    assert_eq!(first["watermark_utc"], "end", "{doc}");
    let t = doc["operators"][0]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["timers"].as_array().unwrap())
        .next()
        .unwrap();
    assert_eq!(t["time"], 4_102_444_800_000i64);
    assert_eq!(t["time_utc"], "2100-01-01T00:00:00.000Z");

    // Without --operator: every operator with timers; the same document.
    let all = j.on_state("state", &["--timers", "--json"]);
    let all: Value = serde_json::from_str(&all.assert_ok().stdout).unwrap();
    assert_eq!(all, doc);

    // The operator's keyed state is empty: `weir state` points at --timers.
    let out = j.on_state("state", &["--operator", "probe"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    let said = "has no keyed state at checkpoint ";
    let hint = ", only 3 pending timer(s); add --timers to list them";
    assert_has_all(&out.stderr, &[said, hint]);
}

/// A job stopped mid-input (Ctrl-C) keeps its event-time timers pending in
/// the stop checkpoint: one per key it has seen, as many as processing-time
/// ones, the keys of exactly the output the checkpoint committed.
#[test]
fn state_timers_lists_pending_event_time_timers_of_a_stopped_job() {
    let j = timer_job("interrupted", 1_000_000, 300);
    let out = j.run_interrupted(&[], "out.txt");
    assert!(out.success(), "{}", out.stderr);
    assert_has(&out.stderr, "job `interrupted` stopped in ");
    let mut seen: Vec<String> = j.lines("out.txt").into_keys().collect();
    seen.sort();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|l| !l.starts_with("fired ")), "{seen:?}");

    let out = j.on_state("state", &["--timers", "--operator", "probe", "--json"]);
    let doc: Value = serde_json::from_str(&out.assert_ok().stdout).unwrap();
    let (event, watermarks) = timer_keys(&doc, "event-time");
    let (processing, _) = timer_keys(&doc, "processing-time");
    assert_eq!(event, seen, "{doc}");
    assert_eq!(processing, seen, "{doc}");
    // Records without timestamps: the sources sent no watermark yet.
    assert_eq!(watermarks, [Value::Null, Value::Null], "{doc}");
    for i in doc["operators"][0]["instances"].as_array().unwrap() {
        assert_eq!(i["watermark_utc"], Value::Null, "{doc}");
        for t in i["timers"].as_array().unwrap() {
            if t["domain"] == "event-time" {
                assert_eq!(t["time"], 1_700_003_600_000i64, "{t}");
                assert_eq!(t["time_utc"], "2023-11-14T23:13:20.000Z", "{t}");
            }
        }
    }
    let text = j
        .on_state("state", &["--timers"])
        .assert_ok()
        .stdout
        .clone();
    assert_has(&text, ": watermark none, ");
    let line = "    event-time              1700003600000  2023-11-14T23:13:20.000Z  key \"";
    assert_eq!(text.matches(line).count(), seen.len(), "{text}");

    // --key keeps one key's timers.
    let key = &seen[0];
    let out = j.on_state("state", &["--timers", "--key", key, "--json"]);
    let one: Value = serde_json::from_str(&out.assert_ok().stdout).unwrap();
    assert_eq!(timer_keys(&one, "event-time").0, [key.as_str()], "{one}");
    assert_eq!(timer_keys(&one, "processing-time").0, [key.as_str()]);
}

/// Timers are stored under `<operator>#timers`, which is no operator:
/// neither `weir checkpoints` nor `weir state` shows it as one, and the
/// errors of `--timers` say what to do.
#[test]
fn timers_are_not_an_operator_and_timer_errors_are_clear() {
    let j = timer_job("hidden", 300, 1_000_000);
    j.run_ok(&[]);
    let text = j.checkpoints(&[]);
    let json = j.checkpoints(&["--json"]);
    for listing in [&text, &json] {
        assert_lacks(listing, "#timers");
    }
    let list: Vec<Value> = serde_json::from_str(&json).unwrap();
    let ops: Vec<&String> = list[0]["operators"].as_object().unwrap().keys().collect();
    assert_eq!(ops, ["probe"]);

    for args in [
        &["--timers", "--operator", "nope"][..],
        &["--operator", "probe#timers"][..],
        &["--timers", "--operator", "probe#timers"][..],
    ] {
        j.on_state("state", args)
            .assert_one_line_error(&["has no operator `", "(it has: probe)"]);
    }
    let out = j.on_state("state", &["--timers", "--key", "zzz"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    let said = "no operator has pending timers for key \"zzz\" at checkpoint ";
    assert_has_all(&out.stderr, &[said, "drop --key"]);
    // An operator without timers (word-count) at a final checkpoint.
    let words = JobDir::new(
        WEIR,
        count_words("plain", Checkpoint::final_only(), 1_000_000, 1),
        &[("words.txt", "a\nb\n")],
    );
    words.run_ok(&[]);
    let out = words.on_state("state", &["--timers", "--operator", "count"]);
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    assert_has(
        &out.stderr,
        "operator `count` has no pending timers at checkpoint 1",
    );
    let out = words.on_state("state", &["--timers", "--format", "hex"]);
    assert_eq!(
        out.code(),
        Some(2),
        "--format is for values: {}",
        out.stderr
    );
    let out = words.on_state("state", &[]);
    assert_eq!(
        out.code(),
        Some(2),
        "--operator without --timers: {}",
        out.stderr
    );
}
