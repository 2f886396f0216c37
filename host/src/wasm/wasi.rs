//! The WASI context of a plugin instance and the sandbox it enforces: no
//! preopened directories, environment, arguments or network; stdin closed;
//! stdout and stderr to the host log (`guest_output.rs`); fixed clocks and
//! deterministic randomness unless the operator grants `clocks` or `random`;
//! and sleeps (`wasi:clocks/monotonic-clock.subscribe-*`) that end at once
//! without the clocks grant and no later than the call's deadline with it.
//!
//! See `SECURITY.md` in the repository for the threat model.
//!
//! Invariant: a plugin cannot block its thread in the host past its call
//! deadline, where the epoch deadline cannot interrupt it: every sleep WASI
//! offers is replaced by [`add_to_linker`] with one cut at the deadline.

use std::time::{Duration, Instant};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiView};

use super::guest_output::{GuestOutput, Stream};
use crate::config::Grants;

/// The `wasi:clocks/monotonic-clock` interface whose sleeps Weir replaces.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Store data that links WASI: whether its operator has the clocks grant,
/// and the deadline of the current call.
pub(super) trait SleepBounds: WasiView {
    /// Whether the clocks grant is set, and the current call's deadline.
    fn sleep_bounds(&self) -> (bool, Option<Instant>);
}

/// Adds WASI 0.2 to `linker`, with its sleeps replaced (see
/// [`replace_sleeps`]).
pub(super) fn add_to_linker<T: SleepBounds + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    replace_sleeps(linker)
}

/// The WASI context of an instance: no preopened directories, environment,
/// arguments or network; stdin closed; stdout and stderr to the host log;
/// fixed clocks and deterministic randomness unless granted.
pub(super) fn wasi_ctx(grants: Grants, output: &GuestOutput) -> WasiCtx {
    let mut b = WasiCtxBuilder::new();
    b.stdout(output.stream(Stream::Stdout))
        .stderr(output.stream(Stream::Stderr))
        .max_random_size(1 << 20)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if !grants.clocks {
        b.wall_clock(FixedClock).monotonic_clock(FixedClock);
    }
    if !grants.random {
        b.secure_random(wasmtime_wasi::Deterministic::new(fixed_random_bytes()))
            .insecure_random(wasmtime_wasi::Deterministic::new(fixed_random_bytes()))
            .insecure_random_seed(0x5745_4952_5f53_4545_445f_5f5f_5f5f_5f5f);
    }
    b.build()
}

/// A clock that never moves: the wall clock reads the Unix epoch, the
/// monotonic clock 0.
struct FixedClock;

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        0
    }
}

/// 4 KiB of fixed pseudo-random bytes (splitmix64 from a constant seed), the
/// cycle the deterministic generators repeat.
fn fixed_random_bytes() -> Vec<u8> {
    let mut x: u64 = 0x5745_4952; // "WEIR"
    let mut out = Vec::with_capacity(4096);
    while out.len() < 4096 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out
}

/// A pollable for `wasi:clocks/monotonic-clock.subscribe-*`: ready at
/// `until` (real time), or at once.
struct Sleep {
    until: Option<tokio::time::Instant>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        if let Some(until) = self.until {
            tokio::time::sleep_until(until).await;
        }
    }
}

/// The pollable for a sleep of `nanos` requested by a plugin. Without the
/// clocks grant it is ready at once (time does not pass in the sandbox);
/// with it, it is ready after `nanos` but no later than `deadline`, so a
/// sleeping plugin cannot hold its thread past its call deadline.
fn subscribe_sleep(
    table: &mut ResourceTable,
    nanos: u64,
    granted: bool,
    deadline: Option<Instant>,
) -> wasmtime::Result<Resource<DynPollable>> {
    let until = granted.then(|| {
        let now = Instant::now();
        let mut until = now + Duration::from_nanos(nanos.min(u64::MAX / 2));
        if let Some(d) = deadline {
            until = until.min(d.max(now));
        }
        tokio::time::Instant::from_std(until)
    });
    let sleep = table.push(Sleep { until })?;
    subscribe(table, sleep)
}

/// Replaces `subscribe-duration` and `subscribe-instant` of
/// `wasi:clocks/monotonic-clock`: without the clocks grant a sleep returns at
/// once (time does not pass in the sandbox); with it, a sleep ends at the
/// call's deadline at the latest. Otherwise a plugin could block its thread
/// in the host, where the epoch deadline cannot interrupt it.
fn replace_sleeps<T: SleepBounds + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    type Pollable = wasmtime::Result<(Resource<DynPollable>,)>;
    fn sleep<T: SleepBounds>(mut store: StoreContextMut<'_, T>, nanos: u64) -> Pollable {
        let (granted, deadline) = store.data().sleep_bounds();
        let table = store.data_mut().ctx().table;
        Ok((subscribe_sleep(table, nanos, granted, deadline)?,))
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("subscribe-duration", |store, (nanos,): (u64,)| {
        sleep(store, nanos)
    })?;
    clock.func_wrap("subscribe-instant", |store, (when,): (u64,)| {
        // The sandbox's monotonic clock reads 0 without the grant, so
        // `when` is the sleep; with it, subtract the real clock.
        let (granted, _) = store.data().sleep_bounds();
        let now = if granted {
            HostMonotonicClock::now(&*wasmtime_wasi::clocks::monotonic_clock())
        } else {
            0
        };
        sleep(store, when.saturating_sub(now))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}
