//! Checks of running word counts against the input: the output of
//! `word-count` (`{"word": w, "count": n}`) and of `word-count-v2`
//! (`{"w": w, "n": n, "v": 2}`) has one line per input word, and a word
//! seen k times in the input has the lines n = 1, 2, ..., k, in this order
//! (in either format). A lost record leaves a word short of its true count,
//! a duplicated one pushes another past it, even when the total number of
//! lines is right; an epoch delivered after a later one, or skipped and
//! made up for later, leaves a word's counts out of order. At-least-once
//! output ([`check_replayed_counts`]) may repeat counts from a checkpoint
//! on, but still never skips ahead.
//!
//! Each word is counted by one instance (`word-count` is keyed by the word)
//! and sinks deliver epochs in checkpoint order, so a word's counts are in
//! order in the visible output however the instances interleave. Plugins
//! are only ever swapped from `word-count` to `word-count-v2`, so a word's
//! lines never go back from format 2 to format 1.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::order::{check_replayed, check_run};

/// Output lines per word: (count, format version 1 or 2), in file order.
pub type Counts = BTreeMap<String, Vec<(u64, u8)>>;

/// The [`Counts`] of word-count output; panics on a line of neither format.
pub fn parse_counts(text: &str) -> Counts {
    let mut m = Counts::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("word-count output line is not JSON ({e}): {line}"));
        let (w, n, version) = match v.get("v") {
            Some(_) => (&v["w"], &v["n"], 2),
            None => (&v["word"], &v["count"], 1),
        };
        let (Some(w), Some(n)) = (w.as_str(), n.as_u64()) else {
            panic!("not a word-count output line: {line}");
        };
        m.entry(w.to_string()).or_default().push((n, version));
    }
    m
}

/// How often each word occurs in `words`.
pub fn true_counts<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for w in words {
        *m.entry(w.as_ref().to_string()).or_insert(0) += 1;
    }
    m
}

/// Checks that `output` holds, for every word of `want` (its true count),
/// exactly the counts 1, 2, ..., true count in file order, never a format-1
/// line after a format-2 line, and no word that is not in `want`; the
/// error lists up to five words that differ.
pub fn check_running_counts(want: &BTreeMap<String, u64>, output: &str) -> Result<(), String> {
    check_words(want, output, "exactly once in order", |w, seen, k| {
        let ns: Vec<u64> = seen.iter().map(|(n, _)| *n).collect();
        let mut wrong = Vec::new();
        if let Err(e) = check_run(&ns, 1, k) {
            wrong.push(format!("{w}: counts {e}"));
        }
        if let Some(at) = seen.windows(2).position(|p| p[0].1 > p[1].1) {
            wrong.push(format!(
                "{w}: a format-1 line (count {}) after a format-2 line (count {})",
                seen[at + 1].0,
                seen[at].0
            ));
        }
        wrong
    })
}

/// Checks that `output` holds what at-least-once delivery through restarts
/// writes: for every word of `want`, its counts in file order start at 1,
/// each is at most one more than the one before it (a restart goes back to
/// a checkpoint and repeats from there, but never skips ahead), and the
/// largest is its true count; no word that is not in `want`.
pub fn check_replayed_counts(want: &BTreeMap<String, u64>, output: &str) -> Result<(), String> {
    check_words(want, output, "at least once in order", |w, seen, k| {
        let ns: Vec<u64> = seen.iter().map(|(n, _)| *n).collect();
        match check_replayed(&ns, 1, k) {
            Ok(()) => vec![],
            Err(e) => vec![format!("{w}: counts {e}")],
        }
    })
}

/// Runs `check` (word, its lines, its true count; what is wrong) over
/// every word of `want`, and reports words of `output` not in `want`.
fn check_words(
    want: &BTreeMap<String, u64>,
    output: &str,
    how: &str,
    check: impl Fn(&str, &[(u64, u8)], u64) -> Vec<String>,
) -> Result<(), String> {
    let got = parse_counts(output);
    let mut wrong = Vec::new();
    for (w, &k) in want {
        let seen = got.get(w).map_or(&[][..], Vec::as_slice);
        wrong.extend(check(w, seen, k));
    }
    for w in got.keys().filter(|w| !want.contains_key(*w)) {
        wrong.push(format!("{w}: in the output but not in the input"));
    }
    if wrong.is_empty() {
        return Ok(());
    }
    let lines: usize = got.values().map(Vec::len).sum();
    let expected: u64 = want.values().sum();
    Err(format!(
        "{} problem(s) with words not counted {how} ({lines} output lines, {expected} input words): {}",
        wrong.len(),
        wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
    ))
}

/// Asserts [`check_running_counts`], prefixing its error with `what`.
pub fn assert_running_counts(want: &BTreeMap<String, u64>, output: &str, what: &str) {
    if let Err(e) = check_running_counts(want, output) {
        panic!("{what}: {e}");
    }
}

/// Asserts [`check_replayed_counts`], prefixing its error with `what`.
pub fn assert_replayed_counts(want: &BTreeMap<String, u64>, output: &str, what: &str) {
    if let Err(e) = check_replayed_counts(want, output) {
        panic!("{what}: {e}");
    }
}

/// What a soak run's output holds against the input: each word's running
/// counts 1..=k, in output order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Output lines expected: the input's words.
    pub records: u64,
    /// Counts of the input that are not in the output.
    pub lost: u64,
    /// Output lines that repeat a count seen before for their word, or
    /// count past the word's true count, or name a word not in the input.
    pub duplicated: u64,
    /// Output lines, not duplicates, whose count is below one seen
    /// before for their word.
    pub out_of_order: u64,
}

impl Tally {
    /// Nothing lost, duplicated or out of order.
    pub fn is_exact(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.out_of_order == 0
    }
}

/// Tallies `output` (word-count lines in delivery order) against `want`
/// (each word's true count).
pub fn tally(want: &BTreeMap<String, u64>, output: &str) -> Tally {
    let got = parse_counts(output);
    let mut t = Tally {
        records: want.values().sum(),
        ..Tally::default()
    };
    for (word, seen) in &got {
        let k = want.get(word).copied().unwrap_or(0);
        let mut present = std::collections::BTreeSet::new();
        let mut highest = 0;
        for &(n, _) in seen {
            if n == 0 || n > k || !present.insert(n) {
                t.duplicated += 1;
            } else if n < highest {
                t.out_of_order += 1;
            }
            highest = highest.max(n);
        }
    }
    for (word, &k) in want {
        let present = got.get(word).map_or(0, |seen| {
            let distinct: std::collections::BTreeSet<u64> = seen
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| (1..=k).contains(n))
                .collect();
            distinct.len() as u64
        });
        t.lost += k - present;
    }
    t
}

/// Checks the two PostgreSQL tables of a word count (`totals (word, count)`
/// upserted, `events (id, word, count)` appended), read with `psql`: the
/// totals are `want`, and the events hold every word's running counts
/// exactly once, each word's in insertion order.
pub fn assert_count_tables(want: &BTreeMap<String, u64>, psql: impl Fn(&str) -> String) {
    let totals = psql("SELECT word || ' ' || count FROM totals ORDER BY word");
    let want_totals: Vec<String> = want.iter().map(|(w, n)| format!("{w} {n}")).collect();
    assert_eq!(
        totals.lines().collect::<Vec<_>>(),
        want_totals,
        "the totals table"
    );
    let events =
        psql("SELECT json_build_object('word', word, 'count', count) FROM events ORDER BY id");
    assert_running_counts(want, &events, "the events table");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{assert_has, assert_lacks};

    fn line(w: &str, n: u64) -> String {
        format!("{{\"word\":\"{w}\",\"count\":{n}}}\n")
    }

    #[test]
    fn exact_running_counts_in_either_format_pass() {
        let want = true_counts(["a", "b", "a"]);
        let out = format!(
            "{}{}{{\"w\":\"a\",\"n\":2,\"v\":2}}\n",
            line("a", 1),
            line("b", 1)
        );
        check_running_counts(&want, &out).unwrap();
    }

    /// A lost record of one word and a duplicated record of another keep the
    /// total, and each word's counts still run 1..=n: only the true counts
    /// show both.
    #[test]
    fn a_loss_and_a_duplicate_that_cancel_out_are_reported() {
        let want = true_counts(["a", "a", "b", "b"]);
        let out = [line("a", 1), line("b", 1), line("b", 2), line("b", 3)].concat();
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1], expected 1..=2");
        assert_has(&err, "b: counts [1, 2, 3], expected 1..=2");
    }

    #[test]
    fn a_repeated_count_and_an_unknown_word_are_reported() {
        let want = true_counts(["a", "a"]);
        let out = [line("a", 1), line("a", 1), line("z", 1)].concat();
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1, 1], expected 1..=2");
        assert_has(&err, "z: in the output but not in the input");
        let err = check_running_counts(&want, "").unwrap_err();
        assert_has(&err, "a: counts [], expected 1..=2");
    }

    fn v2(w: &str, n: u64) -> String {
        format!("{{\"w\":\"{w}\",\"n\":{n},\"v\":2}}\n")
    }

    /// The counts of `a` in `out`, sorted, are exactly 1..=k: a check that
    /// sorts them first (and so ignores order) would pass `out`.
    fn sorted_counts_are_complete(out: &str, k: u64) {
        let mut ns: Vec<u64> = parse_counts(out)["a"].iter().map(|(n, _)| *n).collect();
        ns.sort_unstable();
        assert!(ns.into_iter().eq(1..=k));
    }

    #[test]
    fn a_swapped_pair_is_out_of_order() {
        let want = true_counts(["a", "a", "b"]);
        let out = [line("a", 2), line("b", 1), line("a", 1)].concat();
        sorted_counts_are_complete(&out, 2);
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(
            &err,
            "a: counts [2, 1] out of order (its item 1 is 2, expected 1)",
        );
        assert_lacks(&err, "b:");
    }

    /// A replay that skips a count and delivers it later (an epoch
    /// delivered after the one that follows it) keeps the set of counts.
    #[test]
    fn a_skipped_count_delivered_later_is_out_of_order() {
        let want = true_counts(["a"; 3]);
        let out = [line("a", 1), line("a", 3), line("a", 2)].concat();
        sorted_counts_are_complete(&out, 3);
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1, 3, 2] out of order");

        let want = true_counts(["a"; 7]);
        let counts = [1, 2, 5, 6, 3, 4, 7];
        let out: String = counts.iter().map(|&n| line("a", n)).collect();
        sorted_counts_are_complete(&out, 7);
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(
            &err,
            "a: counts [1, 2, 5, 6, 3, 4, 7] out of order (its item 3 is 5, expected 3)",
        );
    }

    /// A replay that repeats counts already delivered has too many lines,
    /// in order or not.
    #[test]
    fn a_repeated_run_is_a_duplicate() {
        let want = true_counts(["a"; 3]);
        let counts = [1, 2, 1, 2, 3];
        let out: String = counts.iter().map(|&n| line("a", n)).collect();
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1, 2, 1, 2, 3], expected 1..=3");
    }

    #[test]
    fn counts_continue_across_formats_but_never_go_back_to_format_1() {
        let want = true_counts(["a"; 3]);
        check_running_counts(&want, &[line("a", 1), v2("a", 2), v2("a", 3)].concat()).unwrap();
        let out = [line("a", 1), v2("a", 2), line("a", 3)].concat();
        let err = check_running_counts(&want, &out).unwrap_err();
        assert_has(
            &err,
            "a: a format-1 line (count 3) after a format-2 line (count 2)",
        );
    }

    #[test]
    fn replayed_counts_may_repeat_but_not_skip_or_fall_short() {
        let want = true_counts(["a", "a", "a", "b"]);
        let counts = [
            ("a", 1),
            ("a", 2),
            ("b", 1),
            ("a", 1),
            ("a", 2),
            ("a", 3),
            ("b", 1),
        ];
        let out: String = counts.iter().map(|&(w, n)| line(w, n)).collect();
        check_replayed_counts(&want, &out).unwrap();
        let out = [line("a", 1), line("a", 3), line("a", 2), line("b", 1)].concat();
        let err = check_replayed_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1, 3, 2] skips ahead from 1 to 3");
        let out = [line("a", 1), line("a", 2), line("a", 1), line("z", 1)].concat();
        let err = check_replayed_counts(&want, &out).unwrap_err();
        assert_has(&err, "a: counts [1, 2, 1] ends at 2, expected to reach 3");
        assert_has(&err, "b: counts nothing, expected 1..=1");
        assert_has(&err, "z: in the output but not in the input");
    }

    #[test]
    fn a_tally_counts_losses_duplicates_and_reorders() {
        let want = true_counts(["a", "a", "a", "b", "b"]);
        let exact = [
            line("a", 1),
            line("b", 1),
            line("a", 2),
            line("b", 2),
            line("a", 3),
        ]
        .concat();
        let t = tally(&want, &exact);
        assert_eq!(
            t,
            Tally {
                records: 5,
                ..Tally::default()
            }
        );
        assert!(t.is_exact());
        // a: 2 before 1 (one out of order) and 2 again (a duplicate), 3
        // lost; b: 3 is past its count (a duplicate); z is no input word.
        let wrong = [
            line("a", 2),
            line("a", 1),
            line("a", 2),
            line("b", 1),
            line("b", 2),
            line("b", 3),
            line("z", 1),
        ]
        .concat();
        let t = tally(&want, &wrong);
        assert_eq!(
            t,
            Tally {
                records: 5,
                lost: 1,
                duplicated: 3,
                out_of_order: 1
            }
        );
        assert!(!t.is_exact());
    }
}
