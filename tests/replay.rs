//! Dead letters replayed (`weir deadletter replay`): an operator's dead
//! letters go back into it through its replay source, exactly once and in
//! order, into a finished job (resumed for them) through SIGKILLs, and
//! into a running one after a live swap; letters that fail again go back
//! to the dead letters, naming where they first came from; a letter is
//! never queued twice. Oracles come from the input: which lines are bad
//! is decided when writing it, and the fixed plugin marks what only it
//! let through.

use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::letters::{self, replayed};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_lacks};
use weir_tests::wait::{PATIENCE, wait_until};

use weir_tests::cli::{Outcome, Weir};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// Lines `w<i>` for `i` in `from..=to`, every `every`-th `bad-<i>`
/// instead (`picky` refuses them): the text, its good lines, its bad ones.
fn lines(from: u64, to: u64, every: u64) -> (String, Vec<String>, Vec<String>) {
    let (mut text, mut good, mut bad) = (String::new(), Vec::new(), Vec::new());
    for i in from..=to {
        let (line, into) = match i % every == 0 {
            true => (format!("bad-{i}"), &mut bad),
            false => (format!("w{i}"), &mut good),
        };
        text.push_str(&line);
        text.push('\n');
        into.push(line);
    }
    (text, good, bad)
}

/// `source` through `picky` (whose dead letters go to `bad.txt`; the
/// fixed plugin sleeps `delay_ms` per batch, one letter a batch in a
/// replay) into `out.txt`.
fn refusing(source: Source, delay_ms: u64) -> JobFile {
    JobFile::new("replaying")
        .checkpoint(Checkpoint::every("50ms"))
        .source(source)
        .operator(
            Operator::new("picky", plugins::GUEST_PICKY)
                .inputs(&["in"])
                .config(&format!("{{ delay_ms = {delay_ms} }}"))
                .grants(&["clocks"])
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::file("out", "out.txt").input("picky"))
        .sink(Sink::file("bad", "bad.txt"))
}

/// `lines` as the text of a file, one a line.
fn text_of<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> String {
    (lines.into_iter())
        .map(|l| format!("{}\n", l.as_ref()))
        .collect()
}

/// The `weir run` arguments that swap the fixed plugin in for `picky`.
fn cured() -> String {
    format!("picky={}", plugins::GUEST_CURED)
}

/// A finished job's dead letters replayed into the plugin that refused
/// them fail again, and come back as new letters naming where they first
/// came from; replayed once more into the fixed plugin, swapped in at the
/// restore, each takes effect exactly once and in order, through SIGKILLs
/// of the replaying runs; after that there is nothing left to replay.
#[test]
fn dead_letters_replayed_after_a_fix_take_effect_exactly_once_through_kills() {
    let (text, good, bad) = lines(1, 6000, 3);
    let job = JobDir::new(
        WEIR,
        refusing(Source::file("in", "in.txt"), 2),
        &[("in.txt", &text)],
    );
    job.run_ok(&[]);
    assert_eq!(job.read("out.txt"), text_of(&good));
    let first = letters::parse(&job.read("bad.txt"));
    assert_eq!(
        letters::values(&first),
        bad,
        "each refused line once, in order"
    );

    // Into the same plugin: every letter fails again.
    let queued = replayed(&job, &["--operator", "picky"]);
    let n = bad.len() as u64;
    assert_eq!(
        (&queued["letters"], &queued["added"]),
        (&n.into(), &n.into()),
        "{queued}"
    );
    let stderr = job.run_ok(&[]);
    assert_has(&stderr, "resumed from checkpoint");
    assert_eq!(job.read("out.txt"), text_of(&good), "nothing got through");
    let all = letters::parse(&job.read("bad.txt"));
    assert_eq!(all.len(), 2 * bad.len());
    assert_eq!(letters::values(&all[bad.len()..]), bad, "in queue order");
    for (i, (again, was)) in all[bad.len()..].iter().zip(&first).enumerate() {
        let origin = again["origin"].as_str().unwrap();
        let expected = format!(
            "replays/picky.jsonl line {} (first: {}) of source `replay:picky`",
            i + 2,
            was["origin"].as_str().unwrap()
        );
        assert_eq!(origin, expected, "{again}");
        assert_eq!(again["port"], "in", "{again}");
    }

    // Into the fixed plugin: only the new letters are queued.
    let queued = replayed(&job, &["--operator", "picky"]);
    assert_eq!(
        (&queued["added"], &queued["already"]),
        (&n.into(), &n.into()),
        "{queued}"
    );
    let swap = cured();
    let mut rng = XorShift(seed());
    let mut killed = 0;
    while killed < 3 && job.kill_after_a_checkpoint_of(&["--swap", &swap], &mut rng) {
        killed += 1;
    }
    assert!(
        killed >= 2,
        "killed {killed} times: the replay is too short to crash"
    );
    let stderr = job.run_ok(&["--swap", &swap]);
    assert_lacks(&stderr, "panicked");
    let fixed = bad.iter().map(|b| format!("cured {b}"));
    assert_eq!(
        job.read("out.txt"),
        text_of(good.iter().cloned().chain(fixed)),
        "each replayed letter exactly once, in order, after the output before"
    );
    assert_eq!(
        letters::parse(&job.read("bad.txt")).len(),
        2 * bad.len(),
        "none failed"
    );

    // Nothing more to replay: the job stays done.
    let queued = replayed(&job, &["--operator", "picky"]);
    assert_eq!(queued["added"], 0, "{queued}");
    assert_has(&job.run_ok(&["--swap", &swap]), "already finished");
}

/// A running job whose input does not end replays the letters queued
/// while it runs, once a fixed plugin was swapped in live; records read
/// after the swap go through the fixed plugin at once.
#[test]
fn a_running_job_replays_dead_letters_once_a_fixed_plugin_is_swapped_in() {
    let (before, good, bad) = lines(1, 200, 10);
    let (after, ..) = lines(201, 260, 10);
    let job = JobDir::new(WEIR, refusing(Source::stdin("in"), 0), &[]);
    let mut run = job.spawn_fed(&[]);
    run.send(&before);
    let letters_in = || letters::parse(&job.read_so_far("bad.txt"));
    wait_until("the dead letters", PATIENCE, || {
        (letters_in().len() == bad.len()).then_some(())
    });
    let swap = job.on_state("swap", &[&cured()]);
    assert!(swap.success(), "{}", swap.stderr);
    let queued = replayed(&job, &["--operator", "picky"]);
    assert_eq!(queued["added"], bad.len(), "{queued}");
    let fixed: Vec<String> = bad.iter().map(|b| format!("cured {b}")).collect();
    let expected = text_of(good.iter().chain(&fixed));
    wait_until("the replayed letters", PATIENCE, || {
        (job.read_so_far("out.txt") == expected).then_some(())
    });
    run.send(&after);
    run.close_stdin();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    let later = (after.lines()).map(|l| match l.starts_with("bad") {
        true => format!("cured {l}"),
        false => l.to_owned(),
    });
    assert_eq!(job.read("out.txt"), expected + &text_of(later));
    assert_eq!(letters_in().len(), bad.len(), "no new dead letters");
}

/// Replay needs a dead-letter sink on the operator, and refuses what it
/// cannot do in one line: an unknown operator, an unknown error kind, a
/// file that is not letters.
#[test]
fn replay_refuses_what_it_cannot_do_in_one_line() {
    let (text, ..) = lines(1, 10, 3);
    let job = JobDir::new(
        WEIR,
        refusing(Source::file("in", "in.txt"), 0),
        &[("in.txt", &text)],
    );
    let replay = |args: &[&str]| Outcome::of(&mut job.command_of(&["deadletter", "replay"], args));
    let input = job.path().join("in.txt");
    let input = input.to_str().unwrap();
    let not_letters = format!("{input}:1: not a dead letter");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--operator", "nope"],
            "no operator `nope` (operators: picky)",
        ),
        (
            &["--operator", "picky", "--error-kind", "oops"],
            "--error-kind \"oops\" is not a kind of bad record (unreadable, ",
        ),
        (&["--operator", "picky", "--from", input], &not_letters),
    ];
    for (args, message) in cases {
        let out = replay(args);
        assert_eq!(out.code(), Some(1), "{args:?}: {}", out.stderr);
        assert_has(out.error_line(), message);
    }
    let plain = JobFile::new("plain")
        .source(Source::file("in", "in.txt"))
        .operator(Operator::new("picky", plugins::GUEST_PICKY).inputs(&["in"]))
        .sink(Sink::file("out", "out.txt").input("picky"));
    job.write_job(plain);
    let out = replay(&["--operator", "picky"]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert_has(
        out.error_line(),
        "operator `picky` sends no dead letters to a sink",
    );
}

/// Letters of records a plugin traps on, replayed into it, are found
/// again by the search for the failing record (the replay source is
/// replayable, one letter a batch), and go back to the dead letters;
/// replayed into the fixed plugin, each takes effect once.
#[test]
fn letters_a_plugin_traps_on_again_are_found_and_dead_lettered_again() {
    let text: String = (1..=400)
        .map(|i| match i % 41 == 0 {
            true => "poison\n".to_owned(),
            false => format!("w{i}\n"),
        })
        .collect();
    let file = JobFile::new("trapping")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "in.txt"))
        .operator(
            Operator::new("poison", plugins::GUEST_POISON)
                .inputs(&["in"])
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::file("out", "out.txt").input("poison"))
        .sink(Sink::file("bad", "bad.txt"));
    let job = JobDir::new(WEIR, file, &[("in.txt", &text)]);
    job.run_ok(&[]);
    let good: String = text
        .lines()
        .filter(|l| *l != "poison")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(job.read("out.txt"), good);
    let first = letters::parse(&job.read("bad.txt"));
    assert_eq!(first.len(), 9);
    replayed(&job, &["--operator", "poison"]);
    job.run_ok(&[]);
    let all = letters::parse(&job.read("bad.txt"));
    assert_eq!(all.len(), 18, "each failed again once");
    for (again, was) in all[9..].iter().zip(&first) {
        assert_eq!(again["error_kind"], "trap", "{again}");
        let origin = again["origin"].as_str().unwrap();
        let first_origin = format!("(first: {})", was["origin"].as_str().unwrap());
        assert_has(origin, &first_origin);
    }
    let queued = replayed(&job, &["--operator", "poison", "--error-kind", "trap"]);
    assert_eq!(
        (&queued["added"], &queued["already"]),
        (&9.into(), &9.into()),
        "{queued}"
    );
    let swap = format!("poison={}", plugins::GUEST_CURED);
    job.run_ok(&["--swap", &swap]);
    assert_eq!(job.read("out.txt"), good + &"cured poison\n".repeat(9));
    assert_eq!(letters::parse(&job.read("bad.txt")).len(), 18);
}
