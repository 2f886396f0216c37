//! The soak tier (not part of CI; `scripts/soak.sh` runs it): each golden
//! pipeline, a word count into one exactly-once sink (file, PostgreSQL,
//! NATS, Kafka), crashed `WEIR_SOAK_KILLS` times (default 50): two runs in
//! three SIGKILLed at a random moment after one of their checkpoints, one
//! in three killed by an armed failpoint at a random sink step and hit.
//! Then one run to the end, and one line per pipeline:
//!
//! ```text
//! soak: kafka: kills 50 (34 random, 16 failpoints), records 100000, lost 0, duplicated 0, out-of-order 0
//! ```
//!
//! The oracle is the input: each word's running counts 1, 2, ..., k in
//! delivery order ([`tally`]). Every test is `#[ignore]`d so that
//! `cargo test` leaves them out.

use std::os::unix::process::ExitStatusExt;

use weir::failpoint::{ENV, Failpoint};
use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::{tally, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Restart, Source};
use weir_tests::pipeline::XorShift;
use weir_tests::plugins;
use weir_tests::targets::{FileOut, Jetstream, KafkaOut, Pg, Target};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// Words in the input: at [`RATE`], 50 s of reading, more than 50 crashed
/// runs consume.
const WORDS: usize = 100_000;
/// Distinct words among them.
const DISTINCT: usize = 101;
/// Records per second the source reads.
const RATE: u64 = 2000;

/// The sink steps a failpoint crash picks from, with the highest hit it
/// arms (a mid-delivery hit comes once per batch of an epoch).
const STEPS: [(Failpoint, u64); 4] = [
    (Failpoint::SinkAfterPrecommit, 4),
    (Failpoint::CheckpointAfterStoreCommit, 4),
    (Failpoint::SinkMidDelivery, 30),
    (Failpoint::SinkAfterDelivery, 4),
];

fn kills() -> usize {
    std::env::var("WEIR_SOAK_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
}

fn seed() -> u64 {
    std::env::var("WEIR_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()) | 1)
}

fn input() -> String {
    (0..WORDS)
        .map(|i| format!("w{}\n", i * 7 % DISTINCT))
        .collect()
}

/// Runs the golden pipeline into `target` through the crashes, then to
/// its end; prints the pipeline's line and asserts that nothing was lost,
/// duplicated or reordered.
fn soak(name: &str, target: &dyn Target) {
    let kills = kills();
    // Each pipeline its own sequence of crashes from the one seed.
    let salt = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let mut rng = XorShift(seed() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let job = JobFile::new("soak")
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(20, "200ms"))
        .source(Source::file("words", "words.txt").rate(RATE).batch_size(25))
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["words"])
                .parallelism(2),
        )
        .sink(target.sink().input("count"));
    let j = JobDir::new(WEIR, job, &[("words.txt", &input())]);
    let (mut random, mut failpoints) = (0, 0);
    while random + failpoints < kills {
        if rng.range(0, 3) == 0 {
            let (point, highest) = STEPS[rng.range(0, STEPS.len() as u64) as usize];
            let armed = format!("{}@{}", point.name(), rng.range(1, highest + 1));
            let out = Outcome::of(j.command("run", &[]).env(ENV, &armed));
            if out.status.success() {
                break; // the input ran out first
            }
            assert!(
                out.status.signal() == Some(9) && out.stderr.contains(&point.crash_line()),
                "a run armed with {armed} did not crash there ({}): {}",
                out.status,
                out.stderr
            );
            failpoints += 1;
        } else if j.kill_after_a_checkpoint(&mut rng) {
            random += 1;
        } else {
            break;
        }
    }
    j.run_ok(&[]);
    let want = true_counts(j.read("words.txt").lines());
    let t = tally(&want, &target.delivered(&j));
    println!(
        "soak: {name}: kills {} ({random} random, {failpoints} failpoints), records {}, lost {}, duplicated {}, out-of-order {}",
        random + failpoints,
        t.records,
        t.lost,
        t.duplicated,
        t.out_of_order
    );
    assert!(
        random + failpoints >= kills,
        "{name}: the input ran out after {} crashes",
        random + failpoints
    );
    assert!(t.is_exact(), "{name}: {t:?}");
}

#[test]
#[ignore = "the soak tier: scripts/soak.sh"]
fn soak_file() {
    soak("file", &FileOut);
}

#[test]
#[ignore = "the soak tier: scripts/soak.sh"]
fn soak_postgres() {
    soak("postgres", &Pg::start());
}

#[test]
#[ignore = "the soak tier: scripts/soak.sh"]
fn soak_nats() {
    soak("nats", &Jetstream::start());
}

#[test]
#[ignore = "the soak tier: scripts/soak.sh"]
fn soak_kafka() {
    soak("kafka", &KafkaOut::start());
}
