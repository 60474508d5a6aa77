//! Small lexical helpers shared by the checks: the code part of Python-like
//! lines (string contents and comments blanked), tracked across a hunk so
//! that docstrings are not read as code.

use super::diff::{FileDiff, Kind};

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    /// Inside a string opened by `quote`, triple-quoted or not.
    Str {
        quote: char,
        triple: bool,
    },
}

/// The code part of `line` given the state at its start: string contents
/// removed (quotes kept), comment cut. Returns the state at the line's end.
fn code_of(line: &str, mut st: State) -> (String, State) {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match st {
            State::Code => {
                if c == '#' {
                    break;
                }
                if c == '\'' || c == '"' {
                    let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                    out.push(c);
                    st = State::Str { quote: c, triple };
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                out.push(c);
            }
            State::Str { quote, triple } => {
                if c == '\\' {
                    i += 2;
                    continue;
                }
                if c == quote {
                    if !triple {
                        out.push(c);
                        st = State::Code;
                    } else if chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c) {
                        out.push(c);
                        st = State::Code;
                        i += 3;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
    // A one-line string does not continue on the next line.
    if let State::Str { triple: false, .. } = st {
        out.push('"');
        st = State::Code;
    }
    (out, st)
}

/// The string state at the start of each line of `file` (removed lines
/// get the state of the line after them). A hunk may start inside a
/// docstring; the first triple quote of a hunk is read as closing one when
/// it stands alone after a line that does not end with `:`, `(`, `[`, `,`
/// or `=`, or ends a line of prose (`... text."""`).
fn line_states(file: &FileDiff) -> Vec<State> {
    let mut out = vec![State::Code; file.lines.len()];
    let mut st = State::Code;
    let mut hunk = usize::MAX;
    let mut seen_triple = false;
    let mut prev: Option<&str> = None;
    for (i, l) in file.lines.iter().enumerate() {
        if l.hunk != hunk {
            hunk = l.hunk;
            st = State::Code;
            seen_triple = false;
            prev = None;
        }
        if l.kind == Kind::Remove {
            out[i] = st;
            continue;
        }
        let t = l.text.trim();
        let triple = if t.contains("\"\"\"") {
            Some('"')
        } else if t.contains("'''") {
            Some('\'')
        } else {
            None
        };
        if let (Some(q), State::Code, false) = (triple, st, seen_triple) {
            let delim: String = std::iter::repeat_n(q, 3).collect();
            // A lone quote after `:` opens a docstring, after `(`, `[`, `,` or
            // `=` an argument or a value (`testdir.makepyfile(\n"""`).
            let lone = t == delim
                && prev.is_some_and(|p| !p.trim_end().ends_with([':', '(', '[', ',', '=']));
            let closes_prose =
                t.matches(delim.as_str()).count() == 1 && t.ends_with(delim.as_str()) && {
                    let before = t[..t.len() - 3].trim_end();
                    before.contains(' ')
                        && before
                            .chars()
                            .last()
                            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | ')' | '`'))
                        && !before.contains('=')
                };
            if lone || closes_prose {
                st = State::Str {
                    quote: q,
                    triple: true,
                };
            }
        }
        if triple.is_some() {
            seen_triple = true;
        }
        out[i] = st;
        st = code_of(&l.text, st).1;
        if !t.is_empty() {
            prev = Some(l.text.as_str());
        }
    }
    out
}

/// For each added line of `file` (by index into `file.lines`), its code
/// part (see [`line_states`] for how docstrings are followed).
pub(crate) fn added_code(file: &FileDiff) -> Vec<(usize, String)> {
    let states = line_states(file);
    file.lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.kind == Kind::Add)
        .map(|(i, l)| (i, code_of(&l.text, states[i]).0))
        .collect()
}

/// For each line of `file` (by index into `file.lines`), whether it is
/// prose: it starts inside a triple-quoted string, or opens one (a
/// docstring's first line). Removed lines are never prose.
///
/// Doctest lines (`>>> `, `... `) and the output lines after them up to a
/// blank line are prose too: they live in docstrings even when the hunk
/// shows no quote.
pub(crate) fn prose_lines(file: &FileDiff) -> Vec<bool> {
    let states = line_states(file);
    let mut in_doctest = false;
    let mut hunk = usize::MAX;
    file.lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if l.hunk != hunk {
                hunk = l.hunk;
                in_doctest = false;
            }
            if l.kind == Kind::Remove {
                return false;
            }
            let trimmed = l.text.trim_start();
            if trimmed.starts_with(">>> ") || trimmed == ">>>" {
                in_doctest = true;
            } else if trimmed.is_empty() {
                in_doctest = false;
            }
            let t = trimmed.trim_start_matches(['r', 'b', 'u', 'f', 'R', 'B', 'U', 'F']);
            let opens = t.starts_with("\"\"\"") || t.starts_with("'''");
            in_doctest || matches!(states[i], State::Str { triple: true, .. }) || opens
        })
        .collect()
}

/// Whether a path names Python source.
pub(crate) fn is_python(path: &str) -> bool {
    path.ends_with(".py") || path.ends_with(".pyi") || path.ends_with(".pyx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_comments_are_blanked() {
        let (c, st) = code_of(
            r##"x = "@pytest.mark.skip" # pytest.skip("#")"##,
            State::Code,
        );
        assert_eq!(c, r#"x = "" "#);
        assert!(st == State::Code);
        let (c, st) = code_of(r#"    """Use @pytest.mark.skip"#, State::Code);
        assert_eq!(c, r#"    ""#);
        assert!(st != State::Code);
        let (c, st) = code_of(r#"    here.""" ; pytest.skip("x")"#, st);
        assert_eq!(c, r#"" ; pytest.skip("")"#);
        assert!(st == State::Code);
    }

    #[test]
    fn hunk_starting_inside_a_docstring() {
        use crate::audit::diff::read;
        // The hunk opens in a docstring whose closing quotes stand alone.
        let p = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,5 @@ def f():\n     the method.\n     \"\"\"\n+    with atomic():\n+        pytest.skip('x')\n     data = 1\n";
        let f = &read(p)[0];
        let prose = prose_lines(f);
        let code = added_code(f);
        // The closing quotes belong to the docstring; the code after does not.
        assert_eq!(prose, vec![false, true, false, false, false]);
        assert_eq!(code[1].1, "        pytest.skip('')");
        // Doctest lines are prose.
        let p = "--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,3 @@\n     Example::\n+    >>> f(1)\n+    2\n";
        let f = &read(p)[0];
        assert_eq!(prose_lines(f), vec![false, true, true]);
    }
}
