//! `workers`: one job shared by 1, 2 and 3 `weir run --worker` processes
//! on one Kafka topic, and the time a killed worker's tasks take to run
//! elsewhere.
//!
//! - Scaling: a keyed word count, Kafka (6 partitions: 6 tasks) → Kafka,
//!   exactly-once, its tasks' checkpoints (every second) on the S3 server;
//!   the time from the workers' start until every task finished, and the
//!   CPU the workers used per record, for 1, 2 and 3 workers. This machine
//!   has two cores shared with the broker and the S3 server: the ratio
//!   says what one more process costs or brings here, not on a cluster.
//! - Failover: two workers run the same job, throttled; one is killed
//!   with SIGKILL; the time until the other starts one of its tasks,
//!   against the group's session timeout (the least it can take).
//!
//! The cluster is a private one-node Apache Kafka broker and the store a
//! private SeaweedFS S3 server, both on loopback
//! (`weir_tests::servers`).

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::json;
use weir_tests::job_file::{Checkpoint, Cluster, Entry, JobFile, Operator, Sink, Source};
use weir_tests::servers::{Kafka, S3};

use crate::kafka::read_partitions;
use crate::{Report, Settings, Target};

/// Partitions of the input and output topics: the job's tasks.
const PARTITIONS: i32 = 6;

/// Distinct words of the input.
const WORDS: u64 = 10_000;

/// The group's session timeout in the failover case.
const SESSION: Duration = Duration::from_secs(3);

/// A running worker: its process and its stderr lines, timestamped.
struct Worker {
    child: Child,
    lines: Receiver<(Instant, String)>,
}

impl Worker {
    /// `weir run --worker` of the job in `dir`, its local state in
    /// `state-<name>`, with `env`.
    fn start(
        settings: &Settings,
        dir: &Path,
        name: &str,
        env: &[(&'static str, String)],
    ) -> anyhow::Result<Worker> {
        let mut child = Command::new(settings.weir_binary()?)
            .current_dir(dir)
            .args(["run", "job.toml", "--worker", "-v", "--state-dir"])
            .arg(format!("state-{name}"))
            .envs(env.iter().cloned())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, lines) = channel();
        let stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Worker { child, lines })
    }

    /// Waits up to `timeout` for a line `pred` accepts; its time.
    fn wait_for(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) if pred(&line) => return Ok(at),
                Ok(_) => {}
                Err(_) => anyhow::bail!("a worker did not log what was awaited within {timeout:?}"),
            }
        }
    }

    /// User and system CPU time the process used so far.
    fn cpu(&self) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        // utime and stime: the 14th and 15th fields, 12th and 13th after `)`.
        let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Ok(Duration::from_millis(ticks * 1000 / per_second))
    }

    /// Asks the worker to leave (SIGINT) and waits for it.
    fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait()?;
        anyhow::ensure!(status.success(), "a worker exited with {status}");
        Ok(())
    }
}

/// The word count job of `name`, reading topic `in` (at `rate` per task
/// when given) into `output` (its sink's `write` as given), checkpoints
/// on `s3` under `name`.
fn job(
    settings: &Settings,
    (kafka, s3): (&Kafka, &S3),
    name: &str,
    (output, write): (&str, &str),
    rate: Option<u64>,
) -> anyhow::Result<JobFile> {
    let source = Source::kafka("in", &kafka.brokers(), "in")
        .value("bounded", true)
        .throttle(rate);
    let file = JobFile::new(name)
        .source(source)
        .operator(Operator::new("count", settings.plugin("word-count")?).inputs(&["in"]))
        .sink(
            Sink::kafka("out", &kafka.brokers(), output)
                .input("count")
                .string("write", write),
        )
        .checkpoint(Checkpoint::every("1s").store(&s3.url(name)))
        .cluster(
            Cluster::default()
                .session_timeout(&format!("{}s", SESSION.as_secs()))
                .handover_timeout("10s"),
        );
    Ok(file)
}

/// Writes `n` words to `topic`, each word to one partition.
fn fill(kafka: &Kafka, topic: &str, n: u64) {
    let words: Vec<(i32, String)> = (0..n)
        .map(|i| {
            let w = i * 7919 % WORDS;
            ((w % PARTITIONS as u64) as i32, format!("w{w}"))
        })
        .collect();
    for chunk in words.chunks(100_000) {
        let messages: Vec<_> = (chunk.iter())
            .map(|(p, w)| (Some(*p), Some(w.as_bytes()), w.as_bytes(), None))
            .collect();
        kafka.produce(topic, &messages);
    }
}

/// The task of stage 0 a worker's log line says finished (`worker: task
/// 0-3 finished ...`), if it says so.
fn finished_task(line: &str) -> Option<&str> {
    let rest = &line[line.find("worker: task ")? + "worker: task ".len()..];
    let (task, after) = rest.split_once(' ')?;
    (task.starts_with("0-") && after.starts_with("finished")).then_some(task)
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.records_or(1_200_000, 120_000, 6_000);
    let (mut report, scratch) = settings.start("workers", "records/s")?;
    report.params(json!({"records": n, "partitions": PARTITIONS}));
    let dir = scratch.path();
    settings.say("workers: starting a private Kafka broker and S3 server");
    let kafka = Kafka::start();
    let s3 = S3::start();
    kafka.create_topic("in", PARTITIONS);
    fill(&kafka, "in", n);

    // The sink stages its epochs in the object store, or writes directly
    // into each task's transactions (one and two workers).
    for (k, write) in [
        (1usize, "staged"),
        (2, "staged"),
        (3, "staged"),
        (1, "direct"),
        (2, "direct"),
    ] {
        settings.say(&format!("workers: {k} worker(s), write = {write}"));
        let (name, output) = (format!("scale-{k}-{write}"), format!("out-{k}-{write}"));
        kafka.create_topic(&output, PARTITIONS);
        let folder = dir.join(&name);
        std::fs::create_dir_all(&folder)?;
        let file = job(settings, (&kafka, &s3), &name, (&output, write), None)?;
        std::fs::write(folder.join("job.toml"), file.to_string())?;
        let started = Instant::now();
        let workers = (0..k)
            .map(|i| Worker::start(settings, &folder, &i.to_string(), &s3.env()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Each task finishes on whichever worker runs it; a worker that
        // gets a task after a rebalance finds it finished and says so
        // again, so tasks are counted by id, at their first finish.
        let mut finished: BTreeMap<String, Instant> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(600);
        while finished.len() < PARTITIONS as usize {
            for w in &workers {
                while let Ok((at, line)) = w.lines.try_recv() {
                    if let Some(task) = finished_task(&line) {
                        finished.entry(task.to_owned()).or_insert(at);
                    }
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{k} worker(s) did not finish in 10 min"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let last = *finished.values().max().expect("tasks finished");
        let wall = last - started;
        let mut cpu = Duration::ZERO;
        for w in &workers {
            cpu += w.cpu()?;
        }
        for w in workers {
            w.stop()?;
        }
        // A transaction's commit markers reach its partitions after the
        // commit returns: a `read_committed` reader may stop short of them
        // for a moment, so it reads again until the count is whole or 30 s
        // have passed.
        let deadline = Instant::now() + Duration::from_secs(30);
        let stored = loop {
            let (stored, _) = read_partitions(&kafka.brokers(), &output, PARTITIONS)?;
            if stored >= n || Instant::now() >= deadline {
                break stored;
            }
            settings.say(&format!(
                "workers: {output} holds {stored} of {n} counts so far; reading it again"
            ));
            std::thread::sleep(Duration::from_millis(500));
        };
        anyhow::ensure!(stored == n, "{output} holds {stored} counts, expected {n}");
        let case = match write {
            "staged" => format!("{k} worker(s)"),
            _ => format!("{k} worker(s), write = {write}"),
        };
        let baseline = match (k, write) {
            (1, "staged") => None,
            (_, "staged") => Some("1 worker(s)".to_owned()),
            _ => Some(format!("{k} worker(s)")),
        };
        let row = report.row(
            &case,
            n as f64 / wall.as_secs_f64(),
            "records/s",
            baseline.as_deref(),
        );
        row.extra.insert("wall_s".into(), wall.as_secs_f64());
        row.extra.insert(
            "cpu_us_per_record".into(),
            cpu.as_secs_f64() * 1e6 / n as f64,
        );
    }

    settings.say("workers: failover");
    let name = "failover";
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder)?;
    kafka.create_topic("out-failover", PARTITIONS);
    let rate = (n / PARTITIONS as u64 / 30).max(10);
    let file = job(
        settings,
        (&kafka, &s3),
        name,
        ("out-failover", "staged"),
        Some(rate),
    )?;
    std::fs::write(folder.join("job.toml"), file.to_string())?;
    let a = Worker::start(settings, &folder, "a", &s3.env())?;
    let runs = |l: &str| l.contains("worker: task 0-") && l.ends_with(" runs");
    let checkpoint = |l: &str| l.contains(" complete in ");
    a.wait_for(Duration::from_secs(60), runs)?;
    let b = Worker::start(settings, &folder, "b", &s3.env())?;
    b.wait_for(Duration::from_secs(60), runs)?;
    a.wait_for(Duration::from_secs(60), checkpoint)?;
    b.wait_for(Duration::from_secs(60), checkpoint)?;
    let killed = Instant::now();
    let mut a = a;
    a.child.kill()?;
    a.child.wait()?;
    let resumed = b.wait_for(Duration::from_secs(120), runs)?;
    let failover = resumed - killed;
    b.stop()?;
    let row = report.row(
        "failover: a killed worker's task runs elsewhere",
        failover.as_secs_f64() * 1e3,
        "ms",
        None,
    );
    row.extra
        .insert("session_timeout_ms".into(), SESSION.as_secs_f64() * 1e3);
    report.targets.push(Target::below(
        "failover beyond the session timeout (s)",
        failover.saturating_sub(SESSION).as_secs_f64(),
        10.0,
    ));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::finished_task;

    #[test]
    fn a_finished_task_is_read_from_its_log_line() {
        let line = "2026-12-05T15:20:00Z  INFO worker: task 0-3 finished (checkpoint Some(1))";
        assert_eq!(finished_task(line), Some("0-3"));
        assert_eq!(finished_task("INFO worker: task 0-3 runs"), None);
        assert_eq!(
            finished_task("INFO worker: task 1-2 finished (checkpoint None)"),
            None
        );
    }
}
