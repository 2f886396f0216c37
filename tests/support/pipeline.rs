//! Inputs and outputs of the golden pipelines: a deterministic generator
//! and its seed, word-count input and its words, and output lines as
//! multisets.

use std::collections::BTreeMap;

/// A small deterministic generator, so tests need no dependencies and can
/// print their seed.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// The seed for randomized tests: `WEIR_TEST_SEED` or a fixed default.
pub fn seed() -> u64 {
    std::env::var("WEIR_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe_f00d)
}

/// The lines of `text` as a multiset.
pub fn multiset(text: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

/// Asserts two multisets of lines are equal, byte for byte; when not, says
/// how many lines each has and shows up to five lines of each difference.
pub fn assert_same_lines(
    got: &BTreeMap<String, usize>,
    want: &BTreeMap<String, usize>,
    what: &str,
) {
    if got != want {
        let missing: Vec<_> = want
            .iter()
            .filter(|(l, n)| got.get(*l) != Some(n))
            .take(5)
            .collect();
        let extra: Vec<_> = got
            .iter()
            .filter(|(l, n)| want.get(*l) != Some(n))
            .take(5)
            .collect();
        panic!(
            "{what}: got {} lines, expected {}; missing or not as often: {missing:?}; unexpected or too often: {extra:?}",
            got.values().sum::<usize>(),
            want.values().sum::<usize>()
        );
    }
}

/// `lines` lines of 1 to 8 words `Word<N>` (N below `vocabulary`), each line
/// ending in ", done." so that the line splits into a few more words.
pub fn wordcount_input(rng: &mut XorShift, vocabulary: u64, lines: usize) -> String {
    let mut text = String::new();
    for _ in 0..lines {
        let n = rng.range(1, 9);
        let words: Vec<String> = (0..n)
            .map(|_| format!("Word{}", rng.range(0, vocabulary)))
            .collect();
        text.push_str(&words.join(" "));
        text.push_str(", done.\n");
    }
    text
}

/// The words `split` makes of `text` (with its default config: runs of
/// alphanumeric characters, lowercased), for text without apostrophes,
/// such as [`wordcount_input`]'s.
pub fn wordcount_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}
