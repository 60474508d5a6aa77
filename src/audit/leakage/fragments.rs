//! The code fragments of an issue's text: fenced, indented and inline code,
//! `>>>` sessions, bare lines and bracket continuations, each normalised to
//! a comparison key (whitespace removed, trailing comment cut, prompts and
//! diff prefixes stripped; trivial lines dropped).

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

// (Also `review::lines::Origin`, where a patched line came from.)
/// Where in the issue text a fragment was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// In a ``` or ~~~ (or Trac `{{{`) block.
    Fenced,
    /// An indented block or a `>>>` session line.
    Indented,
    /// An inline `code` span.
    Inline,
    /// A line with no markup.
    Bare,
}

/// Which text a fragment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    ProblemStatement,
    Hints,
}

/// A normalised code fragment of the issue text.
#[derive(Debug, Clone)]
pub struct IssueLine {
    pub key: String,
    pub origin: Origin,
    pub part: Part,
    /// 1-based line in its part.
    pub line: usize,
}

static INLINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"``?([^`]+?)``?").expect("valid regex"));
static NUMBERED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(-*>\s*)?\d+\s+").expect("valid regex"));
static IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(from\S+import|import)\S*$").expect("valid regex"));

/// Lines that say nothing about a solution once whitespace is gone.
const TRIVIAL: [&str; 30] = [
    "else:",
    "try:",
    "finally:",
    "pass",
    "break",
    "continue",
    "return",
    "returnNone",
    "returnTrue",
    "returnFalse",
    "returnself",
    "returnresult",
    "raise",
    "yield",
    "None",
    "True",
    "False",
    "self",
    "except:",
    "exceptException:",
    "exceptExceptionase:",
    "@property",
    "@classmethod",
    "@staticmethod",
    "def__init__(self):",
    "super().__init__()",
    "else{",
    "}else{",
    "end",
    "...",
];

/// Walks a line as code: calls `code` with each character outside quoted
/// strings (quotes themselves excluded) and returns where a `#` comment
/// outside quotes starts.
fn scan_code(s: &str, mut code: impl FnMut(char)) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match quote {
            Some(q) => {
                if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '#' => return Some(i),
                '\'' | '"' => quote = Some(c),
                _ => code(c),
            },
        }
    }
    None
}

/// Cuts a `#` comment that is outside quotes.
fn cut_comment(s: &str) -> &str {
    &s[..scan_code(s, |_| {}).unwrap_or(s.len())]
}

/// Net open brackets of a line, ignoring quoted text and comments.
pub(super) fn bracket_delta(s: &str) -> i32 {
    let mut depth = 0;
    scan_code(s, |c| match c {
        '(' | '[' | '{' => depth += 1,
        ')' | ']' | '}' => depth -= 1,
        _ => {}
    });
    depth
}

/// The comparison key of a line, or None for a blank, comment-only or
/// trivial line.
pub fn normalise(line: &str) -> Option<String> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with("//") {
        return None;
    }
    let t = cut_comment(t);
    let key: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    if key.chars().count() < 5 || !key.chars().any(char::is_alphanumeric) {
        return None;
    }
    if TRIVIAL.contains(&key.as_str()) || IMPORT.is_match(&key) {
        return None;
    }
    Some(key)
}

/// The code fragments of an issue: problem statement, then hints.
pub fn issue_lines(problem_statement: &str, hints: &str) -> Vec<IssueLine> {
    let mut out = Vec::new();
    collect(problem_statement, Part::ProblemStatement, &mut out);
    collect(hints, Part::Hints, &mut out);
    out
}

fn collect(text: &str, part: Part, out: &mut Vec<IssueLine>) {
    let mut fence: Option<&str> = None;
    let push = move |raw: &str, origin: Origin, line: usize, out: &mut Vec<IssueLine>| {
        let t = raw.trim();
        // IPython/pdb tracebacks number the lines they quote
        // (`--> 351 b = ...`): the number goes.
        let t = NUMBERED.find(t).map_or(t, |m| &t[m.end()..]);
        // Sessions and suggested diffs: keep the code after the prompt or
        // the +/- (both forms are kept for diff-like lines).
        let mut variants = vec![t];
        for p in [">>> ", "... ", "$ "] {
            if let Some(rest) = t.strip_prefix(p) {
                variants.push(rest);
            }
        }
        if let Some(rest) = t.strip_prefix('+').or_else(|| t.strip_prefix('-')) {
            if !rest.starts_with(['+', '-']) {
                variants.push(rest);
            }
        }
        let mut seen: Vec<String> = Vec::new();
        for v in variants {
            if let Some(key) = normalise(v) {
                if !seen.contains(&key) {
                    seen.push(key.clone());
                    out.push(IssueLine {
                        key,
                        origin,
                        part,
                        line,
                    });
                }
            }
        }
    };
    // A statement continued over brackets is also kept joined: (first line,
    // origin, text so far, open brackets).
    let mut open: Option<(usize, Origin, String, i32)> = None;
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let t = raw.trim_start();
        let boundary = t.starts_with("```")
            || t.starts_with("~~~")
            || t.starts_with("{{{")
            || (fence == Some("{{{") && t.starts_with("}}}"));
        if boundary {
            open = None;
        }
        if let Some(f) = fence {
            if t.starts_with(f) || (f == "{{{" && t.starts_with("}}}")) {
                fence = None;
            } else {
                push(raw, Origin::Fenced, no, out);
                join(&mut open, raw, Origin::Fenced, no, out, &push);
            }
            continue;
        }
        if t.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if t.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if t.starts_with("{{{") {
            fence = Some("{{{");
            continue;
        }
        let origin = if raw.starts_with("    ") || raw.starts_with('\t') || t.starts_with(">>> ") {
            Origin::Indented
        } else {
            Origin::Bare
        };
        push(raw, origin, no, out);
        join(&mut open, raw, origin, no, out, &push);
        if origin == Origin::Bare {
            for c in INLINE.captures_iter(raw) {
                push(&c[1], Origin::Inline, no, out);
            }
        }
    }
}

/// Pushes a fragment: (text, origin, line, output).
type Push = dyn Fn(&str, Origin, usize, &mut Vec<IssueLine>);

/// Follows bracket continuations: a line that leaves brackets open starts
/// a logical line, pushed joined once they close.
fn join(
    open: &mut Option<(usize, Origin, String, i32)>,
    raw: &str,
    origin: Origin,
    no: usize,
    out: &mut Vec<IssueLine>,
    push: &Push,
) {
    let t = raw.trim();
    let t = t
        .strip_prefix(">>> ")
        .or_else(|| t.strip_prefix("... "))
        .unwrap_or(t);
    let delta = bracket_delta(t);
    match open.take() {
        Some((first, o, mut text, depth)) => {
            text.push(' ');
            text.push_str(t);
            let depth = depth + delta;
            let lines = no - first + 1;
            if depth <= 0 || lines >= MAX_JOIN {
                if depth <= 0 {
                    push(&text, o, first, out);
                }
            } else {
                *open = Some((first, o, text, depth));
            }
        }
        None if delta > 0 => *open = Some((no, origin, t.to_string(), delta)),
        None => {}
    }
}

/// Logical lines (bracket continuations) are joined up to this many lines.
pub(super) const MAX_JOIN: usize = 15;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(
            normalise("    x = foo(a, b)  # fix"),
            Some("x=foo(a,b)".into())
        );
        assert_eq!(
            normalise("s = '#not a comment'"),
            Some("s='#notacomment'".into())
        );
        for t in [
            "",
            "   # only",
            "else:",
            "return",
            "pass",
            ")",
            "]),",
            "import re",
            "from a.b import c",
        ] {
            assert_eq!(normalise(t), None, "{t:?}");
        }
    }

    #[test]
    fn fragments_of_an_issue() {
        let text = "Title\nUse `foo.bar(x=1)` here.\n```python\n>>> frob(1, 2)\n+    return value.strip()\n```\n    indented_call(arg)\n";
        let lines = issue_lines(text, "");
        let keys: Vec<(&str, Origin)> = lines.iter().map(|l| (l.key.as_str(), l.origin)).collect();
        assert!(keys.contains(&("foo.bar(x=1)", Origin::Inline)), "{keys:?}");
        assert!(keys.contains(&("frob(1,2)", Origin::Fenced)), "{keys:?}");
        assert!(
            keys.contains(&("returnvalue.strip()", Origin::Fenced)),
            "{keys:?}"
        );
        assert!(
            keys.contains(&("indented_call(arg)", Origin::Indented)),
            "{keys:?}"
        );
    }
}
