//! Exactly-once checks of running word counts: the output of `word-count`
//! (`{"word": w, "count": n}`) and of `word-count-v2` (`{"w": w, "n": n,
//! "v": 2}`) has one line per input word, and a word seen k times in the
//! input has exactly the lines n = 1, 2, ..., k (in either format). A lost
//! record leaves a word short of its true count, a duplicated one pushes
//! another past it, even when the total number of lines is right. The
//! in-order check also asks for those lines in the order n = 1, 2, ...
//! (each word is counted by one instance, in input order).

use std::collections::BTreeMap;

use serde_json::Value;

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
pub fn true_counts<'a>(words: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for w in words {
        *m.entry(w.to_string()).or_insert(0) += 1;
    }
    m
}

/// Checks that `output` holds, for every word of `want` (its true count),
/// exactly the counts 1..=true count, and no word that is not in `want`;
/// the error lists up to five words that differ.
pub fn check_running_counts(want: &BTreeMap<String, u64>, output: &str) -> Result<(), String> {
    let got = parse_counts(output);
    let mut wrong = Vec::new();
    for (w, &k) in want {
        let mut ns: Vec<u64> = got
            .get(w)
            .map_or_else(Vec::new, |seen| seen.iter().map(|(n, _)| *n).collect());
        ns.sort_unstable();
        if !ns.iter().copied().eq(1..=k) {
            wrong.push(format!("{w}: counts {ns:?}, expected 1..={k}"));
        }
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
        "{} word(s) not counted exactly once ({lines} output lines, {expected} input words): {}",
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

/// Checks [`check_running_counts`] and, beyond it, the order: every
/// word's counts come in `output` (in delivery order) as 1, 2, ..., k. A
/// word goes to one operator instance, which counts it in input order, so
/// an epoch delivered out of order, or a part of one delivered again after
/// later output, shows here even where the set of counts is right.
pub fn check_running_counts_in_order(
    want: &BTreeMap<String, u64>,
    output: &str,
) -> Result<(), String> {
    check_running_counts(want, output)?;
    let wrong: Vec<String> = parse_counts(output)
        .into_iter()
        .filter(|(_, seen)| !seen.iter().map(|(n, _)| *n).eq(1..=seen.len() as u64))
        .map(|(w, seen)| {
            let ns: Vec<u64> = seen.iter().map(|(n, _)| *n).collect();
            format!("{w}: counts in delivery order {ns:?}")
        })
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} word(s) counted out of order: {}",
        wrong.len(),
        wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
    ))
}

/// Asserts [`check_running_counts_in_order`], prefixing its error with
/// `what`.
pub fn assert_running_counts_in_order(want: &BTreeMap<String, u64>, output: &str, what: &str) {
    if let Err(e) = check_running_counts_in_order(want, output) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(err.contains("a: counts [1], expected 1..=2"), "{err}");
        assert!(err.contains("b: counts [1, 2, 3], expected 1..=2"), "{err}");
    }

    /// The same lines in another order: exactly once, but out of order.
    #[test]
    fn counts_out_of_delivery_order_are_reported() {
        let want = true_counts(["a", "b", "a", "a"]);
        let ordered = [line("a", 1), line("b", 1), line("a", 2), line("a", 3)].concat();
        check_running_counts_in_order(&want, &ordered).unwrap();
        let swapped = [line("a", 2), line("b", 1), line("a", 1), line("a", 3)].concat();
        check_running_counts(&want, &swapped).unwrap();
        let err = check_running_counts_in_order(&want, &swapped).unwrap_err();
        assert!(
            err.contains("a: counts in delivery order [2, 1, 3]"),
            "{err}"
        );
        // A loss is reported as such, not as an order.
        let lost = [line("a", 1), line("b", 1), line("a", 3)].concat();
        let err = check_running_counts_in_order(&want, &lost).unwrap_err();
        assert!(err.contains("a: counts [1, 3], expected 1..=3"), "{err}");
    }

    #[test]
    fn a_repeated_count_and_an_unknown_word_are_reported() {
        let want = true_counts(["a", "a"]);
        let out = [line("a", 1), line("a", 1), line("z", 1)].concat();
        let err = check_running_counts(&want, &out).unwrap_err();
        assert!(err.contains("a: counts [1, 1], expected 1..=2"), "{err}");
        assert!(
            err.contains("z: in the output but not in the input"),
            "{err}"
        );
        let err = check_running_counts(&want, "").unwrap_err();
        assert!(err.contains("a: counts [], expected 1..=2"), "{err}");
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
        assert_eq!(
            tally(&want, &exact),
            Tally {
                records: 5,
                ..Tally::default()
            }
        );
        assert!(tally(&want, &exact).is_exact());
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
        assert_eq!(
            tally(&want, &wrong),
            Tally {
                records: 5,
                lost: 1,
                duplicated: 3,
                out_of_order: 1
            }
        );
    }
}
