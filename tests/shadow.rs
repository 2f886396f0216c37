//! Recorded input (`record_inputs`), `weir replay`, `weir shadow` and
//! `weir swap --shadow`, on a word count whose oracle is computed from its
//! input words.

use std::collections::BTreeMap;
use std::process::Stdio;

use serde_json::Value;
use weir::failpoint::ENV as FAILPOINTS;
use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator};
use weir_tests::jobs::count_words;
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::servers::S3;
use weir_tests::text::assert_has;
use weir_tests::windows::{clicks, windows_job};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `n` words of 23 distinct ones, a quarter of which start with `x`.
fn words(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match (i * 7) % 23 {
            j if j % 4 == 0 => format!("x{j}"),
            j => format!("w{j}"),
        })
        .collect()
}

/// The word count over `words` by `parallelism` instances, checkpointed
/// every 50 ms, recording `keep` of its input.
fn recorded_job(name: &str, words: &[String], rate: u64, parallelism: u32, keep: &str) -> JobDir {
    recorded_job_under(
        Checkpoint::every("50ms"),
        name,
        words,
        rate,
        parallelism,
        keep,
    )
}

/// [`recorded_job`] under `checkpoint`.
fn recorded_job_under(
    checkpoint: Checkpoint,
    name: &str,
    words: &[String],
    rate: u64,
    parallelism: u32,
    keep: &str,
) -> JobDir {
    let job: JobFile = count_words(name, checkpoint, rate, parallelism)
        .operator_with("count", |o: Operator| o.string("record_inputs", keep));
    let text: String = words.iter().map(|w| format!("{w}\n")).collect();
    JobDir::new(WEIR, job, &[("words.txt", &text)])
}

/// The checkpoints of `j`'s store, as `weir checkpoints --json` lists them.
fn checkpoints(j: &JobDir) -> Vec<Value> {
    serde_json::from_str(&j.checkpoints(&["--json"])).unwrap()
}

/// `weir VERB job.toml ARGS --json`: exit code and the JSON document.
fn json(j: &JobDir, verb: &str, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = j.weir(verb, &all);
    let doc = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("weir {verb}: {e}: {}{}", out.stdout, out.stderr));
    (out.code(), doc)
}

#[test]
fn every_recorded_epoch_replays_byte_for_byte() {
    let j = recorded_job("replayed", &words(1500), 3000, 2, "1000 checkpoints");
    j.run_ok(&[]);
    let list = checkpoints(&j);
    assert!(list.len() >= 4, "{list:?}");
    // Every word is in exactly one recorded epoch: the records given to
    // `process` over all epochs are the input.
    let (mut recorded, mut busiest) = (0, (0, String::new()));
    for c in &list {
        let id = c["id"].as_u64().unwrap().to_string();
        let (code, r) = json(&j, "replay", &["--operator", "count", "--checkpoint", &id]);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["identical"], true, "{r}");
        assert_eq!(r["instances"].as_array().unwrap().len(), 2, "{r}");
        for i in r["instances"].as_array().unwrap() {
            assert_eq!(i["outputs_identical"], true, "{i}");
            assert_eq!(i["state_identical"], true, "{i}");
            assert!(
                i["steps"].as_u64().unwrap() >= 1,
                "on-checkpoint at least: {i}"
            );
        }
        let records = r["plugin"]["records_in"].as_u64().unwrap();
        recorded += records;
        busiest = busiest.max((records, id));
    }
    assert_eq!(recorded, 1500);
    // The log names every call; the text says the verdict.
    let last = busiest.1;
    let log = j.path().join("calls.txt");
    let out = j.weir(
        "replay",
        &[
            "--operator",
            "count",
            "--checkpoint",
            &last,
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert!(out.success(), "{}", out.stderr);
    assert_has(&out.stdout, ": identical");
    let log = std::fs::read_to_string(log).unwrap();
    assert_has(&log, &format!("on-checkpoint {last}"));
    // Every host call, under its step: the batch's emit, the write-back.
    assert_has(&log, "\n    flat.emit port 0: ");
    assert_has(&log, "\n    flat-state.put-many ");
    // A job without an object store has none to read.
    let out = j.weir(
        "replay",
        &["--operator", "count", "--checkpoint", &last, "--from-store"],
    );
    assert!(!out.success(), "{}", out.stdout);
    assert_has(
        &out.stderr,
        "job `replayed` has no [checkpoint] store to read from",
    );
}

#[test]
fn a_replay_finds_a_plugin_that_does_not_restore_what_it_emits_from() {
    let job =
        count_words("forgetful", Checkpoint::every("50ms"), 3000, 1).operator_with("count", |_| {
            Operator::new("count", plugins::GUEST_FORGETS_ON_RESTORE)
                .inputs(&["words"])
                .string("record_inputs", "1000 checkpoints")
        });
    let text: String = words(900).iter().map(|w| format!("{w}\n")).collect();
    let j = JobDir::new(WEIR, job, &[("words.txt", &text)]);
    j.run_ok(&[]);
    let list = checkpoints(&j);
    let first = list[0]["id"].as_u64().unwrap().to_string();
    // From the job's start, its count starts where it did.
    let (code, r) = json(
        &j,
        "replay",
        &["--operator", "count", "--checkpoint", &first],
    );
    assert_eq!(
        (code, &r["identical"]),
        (Some(0), &Value::Bool(true)),
        "{r}"
    );
    // From any checkpoint it numbers from 0 again.
    let later = (list.iter().skip(1))
        .map(|c| c["id"].as_u64().unwrap().to_string())
        .find(|id| {
            let (_, r) = json(&j, "replay", &["--operator", "count", "--checkpoint", id]);
            r["plugin"]["records_in"].as_u64().unwrap() > 0
        })
        .expect("an epoch after the first with records");
    let out = j.weir("replay", &["--operator", "count", "--checkpoint", &later]);
    assert_eq!(out.code(), Some(4), "{}{}", out.stdout, out.stderr);
    assert_has(&out.stdout, "DIFFERENT");
    assert_has(
        &out.stdout,
        "record 0 on output port 0 differs: recorded key",
    );
    assert_has(&out.stdout, "not deterministic");
}

/// `weir shadow` arguments: `count-x-twice` on operator `count`, every
/// difference listed.
const X_TWICE: [&str; 6] = [
    "--operator",
    "count",
    "--with",
    plugins::GUEST_COUNT_X_TWICE,
    "--limit",
    "100000",
];

/// The checkpoints whose epochs a shadow report `r` ran.
fn epochs(r: &Value) -> Vec<u64> {
    (r["epochs"].as_array().unwrap().iter())
        .map(|e| e.as_u64().unwrap())
        .collect()
}

/// What word-count emits for `words`: per word in order, its key and
/// count; `x_twice` counts words starting with `x` twice.
fn counts(words: &[String], x_twice: bool) -> Vec<(String, u64)> {
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    (words.iter())
        .map(|w| {
            let by = if x_twice && w.starts_with('x') { 2 } else { 1 };
            let c = seen.entry(w).or_default();
            *c += by;
            (w.clone(), *c)
        })
        .collect()
}

/// Asserts the shadow report `r` of `count-x-twice` against word-count,
/// over every epoch of `input`: the records of every `x` word differ in
/// their count, and so do exactly the `x` words' keys; returns how many
/// records differ.
fn assert_counts_x_twice(r: &Value, input: &[String]) -> u64 {
    assert_eq!(r["v1_reproduced"], true);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0);
    assert_eq!(r["v1"]["records_in"], input.len());
    assert_eq!(r["v2"]["records_in"], input.len());

    // The oracle: the records of every `x` word differ, in its count.
    let (v1, v2) = (counts(input, false), counts(input, true));
    let mut want: Vec<(String, String, String)> = (v1.iter().zip(&v2))
        .filter(|(a, b)| a != b)
        .map(|((w, a), (_, b))| {
            let row = |c| format!("{{\"word\":\"{w}\",\"count\":{c}}}");
            (w.clone(), row(a), row(b))
        })
        .collect();
    want.sort();
    let out = &r["outputs"].as_array().unwrap()[0];
    assert_eq!(out["port"], "out");
    let n = want.len() as u64;
    assert_eq!(
        [
            &out["same"],
            &out["changed"],
            &out["only_v1"],
            &out["only_v2"]
        ],
        [input.len() as u64 - n, n, 0, 0]
            .map(Value::from)
            .each_ref(),
        "{out}"
    );
    let mut got: Vec<(String, String, String)> = (out["differences"].as_array().unwrap().iter())
        .map(|d| {
            assert_eq!(d["kind"], "changed");
            let s = |v: &Value| v.as_str().unwrap().to_owned();
            (s(&d["key"]), s(&d["v1"]["value"]), s(&d["v2"]["value"]))
        })
        .collect();
    got.sort();
    assert_eq!(got, want);

    // The state: each `x` word's key holds another count; no other key.
    let mut last: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for ((w, a), (_, b)) in v1.iter().zip(&v2) {
        last.insert(w, (*a, *b));
    }
    let want_keys: Vec<(String, String, String)> = (last.iter())
        .filter(|(w, _)| w.starts_with('x'))
        .map(|(w, (a, b))| (format!("{w}\0count"), a.to_string(), b.to_string()))
        .collect();
    let state = &r["state"];
    let x = want_keys.len() as u64;
    assert_eq!(
        [
            &state["same"],
            &state["changed"],
            &state["only_v1"],
            &state["only_v2"]
        ],
        [last.len() as u64 - x, x, 0, 0].map(Value::from).each_ref(),
        "{state}"
    );
    let got_keys: Vec<(String, String, String)> = (state["keys"].as_array().unwrap().iter())
        .map(|k| {
            let s = |v: &Value| v.as_str().unwrap().to_owned();
            (s(&k["key"]), s(&k["v1"]), s(&k["v2"]))
        })
        .collect();
    assert_eq!(got_keys, want_keys);
    n
}

#[test]
fn a_shadow_run_reports_exactly_the_records_and_keys_a_new_plugin_changes() {
    let input = words(1500);
    let j = recorded_job("shadowed", &input, 3000, 2, "1000 checkpoints");
    j.run_ok(&[]);
    let ids: Vec<u64> = (checkpoints(&j).iter())
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    let args = X_TWICE;
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(code, Some(0), "no trap, no error, no --max-changed: {r}");
    assert_eq!(
        r["from_checkpoint"],
        Value::Null,
        "from the job's start: {r}"
    );
    let epochs = epochs(&r);
    assert_eq!(epochs, ids);
    let n = assert_counts_x_twice(&r, &input);

    // The text and the report kept for the dashboard say the same.
    let out = j.weir("shadow", &args[..4]);
    assert!(out.success(), "{}", out.stderr);
    assert_has(
        &out.stdout,
        &format!(
            "output `out`: {} same, {n} changed, 0 only v1, 0 only v2",
            1500 - n
        ),
    );
    let kept = std::fs::read_to_string(j.state_dir().join("shadow/count.json")).unwrap();
    let kept: Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(kept["outputs"][0]["changed"], n);

    // A range from a checkpoint: only the records of the epochs after it.
    let from = ids[ids.len() / 2].to_string();
    let (_, part) = json(
        &j,
        "shadow",
        &[&args[..], &["--from-checkpoint", &from]].concat(),
    );
    assert_eq!(part["from_checkpoint"], ids[ids.len() / 2]);
    let part_in = part["v2"]["records_in"].as_u64().unwrap();
    assert!(part_in < 1500, "{part}");
    let port = &part["outputs"][0];
    let total: u64 = ["same", "changed", "only_v1", "only_v2"]
        .iter()
        .map(|k| port[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, part_in, "one record out per record in: {port}");

    // With --max-changed below the count, the exit code says so.
    let out = j.weir("shadow", &[&args[..4], &["--max-changed", "0"]].concat());
    assert_eq!(out.code(), Some(4), "{}", out.stderr);
    assert_has(
        &out.stderr,
        &format!("emitted {n} records other than the recorded plugin did"),
    );
}

#[test]
fn a_shadow_run_of_word_count_v2_changes_every_record_and_key_format() {
    let input = words(600);
    let j = recorded_job("shadowed-v2", &input, 3000, 1, "1000 checkpoints");
    j.run_ok(&[]);
    let args = [
        "--operator",
        "count",
        "--with",
        plugins::WORD_COUNT_V2,
        "--limit",
        "100000",
    ];
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(code, Some(0), "{r}");
    let out = &r["outputs"][0];
    assert_eq!(
        [&out["same"], &out["changed"]],
        [0, 600].map(Value::from).each_ref(),
        "{out}"
    );
    let v1 = counts(&input, false);
    let mut want: Vec<(String, String)> = (v1.iter())
        .map(|(w, c)| (w.clone(), format!("{{\"w\":\"{w}\",\"n\":{c},\"v\":2}}")))
        .collect();
    let mut got: Vec<(String, String)> = (out["differences"].as_array().unwrap().iter())
        .map(|d| {
            let s = |v: &Value| v.as_str().unwrap().to_owned();
            (s(&d["key"]), s(&d["v2"]["value"]))
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let distinct = v1
        .iter()
        .map(|(w, _)| w)
        .collect::<std::collections::BTreeSet<_>>();
    let state = &r["state"];
    let d = distinct.len() as u64;
    assert_eq!(
        [
            &state["same"],
            &state["changed"],
            &state["only_v1"],
            &state["only_v2"]
        ],
        [0, 0, d, d].map(Value::from).each_ref(),
        "v1 keys `<w>\\0count`, v2 keys `<w>\\0n`: {state}"
    );
    assert_eq!(r["v2"]["version"], "2.0.0");
    assert_eq!(r.get("config_changed"), None, "{r}");

    // The operator's config edited since: a replay is refused (it would
    // differ for that alone); a shadow runs and says so.
    let first = r["epochs"][0].to_string();
    let edited = count_words("shadowed-v2", Checkpoint::every("50ms"), 3000, 1).operator_with(
        "count",
        |o: Operator| {
            o.string("record_inputs", "1000 checkpoints")
                .config("{ lowercase = false }")
        },
    );
    j.write_job(edited);
    let out = j.weir("replay", &["--operator", "count", "--checkpoint", &first]);
    assert!(!out.success(), "{}", out.stdout);
    assert_has(
        &out.stderr,
        &format!(
            "the config of operator `count` in the job file is not the one the epoch of checkpoint {first} ran with"
        ),
    );
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(
        (code, &r["config_changed"]),
        (Some(0), &Value::Bool(true)),
        "{r}"
    );
    let out = j.weir("shadow", &args);
    assert_has(
        &out.stdout,
        "warning: the operator's config in the job file is not the one",
    );
}

#[test]
fn recordings_keep_their_bound_and_the_checkpoint_they_start_from() {
    let j = recorded_job("bounded", &words(1500), 3000, 1, "2 checkpoints");
    j.run_ok(&[]);
    let list = checkpoints(&j);
    let ids: Vec<u64> = list.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    // The last two epochs are recorded, and replay; the older are not.
    let replays = |id: &u64| {
        let id = id.to_string();
        j.weir("replay", &["--operator", "count", "--checkpoint", &id])
    };
    let recorded: Vec<u64> = ids
        .iter()
        .filter(|id| replays(id).success())
        .copied()
        .collect();
    assert_eq!(recorded, ids[ids.len() - 2..], "{list:?}");
    let old = ids[0].to_string();
    let out = replays(&ids[0]);
    assert_has(
        &out.stderr,
        &format!(
            "the epoch of checkpoint {old} of operator `count` is not recorded (or not for every instance); recorded: checkpoints {}, {}",
            recorded[0], recorded[1]
        ),
    );
    let (code, r) = json(
        &j,
        "shadow",
        &["--operator", "count", "--with", plugins::WORD_COUNT],
    );
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["from_checkpoint"], ids[ids.len() - 3]);
    assert_eq!(
        r["outputs"][0]["changed"], 0,
        "the same plugin changes nothing: {r}"
    );
    assert_eq!(r["state"]["changed"], 0);
}

#[test]
fn a_guarded_swap_refuses_a_plugin_that_traps_on_recorded_input_and_takes_one_that_does_not() {
    let j = recorded_job("guarded", &words(24_000), 2000, 1, "1000 checkpoints");
    let mut child = j
        .command("run", &["--progress-every", "0"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        j.wait_for_output(&mut child, "out.jsonl", 0),
        "the job ended early"
    );
    let swap = |plugin: &str, rule: &[&str]| {
        let spec = format!("count={plugin}");
        let out = j.weir("swap", &[&[spec.as_str(), "--shadow"][..], rule].concat());
        (out.success(), format!("{}{}", out.stdout, out.stderr))
    };
    let (ok, text) = swap(plugins::GUEST_SWAP_TRAP_FIRST_BATCH, &[]);
    assert!(!ok, "{text}");
    assert_has(&text, "swap of `count` refused by its shadow run:");
    assert_has(&text, "trapped on recorded input");
    let (ok, text) = swap(plugins::GUEST_COUNT_X_TWICE, &["--max-changed", "0"]);
    assert!(!ok, "{text}");
    assert_has(&text, "records other than the recorded plugin did");
    let (ok, text) = swap(plugins::WORD_COUNT_V2, &[]);
    assert!(ok, "{text}");
    assert_has(&text, "now runs the new plugin");
    assert!(child.wait().unwrap().success());
    // Neither refused plugin ran: every count line is word-count's or v2's.
    let out = j.read("out.jsonl");
    let v2 = out.lines().filter(|l| l.contains("\"v\":2")).count();
    let v1 = out.lines().filter(|l| l.contains("\"count\":")).count();
    assert_eq!(v1 + v2, 24_000, "one line per word");
    assert!(v1 > 0 && v2 > 0, "{v1} {v2}");
    let x_twice = counts(&words(24_000), true);
    let wrong = (out.lines().zip(&x_twice))
        .filter(|(l, (w, c))| w.starts_with('x') && l.contains(&format!("\"count\":{c}}}")));
    assert_eq!(wrong.count(), 0, "count-x-twice never counted");
    // A shadow run's default range starts after the swap, run by the
    // swapped-in plugin (the state directory's copy); one across it is
    // refused.
    let args = ["--operator", "count", "--with", plugins::WORD_COUNT_V2];
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["v1"]["version"], "2.0.0", "{r}");
    assert_eq!(r["v1_reproduced"], true, "{r}");
    let port = &r["outputs"][0];
    assert_eq!(
        (&port["changed"], &port["only_v1"], &port["only_v2"]),
        (&0.into(), &0.into(), &0.into()),
        "{r}"
    );
    let out = j.weir("shadow", &[&args[..], &["--from-checkpoint", "0"]].concat());
    assert!(!out.success());
    assert_has(&out.stderr, "(a swap): choose a range within one plugin");
}

/// The windowed count (event-time timers, watermarks, two output ports)
/// recording all of its input, in checkpoint `mode`, over `n` clicks.
fn recorded_windows(mode: &str, n: i64, rate: u64) -> (JobDir, String, usize, usize) {
    let (text, counts, late) = clicks(&mut XorShift(seed()), n);
    let job = windows_job(Checkpoint::every("50ms").mode(mode))
        .source_with("clicks", |s| s.rate(rate))
        .operator_with("count", |o| {
            o.string("record_inputs", "100000 checkpoints")
                .string("record_max_bytes", "1GiB")
        });
    let j = JobDir::new(WEIR, job, &[("clicks.jsonl", &text)]);
    (j, text, counts.len(), late.len())
}

/// After the runs of `j`: the output is the oracle's, every recorded epoch
/// replays byte for byte, and the recordings hold the input exactly once:
/// the same plugin on all of them from the job's start gives every click
/// to `process` once and emits exactly the windows and late records.
fn assert_recorded_exactly_once(j: &JobDir, text: &str, windows: usize, late: usize) {
    let ids: Vec<u64> = (checkpoints(j).iter())
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    let mut watermarks = 0;
    for id in &ids {
        let id = id.to_string();
        let (code, r) = json(j, "replay", &["--operator", "count", "--checkpoint", &id]);
        assert_eq!(code, Some(0), "epoch {id}: {r}");
        for i in r["instances"].as_array().unwrap() {
            let log = i["log"].as_array().unwrap();
            watermarks += log
                .iter()
                .filter(|l| l.as_str().unwrap().contains(": watermark "))
                .count();
        }
    }
    assert!(watermarks > 0, "watermark steps are recorded");
    let args = [
        "--operator",
        "count",
        "--with",
        plugins::WINDOW_COUNT,
        "--from-checkpoint",
        "0",
    ];
    let (code, r) = json(j, "shadow", &args);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["v1_reproduced"], true, "{r}");
    assert_eq!(
        r["v1"]["records_in"],
        text.lines().count(),
        "every click once"
    );
    let ports = r["outputs"].as_array().unwrap();
    let sum = |k: &str| ports.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("same"), (windows + late) as u64, "{ports:?}");
    assert_eq!((sum("changed"), sum("only_v1"), sum("only_v2")), (0, 0, 0));
    assert_eq!(r["state"]["changed"], 0);
}

#[test]
fn recordings_survive_a_crash_after_the_store_commit_and_random_kills_exactly_once() {
    let (j, text, windows, late) = recorded_windows("aligned", 150_000, 100_000);
    let crashed = j
        .command("run", &[])
        .env(FAILPOINTS, "checkpoint.after-store-commit@3")
        .output();
    assert!(
        !crashed.unwrap().status.success(),
        "killed at the failpoint"
    );
    j.run_through_kills(3, "counts.jsonl", (0, 150), &mut XorShift(seed()));
    assert_recorded_exactly_once(&j, &text, windows, late);
}

#[test]
fn unaligned_recordings_hold_their_in_flight_data_once_through_crashes() {
    // Unthrottled: queues are full when a barrier overtakes them.
    let (j, text, windows, late) = recorded_windows("unaligned", 150_000, 10_000_000);
    let mut restored_in_flight = 0;
    for _ in 0..3 {
        let run = j
            .command("run", &[])
            .env(FAILPOINTS, "checkpoint.after-store-commit@2")
            .output();
        if run.unwrap().status.success() {
            break; // the input ended before a second checkpoint
        }
        // The next run restores the checkpoint just stored, and processes
        // its in-flight data first: the recording of the next epoch must
        // hold it.
        let list = checkpoints(&j);
        restored_in_flight += (list.last().unwrap()["inflight_bytes"].as_u64().unwrap() > 0) as u32;
    }
    assert!(
        restored_in_flight > 0,
        "no crash left in-flight data to restore"
    );
    j.run_ok(&[]);
    assert_recorded_exactly_once(&j, &text, windows, late);
}

#[test]
fn an_epoch_over_record_max_bytes_is_not_recorded_and_says_so() {
    let job = count_words("overflowing", Checkpoint::every("50ms"), 3000, 1).operator_with(
        "count",
        |o: Operator| {
            o.string("record_inputs", "1000 checkpoints")
                .string("record_max_bytes", "1KiB")
        },
    );
    let text: String = words(1500).iter().map(|w| format!("{w}\n")).collect();
    let j = JobDir::new(WEIR, job, &[("words.txt", &text)]);
    let stderr = j.run_ok(&[]);
    assert_has(
        &stderr,
        "instance 0 of operator `count` records more than record_max_bytes (1024 bytes) in one checkpoint epoch: this epoch is not recorded",
    );
    let ids: Vec<u64> = (checkpoints(&j).iter())
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    let replays: Vec<bool> = (ids.iter())
        .map(|id| {
            j.weir(
                "replay",
                &["--operator", "count", "--checkpoint", &id.to_string()],
            )
            .success()
        })
        .collect();
    assert!(
        replays.contains(&false),
        "an epoch with 150 words is over 1 KiB"
    );
    // A shadow run's default range is the newest recorded epochs back to
    // the first that is not: it starts from that one's checkpoint.
    let args = ["--operator", "count", "--with", plugins::WORD_COUNT];
    let Some(newest) = replays.iter().rposition(|ok| *ok) else {
        // Every epoch was over the bound: nothing is kept.
        let out = j.weir("shadow", &args);
        assert_has(
            &out.stderr,
            "it records its input (the last 1000 checkpoints, at most 1KiB), but no epoch is kept: each was over record_max_bytes",
        );
        return;
    };
    let first = replays[..newest].iter().rposition(|ok| !ok);
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(
        r["from_checkpoint"],
        Value::from(first.map(|i| ids[i])),
        "{r}"
    );
    let epochs = epochs(&r);
    assert_eq!(epochs, ids[first.map_or(0, |i| i + 1)..=newest], "{r}");
}

#[test]
fn processing_time_timers_and_the_clock_replay_byte_for_byte() {
    // The plugin stores `processing-time` + 200 ms per record and fires a
    // timer then: a replay reproduces its state only with the clock each
    // call saw.
    let job = weir_tests::jobs::processing_timer(200)
        .operator_with("pt", |o| o.string("record_inputs", "1000 checkpoints"));
    let j = JobDir::new(WEIR, job, &[]);
    let mut run = j.spawn_fed(&["--progress-every", "0"]);
    run.send("a\nb\ncancel b\n");
    j.wait_for_text("out.txt", "fired a");
    run.send("c\n");
    j.wait_for_text("out.txt", "fired c");
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    let log = j.path().join("calls.txt");
    let (mut timer_rounds, mut clock_reads) = (0, 0);
    for c in checkpoints(&j) {
        let id = c["id"].as_u64().unwrap().to_string();
        let args = [
            "--operator",
            "pt",
            "--checkpoint",
            &id,
            "--log",
            log.to_str().unwrap(),
        ];
        let out = j.weir("replay", &args);
        assert!(out.success(), "epoch {id}: {}{}", out.stdout, out.stderr);
        let log = std::fs::read_to_string(&log).unwrap();
        timer_rounds += log.matches(": processing-time timers;").count();
        clock_reads += log.matches("    timers.processing-time -> ").count();
    }
    assert!(
        timer_rounds > 0 && clock_reads >= 3,
        "{timer_rounds} {clock_reads}"
    );
}

// ------------------------------------------- from the object store

/// The recorded word count with its checkpoints copied to the object
/// store at `url` (`env`: its credentials) is SIGKILLed after a checkpoint
/// and loses its state directory (its machine), then runs to its end and
/// loses it again. `weir replay` and `weir shadow` then read the store
/// (the newest manifest's catalog): every epoch since the job's start,
/// across the lost directory, replays byte for byte, their records are
/// the input once each, and the shadow of `count-x-twice` reports exactly
/// the oracle's differences.
fn replay_and_shadow_read_the_store_once_the_state_directory_is_lost(
    url: &str,
    env: Vec<(&'static str, String)>,
) {
    let input = words(1500);
    let checkpoint = Checkpoint::every("50ms").store(url);
    let j =
        recorded_job_under(checkpoint, "stored", &input, 1000, 2, "1000 checkpoints").with_env(env);
    let mut rng = XorShift(seed() ^ 0x5700e);
    assert!(
        j.kill_after_a_checkpoint(&mut rng),
        "it ended before the kill"
    );
    std::fs::remove_dir_all(j.state_dir()).unwrap();
    j.run_ok(&[]);
    let ids: Vec<u64> = (checkpoints(&j).iter())
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    // Asked for, the store is read though the state directory is there.
    let last = ids.last().unwrap().to_string();
    let replay = ["--operator", "count", "--checkpoint", &last, "--json"];
    let out = j.weir("replay", &[&replay[..], &["--from-store"]].concat());
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    std::fs::remove_dir_all(j.state_dir()).unwrap();

    let mut records = 0;
    for id in &ids {
        let id = id.to_string();
        let out = j.weir(
            "replay",
            &["--operator", "count", "--checkpoint", &id, "--json"],
        );
        assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
        assert_has(&out.stderr, &format!("reading the checkpoints of {url}"));
        let r: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(r["identical"], true, "{r}");
        records += r["plugin"]["records_in"].as_u64().unwrap();
    }
    assert_eq!(records, 1500, "every word in exactly one epoch");
    let args = X_TWICE;
    let (code, r) = json(&j, "shadow", &args);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["from_checkpoint"], Value::Null, "the job's start: {r}");
    let epochs = epochs(&r);
    assert_eq!(epochs, ids);
    assert_counts_x_twice(&r, &input);
}

#[test]
fn replay_and_shadow_read_a_file_store_once_the_state_directory_is_lost() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}", store.path().display());
    replay_and_shadow_read_the_store_once_the_state_directory_is_lost(&url, Vec::new());
}

#[test]
fn replay_and_shadow_read_s3_once_the_state_directory_is_lost() {
    let s3 = S3::start();
    let url = s3.url("jobs/recorded");
    replay_and_shadow_read_the_store_once_the_state_directory_is_lost(&url, s3.env());
}
