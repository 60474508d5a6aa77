//! Python `str` semantics the reference parsers rely on.
//!
//! Python's argument-less `split()`/`strip()` treat U+001C..U+001F as
//! whitespace, Rust's `char::is_whitespace` does not; every other whitespace
//! code point is the same in both (checked against CPython 3.11's
//! `str.isspace` over all of Unicode). Ids must split exactly where the
//! reference split them, so the parsers use these helpers, never
//! `split_whitespace`/`trim`.

use std::sync::LazyLock;

use regex::Regex;

/// `str.isspace()` for one character (also what `\s` matches in `re`).
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The character class of Python's `\s`, for use inside Rust regexes.
pub(crate) const WS: &str = r"[\s\x1C-\x1F]";
/// The character class of Python's `\S`.
pub(crate) const NON_WS: &str = r"[^\s\x1C-\x1F]";

/// The character class of Python's `\w` for `str` patterns: exactly the
/// letters, numbers and `_` (checked against CPython 3.11 over all of
/// Unicode). Rust's `\w` also takes marks and connector punctuation.
pub(crate) const WORD: &str = r"[\p{L}\p{N}_]";

/// One character of Python's `\w` (what `\b` looks at).
pub(crate) fn is_word(c: char) -> bool {
    // `char::is_alphanumeric` would take marks with Other_Alphabetic too.
    static ONE_WORD: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("^{WORD}$")).expect("valid regex"));
    c.is_ascii_alphanumeric()
        || c == '_'
        || (!c.is_ascii() && ONE_WORD.is_match(c.encode_utf8(&mut [0; 4])))
}

/// `s.split()`: runs of whitespace separate, empty tokens are dropped.
pub(crate) fn split(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_space).filter(|t| !t.is_empty())
}

/// `s.strip()`.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// `s.lstrip()`.
pub(crate) fn lstrip(s: &str) -> &str {
    s.trim_start_matches(is_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_separators_are_python_whitespace() {
        // "\x1f" splits in Python ("a\x1fb".split() == ["a", "b"]) but not in
        // Rust's split_whitespace.
        assert_eq!(
            split("PASSED\x1fa  b\t").collect::<Vec<_>>(),
            ["PASSED", "a", "b"]
        );
        assert_eq!(strip("\x1c x \u{3000}"), "x");
        assert_eq!(lstrip("\x1d ok "), "ok ");
        // NUL and DEL are not whitespace in Python either.
        assert_eq!(split("a\0b\x7fc").collect::<Vec<_>>(), ["a\0b\x7fc"]);
    }

    #[test]
    fn word_characters_are_pythons() {
        for c in ['a', 'Z', '0', '_', 'é', '²', 'Ⅻ', '一'] {
            assert!(is_word(c), "{c:?}");
        }
        // U+0345 is Alphabetic in Rust but not `\w` in Python; nor are
        // marks and connector punctuation other than `_`.
        for c in ['-', ' ', '.', '\u{345}', '\u{301}', '\u{203f}'] {
            assert!(!is_word(c), "{c:?}");
        }
    }
}
