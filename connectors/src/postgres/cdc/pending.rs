//! The stream's records read but not yet returned, a batch per output port
//! (table), and the position a restore resumes at ([`Pending::lsn`],
//! [`Pending::skip`], [`Pending::reads`]).
//!
//! The reader returns one port's batch at a time, so the records of one
//! transaction may be returned in another order than the stream's. The
//! resume position is therefore `lsn`, the end of the last transaction (or
//! idle point) all of whose records were returned, and, per port, how many
//! records past it were returned (`skip`): the stream restarted at `lsn`
//! brings the same records in the same order, of which each port drops its
//! first `skip`. The read points at `lsn` go with it: a restore filters
//! the records past `lsn` as this run did.
//!
//! Counts are per port since the reader opened; a mark keeps the counts
//! at a transaction's end, and `lsn` moves to the last mark every port has
//! returned all records up to.

use std::collections::VecDeque;

use weir::dataflow::Batch;
use weir::dataflow::batch::Change;

use super::offset::ReadPoint;

/// A transaction's end (or an idle point) in the stream.
#[derive(Debug)]
struct Mark {
    /// Where a stream restarted after it begins.
    end: u64,
    /// Per port, the records counted up to it.
    counted: Vec<u64>,
    /// The read points in force after it.
    reads: Vec<ReadPoint>,
}

/// Records read and not yet returned, per port; see the module.
#[derive(Debug)]
pub(super) struct Pending {
    batches: Vec<Batch>,
    /// Per port, records counted: returned, pending, or dropped as
    /// returned by an earlier run.
    counted: Vec<u64>,
    /// Per port, records returned (or dropped as returned before).
    returned: Vec<u64>,
    /// Marks past `lsn`, oldest first.
    marks: VecDeque<Mark>,
    lsn: u64,
    /// Per port, `counted` at `lsn`.
    base: Vec<u64>,
    reads: Vec<ReadPoint>,
    /// Per port, records the stream brings past `lsn` that an earlier run
    /// returned and this one drops.
    to_skip: Vec<u64>,
}

impl Pending {
    /// Nothing read yet, `ports` ports, resuming at `lsn` with `skip` per
    /// port (missing ports: 0) and read points `reads`.
    pub(super) fn new(ports: usize, lsn: u64, skip: &[u64], reads: Vec<ReadPoint>) -> Pending {
        let mut to_skip = vec![0; ports];
        to_skip.iter_mut().zip(skip).for_each(|(t, s)| *t = *s);
        Pending {
            batches: (0..ports).map(|_| Batch::new()).collect(),
            counted: vec![0; ports],
            returned: vec![0; ports],
            marks: VecDeque::new(),
            lsn,
            base: vec![0; ports],
            reads,
            to_skip,
        }
    }

    /// Adds a record of the stream on `port`, unless an earlier run
    /// returned it.
    pub(super) fn push(
        &mut self,
        port: usize,
        change: Change,
        key: Option<&[u8]>,
        value: &[u8],
        time: i64,
    ) {
        self.counted[port] += 1;
        if self.to_skip[port] > 0 {
            self.to_skip[port] -= 1;
            self.returned[port] += 1;
            return;
        }
        self.batches[port].push_change(change, key, value, Some(time));
    }

    /// A transaction ended, or the stream is idle, at `end`, with `reads`
    /// in force after it. Ends at or before the last one are ignored.
    pub(super) fn mark(&mut self, end: u64, reads: &[ReadPoint]) {
        let last = self.marks.back().map_or(self.lsn, |m| m.end);
        if end <= last {
            return;
        }
        self.marks.push_back(Mark {
            end,
            counted: self.counted.clone(),
            reads: reads.to_vec(),
        });
        self.advance();
    }

    /// Moves `lsn` to the last mark whose records every port returned.
    fn advance(&mut self) {
        while let Some(mark) = self.marks.front() {
            let returned = mark.counted.iter().zip(&self.returned);
            if returned
                .into_iter()
                .any(|(counted, returned)| counted > returned)
            {
                break;
            }
            let mark = self.marks.pop_front().expect("a front mark");
            self.lsn = mark.end;
            self.base = mark.counted;
            self.reads = mark.reads;
        }
    }

    /// The batch of the first port holding records, which count as
    /// returned; `None` if none holds any.
    pub(super) fn take(&mut self) -> Option<(u32, Batch)> {
        let port = self.batches.iter().position(|b| !b.is_empty())?;
        let batch = std::mem::take(&mut self.batches[port]);
        self.returned[port] += batch.len() as u64;
        self.advance();
        Some((port as u32, batch))
    }

    /// Records held, all ports.
    pub(super) fn len(&self) -> usize {
        self.batches.iter().map(Batch::len).sum()
    }

    /// Bytes of the records held, all ports.
    pub(super) fn data_bytes(&self) -> usize {
        self.batches.iter().map(Batch::data_bytes).sum()
    }

    /// Where a restore resumes the stream.
    pub(super) fn lsn(&self) -> u64 {
        self.lsn
    }

    /// Per port, records past [`lsn`](Self::lsn) returned.
    pub(super) fn skip(&self) -> Vec<u64> {
        (self.returned.iter().zip(&self.base))
            .map(|(returned, base)| returned - base)
            .collect()
    }

    /// The read points in force at [`lsn`](Self::lsn).
    pub(super) fn reads(&self) -> &[ReadPoint] {
        &self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of transactions, each a list of (port, record number).
    fn stream() -> Vec<(u64, Vec<(usize, u64)>)> {
        let mut next = 0;
        let mut record = |port| {
            next += 1;
            (port, next)
        };
        vec![
            (100, vec![record(0), record(1), record(0)]),
            (200, vec![record(1)]),
            (
                300,
                vec![record(0), record(0), record(1), record(1), record(0)],
            ),
            (400, vec![]),
            (500, vec![record(1), record(0)]),
        ]
    }

    fn numbers(batch: &Batch) -> Vec<u64> {
        (batch.iter())
            .map(|r| std::str::from_utf8(r.value).unwrap().parse().unwrap())
            .collect()
    }

    /// Reads `stream` from the start (position 0) with a pending set
    /// restored at `(lsn, skip)`, taking a batch after each `every`
    /// records read and checkpointing after each take; returns what each
    /// port got, and the checkpoints.
    #[allow(clippy::type_complexity)]
    fn run(
        at: (u64, Vec<u64>),
        every: usize,
        stop_after: usize,
    ) -> ([Vec<u64>; 2], Vec<(u64, Vec<u64>)>) {
        let mut pending = Pending::new(2, at.0, &at.1, Vec::new());
        let mut got: [Vec<u64>; 2] = Default::default();
        let mut checkpoints = Vec::new();
        let mut read = 0;
        let mut take = |pending: &mut Pending, got: &mut [Vec<u64>; 2]| {
            while let Some((port, batch)) = pending.take() {
                got[port as usize].extend(numbers(&batch));
                checkpoints.push((pending.lsn(), pending.skip()));
                if checkpoints.len() == stop_after {
                    return true;
                }
            }
            false
        };
        for (end, records) in stream().into_iter().filter(|(end, _)| *end > at.0) {
            for (port, n) in records {
                pending.push(port, Change::Insert, None, n.to_string().as_bytes(), 0);
                read += 1;
                if read % every == 0 && take(&mut pending, &mut got) {
                    return (got, checkpoints);
                }
            }
            pending.mark(end, &[]);
        }
        take(&mut pending, &mut got);
        (got, checkpoints)
    }

    #[test]
    fn a_restore_at_any_checkpoint_repeats_and_loses_nothing_on_any_port() {
        let (all, _) = run((0, vec![]), 1000, usize::MAX);
        assert_eq!(all, [vec![1, 3, 5, 6, 9, 11], vec![2, 4, 7, 8, 10]]);
        for every in 1..=5 {
            let (_, checkpoints) = run((0, vec![]), every, usize::MAX);
            for (i, checkpoint) in checkpoints.iter().enumerate() {
                // What a run stopped at checkpoint i got, then a run
                // restored from it.
                let (before, at) = run((0, vec![]), every, i + 1);
                assert_eq!(&at[i], checkpoint);
                let (after, _) = run(checkpoint.clone(), every, usize::MAX);
                for port in 0..2 {
                    let whole: Vec<u64> =
                        before[port].iter().chain(&after[port]).copied().collect();
                    assert_eq!(whole, all[port], "every {every}, checkpoint {checkpoint:?}");
                }
            }
        }
    }

    #[test]
    fn the_position_moves_past_a_transaction_once_every_port_returned_it() {
        let mut p = Pending::new(2, 50, &[], Vec::new());
        p.push(0, Change::Insert, None, b"1", 0);
        p.push(1, Change::Insert, None, b"2", 0);
        p.mark(100, &[]);
        assert_eq!((p.lsn(), p.len()), (50, 2));
        assert_eq!(p.take().map(|(port, b)| (port, b.len())), Some((0, 1)));
        assert_eq!((p.lsn(), p.skip()), (50, vec![1, 0]));
        assert_eq!(p.take().map(|(port, b)| (port, b.len())), Some((1, 1)));
        assert_eq!((p.lsn(), p.skip()), (100, vec![0, 0]));
        // An idle point with nothing held moves it at once; an earlier one
        // is ignored.
        let read = ReadPoint {
            table: 1,
            after: None,
            lsn: 900,
        };
        p.mark(150, std::slice::from_ref(&read));
        p.mark(120, &[]);
        assert_eq!((p.lsn(), p.reads()), (150, &[read][..]));
        assert!(p.take().is_none());
    }
}
