//! Worker mode (`weir run --worker`): one job shared by several `weir`
//! processes through a Kafka consumer group, against a private Apache
//! Kafka broker, a private S3 server (SeaweedFS) for the tasks'
//! checkpoints and a private PostgreSQL. Workers are killed with SIGKILL,
//! join, leave gracefully and stall past their session timeout (a zombie
//! that comes back), while the output must hold every record exactly once
//! (and, for the word count read `read_committed`, in order). And the jobs
//! worker mode refuses, each with a one-line reason.

use std::time::Duration;

use weir::failpoint::{ENV, Failpoint};
use weir_tests::cli::Weir;
use weir_tests::counts::{assert_count_tables, assert_running_counts, true_counts};
use weir_tests::job_dir::{JobDir, signal};
use weir_tests::job_file::{Checkpoint, Cluster, Entry, JobFile, Operator, Restart, Sink, Source};
use weir_tests::jobs;
use weir_tests::orders::{Orders, assert_same_json_lines};
use weir_tests::pipeline::{XorShift, multiset, seed};
use weir_tests::plugins;
use weir_tests::running::Running;
use weir_tests::servers::{
    Clients, Kafka, KafkaMessage, Nats, Outgoing, Postgres, S3, values_text,
};
use weir_tests::text::assert_has;
use weir_tests::wait::{PATIENCE, wait_until};
use weir_tests::windows::{clicks, windows_of};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// Partitions of the input and output topics: the job's tasks.
const PARTITIONS: i32 = 4;

/// The session timeout of the workers' group: how long a silent worker
/// keeps its tasks.
const SESSION: Duration = Duration::from_secs(3);

/// The partition a word's messages go to, so that every count of one word
/// is kept by one task (FNV-1a of the word).
fn partition_of(word: &str) -> i32 {
    let hash = (word.bytes()).fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (hash % PARTITIONS as u64) as i32
}

/// `n` words of a 997-word vocabulary, spread evenly over it.
fn words(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{}", i * 7919 % 997)).collect()
}

/// Writes `words` to topic `words`, each to its [`partition_of`], keyed by
/// itself.
fn fill(kafka: &Clients, words: &[String]) {
    let parts: Vec<i32> = words.iter().map(|w| partition_of(w)).collect();
    let messages: Vec<Outgoing<'_>> = (words.iter().zip(&parts))
        .map(|(w, &p)| (Some(p), Some(w.as_bytes()), w.as_bytes(), None))
        .collect();
    kafka.produce("words", &messages);
}

/// A broker with topics `words` (holding `input`, [`fill`]) and `counts`,
/// [`PARTITIONS`] partitions each.
fn broker_with(input: &[String]) -> Kafka {
    let kafka = Kafka::start();
    kafka.create_topic("words", PARTITIONS);
    kafka.create_topic("counts", PARTITIONS);
    fill(&kafka, input);
    kafka
}

/// Word count from topic `words` (bounded, `rate` words/s per task) into
/// topic `counts`, its tasks' checkpoints on `s3`.
fn counting(kafka: &Clients, s3: &S3, rate: u64) -> JobFile {
    counting_into(
        kafka,
        s3,
        rate,
        Sink::kafka("out", &kafka.brokers(), "counts"),
    )
}

/// [`counting`] with its sink writing `write = "direct"`: into each
/// task's transactions, committed with the task's commit point.
fn counting_directly(kafka: &Clients, s3: &S3, rate: u64) -> JobFile {
    let sink = Sink::kafka("out", &kafka.brokers(), "counts").string("write", "direct");
    counting_into(kafka, s3, rate, sink)
}

/// Word count from topic `words` (bounded, `rate` words/s per task) into
/// `sink`, its tasks' checkpoints on `s3`.
fn counting_into(kafka: &Clients, s3: &S3, rate: u64, sink: Sink) -> JobFile {
    let source = Source::kafka("words", &kafka.brokers(), "words")
        .value("bounded", true)
        .rate(rate);
    jobs::word_count("shared-count", source, 1, sink)
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("workers")))
        .cluster(test_cluster())
        .restart(Restart::fixed_delay(10, "200ms"))
}

/// The `[cluster]` of the worker tests: a [`SESSION`] timeout and a 10 s
/// handover.
fn test_cluster() -> Cluster {
    Cluster::default()
        .session_timeout(&format!("{}s", SESSION.as_secs()))
        .handover_timeout("10s")
}

/// Worker `name` of `job`, its tasks' local state in its own folder.
fn worker(job: &JobDir, name: &str) -> Running {
    Running::spawn(worker_command(job, name))
}

/// `weir run --worker` of `job` as worker `name`, its stdout discarded.
fn worker_command(job: &JobDir, name: &str) -> std::process::Command {
    let state = format!("state-{name}");
    let mut run = job.command("run", &["--worker", "--state-dir", &state, "-v"]);
    run.stdout(std::process::Stdio::null());
    run
}

/// Asks every one of `workers` to leave (SIGINT), and checks that each
/// leaves its group cleanly.
fn leave<const N: usize>(workers: [(&str, Running); N]) {
    for (_, w) in &workers {
        signal(&w.child, "-INT");
    }
    for (name, w) in workers {
        let (status, stderr) = w.wait();
        assert!(status.success(), "worker {name}: {stderr}");
    }
}

/// Waits until `worker` logged `n` more completed checkpoints: the job
/// moves on.
fn checkpoints(worker: &mut Running, n: usize) {
    for _ in 0..n {
        worker.wait_for_line("a checkpoint", |l| l.contains(" complete in "));
    }
}

/// Waits until `worker` runs a task.
fn runs_a_task(worker: &mut Running) {
    worker.wait_for_line("a task", |l| l.contains("task 0-") && l.ends_with(" runs"));
}

/// The checkpoint the group's commit point holds for task 0-`p`.
fn commit_point(kafka: &Clients, p: i32) -> Option<u64> {
    let (_, metadata) = kafka.committed_with_metadata("weir-shared-count", "words", p)?;
    metadata.strip_prefix("weir:")?.parse().ok()
}

/// Waits until topic `counts`, read `read_committed`, holds `n` messages.
fn whole_output(kafka: &Clients, n: usize) {
    let start = std::time::Instant::now();
    while kafka.read_committed("counts").len() < n {
        assert!(
            start.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for the whole output"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Checks `committed` against `input`: each word's running counts exactly
/// once and in increasing order, all in one partition, keyed by the word.
fn assert_counts_in_order(input: &[String], committed: &[KafkaMessage]) {
    let text = values_text(committed);
    assert_running_counts(&true_counts(input), &text, "the committed `counts` topic");
    let mut partition_of_word = std::collections::BTreeMap::new();
    for m in committed {
        let value: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
        let word = value["word"].as_str().unwrap_or_default().to_owned();
        assert_eq!(m.key.as_deref(), Some(word.as_bytes()), "{m:?}");
        let first = *partition_of_word.entry(word.clone()).or_insert(m.partition);
        assert_eq!(first, m.partition, "word {word} in two partitions: {m:?}");
    }
}

/// Scrapes the metrics endpoint that `line` (`metrics: http://ADDR/...`)
/// names: each of the worker's tasks has its samples, labelled with its
/// task's job name (`<job>@<stage>-<p>`), each family's header once.
fn assert_task_metrics(line: &str) {
    let url = line.split("http://").nth(1).unwrap();
    let addr = url.split('/').next().unwrap().parse().unwrap();
    let reply = weir_tests::http::get(addr, "/metrics");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let tasks: std::collections::BTreeSet<&str> = (reply.body.lines())
        .filter(|l| l.starts_with("weir_records_in_total{"))
        .filter_map(|l| l.split("job=\"").nth(1)?.split('"').next())
        .collect();
    let is_task = |t: &str| {
        let task = t.split_once('@').map_or("", |(_, task)| task);
        let (stage, p) = task.split_once('-').unwrap_or_default();
        stage.parse::<u32>().is_ok() && p.parse::<u32>().is_ok()
    };
    assert!(
        !tasks.is_empty() && tasks.iter().all(|t| is_task(t)),
        "{tasks:?} in {}",
        reply.body
    );
    let headers = (reply.body.lines())
        .filter(|l| *l == "# TYPE weir_records_in_total counter")
        .count();
    assert_eq!(headers, 1, "{}", reply.body);
}

/// `weir workers` once the output is whole: two workers (c and d) own
/// every task between them, and each task's newest checkpoint in the
/// store is its final one, with nothing left to read.
fn assert_all_finished(job: &JobDir) {
    let shown = job.weir("workers", &["--json"]);
    assert!(shown.success(), "weir workers: {}", shown.stderr);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let stages = v["stages"].as_array().unwrap();
    for (s, v) in stages.iter().enumerate() {
        assert_eq!(v["stage"], s, "{v:#}");
        let members = v["group"]["members"].as_array().unwrap();
        assert_eq!(members.len(), 2, "{v:#}");
        let tasks = v["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), PARTITIONS as usize, "{v:#}");
        for t in tasks {
            assert!(t["owner"].is_string(), "{t}");
            assert_eq!(t["finished"], true, "{t}");
            assert_eq!(t["lag"], 0, "{t}");
        }
    }
    let text = job.weir("workers", &[]);
    for s in 0..stages.len() {
        assert_has(&text.stdout, &format!("stage {s}: group"));
    }
    assert_has(&text.stdout, "2 worker(s), 4 task(s)");
    assert_has(&text.stdout, "(final)");
}

/// Runs `job` on worker processes through every change of membership:
/// three workers start; one is killed with SIGKILL and a fourth joins;
/// one leaves gracefully (its tasks handed over with a checkpoint); one
/// stalls (SIGSTOP) past its session timeout while the others take its
/// tasks over, then comes back as a zombie whose tasks are lost. Returns
/// once `done` (the whole output is there) and the last two workers left
/// the group.
fn through_membership_changes(job: &JobDir, done: impl Fn() -> bool) {
    let [mut a, mut b, mut c] = ["a", "b", "c"].map(|n| worker(job, n));
    for w in [&mut a, &mut b, &mut c] {
        runs_a_task(w);
    }
    checkpoints(&mut b, 5);
    a.kill();
    let mut d = job.spawn(&[
        "--worker",
        "--state-dir",
        "state-d",
        "-v",
        "--metrics",
        "127.0.0.1:0",
    ]);
    let line = d.wait_for_line("the metrics address", |l| l.contains("metrics: http://"));
    runs_a_task(&mut d);
    checkpoints(&mut d, 5);
    assert_task_metrics(&line);

    signal(&b.child, "-INT");
    let (status, stderr) = b.wait();
    assert!(status.success(), "worker b: {stderr}");
    assert_has(&stderr, "left its group");
    assert_has(&stderr, "handed over at checkpoint");
    checkpoints(&mut d, 5);

    signal(&c.child, "-STOP");
    std::thread::sleep(SESSION + Duration::from_secs(3));
    signal(&c.child, "-CONT");
    c.wait_for_line("its tasks lost", |l| l.contains("(lost)"));

    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > PATIENCE {
            // What the two workers left did (but their checkpoints), to see why.
            let tails: Vec<String> = [("c", c), ("d", d)]
                .map(|(name, mut w)| {
                    w.child.kill().ok();
                    let (_, stderr) = w.wait();
                    let lines: Vec<&str> = stderr
                        .lines()
                        .filter(|l| !l.contains(" complete in "))
                        .collect();
                    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
                    format!("--- worker {name} ---\n{tail}")
                })
                .into();
            panic!(
                "waited {PATIENCE:?} for the whole output\n{}",
                tails.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_all_finished(job);
    leave([("c", c), ("d", d)]);
}

/// Kafka → word count → Kafka on workers through every change of
/// membership ([`through_membership_changes`]): the output, read
/// `read_committed`, holds every word's running counts exactly once and
/// in order.
#[test]
fn a_word_count_on_workers_is_exactly_once_through_a_kill_a_join_a_leave_and_a_zombie() {
    let input = words(16_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting(&kafka, &s3, 100), &[]).with_env(s3.env());
    through_membership_changes(&job, || kafka.read_committed("counts").len() >= input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
}

/// The word count of [`a_word_count_on_workers_is_exactly_once_through_a_kill_a_join_a_leave_and_a_zombie`]
/// with its Kafka sink writing directly into each task's transactions:
/// the killed worker's and the zombie's open transactions are aborted by
/// the tasks' next owners, whose output, read `read_committed`, holds
/// every word's running counts exactly once and in order.
#[test]
fn a_word_count_writing_kafka_directly_is_exactly_once_through_a_kill_a_join_a_leave_and_a_zombie()
{
    let input = words(16_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting_directly(&kafka, &s3, 100), &[]).with_env(s3.env());
    through_membership_changes(&job, || kafka.read_committed("counts").len() >= input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
}

/// Worker `name` of `job`, killed at the `at`th hit of failpoint `point`
/// in its process (any of its tasks').
fn crashing_worker(job: &JobDir, name: &str, point: Failpoint, at: u32) -> Running {
    let mut run = worker_command(job, name);
    run.env(ENV, format!("{}@{at}", point.name()));
    Running::spawn(run)
}

/// Workers killed at each step of the commit point, Kafka → word count
/// → Kafka. Worker a, alone, is killed just before a commit (its
/// checkpoint's manifest in the store, not committed in the group); c,
/// started then, drops that manifest and restores the committed
/// checkpoint before it. Worker b, joining, is killed just after a commit
/// (committed, its sinks not told); its tasks come back to c, which
/// delivers that checkpoint; then d joins. The output, read
/// `read_committed`, holds every word's running counts exactly once and
/// in order, and the group's commit point of each task names its final
/// checkpoint at its partition's end.
#[test]
fn workers_killed_at_their_commit_point_lose_and_repeat_nothing() {
    let input = words(8_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting(&kafka, &s3, 100), &[]).with_env(s3.env());
    let points = [
        Failpoint::CheckpointBeforeCommitPoint,
        Failpoint::CheckpointAfterCommitPoint,
    ];
    killed_at_the_commit_point(&job, &kafka, &input, points);
}

/// [`workers_killed_at_their_commit_point_lose_and_repeat_nothing`] with
/// the sink writing directly, so each commit point is made inside the
/// task's transaction: a is killed with its epoch's records in an open
/// transaction, b with the commit point sent into the transaction but
/// not committed. The tasks' next owner aborts both transactions before
/// it reads the committed checkpoint, and restores the one before.
#[test]
fn workers_writing_kafka_directly_killed_inside_their_commit_lose_and_repeat_nothing() {
    let input = words(8_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting_directly(&kafka, &s3, 100), &[]).with_env(s3.env());
    let points = [
        Failpoint::CheckpointBeforeCommitPoint,
        Failpoint::CheckpointMidCommitPoint,
    ];
    killed_at_the_commit_point(&job, &kafka, &input, points);
}

/// A worker writing Kafka directly, alone, killed before the commit point
/// of the first checkpoint of one of its tasks: nothing of that task was
/// ever committed, and the checkpoint's records were in the transaction
/// the next owner aborts. Worker c drops the manifest and starts the task
/// over; the output, read `read_committed`, holds every word's running
/// counts exactly once and in order.
#[test]
fn a_first_checkpoint_never_committed_is_started_over_and_nothing_is_lost() {
    let input = words(4_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting_directly(&kafka, &s3, 100), &[]).with_env(s3.env());
    let point = Failpoint::CheckpointBeforeCommitPoint;
    let mut a = crashing_worker(&job, "a", point, 1);
    runs_a_task(&mut a);
    let (status, stderr) = a.wait();
    assert!(!status.success(), "worker a: {stderr}");
    assert_has(&stderr, &point.crash_line());
    let mut c = worker(&job, "c");
    c.wait_for_line("the first checkpoint dropped", |l| {
        l.contains("was written but never committed") && l.contains("starting over")
    });
    whole_output(&kafka, input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
    leave([("c", c)]);
}

/// A worker stalled in the middle of a restore, between reading its
/// task's committed checkpoint and dropping the manifests after it, while
/// the task's new owner commits checkpoints of its own: when it goes on,
/// its claim of the task is refused and it deletes nothing. Worker a runs
/// alone; b joins and stops itself (SIGSTOP) at
/// `restore.after-commit-read` for longer than its session, so its tasks
/// go back to a, which commits more checkpoints of them; b is continued,
/// then a is killed and c joins. The output, read `read_committed`, holds
/// every word's running counts exactly once and in order (b used to delete
/// a's committed manifests, and those tasks then failed at every restore).
/// Checkpoints are retained long enough that the one b read is still
/// there when it goes on.
#[test]
fn a_worker_stalled_mid_restore_deletes_nothing_of_the_next_owner() {
    let input = words(8_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let retained = Checkpoint::every("200ms").retain(1000);
    let file = counting(&kafka, &s3, 100).checkpoint(retained.store(&s3.url("workers")));
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    let mut a = worker(&job, "a");
    runs_a_task(&mut a);
    checkpoints(&mut a, 5);
    let point = Failpoint::RestoreAfterCommitRead;
    let mut run = worker_command(&job, "b");
    run.env(ENV, format!("{}:stop", point.name()));
    let mut b = Running::spawn(run);
    let assigned = b.wait_for_line("b's tasks", |l| {
        l.contains("assigns partition(s) [") && !l.ends_with("[]")
    });
    let tasks: Vec<i32> = (assigned.rsplit('[').next().unwrap().trim_end_matches(']'))
        .split(", ")
        .map(|p| p.parse().unwrap())
        .collect();
    b.wait_for_line("b stopped mid-restore", |l| l == point.stop_line());
    let stopped = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    // What b read: nobody commits b's tasks while b is stopped and holds them.
    let read: Vec<Option<u64>> = tasks.iter().map(|&p| commit_point(&kafka, p)).collect();
    // a runs each of b's tasks again once b's session expired (a line of
    // a's from after b stopped, for each of those tasks, in any order).
    let mut left: Vec<String> = tasks.iter().map(|p| format!("task 0-{p} runs")).collect();
    while !left.is_empty() {
        let line = a.wait_for_line("a running b's tasks again", |l| {
            let after = weir_tests::running::log_time(l).is_some_and(|t| t >= stopped);
            after && left.iter().any(|task| l.ends_with(task.as_str()))
        });
        left.retain(|task| !line.ends_with(task.as_str()));
    }
    // Until a has committed a later checkpoint of each of b's tasks (a's
    // checkpoint lines do not say whose task they are).
    wait_until("a's commits of b's tasks", PATIENCE, || {
        let later = |(&p, &was): (&i32, &Option<u64>)| commit_point(&kafka, p) > was;
        tasks.iter().zip(&read).all(later).then_some(())
    });
    signal(&b.child, "-CONT");
    let refused = b.wait_for_line("b's refused claim", |l| {
        l.contains("not restoring (and deleting no manifest)") || l.contains("dropping it")
    });
    assert!(
        !refused.contains("dropping it"),
        "{refused}\nb's tasks {tasks:?}, read {read:?}; b's stderr:\n{}",
        b.seen().join("\n")
    );
    a.kill();
    let c = worker(&job, "c");
    whole_output(&kafka, input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
    leave([("b", b), ("c", c)]);
}

/// A Kafka sink switched from `write = "staged"` to `"direct"` and back
/// between runs of its workers. Worker a (staged) is killed just after a
/// commit point, so a committed checkpoint's staged output is not in the
/// topic yet; b, run with the sink writing directly, delivers it before
/// it writes anything directly, then leaves (its tasks handed over at a
/// checkpoint committed in their transactions); c, with the sink staged
/// again, goes on from that checkpoint. The output, read
/// `read_committed`, holds every word's running counts exactly once and
/// in order.
#[test]
fn a_kafka_sink_switched_between_staged_and_direct_writes_loses_and_repeats_nothing() {
    let input = words(8_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, counting(&kafka, &s3, 100), &[]).with_env(s3.env());
    let point = Failpoint::CheckpointAfterCommitPoint;
    let mut a = crashing_worker(&job, "a", point, 5);
    runs_a_task(&mut a);
    let (status, stderr) = a.wait();
    assert!(!status.success(), "worker a: {stderr}");
    assert_has(&stderr, &point.crash_line());

    job.write_job(counting_directly(&kafka, &s3, 100));
    let mut b = worker(&job, "b");
    b.wait_for_line("the staged output delivered", |l| {
        l.contains("delivering the output staged before write = \"direct\"")
    });
    checkpoints(&mut b, 5);
    job.write_job(counting(&kafka, &s3, 100));
    leave([("b", b)]);

    let c = worker(&job, "c");
    whole_output(&kafka, input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
    leave([("c", c)]);
}

/// Runs the word count `job` of `input` with worker a, alone, killed at
/// the 5th hit of `points[0]`, then c, then b joining and killed at the
/// 5th hit of `points[1]`, then d; checks the output and the commit
/// points.
fn killed_at_the_commit_point(
    job: &JobDir,
    kafka: &Kafka,
    input: &[String],
    points: [Failpoint; 2],
) {
    let crash = |name: &str, point: Failpoint| {
        let mut w = crashing_worker(job, name, point, 5);
        runs_a_task(&mut w);
        let (status, stderr) = w.wait();
        assert!(!status.success(), "worker {name}: {stderr}");
        assert_has(&stderr, &point.crash_line());
    };
    crash("a", points[0]);
    let mut c = worker(job, "c");
    c.wait_for_line("the uncommitted checkpoint dropped", |l| {
        l.contains("was written but never committed") && l.contains("dropping it")
    });
    checkpoints(&mut c, 5);
    crash("b", points[1]);
    c.wait_for_line("b's tasks back", |l| {
        l.contains("assigns partition(s)") && assigned_in(l).len() == 2
    });
    let d = worker(job, "d");
    whole_output(kafka, input.len());
    assert_counts_in_order(input, &kafka.read_committed("counts"));
    assert_all_finished(job);
    let shown = job.weir("workers", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let ends = kafka.offsets("words", PARTITIONS);
    for (p, t) in v["stages"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let point = kafka.committed_with_metadata("weir-shared-count", "words", p as i32);
        let last = t["checkpoint"].as_u64().unwrap();
        assert_eq!(point, Some((ends[p].1, format!("weir:{last}"))), "{t}");
        assert!(t["uncommitted"].is_null(), "{t}");
    }
    leave([("c", c), ("d", d)]);
}

/// Kafka → split → repartition → word count → Kafka on workers through
/// every change of membership: the input lines, four words each, go to
/// the partitions of topic `lines` in turn with no key, so each word's
/// occurrences are spread over every stage-0 task and only the
/// repartition topic brings them to one counting task. The output, read
/// `read_committed`, holds every word's running counts exactly once and
/// in order; every stage of `weir workers` ends finished; the repartition
/// topic's released records are deleted.
#[test]
fn a_two_stage_word_count_on_workers_is_exactly_once_through_membership_changes() {
    let input = words(16_000);
    let kafka = lines_broker(&input);
    let s3 = S3::start();
    let job = JobDir::new(WEIR, two_stage(&kafka, &s3, 25), &[]).with_env(s3.env());
    through_membership_changes(&job, || kafka.read_committed("counts").len() >= input.len());
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
    // The downstream tasks deleted what their checkpoints released.
    let topic = "weir-two-stage-count-split-repartition";
    for (p, (low, high)) in kafka.offsets(topic, PARTITIONS).into_iter().enumerate() {
        assert!(
            0 < low && low <= high,
            "partition {p} of {topic}: {low}..{high}"
        );
    }
}

/// A broker with topics `lines` (`words`, four a line, spread over the
/// partitions in turn with no key) and `counts`.
fn lines_broker(words: &[String]) -> Kafka {
    let kafka = Kafka::start();
    kafka.create_topic("lines", PARTITIONS);
    kafka.create_topic("counts", PARTITIONS);
    let lines: Vec<String> = words.chunks(4).map(|c| c.join(" ")).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    kafka.produce_values("lines", PARTITIONS, &lines);
    kafka
}

/// Kafka `lines` (bounded, `rate` lines/s per task) → split → repartition
/// → word count → Kafka `counts`, its tasks' checkpoints on `s3`.
fn two_stage(kafka: &Clients, s3: &S3, rate: u64) -> JobFile {
    let source = Source::kafka("lines", &kafka.brokers(), "lines")
        .value("bounded", true)
        .rate(rate);
    JobFile::new("two-stage")
        .source(source)
        .operator(Operator::new("split", plugins::SPLIT).inputs(&["lines"]))
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["split"])
                .exchange("repartition"),
        )
        .sink(Sink::kafka("out", &kafka.brokers(), "counts").input("count"))
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("workers")))
        .cluster(test_cluster())
        .restart(Restart::fixed_delay(10, "200ms"))
}

/// `weir run --worker --ui`: the worker's dashboard lists its tasks of
/// both stages (as a page and as JSON), and each task's own dashboard,
/// under `/tasks/<task>/`, draws that task's job in a browser.
#[test]
fn a_worker_dashboard_lists_its_tasks_and_shows_each_ones_job() {
    let kafka = lines_broker(&words(4_000));
    let s3 = S3::start();
    let job = JobDir::new(WEIR, two_stage(&kafka, &s3, 5), &[]).with_env(s3.env());
    let mut w = job.spawn(&["--worker", "-v", "--ui", "127.0.0.1:0"]);
    let line = w.wait_for_line("the dashboard's address", |l| {
        l.contains("dashboard: http://")
    });
    let addr: std::net::SocketAddr = (line.split("http://").nth(1))
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let get = |path: &str| weir_tests::http::get(addr, path);
    let all: Vec<String> = (0..2)
        .flat_map(|s| (0..PARTITIONS).map(move |p| format!("{s}-{p}")))
        .collect();
    let start = std::time::Instant::now();
    let listed = loop {
        let reply = get("/api/tasks");
        assert_eq!(reply.status, 200, "{}", reply.body);
        let v: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        let mut tasks: Vec<String> = (v.as_array().unwrap().iter())
            .map(|t| t["task"].as_str().unwrap().to_owned())
            .collect();
        tasks.sort();
        if tasks == all {
            break v;
        }
        assert!(start.elapsed() < PATIENCE, "tasks listed: {v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let one = &listed.as_array().unwrap()[0];
    let task = one["task"].as_str().unwrap();
    assert_eq!(one["job"], format!("two-stage@{task}"));
    assert_eq!(one["url"], format!("/tasks/{task}/"));
    let index = get("/");
    assert_eq!(index.status, 200);
    for t in &all {
        assert_has(&index.body, &format!("<a href=\"/tasks/{t}/\">{t}</a>"));
    }
    let api = get("/tasks/1-2/api/job");
    assert_eq!(api.status, 200, "{}", api.body);
    assert_has(&api.body, "\"count-from-split\"");
    assert_has(&get("/tasks/1-2").body, "url=/tasks/1-2/");
    let missing = get("/tasks/7-7/api/job");
    assert_eq!(missing.status, 404);
    assert_has(&missing.body, "this worker runs no task `7-7`");

    let browser = weir_tests::browser::Browser::launch().unwrap_or_else(|e| panic!("{e}"));
    let page = browser.open(&format!("http://{addr}/tasks/1-2/")).unwrap();
    let ids = page
        .wait_for(
            "the task's graph",
            "(() => { const ids = [...document.querySelectorAll('#graph svg [data-node-id]')].map(n => n.dataset.nodeId).sort(); return ids.length === 3 && ids; })()",
            PATIENCE,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids, serde_json::json!(["count", "count-from-split", "out"]));
    let name = page.eval("document.getElementById('job-name').textContent");
    assert_eq!(name.unwrap(), "two-stage@1-2");
    assert!(
        page.console_errors().is_empty(),
        "{:?}",
        page.console_errors()
    );
    signal(&w.child, "-INT");
    let (status, stderr) = w.wait();
    assert!(status.success(), "{stderr}");
}
/// Kafka → repartition → `window-count` → Kafka on workers through every
/// change of membership: event time crosses the stage boundary. The
/// clicks, out of order by up to 1.5 s, go to the partitions of topic
/// `clicks` in turn, so each user's clicks reach every stage-0 task; the
/// repartition topic brings them to one counting task, whose watermark is
/// the least of the stage-0 tasks'. The windows, read `read_committed`,
/// are exactly those a batch computation gives, each once and each
/// user's in time order (so none fired before all its clicks were in),
/// the last ones fired by the end of input crossing the topic; the
/// replayed late clicks go to `late`, each once.
#[test]
fn event_time_crosses_a_repartition_on_workers_through_membership_changes() {
    let (text, counts, late) = clicks(&mut XorShift(seed()), 8_000);
    let kafka = Kafka::start();
    // The clicks' timestamps are months old: no time retention.
    for topic in ["clicks", "windows", "late"] {
        kafka.create_topic_with(topic, PARTITIONS, &[("retention.ms", "-1")]);
    }
    let lines: Vec<&str> = text.lines().collect();
    kafka.produce_values("clicks", PARTITIONS, &lines);
    let s3 = S3::start();
    let source = Source::kafka("clicks", &kafka.brokers(), "clicks")
        .value("bounded", true)
        .format("jsonl")
        .key("user")
        .timestamp("ts")
        .value(
            "watermark",
            r#"{ max_out_of_orderness = "2s", interval = "0s" }"#,
        )
        .rate(50);
    let file = JobFile::new("two-stage-windows")
        .source(source)
        .operator(
            Operator::new("count", plugins::WINDOW_COUNT)
                .inputs(&["clicks"])
                .exchange("repartition")
                .config(r#"{ size = "1s" }"#),
        )
        .sink(Sink::kafka("windows", &kafka.brokers(), "windows").input("count"))
        .sink(Sink::kafka("late", &kafka.brokers(), "late").input("count.late"))
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("workers")))
        .cluster(test_cluster())
        .restart(Restart::fixed_delay(10, "200ms"));
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    through_membership_changes(&job, || {
        kafka.read_committed("windows").len() >= counts.len()
    });
    assert_eq!(
        windows_of(&values_text(&kafka.read_committed("windows"))),
        counts
    );
    let late_out = values_text(&kafka.read_committed("late"));
    assert_eq!(multiset(&late_out), multiset(&(late.join("\n") + "\n")));
}

/// `rows` (order number, amount) as jsonl messages of `topic`, each in
/// its key's [`partition_of`]: the two sides of an order meet in one task.
fn fill_orders(kafka: &Clients, topic: &str, rows: &[(String, String)]) {
    let values: Vec<String> = (rows.iter())
        .map(|(k, v)| serde_json::json!({"order_no": k, "amount": v}).to_string())
        .collect();
    let messages: Vec<Outgoing<'_>> = (rows.iter().zip(&values))
        .map(|((k, _), v)| {
            (
                Some(partition_of(k)),
                Some(k.as_bytes()),
                v.as_bytes(),
                None,
            )
        })
        .collect();
    kafka.produce(topic, &messages);
}

/// Kafka (two co-partitioned topics) → reconcile → PostgreSQL on workers
/// through every change of membership: the table holds every order's
/// classification exactly once, as computed from the orders.
#[test]
fn a_reconcile_on_workers_into_postgres_is_exactly_once_through_membership_changes() {
    let mut rng = XorShift(seed() ^ 0x42);
    let orders = Orders::generate(&mut rng, 8000);
    let kafka = Kafka::start();
    for topic in ["payments", "bank"] {
        kafka.create_topic(topic, PARTITIONS);
    }
    fill_orders(&kafka, "payments", &orders.a);
    fill_orders(&kafka, "bank", &orders.b);
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE reconciled (key text, status text, a double precision, b double precision)",
    );
    let s3 = S3::start();
    let side = |id: &str| {
        Source::kafka(id, &kafka.brokers(), id)
            .format("jsonl")
            .key("order_no")
            .value("bounded", true)
            .rate(60)
    };
    let file = JobFile::new("shared-reconcile")
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("reconcile")))
        .cluster(test_cluster())
        .restart(Restart::fixed_delay(10, "200ms"))
        .source(side("payments"))
        .source(side("bank"))
        .operator(
            Operator::new("reconcile", plugins::RECONCILE)
                .ports(&[("a", "payments"), ("b", "bank")])
                .config("{ tolerance = 0.005 }"),
        )
        .sink(Sink::postgres("out", &pg.url(), "reconciled").input("reconcile"));
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    let want = orders.reference();
    let expected: usize = want.values().sum();
    let rows = || {
        pg.psql("SELECT count(*) FROM reconciled")
            .parse::<usize>()
            .unwrap()
    };
    through_membership_changes(&job, || rows() >= expected);
    // Each row as the plugin's JSON (amounts as floats, a missing one null).
    let amount = |text: &str| text.parse::<f64>().ok();
    let table: String = (pg.psql("SELECT key, status, a, b FROM reconciled").lines())
        .map(|row| {
            let f: Vec<&str> = row.split('|').collect();
            let (a, b) = (amount(f[2]), amount(f[3]));
            format!(
                "{}\n",
                serde_json::json!({"key": f[0], "status": f[1], "a": a, "b": b})
            )
        })
        .collect();
    assert_same_json_lines(&multiset(&table), &want, "the reconciled table");
}

/// A job worker mode cannot split is refused before anything starts, with
/// what to change.
#[test]
fn jobs_worker_mode_cannot_split_are_refused_in_one_line() {
    let brokers = "127.0.0.1:1";
    let base = || {
        jobs::word_count(
            "refused",
            Source::kafka("words", brokers, "words"),
            1,
            Sink::kafka("out", brokers, "counts"),
        )
        .checkpoint(Checkpoint::every("1s").store("file:///tmp/weir-refused"))
    };
    let cases: Vec<(JobFile, &[&str])> = vec![
        (
            base().checkpoint(Checkpoint::every("1s")),
            &["worker mode", "set [checkpoint] store"],
        ),
        (
            base().source_with("words", |_| Source::generator("words", 10)),
            &[
                "source `words` is type = \"generator\"",
                "reads Kafka sources",
            ],
        ),
        (
            base()
                .source(Source::nats("more", "nats://127.0.0.1:1", "S"))
                .operator_with("count", |o| o.inputs(&["words", "more"])),
            &["source `words` is Kafka and source `more` NATS", "not both"],
        ),
        (
            base().source_with("words", |_| {
                Source::nats("words", "nats://127.0.0.1:1", "S")
            }),
            &["reads no Kafka topic", "set [cluster] brokers"],
        ),
        (
            base().sink_with("out", |_| Sink::file("out", "out.txt").input("count")),
            &["sink `out` writes on the machine that runs it"],
        ),
        (
            base().operator_with("count", |o| o.parallelism(2)),
            &["operator `count` sets parallelism = 2", "remove it"],
        ),
        (
            base().source_with("words", |s| s.value("partitions", "[0]")),
            &["sets `partitions`", "the group assigns them"],
        ),
        (
            // Sink `more` joins `count` and `words` into one stage.
            base()
                .operator_with("count", |o| o.exchange("repartition"))
                .sink(
                    Sink::kafka("more", brokers, "counts").value("input", "[\"count\", \"words\"]"),
                ),
            &[
                "operator `count` takes `words` through a repartition",
                "local edges join the two into one stage",
            ],
        ),
        (
            base()
                .source_with("words", |_| {
                    Source::nats("words", "nats://127.0.0.1:1", "S")
                })
                .operator_with("count", |o| o.exchange("repartition"))
                .cluster(Cluster::default().brokers(brokers)),
            &[
                "operator `count` sets exchange = \"repartition\"",
                "a job of NATS sources is one task",
            ],
        ),
    ];
    for (file, words) in cases {
        let job = JobDir::new(WEIR, file, &[]);
        job.run(&["--worker"]).assert_one_line_error(words);
    }
}

/// The partitions a worker's log line `worker: the group of stage 0 assigns
/// partition(s) [1, 3]` names.
fn assigned_in(line: &str) -> Vec<i32> {
    let list = line.split('[').nth(1).and_then(|l| l.split(']').next());
    (list.unwrap_or_default().split(','))
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

/// Static membership (`--instance-id`): a worker stopped (its tasks
/// handed over with a checkpoint) and started again with its id within
/// the session timeout gets the same partitions back; a second process started with a running worker's
/// id fences one of the two, which exits with a one-line reason. The
/// output holds every word's running counts exactly once and in order.
#[test]
fn a_worker_restarted_with_its_instance_id_gets_its_tasks_back_without_a_rebalance() {
    let input = words(8000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let file = counting(&kafka, &s3, 100).cluster(
        Cluster::default()
            .session_timeout("10s")
            .handover_timeout("10s"),
    );
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    let named = |id: &str| {
        let state = format!("state-{id}");
        job.spawn(&["--worker", "--instance-id", id, "--state-dir", &state, "-v"])
    };
    // Under cooperative rebalancing a joining worker's first assignment
    // may be empty; its partitions come in the next round.
    let assigns = |l: &str| {
        l.contains("the group of stage 0 assigns partition(s)") && !assigned_in(l).is_empty()
    };
    let mut a = named("a");
    runs_a_task(&mut a);
    let mut b = named("b");
    let of_b = assigned_in(&b.wait_for_line("b's partitions", assigns));
    checkpoints(&mut b, 3);
    let of_a: Vec<i32> = (0..PARTITIONS).filter(|p| !of_b.contains(p)).collect();

    signal(&a.child, "-INT");
    let (status, stderr) = a.wait();
    assert!(status.success(), "worker a: {stderr}");
    assert_has(&stderr, "handed over at checkpoint");
    let mut a = named("a");
    let again = assigned_in(&a.wait_for_line("a's partitions again", assigns));
    assert_eq!(again, of_a, "worker a restarted with its id");
    runs_a_task(&mut a);
    checkpoints(&mut a, 3);

    // A second "b": one of the two is fenced and exits.
    let c = named("b");
    let (fenced, survivor) = wait_until_one_exits(b, c);
    assert_eq!(fenced.0.code(), Some(1), "{}", fenced.1);
    assert_has(&fenced.1, "same --instance-id");

    let start = std::time::Instant::now();
    while kafka.read_committed("counts").len() < input.len() {
        assert!(start.elapsed() < PATIENCE, "the output stayed incomplete");
        std::thread::sleep(Duration::from_millis(200));
    }
    leave([("a", a), ("b", survivor)]);
    assert_counts_in_order(&input, &kafka.read_committed("counts"));
}

/// Waits until one of `x` and `y` exits; returns its status and stderr,
/// and the other, still running.
fn wait_until_one_exits(
    mut x: Running,
    mut y: Running,
) -> ((std::process::ExitStatus, String), Running) {
    let start = std::time::Instant::now();
    loop {
        if x.child.try_wait().unwrap().is_some() {
            return (x.wait(), y);
        }
        if y.child.try_wait().unwrap().is_some() {
            return (y.wait(), x);
        }
        assert!(
            start.elapsed() < PATIENCE,
            "neither worker with one id exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A job of a NATS source is one task, leased through a one-partition
/// topic on `[cluster] brokers`: NATS → word count → PostgreSQL on two
/// workers; the one running it is killed with SIGKILL and the other takes
/// it over from its last checkpoint; a third joins and the second leaves,
/// handing it over. The tables hold the true totals and every running
/// count exactly once, each word's in order.
#[test]
fn a_nats_job_on_workers_is_one_task_taken_over_exactly_once() {
    let input = words(6000);
    let nats = Nats::start();
    nats.create_stream("WORDS", &["words.>"]);
    let payloads: Vec<&[u8]> = input.iter().map(|w| w.as_bytes()).collect();
    nats.publish("words.in", &payloads);
    let kafka = Kafka::start();
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE totals (word text PRIMARY KEY, count bigint NOT NULL);\
         CREATE TABLE events (id bigserial PRIMARY KEY, word text NOT NULL, count bigint NOT NULL);",
    );
    let s3 = S3::start();
    let source = Source::nats("words", &nats.url(), "WORDS")
        .value("bounded", true)
        .rate(400);
    let totals = Sink::postgres("totals", &pg.url(), "totals")
        .string("mode", "upsert")
        .value("key", "[\"word\"]");
    let file = jobs::word_count("leased-count", source, 1, totals)
        .sink(Sink::postgres("events", &pg.url(), "events").input("count"))
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("leased")))
        .cluster(test_cluster().brokers(&kafka.brokers()))
        .restart(Restart::fixed_delay(10, "200ms"));
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    let mut a = worker(&job, "a");
    runs_a_task(&mut a);
    let mut b = worker(&job, "b");
    checkpoints(&mut a, 5);
    a.kill();
    runs_a_task(&mut b);
    checkpoints(&mut b, 5);
    let mut c = worker(&job, "c");
    std::thread::sleep(Duration::from_secs(1));
    signal(&b.child, "-INT");
    let (status, stderr) = b.wait();
    assert!(status.success(), "worker b: {stderr}");
    assert_has(&stderr, "handed over at checkpoint");
    runs_a_task(&mut c);
    let rows = || {
        pg.psql("SELECT count(*) FROM events")
            .parse::<usize>()
            .unwrap()
    };
    let start = std::time::Instant::now();
    while rows() < input.len() {
        assert!(
            start.elapsed() < PATIENCE,
            "the events table stayed incomplete"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(&c.child, "-INT");
    let (status, stderr) = c.wait();
    assert!(status.success(), "worker c: {stderr}");

    assert_count_tables(&true_counts(&input), |sql| pg.psql(sql));
}

/// Change kinds cross a repartition topic: `changelog` turns lines into
/// inserts, updates, deletes and a truncate, a second `changelog` behind
/// the repartition passes them on as it got them, and the output topic
/// (an append topic: kinds in `op`) shows every kind; the truncate went to
/// every downstream task, so it comes out once per partition.
#[test]
fn change_kinds_cross_a_repartition_topic_on_workers() {
    let kafka = Kafka::start();
    // The input in order in partition 0 of 4: four stage-0 tasks, and a
    // repartition topic of 4 partitions.
    kafka.create_topic("changes-in", PARTITIONS);
    kafka.create_topic("changes-out", 1);
    let lines = [
        "insert a",
        "update-before a",
        "update-after a",
        "delete a",
        "truncate t",
        "insert b",
    ];
    let messages: Vec<Outgoing<'_>> = (lines.iter())
        .map(|l| (Some(0), None, l.as_bytes(), None))
        .collect();
    kafka.produce("changes-in", &messages);
    let s3 = S3::start();
    let job = JobFile::new("changes-workers")
        .source(Source::kafka("in", &kafka.brokers(), "changes-in").value("bounded", true))
        .operator(Operator::new("changes", plugins::GUEST_CHANGELOG).inputs(&["in"]))
        .operator(
            Operator::new("pass", plugins::GUEST_CHANGELOG)
                .inputs(&["changes"])
                .exchange("repartition"),
        )
        .sink(Sink::kafka("out", &kafka.brokers(), "changes-out").input("pass"))
        .checkpoint(Checkpoint::every("200ms").store(&s3.url("workers")))
        .cluster(test_cluster());
    let job = JobDir::new(WEIR, job, &[]).with_env(s3.env());
    let w = worker(&job, "a");
    let want = lines.len() - 1 + PARTITIONS as usize;
    weir_tests::wait::wait_until("the changes to come out", PATIENCE, || {
        (kafka.read_committed("changes-out").len() >= want).then_some(())
    });
    leave([("a", w)]);
    let out: Vec<String> = (kafka.read_committed("changes-out").iter())
        .map(|m| m.text())
        .collect();
    let of = |word: &str| -> Vec<&str> {
        let needle = format!("\"word\":\"{word}\"");
        out.iter()
            .filter(|l| l.contains(&needle))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(
        of("a"),
        [
            r#"{"word":"a"}"#,
            r#"{"op":"update-before","word":"a"}"#,
            r#"{"op":"update-after","word":"a"}"#,
            r#"{"op":"delete","word":"a"}"#,
        ]
    );
    assert_eq!(
        of("t"),
        vec![r#"{"op":"truncate","word":"t"}"#; PARTITIONS as usize]
    );
    assert_eq!(of("b"), [r#"{"word":"b"}"#]);
    assert_eq!(out.len(), want, "{out:?}");
}

/// Recorded input on workers: every task records into its own store, and
/// once the workers left, `weir shadow --task` and `weir replay --task`
/// read each task's object store (the job's own state directory was never
/// written: each worker has its own). Per task, the shadow of
/// word-count-v2 covers the task's epochs from the job's start, across the
/// handovers of the second worker's join: exactly the input words of its
/// partition, each record changed to v2's form with the oracle's count;
/// and each of those epochs replays byte for byte.
#[test]
fn each_task_shadows_and_replays_its_recorded_input_from_the_store() {
    let input = words(2_000);
    let kafka = broker_with(&input);
    let s3 = S3::start();
    let file = counting(&kafka, &s3, 1_000).operator_with("count", |o: Operator| {
        o.string("record_inputs", "1000 checkpoints")
    });
    let job = JobDir::new(WEIR, file, &[]).with_env(s3.env());
    let mut a = worker(&job, "a");
    runs_a_task(&mut a);
    let b = worker(&job, "b");
    whole_output(&kafka, input.len());
    leave([("a", a), ("b", b)]);
    assert!(!job.state_dir().exists());
    for p in 0..PARTITIONS {
        let task = format!("0-{p}");
        let mut seen = std::collections::BTreeMap::new();
        let mut want: Vec<String> = (input.iter())
            .filter(|w| partition_of(w) == p)
            .map(|w| {
                let n = seen.entry(w).or_insert(0u64);
                *n += 1;
                format!(r#"{{"w":"{w}","n":{n},"v":2}}"#)
            })
            .collect();
        let shadow = job.weir(
            "shadow",
            &[
                "--task",
                &task,
                "--operator",
                "count",
                "--with",
                plugins::WORD_COUNT_V2,
                "--limit",
                "100000",
                "--json",
            ],
        );
        assert_eq!(shadow.code(), Some(0), "{}{}", shadow.stdout, shadow.stderr);
        assert_has(&shadow.stderr, &format!("workers/tasks/{task}"));
        let r: serde_json::Value = serde_json::from_str(&shadow.stdout).unwrap();
        assert_eq!(r["from_checkpoint"], serde_json::Value::Null, "{task}: {r}");
        assert_eq!(r["v1_reproduced"], true, "{task}");
        assert_eq!(r["v1"]["records_in"], want.len(), "task {task}");
        let out = &r["outputs"][0];
        assert_eq!(
            (&out["same"], &out["changed"]),
            (&0.into(), &want.len().into())
        );
        let mut got: Vec<String> = (out["differences"].as_array().unwrap().iter())
            .map(|d| d["v2"]["value"].as_str().unwrap().to_owned())
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "task {task}");
        let mut replayed = 0;
        for epoch in r["epochs"].as_array().unwrap() {
            let epoch = epoch.to_string();
            let args = [
                "--task",
                &task,
                "--operator",
                "count",
                "--checkpoint",
                &epoch,
            ];
            let out = job.weir("replay", &[&args[..], &["--json"]].concat());
            assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
            let replay: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
            assert_eq!(replay["identical"], true, "{replay}");
            replayed += replay["plugin"]["records_in"].as_u64().unwrap();
        }
        assert_eq!(replayed, want.len() as u64, "task {task}");
    }
    // Without a task, nothing is read, and the error says to name one.
    let out = job.weir(
        "shadow",
        &["--operator", "count", "--with", plugins::WORD_COUNT_V2],
    );
    assert!(!out.success(), "{}", out.stdout);
    assert_has(&out.stderr, "name one with --task <stage>-<partition>");
    let out = job.weir(
        "replay",
        &["--task", "3", "--operator", "count", "--checkpoint", "1"],
    );
    assert_has(&out.stderr, "`3` is not a task: write <stage>-<partition>");
}
