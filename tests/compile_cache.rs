//! The on-disk cache of compiled components (`weir::wasm::compile_cache`): a hit
//! skips compilation, a corrupt, truncated or foreign entry is compiled again
//! (never a crash), an unwritable folder only disables caching, and the
//! engine's configuration is part of the key. Through the `weir` binary:
//! `WEIR_CACHE_DIR` picks the folder and `off` disables it.

use std::time::Instant;

use weir::Runtime;
use weir::wasm::RuntimeOptions;
use weir::wasm::compile_cache::{CompileCache, Outcome};
use weir_tests::cli::{self, Weir};
use weir_tests::plugins;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn wasm() -> Vec<u8> {
    std::fs::read(plugins::WORD_COUNT).unwrap()
}

/// An empty cache in a temporary folder, which lives as long as the guard.
fn empty_cache() -> (tempfile::TempDir, CompileCache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(dir.path());
    (dir, cache)
}

#[test]
fn a_second_compile_is_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(dir.path().join("cache"));
    let rt = Runtime::new().unwrap();
    let (_, first) = cache.compile(rt.engine(), &wasm()).unwrap();
    assert_eq!(first, Outcome::Compiled);
    assert!(cache.entry_path(rt.engine(), &wasm()).exists());
    let (_, second) = cache.compile(rt.engine(), &wasm()).unwrap();
    assert_eq!(second, Outcome::Hit);
}

#[test]
fn damaged_entries_are_compiled_again() {
    let (_dir, cache) = empty_cache();
    let rt = Runtime::new().unwrap();
    let bytes = wasm();
    cache.compile(rt.engine(), &bytes).unwrap();
    let entry = cache.entry_path(rt.engine(), &bytes);
    let good = std::fs::read(&entry).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    for (what, damaged) in [
        ("a flipped byte", flipped),
        ("truncated", good[..good.len() / 3].to_vec()),
        ("empty", Vec::new()),
        ("not an entry", b"hello".to_vec()),
    ] {
        std::fs::write(&entry, &damaged).unwrap();
        let (_, outcome) = cache
            .compile(rt.engine(), &bytes)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(outcome, Outcome::Replaced, "{what}");
        let (_, again) = cache.compile(rt.engine(), &bytes).unwrap();
        assert_eq!(again, Outcome::Hit, "{what}: the entry was rewritten");
    }
}

#[test]
fn a_well_formed_entry_of_another_plugin_is_compiled_again_not_run() {
    let (_dir, cache) = empty_cache();
    let rt = Runtime::new().unwrap();
    let word_count = wasm();
    let reconcile = std::fs::read(plugins::RECONCILE).unwrap();
    cache.compile(rt.engine(), &reconcile).unwrap();
    // Reconcile's entry, intact, under word-count's name.
    std::fs::copy(
        cache.entry_path(rt.engine(), &reconcile),
        cache.entry_path(rt.engine(), &word_count),
    )
    .unwrap();
    let (_, outcome) = cache.compile(rt.engine(), &word_count).unwrap();
    assert_eq!(outcome, Outcome::Replaced);
    let (_, again) = cache.compile(rt.engine(), &word_count).unwrap();
    assert_eq!(again, Outcome::Hit, "word-count's own entry was written");
}

#[test]
fn weir_inspect_never_runs_another_plugins_cache_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sha = |path: &str| {
        let rt = Runtime::new().unwrap();
        rt.load(path).unwrap().sha256().to_owned()
    };
    let (word_count, reconcile) = (sha(plugins::WORD_COUNT), sha(plugins::RECONCILE));
    inspect(&cache, plugins::WORD_COUNT);
    inspect(&cache, plugins::RECONCILE);
    let entry_of = |sha: &str| {
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(sha))
            .unwrap_or_else(|| panic!("no cache entry for {sha}"))
    };
    std::fs::copy(entry_of(&reconcile), entry_of(&word_count)).unwrap();
    let out = cli::Outcome::of(
        WEIR.command(["inspect", plugins::WORD_COUNT])
            .env("WEIR_CACHE_DIR", &cache),
    )
    .assert_ok();
    assert!(out.stdout.contains("word-count"), "{}", out.stdout);
    assert!(!out.stdout.contains("reconcile"), "{}", out.stdout);
    assert!(
        out.stderr.contains("was compiled from another component"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unwritable_cache_only_disables_caching() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the folder should be.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let cache = CompileCache::new(&not_a_dir);
    let rt = Runtime::new().unwrap();
    let (_, outcome) = cache.compile(rt.engine(), &wasm()).unwrap();
    assert_eq!(outcome, Outcome::NotStored);
}

#[test]
fn the_engine_configuration_is_part_of_the_key() {
    let (_dir, cache) = empty_cache();
    let plain = Runtime::new().unwrap();
    let fuel = Runtime::with_options(RuntimeOptions { fuel: true }).unwrap();
    let bytes = wasm();
    assert_ne!(
        cache.entry_path(plain.engine(), &bytes),
        cache.entry_path(fuel.engine(), &bytes)
    );
    assert_eq!(
        cache.compile(plain.engine(), &bytes).unwrap().1,
        Outcome::Compiled
    );
    assert_eq!(
        cache.compile(fuel.engine(), &bytes).unwrap().1,
        Outcome::Compiled
    );
    assert_eq!(
        cache.compile(fuel.engine(), &bytes).unwrap().1,
        Outcome::Hit
    );
}

#[test]
fn bad_wasm_is_an_error_not_an_entry() {
    let (_dir, cache) = empty_cache();
    let rt = Runtime::new().unwrap();
    let bad = b"\0asm\x0d\0\x01\0garbage".to_vec();
    assert!(cache.compile(rt.engine(), &bad).is_err());
    assert!(!cache.entry_path(rt.engine(), &bad).exists());
}

fn inspect(cache_dir: &std::path::Path, plugin: &str) -> f64 {
    let started = Instant::now();
    cli::Outcome::of(
        WEIR.command(["inspect", plugin])
            .env("WEIR_CACHE_DIR", cache_dir),
    )
    .assert_ok();
    started.elapsed().as_secs_f64()
}

fn entries(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cwasm")
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn weir_uses_weir_cache_dir_and_off_disables_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let cold = inspect(&cache, plugins::RECONCILE);
    assert_eq!(entries(&cache), 1, "the first run wrote an entry");
    let warm = inspect(&cache, plugins::RECONCILE);
    eprintln!("weir inspect reconcile.wasm: {cold:.2} s cold, {warm:.2} s from the cache");
    // A corrupt entry is recompiled by the CLI too.
    for e in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(e.unwrap().path(), b"corrupt").unwrap();
    }
    inspect(&cache, plugins::RECONCILE);
    let out = cli::Outcome::of(
        WEIR.command(["inspect", plugins::RECONCILE])
            .env("WEIR_CACHE_DIR", "off")
            .env("HOME", dir.path())
            .env_remove("XDG_CACHE_HOME"),
    );
    assert!(out.success());
    assert!(!dir.path().join(".cache").exists(), "off writes nothing");
}
