//! Comparing what two runs of recorded epochs emitted and kept: records
//! per output port ([`PortDiff`]), keyed state ([`StateDiff`]), and the
//! byte-for-byte check of a replay ([`first_difference`]).
//!
//! Records are compared as a reader gets them (rows as their JSON text),
//! per step and port: the records of one key pair up in order (the k-th
//! of each run), the same when value and timestamp are equal, else
//! *changed*; what is left is only in one run. Records without a key
//! match when equal, as a multiset (nothing gives them an order to pair
//! by).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::Record;
use crate::dataflow::batch::Batch;
use crate::keyed::value::readable;

/// How the records emitted on one output port differ.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortDiff {
    /// The port's name.
    pub port: String,
    /// Records both runs emitted.
    pub same: u64,
    /// Records of a key whose value or timestamp differs.
    pub changed: u64,
    /// Records only the recorded plugin emitted.
    pub only_v1: u64,
    /// Records only the new plugin emitted.
    pub only_v2: u64,
    /// The differences, in step order, at most the report's limit.
    pub differences: Vec<RecordDiff>,
}

/// How one record or state key differs between the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    /// Both have it (the k-th record of a key, or the key), with another
    /// value or timestamp.
    Changed,
    /// Only the recorded plugin's run has it.
    OnlyV1,
    /// Only the new plugin's run has it.
    OnlyV2,
}

impl Difference {
    /// As reports write it: `changed`, `only_v1`, `only_v2`.
    pub fn name(self) -> &'static str {
        match self {
            Difference::Changed => "changed",
            Difference::OnlyV1 => "only_v1",
            Difference::OnlyV2 => "only_v2",
        }
    }
}

/// One record that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordDiff {
    /// The checkpoint whose epoch emitted it.
    pub epoch: u64,
    /// The instance.
    pub instance: u32,
    /// The step in the epoch's recording.
    pub step: usize,
    /// How it differs.
    pub kind: Difference,
    /// Its key ([`shown`]).
    pub key: Option<String>,
    /// What the recorded plugin emitted.
    pub v1: Option<Shown>,
    /// What the new plugin emitted.
    pub v2: Option<Shown>,
}

/// A record's value and timestamp as a report shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    /// The value ([`shown`]).
    pub value: String,
    /// Its event time.
    pub timestamp: Option<i64>,
}

/// How the keyed state differs at the end of the range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StateDiff {
    /// Keys both hold with the same value.
    pub same: u64,
    /// Keys both hold with other values.
    pub changed: u64,
    /// Keys only the recorded plugin's state holds.
    pub only_v1: u64,
    /// Keys only the new plugin's state holds.
    pub only_v2: u64,
    /// The keys that differ, sorted, at most the report's limit.
    pub keys: Vec<KeyDiff>,
}

/// One state key that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyDiff {
    /// The key ([`shown`]).
    pub key: String,
    /// How it differs.
    pub kind: Difference,
    /// Its value in the recorded plugin's state.
    pub v1: Option<String>,
    /// Its value in the new plugin's state.
    pub v2: Option<String>,
}

/// Bytes as a report shows them: the text when they are UTF-8, else `0x`
/// and their hex digits.
pub fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => {
            let mut out = String::from("0x");
            for b in bytes {
                out.push_str(&format!("{b:02x}"));
            }
            out
        }
    }
}

/// The records of one key in each run.
type Pair = (Vec<Record>, Vec<Record>);

/// A record's value and timestamp, what matching compares.
type Value<'r> = (&'r [u8], Option<i64>);

/// Where the compared records came from.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepAt {
    pub epoch: u64,
    pub instance: u32,
    pub step: usize,
}

impl PortDiff {
    /// Adds the comparison of one step's records on this port.
    pub(super) fn add(&mut self, at: StepAt, v1: Vec<Record>, v2: Vec<Record>, limit: usize) {
        let mut by_key: BTreeMap<Option<Vec<u8>>, Pair> = BTreeMap::new();
        for r in v1 {
            by_key.entry(r.key.clone()).or_default().0.push(r);
        }
        for r in v2 {
            by_key.entry(r.key.clone()).or_default().1.push(r);
        }
        for (key, (a, b)) in by_key {
            let (a, b, paired) = match key {
                // A key's records pair up in order: the k-th of each run.
                Some(_) => {
                    let n = a.len().min(b.len());
                    let pairs: Vec<usize> = (0..n).filter(|&k| !same(&a[k], &b[k])).collect();
                    self.same += (n - pairs.len()) as u64;
                    let a_left: Vec<&Record> =
                        pairs.iter().map(|&k| &a[k]).chain(&a[n..]).collect();
                    let b_left: Vec<&Record> =
                        pairs.iter().map(|&k| &b[k]).chain(&b[n..]).collect();
                    (a_left, b_left, pairs.len())
                }
                // Records without a key match when equal, as a multiset.
                None => {
                    let (a_left, b_left) = unmatched(&a, &b);
                    self.same += (a.len() - a_left.len()) as u64;
                    (a_left, b_left, 0)
                }
            };
            let mut note = |kind: Difference, x: Option<&Record>, y: Option<&Record>| {
                if self.differences.len() < limit {
                    self.differences.push(RecordDiff {
                        epoch: at.epoch,
                        instance: at.instance,
                        step: at.step,
                        kind,
                        key: key.as_deref().map(shown),
                        v1: x.map(show),
                        v2: y.map(show),
                    });
                }
            };
            for k in 0..paired {
                note(Difference::Changed, Some(a[k]), Some(b[k]));
            }
            for r in &a[paired..] {
                note(Difference::OnlyV1, Some(r), None);
            }
            for r in &b[paired..] {
                note(Difference::OnlyV2, None, Some(r));
            }
            self.changed += paired as u64;
            self.only_v1 += (a.len() - paired) as u64;
            self.only_v2 += (b.len() - paired) as u64;
        }
    }

    /// Records that differ: changed or only in one run.
    pub fn differing(&self) -> u64 {
        self.changed + self.only_v1 + self.only_v2
    }
}

fn same(a: &Record, b: &Record) -> bool {
    (a.value.as_slice(), a.timestamp) == (b.value.as_slice(), b.timestamp)
}

/// The records of `a` and of `b` that the other lacks, as multisets of
/// (value, timestamp), each in its order.
fn unmatched<'r>(a: &'r [Record], b: &'r [Record]) -> (Vec<&'r Record>, Vec<&'r Record>) {
    let mut counts: HashMap<Value<'_>, (usize, usize)> = HashMap::new();
    for r in a {
        counts.entry((&r.value, r.timestamp)).or_default().0 += 1;
    }
    for r in b {
        counts.entry((&r.value, r.timestamp)).or_default().1 += 1;
    }
    // The first `m` of each value on both sides match, `m` the lesser count.
    let mut left: HashMap<Value<'_>, (usize, usize)> = (counts.iter())
        .map(|(k, &(x, y))| (*k, (x.min(y), x.min(y))))
        .collect();
    let a = (a.iter())
        .filter(|r| {
            take(
                &mut left
                    .get_mut(&(&r.value[..], r.timestamp))
                    .expect("counted")
                    .0,
            )
        })
        .collect();
    let b = (b.iter())
        .filter(|r| {
            take(
                &mut left
                    .get_mut(&(&r.value[..], r.timestamp))
                    .expect("counted")
                    .1,
            )
        })
        .collect();
    (a, b)
}

/// Whether a record is left after matching: false for the first `*n`
/// (counting `*n` down).
fn take(n: &mut usize) -> bool {
    match *n {
        0 => true,
        _ => {
            *n -= 1;
            false
        }
    }
}

fn show(r: &Record) -> Shown {
    Shown {
        value: shown(&r.value),
        timestamp: r.timestamp,
    }
}

impl StateDiff {
    /// The differences between two states, each sorted by key.
    pub(super) fn of(v1: &[(Vec<u8>, Vec<u8>)], v2: &[(Vec<u8>, Vec<u8>)], limit: usize) -> Self {
        let mut diff = StateDiff::default();
        let (mut a, mut b) = (v1.iter().peekable(), v2.iter().peekable());
        loop {
            // `None`: the same.
            let (kind, key, x, y) = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some((k, v)), None) => (Some(Difference::OnlyV1), k, Some(v), None),
                (None, Some((k, v))) => (Some(Difference::OnlyV2), k, None, Some(v)),
                (Some((ka, va)), Some((kb, vb))) => match ka.cmp(kb) {
                    std::cmp::Ordering::Less => (Some(Difference::OnlyV1), ka, Some(va), None),
                    std::cmp::Ordering::Greater => (Some(Difference::OnlyV2), kb, None, Some(vb)),
                    std::cmp::Ordering::Equal if va == vb => (None, ka, Some(va), Some(vb)),
                    std::cmp::Ordering::Equal => {
                        (Some(Difference::Changed), ka, Some(va), Some(vb))
                    }
                },
            };
            if x.is_some() {
                a.next();
            }
            if y.is_some() {
                b.next();
            }
            *match kind {
                None => &mut diff.same,
                Some(Difference::Changed) => &mut diff.changed,
                Some(Difference::OnlyV1) => &mut diff.only_v1,
                Some(Difference::OnlyV2) => &mut diff.only_v2,
            } += 1;
            if let Some(kind) = kind.filter(|_| diff.keys.len() < limit) {
                diff.keys.push(KeyDiff {
                    key: shown(key),
                    kind,
                    v1: x.map(|v| shown(&readable(v))),
                    v2: y.map(|v| shown(&readable(v))),
                });
            }
        }
        diff
    }

    /// Keys that differ.
    pub fn differing(&self) -> u64 {
        self.changed + self.only_v1 + self.only_v2
    }
}

/// The first way `got` (a step's outputs made again) differs from `want`
/// (as recorded), byte for byte, if any.
pub(super) fn first_difference(want: &[(u32, Batch)], got: &[(u32, Batch)]) -> Option<String> {
    let ports = |o: &[(u32, Batch)]| o.iter().map(|(p, _)| *p).collect::<Vec<_>>();
    if ports(want) != ports(got) {
        return Some(format!(
            "it emitted on output ports {:?}, the recording on {:?}",
            ports(got),
            ports(want)
        ));
    }
    for ((port, a), (_, b)) in want.iter().zip(got) {
        if a.parts() == b.parts() {
            continue;
        }
        if a.len() != b.len() {
            return Some(format!(
                "it emitted {} records on output port {port}, the recording {}",
                b.len(),
                a.len()
            ));
        }
        let i = (0..a.len()).find(|&i| a.get(i) != b.get(i)).unwrap_or(0);
        let (x, y) = (a.get(i), b.get(i));
        return Some(format!(
            "record {i} on output port {port} differs: recorded key {:?} value {:?} at {:?}, now key {:?} value {:?} at {:?}",
            x.key.map(shown),
            shown(&x.text_value()),
            x.timestamp,
            y.key.map(shown),
            shown(&y.text_value()),
            y.timestamp
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
        let r = Record::new(value.as_bytes().to_vec());
        let r = match key {
            Some(k) => r.with_key(k.as_bytes().to_vec()),
            None => r,
        };
        Record {
            timestamp: Some(ts),
            ..r
        }
    }

    const AT: StepAt = StepAt {
        epoch: 3,
        instance: 1,
        step: 7,
    };

    #[test]
    fn a_keys_records_pair_in_order_and_keyless_ones_match_as_a_multiset() {
        let mut d = PortDiff::default();
        let v1 = vec![
            rec(Some("a"), "1", 0),
            rec(Some("a"), "2", 0),
            rec(Some("b"), "x", 0),
            rec(None, "n", 0),
            rec(None, "k", 0),
            rec(Some("c"), "c", 0),
            rec(Some("d"), "d", 0),
        ];
        let v2 = vec![
            rec(Some("a"), "2", 0),
            rec(Some("a"), "9", 0),
            rec(Some("b"), "x", 1),
            rec(Some("b"), "y", 0),
            rec(None, "m", 0),
            rec(Some("d"), "d", 0),
            rec(None, "k", 0),
        ];
        d.add(AT, v1, v2, 100);
        assert_eq!((d.same, d.changed, d.only_v1, d.only_v2), (2, 3, 2, 2));
        let kinds: Vec<(&str, Option<&str>)> = (d.differences.iter())
            .map(|x| (x.kind.name(), x.key.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("only_v1", None),
                ("only_v2", None),
                ("changed", Some("a")),
                ("changed", Some("a")),
                ("changed", Some("b")),
                ("only_v2", Some("b")),
                ("only_v1", Some("c")),
            ]
        );
        let changed_a = &d.differences[2];
        assert_eq!(changed_a.v1.as_ref().unwrap().value, "1");
        assert_eq!(changed_a.v2.as_ref().unwrap().value, "2");
        assert_eq!(
            (changed_a.epoch, changed_a.instance, changed_a.step),
            (3, 1, 7)
        );
        assert_eq!(d.differing(), 7);
        let mut limited = PortDiff::default();
        limited.add(
            AT,
            vec![rec(Some("a"), "1", 0)],
            vec![rec(Some("a"), "2", 0)],
            0,
        );
        assert_eq!((limited.changed, limited.differences.len()), (1, 0));
    }

    #[test]
    fn states_differ_by_key_in_key_order() {
        let kv = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
        let v1 = [kv("a", "1"), kv("b", "2"), kv("d", "4")];
        let v2 = [kv("a", "1"), kv("b", "3"), kv("c", "3")];
        let d = StateDiff::of(&v1, &v2, 10);
        assert_eq!((d.same, d.changed, d.only_v1, d.only_v2), (1, 1, 1, 1));
        let keys: Vec<(&str, &str)> = (d.keys.iter())
            .map(|k| (k.key.as_str(), k.kind.name()))
            .collect();
        assert_eq!(keys, [("b", "changed"), ("c", "only_v2"), ("d", "only_v1")]);
        assert_eq!(shown(&[0xff, 0x01]), "0xff01");
        assert_eq!(shown(b"w\0n"), "w\0n");
    }

    #[test]
    fn row_values_show_as_their_fields_json() {
        let mut row = vec![weir_flat::state::ROW_VALUE];
        weir_flat::row::RowWriter::new(&mut row).f64("a", 1.5);
        let v1 = [(b"k".to_vec(), row)];
        let v2 = [(b"k".to_vec(), br#"{"a":2.0}"#.to_vec())];
        let d = StateDiff::of(&v1, &v2, 10);
        assert_eq!(d.keys[0].v1.as_deref(), Some(r#"{"a":1.5}"#));
        assert_eq!(d.keys[0].v2.as_deref(), Some(r#"{"a":2.0}"#));
        // A malformed row value is shown as its bytes.
        let d = StateDiff::of(&[(b"k".to_vec(), vec![0xff, 9])], &v2, 10);
        assert_eq!(d.keys[0].v1.as_deref(), Some("0xff09"));
    }

    #[test]
    fn a_replay_names_the_first_record_that_differs() {
        let batch = |vals: &[&str]| {
            let mut b = Batch::new();
            for v in vals {
                b.push(Some(b"k"), v.as_bytes(), Some(1));
            }
            b
        };
        let want = [(0, batch(&["a", "b"]))];
        assert_eq!(first_difference(&want, &[(0, batch(&["a", "b"]))]), None);
        let d = first_difference(&want, &[(0, batch(&["a", "c"]))]).unwrap();
        assert!(d.contains("record 1 on output port 0 differs"), "{d}");
        assert!(d.contains("\"b\"") && d.contains("\"c\""), "{d}");
        let d = first_difference(&want, &[(1, batch(&["a", "b"]))]).unwrap();
        assert!(d.contains("output ports [1]"), "{d}");
        let d = first_difference(&want, &[(0, batch(&["a"]))]).unwrap();
        assert!(d.contains("emitted 1 records"), "{d}");
    }
}
