//! `weir-polyglot-bench`: component size, compile time, load time from the
//! compile cache, instantiate time and throughput of `word-count` built in
//! every language, as a Markdown table (the one in docs/polyglot.md), and
//! of the Python word count on the raw componentize-py bindings
//! (`plugins/python/word-count-raw`), the baseline of `weir_sdk`'s cost.
//!
//! ```sh
//! cargo run --release -p weir-cli --example weir-polyglot-bench
//! ```
//!
//! Builds the Python, C, JavaScript and Zig components first with
//! `scripts/build-polyglot.sh` (a language whose toolchain cannot be installed
//! is left out, with the reason). Throughput: batches of 1,000 words (500
//! distinct) through `OperatorInstance::process`, host state in memory, for
//! about `WEIR_BENCH_SECS` seconds (default 3) per language.

use std::time::{Duration, Instant};

use weir::wasm::compile_cache::CompileCache;
use weir::{OperatorInstance, Record, Runtime};
use weir_tests::{plugins, polyglot};

fn main() {
    let secs: f64 = std::env::var("WEIR_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let mut builds = vec![("Rust".to_string(), plugins::WORD_COUNT.into())];
    for lang in polyglot::LANGS {
        match polyglot::component(*lang, "word-count") {
            Ok(p) => builds.push((lang.name.to_string(), p)),
            Err(why) => eprintln!("left out: {why}"),
        }
    }
    // The Python word count on the raw bindings, without weir_sdk: the
    // baseline of the SDK's cost per record.
    if let Ok(p) = polyglot::component(polyglot::lang("python"), "word-count-raw") {
        builds.push(("python (raw bindings)".to_string(), p));
    }
    let rt = Runtime::new().expect("wasmtime starts");
    let batches: Vec<Vec<Record>> = (0..16)
        .map(|b| {
            (0..1000)
                .map(|i| Record::new(format!("word{}", (b * 7919 + i * 31) % 500).into_bytes()))
                .collect()
        })
        .collect();
    println!(
        "| guest | component size | compile | load from cache | instantiate + open | records/s | µs/record |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, path) in builds {
        let bytes = std::fs::read(&path).unwrap();
        let started = Instant::now();
        wasmtime::component::Component::new(rt.engine(), &bytes).expect("compiles");
        let compile = started.elapsed();

        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(dir.path());
        cache.compile(rt.engine(), &bytes).unwrap();
        let started = Instant::now();
        cache.compile(rt.engine(), &bytes).unwrap();
        let cached = started.elapsed();

        let plugin = rt.load(&path).expect("loads");
        let n = 20;
        let started = Instant::now();
        for _ in 0..n {
            OperatorInstance::new(&plugin, "count", 0, 1, "{}").unwrap();
        }
        let instantiate = started.elapsed() / n;

        let mut inst = OperatorInstance::new(&plugin, "count", 0, 1, "{}").unwrap();
        let (mut records, started) = (0u64, Instant::now());
        while started.elapsed() < Duration::from_secs_f64(secs) {
            for batch in &batches {
                inst.process(0, batch).unwrap();
                inst.take_output(0);
                records += batch.len() as u64;
            }
        }
        let per_sec = records as f64 / started.elapsed().as_secs_f64();
        println!(
            "| {name} | {} | {} | {} | {} | {:.0} | {:.2} |",
            size(bytes.len()),
            ms(compile),
            ms(cached),
            ms(instantiate),
            per_sec,
            1e6 / per_sec
        );
    }
}

fn size(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MB", n as f64 / (1 << 20) as f64)
    } else {
        format!("{:.0} KB", n as f64 / 1024.0)
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}
