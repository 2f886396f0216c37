//! `MapState::for_each`: every entry once, in byte-key order, a page of
//! host state at a time, so that its memory does not grow with the state
//! (measured with a counting allocator against `MapState::entries`), and
//! writes made while it runs behave as documented.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use weir_sdk::testing::with_memory_host;
use weir_sdk::{Context, Error, MapState};

/// The system allocator, counting the bytes live on each thread and their
/// peak, so that tests running in parallel do not see each other.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(bytes: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counting only
// touches const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes live on this thread while `f` ran, above what was live
/// when it started.
fn peak_during<R>(f: impl FnOnce() -> R) -> (R, isize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    (out, PEAK.with(Cell::get) - start)
}

fn key(i: u32) -> String {
    format!("k{i:06}")
}

/// `n` entries `key(i)` → `i` of map `m`, stored in host state (not cached).
fn fill(ctx: &mut Context, n: u32) -> MapState<String, u32> {
    let m = MapState::<String, u32>::new("m");
    for i in 0..n {
        ctx.put(&m.state_key(&key(i)), i.to_string().as_bytes());
    }
    m
}

#[test]
fn memory_does_not_grow_with_the_state() {
    with_memory_host(|| {
        let mut ctx = Context::new();
        let n = 20_000;
        let m = fill(&mut ctx, n);
        let (all, entries_peak) = peak_during(|| m.entries(&ctx).unwrap());
        assert_eq!(all.len(), n as usize);
        drop(all);
        let mut seen = 0u32;
        let ((), for_each_peak) = peak_during(|| {
            m.for_each(&mut ctx, |_, k, v| {
                assert_eq!(k, key(seen));
                assert_eq!(v, seen);
                seen += 1;
                Ok(())
            })
            .unwrap()
        });
        assert_eq!(seen, n);
        // A page is 1000 of the 20,000 entries: `entries` holds them all.
        assert!(
            for_each_peak * 5 < entries_peak,
            "for_each peaked at {for_each_peak} bytes, entries at {entries_peak}"
        );
    });
}

#[test]
fn visits_each_entry_once_in_key_order_skipping_other_state() {
    with_memory_host(|| {
        let mut ctx = Context::new();
        let m = fill(&mut ctx, 2_500);
        let other = MapState::<String, u32>::new("other");
        other.put(&mut ctx, &key(3), &99);
        let mut visited = Vec::new();
        m.for_each(&mut ctx, |_, k, v| {
            visited.push((k, v));
            Ok(())
        })
        .unwrap();
        let expected: Vec<(String, u32)> = (0..2_500).map(|i| (key(i), i)).collect();
        assert_eq!(visited, expected);
        let mut n = 0;
        other
            .for_each(&mut ctx, |_, _, _| {
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 1);
        // An empty map: nothing to visit.
        MapState::<String, u32>::new("none")
            .for_each(&mut ctx, |_, _, _| panic!("nothing to visit"))
            .unwrap();
    });
}

#[test]
fn writes_while_visiting_are_seen_as_documented() {
    with_memory_host(|| {
        let mut ctx = Context::new();
        // Pages: keys 0..1000, 1000..2000, 2000..2500.
        let m = fill(&mut ctx, 2_500);
        let mut visited = Vec::new();
        m.for_each(&mut ctx, |ctx, k, v| {
            visited.push((k.clone(), v));
            if k == key(0) {
                // The visited key: not visited again.
                m.put(ctx, &k, &1_000_000);
                // Ahead, on the same page: visited with the page's value.
                m.put(ctx, &key(10), &1_000_010);
                // Ahead, on a later page: visited with the new value.
                m.put(ctx, &key(1_500), &1_001_500);
                // Removed before its page is read: not visited.
                m.remove(ctx, &key(2_200));
                // Added after the current key, on a later page: visited.
                m.put(ctx, &"k999999".to_string(), &7);
            }
            Ok(())
        })
        .unwrap();
        let value = |k: String| visited.iter().find(|(v, _)| *v == k).map(|(_, v)| *v);
        assert_eq!(visited.iter().filter(|(k, _)| *k == key(0)).count(), 1);
        assert_eq!(value(key(0)), Some(0));
        assert_eq!(value(key(10)), Some(10));
        assert_eq!(value(key(1_500)), Some(1_001_500));
        assert_eq!(value(key(2_200)), None);
        assert_eq!(value("k999999".into()), Some(7));
        assert_eq!(visited.len(), 2_500);
        // Every write reached state.
        assert_eq!(m.get(&ctx, &key(0)).unwrap(), Some(1_000_000));
        assert_eq!(m.get(&ctx, &key(10)).unwrap(), Some(1_000_010));
    });
}

#[test]
fn the_first_error_stops_it() {
    with_memory_host(|| {
        let mut ctx = Context::new();
        let m = fill(&mut ctx, 1_500);
        let mut calls = 0;
        let err = m
            .for_each(&mut ctx, |_, k, _| {
                calls += 1;
                if k == key(1_200) {
                    return Err(Error::Other("stop".into()));
                }
                Ok(())
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "stop");
        assert_eq!(calls, 1_201);
        // A value that does not decode is an error too.
        ctx.put(&m.state_key(&key(5)), b"not json");
        let err = m.for_each(&mut ctx, |_, _, _| Ok(())).unwrap_err();
        assert!(matches!(err, Error::IncompatibleState(_)), "{err}");
    });
}
