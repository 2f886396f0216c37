//! Change data capture from PostgreSQL (`type = "postgres-cdc"`) through
//! the `weir` binary, against a private PostgreSQL with `wal_level =
//! logical`: a table mirrored into another table through an upsert sink
//! under SIGKILLs during the snapshot and after it, concurrent inserts,
//! updates, deletes and truncates, and a server restart, equals the source
//! table at the end; the changelog written alongside holds each row's
//! changes once and in commit order; a dropped slot and a table without a
//! primary key are one-line errors naming the fix; and the example
//! `examples/cdc-to-postgres` keeps its per-customer totals equal to the
//! orders table's through kills and concurrent writes.
//!
//! Oracles come from the source table and from the writes: every write
//! sets `v` from one sequence, so a row's versions only grow.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use weir::failpoint::{ENV, Failpoint};
use weir_tests::cli::{Outcome, Weir};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Restart, Sink, Source};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::servers::{Postgres, PrivateServer};
use weir_tests::wait::{PATIENCE, wait_until};
use weir_tests::{plugins, repo_root};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// A server with table `items` (`rows` rows) and its empty mirror.
fn server(rows: usize) -> Postgres {
    let pg = Postgres::start();
    pg.psql(&format!(
        "CREATE SEQUENCE versions; \
         CREATE TABLE items (id int PRIMARY KEY, v bigint NOT NULL, note text); \
         CREATE TABLE mirror (id int PRIMARY KEY, v bigint NOT NULL, note text); \
         INSERT INTO items SELECT i, nextval('versions'), 'n' || i FROM generate_series(1, {rows}) i"
    ));
    pg
}

/// `items` read through `cdc` into `mirror` (upsert) and `changes.jsonl`
/// (the changelog, each change's kind in `op`), without restarts.
fn mirroring(pg: &Postgres, rate: u64) -> JobFile {
    JobFile::new("pg-cdc")
        .checkpoint(Checkpoint::every("200ms"))
        .source(
            Source::postgres_cdc("cdc", &pg.url(), "items")
                .value("batch_size", 50)
                .value("rate", rate),
        )
        .sink(
            Sink::postgres("mirror", &pg.url(), "mirror")
                .string("mode", "upsert")
                .string("key", "id")
                .input("cdc"),
        )
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc"))
}

/// One transaction of random writes: updates, deletes and inserts, each
/// setting `v` from the sequence.
fn write(pg: &Postgres, rng: &mut XorShift, ids: u64) {
    let mut sql = String::from("BEGIN;");
    for _ in 0..rng.range(1, 6) {
        let id = rng.range(1, ids);
        sql.push_str(&match rng.range(0, 10) {
            0..=4 => format!(
                "UPDATE items SET v = nextval('versions'), note = note || '.' WHERE id = {id};"
            ),
            5..=6 => format!("DELETE FROM items WHERE id = {id};"),
            _ => format!(
                "INSERT INTO items VALUES ({id}, nextval('versions'), 'i{id}') \
                 ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, note = EXCLUDED.note;"
            ),
        });
    }
    sql.push_str("COMMIT;");
    pg.psql(&sql);
}

/// Raises its flag when dropped: the writer thread of a scope stops (and
/// the scope ends) even when the test fails inside it.
struct RaiseOnDrop<'a>(&'a AtomicBool);

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn rows_of(pg: &Postgres, table: &str) -> String {
    pg.psql(&format!("SELECT id, v, note FROM {table} ORDER BY id"))
}

/// Each key's versions in the changelog grow strictly between truncates
/// (nothing repeated or reordered), and replaying the changelog gives
/// `want` (nothing lost up to what the file holds).
fn check_changelog(text: &str) -> BTreeMap<i64, (i64, String)> {
    let mut last: BTreeMap<i64, i64> = BTreeMap::new();
    let mut table: BTreeMap<i64, (i64, String)> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let record: Value = serde_json::from_str(line).unwrap();
        let op = record["op"].as_str().unwrap_or("insert");
        if op == "truncate" {
            last.clear();
            table.clear();
            continue;
        }
        let id = record["id"].as_i64().unwrap();
        if op == "delete" {
            table.remove(&id);
            continue;
        }
        let v = record["v"].as_i64().unwrap();
        let note = record["note"].as_str().unwrap().to_owned();
        if let Some(before) = last.insert(id, v) {
            assert!(
                v > before,
                "line {}: row {id} has version {v} after {before}: {line}",
                n + 1
            );
        }
        table.insert(id, (v, note));
    }
    table
}

/// Waits until `mirror` equals `items` and the job's changelog, replayed
/// ([`check_changelog`]), does too.
fn wait_for_the_mirror(pg: &Postgres, job: &JobDir) {
    let want = rows_of(pg, "items");
    wait_until("the mirror to equal the source", PATIENCE, || {
        (rows_of(pg, "mirror") == want).then_some(())
    });
    wait_until("the changelog to hold the source's rows", PATIENCE, || {
        let replayed = check_changelog(&job.read_so_far("changes.jsonl"));
        let text: Vec<String> = (replayed.iter())
            .map(|(id, (v, note))| format!("{id}|{v}|{note}"))
            .collect();
        (text.join("\n") == want).then_some(())
    });
}

#[test]
fn a_table_mirrored_through_kills_writes_truncates_and_a_restart_equals_the_source() {
    let mut pg = server(3000);
    let restarting = mirroring(&pg, 3000).restart(Restart::fixed_delay(100, "300ms"));
    let job = JobDir::new(WEIR, restarting, &[]);
    let stop = AtomicBool::new(false);
    let writes = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut rng = XorShift(seed() ^ 0x5eed);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                write(&pg, &mut rng, 3500);
                n += 1;
                // Once during the first run's snapshot, once after it.
                if n == 10 || n == 150 {
                    pg.psql(
                        "BEGIN; TRUNCATE items; INSERT INTO items SELECT i, nextval('versions'), 't' || i \
                         FROM generate_series(1, 2000) i; COMMIT;",
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            n
        });
        let stop_writer = RaiseOnDrop(&stop);
        let mut rng = XorShift(seed());
        for _ in 0..12 {
            assert!(
                job.kill_after_a_checkpoint(&mut rng),
                "the job ended by itself"
            );
        }
        drop(stop_writer);
        writer.join().unwrap()
    });
    assert!(writes > 150, "only {writes} write transactions ran");

    // The server goes away under the last run and comes back.
    let run = job.spawn(&[]);
    std::thread::sleep(Duration::from_millis(1500));
    pg.stop();
    std::thread::sleep(Duration::from_millis(500));
    pg.restart();
    wait_for_the_mirror(&pg, &job);
    run.kill();
    let log = job.read_so_far("changes.jsonl");
    for op in [
        "\"op\":\"delete\"",
        "\"op\":\"update-after\"",
        "\"op\":\"truncate\"",
    ] {
        assert!(log.contains(op), "the changelog has no {op}");
    }
}

#[test]
fn a_dropped_slot_and_a_table_without_a_primary_key_are_one_line_errors() {
    let pg = server(10);
    pg.psql("CREATE TABLE loose (a int, b text)");
    let job = JobDir::new(
        WEIR,
        JobFile::new("pg-cdc-errors")
            .checkpoint(Checkpoint::every("100ms"))
            .source(Source::postgres_cdc("cdc", &pg.url(), "loose"))
            .sink(Sink::jsonl("log", "changes.jsonl").input("cdc")),
        &[],
    );
    job.run(&[]).assert_one_line_error(&[
        "source `cdc`",
        "loose",
        "no primary key",
        "ADD PRIMARY KEY",
    ]);

    let job = JobDir::new(WEIR, mirroring(&pg, 1000), &[]);
    let mut rng = XorShift(seed());
    assert!(job.kill_after_a_checkpoint(&mut rng));
    wait_until("the slot to be free", PATIENCE, || {
        pg.try_psql("SELECT pg_drop_replication_slot('weir_cdc')")
            .ok()
    });
    job.run(&[]).assert_one_line_error(&[
        "source `cdc`",
        "replication slot weir_cdc no longer exists",
        "--restore none",
    ]);
}

/// The example's job on a private server, its orders changed while the
/// job is killed again and again: `customer_totals` ends equal to the
/// totals of `orders`, and customers without orders are gone from it.
#[test]
fn the_cdc_example_keeps_customer_totals_equal_to_the_orders_through_kills() {
    let example = repo_root().join("examples/cdc-to-postgres");
    let read = |file: &str| std::fs::read_to_string(example.join(file)).unwrap();
    let pg = Postgres::start();
    pg.psql(&read("schema.sql"));
    let job = read("job.toml")
        .replace("postgresql://postgres@127.0.0.1:15432/postgres", &pg.url())
        .replace(
            "../../plugins/target/customer-totals.wasm",
            plugins::CUSTOMER_TOTALS,
        );
    assert!(job.contains(plugins::CUSTOMER_TOTALS) && job.contains(&pg.url()));
    let job = JobDir::new(WEIR, job, &[]);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut rng = XorShift(seed() ^ 0x0ade);
            while !stop.load(Ordering::Relaxed) {
                let (id, customer) = (rng.range(1, 1200), rng.range(0, 12));
                pg.psql(&match rng.range(0, 4) {
                    0 => format!(
                        "INSERT INTO orders VALUES ({id}, 'c{customer}', {}.5) ON CONFLICT (id) DO NOTHING",
                        rng.range(1, 90)
                    ),
                    1 => format!("UPDATE orders SET customer = 'c{customer}' WHERE id = {id}"),
                    2 => format!("UPDATE orders SET amount = amount + 1.25 WHERE id = {id}"),
                    _ => format!("DELETE FROM orders WHERE id = {id}"),
                });
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let stop_writer = RaiseOnDrop(&stop);
        let mut rng = XorShift(seed());
        for _ in 0..4 {
            assert!(
                job.kill_after_a_checkpoint(&mut rng),
                "the job ended by itself"
            );
        }
        drop(stop_writer);
        writer.join().unwrap();
    });
    pg.psql(&read("changes.sql"));
    let run = job.spawn(&[]);
    let want = || {
        pg.psql(
            "SELECT customer, sum(amount), count(*) FROM orders GROUP BY customer ORDER BY customer",
        )
    };
    let got = || pg.psql("SELECT customer, total, orders FROM customer_totals ORDER BY customer");
    wait_until(
        "customer_totals to equal the orders' totals",
        PATIENCE,
        || (got() == want()).then_some(()),
    );
    let totals = got();
    assert!(!totals.contains("customer-5|"), "{totals}");
    assert!(totals.contains("grace|"), "{totals}");
    run.kill();
}

/// A bounded source reads the snapshot and the changes committed before
/// the job's first start, then ends; the changes after it are not read,
/// and a rerun of the finished job reads nothing more.
#[test]
fn a_bounded_source_ends_where_the_server_was_at_the_first_start() {
    let pg = server(500);
    pg.psql("UPDATE items SET note = 'before' WHERE id <= 10");
    let job = JobFile::new("pg-cdc-bounded")
        .checkpoint(Checkpoint::every("200ms"))
        .source(
            Source::postgres_cdc("cdc", &pg.url(), "items")
                .value("bounded", true)
                .value("batch_size", 64),
        )
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc"));
    let job = JobDir::new(WEIR, job, &[]);
    job.run_ok(&[]);
    let first = job.read("changes.jsonl");
    assert_eq!(first.lines().count(), 500, "{first}");
    assert_eq!(first.matches("\"before\"").count(), 10);
    pg.psql("UPDATE items SET note = 'after' WHERE id <= 10");
    job.run_ok(&[]);
    assert_eq!(job.read("changes.jsonl"), first);
}

/// Crashes at the source's named steps, with writes going on: in the
/// middle of the snapshot (the next run reads the rest of the table under
/// a new snapshot, and says so) and right after the source handed a
/// checkpoint's position to its slot. The mirror ends equal to the source
/// and the changelog holds each row's versions once, in order.
#[test]
fn crashes_mid_snapshot_and_after_a_confirm_lose_and_repeat_nothing() {
    let pg = server(3000);
    let restarting = mirroring(&pg, 3000).restart(Restart::fixed_delay(100, "300ms"));
    let job = JobDir::new(WEIR, restarting, &[]);
    let crashed = |point: Failpoint, at: u32| {
        let out = Outcome::of(
            job.command("run", &["-v"])
                .env(ENV, format!("{}@{at}", point.name())),
        );
        assert!(
            out.stderr.contains(&point.crash_line()),
            "the run was not killed at {}: {}",
            point.name(),
            out.stderr
        );
        out.stderr
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut rng = XorShift(seed() ^ 0xfa11);
            while !stop.load(Ordering::Relaxed) {
                write(&pg, &mut rng, 3500);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let stop_writer = RaiseOnDrop(&stop);
        crashed(Failpoint::CdcMidSnapshot, 40);
        let resumed = crashed(Failpoint::CdcAfterConfirm, 3);
        assert!(
            resumed.contains("resuming the snapshot of \"public\".\"items\" after key"),
            "{resumed}"
        );
        drop(stop_writer);
        writer.join().unwrap();
    });
    let run = job.spawn(&[]);
    wait_for_the_mirror(&pg, &job);
    run.kill();
}
