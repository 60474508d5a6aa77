//! Small lexical helpers shared by the checks: the code part of Python-like
//! lines (string contents and comments blanked), tracked across a hunk so
//! that docstrings are not read as code.

use super::diff::{FileDiff, Kind};

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    /// Inside a string opened by `quote`, triple-quoted or not.
    Str { quote: char, triple: bool },
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

/// For each added line of `file` (by index into `file.lines`), its code
/// part; docstrings are followed through the context lines of each hunk
/// (a hunk is assumed to start outside a string).
pub(crate) fn added_code(file: &FileDiff) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut st = State::Code;
    let mut hunk = usize::MAX;
    for (i, l) in file.lines.iter().enumerate() {
        if l.hunk != hunk {
            hunk = l.hunk;
            st = State::Code;
        }
        if l.kind == Kind::Remove {
            continue;
        }
        let (code, next) = code_of(&l.text, st);
        st = next;
        if l.kind == Kind::Add {
            out.push((i, code));
        }
    }
    out
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
        let (c, st) = code_of(r#"x = "@pytest.mark.skip" # pytest.skip("#")"#, State::Code);
        assert_eq!(c, r#"x = "" "#);
        assert!(st == State::Code);
        let (c, st) = code_of(r#"    """Use @pytest.mark.skip"#, State::Code);
        assert_eq!(c, r#"    ""#);
        assert!(st != State::Code);
        let (c, st) = code_of(r#"    here.""" ; pytest.skip("x")"#, st);
        assert_eq!(c, r#"" ; pytest.skip("")"#);
        assert!(st == State::Code);
    }
}
