//! The on-disk cache of compiled components (`weir::wasm::compile_cache`): a hit
//! skips compilation, a corrupt, truncated or foreign entry is compiled again
//! (never a crash), an unwritable folder only disables caching, and the
//! engine's configuration is part of the key, and the folder is trimmed to
//! its bound. Through the `weir` binary: `WEIR_CACHE_DIR` picks the folder,
//! a warm run hits (rewrites nothing), a corrupt entry is rewritten, and
//! `off` disables it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weir::Runtime;
use weir::wasm::RuntimeOptions;
use weir::wasm::compile_cache::{CompileCache, MAX_ENTRIES, Outcome};
use weir_tests::cli::{self, Weir};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

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

/// What `cache` did to give the compiled `bytes` for `rt`'s engine.
fn outcome_of(cache: &CompileCache, rt: &Runtime, bytes: &[u8]) -> Outcome {
    cache.compile(rt.engine(), bytes).unwrap().1
}

#[test]
fn a_second_compile_is_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(dir.path().join("cache"));
    let rt = Runtime::new().unwrap();
    assert_eq!(outcome_of(&cache, &rt, &wasm()), Outcome::Compiled);
    assert!(cache.entry_path(rt.engine(), &wasm()).exists());
    assert_eq!(outcome_of(&cache, &rt, &wasm()), Outcome::Hit);
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
        assert_eq!(
            outcome_of(&cache, &rt, &bytes),
            Outcome::Hit,
            "{what}: the entry was rewritten"
        );
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
    assert_eq!(outcome_of(&cache, &rt, &word_count), Outcome::Replaced);
    assert_eq!(
        outcome_of(&cache, &rt, &word_count),
        Outcome::Hit,
        "word-count's own entry was written"
    );
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
    assert_has(&out.stdout, "word-count");
    assert_lacks(&out.stdout, "reconcile");
    assert_has(&out.stderr, "was compiled from another component");
}

#[test]
fn an_unwritable_cache_only_disables_caching() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the folder should be.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let cache = CompileCache::new(&not_a_dir);
    let rt = Runtime::new().unwrap();
    assert_eq!(outcome_of(&cache, &rt, &wasm()), Outcome::NotStored);
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
    assert_eq!(outcome_of(&cache, &plain, &bytes), Outcome::Compiled);
    assert_eq!(outcome_of(&cache, &fuel, &bytes), Outcome::Compiled);
    assert_eq!(outcome_of(&cache, &fuel, &bytes), Outcome::Hit);
}

#[test]
fn bad_wasm_is_an_error_not_an_entry() {
    let (_dir, cache) = empty_cache();
    let rt = Runtime::new().unwrap();
    let bad = b"\0asm\x0d\0\x01\0garbage".to_vec();
    assert!(cache.compile(rt.engine(), &bad).is_err());
    assert!(!cache.entry_path(rt.engine(), &bad).exists());
}

/// `weir inspect PLUGIN` with `WEIR_CACHE_DIR=cache_dir`, asserted to
/// succeed; returns its stderr.
fn inspect(cache_dir: &Path, plugin: &str) -> String {
    cli::Outcome::of(
        WEIR.command(["inspect", plugin])
            .env("WEIR_CACHE_DIR", cache_dir),
    )
    .assert_ok()
    .stderr
}

/// The entry files (`*.cwasm`) in `dir`, sorted.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// What identifies one write of a file: entries are written to a new file
/// and renamed into place, so a rewrite changes the inode even when the
/// bytes are the same.
fn written(path: &Path) -> (u64, std::time::SystemTime, Vec<u8>) {
    let meta = std::fs::metadata(path).unwrap();
    (
        meta.ino(),
        meta.modified().unwrap(),
        std::fs::read(path).unwrap(),
    )
}

#[test]
fn weir_uses_weir_cache_dir_and_off_disables_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    inspect(&cache, plugins::RECONCILE);
    let [entry] = entries(&cache)
        .try_into()
        .expect("the first run wrote one entry");
    let cold = written(&entry);
    // The warm run is a hit: it reads the entry and writes nothing (a
    // compile would have stored a new file).
    inspect(&cache, plugins::RECONCILE);
    assert_eq!(entries(&cache), std::slice::from_ref(&entry));
    assert!(
        written(&entry) == cold,
        "the warm run rewrote {}",
        entry.display()
    );
    // A corrupt entry is reported, compiled again and rewritten, and the
    // next run hits the rewritten entry.
    std::fs::write(&entry, b"corrupt").unwrap();
    let stderr = inspect(&cache, plugins::RECONCILE);
    assert_has_all(&stderr, &["corrupt", entry.to_str().unwrap()]);
    assert_eq!(entries(&cache), std::slice::from_ref(&entry));
    let rewritten = written(&entry);
    assert_ne!(
        rewritten.2, b"corrupt",
        "the corrupt entry was not rewritten"
    );
    inspect(&cache, plugins::RECONCILE);
    assert!(
        written(&entry) == rewritten,
        "the run after the rewrite was no hit"
    );

    let out = cli::Outcome::of(
        WEIR.command(["inspect", plugins::RECONCILE])
            .env("WEIR_CACHE_DIR", "off")
            .env("HOME", dir.path())
            .env_remove("XDG_CACHE_HOME"),
    );
    assert!(out.success());
    assert!(!dir.path().join(".cache").exists(), "off writes nothing");
}

/// Writing an entry trims the folder to [`MAX_ENTRIES`], removing the
/// least recently written entries.
#[test]
fn the_cache_is_trimmed_to_its_bound_oldest_first() {
    let (dir, cache) = empty_cache();
    let rt = Runtime::new().unwrap();
    let bytes = wasm();
    let old = std::time::SystemTime::now() - Duration::from_secs(86_400);
    let extra = 5;
    let fillers: Vec<PathBuf> = (0..MAX_ENTRIES + extra)
        .map(|i| {
            let path = dir.path().join(format!("filler-{i:03}.cwasm"));
            let f = std::fs::File::create(&path).unwrap();
            // Filler i was written i seconds after the oldest.
            f.set_modified(old + Duration::from_secs(i as u64)).unwrap();
            path
        })
        .collect();
    assert_eq!(outcome_of(&cache, &rt, &bytes), Outcome::Compiled);
    let left = entries(dir.path());
    assert_eq!(left.len(), MAX_ENTRIES, "{left:?}");
    let entry = cache.entry_path(rt.engine(), &bytes);
    assert!(left.contains(&entry), "the new entry was trimmed");
    // The extra + 1 oldest fillers went, the newer ones stayed.
    let (gone, kept) = fillers.split_at(extra + 1);
    assert!(gone.iter().all(|p| !p.exists()), "{left:?}");
    assert!(kept.iter().all(|p| p.exists()), "{left:?}");
    // The new entry is a hit, and a hit trims nothing.
    assert_eq!(outcome_of(&cache, &rt, &bytes), Outcome::Hit);
    assert_eq!(entries(dir.path()), left);
}
