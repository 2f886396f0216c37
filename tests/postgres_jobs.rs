//! Jobs with PostgreSQL sinks through the `weir` binary, against a real,
//! private PostgreSQL: a crash after a checkpoint completed but before its
//! rows were committed, a server restart during the job, and the one-line
//! errors of a bad URL and a missing table. (The sink itself is tested
//! through the library in `postgres_sink.rs`; the golden NATS → PostgreSQL
//! pipeline through kills is in `nats.rs`.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use weir_tests::cli::Weir;
use weir_tests::counts::true_counts;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Restart, Sink, Source};
use weir_tests::order::{check_replayed, check_run};
use weir_tests::plugins;
use weir_tests::servers::{Postgres, PrivateServer};
use weir_tests::text::{assert_has, assert_has_all};
use weir_tests::wait::{PATIENCE, wait_until};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `n` rows `{"word": ..., "count": i}` as jsonl.
fn rows(n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"word\":\"w{}\",\"count\":{i}}}\n", i % 13))
        .collect()
}

/// A job appending `rows.jsonl` (at `rate` records/s) to table `events`.
fn appending(pg: &Postgres, rate: u64) -> JobFile {
    JobFile::new("pg-append")
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(30, "200ms"))
        .source(Source::file("in", "rows.jsonl").format("jsonl").rate(rate))
        .sink(Sink::postgres("out", &pg.url(), "events").input("in"))
}

/// A server with table `events`, whose `id` (a sequence, which COPY takes
/// in row order) gives the order the sink inserted its rows in: the rows
/// of `rows` all name the same columns, so the sink copies them in record
/// order.
fn server() -> Postgres {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE events (id bigserial PRIMARY KEY, word text NOT NULL, count bigint NOT NULL)",
    );
    pg
}

/// The `count` of every row of `events`, in insertion order.
fn inserted_counts(pg: &Postgres) -> Vec<u64> {
    let text = pg.psql("SELECT count FROM events ORDER BY id");
    text.lines().map(|l| l.parse().unwrap()).collect()
}

/// The table holds every row of the input exactly once, inserted in input
/// order (one source, one sink).
fn assert_exactly_once(pg: &Postgres, n: usize) {
    let total = pg.psql("SELECT count(*), count(DISTINCT count) FROM events");
    assert_eq!(total, format!("{n}|{n}"), "rows, distinct rows");
    let wrong = pg.psql("SELECT count(*) FROM events WHERE word <> 'w' || (count % 13)");
    assert_eq!(wrong, "0");
    check_run(&inserted_counts(pg), 0, n as u64 - 1)
        .unwrap_or_else(|e| panic!("the rows in insertion order: {e}"));
}

/// The crash comes after checkpoints completed but while their rows wait
/// for the database (a lock holds the table): the rerun writes them once.
#[test]
fn a_crash_between_the_checkpoint_and_the_database_commit_repeats_nothing() {
    let n = 3000;
    let pg = server();
    let job = JobDir::new(WEIR, appending(&pg, 3000), &[("rows.jsonl", &rows(n))]);

    // Another session holds the table until told to let go.
    let mut lock = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &pg.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_lock = lock.stdin.take().unwrap();
    writeln!(
        to_lock,
        "BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE; \\echo locked"
    )
    .unwrap();
    let mut said = String::new();
    BufReader::new(lock.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "locked");

    let mut run = job.spawn(&["-v"]);
    run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
    std::thread::sleep(Duration::from_millis(300));
    run.kill();
    writeln!(to_lock, "ROLLBACK;").unwrap();
    drop(to_lock);
    lock.wait().unwrap();
    assert_eq!(pg.psql("SELECT count(*) FROM weir_sink_commits"), "0");

    let stderr = job.run_ok(&["-v"]);
    assert_has(&stderr, "completed before the restart");
    assert_exactly_once(&pg, n);
}

/// `delivery = "at-least-once"` through kills: every row is in the table,
/// inserted in input order except that a restart repeats rows from its
/// checkpoint on, and no bookkeeping row is written.
#[test]
fn an_at_least_once_sink_through_kills_loses_nothing() {
    let n = 4000;
    let pg = server();
    let file = appending(&pg, 2500).sink_with("out", |s| s.string("delivery", "at-least-once"));
    let job = JobDir::new(WEIR, file, &[("rows.jsonl", &rows(n))]);
    job.run_through_kills_after_checkpoints(3, 41);
    let distinct = pg.psql("SELECT count(DISTINCT count) FROM events");
    assert_eq!(distinct, n.to_string(), "distinct rows");
    let total: usize = pg.psql("SELECT count(*) FROM events").parse().unwrap();
    assert!(total >= n, "{total} rows");
    eprintln!(
        "at-least-once through kills: {} rows written again",
        total - n
    );
    let wrong = pg.psql("SELECT count(*) FROM events WHERE word <> 'w' || (count % 13)");
    assert_eq!(wrong, "0");
    check_replayed(&inserted_counts(&pg), 0, n as u64 - 1)
        .unwrap_or_else(|e| panic!("the rows in insertion order: {e}"));
    assert_eq!(pg.psql("SELECT count(*) FROM weir_sink_commits"), "0");
}

/// At-least-once rows reach the table while the job runs, long before its
/// first checkpoint (an hour away).
#[test]
fn at_least_once_rows_arrive_without_a_checkpoint() {
    let pg = server();
    let file = appending(&pg, 200)
        .checkpoint(Checkpoint::every("1h"))
        .sink_with("out", |s| s.string("delivery", "at-least-once"));
    let job = JobDir::new(WEIR, file, &[("rows.jsonl", &rows(100_000))]);
    let run = job.spawn(&[]);
    wait_until("rows in the table", PATIENCE, || {
        let rows: u64 = pg
            .try_psql("SELECT count(*) FROM events")
            .ok()?
            .parse()
            .ok()?;
        (rows >= 10).then_some(())
    });
    run.kill();
}

/// PostgreSQL goes away mid-job and comes back: the attempt that lost it
/// fails, the restart restores, and the table ends with every row once.
#[test]
fn a_server_restart_during_the_job_loses_and_repeats_nothing() {
    let n = 4000;
    let mut pg = server();
    let job = JobDir::new(WEIR, appending(&pg, 2000), &[("rows.jsonl", &rows(n))]);
    let run = job.spawn(&[]);
    wait_until("the first rows", PATIENCE, || {
        let rows = pg.try_psql("SELECT count(*) FROM events").ok()?;
        (rows != "0").then_some(())
    });
    pg.stop();
    std::thread::sleep(Duration::from_millis(500));
    pg.restart();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("attempt failed"),
        "the outage was not seen: {stderr}"
    );
    assert_exactly_once(&pg, n);
}

#[test]
fn a_bad_url_and_a_missing_table_are_one_line_errors() {
    let pg = server();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!(
            "postgresql://postgres@127.0.0.1:{}/postgres",
            l.local_addr().unwrap().port()
        )
    };
    let job = |sink: Sink| {
        JobFile::new("pg-errors")
            .source(Source::file("in", "rows.jsonl").format("jsonl"))
            .sink(sink.input("in"))
    };
    let cases = [
        (
            job(Sink::postgres("out", &dead, "events")),
            vec!["sink `out`", "127.0.0.1"],
        ),
        (
            job(Sink::postgres("out", &pg.url(), "nope")),
            vec!["sink `out`", "nope"],
        ),
        (
            job(Sink::postgres("out", &pg.url(), "events")
                .string("mode", "upsert")
                .string("key", "word")),
            vec!["sink `out`", "events", "word"],
        ),
    ];
    for (file, needles) in cases {
        let job = JobDir::new(WEIR, file, &[("rows.jsonl", &rows(3))]);
        job.run(&[]).assert_one_line_error(&needles);
    }
    // A value of the wrong type fails the epoch, naming the column.
    let bad = "{\"word\":\"w\",\"count\":\"many\"}\n";
    let job = JobDir::new(
        WEIR,
        job(Sink::postgres("out", &pg.url(), "events")),
        &[("rows.jsonl", bad)],
    );
    job.run(&[])
        .assert_one_line_error(&["sink `out`", "count", "integer"]);
}

/// A live swap is validated through the sinks: the new plugin (word-count
/// v2, whose records have other fields than the table's columns) passes
/// its first checkpoint, then the PostgreSQL sink refuses its output at
/// delivery. The swap is still revertible then: it is rolled back, `weir
/// swap` says why, and the job finishes with the previous plugin, every
/// word's counts in the table exactly once and in order.
#[test]
fn a_swap_whose_output_a_sink_refuses_is_rolled_back() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE counts (id bigserial PRIMARY KEY, word text NOT NULL, count bigint NOT NULL)",
    );
    let words: String = (0..9000).map(|i| format!("w{}\n", (i * 7) % 40)).collect();
    let job = JobFile::new("pg-swap")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("words", "words.txt").rate(3000))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["words"]))
        .sink(Sink::postgres("out", &pg.url(), "counts").input("count"));
    let j = JobDir::new(WEIR, job, &[("words.txt", &words)]);
    let mut child = j
        .command("run", &["--progress-every", "0"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the first rows", PATIENCE, || {
        (pg.psql("SELECT count(*) FROM counts") != "0").then_some(())
    });
    let swap = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    let said = format!("{}{}", swap.stdout, swap.stderr);
    assert!(!swap.success(), "{said}");
    assert!(
        said.contains("rolled back to the previous plugin"),
        "{said}"
    );
    assert!(said.contains("has no column"), "{said}");
    assert!(child.wait().unwrap().success(), "the job finishes with v1");
    let rows = pg.psql("SELECT word, count FROM counts ORDER BY id");
    let mut seen: std::collections::BTreeMap<&str, u64> = Default::default();
    for row in rows.lines() {
        let (word, count) = row.split_once('|').unwrap();
        let n = seen.entry(word).or_default();
        *n += 1;
        assert_eq!(
            count.parse::<u64>().unwrap(),
            *n,
            "{word}'s counts in order"
        );
    }
    let got: std::collections::BTreeMap<String, u64> =
        seen.into_iter().map(|(w, n)| (w.to_owned(), n)).collect();
    assert_eq!(got, true_counts(words.lines()), "every word counted once");
}

/// A PostgreSQL sink whose `on_error` sends the records its table would
/// refuse to a dead-letter sink: every 31st row has a `count` that is no
/// integer, a column of the wrong type. Through SIGKILLs the table ends
/// with every good row exactly once, in input order, and the dead letters
/// hold each bad row once, in order, naming the column; with the default
/// `on_error = "fail"` such a row fails the job at delivery, naming it.
#[test]
fn rows_the_table_refuses_go_to_the_dead_letters_exactly_once_through_kills() {
    let pg = server();
    let n = 3000;
    let (mut input, mut good, mut bad) = (String::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let line = match i % 31 == 30 {
            true => format!("{{\"word\":\"w{}\",\"count\":\"{i} apples\"}}", i % 13),
            false => format!("{{\"word\":\"w{}\",\"count\":{i}}}", i % 13),
        };
        match i % 31 == 30 {
            true => bad.push(line.clone()),
            false => good.push(i as u64),
        }
        input.push_str(&line);
        input.push('\n');
    }
    let file = appending(&pg, 1500)
        .sink_with("out", |s| {
            s.value("on_error", "{ dead_letter = \"rejects\" }")
        })
        .sink(Sink::file("rejects", "rejects.jsonl"));
    let job = JobDir::new(WEIR, file, &[("rows.jsonl", &input)]);
    let (killed, _) = job.through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_eq!(inserted_counts(&pg), good, "the good rows once, in order");
    let letters = weir_tests::letters::parse(&job.read("rejects.jsonl"));
    let values = weir_tests::letters::values(&letters);
    assert_eq!(values, bad, "each refused row once, in order");
    for l in &letters {
        assert_eq!(
            (l["kind"].as_str(), l["node"].as_str()),
            (Some("sink"), Some("out")),
            "{l}"
        );
        assert_eq!(l["error_kind"], "refused", "{l}");
        assert_has(
            l["error"].as_str().unwrap(),
            "column `count` (bigint) needs a JSON integer",
        );
        assert_has(l["origin"].as_str().unwrap(), "of source `in`");
    }

    pg.psql("TRUNCATE events");
    let once = JobFile::new("pg-fail")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("in", "rows.jsonl").format("jsonl"))
        .sink(Sink::postgres("out", &pg.url(), "events").input("in"));
    let failing = JobDir::new(WEIR, once, &[("rows.jsonl", &input)]);
    let out = failing.run(&[]);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert_has(
        out.error_line(),
        "column `count` (bigint) needs a JSON integer",
    );
    assert_has(out.error_line(), "30 apples");
}

/// A PostgreSQL table as the dead-letter sink: the lines of the input
/// that are not JSON become rows of `dead_letters`, one column per field
/// of the dead letter, each once and in input order, through SIGKILLs;
/// the good rows reach `events` once, in order.
#[test]
fn dead_letters_go_to_a_postgres_table_exactly_once_through_kills() {
    let pg = server();
    pg.psql(
        "CREATE TABLE dead_letters (id bigserial PRIMARY KEY, error text, error_kind text, job text, \
         node text, kind text, origin text, checkpoint bigint, \"timestamp\" bigint, key text, value text)",
    );
    let n = 3000;
    let (mut input, mut bad) = (String::new(), Vec::new());
    let mut good = 0;
    for i in 0..n {
        match i % 41 == 40 {
            true => {
                let line = format!("{{\"word\":\"w{i}\"");
                input.push_str(&line);
                bad.push((i + 1, line));
            }
            false => {
                input.push_str(&format!("{{\"word\":\"w{}\",\"count\":{good}}}", good % 13));
                good += 1;
            }
        }
        input.push('\n');
    }
    let file = appending(&pg, 1500)
        // Keyed by a field: the source parses each line.
        .source_with("in", |s| {
            s.key("word").on_error("{ dead_letter = \"letters\" }")
        })
        .sink(Sink::postgres("letters", &pg.url(), "dead_letters"));
    let job = JobDir::new(WEIR, file, &[("rows.jsonl", &input)]);
    let (killed, _) = job.through_kills_after_checkpoints(3, weir_tests::pipeline::seed());
    assert!(killed >= 2, "killed {killed} times");
    assert_exactly_once(&pg, good);
    let rows =
        pg.psql("SELECT origin, value, error_kind, node, kind FROM dead_letters ORDER BY id");
    let want: Vec<String> = (bad.iter())
        .map(|(line, text)| {
            let path = job.path().join("rows.jsonl");
            format!("{} line {line}|{text}|unreadable|in|source", path.display())
        })
        .collect();
    assert_eq!(rows.lines().collect::<Vec<_>>(), want);
    // Read back from the table: one group, every letter.
    let v = weir_tests::letters::listed(&job, &[]);
    let sink = &v["sinks"][0];
    assert_eq!(sink["letters"], bad.len(), "{v:#}");
    let groups = sink["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v:#}");
    assert_eq!(
        (
            groups[0]["error_kind"].as_str(),
            groups[0]["count"].as_u64()
        ),
        (Some("unreadable"), Some(bad.len() as u64)),
        "{v:#}"
    );
}

/// A CSV file typed by `columns` feeds `numeric`, `integer`, `boolean` and
/// `timestamptz` columns directly, no operator between; a row whose
/// amount is not a number goes to the dead-letter sink naming its line,
/// and the others arrive whole. The oracle is the file's own cells.
#[test]
fn typed_csv_columns_feed_numeric_boolean_and_time_columns_directly() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE payments (id bigint PRIMARY KEY, amount numeric(12,2), qty int, \
         paid boolean, at timestamptz, note text)",
    );
    let mut csv = String::from("id,amount,qty,paid,at,note\n");
    let mut want = Vec::new();
    let mut rng = weir_tests::pipeline::XorShift(weir_tests::pipeline::seed());
    for id in 1..=2000u64 {
        let cents = rng.range(0, 10_000_000) as i64 - 5_000_000;
        let amount = match id % 97 {
            0 => String::new(),
            _ => format!(
                "{}{}.{:02}",
                if cents < 0 { "-" } else { "" },
                cents.abs() / 100,
                cents.abs() % 100
            ),
        };
        let qty = rng.range(0, 1000);
        let paid = ["t", "f", "true", "FALSE"][id as usize % 4];
        let seconds = 1_700_000_000 + rng.range(0, 100_000_000);
        let at = match id % 2 {
            0 => format!("{}", seconds * 1000),
            _ => format!("@{seconds}"),
        };
        let note = format!("n{id}, \"q\"");
        if id == 1234 {
            csv.push_str(&format!("{id},12.3x,{qty},{paid},{},x\n", seconds * 1000));
            continue;
        }
        let at = match at.strip_prefix('@') {
            // An RFC 3339 time with an offset, for odd rows.
            Some(_) => {
                let local = weir::time::format_rfc3339((seconds as i64) * 1000 + 19_800_000);
                local.unwrap().replace(".000Z", "+05:30")
            }
            None => at,
        };
        csv.push_str(&format!(
            "{id},{amount},{qty},{paid},{at},\"{}\"\n",
            note.replace('"', "\"\"")
        ));
        let paid = matches!(paid, "t" | "true");
        want.push(format!(
            "{id}|{amount}|{qty}|{}|{seconds}|{note}",
            if paid { "t" } else { "f" }
        ));
    }
    let job = JobFile::new("typed-csv")
        .checkpoint(Checkpoint::every("100ms"))
        .source(
            Source::file("in", "payments.csv")
                .format("csv")
                .key("id")
                .value(
                    "columns",
                    "{ id = \"i64\", amount = \"decimal\", qty = \"i64\", paid = \"bool\", at = \"timestamp\" }",
                )
                .on_error("{ dead_letter = \"bad\" }"),
        )
        .sink(Sink::postgres("db", &pg.url(), "payments").input("in"))
        .sink(Sink::file("bad", "bad.jsonl"));
    let job = JobDir::new(WEIR, job, &[("payments.csv", &csv)]);
    job.run_ok(&[]);
    let got = pg.psql(
        "SELECT id, amount, qty, paid, extract(epoch FROM at)::bigint, note FROM payments ORDER BY id",
    );
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(&want) {
        assert_eq!(got, want);
    }
    let bad = job.read("bad.jsonl");
    assert_eq!(bad.lines().count(), 1, "{bad}");
    assert_has_all(
        &bad,
        &[
            "payments.csv line 1235",
            "column `amount`",
            "\\\"12.3x\\\" is not a decimal number",
        ],
    );
}
