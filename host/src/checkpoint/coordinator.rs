//! The checkpoint coordinator's decisions, without I/O: when to trigger a
//! checkpoint, when one is complete, when to end the job. The executor feeds
//! it events and performs what it decides.
//!
//! Invariants:
//! - At most one checkpoint is in flight; ids strictly increase.
//! - A checkpoint is complete only when every participant (each source, each
//!   operator instance, each sink) acknowledged it.
//! - Acknowledgements of an abandoned or unknown checkpoint are ignored, but
//!   their state deltas are kept and handed out with the next completed
//!   checkpoint, in order: an instance's delta covers the changes since its
//!   previous snapshot, so none may be dropped. Their in-flight data
//!   (unaligned checkpoints) is dropped: it is the input of the abandoned
//!   checkpoint only.
//! - The final checkpoint is triggered once every source reached its end.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::dataflow::protocol::{Ack, AlignStats, Command, InstanceDelta};

/// Who takes part in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Participant {
    /// A source, by id.
    Source(String),
    /// An operator instance.
    Instance(String, u32),
    /// A sink, by id.
    Sink(String),
}

/// Who sent `ack`.
fn participant(ack: &Ack) -> Participant {
    match ack {
        Ack::Source { source, .. } => Participant::Source(source.clone()),
        Ack::Instance { delta, .. } => {
            Participant::Instance(delta.operator.clone(), delta.instance)
        }
        Ack::Sink { sink, .. } => Participant::Sink(sink.clone()),
    }
}

/// Everything a complete checkpoint needs written.
#[derive(Debug)]
pub struct Completed {
    /// Checkpoint id.
    pub id: u64,
    /// When it was triggered.
    pub started: Instant,
    /// Whether it is the final checkpoint at end of input.
    pub is_final: bool,
    /// Source offsets.
    pub sources: BTreeMap<String, Value>,
    /// Sink commit infos.
    pub sinks: BTreeMap<String, Value>,
    /// State deltas, oldest first.
    pub deltas: Vec<InstanceDelta>,
    /// The longest alignment among instances, and the most bytes one
    /// instance buffered during its alignment.
    pub align: AlignStats,
    /// Longest pause of an instance's thread for the checkpoint (see
    /// [`Ack::Instance`]).
    pub pause: Duration,
}

#[derive(Debug)]
struct InFlight {
    id: u64,
    started: Instant,
    is_final: bool,
    waiting: BTreeSet<Participant>,
    sources: BTreeMap<String, Value>,
    sinks: BTreeMap<String, Value>,
    align: AlignStats,
    pause: Duration,
}

/// The coordinator's state.
#[derive(Debug)]
pub struct Coordinator {
    participants: BTreeSet<Participant>,
    sources: BTreeSet<String>,
    interval: Option<Duration>,
    next_id: u64,
    last_trigger: Option<Instant>,
    in_flight: Option<InFlight>,
    /// Deltas received for checkpoints not yet complete, in arrival order.
    deltas: Vec<InstanceDelta>,
    at_end: BTreeSet<String>,
    finishing: bool,
    stop_requested: bool,
    /// A checkpoint was asked for now (a savepoint), not at the interval.
    asap: bool,
}

impl Coordinator {
    /// A coordinator over `participants`, taking a checkpoint every
    /// `interval` (never when `None`, except the final one), with ids starting
    /// at `first_id`.
    pub fn new(
        participants: impl IntoIterator<Item = Participant>,
        interval: Option<Duration>,
        first_id: u64,
    ) -> Self {
        let participants: BTreeSet<Participant> = participants.into_iter().collect();
        let sources = participants
            .iter()
            .filter_map(|p| match p {
                Participant::Source(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        Coordinator {
            participants,
            sources,
            interval,
            next_id: first_id.max(1),
            last_trigger: None,
            in_flight: None,
            deltas: Vec::new(),
            at_end: BTreeSet::new(),
            finishing: false,
            stop_requested: false,
            asap: false,
        }
    }

    fn start(&mut self, now: Instant, is_final: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.last_trigger = Some(now);
        self.in_flight = Some(InFlight {
            id,
            started: now,
            is_final,
            waiting: self.participants.clone(),
            sources: BTreeMap::new(),
            sinks: BTreeMap::new(),
            align: AlignStats::default(),
            pause: Duration::ZERO,
        });
        id
    }

    /// What to do at time `now`: trigger a periodic checkpoint when the
    /// interval elapsed and none is in flight, or a stop checkpoint when a
    /// stop was requested.
    pub fn tick(&mut self, now: Instant) -> Option<Command> {
        if self.in_flight.is_some() || self.finishing {
            return None;
        }
        if self.stop_requested || self.asap {
            self.asap = false;
            return Some(Command::Trigger(self.start(now, false)));
        }
        let interval = self.interval?;
        // The first periodic checkpoint is one interval after the first tick.
        let last = *self.last_trigger.get_or_insert(now);
        (now.duration_since(last) >= interval).then(|| Command::Trigger(self.start(now, false)))
    }

    /// Time until the next periodic trigger is due, for the executor's wait;
    /// `None` when none can be: no interval, or a checkpoint in flight (its
    /// last acknowledgement is what the executor waits for then).
    pub fn next_due(&self, now: Instant) -> Option<Duration> {
        if self.in_flight.is_some() || self.finishing {
            return None;
        }
        let interval = self.interval?;
        Some(self.last_trigger.map_or(Duration::ZERO, |t| {
            (t + interval).saturating_duration_since(now)
        }))
    }

    /// Source `source` reached the end of its input. Returns `Finish` once
    /// every source did and no checkpoint is in flight.
    pub fn source_at_end(&mut self, source: &str, now: Instant) -> Option<Command> {
        self.at_end.insert(source.to_string());
        self.maybe_finish(now)
    }

    fn maybe_finish(&mut self, now: Instant) -> Option<Command> {
        if self.finishing
            || self.in_flight.is_some()
            || self.stop_requested
            || self.at_end != self.sources
        {
            return None;
        }
        self.finishing = true;
        Some(Command::Finish(self.start(now, true)))
    }

    /// Asks for a checkpoint now, after which the job stops (SIGINT/SIGTERM).
    /// Returns the trigger when none is in flight.
    pub fn request_stop(&mut self, now: Instant) -> Option<Command> {
        self.stop_requested = true;
        self.tick(now)
    }

    /// Asks for a checkpoint now instead of at the interval (a savepoint):
    /// triggered at once when none is in flight, else right after it.
    pub fn request_checkpoint(&mut self, now: Instant) -> Option<Command> {
        self.asap = true;
        self.tick(now)
    }

    /// The id the next checkpoint triggered will have.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Whether a stop was requested.
    pub fn stop_requested(&self) -> bool {
        self.stop_requested
    }

    /// Records `ack` of checkpoint `id`. Returns the completed checkpoint when
    /// it was the last missing one, plus a follow-up command (the final
    /// checkpoint, when every source has ended meanwhile).
    pub fn on_ack(
        &mut self,
        id: u64,
        ack: Ack,
        now: Instant,
    ) -> (Option<Completed>, Option<Command>) {
        let who = participant(&ack);
        let Some(f) = self.in_flight.as_mut().filter(|f| f.id == id) else {
            // Stale: keep the state changes, they are not in any checkpoint
            // yet; in-flight data belongs to its own checkpoint only.
            if let Ack::Instance { mut delta, .. } = ack {
                delta.inflight = None;
                self.deltas.push(delta);
            }
            return (None, None);
        };
        if !f.waiting.remove(&who) {
            return (None, None);
        }
        match ack {
            Ack::Source { source, offset } => {
                f.sources.insert(source, offset);
            }
            Ack::Instance {
                delta,
                align,
                pause,
            } => {
                f.align = f.align.worst(align);
                f.pause = f.pause.max(pause);
                self.deltas.push(delta);
            }
            Ack::Sink { sink, info } => {
                f.sinks.insert(sink, info);
            }
        }
        if !f.waiting.is_empty() {
            return (None, None);
        }
        let f = self.in_flight.take().expect("checked above");
        let done = Completed {
            id: f.id,
            started: f.started,
            is_final: f.is_final,
            sources: f.sources,
            sinks: f.sinks,
            deltas: std::mem::take(&mut self.deltas),
            align: f.align,
            pause: f.pause,
        };
        let next = if self.stop_requested {
            None
        } else {
            self.maybe_finish(now)
        };
        (Some(done), next)
    }

    /// The checkpoint in flight, if any.
    pub fn in_flight(&self) -> Option<u64> {
        self.in_flight.as_ref().map(|f| f.id)
    }

    /// The checkpoint in flight, if any: its id, when it was triggered and
    /// whether it is the final one.
    pub fn in_flight_since(&self) -> Option<(u64, Instant, bool)> {
        (self.in_flight.as_ref()).map(|f| (f.id, f.started, f.is_final))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(op: &str, i: u32, key: &str) -> InstanceDelta {
        InstanceDelta {
            operator: op.into(),
            instance: i,
            changes: [(key, Some("v"))].into_iter().collect(),
            snapshot: None,
            timers: Vec::new(),
            inflight: None,
            recorded: None,
        }
    }

    fn setup(interval: Option<Duration>) -> (Coordinator, Instant) {
        let parts = [
            Participant::Source("s".into()),
            Participant::Instance("op".into(), 0),
            Participant::Instance("op".into(), 1),
            Participant::Sink("out".into()),
        ];
        (Coordinator::new(parts, interval, 1), Instant::now())
    }

    fn ack_all(c: &mut Coordinator, id: u64, now: Instant) -> (Option<Completed>, Option<Command>) {
        assert!(
            c.on_ack(
                id,
                Ack::Source {
                    source: "s".into(),
                    offset: Value::from(id)
                },
                now
            )
            .0
            .is_none()
        );
        for i in 0..2 {
            let ack = Ack::Instance {
                delta: delta("op", i, &format!("k{id}")),
                align: AlignStats {
                    duration: Duration::from_millis(i as u64),
                    peak_bytes: 0,
                },
                pause: Duration::from_millis(10 - i as u64),
            };
            assert!(c.on_ack(id, ack, now).0.is_none());
        }
        c.on_ack(
            id,
            Ack::Sink {
                sink: "out".into(),
                info: Value::Null,
            },
            now,
        )
    }

    #[test]
    fn triggers_on_interval_one_at_a_time() {
        let (mut c, t0) = setup(Some(Duration::from_secs(1)));
        assert_eq!(c.tick(t0), None, "not at start");
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(c.tick(t1), Some(Command::Trigger(1)));
        assert_eq!(c.tick(t0 + Duration::from_secs(5)), None, "one in flight");
        let (done, next) = ack_all(&mut c, 1, t1);
        let done = done.unwrap();
        assert_eq!((done.id, done.deltas.len()), (1, 2));
        assert_eq!(done.align.duration, Duration::from_millis(1));
        assert_eq!(done.pause, Duration::from_millis(10), "the longest pause");
        assert_eq!(next, None);
        let early = c.tick(t1 + Duration::from_millis(500));
        assert_eq!(early, None, "interval not elapsed");
        let due = c.tick(t1 + Duration::from_secs(1));
        assert_eq!(due, Some(Command::Trigger(2)));
    }

    /// While a checkpoint is in flight, or the final one is being taken,
    /// nothing is due: the driver waits for the acknowledgement that ends
    /// it instead of polling with a zero timeout (it spun a core through
    /// every checkpoint longer than the interval, the final one always).
    #[test]
    fn nothing_is_due_while_a_checkpoint_is_in_flight() {
        let (mut c, t0) = setup(Some(Duration::from_secs(1)));
        assert_eq!(
            c.next_due(t0),
            Some(Duration::ZERO),
            "before the first tick"
        );
        c.tick(t0);
        let half = t0 + Duration::from_millis(500);
        assert_eq!(c.next_due(half), Some(Duration::from_millis(500)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(c.tick(t1), Some(Command::Trigger(1)));
        let late = t1 + Duration::from_secs(3);
        assert_eq!(c.next_due(late), None, "checkpoint 1 in flight");
        ack_all(&mut c, 1, late).0.unwrap();
        assert_eq!(c.next_due(late), Some(Duration::ZERO), "overdue now");
        assert_eq!(c.tick(late), Some(Command::Trigger(2)));
        ack_all(&mut c, 2, late).0.unwrap();
        assert_eq!(c.source_at_end("s", late), Some(Command::Finish(3)));
        let later = late + Duration::from_secs(5);
        assert_eq!(c.next_due(later), None, "the final checkpoint in flight");
    }

    #[test]
    fn no_interval_means_only_the_final_checkpoint() {
        let (mut c, t0) = setup(None);
        assert_eq!(c.tick(t0 + Duration::from_secs(100)), None);
        assert_eq!(c.source_at_end("s", t0), Some(Command::Finish(1)));
        let (done, _) = ack_all(&mut c, 1, t0);
        assert!(done.unwrap().is_final);
    }

    #[test]
    fn end_of_input_waits_for_the_checkpoint_in_flight() {
        let (mut c, t0) = setup(Some(Duration::from_secs(1)));
        c.tick(t0);
        assert_eq!(
            c.tick(t0 + Duration::from_secs(1)),
            Some(Command::Trigger(1))
        );
        assert_eq!(c.source_at_end("s", t0), None);
        let (done, next) = ack_all(&mut c, 1, t0);
        assert!(!done.unwrap().is_final);
        assert_eq!(next, Some(Command::Finish(2)));
        assert_eq!(
            c.tick(t0 + Duration::from_secs(9)),
            None,
            "no periodic trigger while finishing"
        );
        assert!(ack_all(&mut c, 2, t0).0.unwrap().is_final);
    }

    #[test]
    fn stale_acks_keep_their_deltas_for_the_next_checkpoint() {
        let (mut c, t0) = setup(Some(Duration::ZERO));
        c.tick(t0);
        // An ack for an unknown checkpoint (e.g. an abandoned one).
        assert!(
            c.on_ack(
                7,
                Ack::Instance {
                    delta: delta("op", 0, "old"),
                    align: AlignStats::default(),
                    pause: Duration::ZERO,
                },
                t0
            )
            .0
            .is_none()
        );
        let done = ack_all(&mut c, 1, t0).0.unwrap();
        let keys: Vec<_> = done
            .deltas
            .iter()
            .map(|d| d.changes.iter().next().unwrap().0.to_vec())
            .collect();
        assert_eq!(
            keys,
            [b"old".to_vec(), b"k1".to_vec(), b"k1".to_vec()],
            "oldest first"
        );
    }

    /// In-flight data is the input of its own checkpoint: a stale ack keeps
    /// its delta for the next checkpoint, without it.
    #[test]
    fn stale_acks_lose_their_inflight_data() {
        let (mut c, t0) = setup(Some(Duration::ZERO));
        c.tick(t0);
        let ack = Ack::Instance {
            delta: InstanceDelta {
                inflight: Some(vec![1, 2, 3]),
                recorded: None,
                ..delta("op", 0, "old")
            },
            align: AlignStats::default(),
            pause: Duration::ZERO,
        };
        assert!(c.on_ack(7, ack, t0).0.is_none());
        let done = ack_all(&mut c, 1, t0).0.unwrap();
        assert_eq!(done.deltas[0].changes, delta("op", 0, "old").changes);
        assert!(done.deltas.iter().all(|d| d.inflight.is_none()));
    }

    #[test]
    fn duplicate_acks_do_not_complete_a_checkpoint() {
        let (mut c, t0) = setup(Some(Duration::ZERO));
        c.tick(t0);
        for _ in 0..5 {
            assert!(
                c.on_ack(
                    1,
                    Ack::Sink {
                        sink: "out".into(),
                        info: Value::Null
                    },
                    t0
                )
                .0
                .is_none()
            );
        }
        assert_eq!(c.in_flight(), Some(1));
    }

    #[test]
    fn stop_takes_a_checkpoint_and_never_finishes() {
        let (mut c, t0) = setup(None);
        assert_eq!(c.request_stop(t0), Some(Command::Trigger(1)));
        assert_eq!(
            c.source_at_end("s", t0),
            None,
            "a stopping job does not run finish"
        );
        let (done, next) = ack_all(&mut c, 1, t0);
        assert!(!done.unwrap().is_final);
        assert_eq!(next, None);
    }

    #[test]
    fn a_stop_during_a_checkpoint_waits_for_it_then_takes_another() {
        let (mut c, t0) = setup(Some(Duration::ZERO));
        assert_eq!(c.tick(t0), Some(Command::Trigger(1)));
        assert_eq!(c.request_stop(t0), None);
        let _ = ack_all(&mut c, 1, t0);
        assert_eq!(c.tick(t0), Some(Command::Trigger(2)));
    }

    /// A savepoint's checkpoint: at once without an interval, or right
    /// after the one in flight, then the periodic schedule goes on.
    #[test]
    fn a_requested_checkpoint_is_taken_now_or_right_after_the_one_in_flight() {
        let (mut c, t0) = setup(None);
        assert_eq!(c.next_id(), 1);
        assert_eq!(c.request_checkpoint(t0), Some(Command::Trigger(1)));
        assert_eq!(c.tick(t0), None, "one in flight");
        let _ = ack_all(&mut c, 1, t0);
        assert_eq!(c.tick(t0), None, "asked once, taken once");

        let (mut c, t0) = setup(Some(Duration::from_secs(3600)));
        assert_eq!(c.tick(t0), None);
        assert_eq!(c.request_checkpoint(t0), Some(Command::Trigger(1)));
        assert_eq!(c.request_checkpoint(t0), None, "in flight");
        let _ = ack_all(&mut c, 1, t0);
        assert_eq!(c.tick(t0), Some(Command::Trigger(2)), "right after it");
        let _ = ack_all(&mut c, 2, t0);
        assert_eq!(c.tick(t0), None, "then at the interval");
        assert!(!c.stop_requested());
    }
}
