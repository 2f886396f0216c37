//! Smoke tests: every benchmark runs in its smallest mode and reports the
//! expected shape. Nothing here judges speed (no timing assertions): CI
//! only checks that the benchmarks compile and work.

use std::path::{Path, PathBuf};

use weir_bench::{Mode, Report, Settings};

fn settings() -> Settings {
    let mut s = Settings::new(Mode::Tiny);
    // The plugins weir-tests' build script just built.
    s.plugins = Path::new(weir_tests::plugins::FILTER)
        .parent()
        .unwrap()
        .to_path_buf();
    // The native programs of `state` run as `weir-bench native ...`.
    s.bench_exe = Some(env!("CARGO_BIN_EXE_weir-bench").into());
    s
}

/// The `weir` binary of this build's profile, next to `weir-bench`: built
/// now (`cargo build -p weir-cli`, which does nothing when it is up to
/// date), since a package's tests get only its own binaries built.
fn weir_binary() -> PathBuf {
    let bench = Path::new(env!("CARGO_BIN_EXE_weir-bench"));
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", "weir-cli", "--bin", "weir"]);
    // What cargo sets for this test (CARGO_PKG_*, CARGO_MANIFEST_DIR, ...)
    // would reach the build scripts of the nested build and make some
    // rebuild their crates; where cargo lives and builds to stays.
    for (var, _) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if name.starts_with("CARGO_") && name != "CARGO_HOME" && name != "CARGO_TARGET_DIR" {
            cmd.env_remove(&var);
        }
    }
    if bench.parent().is_some_and(|d| d.ends_with("release")) {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("cargo runs");
    assert!(status.success(), "building weir: {status}");
    bench.with_file_name("weir")
}

/// Runs `name` and checks what every report must have.
fn run(name: &str) -> Report {
    run_with(name, &settings())
}

/// Runs `name` with `settings` and checks what every report must have.
fn run_with(name: &str, settings: &Settings) -> Report {
    let report = weir_bench::run(name, settings).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert_eq!(report.benchmark, name);
    assert!(!report.rows.is_empty(), "{name}: no rows");
    for row in &report.rows {
        assert!(!row.unit.is_empty(), "{name}: {} has no unit", row.case);
        if let Some(b) = &row.baseline {
            assert!(
                report.get(b).is_some(),
                "{name}: {} names baseline {b}, which is not a row",
                row.case
            );
        }
    }
    let json = serde_json::to_value(&report).unwrap();
    for field in ["benchmark", "params", "rows", "targets", "notes"] {
        assert!(json.get(field).is_some(), "{name}: JSON has no `{field}`");
    }
    assert!(report.table().contains(&format!("== {name} ==")));
    report
}

/// The rows named `cases` exist and have a positive value; those with a
/// baseline have a ratio.
fn has(report: &Report, cases: &[&str]) {
    for case in cases {
        let row = report.get(case).unwrap_or_else(|| {
            panic!("{}: no row `{case}`:\n{}", report.benchmark, report.table())
        });
        assert!(
            row.value.is_finite() && row.value > 0.0,
            "{case}: {}",
            row.value
        );
        if row.baseline.is_some() {
            assert!(row.ratio.is_some(), "{case} has a baseline but no ratio");
        }
    }
}

#[test]
fn boundary_reports_every_batch_size_for_both_operators() {
    let r = run("boundary");
    for op in ["filter", "word-count"] {
        for size in weir_bench::boundary::BATCH_SIZES {
            has(
                &r,
                &[
                    &format!("{op} native batch={size}"),
                    &format!("{op} wasm batch={size}"),
                ],
            );
        }
    }
}

#[test]
fn end_to_end_reports_both_jobs_against_both_baselines() {
    let r = run("end-to-end");
    for job in ["filter", "word-count"] {
        has(
            &r,
            &[
                &format!("{job} native single-threaded"),
                &format!("{job} native in host pipeline"),
                &format!("{job} wasm p1 ckpt=none"),
                &format!("{job} wasm p1 ckpt=1s"),
                &format!("{job} wasm p2 ckpt=none"),
                &format!("{job} wasm p2 ckpt=1s"),
            ],
        );
    }
    assert_eq!(r.targets.len(), 7, "{}", r.table());
    // Every Wasm job wrote what the native program wrote.
    assert!(
        !r.notes.iter().any(|n| n.contains("outputs differ")),
        "{}",
        r.table()
    );
}

#[test]
fn checkpoint_reports_full_incremental_and_parallelism() {
    let r = run("checkpoint");
    has(
        &r,
        &[
            "store full checkpoint",
            "store incremental 1% (median of 5)",
            "job p1: checkpoint duration (median)",
            "job p2: checkpoint duration (median)",
            "job p4: checkpoint duration (median)",
        ],
    );
    let incr = r.get("store incremental 1% (median of 5)").unwrap();
    assert!(incr.extra["bytes_written"] > 0.0);
    assert!(r.targets.iter().any(|t| t.name.contains("incremental")));
}

#[test]
fn recovery_restores_and_reports_time_to_first_record() {
    let r = run("recovery");
    has(
        &r,
        &[
            "cold start: first output",
            "restore: first output",
            "step: load_instance",
            "steps: total",
        ],
    );
    assert_eq!(r.get("steps: total").unwrap().extra["keys_loaded"], 5000.0);
}

#[test]
fn intervals_report_100ms_checkpoints_against_1s() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("intervals", &s);
    has(
        &r,
        &[
            "word-count p1 ckpt=1s",
            "word-count p1 ckpt=100ms",
            "reconcile p1 ckpt=1s",
            "reconcile p1 ckpt=100ms",
        ],
    );
    assert_eq!(r.targets.len(), 2);
}

#[test]
fn recording_reports_the_recording_job_against_the_same_job_not_recording() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("recording", &s);
    has(&r, &["word-count p1", "word-count p1 recording 2 epochs"]);
    let recorded = &r.get("word-count p1 recording 2 epochs").unwrap().extra;
    assert!(recorded["recorded_bytes_per_record"] > 0.0, "{recorded:?}");
}

#[test]
fn latency_reports_every_delivery_mode_at_both_rates() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("latency", &s);
    let mut cases = Vec::new();
    for rate in [100, 10_000] {
        for case in [
            "at-least-once, 1s checkpoints",
            "exactly-once, 100ms checkpoints",
            "exactly-once, 1s checkpoints",
        ] {
            cases.push(format!("{case} @ {rate}/s: p99"));
        }
    }
    has(&r, &cases.iter().map(String::as_str).collect::<Vec<_>>());
    for case in &cases {
        let row = r.get(case).unwrap();
        assert!(row.extra["records"] > 0.0, "{case}: no records");
        assert!(row.extra["p50_ms"] <= row.value && row.value <= row.extra["max_ms"]);
    }
    assert_eq!(r.targets.len(), 2);
}

#[test]
fn state_runs_weir_and_the_native_programs_as_child_processes() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("state", &s);
    let mut cases = Vec::new();
    for w in ["reconcile", "word-count uniform", "word-count zipf"] {
        cases.push(format!("{w} native"));
        cases.push(format!("{w} native tight"));
        for p in [1, 2] {
            cases.push(format!("{w} weir p{p} ckpt=1s"));
        }
    }
    cases.push("restore 5000 keys: first processed record".into());
    cases.push("checkpoint of 5000 dirty keys".into());
    has(&r, &cases.iter().map(String::as_str).collect::<Vec<_>>());
    for case in &cases[..12] {
        let row = r.get(case).unwrap();
        assert!(row.extra["peak_rss_mb"] > 0.0, "{case}: no peak RSS");
    }
    let p1 = r.get("reconcile weir p1 ckpt=1s").unwrap();
    assert!(p1.extra["peak_rss_ratio"] > 0.0);
    assert!(p1.extra["ratio_tight"] > 0.0);
    assert!(p1.extra["peak_rss_ratio_tight"] > 0.0);
    assert_eq!(p1.extra["output_lines"], 2000.0, "one line per order");
    assert!(
        !r.notes.iter().any(|n| n.contains("is not the native")),
        "outputs differ: {:?}",
        r.notes
    );
    assert_eq!(r.targets.len(), 11);
}

#[test]
fn skew_reports_alignment_for_balanced_and_skewed_inputs() {
    let r = run("skew");
    assert_eq!(r.rows.len(), 3, "{}", r.table());
    for row in &r.rows {
        assert!(row.extra.contains_key("max_buffered_bytes"), "{}", row.case);
        assert!(row.extra["checkpoints"] >= 1.0, "{}", r.table());
    }
}

#[test]
fn modes_reports_every_checkpoint_mode_against_aligned() {
    let r = run("modes");
    // An unaligned checkpoint may take under a millisecond: values are
    // only finite, not positive.
    has(&r, &["aligned, 4 ms per batch"]);
    for case in [
        "unaligned, 4 ms per batch",
        "aligned + 20ms timeout, 4 ms per batch",
    ] {
        let row = r
            .get(case)
            .unwrap_or_else(|| panic!("no row `{case}`:\n{}", r.table()));
        assert!(row.value.is_finite() && row.baseline.is_some(), "{case}");
    }
    let unaligned = r.get("unaligned, 4 ms per batch").unwrap();
    assert!(unaligned.extra["checkpoints"] >= 1.0, "{}", r.table());
    assert_eq!(
        unaligned.extra["unaligned_checkpoints"],
        unaligned.extra["checkpoints"],
        "{}",
        r.table()
    );
    let aligned = r.get("aligned, 4 ms per batch").unwrap();
    assert_eq!(aligned.extra["unaligned_checkpoints"], 0.0, "{}", r.table());
    assert_eq!(aligned.extra["inflight_max_bytes"], 0.0, "{}", r.table());
}

#[test]
fn windows_reports_the_job_against_the_native_program_with_the_same_windows() {
    let r = run("windows");
    has(
        &r,
        &[
            "aggregate native single-threaded",
            "aggregate wasm p1 ckpt=none",
            "aggregate wasm p1 ckpt=1s",
            "churn native single-threaded",
            "churn wasm p1 ckpt=none",
            "churn wasm p1 ckpt=1s",
        ],
    );
    assert!(r.notes.is_empty(), "the outputs differ: {:?}", r.notes);
    assert!(r.get("churn wasm p1 ckpt=none").unwrap().extra["windows"] > 0.0);
}

#[test]
fn threads_reports_every_executor_at_every_parallelism() {
    use weir_bench::threads::{Executor, PARALLELISM};
    let r = run("threads");
    for p in PARALLELISM {
        for e in Executor::ALL {
            let e = e.name();
            has(
                &r,
                &[
                    &format!("hop p{p} {e}"),
                    &format!("word-count p{p} {e}"),
                    &format!("word-count latency p50 p{p} {e}"),
                    &format!("word-count latency p99 p{p} {e}"),
                ],
            );
            assert!(
                r.get(&format!("hop p{p} {e}")).unwrap().extra["ns_per_hop"].is_finite(),
                "{}",
                r.table()
            );
        }
        // Every tokio case is compared with the threads of the same p.
        let tokio = r.get(&format!("word-count p{p} tokio")).unwrap();
        assert_eq!(
            tokio.baseline.as_deref(),
            Some(format!("word-count p{p} threads").as_str())
        );
    }
    assert_eq!(r.rows.len(), 3 * 3 * 4, "{}", r.table());
}

#[test]
fn the_binary_prints_json_and_rejects_unknown_benchmarks() {
    let exe = env!("CARGO_BIN_EXE_weir-bench");
    let plugins = Path::new(weir_tests::plugins::FILTER).parent().unwrap();
    let out = std::process::Command::new(exe)
        .args(["boundary", "--tiny", "--json", "-q", "--plugins"])
        .arg(plugins)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["benchmark"], "boundary");
    assert!(json[0]["rows"].as_array().unwrap().len() >= 16);

    let out = std::process::Command::new(exe)
        .arg("nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Against the private servers it starts: every Weir case and baseline
/// delivers every record (the benchmark checks the counts itself).
#[test]
fn connectors_run_against_private_servers() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("connectors", &s);
    has(
        &r,
        &[
            "psql \\copy",
            "weir → postgres append",
            "weir → postgres upsert",
            "pg_recvlogical",
            "postgres-cdc → weir",
            "async-nats publish",
            "weir → nats",
            "async-nats read",
            "nats → weir",
            "nats filtered → weir, fresh",
            "nats filtered → weir, restored",
        ],
    );
}

/// Against a private Kafka broker: both sink modes and the source deliver
/// every record (the benchmark checks the counts itself), each against
/// librdkafka's own client, and Avro and Protobuf through a private schema
/// registry against apache-avro's and prost-reflect's decoders; a plugin's
/// rows into an Avro and a Protobuf topic, from the rows and through their
/// JSON.
#[test]
fn kafka_runs_both_sink_modes_and_the_source_against_librdkafka() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("kafka", &s);
    has(
        &r,
        &[
            "librdkafka produce",
            "weir → kafka exactly-once",
            "weir → kafka at-least-once",
            "librdkafka consume",
            "kafka → weir",
            "apache-avro decode",
            "kafka avro → weir",
            "prost-reflect decode",
            "kafka protobuf → weir",
            "word-count → kafka avro, through JSON",
            "word-count → kafka avro, from rows",
            "word-count → kafka protobuf, through JSON",
            "word-count → kafka protobuf, from rows",
        ],
    );
}

/// Against the private S3 server: the word count with and without its
/// checkpoints copied to the store, and a state directory rebuilt from it.
#[test]
fn remote_reports_the_store_against_the_local_file_and_a_restore() {
    let r = run("remote");
    has(
        &r,
        &[
            "word count, checkpoints in the local file",
            "word count, checkpoints copied to S3",
            "restore: rebuild the state directory from S3",
        ],
    );
}

/// Against a private Kafka broker and S3 server: the job on 1, 2 and 3
/// worker processes (each run checks the output's count), and a killed
/// worker's task taken over.
#[test]
fn workers_report_every_worker_count_and_a_failover() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("workers", &s);
    has(
        &r,
        &[
            "1 worker(s)",
            "2 worker(s)",
            "3 worker(s)",
            "failover: a killed worker's task runs elsewhere",
        ],
    );
}

/// With the dashboard listening and with the page open in headless
/// Chromium: every case runs and reports records/s and cpu against the
/// baseline.
#[test]
fn ui_runs_every_case_with_and_without_the_page() {
    let mut s = settings();
    s.weir = Some(weir_binary());
    let r = run_with("ui", &s);
    has(
        &r,
        &[
            "baseline",
            "baseline again",
            "--ui, nobody watching",
            "--ui, stream read",
            "--ui, page open",
            "baseline: cpu",
            "--ui, stream read: cpu",
            "--ui, page open: cpu",
        ],
    );
    assert_eq!(r.targets.len(), 5, "{}", r.table());
}
