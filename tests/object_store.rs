//! Checkpoints copied to an object store (`[checkpoint] store`): a job
//! SIGKILLed again and again, its state directory deleted before some of
//! the restarts (a machine lost), resumes from the store with every
//! output record exactly once and in order; `--restore none` empties the
//! store; two processes of one job on one store: the second is fenced.
//! They run on a `file://` store, on a private S3 server (SeaweedFS),
//! which also goes down for a while under a running job, and refuses a
//! missing bucket and wrong credentials, and on Azure Blob Storage's
//! emulator (Azurite).

use std::path::Path;

use weir_tests::cli::{Outcome, Weir};
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile};
use weir_tests::jobs;
use weir_tests::orders::{Orders, assert_same_json_lines};
use weir_tests::pipeline::{XorShift, seed, wordcount_input, wordcount_words};
use weir_tests::plugins;
use weir_tests::servers::{Azurite, PrivateServer, S3};
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

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
    assert_inspectable(&file_url(store.path()), &input, &[]);
}

/// `weir checkpoints URL` lists the store's final checkpoint, and `weir
/// state URL` reads each word's count there: its true count in `input`.
fn assert_inspectable(url: &str, input: &str, env: &[(&'static str, String)]) {
    let weir = |args: &[&str]| {
        let out = Outcome::of(WEIR.command(args).envs(env.iter().cloned()));
        assert!(out.success(), "weir {args:?}: {}", out.stderr);
        out
    };
    let listed = weir(&["checkpoints", url]);
    assert_has(&listed.stdout, "job `wordcount`");
    assert_has(&listed.stdout, "final");
    let counts = true_counts(wordcount_words(input));
    let (word, count) = counts.iter().max_by_key(|(_, c)| **c).unwrap();
    let state = weir(&["state", url, "--operator", "count", "--key", word]);
    let want = format!(r#"{{"key":"{word}","state":"count","value":{count}}}"#);
    assert_eq!(state.stdout.trim(), want);
}

/// Runs the word count with its checkpoints in `url` and, once it took a
/// checkpoint, the same job from another state directory on the same
/// store: exactly one of the two is fenced, with exit status 1. Returns the
/// first one's folder.
fn second_process_is_fenced(url: &str, env: &[(&'static str, String)]) -> JobDir {
    let mut rng = XorShift(seed() ^ 2);
    let input = wordcount_input(&mut rng, 50, 20_000);
    // Retaining many checkpoints, the first process's garbage collection
    // cannot delete what the second one is downloading.
    let checkpoint = Checkpoint::every("100ms").retain(50).store(url);
    let file = jobs::wordcount(plugins::WORD_COUNT, Some(5000)).checkpoint(checkpoint);
    let job = || JobDir::new(WEIR, file.clone(), &[("input.txt", &input)]).with_env(env.to_vec());
    let first = job();
    let mut running = first.spawn(&["-v"]);
    running.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    let out = job().run(&[]);
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
    first
}

#[test]
fn restore_none_empties_the_store_and_a_second_process_is_fenced() {
    let store = tempfile::tempdir().unwrap();
    let first = second_process_is_fenced(&file_url(store.path()), &[]);
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

// ---------------------------------------------------------------- on S3

/// The word count of `input` on `s3`, its checkpoints under `prefix`.
fn wordcount_on(s3: &S3, prefix: &str, input: &str) -> JobDir {
    JobDir::new(
        WEIR,
        wordcount_with_store(&s3.url(prefix)),
        &[("input.txt", input)],
    )
    .with_env(s3.env())
}

/// The Done-when of the object store: twenty SIGKILLs, every other one
/// followed by deleting the state directory, then the run to the end:
/// every word's running counts exactly once and in order; the store is
/// readable with `weir checkpoints` and `weir state`.
#[test]
fn wordcount_on_s3_survives_twenty_kills_half_with_the_state_directory_lost() {
    let s3 = S3::start();
    let mut rng = XorShift(seed() ^ 0x53);
    let input = wordcount_input(&mut rng, 300, 80_000);
    let job = wordcount_on(&s3, "jobs/wordcount", &input);
    survives_kills_and_lost_state(&job, &input, 20);
    assert_inspectable(&s3.url("jobs/wordcount"), &input, &s3.env());
    // Given the job file, they read the job's store, not its state folder.
    std::fs::remove_dir_all(job.state_dir()).unwrap();
    let listed = job.weir("checkpoints", &[]).assert_ok();
    assert_has_all(&listed.stdout, &["job `wordcount`", "final"]);
    let word = wordcount_words(&input).next().unwrap();
    let state = job
        .weir("state", &["--operator", "count", "--key", &word])
        .assert_ok();
    assert_has(&state.stdout, &format!(r#""key":"{word}""#));
    let manifests = s3.keys("jobs/wordcount/manifests");
    assert!((1..=3).contains(&manifests.len()), "{manifests:?}");
}

/// The reconcile job likewise (its output has no order: compared as a
/// multiset with the answer computed from the orders).
#[test]
fn reconcile_on_s3_survives_twenty_kills_half_with_the_state_directory_lost() {
    let s3 = S3::start();
    let mut rng = XorShift(seed() ^ 0x54);
    let orders = Orders::generate(&mut rng, 60_000);
    let checkpoint = Checkpoint::every("100ms").store(&s3.url("jobs/reconcile"));
    let file = Orders::job_file(Some(3000), Some(3000)).checkpoint(checkpoint);
    let job = orders.job_of(WEIR, file).with_env(s3.env());
    let mut lost = 0;
    for k in 0..20 {
        assert!(
            job.kill_after_a_checkpoint(&mut rng),
            "run {k} finished first"
        );
        if k % 2 == 1 {
            std::fs::remove_dir_all(job.state_dir()).unwrap();
            lost += 1;
        }
    }
    job.run_ok(&[]);
    let what = format!("reconcile output after 20 kills, {lost} lost state dirs");
    assert_same_json_lines(
        &job.lines("out/reconcile.jsonl"),
        &orders.reference(),
        &what,
    );
}

/// The store goes down (SIGKILL) under a running job and comes back two
/// seconds later on the same port: the uploads are retried, the job ends
/// with every record exactly once and in order.
#[test]
fn a_store_down_for_a_while_delays_checkpoints_and_loses_nothing() {
    let mut s3 = S3::start();
    let mut rng = XorShift(seed() ^ 0x55);
    let input = wordcount_input(&mut rng, 100, 30_000);
    let job = wordcount_on(&s3, "down", &input);
    let mut run = job.spawn(&["-v"]);
    run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    s3.stop();
    run.wait_for_line("a retried upload", |l| l.contains("retrying in"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    s3.restart();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert_has(&stderr, "is the store reachable");
    let want = true_counts(wordcount_words(&input));
    assert_running_counts(
        &want,
        &job.read("out/counts.jsonl"),
        "through the store's outage",
    );
}

/// A missing bucket, wrong credentials and an endpoint nobody listens on
/// are one-line errors naming the URL and what to do; the secret is never
/// printed.
#[test]
fn store_errors_name_the_url_and_the_fix_in_one_line() {
    let s3 = S3::start();
    let input = "a b c\n";
    let missing = format!("s3://no-such-bucket/{}", "x");
    // The server's environment, then `changed` (a later variable wins).
    let run = |url: &str, changed: Vec<(&'static str, String)>| {
        JobDir::new(WEIR, wordcount_with_store(url), &[("input.txt", input)])
            .with_env(s3.env())
            .with_env(changed)
            .run(&[])
    };
    run(&missing, vec![]).assert_one_line_error(&[
        &missing,
        "listing manifests/",
        "check that the bucket exists",
    ]);
    let url = s3.url("x");
    let out = run(
        &url,
        vec![("AWS_SECRET_ACCESS_KEY", "not-the-secret".into())],
    );
    out.assert_one_line_error(&[&url, "access denied", "AWS_SECRET_ACCESS_KEY"]);
    assert_lacks(&out.stderr, "not-the-secret");
    let nobody = format!("http://127.0.0.1:{}", weir_tests::servers::free_port());
    run(&url, vec![("AWS_ENDPOINT_URL", nobody)])
        .assert_one_line_error(&[&url, "is the store reachable"]);
}

/// Two processes of one job on one S3 store: the conditional create of a
/// manifest (If-None-Match) fences the second writer.
#[test]
fn on_s3_a_second_process_is_fenced() {
    let s3 = S3::start();
    second_process_is_fenced(&s3.url("fence"), &s3.env());
}

// ------------------------------------------------------------- on Azure

/// The word count on Azure Blob Storage (`az://`): SIGKILLed, every other
/// kill followed by deleting the state directory, then run to its end:
/// every word's running counts exactly once and in order; the store is
/// readable with `weir checkpoints` and `weir state`; a second process of
/// the job on the same store is fenced by the conditional create.
#[test]
fn on_azure_a_job_survives_kills_with_its_state_lost_and_a_second_process_is_fenced() {
    let azure = Azurite::start();
    let mut rng = XorShift(seed() ^ 0xa2);
    let input = wordcount_input(&mut rng, 300, 30_000);
    let url = azure.url("jobs/wordcount");
    let job = JobDir::new(WEIR, wordcount_with_store(&url), &[("input.txt", &input)])
        .with_env(azure.env());
    survives_kills_and_lost_state(&job, &input, 8);
    assert_inspectable(&url, &input, &azure.env());
    second_process_is_fenced(&azure.url("fence"), &azure.env());
}

/// A missing container and a wrong key are one-line errors naming the URL
/// and Azure's settings to check; the key is never printed.
#[test]
fn azure_errors_name_the_container_and_the_settings_in_one_line() {
    let azure = Azurite::start();
    let run = |url: &str, changed: Vec<(&'static str, String)>| {
        JobDir::new(WEIR, wordcount_with_store(url), &[("input.txt", "a b\n")])
            .with_env(azure.env())
            .with_env(changed)
            .run(&[])
    };
    let missing = "az://no-such-container/x";
    run(missing, vec![]).assert_one_line_error(&[
        missing,
        "listing manifests/",
        "check that the container exists",
    ]);
    let url = azure.url("x");
    // A well-formed key (base64) that is not the account's.
    let wrong = "bm90LXRoZS1hY2NvdW50LWtleS1hdC1hbGwtbm90LWl0";
    let out = run(&url, vec![("AZURE_STORAGE_ACCOUNT_KEY", wrong.into())]);
    out.assert_one_line_error(&[&url, "access denied", "AZURE_STORAGE_ACCOUNT_KEY"]);
    assert_lacks(&out.stderr, wrong);
}
