//! The PostgreSQL sink (`type = "postgres"`) against a real, private
//! PostgreSQL ([`weir_tests::servers::Postgres`]), driven through the
//! library: append and upsert results, exactly-once across crashes at
//! every point of a delivery, a server restart between epochs, and the
//! one-line messages of what a table or a record gets wrong.
//!
//! Tables with an `id bigserial` column show the order rows were inserted
//! in (COPY takes the sequence in row order): epochs in checkpoint order,
//! each epoch's rows of one shape in record order.
//!
//! The sink is opened from a parsed job file's `[[sink]]` and driven with
//! `write`, [`precommit_blocking`] and [`commit_blocking`], as the sink
//! task and the coordinator drive it. A crash is `std::mem::forget` of the
//! sink: nothing more happens, and the next open restores a checkpoint.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Value, json};
use weir::Batch;
use weir::config::{Job, SinkConfig};
use weir::connectors::sink::{Sink, commit_blocking, precommit_blocking};
use weir_tests::servers::{Postgres, PrivateServer};
use weir_tests::text::{assert_has, assert_has_all};

/// The server most tests share, each with tables and a job of its own.
fn server() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(Postgres::start)
}

/// The `[[sink]]` of job `job` writing into `url` with the given settings
/// (TOML lines after `url`).
fn sink_config(job: &str, url: &str, settings: &str) -> SinkConfig {
    let text = format!(
        "name = \"{job}\"\n\
         [[source]]\nid = \"in\"\ntype = \"generator\"\ncount = 1\n\
         [[sink]]\nid = \"out\"\ntype = \"postgres\"\ninput = \"in\"\nurl = \"{url}\"\n{settings}\n"
    );
    let mut parsed =
        Job::parse(Path::new("job.toml"), &text, &weir_connectors::registry()).unwrap();
    parsed.sinks.remove(0)
}

/// A sink under test: its settings, job name and staging folder.
struct Harness {
    config: SinkConfig,
    job: String,
    staging: PathBuf,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new(pg: &Postgres, job: &str, settings: &str) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        Harness {
            config: sink_config(job, &pg.url(), settings),
            job: job.to_owned(),
            staging: dir.path().join("staging"),
            _dir: dir,
        }
    }

    fn open(&self, restore: Option<u64>) -> Box<dyn Sink> {
        self.try_open(restore).unwrap()
    }

    fn try_open(&self, restore: Option<u64>) -> Result<Box<dyn Sink>, String> {
        let info = restore.map(|n| json!({ "checkpoint": n }));
        self.config
            .open(&self.job, &self.staging, info.as_ref(), None)
            .map_err(|e| e.to_string())
    }
}

fn batch(records: &[Value]) -> Batch {
    let mut b = Batch::new();
    for r in records {
        b.push(None, r.to_string().as_bytes(), None);
    }
    b
}

/// Writes `records` as checkpoint `id`'s epoch, precommits and commits it.
fn epoch(sink: &mut dyn Sink, id: u64, records: &[Value]) {
    sink.write(&batch(records)).unwrap();
    precommit_blocking(sink, id).unwrap();
    commit_blocking(sink, id).unwrap();
}

/// `query`'s rows, `|`-separated, one a line.
fn rows(pg: &Postgres, query: &str) -> String {
    pg.psql(query).trim().to_owned()
}

/// The checkpoint the bookkeeping row of `job`'s sink `out` holds.
fn bookkept(pg: &Postgres, job: &str) -> String {
    rows(
        pg,
        &format!("SELECT checkpoint FROM weir_sink_commits WHERE job = '{job}' AND sink = 'out'"),
    )
}

/// A table `<job>_rows (id bigserial, v int)` on `pg`, and the harness of
/// job `job` appending to it.
fn v_rows(pg: &Postgres, job: &str) -> Harness {
    pg.psql(&format!("CREATE TABLE {job}_rows (id bigserial, v int)"));
    Harness::new(pg, job, &format!("table = \"{job}_rows\""))
}

/// [`v_rows`], its sink opened and checkpoint 1's epoch, `{"v": 1}`,
/// delivered.
fn v_rows_delivered(pg: &Postgres, job: &str) -> (Harness, Box<dyn Sink>) {
    let h = v_rows(pg, job);
    let mut sink = h.open(None);
    epoch(sink.as_mut(), 1, &[json!({"v": 1})]);
    (h, sink)
}

/// The `v` of every row of [`v_rows`]`(job)`, in insertion order, one a line.
fn vs(pg: &Postgres, job: &str) -> String {
    rows(pg, &format!("SELECT v FROM {job}_rows ORDER BY id"))
}

#[test]
fn append_writes_every_record_of_committed_epochs_only() {
    let pg = server();
    pg.psql(
        "CREATE TABLE ap_words (id bigserial PRIMARY KEY, word text, n int, score double precision, \
         ok boolean, doc jsonb, day date, note text DEFAULT 'none', at timestamptz DEFAULT now())",
    );
    let h = Harness::new(pg, "ap", "table = \"ap_words\"");
    let mut sink = h.open(None);
    sink.write(&batch(&[
        json!({"word": "tab\there", "n": 1, "score": 0.5, "ok": true, "doc": {"a": [1, "x\\y"]}, "day": "2024-02-29"}),
        json!({"word": "line\nbreak\\slash", "n": null}),
    ]))
    .unwrap();
    precommit_blocking(sink.as_mut(), 1).unwrap();
    assert_eq!(
        rows(pg, "SELECT count(*) FROM ap_words"),
        "0",
        "nothing before the commit"
    );
    commit_blocking(sink.as_mut(), 1).unwrap();
    epoch(
        sink.as_mut(),
        2,
        &[json!({"word": "c", "n": 3, "note": "given"})],
    );
    drop(sink);
    assert_eq!(
        rows(
            pg,
            "SELECT id, replace(replace(word, E'\\t', '<T>'), E'\\n', '<N>'), n, score, ok, doc, day, note \
             FROM ap_words ORDER BY id"
        ),
        "1|tab<T>here|1|0.5|t|{\"a\": [1, \"x\\\\y\"]}|2024-02-29|none\n\
         2|line<N>break\\slash||||||none\n\
         3|c|3|||||given",
        "a field a record leaves out gets the column's default; a null is NULL"
    );
    assert_eq!(bookkept(pg, "ap"), "2");
    assert_eq!(
        rows(pg, "SELECT count(*) FROM ap_words WHERE at IS NULL"),
        "0"
    );
}

#[test]
fn upsert_keeps_one_row_per_key_with_the_last_values() {
    let pg = server();
    pg.psql("CREATE TABLE up_totals (word text, day date, n bigint NOT NULL, seen int DEFAULT 0, PRIMARY KEY (word, day))");
    pg.psql("INSERT INTO up_totals VALUES ('old', '2024-01-01', 1, 5)");
    let h = Harness::new(
        pg,
        "up",
        "table = \"up_totals\"\nmode = \"upsert\"\nkey = [\"word\", \"day\"]",
    );
    let mut sink = h.open(None);
    epoch(
        sink.as_mut(),
        1,
        &[
            json!({"word": "a", "day": "2024-01-01", "n": 1}),
            json!({"word": "b", "day": "2024-01-01", "n": 1}),
            json!({"word": "a", "day": "2024-01-01", "n": 2}),
            json!({"word": "a", "day": "2024-01-02", "n": 7, "seen": 1}),
            json!({"word": "old", "day": "2024-01-01", "n": 9}),
        ],
    );
    epoch(
        sink.as_mut(),
        2,
        &[json!({"word": "b", "day": "2024-01-01", "n": 4, "seen": 2})],
    );
    drop(sink);
    assert_eq!(
        rows(
            pg,
            "SELECT word, day, n, seen FROM up_totals ORDER BY word, day"
        ),
        "a|2024-01-01|2|0\na|2024-01-02|7|1\nb|2024-01-01|4|2\nold|2024-01-01|9|5"
    );
}

/// Names that need quoting (case, spaces, a quote) reach the right table
/// and columns, in append and in upsert mode.
#[test]
fn quoted_names_reach_their_table_and_columns() {
    let pg = server();
    pg.psql(
        "CREATE SCHEMA \"Qs\"; CREATE TABLE \"Qs\".\"My Table\" (\"Word\" text PRIMARY KEY, \"n\"\"q\" int, \"order\" int)",
    );
    let settings = "table = '\"Qs\".\"My Table\"'\nmode = \"upsert\"\nkey = [\"Word\"]";
    let h = Harness::new(pg, "qn", settings);
    let mut sink = h.open(None);
    epoch(
        sink.as_mut(),
        1,
        &[
            json!({"Word": "a", "n\"q": 1, "order": 2}),
            json!({"Word": "a", "n\"q": 3}),
        ],
    );
    drop(sink);
    assert_eq!(
        rows(
            pg,
            "SELECT \"Word\", \"n\"\"q\", \"order\" FROM \"Qs\".\"My Table\""
        ),
        "a|3|2"
    );
    let h = Harness::new(pg, "qn2", "table = '\"Qs\".\"My Table\"'");
    let mut sink = h.open(None);
    epoch(sink.as_mut(), 1, &[json!({"Word": "b", "order": 1})]);
    drop(sink);
    assert_eq!(rows(pg, "SELECT count(*) FROM \"Qs\".\"My Table\""), "2");
}

/// An epoch of several MiB, with records of two shapes, is sent in chunks
/// and arrives whole.
#[test]
fn a_large_epoch_arrives_whole() {
    let pg = server();
    pg.psql("CREATE TABLE lg_rows (i int, word text, pad text DEFAULT 'd')");
    let h = Harness::new(pg, "lg", "table = \"lg_rows\"");
    let mut sink = h.open(None);
    let n = 60_000;
    for part in 0..6 {
        let records: Vec<Value> = (part * n / 6..(part + 1) * n / 6)
            .map(|i| match i % 3 {
                0 => json!({"i": i, "word": "x".repeat(60)}),
                _ => json!({"i": i, "word": "y".repeat(60), "pad": "p\tq"}),
            })
            .collect();
        sink.write(&batch(&records)).unwrap();
    }
    precommit_blocking(sink.as_mut(), 1).unwrap();
    let started = std::time::Instant::now();
    commit_blocking(sink.as_mut(), 1).unwrap();
    eprintln!("delivered {n} records in {:?}", started.elapsed());
    drop(sink);
    assert_eq!(
        rows(
            pg,
            "SELECT count(*), count(DISTINCT i), sum(i), count(*) FILTER (WHERE pad = 'd') FROM lg_rows"
        ),
        format!("{n}|{n}|{}|{}", (0..n).sum::<u64>(), n / 3)
    );
}

/// Checkpoint 2 completed but the crash came before its delivery: the
/// restore delivers it, once, and a second restore of the same checkpoint
/// changes nothing; what checkpoint 3 staged never shows.
#[test]
fn a_crash_before_delivery_is_recovered_exactly_once() {
    let pg = server();
    let (h, mut sink) = v_rows_delivered(pg, "cr");
    sink.write(&batch(&[json!({"v": 2}), json!({"v": 22})]))
        .unwrap();
    precommit_blocking(sink.as_mut(), 2).unwrap();
    sink.write(&batch(&[json!({"v": 3})])).unwrap();
    precommit_blocking(sink.as_mut(), 3).unwrap();
    std::mem::forget(sink);
    assert_eq!(vs(pg, "cr"), "1");

    drop(h.open(Some(2)));
    assert_eq!(vs(pg, "cr"), "1\n2\n22");
    assert_eq!(bookkept(pg, "cr"), "2");
    let mut sink = h.open(Some(2));
    assert_eq!(vs(pg, "cr"), "1\n2\n22");
    epoch(sink.as_mut(), 3, &[json!({"v": 4})]);
    drop(sink);
    assert_eq!(vs(pg, "cr"), "1\n2\n22\n4");
}

/// The crash came after the epoch's transaction committed but before its
/// staged file was deleted: the restore sees the bookkeeping row and
/// delivers nothing again.
#[test]
fn a_crash_after_the_database_commit_delivers_nothing_twice() {
    let pg = server();
    let (h, mut sink) = v_rows_delivered(pg, "cc");
    sink.write(&batch(&[json!({"v": 2})])).unwrap();
    precommit_blocking(sink.as_mut(), 2).unwrap();
    let staged = h.staging.join("2.epoch");
    let kept = std::fs::read(&staged).unwrap();
    commit_blocking(sink.as_mut(), 2).unwrap();
    std::mem::forget(sink);
    assert!(!staged.exists());
    std::fs::write(&staged, kept).unwrap(); // as if the crash came before the deletion

    drop(h.open(Some(2)));
    assert_eq!(vs(pg, "cc"), "1\n2");
    assert!(!staged.exists(), "the delivered epoch's file is gone");
    // A database ahead of the restored checkpoint is refused.
    let err = h.try_open(Some(1)).err().unwrap();
    assert_has_all(&err, &["checkpoint 2", "--restore none"]);
}

/// A job started over (no checkpoint) forgets its bookkeeping row and
/// keeps the rows already written.
#[test]
fn starting_over_forgets_the_bookkeeping_row() {
    let pg = server();
    let h = v_rows(pg, "so");
    let mut sink = h.open(None);
    epoch(sink.as_mut(), 5, &[json!({"v": 1})]);
    drop(sink);
    assert_eq!(bookkept(pg, "so"), "5");
    let mut sink = h.open(None);
    assert_eq!(bookkept(pg, "so"), "");
    epoch(sink.as_mut(), 1, &[json!({"v": 2})]);
    drop(sink);
    assert_eq!(vs(pg, "so"), "1\n2");
    assert_eq!(bookkept(pg, "so"), "1");
}

/// One line, naming the sink and the table.
fn one_line(err: &str, table: &str) {
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.starts_with("sink `out`: table "), "{err}");
    assert!(err.contains(table), "names {table}: {err}");
}

#[test]
fn a_missing_table_is_reported_at_open() {
    let pg = server();
    let h = Harness::new(pg, "mt", "table = \"no_such_table\"");
    let err = h.try_open(None).err().unwrap();
    one_line(&err, "no_such_table");
    assert_has_all(&err, &["does not exist", "CREATE TABLE no_such_table"]);
    pg.psql("CREATE VIEW mt_view AS SELECT 1 AS a");
    let h = Harness::new(pg, "mt", "table = \"mt_view\"");
    let err = h.try_open(None).err().unwrap();
    one_line(&err, "public.mt_view");
    assert_has(&err, "it is a view, not a table");
}

#[test]
fn an_upsert_key_without_a_unique_index_is_reported_with_the_fix() {
    let pg = server();
    pg.psql("CREATE TABLE ki_rows (word text, n int)");
    let h = Harness::new(
        pg,
        "ki",
        "table = \"ki_rows\"\nmode = \"upsert\"\nkey = [\"word\"]",
    );
    let err = h.try_open(None).err().unwrap();
    one_line(&err, "public.ki_rows");
    assert_has(&err, "ALTER TABLE public.ki_rows ADD PRIMARY KEY (word)");
    let h = Harness::new(
        pg,
        "ki",
        "table = \"ki_rows\"\nmode = \"upsert\"\nkey = [\"wrod\"]",
    );
    let err = h.try_open(None).err().unwrap();
    assert_has_all(&err, &["`key` column `wrod` is not a column", "word, n"]);
    pg.psql("CREATE UNIQUE INDEX ON ki_rows (word)");
    let h = Harness::new(
        pg,
        "ki",
        "table = \"ki_rows\"\nmode = \"upsert\"\nkey = [\"word\"]",
    );
    h.open(None);
}

/// Writes `{"id": 0}` and `record` into `table` of the shared server
/// through `h` as the epoch of checkpoint 1, whose delivery fails with one
/// line naming the table and saying `want`; no row of it reaches the table.
fn assert_refused(h: &Harness, record: Value, table: &str, want: &str) {
    let mut sink = h.open(None);
    sink.write(&batch(&[json!({"id": 0}), record])).unwrap();
    precommit_blocking(sink.as_mut(), 1).unwrap();
    let err = commit_blocking(sink.as_mut(), 1).unwrap_err().to_string();
    one_line(&err, &format!("public.{table}"));
    assert_has(&err, want);
    assert_eq!(
        rows(server(), &format!("SELECT count(*) FROM {table}")),
        "0"
    );
}

/// A record PostgreSQL's column type refuses: the epoch is not delivered
/// (no row of it, no bookkeeping), and the error names the column.
#[test]
fn records_that_do_not_fit_the_table_fail_the_epoch_with_the_column() {
    let pg = server();
    pg.psql("CREATE TABLE tm_rows (id int, day date)");
    let cases = [
        (
            json!({"id": "seven"}),
            "column `id` (integer) needs a JSON integer",
        ),
        (json!({"id": 1, "colour": "red"}), "field `colour`"),
        (
            json!({"id": 1, "day": "not a date"}),
            "column `day` (date): invalid input syntax for type date",
        ),
    ];
    for (i, (record, want)) in cases.into_iter().enumerate() {
        let job = format!("tm{i}");
        let h = Harness::new(pg, &job, "table = \"tm_rows\"");
        assert_refused(&h, record, "tm_rows", want);
        assert_eq!(bookkept(pg, &job), "");
    }
    // In upsert mode PostgreSQL parses the values in the temporary table:
    // the message still names the table's column.
    pg.psql("CREATE TABLE tm_keyed (id int PRIMARY KEY, day date)");
    let cases = [
        (
            json!({"id": 1, "day": "soon"}),
            "column `day` (date): invalid input syntax for type date",
        ),
        (json!({"day": "2024-01-01"}), "key column `id` is missing"),
    ];
    let upsert = "table = \"tm_keyed\"\nmode = \"upsert\"\nkey = \"id\"";
    for (i, (record, want)) in cases.into_iter().enumerate() {
        let h = Harness::new(pg, &format!("tmk{i}"), upsert);
        assert_refused(&h, record, "tm_keyed", want);
    }
    let h = Harness::new(pg, "tmi", "table = \"tm_rows\"\nignore_unknown = true");
    let mut sink = h.open(None);
    epoch(sink.as_mut(), 1, &[json!({"id": 1, "colour": "red"})]);
    assert_eq!(rows(pg, "SELECT id FROM tm_rows"), "1");
}

/// Rows (a `csv` source's, a plugin's `emit_row`) are written from their
/// typed fields, staged as rows through the epoch's file: the table gets
/// what their JSON would give it; a row that does not fit fails the epoch
/// naming the column and showing the row as JSON.
#[test]
fn rows_reach_the_table_from_their_typed_fields() {
    use weir_flat::row::RowWriter;
    let pg = server();
    pg.psql("CREATE TABLE tm_typed (id int, amount numeric, ok boolean, note text, doc jsonb, day date)");
    let h = Harness::new(pg, "typed", "table = \"tm_typed\"");
    let mut sink = h.open(None);
    assert!(sink.reads_rows());
    let mut b = Batch::new();
    let cells = [
        (1, "12.50", true, "a\tb"),
        (2, "-0.001", false, "ü\\ \"q\""),
    ];
    for (id, amount, ok, note) in cells {
        let mut row = Vec::new();
        RowWriter::new(&mut row)
            .i64("id", id)
            .decimal("amount", amount)
            .bool("ok", ok)
            .str("note", note)
            .decimal("doc", "1.50")
            .null("day");
        b.push_row(None, &row, None);
    }
    sink.write(&b).unwrap();
    precommit_blocking(sink.as_mut(), 1).unwrap();
    commit_blocking(sink.as_mut(), 1).unwrap();
    let got = rows(
        pg,
        "SELECT id, amount, ok, note, doc, day IS NULL FROM tm_typed ORDER BY id",
    );
    assert_eq!(got, "1|12.50|t|a\tb|1.5|t\n2|-0.001|f|ü\\ \"q\"|1.5|t");

    let h = Harness::new(pg, "typed-bad", "table = \"tm_typed\"");
    let mut sink = h.open(None);
    let mut row = Vec::new();
    RowWriter::new(&mut row).str("id", "seven").bool("ok", true);
    let mut b = Batch::new();
    b.push_row(None, &row, None);
    sink.write(&b).unwrap();
    precommit_blocking(sink.as_mut(), 2).unwrap();
    let err = commit_blocking(sink.as_mut(), 2).unwrap_err().to_string();
    assert_has(&err, "column `id` (integer) needs a JSON integer");
    assert_has(
        &err,
        r#"got a string "seven" in record {"id":"seven","ok":true}"#,
    );
    assert_eq!(rows(pg, "SELECT count(*) FROM tm_typed"), "2");
}

/// The server restarts between two epochs: the sink reconnects and the
/// next epoch is delivered; with the server down, the delivery fails
/// saying the connection was lost, and the restore delivers it once the
/// server is back.
#[test]
fn a_server_restart_between_epochs() {
    let mut pg = Postgres::start();
    let (h, mut sink) = v_rows_delivered(&pg, "rs");
    pg.restart();
    epoch(sink.as_mut(), 2, &[json!({"v": 2})]);
    assert_eq!(vs(&pg, "rs"), "1\n2");

    sink.write(&batch(&[json!({"v": 3})])).unwrap();
    precommit_blocking(sink.as_mut(), 3).unwrap();
    pg.stop();
    let err = commit_blocking(sink.as_mut(), 3).unwrap_err().to_string();
    assert!(
        !err.contains('\n') && err.contains("lost the connection to PostgreSQL"),
        "{err}"
    );
    drop(sink);
    pg.restart();
    drop(h.open(Some(3)));
    assert_eq!(vs(&pg, "rs"), "1\n2\n3");
}
