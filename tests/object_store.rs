//! Checkpoints copied to an object store (`[checkpoint] store`): a job
//! SIGKILLed again and again, its state directory deleted before some of
//! the restarts (a machine lost), resumes from the store with every
//! output record exactly once and in order; `--restore none` empties the
//! store; two processes of one job on one store: the second is fenced.
//! These run on a `file://` store; `s3.rs` runs them on a private S3.

use std::path::Path;

use weir_tests::cli::Weir;
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile};
use weir_tests::jobs;
use weir_tests::pipeline::{XorShift, seed, wordcount_input, wordcount_words};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// The golden word count (`jobs::wordcount`, at 5000 lines/s) with its
/// checkpoints copied to `store`.
fn wordcount_with_store(store: &str) -> JobFile {
    jobs::wordcount(plugins::WORD_COUNT, Some(5000))
        .checkpoint(Checkpoint::every("100ms").store(store))
}

/// Kills `job` `kills` times after a checkpoint, deleting its state
/// directory before every other restart, then runs it to its end; asserts
/// each word's running counts of `input` exactly once and in order.
/// Returns the stderr of the last run.
pub fn survives_kills_and_lost_state(job: &JobDir, input: &str, kills: usize) -> String {
    let mut rng = XorShift(seed() ^ 0x5707e);
    let mut lost = 0;
    for k in 0..kills {
        if !job.kill_after_a_checkpoint(&mut rng) {
            break;
        }
        if k % 2 == 1 {
            std::fs::remove_dir_all(job.state_dir()).unwrap();
            lost += 1;
        }
    }
    assert!(
        lost >= kills / 4,
        "only {lost} state directories lost: the input is too small"
    );
    let stderr = job.run_ok(&[]);
    let want = true_counts(wordcount_words(input));
    let what = format!(
        "output after {kills} kills, {lost} lost state dirs (seed {})",
        seed()
    );
    assert_running_counts(&want, &job.read("out/counts.jsonl"), &what);
    stderr
}

fn file_url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

#[test]
fn a_job_that_loses_its_state_directory_resumes_from_the_store_exactly_once() {
    let store = tempfile::tempdir().unwrap();
    let mut rng = XorShift(seed());
    let input = wordcount_input(&mut rng, 300, 20_000);
    let job = JobDir::new(
        WEIR,
        wordcount_with_store(&file_url(store.path())),
        &[("input.txt", &input)],
    );
    survives_kills_and_lost_state(&job, &input, 8);
    // The store keeps `retain` (3) manifests, and only the packs they name.
    let manifests = std::fs::read_dir(store.path().join("manifests"))
        .unwrap()
        .count();
    assert!((1..=3).contains(&manifests), "{manifests} manifests");
    assert_inspectable(&file_url(store.path()), &input);
}

/// `weir checkpoints URL` lists the store's final checkpoint, and `weir
/// state URL` reads each word's count there: its true count in `input`.
pub fn assert_inspectable(url: &str, input: &str) {
    let listed = WEIR.ok(["checkpoints", url]);
    assert_has(&listed.stdout, "job `wordcount`");
    assert_has(&listed.stdout, "final");
    let counts = true_counts(wordcount_words(input));
    let (word, count) = counts.iter().max_by_key(|(_, c)| **c).unwrap();
    let state = WEIR.ok(["state", url, "--operator", "count", "--key", word]);
    let want = format!(r#"{{"key":"{word}","state":"count","value":{count}}}"#);
    assert_eq!(state.stdout.trim(), want);
}

#[test]
fn restore_none_empties_the_store_and_a_second_process_is_fenced() {
    let store = tempfile::tempdir().unwrap();
    let mut rng = XorShift(seed() ^ 2);
    let input = wordcount_input(&mut rng, 50, 20_000);
    // Retaining many checkpoints, the first process's garbage collection
    // cannot delete what the second one is downloading.
    let checkpoint = Checkpoint::every("100ms")
        .retain(50)
        .store(&file_url(store.path()));
    let file = jobs::wordcount(plugins::WORD_COUNT, Some(5000)).checkpoint(checkpoint);
    let first = JobDir::new(WEIR, file.clone(), &[("input.txt", &input)]);
    let mut running = first.spawn(&["-v"]);
    running.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    // The same job from another state directory, on the same store.
    let second = JobDir::new(WEIR, file, &[("input.txt", &input)]);
    let out = second.run(&[]);
    let (status, first_stderr) = running.wait();
    let fence = "two processes run job `wordcount` on one store";
    let fenced = [
        (out.stderr.contains(fence), out.code()),
        (first_stderr.contains(fence), status.code()),
    ];
    let refused: Vec<_> = fenced.iter().filter(|(f, _)| *f).collect();
    assert_eq!(
        refused.len(),
        1,
        "exactly one of the two is fenced: {}\n---\n{first_stderr}",
        out.stderr
    );
    assert_eq!(refused[0].1, Some(1));

    let names = |folder: &str| -> std::collections::BTreeSet<_> {
        let dir = std::fs::read_dir(store.path().join(folder)).unwrap();
        dir.map(|e| e.unwrap().file_name()).collect()
    };
    let before = names("packs");
    let out = first.run(&["--restore", "none", "-v"]);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        names("packs").is_disjoint(&before),
        "every pack of before is gone"
    );
    assert_has(
        &out.stderr,
        "--restore none: deleting the checkpoints in file://",
    );
    assert_lacks(&out.stderr, "resumed from checkpoint");
}

/// A savepoint written to an object store URL (`weir savepoint --out
/// URL`) starts the job again elsewhere (`--from-savepoint URL`) with
/// exactly-once output; a job whose own store holds checkpoints already is
/// refused a savepoint start, naming the fix.
#[test]
fn a_savepoint_goes_to_a_url_and_starts_a_job_from_there() {
    let (store, savepoints) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut rng = XorShift(seed() ^ 3);
    let input = wordcount_input(&mut rng, 50, 20_000);
    let job = JobDir::new(
        WEIR,
        wordcount_with_store(&file_url(store.path())),
        &[("input.txt", &input)],
    );
    let mut running = job.spawn(&["-v"]);
    running.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    let url = file_url(&savepoints.path().join("wc-1"));
    let out = job
        .weir("savepoint", &["--out", &url, "--stop"])
        .assert_ok();
    assert_has(&out.stdout, &format!("written to {url}"));
    let (status, stderr) = running.wait();
    assert!(status.success(), "{stderr}");
    assert!(savepoints.path().join("wc-1/savepoint.json").is_file());

    let fresh = job.path().join("fresh");
    let args = [
        "--state-dir",
        fresh.to_str().unwrap(),
        "--from-savepoint",
        &url,
    ];
    job.run(&args)
        .assert_one_line_error(&["holds checkpoints already", "new prefix"]);
    let other = tempfile::tempdir().unwrap();
    job.write_job(wordcount_with_store(&file_url(other.path())));
    let started = job.run(&args).assert_ok();
    assert_has(&started.stderr, "starts from savepoint");
    let want = true_counts(wordcount_words(&input));
    assert_running_counts(
        &want,
        &job.read("out/counts.jsonl"),
        "from the savepoint at a URL",
    );
}
