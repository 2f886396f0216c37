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

/// A table the source reads, the table it is mirrored into, its key
/// columns and the changelog file of its changes. Its other columns are
/// `v` (a version from the sequence) and `note`.
struct Mirrored {
    table: &'static str,
    mirror: &'static str,
    key: &'static [&'static str],
    log: &'static str,
}

const ITEMS: Mirrored = Mirrored {
    table: "items",
    mirror: "mirror",
    key: &["id"],
    log: "changes.jsonl",
};

impl Mirrored {
    /// The rows of `table` as `key|...|v|note` lines, sorted as text.
    fn rows(&self, pg: &Postgres, table: &str) -> Vec<String> {
        let key = self.key.join(", ");
        let text = pg.psql(&format!("SELECT {key}, v, note FROM {table}"));
        let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
        rows.sort();
        rows
    }

    /// Each key's versions in the changelog grow strictly between
    /// truncates (nothing repeated or reordered); returns the table the
    /// changelog replays to, as [`rows`](Self::rows) gives it.
    fn replay(&self, text: &str) -> Vec<String> {
        let field = |record: &Value, name: &str| match &record[name] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut last: BTreeMap<Vec<String>, i64> = BTreeMap::new();
        let mut table: BTreeMap<Vec<String>, (i64, String)> = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let record: Value = serde_json::from_str(line).unwrap();
            let op = record["op"].as_str().unwrap_or("insert");
            if op == "truncate" {
                last.clear();
                table.clear();
                continue;
            }
            let key: Vec<String> = self.key.iter().map(|k| field(&record, k)).collect();
            if op == "delete" {
                table.remove(&key);
                continue;
            }
            let v = record["v"].as_i64().unwrap();
            let note = record["note"].as_str().unwrap().to_owned();
            if let Some(before) = last.insert(key.clone(), v) {
                assert!(
                    v > before,
                    "{} line {}: row {key:?} has version {v} after {before}: {line}",
                    self.log,
                    n + 1
                );
            }
            table.insert(key, (v, note));
        }
        let mut rows: Vec<String> = (table.iter())
            .map(|(key, (v, note))| format!("{}|{v}|{note}", key.join("|")))
            .collect();
        rows.sort();
        rows
    }

    /// Waits until the mirror equals the table and the job's changelog,
    /// replayed ([`replay`](Self::replay)), does too.
    fn wait(&self, pg: &Postgres, job: &JobDir) {
        let want = self.rows(pg, self.table);
        wait_until(
            &format!("{} to equal {}", self.mirror, self.table),
            PATIENCE,
            || (self.rows(pg, self.mirror) == want).then_some(()),
        );
        wait_until(
            &format!("{} to hold the rows of {}", self.log, self.table),
            PATIENCE,
            || (self.replay(&job.read_so_far(self.log)) == want).then_some(()),
        );
    }
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
    ITEMS.wait(&pg, &job);
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
    ITEMS.wait(&pg, &job);
    run.kill();
}

const ORDERS: Mirrored = Mirrored {
    table: "orders",
    mirror: "orders_mirror",
    key: &["id"],
    log: "orders.jsonl",
};

const LINES: Mirrored = Mirrored {
    table: "shop.lines",
    mirror: "lines_mirror",
    key: &["id", "line"],
    log: "lines.jsonl",
};

/// One transaction writing both tables, interleaved: an order changes and
/// its lines change, each write setting `v` from the sequence.
fn write_both(pg: &Postgres, rng: &mut XorShift) {
    let mut sql = String::from("BEGIN;");
    for _ in 0..rng.range(1, 4) {
        let id = rng.range(1, 1200);
        let line = format!("l{}", rng.range(0, 4));
        sql.push_str(&match rng.range(0, 8) {
            0..=1 => format!(
                "UPDATE orders SET v = nextval('versions'), note = note || '.' WHERE id = {id};"
            ),
            2 => format!("DELETE FROM orders WHERE id = {id};"),
            3 => format!(
                "INSERT INTO orders VALUES ({id}, nextval('versions'), 'o{id}') \
                 ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, note = EXCLUDED.note;"
            ),
            4..=5 => format!(
                "UPDATE shop.lines SET v = nextval('versions'), note = note || '+' \
                 WHERE id = {id} AND line = '{line}';"
            ),
            6 => format!("DELETE FROM shop.lines WHERE id = {id} AND line = '{line}';"),
            _ => format!(
                "INSERT INTO shop.lines VALUES ({id}, '{line}', nextval('versions'), 'x') \
                 ON CONFLICT (id, line) DO UPDATE SET v = EXCLUDED.v, note = EXCLUDED.note;"
            ),
        });
    }
    sql.push_str("COMMIT;");
    pg.psql(&sql);
}

/// One source reads two tables (one in another schema, with a two-column
/// key) at one snapshot, an output port each, wired by name into a mirror
/// and a changelog per table. Transactions writing both tables run
/// throughout; the job crashes in the middle of the second table's
/// snapshot, is killed after checkpoints again and again, and one
/// transaction truncates one table only. Each mirror ends equal to its
/// table and each changelog holds each row's versions once, in order.
#[test]
fn one_source_mirrors_two_tables_by_port_through_kills_and_a_crash_mid_snapshot() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE SEQUENCE versions; CREATE SCHEMA shop; \
         CREATE TABLE orders (id int PRIMARY KEY, v bigint NOT NULL, note text); \
         CREATE TABLE orders_mirror (LIKE orders INCLUDING ALL); \
         CREATE TABLE shop.lines (id int, line text, v bigint NOT NULL, note text, PRIMARY KEY (id, line)); \
         CREATE TABLE lines_mirror (LIKE shop.lines INCLUDING ALL); \
         INSERT INTO orders SELECT i, nextval('versions'), 'o' || i FROM generate_series(1, 1000) i; \
         INSERT INTO shop.lines SELECT i / 3, 'l' || (i % 3), nextval('versions'), 'n' || i \
         FROM generate_series(3, 3002) i",
    );
    let mirror = |m: &Mirrored, port: &str| {
        Sink::postgres(&format!("{}_sink", m.mirror), &pg.url(), m.mirror)
            .string("mode", "upsert")
            .value("key", toml::Value::from(m.key.to_vec()))
            .input(port)
    };
    let log =
        |m: &Mirrored, port: &str| Sink::jsonl(&m.log.replace(".jsonl", "_log"), m.log).input(port);
    let job = JobFile::new("pg-cdc-tables")
        .checkpoint(Checkpoint::every("200ms"))
        .restart(Restart::fixed_delay(100, "300ms"))
        .source(
            Source::postgres_cdc_tables("cdc", &pg.url(), &["orders", "shop.lines"])
                .value("batch_size", 50)
                .value("rate", 3000),
        )
        .sink(mirror(&ORDERS, "cdc.orders"))
        .sink(log(&ORDERS, "cdc.orders"))
        .sink(mirror(&LINES, "cdc.shop.lines"))
        .sink(log(&LINES, "cdc.shop.lines"));
    let job = JobDir::new(WEIR, job, &[]);
    let stop = AtomicBool::new(false);
    let writes = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut rng = XorShift(seed() ^ 0x7ab1e5);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                write_both(&pg, &mut rng);
                n += 1;
                if n == 120 {
                    pg.psql(
                        "BEGIN; UPDATE orders SET v = nextval('versions') WHERE id = 7; \
                         TRUNCATE shop.lines; INSERT INTO shop.lines \
                         SELECT i, 'l0', nextval('versions'), 't' FROM generate_series(1, 600) i; COMMIT;",
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            n
        });
        let stop_writer = RaiseOnDrop(&stop);
        // 20 batches of orders, then the lines: the 35th is in the lines.
        let crashed = |point: Failpoint, at: u32| {
            let out = Outcome::of(
                job.command("run", &["-v"])
                    .env(ENV, format!("{}@{at}", point.name())),
            );
            assert!(out.stderr.contains(&point.crash_line()), "{}", out.stderr);
            out.stderr
        };
        crashed(Failpoint::CdcMidSnapshot, 35);
        let resumed = crashed(Failpoint::CdcAfterConfirm, 2);
        assert!(
            resumed.contains("resuming the snapshot of \"shop\".\"lines\" after key"),
            "{resumed}"
        );
        let mut rng = XorShift(seed());
        for _ in 0..10 {
            assert!(
                job.kill_after_a_checkpoint(&mut rng),
                "the job ended by itself"
            );
        }
        drop(stop_writer);
        writer.join().unwrap()
    });
    assert!(writes > 120, "only {writes} write transactions ran");
    let run = job.spawn(&[]);
    ORDERS.wait(&pg, &job);
    LINES.wait(&pg, &job);
    run.kill();
    assert!(job.read_so_far(LINES.log).contains("\"op\":\"truncate\""));
    assert!(!job.read_so_far(ORDERS.log).contains("\"op\":\"truncate\""));
}

/// A source of `tables` names its ports in one-line errors: a consumer
/// without a port, a table no consumer reads, and a checkpoint of other
/// tables.
#[test]
fn the_ports_and_tables_of_a_source_are_checked_in_one_line() {
    let pg = server(20);
    pg.psql("CREATE TABLE other (id int PRIMARY KEY, v bigint, note text)");
    let source = |tables: Vec<&str>| Source::postgres_cdc_tables("cdc", &pg.url(), &tables);
    let unported = JobFile::new("pg-cdc-ports")
        .source(source(vec!["items", "other"]))
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc"));
    JobDir::new(WEIR, unported, &[])
        .run(&[])
        .assert_one_line_error(&[
            "input \"cdc\"",
            "named output ports (items, other)",
            "\"cdc.items\"",
        ]);
    let unread = JobFile::new("pg-cdc-ports")
        .checkpoint(Checkpoint::every("100ms"))
        .source(source(vec!["items", "other"]))
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc.items"));
    JobDir::new(WEIR, unread, &[])
        .run(&[])
        .assert_one_line_error(&["output port \"other\" is not consumed"]);

    // A job of one table, checkpointed, then given two.
    let one = JobFile::new("pg-cdc-ports")
        .checkpoint(Checkpoint::every("100ms"))
        .source(source(vec!["items"]))
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc.items"));
    let job = JobDir::new(WEIR, one, &[]);
    let mut rng = XorShift(seed());
    assert!(job.kill_after_a_checkpoint(&mut rng));
    let two = JobFile::new("pg-cdc-ports")
        .checkpoint(Checkpoint::every("100ms"))
        .source(source(vec!["items", "other"]))
        .sink(Sink::jsonl("log", "changes.jsonl").input("cdc.items"))
        .sink(Sink::jsonl("other", "other.jsonl").input("cdc.other"));
    job.write_job(two);
    job.run(&[]).assert_one_line_error(&[
        "source `cdc`",
        "cannot change across a restore",
        "--restore none",
    ]);
}
