//! Order oracles: where a job's input defines an order, its visible output
//! keeps it, through crashes and restores too.
//!
//! Weir keeps the order of each channel (one upstream instance to one
//! downstream instance), and a keyed edge sends every record of a key to
//! the same instance ([`instance_of`]); a sink delivers epochs in checkpoint
//! order. So the records of one key, or of one input through one instance,
//! reach a sink in input order, while records of different instances or
//! inputs interleave in any way. Exactly-once output is then a fixed
//! sequence per group ([`check_run`], [`check_grouped`]); at-least-once
//! output may go back to a checkpoint and repeat, but never skips ahead
//! ([`check_replayed`]).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;

/// How many items an error message shows around the first one that is
/// wrong; a shorter sequence is shown whole.
const CONTEXT: usize = 6;

/// `items` for an error message: all of them when they are few, else the
/// ones around index `at`, with `..` for the rest.
pub fn excerpt<T: Debug>(items: &[T], at: usize) -> String {
    if items.len() <= 2 * CONTEXT {
        return format!("{items:?}");
    }
    let from = at.saturating_sub(CONTEXT);
    let to = (at + CONTEXT).min(items.len());
    let shown: Vec<String> = items[from..to].iter().map(|i| format!("{i:?}")).collect();
    let before = if from > 0 { ".., " } else { "" };
    let after = if to < items.len() { ", .." } else { "" };
    format!("[{before}{}{after}]", shown.join(", "))
}

/// Checks that `seq` is exactly `first, first + 1, ..., last`, in this
/// order. The error shows the sequence (around where it goes wrong) and
/// says `out of order` when it holds the right values in another order.
pub fn check_run(seq: &[u64], first: u64, last: u64) -> Result<(), String> {
    let wrong = seq
        .iter()
        .zip(first..=last)
        .position(|(got, want)| *got != want);
    let expected = (last + 1).saturating_sub(first) as usize;
    let at = match wrong {
        Some(at) => at,
        None if seq.len() == expected => return Ok(()),
        None => seq.len().min(expected),
    };
    let mut sorted = seq.to_vec();
    sorted.sort_unstable();
    if sorted.iter().copied().eq(first..=last) {
        Err(format!(
            "{} out of order (its item {} is {}, expected {})",
            excerpt(seq, at),
            at + 1,
            seq[at],
            first + at as u64
        ))
    } else if seq.len() <= 2 * CONTEXT {
        Err(format!("{seq:?}, expected {first}..={last}"))
    } else {
        Err(format!(
            "{} ({} items), expected {first}..={last}; it differs at item {}",
            excerpt(seq, at),
            seq.len(),
            at + 1
        ))
    }
}

/// Checks that `seq` is the run `first..=last` written at least once, as
/// at-least-once delivery through restarts writes it: it starts at
/// `first`, never goes below it, each item is at most one more than the
/// one before it (a restart goes back to a checkpoint and repeats from
/// there, it never skips ahead), and it reaches `last` and nothing beyond.
pub fn check_replayed(seq: &[u64], first: u64, last: u64) -> Result<(), String> {
    let Some(&start) = seq.first() else {
        return Err(format!("nothing, expected {first}..={last}"));
    };
    if start != first {
        return Err(format!(
            "{} starts at {start}, expected {first}",
            excerpt(seq, 0)
        ));
    }
    if let Some(at) = seq.iter().position(|&n| n < first || n > last) {
        return Err(format!(
            "{} holds {}, outside {first}..={last}",
            excerpt(seq, at),
            seq[at]
        ));
    }
    if let Some(at) = seq.windows(2).position(|p| p[1] > p[0] + 1) {
        return Err(format!(
            "{} skips ahead from {} to {} (item {})",
            excerpt(seq, at + 1),
            seq[at],
            seq[at + 1],
            at + 2
        ));
    }
    // From `first` in steps of at most one, so every value up to the
    // largest is there.
    let top = seq.iter().copied().max().unwrap_or(first);
    if top != last {
        return Err(format!(
            "{} ends at {top}, expected to reach {last}",
            excerpt(seq, seq.len() - 1)
        ));
    }
    Ok(())
}

/// Checks that `out` is an interleaving of `inputs`: every line of every
/// input appears in `out` once, each input's lines in that input's order,
/// and `out` holds nothing else. Inputs may share lines. The error names
/// the first line of `out` that no input can account for.
pub fn check_interleaving(out: &[&str], inputs: &[&[&str]]) -> Result<(), String> {
    // Every way the prefix of `out` read so far can be split among the
    // inputs, as the number of lines taken from each.
    let mut frontier: HashSet<Vec<usize>> = HashSet::from([vec![0; inputs.len()]]);
    for (at, line) in out.iter().enumerate() {
        let mut next = HashSet::new();
        for taken in &frontier {
            for (i, input) in inputs.iter().enumerate() {
                if input.get(taken[i]) == Some(line) {
                    let mut t = taken.clone();
                    t[i] += 1;
                    next.insert(t);
                }
            }
        }
        if next.is_empty() {
            let due: Vec<String> = frontier
                .iter()
                .flat_map(|t| inputs.iter().zip(t).filter_map(|(inp, &n)| inp.get(n)))
                .map(|l| format!("{l:?}"))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(format!(
                "line {} of {} ({line:?}) is no input's next line; due: {} (around it: {})",
                at + 1,
                out.len(),
                if due.is_empty() {
                    "nothing, every input is done".to_string()
                } else {
                    due.join(" or ")
                },
                excerpt(out, at)
            ));
        }
        frontier = next;
    }
    let done = frontier
        .iter()
        .any(|t| t.iter().zip(inputs).all(|(&n, input)| n == input.len()));
    if done {
        return Ok(());
    }
    let expected: usize = inputs.iter().map(|i| i.len()).sum();
    Err(format!(
        "{} lines, expected {expected}: input lines are missing at the end",
        out.len()
    ))
}

/// Asserts that the lines of `out` are exactly those of `want`, in the
/// same order; the error ([`check_interleaving`]'s) shows the first line
/// that differs, prefixed with `what`.
pub fn assert_same_order(out: &str, want: &str, what: &str) {
    let out: Vec<&str> = out.lines().collect();
    let want: Vec<&str> = want.lines().collect();
    if let Err(e) = check_interleaving(&out, &[&want]) {
        panic!("{what}: not the input's lines in order: {e}");
    }
}

/// The instance, of `parallelism`, that a record keyed `key` goes to: its
/// key group's owner, as Weir routes keyed records.
pub fn instance_of(key: &[u8], parallelism: u32) -> usize {
    use weir::dataflow::partition::{instance_for, key_group};
    instance_for(key_group(key), parallelism) as usize
}

/// The key a `lines` source gives a line: the line itself.
pub fn line_key(line: &str) -> Vec<u8> {
    line.as_bytes().to_vec()
}

/// The key a `jsonl` source with `key = field` gives a line: the field's
/// string value.
pub fn jsonl_key(field: &str) -> impl Fn(&str) -> Vec<u8> + '_ {
    move |line| {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("output line is not JSON ({e}): {line}"));
        match v[field].as_str() {
            Some(key) => key.as_bytes().to_vec(),
            None => panic!("no string `{field}` in {line}"),
        }
    }
}

/// Checks, for each group of `group` (of a line), that the lines of `out`
/// in that group are an interleaving ([`check_interleaving`]) of the lines
/// of `inputs` in that group; with one input, that they are exactly that
/// input's lines of the group, in its order. The error names the group.
pub fn check_grouped<G: Ord + Debug>(
    out: &[&str],
    inputs: &[&[&str]],
    group: impl Fn(&str) -> G,
) -> Result<(), String> {
    type Parts<'a, G> = BTreeMap<G, (Vec<&'a str>, Vec<Vec<&'a str>>)>;
    let mut parts: Parts<'_, G> = BTreeMap::new();
    let n = inputs.len();
    for &line in out {
        let part = parts
            .entry(group(line))
            .or_insert_with(|| (vec![], vec![vec![]; n]));
        part.0.push(line);
    }
    for (i, input) in inputs.iter().enumerate() {
        for &line in *input {
            let part = parts
                .entry(group(line))
                .or_insert_with(|| (vec![], vec![vec![]; n]));
            part.1[i].push(line);
        }
    }
    for (g, (got, want)) in &parts {
        let want: Vec<&[&str]> = want.iter().map(Vec::as_slice).collect();
        check_interleaving(got, &want).map_err(|e| format!("group {g:?}: {e}"))?;
    }
    Ok(())
}

/// Asserts [`check_grouped`] with the groups of the instance (of
/// `parallelism`) that each line's key (`key` of the line) goes to,
/// prefixing its error with `what`.
pub fn assert_in_order_per_instance(
    out: &str,
    inputs: &[&str],
    parallelism: u32,
    key: impl Fn(&str) -> Vec<u8>,
    what: &str,
) {
    let out: Vec<&str> = out.lines().collect();
    let inputs: Vec<Vec<&str>> = inputs.iter().map(|i| i.lines().collect()).collect();
    let inputs: Vec<&[&str]> = inputs.iter().map(Vec::as_slice).collect();
    let group = |line: &str| instance_of(&key(line), parallelism);
    if let Err(e) = check_grouped(&out, &inputs, group) {
        panic!("{what}: not in input order per instance: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::assert_has;

    #[test]
    fn a_run_in_order_passes_and_every_other_sequence_is_told_apart() {
        check_run(&[1, 2, 3], 1, 3).unwrap();
        check_run(&[], 1, 0).unwrap();
        let e = check_run(&[1, 3, 2], 1, 3).unwrap_err();
        assert_eq!(e, "[1, 3, 2] out of order (its item 2 is 3, expected 2)");
        let e = check_run(&[1, 2, 1, 2, 3], 1, 3).unwrap_err();
        assert_eq!(e, "[1, 2, 1, 2, 3], expected 1..=3");
        let e = check_run(&[1, 2], 1, 3).unwrap_err();
        assert_eq!(e, "[1, 2], expected 1..=3");
        let long: Vec<u64> = (0..20)
            .map(|i| {
                if i == 10 {
                    11
                } else if i == 11 {
                    10
                } else {
                    i
                }
            })
            .collect();
        let e = check_run(&long, 0, 19).unwrap_err();
        assert_eq!(
            e,
            "[.., 4, 5, 6, 7, 8, 9, 11, 10, 12, 13, 14, 15, ..] out of order (its item 11 is 11, expected 10)"
        );
    }

    #[test]
    fn replays_may_go_back_but_never_skip_ahead() {
        check_replayed(&[1, 2, 3], 1, 3).unwrap();
        check_replayed(&[1, 2, 3, 2, 3, 1, 2, 3], 1, 3).unwrap();
        let e = check_replayed(&[1, 3, 2], 1, 3).unwrap_err();
        assert_has(&e, "skips ahead from 1 to 3 (item 2)");
        let e = check_replayed(&[1, 2, 1, 2], 1, 3).unwrap_err();
        assert_has(&e, "ends at 2, expected to reach 3");
        let e = check_replayed(&[2, 3], 1, 3).unwrap_err();
        assert_has(&e, "starts at 2, expected 1");
        let e = check_replayed(&[1, 2, 3, 4], 1, 3).unwrap_err();
        assert_has(&e, "holds 4, outside 1..=3");
        assert!(check_replayed(&[], 1, 3).is_err());
    }

    #[test]
    fn interleavings_keep_each_inputs_order_even_with_shared_lines() {
        let (a, b) = (["x", "y", "x"], ["y", "z"]);
        check_interleaving(&["y", "x", "y", "z", "x"], &[&a, &b]).unwrap();
        check_interleaving(&["x", "y", "y", "x", "z"], &[&a, &b]).unwrap();
        let e = check_interleaving(&["x", "z", "y", "y", "x"], &[&a, &b]).unwrap_err();
        assert_has(&e, "line 2 of 5 (\"z\") is no input's next line");
        let e = check_interleaving(&["x", "y", "y", "z"], &[&a, &b]).unwrap_err();
        assert_has(&e, "4 lines, expected 5");
        let e = check_interleaving(&["x", "y", "x", "y"], &[&a]).unwrap_err();
        assert_has(&e, "every input is done");
    }

    #[test]
    fn groups_are_checked_apart() {
        let input = ["a1", "b1", "a2", "b2"];
        let first_letter = |l: &str| l.as_bytes()[0];
        check_grouped(&["b1", "a1", "b2", "a2"], &[&input], first_letter).unwrap();
        let e = check_grouped(&["a2", "b1", "a1", "b2"], &[&input], first_letter).unwrap_err();
        assert!(e.starts_with("group 97: line 1 of 2 (\"a2\")"), "{e}");
    }
}
