//! `connectors`: records per second through the NATS JetStream and
//! PostgreSQL connectors, against private servers started for the run
//! (`weir_tests::servers`), each against what the server sustains with a
//! client of its own on the same data:
//!
//! - PostgreSQL: `weir run` of a file → `postgres` sink job (append, and
//!   upsert by word, from JSON lines; append from a typed `csv` file, whose
//!   rows the sink writes from their fields), against `psql`'s `\copy` of
//!   the same rows;
//! - JetStream sink: a file → `nats` sink job, against publishing the same
//!   payloads with `async-nats` (acknowledged, as many in flight as the
//!   sink allows);
//! - JetStream source: a bounded `nats` source → file sink job, against
//!   reading the stream with an `async-nats` ordered consumer;
//! - PostgreSQL change data capture: `n` inserts committed into a table
//!   with two logical replication slots on it, read by a bounded
//!   `postgres-cdc` source → file sink job from one, against
//!   `pg_recvlogical` (`pgoutput`, to `/dev/null`) from the other;
//! - a restored JetStream source with a subject filter (`words.>` over four
//!   subjects): the same job killed (SIGKILL) after a second and run again,
//!   the records/s of the restored run against those of a fresh run of the
//!   job. This is the case a nats-server 2.9 serves at a few hundred
//!   messages a second.
//!
//! The Weir cases run the `weir` binary (`--restore none`, checkpoints
//! every second) and include its start-up; the servers run with
//! `fsync=off` (PostgreSQL) as the tests start them.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream;
use futures_util::StreamExt;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Sink, Source};
use weir_tests::servers::{Nats, Postgres};

use crate::child::{run_child, weir_run};
use crate::{Report, Settings, Target};

/// Distinct words of the upsert case.
const WORDS: u64 = 10_000;

/// Publishes the baseline keeps unacknowledged at most (as the sink).
const IN_FLIGHT: usize = 4096;

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.records_or(1_000_000, 200_000, 5_000);
    let (mut report, scratch) = settings.start("connectors", crate::WHOLE_RUN_RATE)?;
    report.param("records", n);
    let dir = scratch.path();
    let jsonl = dir.join("rows.jsonl");
    crate::data::write_lines(&jsonl, n, |i| {
        format!(r#"{{"word":"w{}","count":{i}}}"#, i % WORDS)
    })?;
    let csv = dir.join("rows.csv");
    crate::data::write_lines(&csv, n, |i| format!("w{},{i}", i % WORDS))?;
    // The same rows with a header, for a `csv` source (rows typed cells).
    crate::data::write_lines(&dir.join("typed.csv"), n + 1, |i| match i {
        0 => "word,count".into(),
        i => format!("w{},{}", (i - 1) % WORDS, i - 1),
    })?;
    let words = dir.join("words.txt");
    crate::data::write_lines(&words, n, |i| format!("w{}", i % WORDS))?;

    settings.say("connectors: starting PostgreSQL and nats-server");
    let pg = Postgres::start();
    let nats = Nats::start();
    report.param("postgres", pg.psql("SHOW server_version"));
    pg.psql(
        "CREATE TABLE base (word text NOT NULL, count bigint NOT NULL);\
         CREATE TABLE events (word text NOT NULL, count bigint NOT NULL);\
         CREATE TABLE typed_events (word text NOT NULL, count bigint NOT NULL);\
         CREATE TABLE totals (word text PRIMARY KEY, count bigint NOT NULL);",
    );

    settings.say("connectors: psql \\copy (baseline)");
    let started = Instant::now();
    pg.psql(&format!(
        "\\copy base (word, count) FROM '{}' WITH (FORMAT csv)",
        csv.display()
    ));
    let copy = started.elapsed();
    check_rows(&pg, "base", n)?;
    report.row("psql \\copy", per_second(n, copy), "records/s", None);

    let file_source = || Source::file("in", "rows.jsonl").format("jsonl");
    // Rows from typed cells, written from their fields (no JSON between).
    let typed_source =
        || (Source::file("in", "typed.csv").format("csv")).value("columns", "{ count = \"i64\" }");
    for (case, table, mode, source) in [
        ("weir → postgres append", "events", None, file_source()),
        (
            "weir → postgres upsert",
            "totals",
            Some("word"),
            file_source(),
        ),
        (
            "weir csv → postgres append",
            "typed_events",
            None,
            typed_source(),
        ),
    ] {
        settings.say(&format!("connectors: {case}"));
        let mut sink = Sink::postgres("out", &pg.url(), table).input("in");
        if let Some(key) = mode {
            sink = sink.string("mode", "upsert").string("key", key);
        }
        let job = JobFile::new("bench-pg")
            .checkpoint(Checkpoint::every("1s"))
            .source(source)
            .sink(sink);
        let wall = run_weir(settings, dir, table, &job)?;
        let want = if mode.is_some() { n.min(WORDS) } else { n };
        check_rows(&pg, table, want)?;
        report.row(case, per_second(n, wall), "records/s", Some("psql \\copy"));
    }

    cdc(settings, dir, &pg, n, &mut report)?;

    nats.create_stream("IN", &["bench.in"]);
    nats.create_stream("OUT", &["bench.out"]);
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("w{}", i % WORDS).into_bytes())
        .collect();
    let runtime = tokio::runtime::Runtime::new()?;
    settings.say("connectors: async-nats publish (baseline)");
    let publish = runtime.block_on(publish_all(&nats.url(), "bench.in", &payloads))?;
    report.row(
        "async-nats publish",
        per_second(n, publish),
        "records/s",
        None,
    );

    settings.say("connectors: weir → nats");
    let job = JobFile::new("bench-nats-sink")
        .checkpoint(Checkpoint::every("1s"))
        .source(Source::file("in", "words.txt"))
        .sink(Sink::nats("out", &nats.url(), "bench.out").input("in"));
    let wall = run_weir(settings, dir, "nats-sink", &job)?;
    let stored = stream_messages(&runtime, &nats.url(), "OUT")?;
    anyhow::ensure!(
        stored == n,
        "stream OUT holds {stored} messages, expected {n}"
    );
    report.row(
        "weir → nats",
        per_second(n, wall),
        "records/s",
        Some("async-nats publish"),
    );

    settings.say("connectors: async-nats ordered consumer (baseline)");
    let read = runtime.block_on(read_all(&nats.url(), "IN", n))?;
    report.row("async-nats read", per_second(n, read), "records/s", None);

    settings.say("connectors: nats → weir");
    let source = Source::nats("in", &nats.url(), "IN");
    let wall = read_through_weir(settings, dir, "nats-source", source, n)?;
    report.row(
        "nats → weir",
        per_second(n, wall),
        "records/s",
        Some("async-nats read"),
    );
    filtered_restore(settings, dir, &nats, &runtime, &payloads, &mut report)?;
    Ok(report)
}

/// The restored-read case: stream `WORDS` holds the payloads on four
/// subjects; a job reads it through the filter `words.>` fresh, then again
/// killed after a second (its source throttled so that it is mid-way) and
/// restored; the restored run's records/s is reported against the fresh
/// run's.
fn filtered_restore(
    settings: &Settings,
    dir: &Path,
    nats: &Nats,
    runtime: &tokio::runtime::Runtime,
    payloads: &[Vec<u8>],
    report: &mut Report,
) -> anyhow::Result<()> {
    let n = payloads.len() as u64;
    nats.create_stream("WORDS", &["words.>"]);
    for (i, subject) in ["words.a", "words.b", "words.c", "words.d"]
        .iter()
        .enumerate()
    {
        let part: Vec<Vec<u8>> = payloads.iter().skip(i).step_by(4).cloned().collect();
        runtime.block_on(publish_all(&nats.url(), subject, &part))?;
    }
    let job = |rate: Option<u64>| {
        let mut source = Source::nats("in", &nats.url(), "WORDS")
            .value("bounded", true)
            .string("subject", "words.>");
        if let Some(rate) = rate {
            source = source.rate(rate);
        }
        JobFile::new("bench-nats-filtered")
            .checkpoint(Checkpoint::every("200ms"))
            .source(source)
            .sink(Sink::file("out", "out.txt").input("in"))
    };
    settings.say("connectors: nats (subject filter) → weir, fresh");
    let fresh = run_weir(settings, dir, "nats-filtered-fresh", &job(None))?;
    report.row(
        "nats filtered → weir, fresh",
        per_second(n, fresh),
        "records/s",
        None,
    );

    settings.say("connectors: nats (subject filter) → weir, killed and restored");
    let case = dir.join("nats-filtered-restored");
    std::fs::create_dir_all(&case)?;
    let path = case.join("job.toml");
    std::fs::write(&path, job(Some((n / 4).max(1))).to_string())?;
    let mut first = weir_run(settings, &path)?
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting weir")?;
    std::thread::sleep(Duration::from_secs(1));
    first.kill()?;
    first.wait()?;
    let out = case.join("out.txt");
    let before = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .count() as u64;
    anyhow::ensure!(
        before < n,
        "the killed run had written all {n} records; nothing is left to restore"
    );
    std::fs::write(&path, job(None).to_string())?;
    let mut restore = std::process::Command::new(settings.weir_binary()?);
    restore
        .arg("run")
        .arg(&path)
        .args(["--progress-every", "0"])
        .env_remove("RUST_LOG");
    let restored = run_child(restore, &case.join("run"))?.wall;
    let after = std::fs::read_to_string(&out)?.lines().count() as u64;
    anyhow::ensure!(
        after == n,
        "the restored run left {after} records, expected {n}"
    );
    report.param("restored_records", n - before);
    report.row(
        "nats filtered → weir, restored",
        per_second(n - before, restored),
        "records/s",
        Some("nats filtered → weir, fresh"),
    );
    let ratio = report
        .get("nats filtered → weir, restored")
        .and_then(|r| r.ratio)
        .unwrap_or(f64::NAN);
    report.targets.push(Target::at_least(
        "a restored filtered NATS source vs a fresh read (ratio)",
        ratio,
        0.8,
    ));
    Ok(())
}

pub(crate) fn per_second(n: u64, wall: Duration) -> f64 {
    n as f64 / wall.as_secs_f64()
}

/// Runs `job` with the `weir` binary in `dir/<name>` (inputs are read from
/// `dir`); returns its wall time.
pub(crate) fn run_weir(
    settings: &Settings,
    dir: &Path,
    name: &str,
    job: &JobFile,
) -> anyhow::Result<Duration> {
    let case = dir.join(name);
    std::fs::create_dir_all(&case)?;
    for input in ["rows.jsonl", "typed.csv", "words.txt"] {
        let link = case.join(input);
        if !link.exists() {
            std::os::unix::fs::symlink(dir.join(input), link)?;
        }
    }
    let path = case.join("job.toml");
    std::fs::write(&path, job.to_string())?;
    Ok(run_child(weir_run(settings, &path)?, &case.join("run"))?.wall)
}

/// Runs a job that copies the bounded `source` (id `in`) into a file, in
/// case folder `name`; checks it wrote `n` records and returns the run's
/// wall time.
pub(crate) fn read_through_weir(
    settings: &Settings,
    dir: &Path,
    name: &str,
    source: Source,
    n: u64,
) -> anyhow::Result<Duration> {
    let job = JobFile::new(&format!("bench-{name}"))
        .checkpoint(Checkpoint::every("1s"))
        .source(source.value("bounded", true))
        .sink(Sink::file("out", "out.txt").input("in"));
    let wall = run_weir(settings, dir, name, &job)?;
    let out = dir.join(name).join("out.txt");
    let lines = std::fs::read_to_string(out)?.lines().count() as u64;
    anyhow::ensure!(
        lines == n,
        "{name}: the job wrote {lines} records, expected {n}"
    );
    Ok(wall)
}

/// Rows of each transaction of the change-data-capture case.
const CDC_TRANSACTION: u64 = 10_000;

/// The change-data-capture case (module docs): `n` inserts, then
/// `pg_recvlogical` and a `postgres-cdc` job each read them from a slot
/// made before them.
fn cdc(
    settings: &Settings,
    dir: &Path,
    pg: &Postgres,
    n: u64,
    report: &mut Report,
) -> anyhow::Result<()> {
    pg.psql(
        "CREATE TABLE changes (id bigint PRIMARY KEY, word text NOT NULL, count bigint NOT NULL);\
         CREATE PUBLICATION bench_changes FOR TABLE changes",
    );
    for slot in ["weir_bench", "recv_bench"] {
        pg.psql(&format!(
            "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
        ));
    }
    settings.say(&format!("connectors: committing {n} inserts"));
    for start in (0..n).step_by(CDC_TRANSACTION as usize) {
        let end = (start + CDC_TRANSACTION).min(n) - 1;
        pg.psql(&format!(
            "INSERT INTO changes SELECT i, 'w' || (i % {WORDS}), i FROM generate_series({start}, {end}) i"
        ));
    }
    let end = pg.psql("SELECT pg_current_wal_lsn()");

    settings.say("connectors: pg_recvlogical (baseline)");
    let started = Instant::now();
    let out = std::process::Command::new(pg.program("pg_recvlogical"))
        .args([
            "-d",
            &pg.url(),
            "--slot",
            "recv_bench",
            "--start",
            "--no-loop",
        ])
        .args(["--endpos", &end, "-f", "/dev/null"])
        .args([
            "-o",
            "proto_version=1",
            "-o",
            "publication_names=bench_changes",
        ])
        .output()
        .context("running pg_recvlogical")?;
    let recv = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "pg_recvlogical: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    report.row("pg_recvlogical", per_second(n, recv), "changes/s", None);

    settings.say("connectors: postgres-cdc → weir");
    let source = Source::postgres_cdc("in", &pg.url(), "changes")
        .string("slot", "weir_bench")
        .string("publication", "bench_changes")
        .value("snapshot", false);
    let wall = read_through_weir(settings, dir, "postgres-cdc", source, n)?;
    report.row(
        "postgres-cdc → weir",
        per_second(n, wall),
        "changes/s",
        Some("pg_recvlogical"),
    );
    Ok(())
}

fn check_rows(pg: &Postgres, table: &str, want: u64) -> anyhow::Result<()> {
    let rows: u64 = pg.psql(&format!("SELECT count(*) FROM {table}")).parse()?;
    anyhow::ensure!(
        rows == want,
        "table {table} has {rows} rows, expected {want}"
    );
    Ok(())
}

/// Publishes every payload to `subject`, acknowledged, with at most
/// [`IN_FLIGHT`] waiting; returns the time taken.
async fn publish_all(url: &str, subject: &str, payloads: &[Vec<u8>]) -> anyhow::Result<Duration> {
    let js = jetstream::new(async_nats::connect(url).await?);
    let started = Instant::now();
    let mut pending = std::collections::VecDeque::new();
    for p in payloads {
        pending.push_back(js.publish(subject.to_owned(), p.clone().into()).await?);
        if pending.len() >= IN_FLIGHT {
            pending.pop_front().expect("not empty").await?;
        }
    }
    for ack in pending {
        ack.await?;
    }
    Ok(started.elapsed())
}

/// Reads `n` messages of `stream` with an ordered consumer; returns the
/// time taken.
async fn read_all(url: &str, stream: &str, n: u64) -> anyhow::Result<Duration> {
    let js = jetstream::new(async_nats::connect(url).await?);
    let started = Instant::now();
    let stream = js.get_stream(stream).await?;
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
        .await?;
    let mut messages = consumer.messages().await?;
    let mut read = 0;
    while read < n {
        messages.next().await.context("the stream ended")??;
        read += 1;
    }
    Ok(started.elapsed())
}

/// The number of messages `stream` holds.
fn stream_messages(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    stream: &str,
) -> anyhow::Result<u64> {
    runtime.block_on(async {
        let js = jetstream::new(async_nats::connect(url).await?);
        let mut stream = js.get_stream(stream).await?;
        Ok(stream.info().await?.state.messages)
    })
}
