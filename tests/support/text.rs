//! Assertions on text (what a command printed, a file): each failure shows
//! what was looked for and the whole text.

/// Asserts that `text` contains `needle`.
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} is not in:\n{text}");
}

/// Asserts that `text` contains every one of `needles`.
#[track_caller]
pub fn assert_has_all(text: &str, needles: &[&str]) {
    for needle in needles {
        assert_has(text, needle);
    }
}

/// Asserts that `text` does not contain `needle`.
#[track_caller]
pub fn assert_lacks(text: &str, needle: &str) {
    assert!(!text.contains(needle), "{needle:?} is in:\n{text}");
}
