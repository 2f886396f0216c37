//! Failpoints: named steps of the checkpoint protocol at which a test can
//! crash the process, to check that a restart after a crash at exactly
//! that step loses and repeats nothing. **Test-only**: they are armed by
//! the environment variable [`ENV`] (`WEIR_FAILPOINTS`), which no job
//! should ever set.
//!
//! `WEIR_FAILPOINTS=sink.after-delivery` crashes at the first hit of that
//! point, `sink.mid-delivery@2` at the second; several entries are
//! separated by commas. An entry ending in `:stop` stops the process
//! (SIGSTOP) at that hit instead of killing it: a stall at an exact step,
//! which the test ends with SIGCONT. [`Failpoint::ALL`] lists every point with where it
//! sits in the protocol (ARCHITECTURE.md, "Failpoints").
//!
//! A hit of an armed point prints `weir: failpoint NAME hit, killing the
//! process` on stderr and sends SIGKILL to the process itself: no
//! destructor runs, no buffer is flushed, no file is synced, as with
//! `kill -9`.
//!
//! Invariants:
//! - Nothing is armed unless [`arm_from_env`] found the variable set; then
//!   every name in it is known (an unknown one is an error naming the
//!   known ones, so a typo cannot make a test pass without crashing).
//! - When nothing is armed, a hit costs one atomic load (the `OnceLock`
//!   check) and compares no string.
//! - Hits of a point are counted across all threads of the process, in
//!   the order they happen; the process is killed at the `N`th, once.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms failpoints (test-only).
pub const ENV: &str = "WEIR_FAILPOINTS";

/// A named step of the checkpoint protocol where a crash can be injected.
/// Names are stable: tests arm them by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Failpoint {
    /// `sink.after-precommit`: a sink's epoch is durable (staged, synced,
    /// renamed, its folder synced), before the sink acknowledges it, so
    /// before its checkpoint is stored (`SealEpoch::run`, shared by the
    /// file sink and every staged sink).
    SinkAfterPrecommit,
    /// `checkpoint.after-store-commit`: a checkpoint is committed to the
    /// store, before any sink is told to deliver it (`Driver::persist`).
    CheckpointAfterStoreCommit,
    /// `checkpoint.before-commit-point`: a checkpoint is stored and its
    /// manifest is in the object store, before its commit point (worker
    /// mode: the commit of the task's anchor offset in its group), so
    /// before any sink is told to deliver it (`Driver::release`).
    CheckpointBeforeCommitPoint,
    /// `checkpoint.mid-commit-point`: a commit point carried by a Kafka
    /// transaction (worker mode, a Kafka sink with `write = "direct"`) is
    /// half made: the checkpoint's anchor offset is sent to the
    /// transaction, which is not committed yet (`kafka::direct`).
    CheckpointMidCommitPoint,
    /// `checkpoint.after-commit-point`: a checkpoint is committed at its
    /// commit point, before any sink is told to deliver it
    /// (`Driver::release`).
    CheckpointAfterCommitPoint,
    /// `sink.mid-delivery`: part of an epoch is delivered and the rest is
    /// not. File sink: half of an epoch is appended to the visible file
    /// (`append_epochs`). Staged sinks (PostgreSQL, NATS, Kafka): before
    /// each batch of an epoch after the first is handed to the destination,
    /// inside its open transaction or after the earlier batches' publishes
    /// (`EpochReader::next_batch`).
    SinkMidDelivery,
    /// `sink.after-delivery`: the destination holds the epoch, before the
    /// sink's own bookkeeping. File sink: appended (or renamed into place)
    /// and synced, before the staged files are deleted and the commit
    /// reported. PostgreSQL: its transaction committed; NATS: every publish
    /// acknowledged; Kafka: its transaction committed, before the marker
    /// is committed outside it; each before the staged epoch is deleted.
    SinkAfterDelivery,
    /// `swap.after-migrate`: a live swap's new plugin is loaded and its
    /// instances restored from the swap's checkpoint (its state migrated),
    /// before any record flows and before any checkpoint records the swap
    /// (`run_attempt`).
    SwapAfterMigrate,
    /// `swap.after-record`: the first checkpoint taken with a live swap's
    /// new plugin, which records the swap, is committed to the store,
    /// before the swap is confirmed and before the sinks deliver that
    /// checkpoint (`Driver::persist`).
    SwapAfterRecord,
    /// `rescale.mid-derive`: a rescale's derived checkpoint has some of
    /// the new instances of a moved operator written, in its uncommitted
    /// store transaction (`CheckpointStore::derive`, hit after each new
    /// instance).
    RescaleMidDerive,
    /// `rescale.after-derive`: a rescale's derived checkpoint is committed
    /// to the store, before the attempt restores it (`run::restore`).
    RescaleAfterDerive,
    /// `cdc.mid-snapshot`: a `postgres-cdc` source read a chunk of its
    /// table's snapshot and has not returned it (`postgres/cdc/reader.rs`).
    CdcMidSnapshot,
    /// `cdc.after-confirm`: a `postgres-cdc` source handed a checkpoint's
    /// position to its replication client, which tells the slot within a
    /// second; the server may then drop what came before it
    /// (`postgres/cdc/reader.rs`, at release).
    CdcAfterConfirm,
    /// `restore.after-commit-read`: a restore with a commit point (worker
    /// mode) read the committed checkpoint, before it lists the manifests
    /// of the object store and drops those after it (`run::restore`).
    RestoreAfterCommitRead,
}

impl Failpoint {
    /// Every failpoint, in protocol order.
    pub const ALL: [Failpoint; 14] = [
        Failpoint::SinkAfterPrecommit,
        Failpoint::CheckpointAfterStoreCommit,
        Failpoint::CheckpointBeforeCommitPoint,
        Failpoint::CheckpointMidCommitPoint,
        Failpoint::CheckpointAfterCommitPoint,
        Failpoint::SinkMidDelivery,
        Failpoint::SinkAfterDelivery,
        Failpoint::SwapAfterMigrate,
        Failpoint::SwapAfterRecord,
        Failpoint::RescaleMidDerive,
        Failpoint::RescaleAfterDerive,
        Failpoint::CdcMidSnapshot,
        Failpoint::CdcAfterConfirm,
        Failpoint::RestoreAfterCommitRead,
    ];

    /// The name `WEIR_FAILPOINTS` arms it by.
    pub const fn name(self) -> &'static str {
        match self {
            Failpoint::SinkAfterPrecommit => "sink.after-precommit",
            Failpoint::CheckpointAfterStoreCommit => "checkpoint.after-store-commit",
            Failpoint::CheckpointBeforeCommitPoint => "checkpoint.before-commit-point",
            Failpoint::CheckpointMidCommitPoint => "checkpoint.mid-commit-point",
            Failpoint::CheckpointAfterCommitPoint => "checkpoint.after-commit-point",
            Failpoint::SinkMidDelivery => "sink.mid-delivery",
            Failpoint::SinkAfterDelivery => "sink.after-delivery",
            Failpoint::SwapAfterMigrate => "swap.after-migrate",
            Failpoint::SwapAfterRecord => "swap.after-record",
            Failpoint::RescaleMidDerive => "rescale.mid-derive",
            Failpoint::RescaleAfterDerive => "rescale.after-derive",
            Failpoint::CdcMidSnapshot => "cdc.mid-snapshot",
            Failpoint::CdcAfterConfirm => "cdc.after-confirm",
            Failpoint::RestoreAfterCommitRead => "restore.after-commit-read",
        }
    }

    /// The failpoint called `name`.
    pub fn from_name(name: &str) -> Option<Failpoint> {
        Failpoint::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The line printed on stderr when the process is killed at it.
    pub fn crash_line(self) -> String {
        format!("weir: failpoint {} hit, killing the process", self.name())
    }

    /// The line printed on stderr when the process stops itself at it
    /// (`:stop`).
    pub fn stop_line(self) -> String {
        format!("weir: failpoint {} hit, stopping the process", self.name())
    }
}

/// Why `WEIR_FAILPOINTS` was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailpointError {
    /// A name that is no failpoint.
    #[error("{ENV}: unknown failpoint `{name}`; the known ones are {}", known())]
    Unknown {
        /// The name as written.
        name: String,
    },
    /// A hit count after `@` that is not a whole number from 1 on.
    #[error("{ENV}: `{entry}`: the hit to crash at (after `@`) must be a whole number from 1 on")]
    BadCount {
        /// The entry as written.
        entry: String,
    },
    /// An action after `:` other than `stop`.
    #[error(
        "{ENV}: `{entry}`: the only action after `:` is `stop` (without one, the process is killed)"
    )]
    BadAction {
        /// The entry as written.
        entry: String,
    },
    /// The same failpoint armed twice.
    #[error("{ENV}: failpoint `{name}` is armed twice")]
    Twice {
        /// Its name.
        name: String,
    },
    /// The value is not text.
    #[error("{ENV} is not UTF-8")]
    NotText,
}

/// The known names, for messages.
fn known() -> String {
    Failpoint::ALL.map(Failpoint::name).join(", ")
}

/// The armed failpoints: per point, the hit to crash at (0: not armed),
/// whether it stops the process rather than kill it, and the hits so far.
#[derive(Debug, Default)]
struct Armed {
    at: [u64; Failpoint::ALL.len()],
    stops: [bool; Failpoint::ALL.len()],
    hits: [AtomicU64; Failpoint::ALL.len()],
}

impl Armed {
    /// Parses a `WEIR_FAILPOINTS` value: `name` or `name@N`, either
    /// followed by `:stop`, separated by commas (blanks around entries
    /// ignored, empty entries skipped).
    fn parse(spec: &str) -> Result<Armed, FailpointError> {
        let mut armed = Armed::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (point, stops) = match entry.split_once(':') {
                None => (entry, false),
                Some((point, "stop")) => (point, true),
                Some(_) => {
                    return Err(FailpointError::BadAction {
                        entry: entry.to_owned(),
                    });
                }
            };
            let (name, at) = match point.split_once('@') {
                None => (point, 1),
                Some((name, n)) => match n.trim().parse::<u64>() {
                    Ok(n) if n >= 1 => (name.trim(), n),
                    _ => {
                        return Err(FailpointError::BadCount {
                            entry: entry.to_owned(),
                        });
                    }
                },
            };
            let point = Failpoint::from_name(name).ok_or_else(|| FailpointError::Unknown {
                name: name.to_owned(),
            })?;
            let slot = &mut armed.at[point as usize];
            if *slot != 0 {
                return Err(FailpointError::Twice {
                    name: name.to_owned(),
                });
            }
            *slot = at;
            armed.stops[point as usize] = stops;
        }
        Ok(armed)
    }

    /// Whether any point is armed.
    fn any(&self) -> bool {
        self.at.iter().any(|&at| at != 0)
    }

    /// Counts a hit of `point`; true when it is the hit to crash at.
    fn count(&self, point: Failpoint) -> bool {
        let at = self.at[point as usize];
        at != 0 && self.hits[point as usize].fetch_add(1, Ordering::Relaxed) + 1 == at
    }
}

/// The armed failpoints, set once by [`arm_from_env`]; unset (nothing
/// armed) otherwise.
static ARMED: OnceLock<Armed> = OnceLock::new();

/// Arms the failpoints that `WEIR_FAILPOINTS` names, if it is set; an
/// unknown name or a malformed entry is an error. Called once at the start
/// of a run; later calls change nothing (the first armed set stays).
pub fn arm_from_env() -> Result<(), FailpointError> {
    let Some(value) = std::env::var_os(ENV) else {
        return Ok(());
    };
    let armed = Armed::parse(value.to_str().ok_or(FailpointError::NotText)?)?;
    if armed.any() {
        let _ = ARMED.set(armed);
    }
    Ok(())
}

/// The process reached `point`: when that is its armed hit, prints the
/// crash line and kills the process with SIGKILL (or, armed with `:stop`,
/// prints the stop line and stops it with SIGSTOP, going on when it is
/// continued); otherwise nothing.
#[inline]
pub fn hit(point: Failpoint) {
    if let Some(armed) = ARMED.get()
        && armed.count(point)
    {
        match armed.stops[point as usize] {
            true => stop(point),
            false => crash(point),
        }
    }
}

/// Stops the process at `point`, as `kill -STOP` would; it goes on from
/// here when continued.
#[cold]
fn stop(point: Failpoint) {
    let _ = writeln!(std::io::stderr(), "{}", point.stop_line());
    // SAFETY: kill(2) on this process's own id; no memory is involved.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}

/// Kills the process at `point`, as `kill -9` would.
#[cold]
fn crash(point: Failpoint) -> ! {
    let _ = writeln!(std::io::stderr(), "{}", point.crash_line());
    // SAFETY: kill(2) on this process's own id; no memory is involved.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught or blocked; it lands before any other work.
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for p in Failpoint::ALL {
            assert_eq!(Failpoint::from_name(p.name()), Some(p));
            assert_eq!(Failpoint::ALL[p as usize], p, "ALL is in declaration order");
        }
        let mut names = Failpoint::ALL.map(Failpoint::name).to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Failpoint::ALL.len());
        assert_eq!(Failpoint::from_name("sink.after"), None);
    }

    #[test]
    fn entries_are_names_with_an_optional_hit_count() {
        let a = Armed::parse(" sink.after-delivery , sink.mid-delivery@3,,").unwrap();
        assert_eq!(a.at[Failpoint::SinkAfterDelivery as usize], 1);
        assert_eq!(a.at[Failpoint::SinkMidDelivery as usize], 3);
        assert_eq!(a.at.iter().filter(|&&n| n != 0).count(), 2);
        assert!(!a.stops.iter().any(|&s| s));
        let a = Armed::parse("restore.after-commit-read:stop,sink.mid-delivery@2:stop").unwrap();
        assert_eq!(a.at[Failpoint::RestoreAfterCommitRead as usize], 1);
        assert!(a.stops[Failpoint::RestoreAfterCommitRead as usize]);
        assert_eq!(a.at[Failpoint::SinkMidDelivery as usize], 2);
        assert!(a.stops[Failpoint::SinkMidDelivery as usize]);
        assert!(!Armed::parse("").unwrap().any());
        assert!(!Armed::parse(" , ").unwrap().any());
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_known_ones() {
        let err = Armed::parse("sink.after-delivery,sink.afterdelivery@2").unwrap_err();
        assert_eq!(
            err,
            FailpointError::Unknown {
                name: "sink.afterdelivery".into()
            }
        );
        let text = err.to_string();
        assert!(text.starts_with("WEIR_FAILPOINTS: unknown failpoint `sink.afterdelivery`"));
        for p in Failpoint::ALL {
            assert!(text.contains(p.name()), "{text}");
        }
    }

    #[test]
    fn bad_counts_and_repeats_are_refused() {
        for spec in [
            "sink.mid-delivery@0",
            "sink.mid-delivery@",
            "sink.mid-delivery@x",
            "sink.mid-delivery@-1",
        ] {
            assert!(
                matches!(Armed::parse(spec), Err(FailpointError::BadCount { .. })),
                "{spec}"
            );
        }
        for spec in [
            "sink.mid-delivery:pause",
            "sink.mid-delivery@2:",
            "sink.mid-delivery:stop:stop",
        ] {
            assert!(
                matches!(Armed::parse(spec), Err(FailpointError::BadAction { .. })),
                "{spec}"
            );
        }
        assert_eq!(
            Armed::parse("sink.mid-delivery,sink.mid-delivery@2").unwrap_err(),
            FailpointError::Twice {
                name: "sink.mid-delivery".into()
            }
        );
    }

    #[test]
    fn only_the_nth_hit_of_an_armed_point_counts() {
        let a = Armed::parse("sink.mid-delivery@3,checkpoint.after-store-commit").unwrap();
        let mid: Vec<bool> = (0..5)
            .map(|_| a.count(Failpoint::SinkMidDelivery))
            .collect();
        assert_eq!(mid, [false, false, true, false, false]);
        assert!(a.count(Failpoint::CheckpointAfterStoreCommit));
        assert!(!a.count(Failpoint::CheckpointAfterStoreCommit));
        // An unarmed point never counts, however often it is hit.
        assert!((0..10).all(|_| !a.count(Failpoint::SinkAfterDelivery)));
    }

    #[test]
    fn hits_from_many_threads_crash_exactly_once() {
        let a = Armed::parse("sink.after-delivery@500").unwrap();
        let crashes: usize = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..250)
                            .filter(|_| a.count(Failpoint::SinkAfterDelivery))
                            .count()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(crashes, 1);
    }

    #[test]
    fn nothing_is_armed_without_the_variable() {
        // The test process never arms (no test sets WEIR_FAILPOINTS), so a
        // hit is a no-op.
        assert!(ARMED.get().is_none());
        hit(Failpoint::SinkAfterDelivery);
    }
}
