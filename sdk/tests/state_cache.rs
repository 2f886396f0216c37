//! The write-back cache of `MapState` and `ValueState`, through the harness:
//! no write is lost, none is written back stale, and every write reaches
//! host state by the time `on_checkpoint` or `finish` returns.

mod common;

use common::flat_in_out;
use weir_sdk::testing::Harness;
use weir_sdk::*;

/// Counts each record's value in `count`, and records in `total`; each
/// record is a command: `+w` counts `w`, `-w` removes `w`, `raw:w=n` writes
/// `n` under `w`'s state key through the raw context, `?w` emits what
/// `ctx.get` sees under it, `pa,b` prefetches `a` and `b`. `finish` stores
/// the number of batches.
struct Counter {
    counts: MapState<String, u64>,
    total: ValueState<u64>,
    batches: u64,
}

impl Operator for Counter {
    flat_in_out!("counter");

    fn open(ctx: &OpenContext) -> Result<Self> {
        let capacity: Option<usize> = ctx.config_as()?;
        let mut counts = MapState::new("count");
        if let Some(c) = capacity {
            counts = counts.with_cache_capacity(c);
        }
        Ok(Counter {
            counts,
            total: ValueState::new("total"),
            batches: 0,
        })
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        self.batches += 1;
        for rec in batch {
            let cmd = rec.value_str()?;
            let (op, arg) = cmd.split_at(1);
            match op {
                "+" => {
                    let n = self.counts.update(ctx, arg, |n| n.unwrap_or(0) + 1)?;
                    ctx.emit_with(0, Some(arg.as_bytes()), |out| out.push_decimal(n));
                }
                "-" => self.counts.remove(ctx, arg),
                "p" => self.counts.prefetch(ctx, arg.split(','))?,
                "?" => {
                    let raw = ctx.get(&self.counts.state_key(&arg.to_string()));
                    ctx.emit_bytes(0, None, raw.as_deref().unwrap_or(b"none"));
                }
                _ => {
                    let (w, n) = cmd["raw:".len()..].split_once('=').unwrap();
                    ctx.put(&self.counts.state_key(&w.to_string()), n.as_bytes());
                }
            }
            self.total.update(ctx, |t| t.unwrap_or(0) + 1)?;
        }
        Ok(())
    }

    fn finish(&mut self, _ctx: &mut Context) -> Result<()> {
        let batches = ValueState::<u64>::new("batches");
        batches.set(_ctx, &self.batches);
        Ok(())
    }
}

fn batch(cmds: &[&str]) -> Vec<Record> {
    cmds.iter().map(|c| Record::new(*c)).collect()
}

fn values(out: &[Record]) -> Vec<String> {
    out.iter()
        .map(|r| r.value_str().unwrap().to_string())
        .collect()
}

/// Processes one batch of `cmds` with `h`; returns the values it emitted.
fn run<O: Operator>(h: &mut Harness<O>, cmds: &[&str]) -> Vec<String> {
    values(&h.process("in", batch(cmds)).unwrap())
}

fn stored<'a>(h: &'a Harness<Counter>, key: &str) -> Option<&'a str> {
    h.state()
        .get(key.as_bytes())
        .map(|v| std::str::from_utf8(v).unwrap())
}

/// Takes checkpoint `id` and returns `word`'s count in host state then.
fn count_at<'a>(h: &'a mut Harness<Counter>, id: u64, word: &str) -> Option<&'a str> {
    h.checkpoint(id).unwrap();
    stored(h, &format!("{word}\0count"))
}

#[test]
fn hits_need_no_host_call_and_writes_wait_for_the_checkpoint() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    assert_eq!(run(&mut h, &["+a", "+a", "+b"]), ["1", "2", "1"]);
    assert_eq!(run(&mut h, &["+a", "+b"]), ["3", "2"]);
    let calls = h.host_calls().clone();
    // One read per key and the total on first sight, then none; no writes yet.
    assert_eq!((calls.get, calls.get_many, calls.flat_get_many), (3, 0, 0));
    assert_eq!(
        (calls.put, calls.put_many, calls.flat_put_many, calls.delete),
        (0, 0, 0, 0)
    );
    assert!(h.state().is_empty());

    h.checkpoint(1).unwrap();
    assert_eq!(
        h.host_calls().flat_put_many,
        1,
        "one flat put-many for every store"
    );
    assert_eq!(h.host_calls().put_many, 0);
    assert_eq!(stored(&h, "a\0count"), Some("3"));
    assert_eq!(stored(&h, "b\0count"), Some("2"));
    assert_eq!(stored(&h, "\0total"), Some("5"));

    // A checkpoint with nothing dirty writes nothing.
    h.checkpoint(2).unwrap();
    assert_eq!(h.host_calls().flat_put_many, 1);
}

#[test]
fn finish_writes_back_what_it_and_earlier_hooks_wrote() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    run(&mut h, &["+a"]);
    run(&mut h, &["+a"]);
    assert!(h.state().is_empty());
    h.finish().unwrap();
    assert_eq!(stored(&h, "a\0count"), Some("2"));
    assert_eq!(stored(&h, "\0batches"), Some("2"));
}

#[test]
fn later_writes_win_across_checkpoints_and_removals() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    run(&mut h, &["+a"]);
    h.checkpoint(1).unwrap();
    run(&mut h, &["+a"]);
    assert_eq!(
        stored(&h, "a\0count"),
        Some("1"),
        "not before the checkpoint"
    );
    assert_eq!(count_at(&mut h, 2, "a"), Some("2"));

    run(&mut h, &["-a"]);
    assert_eq!(stored(&h, "a\0count"), Some("2"));
    assert_eq!(count_at(&mut h, 3, "a"), None);
    let gets = h.host_calls().get;
    assert_eq!(
        run(&mut h, &["+a", "-a", "+a"]),
        ["1", "1"],
        "a removed key counts from zero"
    );
    assert_eq!(h.host_calls().get, gets, "a removal is cached too");
    assert_eq!(count_at(&mut h, 4, "a"), Some("1"));
}

#[test]
fn raw_access_sees_typed_writes_and_typed_reads_see_raw_writes() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    // A raw read writes the cache back first.
    assert_eq!(run(&mut h, &["+a", "+a", "?a"]), ["1", "2", "2"]);
    // A raw write is not overwritten by a stale cached value, and is read.
    assert_eq!(run(&mut h, &["+a", "raw:a=10", "+a"]), ["3", "11"]);
    assert_eq!(count_at(&mut h, 1, "a"), Some("11"));
    assert!(run(&mut h, &["raw:a=20"]).is_empty());
    assert_eq!(count_at(&mut h, 2, "a"), Some("20"));
}

#[test]
fn a_full_cache_writes_back_before_it_empties() {
    let mut h = Harness::<Counter>::open("2").unwrap();
    assert_eq!(run(&mut h, &["+a", "+b", "+c"]), ["1", "1", "1"]);
    // The third key overflowed the cache: a, b and c were written back.
    for key in ["a", "b", "c"] {
        assert_eq!(stored(&h, &format!("{key}\0count")), Some("1"), "{key}");
    }
    assert_eq!(run(&mut h, &["+d", "+a"]), ["1", "2"]);
    assert_eq!(count_at(&mut h, 1, "a"), Some("2"));
    assert_eq!(stored(&h, "d\0count"), Some("1"));
}

#[test]
fn an_overflow_keeps_half_the_cache_warm() {
    let mut h = Harness::<Counter>::open("100").unwrap();
    let keys: Vec<String> = (0..101).map(|i| format!("+k{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    run(&mut h, &keys);
    let gets = h.host_calls().get;
    assert!(gets >= 101, "every first read misses");
    // The 101st key overflowed: everything was written back, 50 entries stay.
    let out = h.process("in", batch(&keys)).unwrap();
    assert!(values(&out).iter().all(|v| v == "2"), "{out:?}");
    let misses = h.host_calls().get - gets;
    assert!(
        (51..101).contains(&misses),
        "{misses} misses: about half the keys must still be cached"
    );
    h.checkpoint(1).unwrap();
    for i in [0, 50, 100] {
        assert_eq!(stored(&h, &format!("k{i}\0count")), Some("2"));
    }
}

#[test]
fn capacity_zero_writes_through() {
    let mut h = Harness::<Counter>::open("0").unwrap();
    run(&mut h, &["+a", "+a"]);
    assert_eq!(stored(&h, "a\0count"), Some("2"));
    assert_eq!(
        h.host_calls().get,
        3,
        "nothing is kept: every read reaches the host"
    );
}

#[test]
fn a_restart_keeps_what_the_checkpoint_wrote_back() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    run(&mut h, &["+a", "+a"]);
    h.restart().unwrap();
    let gets = h.host_calls().get;
    assert_eq!(run(&mut h, &["+a"]), ["3"]);
    assert_eq!(
        h.host_calls().get,
        gets + 2,
        "the new instance starts with an empty cache"
    );
}

#[test]
fn handles_of_one_name_share_one_cache() {
    testing::with_memory_host(|| {
        let mut ctx = Context::new();
        let a = MapState::<String, u64>::new("m");
        let b = MapState::<String, u64>::new("m");
        a.put(&mut ctx, &"k".to_string(), &1);
        assert_eq!(b.get(&ctx, "k").unwrap(), Some(1));
        b.update(&mut ctx, "k", |n| n.unwrap_or(0) + 1).unwrap();
        assert_eq!(a.clone().get(&ctx, "k").unwrap(), Some(2));
        assert_eq!(ctx.get(b"k\0m").unwrap(), b"2");
    });
}

#[test]
#[should_panic(expected = "already in use with other key or value types")]
fn one_name_with_two_types_panics() {
    testing::with_memory_host(|| {
        let _a = MapState::<String, u64>::new("m");
        let _b = MapState::<String, String>::new("m");
    });
}

#[test]
fn get_many_reads_every_miss_in_one_call() {
    testing::with_memory_host(|| {
        let mut ctx = Context::new();
        ctx.put(b"x\0m", b"7");
        let m = MapState::<String, u64>::new("m");
        m.put(&mut ctx, &"cached".to_string(), &1);
        let keys = ["x", "cached", "missing", "x"].map(String::from);
        assert_eq!(
            m.get_many(&ctx, &keys).unwrap(),
            [Some(7), Some(1), None, Some(7)]
        );
        assert_eq!(m.get_many(&ctx, &keys).unwrap()[0], Some(7));
    });
}

#[test]
fn a_value_that_does_not_decode_is_incompatible_state() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    h.state_mut()
        .insert(b"a\0count".to_vec(), b"\"text\"".to_vec());
    let err = h.process("in", batch(&["+a"])).unwrap_err();
    assert!(matches!(err, Error::IncompatibleState(_)), "{err}");
}

#[test]
fn prefetch_reads_every_miss_in_one_call_and_the_hook_keeps_them() {
    let mut h = Harness::<Counter>::open("2").unwrap();
    run(&mut h, &["+a", "+b", "+c", "+d"]);
    h.checkpoint(1).unwrap();
    // The hook returned over capacity: at most 2 entries stay cached.
    let (gets, get_manys) = (h.host_calls().get, h.host_calls().flat_get_many);
    assert_eq!(
        run(&mut h, &["pa,b,c,d,a", "+a", "+b", "+c", "+d"]),
        ["2", "2", "2", "2"]
    );
    assert_eq!(
        h.host_calls().flat_get_many,
        get_manys + 1,
        "one read for the misses"
    );
    assert_eq!(
        h.host_calls().get,
        gets,
        "within the hook, prefetched keys stay cached beyond the capacity"
    );
    h.checkpoint(2).unwrap();
    for key in ["a", "b", "c", "d"] {
        assert_eq!(stored(&h, &format!("{key}\0count")), Some("2"), "{key}");
    }
}

#[test]
fn a_prefetch_after_one_that_found_everything_cached_skips_its_lookups() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    run(&mut h, &["pa,b", "+a", "+b"]);
    run(&mut h, &["pa,b", "+a"]);
    let (gets, get_manys) = (h.host_calls().get, h.host_calls().flat_get_many);
    // Everything was cached last time: `c` is not prefetched, it is read
    // alone when counted, and then prefetching resumes.
    assert_eq!(run(&mut h, &["pc", "+c"]), ["1"]);
    assert_eq!(h.host_calls().get, gets + 1);
    assert_eq!(h.host_calls().flat_get_many, get_manys);
    run(&mut h, &["pd", "+d"]);
    assert_eq!(
        h.host_calls().get,
        gets + 1,
        "prefetching resumed after the miss"
    );
    assert_eq!(h.host_calls().flat_get_many, get_manys + 1);
}

/// A prefetch skips its lookups while the last batch missed fewer than
/// one key in 32 (a `get` each costs less than a lookup of every key),
/// and looks again once a batch misses more.
#[test]
fn a_prefetch_skips_its_lookups_while_misses_are_few() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    let keys = |from: usize, n: usize| -> Vec<String> {
        (from..from + n).map(|i| format!("k{i}")).collect()
    };
    let counted = |keys: &[String]| -> Vec<String> {
        let mut cmds = vec![format!("p{}", keys.join(","))];
        cmds.extend(keys.iter().map(|k| format!("+{k}")));
        cmds
    };
    let run_keys = |h: &mut Harness<Counter>, keys: &[String]| {
        let cmds = counted(keys);
        let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
        run(h, &cmds);
    };
    // 64 keys cached, then a batch of 63 of them and one new key: the
    // prefetch looks (the last batch missed every key) and finds 1 miss
    // in 64.
    run_keys(&mut h, &keys(0, 64));
    let calls = |h: &Harness<Counter>| (h.host_calls().get, h.host_calls().flat_get_many);
    let before = calls(&h);
    run_keys(&mut h, &keys(1, 64));
    assert_eq!(
        calls(&h),
        (before.0, before.1 + 1),
        "the prefetch read the new key"
    );
    // 1 in 64 is few: the next prefetch skips, its new key is read alone.
    let before = calls(&h);
    run_keys(&mut h, &keys(2, 64));
    assert_eq!(calls(&h), (before.0 + 1, before.1), "skipped: one get");
    // Still 1 in 64: skipped again, though this batch brings 8 new keys.
    let before = calls(&h);
    run_keys(&mut h, &keys(10, 64));
    assert_eq!(
        calls(&h),
        (before.0 + 8, before.1),
        "skipped: a get per new key"
    );
    // 8 in 64 is many: the next prefetch looks, and reads its misses at once.
    let before = calls(&h);
    run_keys(&mut h, &keys(20, 64));
    assert_eq!(calls(&h), (before.0, before.1 + 1), "looked: one get-many");
    // Every count is right.
    h.checkpoint(1).unwrap();
    assert_eq!(stored(&h, "k0\0count"), Some("1"));
    assert_eq!(stored(&h, "k20\0count"), Some("5"));
    assert_eq!(stored(&h, "k83\0count"), Some("1"));
}

/// Updates after a prefetch take the positions it found (misses, hits and
/// repeated keys alike) and stay right when they come in another order.
#[test]
fn updates_after_a_prefetch_count_the_right_keys_in_any_order() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    h.state_mut().insert(b"c\0count".to_vec(), b"10".to_vec());
    run(&mut h, &["+a"]);
    // `a` is cached, `c` stored, `b` and `d` new; `b` twice.
    assert_eq!(
        run(&mut h, &["pa,b,c,b,d", "+a", "+b", "+c", "+b", "+d"]),
        ["2", "1", "11", "2", "1"]
    );
    assert_eq!(
        run(&mut h, &["pd,c,b,a", "+a", "+b", "+c", "+d", "+d"]),
        ["3", "3", "12", "2", "3"]
    );
    h.checkpoint(1).unwrap();
    for (key, n) in [("a", "3"), ("b", "3"), ("c", "12"), ("d", "3")] {
        assert_eq!(stored(&h, &format!("{key}\0count")), Some(n), "{key}");
    }
}

/// Regression: a prefetch whose batch holds a value that does not decode
/// failed after caching "nothing stored" for the keys after it.
#[test]
fn a_failed_prefetch_caches_nothing() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    for (k, v) in [("a", "1"), ("b", "not a count"), ("c", "3")] {
        h.state_mut()
            .insert(format!("{k}\0count").into_bytes(), v.as_bytes().to_vec());
    }
    let err = h.process("in", batch(&["pa,b,c"])).unwrap_err();
    assert!(matches!(err, Error::IncompatibleState(_)), "{err}");
    assert_eq!(run(&mut h, &["+c", "+a"]), ["4", "2"]);
}

/// A prefetch after an eviction looks the batch up again, even when the
/// prefetch before the eviction found everything cached.
#[test]
fn a_prefetch_after_an_eviction_reads_the_evicted_keys_in_one_call() {
    let mut h = Harness::<Counter>::open("4").unwrap();
    run(&mut h, &["pa,b,c,d", "+a", "+b", "+c", "+d"]);
    run(&mut h, &["pa,b,c,d"]);
    // Two removals cache two more keys without reading them (no miss):
    // over the capacity of 4, so the hook's end writes back and evicts
    // down to half of it.
    run(&mut h, &["-e", "-f"]);
    let (gets, get_manys) = (h.host_calls().get, h.host_calls().flat_get_many);
    assert_eq!(
        run(&mut h, &["pa,b,c,d", "+a", "+b", "+c", "+d"]),
        ["2", "2", "2", "2"]
    );
    assert_eq!(h.host_calls().flat_get_many, get_manys + 1);
    assert_eq!(h.host_calls().get, gets, "no key was read alone");
}

/// Two maps of values of `size` bytes, within a budget and dirty limit
/// from the configuration: `a+k` stores a value under `k` in map `a`
/// (`b+k` in map `b`), `a?k` emits the length of `k`'s value in `a`, or
/// `none`; `budget` emits `cache_budget()`.
struct Blobs {
    a: MapState<String, String>,
    b: MapState<String, String>,
    size: usize,
}

#[derive(serde::Deserialize)]
struct BlobsConfig {
    budget: Option<usize>,
    dirty_limit: Option<usize>,
    size: usize,
}

impl Operator for Blobs {
    flat_in_out!("blobs");

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: BlobsConfig = ctx.config_as()?;
        if let Some(b) = c.budget {
            set_cache_budget(b);
        }
        if let Some(d) = c.dirty_limit {
            set_cache_dirty_limit(d);
        }
        Ok(Blobs {
            a: MapState::new("a"),
            b: MapState::new("b"),
            size: c.size,
        })
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            let cmd = rec.value_str()?;
            if cmd == "budget" {
                ctx.emit_with(0, None, |out| out.push_decimal(cache_budget() as u64));
                continue;
            }
            let (map, rest) = cmd.split_at(1);
            let map = if map == "a" { &self.a } else { &self.b };
            let (op, key) = rest.split_at(1);
            match op {
                "+" => map.put(ctx, &key.to_string(), &"x".repeat(self.size)),
                _ => match map.get(ctx, key)? {
                    Some(v) => ctx.emit_with(0, None, |out| out.push_decimal(v.len() as u64)),
                    None => ctx.emit_bytes(0, None, b"none"),
                },
            }
        }
        Ok(())
    }
}

fn blobs(config: &str) -> Harness<Blobs> {
    Harness::<Blobs>::open(config).unwrap()
}

/// [`blobs`] of 10 KiB values with a budget that holds them all (64 MiB)
/// and a dirty limit of `limit` bytes.
fn blobs_dirty_up_to(limit: usize) -> Harness<Blobs> {
    let budget = 64 << 20;
    blobs(&format!(
        r#"{{"budget":{budget},"dirty_limit":{limit},"size":10240}}"#
    ))
}

/// `n` commands `<map><op>k<i>` for i in `from..from + n`.
fn commands(map: &str, op: &str, from: usize, n: usize) -> Vec<Record> {
    (from..from + n)
        .map(|i| Record::new(format!("{map}{op}k{i}")))
        .collect()
}

#[test]
fn large_values_are_evicted_at_the_byte_budget_not_at_an_entry_count() {
    // 300 values of 10 KiB: 3 MiB, in a budget of 1 MiB; 300 entries are
    // nothing to an entry count.
    let budget = 1 << 20;
    let mut h = blobs(&format!(r#"{{"budget":{budget},"size":10240}}"#));
    h.process("in", commands("a", "+", 0, 300)).unwrap();
    let usage = h.cache_usage();
    assert!(usage.bytes <= budget, "{usage:?}");
    assert!(
        (25..=100).contains(&usage.entries),
        "down to about half the budget, an entry ~10 KiB: {usage:?}"
    );
    // Nothing was lost: everything dropped was written back first.
    assert_eq!(h.state().len(), 300 - usage.dirty_entries);
    h.checkpoint(1).unwrap();
    assert_eq!(h.state().len(), 300);
    // What stayed cached is read without a host call.
    let gets = h.host_calls().get;
    let out = h.process("in", commands("a", "?", 0, 300)).unwrap();
    assert!(out.iter().all(|r| r.value_str().unwrap() == "10240"));
    let misses = h.host_calls().get - gets;
    assert!(
        misses <= 300 - usage.entries,
        "{misses} misses with {} entries cached",
        usage.entries
    );
}

#[test]
fn one_budget_is_shared_by_every_store() {
    let budget = 1 << 20;
    let mut h = blobs(&format!(r#"{{"budget":{budget},"size":10240}}"#));
    // 60 values in each map: each alone fits, both together do not.
    h.process("in", commands("a", "+", 0, 60)).unwrap();
    assert_eq!(h.cache_usage().entries, 60, "one map alone fits");
    h.process("in", commands("b", "+", 0, 60)).unwrap();
    let usage = h.cache_usage();
    assert!(usage.bytes <= budget, "{usage:?}");
    assert!(usage.entries < 100, "{usage:?}");
    // Each map keeps its share: both still hit.
    let gets = h.host_calls().get;
    h.process("in", commands("a", "?", 0, 60)).unwrap();
    h.process("in", commands("b", "?", 0, 60)).unwrap();
    assert!(h.host_calls().get - gets < 120, "both maps kept entries");
    h.checkpoint(1).unwrap();
    assert_eq!(h.state().len(), 120);
}

#[test]
fn the_default_budget_is_an_eighth_of_the_memory_limit_read_once() {
    let mut h = blobs(r#"{"size":10240}"#);
    h.limits_mut().memory = 8 << 20;
    let out = h.process("in", vec![Record::new("budget")]).unwrap();
    assert_eq!(out[0].value_str().unwrap(), (1 << 20).to_string());
    h.process("in", commands("a", "+", 0, 300)).unwrap();
    assert!(h.cache_usage().bytes <= 1 << 20, "{:?}", h.cache_usage());
    h.process("in", commands("a", "?", 0, 300)).unwrap();
    h.checkpoint(1).unwrap();
    assert_eq!(h.host_calls().limits, 1, "the limits are read once");
}

#[test]
fn a_hook_never_returns_with_more_dirty_bytes_than_the_limit() {
    // A budget that holds everything, and a dirty limit of 64 KiB: some
    // six entries of 10 KiB.
    let limit = 64 << 10;
    let mut h = blobs_dirty_up_to(limit);
    let mut written_in_process = 0;
    for batch in 0..20 {
        let puts = h.host_calls().flat_put_many;
        h.process("in", commands("a", "+", batch * 4, 4)).unwrap();
        let usage = h.cache_usage();
        assert!(usage.dirty_bytes <= limit, "batch {batch}: {usage:?}");
        written_in_process += h.host_calls().flat_put_many - puts;
    }
    assert!(
        written_in_process >= 10,
        "the writes went back during process: {written_in_process} put-many"
    );
    // Written back early, and still cached: nothing is read again.
    assert_eq!(h.cache_usage().entries, 80);
    let gets = h.host_calls().get;
    h.process("in", commands("a", "?", 0, 80)).unwrap();
    assert_eq!(h.host_calls().get, gets, "every entry stayed cached");
}

#[test]
fn a_checkpoint_writes_back_at_most_the_dirty_limit() {
    let limit = 64 << 10;
    let mut h = blobs_dirty_up_to(limit);
    for batch in 0..25 {
        h.process("in", commands("a", "+", batch * 4, 4)).unwrap();
    }
    let before = h.cache_usage();
    assert!(
        before.dirty_bytes <= limit && before.dirty_entries > 0,
        "{before:?}"
    );
    let (puts, entries) = (
        h.host_calls().flat_put_many,
        h.host_calls().flat_put_entries,
    );
    h.checkpoint(1).unwrap();
    assert_eq!(h.host_calls().flat_put_many, puts + 1, "one put-many");
    let written = h.host_calls().flat_put_entries - entries;
    assert_eq!(written, before.dirty_entries, "only what was dirty");
    assert!(
        written <= 7,
        "{written} entries of 10 KiB in a 64 KiB limit"
    );
    assert_eq!(h.state().len(), 100, "and the checkpoint holds everything");
    assert_eq!(h.cache_usage().dirty_bytes, 0);
}

#[test]
fn the_sdk_reads_and_writes_batches_through_flat_state() {
    let mut h = Harness::<Counter>::open("null").unwrap();
    run(&mut h, &["pa,b,c", "+a", "+b", "-c"]);
    let calls = h.host_calls().clone();
    assert_eq!((calls.flat_get_many, calls.get_many), (1, 0));
    h.checkpoint(1).unwrap();
    let calls = h.host_calls().clone();
    // a, b, the total and the deletion of c: one put-many.
    assert_eq!((calls.flat_put_many, calls.flat_put_entries), (1, 4));
    assert_eq!((calls.put_many, calls.put, calls.delete), (0, 0, 0));
    assert_eq!(stored(&h, "c\0count"), None);
}

/// Keys of every length around the cache's inline bound (15 bytes),
/// keys differing in one byte or only by trailing NULs, and keys that are
/// no strings: each counts on its own, through updates, prefetches and
/// `get_many`, and reaches host state under its own state key.
#[test]
fn keys_of_every_length_and_kind_count_apart() {
    testing::with_memory_host(|| {
        let mut ctx = Context::new();
        let words = MapState::<String, u64>::new("w");
        let pairs = MapState::<(u32, String), u64>::new("p");
        let mut keys: Vec<String> = Vec::new();
        for len in 0..=40usize {
            let key: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            keys.push(format!("{key}\0"));
            if let Some(last) = key.chars().last() {
                let mut other = key.clone();
                other.pop();
                other.push(if last == 'z' { 'y' } else { 'z' });
                keys.push(other);
            }
            keys.push(key);
        }
        let mut model = std::collections::BTreeMap::<String, u64>::new();
        let mut x: u64 = 11;
        for step in 0..20_000usize {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = &keys[(x >> 33) as usize % keys.len()];
            if step % 1000 == 0 {
                words
                    .prefetch(&ctx, keys.iter().map(String::as_str))
                    .unwrap();
            }
            let n = words
                .update(&mut ctx, key.as_str(), |n| n.unwrap_or(0) + 1)
                .unwrap();
            let id = (x >> 20) as u32 % 3;
            pairs
                .update(&mut ctx, &(id, key.clone()), |n| n.unwrap_or(0) + 1)
                .unwrap();
            let expected = model.entry(key.clone()).or_default();
            *expected += 1;
            assert_eq!(n, *expected, "{key:?}");
        }
        let found = words.get_many(&ctx, &keys).unwrap();
        for (key, found) in keys.iter().zip(found) {
            assert_eq!(found, model.get(key).copied(), "{key:?}");
            // A raw read writes every store back first.
            let stored = ctx.get(&[key.as_bytes(), b"\0w"].concat());
            assert_eq!(
                stored.map(|v| String::from_utf8(v).unwrap()),
                found.map(|n| n.to_string())
            );
        }
        let total: u64 = keys
            .iter()
            .flat_map(|k| (0..3u32).map(move |id| (id, k.clone())))
            .map(|key| {
                let state_key = [serde_json::to_vec(&key).unwrap(), b"\0p".to_vec()].concat();
                let raw = ctx
                    .get(&state_key)
                    .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap());
                assert_eq!(pairs.get(&ctx, &key).unwrap().unwrap_or(0), raw, "{key:?}");
                raw
            })
            .sum();
        assert_eq!(total, 20_000);
    });
}
