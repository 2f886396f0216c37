//! Unit and randomized tests of overtaken (unaligned) checkpoints.

use super::super::Action::{
    self, Abort, Checkpoint, Complete, Finished, Process, Record, Snapshot,
};
use super::super::Input::{self, Barrier, Batch, End};
use super::*;

type A = Aligner<&'static str>;

fn feed(a: &mut A, channel: usize, event: Input<&'static str>) -> Vec<Action<&'static str>> {
    let mut out = Vec::new();
    a.on_event(channel, event, 1, &mut out);
    out
}

fn announce(a: &mut A, channel: usize, id: u64) -> Vec<Action<&'static str>> {
    let mut out = Vec::new();
    a.on_announce(channel, id, &mut out);
    out
}

fn overtake(a: &mut A, id: u64) -> (bool, Vec<Action<&'static str>>) {
    let mut out = Vec::new();
    let done = a.overtake(id, &mut out);
    (done, out)
}

fn p(channel: usize, batch: &'static str) -> Action<&'static str> {
    Process { channel, batch }
}

fn r(channel: usize, batch: &'static str) -> Action<&'static str> {
    Record { channel, batch }
}

#[test]
fn the_first_barrier_snapshots_at_once_and_records_until_each_channels_barrier() {
    let mut a = A::unaligned(3);
    assert_eq!(feed(&mut a, 0, Batch("a0")), [p(0, "a0")]);
    assert_eq!(feed(&mut a, 1, Batch("b0")), [p(1, "b0")]);
    assert_eq!(feed(&mut a, 0, Barrier(1)), [Snapshot { id: 1 }]);
    assert!(a.overtaken() && a.aligning() == Some(1));
    // Channel 0 delivered barrier 1: not blocked, not recorded.
    assert!(!a.is_blocked(0));
    assert_eq!(feed(&mut a, 0, Batch("a1")), [p(0, "a1")]);
    // The other channels' batches up to their barrier are in-flight data.
    assert_eq!(feed(&mut a, 1, Batch("b1")), [r(1, "b1"), p(1, "b1")]);
    assert_eq!(feed(&mut a, 2, Batch("c0")), [r(2, "c0"), p(2, "c0")]);
    assert_eq!(feed(&mut a, 1, Barrier(1)), []);
    assert_eq!(feed(&mut a, 1, Batch("b2")), [p(1, "b2")]);
    assert_eq!(feed(&mut a, 2, Batch("c1")), [r(2, "c1"), p(2, "c1")]);
    assert_eq!(feed(&mut a, 2, Barrier(1)), [Complete { id: 1 }]);
    assert_eq!((a.aligning(), a.last_checkpoint()), (None, Some(1)));
    assert_eq!(feed(&mut a, 2, Batch("c2")), [p(2, "c2")]);
    // The next checkpoint is overtaken as well.
    assert_eq!(feed(&mut a, 2, Barrier(2)), [Snapshot { id: 2 }]);
}

#[test]
fn one_channel_snapshots_and_completes_at_its_barrier() {
    let mut a = A::unaligned(1);
    assert_eq!(
        feed(&mut a, 0, Barrier(1)),
        [Snapshot { id: 1 }, Complete { id: 1 }]
    );
    assert_eq!(feed(&mut a, 0, End), [Finished]);
}

#[test]
fn an_announced_channel_drains_to_its_barrier_before_anything_is_processed() {
    let mut a = A::unaligned(2);
    assert_eq!(announce(&mut a, 0, 1), [Snapshot { id: 1 }]);
    assert!(a.draining() && a.is_draining(0) && !a.is_draining(1));
    assert!(a.holds(0) && !a.holds(1));
    assert_eq!(feed(&mut a, 0, Batch("a0")), [r(0, "a0")]);
    assert_eq!(feed(&mut a, 0, Batch("a1")), [r(0, "a1")]);
    assert_eq!(a.buffered_batches(), 2);
    // Channel 1 owes barrier 1 but was not announced: acted on, recorded.
    assert_eq!(feed(&mut a, 1, Batch("b0")), [r(1, "b0"), p(1, "b0")]);
    // The drain ends at channel 0's barrier: its batches are released.
    assert_eq!(feed(&mut a, 0, Barrier(1)), [p(0, "a0"), p(0, "a1")]);
    assert!(!a.draining());
    assert_eq!(feed(&mut a, 0, Batch("a2")), [p(0, "a2")]);
    // A late announcement of a channel that owes it makes it drain.
    assert_eq!(announce(&mut a, 1, 1), []);
    assert!(a.is_draining(1));
    assert_eq!(feed(&mut a, 1, Batch("b1")), [r(1, "b1")]);
    assert_eq!(
        feed(&mut a, 1, Barrier(1)),
        [Complete { id: 1 }, p(1, "b1")]
    );
    // Announcements of a completed checkpoint are ignored.
    assert_eq!(announce(&mut a, 0, 1), []);
    assert_eq!(a.aligning(), None);
}

#[test]
fn with_every_channel_draining_the_acknowledgement_comes_before_the_release() {
    let mut a = A::unaligned(2);
    assert_eq!(announce(&mut a, 1, 4), [Snapshot { id: 4 }]);
    assert_eq!(announce(&mut a, 0, 4), []);
    assert_eq!(feed(&mut a, 0, Batch("a0")), [r(0, "a0")]);
    assert_eq!(feed(&mut a, 1, Batch("b0")), [r(1, "b0")]);
    assert_eq!(feed(&mut a, 0, Barrier(4)), []);
    // Channel 0 delivered it, but its later events wait behind the drain.
    assert_eq!(feed(&mut a, 0, Batch("a1")), []);
    assert_eq!(
        feed(&mut a, 1, Barrier(4)),
        [Complete { id: 4 }, p(0, "a0"), p(1, "b0"), p(0, "a1")]
    );
}

#[test]
fn the_alignment_timeout_overtakes_a_running_alignment() {
    let mut a = A::new(3);
    assert_eq!(overtake(&mut a, 1), (true, vec![Snapshot { id: 1 }]));
    assert_eq!(feed(&mut a, 0, Barrier(1)), []);
    // ... after which the next checkpoint starts aligned again.
    assert_eq!(feed(&mut a, 1, Barrier(1)), []);
    assert_eq!(feed(&mut a, 2, Barrier(1)), [Complete { id: 1 }]);

    let mut a = A::new(3);
    assert_eq!(announce(&mut a, 2, 2), [], "aligned: remembered only");
    assert_eq!(feed(&mut a, 0, Barrier(2)), []);
    assert_eq!(feed(&mut a, 0, Batch("after")), []);
    assert_eq!(feed(&mut a, 1, Batch("before")), [p(1, "before")]);
    assert_eq!(overtake(&mut a, 1), (false, vec![]), "not the alignment");
    // Channel 0's held events follow its barrier: not in-flight data; they
    // wait for the drain of channel 2, which was announced.
    assert_eq!(overtake(&mut a, 2), (true, vec![Snapshot { id: 2 }]));
    assert!(a.is_draining(2));
    assert_eq!(overtake(&mut a, 2), (false, vec![]), "only once");
    assert_eq!(feed(&mut a, 1, Batch("b")), [r(1, "b"), p(1, "b")]);
    assert_eq!(feed(&mut a, 2, Batch("c")), [r(2, "c")]);
    assert_eq!(feed(&mut a, 2, Barrier(2)), [p(0, "after"), p(2, "c")]);
    assert_eq!(feed(&mut a, 1, Barrier(2)), [Complete { id: 2 }]);
    assert_eq!(feed(&mut a, 1, Barrier(3)), [], "aligned again");
    assert!(a.is_blocked(1) && !a.overtaken());
}

#[test]
fn a_newer_barrier_on_a_channel_that_delivered_the_overtaken_one_waits() {
    let mut a = A::unaligned(2);
    assert_eq!(feed(&mut a, 0, Barrier(1)), [Snapshot { id: 1 }]);
    assert_eq!(feed(&mut a, 0, Barrier(2)), []);
    assert_eq!(feed(&mut a, 0, Batch("x")), []);
    assert_eq!(feed(&mut a, 1, Batch("y")), [r(1, "y"), p(1, "y")]);
    assert_eq!(
        feed(&mut a, 1, Barrier(1)),
        [Complete { id: 1 }, Snapshot { id: 2 }, p(0, "x")]
    );
    assert_eq!(feed(&mut a, 1, Batch("z")), [r(1, "z"), p(1, "z")]);
    assert_eq!(feed(&mut a, 1, Barrier(2)), [Complete { id: 2 }]);
}

#[test]
fn an_ended_channel_owes_nothing_and_finished_comes_last() {
    let mut a = A::unaligned(3);
    assert_eq!(announce(&mut a, 1, 1), [Snapshot { id: 1 }]);
    assert_eq!(feed(&mut a, 1, Batch("b")), [r(1, "b")]);
    assert_eq!(feed(&mut a, 1, End), [p(1, "b")]);
    assert_eq!(feed(&mut a, 2, End), []);
    assert_eq!(feed(&mut a, 0, Batch("a")), [r(0, "a"), p(0, "a")]);
    assert_eq!(feed(&mut a, 0, End), [Complete { id: 1 }, Finished]);
}

#[test]
fn a_skipped_overtaken_barrier_aborts() {
    let mut a = A::unaligned(2);
    assert_eq!(feed(&mut a, 0, Barrier(1)), [Snapshot { id: 1 }]);
    assert_eq!(
        feed(&mut a, 1, Barrier(2)),
        [Abort { id: 1, newer: 2 }, Snapshot { id: 2 }]
    );
    assert_eq!(feed(&mut a, 0, Barrier(2)), [Complete { id: 2 }]);
    assert_eq!(feed(&mut a, 0, Barrier(1)), [], "stale");
}

// ---- Randomized property test -------------------------------------

use crate::dataflow::align::tests::Rng;

/// A batch is (channel, sequence number on that channel).
type Tag = (usize, usize);

/// Per channel its stream and, per barrier id, the batches before it.
struct Scenario {
    streams: Vec<Vec<Input<Tag>>>,
    cut: Vec<Vec<usize>>,
    barriers: u64,
}

fn scenario(rng: &mut Rng) -> Scenario {
    let channels = 1 + rng.below(4);
    let barriers = rng.below(5) as u64;
    let (mut streams, mut cuts) = (Vec::new(), Vec::new());
    for c in 0..channels {
        let (mut stream, mut cut, mut seq) = (Vec::new(), vec![0], 0);
        for id in 1..=barriers + 1 {
            for _ in 0..rng.below(4) {
                stream.push(Batch((c, seq)));
                seq += 1;
            }
            if id <= barriers {
                stream.push(Barrier(id));
                cut.push(seq);
            }
        }
        stream.push(End);
        streams.push(stream);
        cuts.push(cut);
    }
    Scenario {
        streams,
        cut: cuts,
        barriers,
    }
}

/// Checks the actions of one step against the scenario.
#[derive(Default)]
struct Observer {
    processed: Vec<usize>,
    /// Per channel: processed at the current snapshot, and recorded since.
    snap: Vec<usize>,
    recorded: Vec<usize>,
    overtaken: Option<u64>,
    done: Vec<u64>,
    finished: bool,
}

impl Observer {
    fn check(&mut self, s: &Scenario, out: Vec<Action<Tag>>) {
        let count = out.len();
        for (i, action) in out.into_iter().enumerate() {
            assert!(!self.finished, "action after Finished");
            match action {
                Process { channel, batch } => {
                    assert_eq!(batch, (channel, self.processed[channel]), "order");
                    self.processed[channel] += 1;
                }
                Snapshot { id } => {
                    assert!(self.overtaken.is_none());
                    for (c, cut) in s.cut.iter().enumerate() {
                        assert!(self.processed[c] <= cut[id as usize], "snapshot {id}");
                    }
                    self.snap = self.processed.clone();
                    self.recorded = vec![0; s.streams.len()];
                    self.overtaken = Some(id);
                }
                Record { channel, batch } => {
                    let id = self
                        .overtaken
                        .expect("a record belongs to an overtaken checkpoint");
                    let at = self.snap[channel] + self.recorded[channel];
                    assert_eq!(batch, (channel, at), "records in channel order");
                    assert!(
                        at < s.cut[channel][id as usize],
                        "nothing after the barrier"
                    );
                    self.recorded[channel] += 1;
                }
                Complete { id } => {
                    assert_eq!(self.overtaken.take(), Some(id));
                    for (c, cut) in s.cut.iter().enumerate() {
                        assert_eq!(
                            self.snap[c] + self.recorded[c],
                            cut[id as usize],
                            "in-flight data of channel {c} for {id}"
                        );
                    }
                    self.done.push(id);
                }
                Checkpoint { id } => {
                    let cut: Vec<usize> = s.cut.iter().map(|c| c[id as usize]).collect();
                    assert_eq!(self.processed, cut, "aligned cut of {id}");
                    self.done.push(id);
                }
                Abort { .. } => panic!("no abort: every channel carries every barrier"),
                Finished => {
                    assert_eq!(i + 1, count, "Finished is last");
                    self.finished = true;
                }
            }
        }
    }
}

/// Feeds a scenario in a random interleaving of reads, announcements (on
/// any channel, also after it delivered the barrier: the executor may see
/// one late) and, for an aligned aligner, timeouts. The executor reads only
/// draining channels while there are some.
fn simulate(rng: &mut Rng, s: &Scenario, unaligned: bool) {
    let channels = s.streams.len();
    let mut a = if unaligned {
        Aligner::<Tag>::unaligned(channels)
    } else {
        Aligner::<Tag>::new(channels)
    };
    let mut next = vec![0; channels];
    let mut o = Observer {
        processed: vec![0; channels],
        ..Observer::default()
    };
    loop {
        let mut out = Vec::new();
        // The checkpoint an upstream can be at: with one checkpoint in
        // flight, the current one or the one after the last completed.
        let target = a.aligning().unwrap_or(o.done.last().map_or(1, |d| d + 1));
        match rng.below(8) {
            0 if target <= s.barriers => a.on_announce(rng.below(channels), target, &mut out),
            1 if !unaligned && target <= s.barriers => {
                a.overtake(target, &mut out);
            }
            _ => {
                let ready: Vec<usize> = (0..channels)
                    .filter(|&c| next[c] < s.streams[c].len())
                    .filter(|&c| !a.draining() || a.is_draining(c))
                    .collect();
                if ready.is_empty() {
                    assert!(
                        (0..channels).all(|c| next[c] == s.streams[c].len()),
                        "deadlock"
                    );
                    break;
                }
                let c = ready[rng.below(ready.len())];
                let event = s.streams[c][next[c]].clone();
                next[c] += 1;
                a.on_event(c, event, 1, &mut out);
            }
        }
        o.check(s, out);
    }
    assert!(o.finished && o.overtaken.is_none());
    let totals: Vec<usize> = s
        .streams
        .iter()
        .map(|st| st.len() - 1 - s.barriers as usize)
        .collect();
    assert_eq!(o.processed, totals, "every batch processed once");
    assert_eq!(
        o.done,
        (1..=s.barriers).collect::<Vec<_>>(),
        "every checkpoint"
    );
    assert_eq!((a.buffered_batches(), a.aligning()), (0, None));
}

#[test]
fn random_interleavings_keep_every_invariant() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for i in 0..4000 {
        let s = scenario(&mut rng);
        simulate(&mut rng, &s, i % 2 == 0);
    }
}
