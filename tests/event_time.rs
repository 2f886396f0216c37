//! Event time in the host: timers of a real component (`window-count`,
//! built with the Rust SDK on world `operator-timers`) through
//! [`OperatorInstance`]: firing in order, deleting, the timestamps of what
//! timers emit, and timers and the watermark carried through a checkpoint
//! into a fresh instance, as a restore does.

use weir::keyed::state::KeyedState;
use weir::keyed::timers::{Domain, Timers};
use weir::{OperatorInstance, Plugin, Record, Runtime};
use weir_tests::{plugins, polyglot};

fn load(path: &str) -> Plugin {
    Runtime::new().unwrap().load(path).unwrap()
}

fn rec(key: &str, ts: i64) -> Record {
    Record {
        key: Some(key.as_bytes().to_vec()),
        value: format!("{key}@{ts}").into_bytes(),
        timestamp: Some(ts),
    }
}

/// The JSON values emitted on port 0.
fn counts(inst: &mut OperatorInstance) -> Vec<serde_json::Value> {
    inst.take_output(0)
        .iter()
        .map(|r| serde_json::from_slice(&r.value).unwrap())
        .collect()
}

/// Advances the instance's watermark to `w` and fires its timers, as the
/// instance thread does.
fn advance(inst: &mut OperatorInstance, w: i64) -> usize {
    inst.set_watermark(w);
    inst.fire_timers(Domain::EventTime, w).unwrap()
}

#[test]
fn event_time_timers_fire_in_order_once_the_watermark_reaches_them() {
    let plugin = load(plugins::WINDOW_COUNT);
    assert!(plugin.info().outputs.iter().any(|p| p == "late"));
    let mut inst = OperatorInstance::new(&plugin, "wc", 0, 1, r#"{"size": "1s"}"#).unwrap();
    assert!(inst.has_timers());
    inst.process(0, &[rec("b", 2_500), rec("a", 100), rec("a", 1_900)])
        .unwrap();
    assert_eq!(inst.timers().len(Domain::EventTime), 3);
    assert_eq!(inst.timers().next(Domain::EventTime), Some(999));
    assert_eq!(advance(&mut inst, 998), 0);
    assert!(counts(&mut inst).is_empty());
    assert_eq!(advance(&mut inst, 2_999), 3);
    let out = inst.take_output(0);
    let windows: Vec<(i64, Option<i64>)> = out
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.value).unwrap();
            (v["window_start"].as_i64().unwrap(), r.timestamp)
        })
        .collect();
    assert_eq!(
        windows,
        [(0, Some(999)), (1_000, Some(1_999)), (2_000, Some(2_999))],
        "in time order, each with its window's last millisecond"
    );
    assert!(inst.timers().is_empty());
}

#[test]
fn a_late_record_goes_to_its_own_port_with_its_timestamp() {
    let plugin = load(plugins::WINDOW_COUNT);
    let mut inst = OperatorInstance::new(&plugin, "wc", 0, 1, r#"{"size": "1s"}"#).unwrap();
    inst.process(0, &[rec("a", 100)]).unwrap();
    advance(&mut inst, 5_000);
    inst.take_output(0);
    inst.process(0, &[rec("a", 200)]).unwrap();
    assert_eq!(inst.take_output(1), [rec("a", 200)]);
    assert!(inst.timers().is_empty(), "a late record registers nothing");
}

#[test]
fn timers_and_the_watermark_survive_a_checkpoint_into_a_new_instance() {
    let plugin = load(plugins::WINDOW_COUNT);
    let config = r#"{"size": "1s"}"#;
    let mut first = OperatorInstance::new(&plugin, "wc", 0, 1, config).unwrap();
    first
        .process(0, &[rec("a", 100), rec("b", 1_100), rec("a", 2_100)])
        .unwrap();
    first.on_checkpoint(1).unwrap();
    advance(&mut first, 999);
    assert_eq!(counts(&mut first).len(), 1);
    first.on_checkpoint(2).unwrap();
    // What a checkpoint stores: the state and timer changes.
    let mut stored_state = std::collections::BTreeMap::new();
    for (k, v) in first.state_mut().take_changes().iter() {
        match v {
            Some(v) => stored_state.insert(k.to_vec(), v.to_vec()),
            None => stored_state.remove(k),
        };
    }
    let mut stored_timers = std::collections::BTreeMap::new();
    for (k, v) in first.timers_mut().take_changes() {
        match v {
            Some(v) => stored_timers.insert(k, v),
            None => stored_timers.remove(&k),
        };
    }
    let timers = Timers::from_entries(
        stored_timers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice())),
    )
    .unwrap();
    assert_eq!(timers.watermark(), Some(999));
    assert_eq!(timers.len(Domain::EventTime), 2, "the fired timer is gone");

    let mut restored = OperatorInstance::new(&plugin, "wc", 0, 1, config).unwrap();
    restored.restore_timers(timers);
    restored
        .restore(
            KeyedState::from_entries(stored_state),
            plugin.info().state_version,
            &[],
        )
        .unwrap();
    // A record for the fired window is late for the restored instance too.
    restored.process(0, &[rec("a", 500)]).unwrap();
    assert_eq!(restored.take_output(1).len(), 1);
    assert_eq!(advance(&mut restored, i64::MAX), 2);
    let mut keys: Vec<String> = counts(&mut restored)
        .iter()
        .map(|v| format!("{}@{}", v["key"], v["window_start"]))
        .collect();
    keys.sort();
    assert_eq!(keys, [r#""a"@2000"#, r#""b"@1000"#]);
}

#[test]
fn a_record_emitted_without_a_timestamp_gets_the_batch_latest() {
    // `word-count` in C (world `operator`, no timers) emits records of its
    // own making: the host gives them the batch's latest timestamp.
    let test = "a_record_emitted_without_a_timestamp_gets_the_batch_latest";
    let path = match polyglot::component(polyglot::lang("c"), "word-count") {
        Ok(path) => path,
        Err(reason) => return polyglot::skip(test, &reason),
    };
    let plugin = Runtime::new().unwrap().load(path).unwrap();
    let mut inst = OperatorInstance::new(&plugin, "wc", 0, 1, "{}").unwrap();
    assert!(!inst.has_timers(), "a component of the old world");
    inst.process(
        0,
        &[
            Record::new(b"x".to_vec()),
            Record {
                timestamp: Some(42),
                ..Record::new(b"y".to_vec())
            },
            Record {
                timestamp: Some(7),
                ..Record::new(b"z".to_vec())
            },
        ],
    )
    .unwrap();
    let out = inst.take_output(0);
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|r| r.timestamp == Some(42)), "{out:?}");
    // No timers: advancing the watermark fires nothing and fails nothing.
    assert_eq!(advance(&mut inst, i64::MAX), 0);
}

// ------------------------------------------------------------ jobs

use std::time::Duration;

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Source};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn processing_timer_job(delay_ms: u64) -> JobDir {
    JobDir::new(WEIR, weir_tests::jobs::processing_timer(delay_ms), &[])
}

/// Processing-time timers fire from the instance's loop while its input
/// is open and silent; a deleted timer never fires.
#[test]
fn processing_time_timers_fire_while_the_input_is_open_and_deleted_ones_never() {
    let j = processing_timer_job(200);
    let mut run = j.spawn_fed(&["--progress-every", "0"]);
    run.send("a\nb\ncancel b\n");
    j.wait_for_text("out.txt", "fired a");
    // `c`'s timer is due after `b`'s would have been: once it has fired,
    // `b`'s would have too.
    run.send("c\n");
    j.wait_for_text("out.txt", "fired c");
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert_eq!(j.read("out.txt"), "fired a\nfired c\n");
}

/// A processing-time timer pending at a checkpoint survives a SIGKILL and
/// fires after the restore, once it is due.
#[test]
fn a_pending_processing_time_timer_fires_after_a_restore() {
    let j = processing_timer_job(3_000);
    let mut run = j.spawn_fed(&["-v", "--progress-every", "0"]);
    run.send("x\n");
    // The first checkpoint that wrote anything holds the record's state
    // and its timer.
    run.wait_for_line("a checkpoint with the timer", |l| {
        l.contains("complete in") && !l.contains("(0 bytes written")
    });
    run.kill();
    let before = j.read_so_far("out.txt");
    assert!(!before.contains("fired"), "killed before it fired");
    std::thread::sleep(Duration::from_millis(3_000)); // the timer comes due
    let run = j.spawn_fed(&["--progress-every", "0"]);
    j.wait_for_text("out.txt", "fired x");
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert_eq!(j.read("out.txt"), "fired x\n");
}

// ------------------------------------------------- windows over real input

use weir_tests::job_file::Entry;
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::windows::{EPOCH, assert_windows, clicks, windows_job, windows_of};

/// The complete lines of a file being appended to.
fn committed(j: &JobDir, file: &str) -> Option<String> {
    let text = std::fs::read_to_string(j.path().join(file)).ok()?;
    let end = text.rfind('\n').map_or(0, |i| i + 1);
    Some(text[..end].to_string())
}

/// The issue's test: windowed counts over out-of-order input (disorder
/// below `max_out_of_orderness`, several keys, parallelism 2) equal a
/// batch computation, and every injected late record is on `late` once.
#[test]
fn windowed_counts_over_out_of_order_input_equal_a_batch_computation() {
    let (text, counts, late) = clicks(&mut XorShift(seed()), 20_000);
    let j = JobDir::new(
        WEIR,
        windows_job(Checkpoint::every("100ms")),
        &[("clicks.jsonl", &text)],
    );
    j.run_ok(&[]);
    assert_windows(&j, &counts, &late);
}

/// The same, killed with SIGKILL again and again and restored each time:
/// the same windows exactly once, the same late records exactly once.
#[test]
fn windowed_counts_survive_repeated_sigkills_exactly_once() {
    let mut rng = XorShift(seed());
    let (text, counts, late) = clicks(&mut rng, 200_000);
    let job = windows_job(Checkpoint::every("50ms")).source_with("clicks", |s| s.rate(100_000));
    let j = JobDir::new(WEIR, job, &[("clicks.jsonl", &text)]);
    j.run_through_kills(4, "counts.jsonl", (0, 150), &mut rng);
    assert_windows(&j, &counts, &late);
}

/// Two inputs of a union: a file, which ends (its watermark becomes the
/// end of time), and a live stdin whose watermark holds the union back
/// until it moves; an idle stdin does not hold it back.
#[test]
fn a_union_follows_its_slowest_input_and_not_an_idle_one() {
    let (text, counts, _) = clicks(&mut XorShift(seed()), 2_000);
    let text: String = text
        .lines()
        .filter(|l| !l.contains("late"))
        .map(|l| format!("{l}\n"))
        .collect();
    let union = |idle: Option<&str>| {
        let watermark = match idle {
            Some(t) => format!(
                r#"{{ max_out_of_orderness = "2s", interval = "0s", idle_timeout = "{t}" }}"#
            ),
            None => r#"{ max_out_of_orderness = "2s", interval = "0s" }"#.to_string(),
        };
        windows_job(Checkpoint::every("100ms"))
            .source(
                Source::stdin("live")
                    .format("jsonl")
                    .key("user")
                    .string("timestamp", "ts")
                    .value("watermark", watermark),
            )
            .operator_with("count", |o| o.union("in", &["clicks", "live"]))
    };

    // Without idleness: the union's watermark is stdin's.
    let j = JobDir::new(WEIR, union(None), &[("clicks.jsonl", &text)]);
    let mut run = j.spawn_fed(&["--progress-every", "0"]);
    // stdin at 5 s: its watermark passes 2.999 s, so the windows up to
    // [2 s, 3 s) fire, and none after.
    run.send(&format!("{{\"user\":\"live\",\"ts\":{}}}\n", EPOCH + 5_000));
    let fired = wait_until("the windows before stdin's watermark", PATIENCE, || {
        let w = windows_of(&committed(&j, "counts.jsonl")?);
        w.keys()
            .any(|(_, start)| *start == EPOCH + 2_000)
            .then_some(w)
    });
    assert!(
        fired.keys().all(|(_, start)| *start < EPOCH + 3_000),
        "a window past the union's watermark fired: {fired:?}"
    );
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    let mut expected = counts.clone();
    expected.insert(("live".into(), EPOCH + 5_000), 1);
    assert_eq!(
        windows_of(&j.read("counts.jsonl")),
        expected,
        "all at the end"
    );

    // With `idle_timeout`: the silent stdin goes idle, and the file alone
    // (ended: the end of time) fires every window while stdin is open.
    let j = JobDir::new(WEIR, union(Some("300ms")), &[("clicks.jsonl", &text)]);
    let run = j.spawn_fed(&["--progress-every", "0"]);
    wait_until("every window of the file, stdin open", PATIENCE, || {
        let w = windows_of(&committed(&j, "counts.jsonl")?);
        (w == counts).then_some(())
    });
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
}
