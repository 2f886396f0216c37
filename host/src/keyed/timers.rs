//! [`Timers`]: the host-owned timers of one operator instance, and its
//! watermark, with change tracking for incremental checkpoints.
//!
//! A timer is `(domain, time, key)`: an event-time timer fires once the
//! instance's watermark reaches `time`, a processing-time timer once the
//! host's clock does. Timers of one domain fire in `(time, key)` order.
//!
//! Invariants:
//! - A timer is registered at most once: registering it again does nothing.
//! - `changes` holds, per encoded timer, its change since the last
//!   [`Timers::take_changes`]: `Added` if it was not in the last checkpoint
//!   and is now, `Removed` if it was and is not. A timer added and removed
//!   between two checkpoints leaves no change.
//! - In a checkpoint, a timer is the entry `[domain] ++ time ++ key` with
//!   an empty value (time as 8 big-endian bytes with the sign bit flipped,
//!   so entries sort by time); the watermark is the entry `[0xFF]` with the
//!   time as 8 little-endian bytes. See `docs/checkpoints.md`.

use std::collections::{BTreeSet, HashMap};

/// The clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Domain {
    /// The instance's watermark.
    EventTime,
    /// The host's wall clock, milliseconds since the Unix epoch.
    ProcessingTime,
}

impl Domain {
    fn tag(self) -> u8 {
        match self {
            Domain::EventTime => 0,
            Domain::ProcessingTime => 1,
        }
    }

    /// `event-time` or `processing-time`, as in the WIT contract.
    pub fn name(self) -> &'static str {
        match self {
            Domain::EventTime => "event-time",
            Domain::ProcessingTime => "processing-time",
        }
    }
}

/// One pending timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    /// Its clock.
    pub domain: Domain,
    /// When it fires, milliseconds since the Unix epoch.
    pub time: i64,
    /// The key it was registered for.
    pub key: Vec<u8>,
}

/// The checkpoint entry key of the watermark.
const WATERMARK_ENTRY: [u8; 1] = [0xFF];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Added,
    Removed,
}

/// Timers of one instance, ordered by time per domain.
///
/// ```
/// use weir::keyed::timers::{Domain, Timers};
/// let mut t = Timers::default();
/// assert!(t.register(Domain::EventTime, 20, b"b"));
/// assert!(t.register(Domain::EventTime, 10, b"a"));
/// assert!(!t.register(Domain::EventTime, 10, b"a"), "deduplicated");
/// let due = t.pop_due(Domain::EventTime, 15, usize::MAX);
/// assert_eq!(due, vec![(10, b"a".to_vec())]);
/// assert_eq!(t.len(Domain::EventTime), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Timers {
    event: BTreeSet<(i64, Vec<u8>)>,
    processing: BTreeSet<(i64, Vec<u8>)>,
    changes: HashMap<Vec<u8>, Change>,
    watermark: Option<i64>,
    watermark_changed: bool,
    /// Sum of [`Timers::cost`] over pending timers.
    bytes: usize,
}

/// The checkpoint entry key of a timer.
fn encode(domain: Domain, time: i64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + key.len());
    out.push(domain.tag());
    out.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// What a checkpoint entry holds: a timer or the watermark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A pending timer.
    Timer(Timer),
    /// The instance's watermark.
    Watermark(i64),
}

/// Decodes one checkpoint entry written by [`Timers::take_changes`].
///
/// ```
/// use weir::keyed::timers::{decode, Domain, Entry, Timers};
/// let mut t = Timers::default();
/// t.register(Domain::ProcessingTime, -5, b"k");
/// let (key, value) = t.take_changes().pop().unwrap();
/// let Ok(Entry::Timer(timer)) = decode(&key, &value.unwrap()) else { panic!() };
/// assert_eq!((timer.domain, timer.time, timer.key), (Domain::ProcessingTime, -5, b"k".to_vec()));
/// ```
pub fn decode(key: &[u8], value: &[u8]) -> Result<Entry, String> {
    if key == WATERMARK_ENTRY {
        let bytes: [u8; 8] = value
            .try_into()
            .map_err(|_| format!("the watermark entry holds {} bytes, not 8", value.len()))?;
        return Ok(Entry::Watermark(i64::from_le_bytes(bytes)));
    }
    let domain = match key.first() {
        Some(0) => Domain::EventTime,
        Some(1) => Domain::ProcessingTime,
        other => return Err(format!("unknown timer domain tag {other:?}")),
    };
    let time: [u8; 8] = key
        .get(1..9)
        .and_then(|t| t.try_into().ok())
        .ok_or_else(|| format!("a timer entry of {} bytes is too short", key.len()))?;
    Ok(Entry::Timer(Timer {
        domain,
        time: (u64::from_be_bytes(time) ^ (1 << 63)) as i64,
        key: key[9..].to_vec(),
    }))
}

impl Timers {
    /// Timers and watermark as restored from checkpoint entries, with no
    /// change pending.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<Self, String> {
        let mut t = Timers::default();
        for (key, value) in entries {
            match decode(key, value)? {
                Entry::Watermark(w) => t.watermark = Some(w),
                Entry::Timer(timer) => {
                    t.bytes += Self::cost(&timer.key);
                    t.set(timer.domain).insert((timer.time, timer.key));
                }
            }
        }
        Ok(t)
    }

    fn set(&mut self, domain: Domain) -> &mut BTreeSet<(i64, Vec<u8>)> {
        match domain {
            Domain::EventTime => &mut self.event,
            Domain::ProcessingTime => &mut self.processing,
        }
    }

    fn get(&self, domain: Domain) -> &BTreeSet<(i64, Vec<u8>)> {
        match domain {
            Domain::EventTime => &self.event,
            Domain::ProcessingTime => &self.processing,
        }
    }

    fn changed(&mut self, domain: Domain, time: i64, key: &[u8], now: Change) {
        let entry = encode(domain, time, key);
        match self.changes.get(&entry) {
            // Back to what the last checkpoint holds.
            Some(before) if *before != now => {
                self.changes.remove(&entry);
            }
            _ => {
                self.changes.insert(entry, now);
            }
        }
    }

    /// Bytes a timer for `key` counts towards the state size limit.
    pub fn cost(key: &[u8]) -> usize {
        key.len() + 16
    }

    /// Bytes of all pending timers (see [`cost`](Self::cost)).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Registers a timer; `false` if it was registered already.
    pub fn register(&mut self, domain: Domain, time: i64, key: &[u8]) -> bool {
        if self.get(domain).contains(&(time, key.to_vec())) {
            return false;
        }
        self.bytes += Self::cost(key);
        self.set(domain).insert((time, key.to_vec()));
        self.changed(domain, time, key, Change::Added);
        true
    }

    /// Deletes a timer; `false` if there was none.
    pub fn delete(&mut self, domain: Domain, time: i64, key: &[u8]) -> bool {
        if !self.set(domain).remove(&(time, key.to_vec())) {
            return false;
        }
        self.bytes -= Self::cost(key);
        self.changed(domain, time, key, Change::Removed);
        true
    }

    /// Time of the earliest timer of `domain`.
    pub fn next(&self, domain: Domain) -> Option<i64> {
        self.get(domain).first().map(|(t, _)| *t)
    }

    /// Removes and returns, in `(time, key)` order, at most `max` timers of
    /// `domain` due at `upto` (time at or before it).
    pub fn pop_due(&mut self, domain: Domain, upto: i64, max: usize) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.set(domain).first() {
                Some((t, _)) if *t <= upto => {}
                _ => break,
            }
            let (time, key) = self.set(domain).pop_first().expect("just seen");
            self.bytes -= Self::cost(&key);
            self.changed(domain, time, &key, Change::Removed);
            out.push((time, key));
        }
        out
    }

    /// Number of pending timers of `domain`.
    pub fn len(&self, domain: Domain) -> usize {
        self.get(domain).len()
    }

    /// Whether no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.event.is_empty() && self.processing.is_empty()
    }

    /// Pending timers of `domain`, in firing order.
    pub fn iter(&self, domain: Domain) -> impl Iterator<Item = (i64, &[u8])> {
        self.get(domain).iter().map(|(t, k)| (*t, k.as_slice()))
    }

    /// The instance's watermark, as last set (or restored).
    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    /// Sets the instance's watermark, kept in the next checkpoint.
    pub fn set_watermark(&mut self, watermark: i64) {
        if self.watermark != Some(watermark) {
            self.watermark = Some(watermark);
            self.watermark_changed = true;
        }
    }

    /// The entries changed since the last call (`None` = deleted), sorted;
    /// clears the changes.
    pub fn take_changes(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out: Vec<_> = self
            .changes
            .drain()
            .map(|(k, c)| (k, (c == Change::Added).then(Vec::new)))
            .collect();
        if std::mem::take(&mut self.watermark_changed)
            && let Some(w) = self.watermark
        {
            out.push((WATERMARK_ENTRY.to_vec(), Some(w.to_le_bytes().to_vec())));
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies changes to a model of the stored entries.
    fn apply(stored: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>, t: &mut Timers) {
        for (k, v) in t.take_changes() {
            match v {
                Some(v) => {
                    stored.insert(k, v);
                }
                None => {
                    assert!(stored.remove(&k).is_some(), "a delete of a stored timer");
                }
            }
        }
    }

    #[test]
    fn timers_fire_in_time_then_key_order_per_domain() {
        let mut t = Timers::default();
        t.register(Domain::EventTime, 30, b"a");
        t.register(Domain::EventTime, 10, b"b");
        t.register(Domain::EventTime, 10, b"a");
        t.register(Domain::ProcessingTime, 5, b"p");
        assert_eq!(
            t.pop_due(Domain::EventTime, 30, 2),
            vec![(10, b"a".to_vec()), (10, b"b".to_vec())]
        );
        assert_eq!(t.next(Domain::EventTime), Some(30));
        assert_eq!(t.pop_due(Domain::EventTime, 29, 10), vec![]);
        assert_eq!(t.len(Domain::ProcessingTime), 1, "other domain untouched");
    }

    #[test]
    fn deleting_a_timer_keeps_it_from_firing() {
        let mut t = Timers::default();
        t.register(Domain::EventTime, 10, b"a");
        assert!(t.delete(Domain::EventTime, 10, b"a"));
        assert!(!t.delete(Domain::EventTime, 10, b"a"));
        assert!(t.pop_due(Domain::EventTime, i64::MAX, 10).is_empty());
    }

    #[test]
    fn changes_round_trip_through_checkpoint_entries() {
        let mut stored = std::collections::BTreeMap::new();
        let mut t = Timers::default();
        t.register(Domain::EventTime, i64::MIN, b"min");
        t.register(Domain::EventTime, -1, b"neg");
        t.register(Domain::EventTime, 7, b"x");
        t.register(Domain::ProcessingTime, 9, b"");
        t.set_watermark(3);
        apply(&mut stored, &mut t);
        // Added and deleted between two checkpoints: no change; the two
        // fired timers: deletes of stored entries.
        t.register(Domain::EventTime, 8, b"y");
        assert_eq!(t.pop_due(Domain::EventTime, 0, 10).len(), 2);
        t.delete(Domain::EventTime, 8, b"y");
        let changes = t.take_changes();
        assert_eq!(changes.len(), 2);
        assert!(changes.iter().all(|(_, v)| v.is_none()));
        for (k, _) in changes {
            stored.remove(&k);
        }
        let restored =
            Timers::from_entries(stored.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))).unwrap();
        assert_eq!(restored.watermark(), Some(3));
        let event: Vec<_> = restored.iter(Domain::EventTime).collect();
        assert_eq!(event, vec![(7, &b"x"[..])]);
        assert_eq!(restored.len(Domain::ProcessingTime), 1);
        // Entries sort by domain, then time.
        let keys: Vec<_> = stored.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn a_bad_entry_is_an_error_not_a_panic() {
        assert!(decode(&[7], &[]).is_err());
        assert!(decode(&[0, 1], &[]).is_err());
        assert!(decode(&WATERMARK_ENTRY, &[1, 2]).is_err());
    }
}
