//! Python's rule: one added assertion of a FAIL_TO_PASS test, its expected
//! value changed (a literal), its sense flipped (`assertTrue` ↔
//! `assertFalse`), or negated (`assert X` → `assert not (X)`).
//!
//! Only single-line statements are touched: the line is scanned as Python
//! tokens (strings, brackets, comments) and must be complete on its own.

/// What kind of change a rule made, best first: a changed expected value is
/// ImpossibleBench's one-off; the others are used when a test has no literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    ExpectedValue,
    Sense,
    Negation,
}

/// A changed assertion: its lines, as many as the original's, each with
/// its indentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub change: Change,
    pub lines: Vec<String>,
}

/// True when the lines (the physical lines of the patched file, with their
/// indentation) make a complete statement: strings and brackets closed, no
/// continuation at the end.
pub fn is_complete(lines: &[&str]) -> bool {
    Scan::of(&lines.join("\n")).is_some()
}

/// The statement (complete, see `is_complete`) changed by the best rule
/// that fits, if any. A single line may get any change (a trailing comment
/// is dropped); a statement of several lines only has its assertion method
/// swapped on its first line.
pub fn change_statement(lines: &[&str]) -> Option<Changed> {
    let first = *lines.first()?;
    let indent = &first[..first.len() - first.trim_start().len()];
    let joined = lines.join("\n");
    let code = joined.trim_start();
    let scan = Scan::of(code)?;
    if let [_] = lines {
        let code = code[..scan.end].trim_end();
        let c = plain_assert(code, &scan).or_else(|| method_assert(code, &scan))?;
        return Some(Changed {
            change: c.0,
            lines: vec![format!("{indent}{}", c.1)],
        });
    }
    let (name, recv, _) = whole_call(code, &scan)?;
    let other = opposite(name)?;
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out[0] = first.replacen(&format!("{recv}.{name}("), &format!("{recv}.{other}("), 1);
    Some(Changed {
        change: Change::Sense,
        lines: out,
    })
}

/// The assertion method that says the opposite (unittest's and Django's).
fn opposite(name: &str) -> Option<&'static str> {
    Some(match name {
        // Not assertSequenceEqual: it compares a QuerySet with a list item by
        // item, and assertNotEqual's `!=` of the two always holds (six
        // Django variants gold passed, measured).
        "assertEqual"
        | "assertEquals"
        | "assertListEqual"
        | "assertTupleEqual"
        | "assertDictEqual"
        | "assertSetEqual"
        | "assertMultiLineEqual" => "assertNotEqual",
        "assertNotEqual" => "assertEqual",
        "assertTrue" => "assertFalse",
        "assertFalse" => "assertTrue",
        "assertIs" => "assertIsNot",
        "assertIsNot" => "assertIs",
        "assertIsNone" => "assertIsNotNone",
        "assertIsNotNone" => "assertIsNone",
        "assertIn" => "assertNotIn",
        "assertNotIn" => "assertIn",
        "assertIsInstance" => "assertNotIsInstance",
        "assertNotIsInstance" => "assertIsInstance",
        "assertRegex" => "assertNotRegex",
        "assertNotRegex" => "assertRegex",
        "assertAlmostEqual" => "assertNotAlmostEqual",
        "assertNotAlmostEqual" => "assertAlmostEqual",
        "assertHTMLEqual" => "assertHTMLNotEqual",
        "assertHTMLNotEqual" => "assertHTMLEqual",
        "assertJSONEqual" => "assertJSONNotEqual",
        "assertJSONNotEqual" => "assertJSONEqual",
        "assertXMLEqual" => "assertXMLNotEqual",
        "assertXMLNotEqual" => "assertXMLEqual",
        _ => return None,
    })
}

/// `recv.name(args)` as the whole statement: (name, recv, args).
fn whole_call<'a>(code: &'a str, scan: &Scan) -> Option<(&'a str, &'a str, &'a str)> {
    let code = code[..scan.end].trim_end();
    let (recv, rest) = code.split_once('.')?;
    if !matches!(recv, "self" | "cls") || scan.opens_at_depth0 != 1 {
        return None;
    }
    let open = rest.find('(')?;
    let name = &rest[..open];
    if !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let args = rest[open + 1..].strip_suffix(')')?;
    Some((name, recv, args))
}

/// `assert A == B` with a literal side, else `assert X` negated.
fn plain_assert(code: &str, scan: &Scan) -> Option<(Change, String)> {
    let body = code.strip_prefix("assert ")?;
    let off = code.len() - body.len();
    // A message (`assert x, "why"`) or a tuple: left alone.
    if scan.commas.iter().any(|&(_, d)| d == 0) {
        return None;
    }
    let eqs: Vec<usize> = scan.eqs.iter().filter(|e| e.1 == 0).map(|e| e.0).collect();
    if let [at] = eqs[..] {
        let (left, right) = (&code[off..at], &code[at + 2..]);
        if let Some(new) = changed_literal(right.trim()) {
            return Some((
                Change::ExpectedValue,
                format!("assert {} == {new}", left.trim()),
            ));
        }
        if let Some(new) = changed_literal(left.trim()) {
            return Some((
                Change::ExpectedValue,
                format!("assert {new} == {}", right.trim()),
            ));
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    Some((Change::Negation, format!("assert not ({body})")))
}

/// `self.assertEqual(A, B)` with a literal argument: the value changed;
/// else the method swapped for its opposite (`assertTrue` ↔ `assertFalse`,
/// `assertEqual` ↔ `assertNotEqual`, ...).
fn method_assert(code: &str, scan: &Scan) -> Option<(Change, String)> {
    let (name, recv, args) = whole_call(code, scan)?;
    let call_start = recv.len() + 1 + name.len();
    let commas: Vec<usize> = scan
        .commas
        .iter()
        .filter(|&&(_, d)| d == 1)
        .map(|&(p, _)| p - call_start - 1)
        .collect();
    if matches!(name, "assertEqual" | "assertEquals" | "assertIs") {
        if let [c] = commas[..] {
            let (a, b) = (args[..c].trim(), args[c + 1..].trim());
            let changed = match changed_literal(b) {
                Some(new) => Some((a.to_string(), new)),
                None => changed_literal(a).map(|new| (new, b.to_string())),
            };
            if let Some((a, b)) = changed {
                return Some((Change::ExpectedValue, format!("{recv}.{name}({a}, {b})")));
            }
        }
    }
    let other = opposite(name)?;
    Some((Change::Sense, format!("{recv}.{other}({args})")))
}

/// A whole literal changed so that it no longer equals itself: numbers + 1,
/// booleans flipped, strings with one more character. `None`, containers
/// and anything not a single literal token: no.
fn changed_literal(text: &str) -> Option<String> {
    match text {
        "True" => return Some("False".into()),
        "False" => return Some("True".into()),
        _ => {}
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    for (prefix, radix) in [("0o", 8), ("0x", 16), ("0b", 2)] {
        if let Some(n) = digits.strip_prefix(prefix) {
            let v = i128::from_str_radix(&n.replace('_', ""), radix).ok()?;
            let sign = if digits.len() < text.len() { -1 } else { 1 };
            let w = sign * v + 1;
            let (minus, w) = if w < 0 { ("-", -w) } else { ("", w) };
            return Some(match radix {
                8 => format!("{minus}0o{w:o}"),
                16 => format!("{minus}0x{w:x}"),
                _ => format!("{minus}0b{w:b}"),
            });
        }
    }
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        let n: i128 = text.replace('_', "").parse().ok()?;
        return Some((n + 1).to_string());
    }
    if let Some((int, frac)) = digits.split_once('.') {
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !(int.is_empty() && frac.is_empty()) && all_digits(int) && all_digits(frac) {
            let x: f64 = text.parse().ok()?;
            let y = format!("{}", x + 1.0);
            return Some(if y.contains(['.', 'e']) { y } else { y + ".0" });
        }
    }
    string_with_one_more(text)
}

/// `'abc'` → `'abcx'` (prefixes and triple quotes kept); the text must be
/// exactly one string token.
fn string_with_one_more(text: &str) -> Option<String> {
    let body_at = text.find(['\'', '"'])?;
    let prefix = &text[..body_at];
    if prefix.len() > 2 || !prefix.chars().all(|c| "rRbBuUfF".contains(c)) {
        return None;
    }
    let rest = &text[body_at..];
    let quote = if rest.starts_with("'''") || rest.starts_with("\"\"\"") {
        &rest[..3]
    } else {
        &rest[..1]
    };
    let inner = rest.strip_prefix(quote)?.strip_suffix(quote)?;
    // One token: scanning the text must end exactly at its end, with no
    // second string (`'a' 'b'`) in it.
    let scan = Scan::of(text)?;
    if scan.strings != 1 || scan.end != text.len() {
        return None;
    }
    Some(format!("{prefix}{quote}{inner}x{quote}"))
}

/// A line scanned as Python tokens: top-level structure only.
#[derive(Debug, Default)]
struct Scan {
    /// `,` positions with their bracket depth.
    commas: Vec<(usize, u32)>,
    /// `==` positions with their bracket depth.
    eqs: Vec<(usize, u32)>,
    /// Opening brackets at depth 0.
    opens_at_depth0: u32,
    /// String tokens seen.
    strings: u32,
    /// Where the code ends (a comment starts, or the line's end).
    end: usize,
}

impl Scan {
    /// None when the text is not complete on its own: an unclosed string or
    /// bracket, a closing bracket with no opener, a continuation `\` at its
    /// end. Comments run to the end of their line.
    fn of(code: &str) -> Option<Scan> {
        let b = code.as_bytes();
        let mut s = Scan::default();
        let mut depth: u32 = 0;
        // One past the last character of code (not comment, not space).
        let mut last = 0;
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'#' => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                q @ (b'\'' | b'"') => {
                    let triple = b.len() >= i + 3 && b[i + 1] == q && b[i + 2] == q;
                    let width = if triple { 3 } else { 1 };
                    i = string_end(b, i + width, q, triple)?;
                    s.strings += 1;
                    last = i;
                    continue;
                }
                b'(' | b'[' | b'{' => {
                    if depth == 0 {
                        s.opens_at_depth0 += 1;
                    }
                    depth += 1;
                }
                b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
                b',' => s.commas.push((i, depth)),
                b'=' if b.get(i + 1) == Some(&b'=') && (i == 0 || !b"<>!=".contains(&b[i - 1])) => {
                    s.eqs.push((i, depth));
                    i += 2;
                    last = i;
                    continue;
                }
                _ => {}
            }
            if !b[i].is_ascii_whitespace() {
                last = i + 1;
            }
            i += 1;
        }
        s.end = last;
        if depth != 0 || code[..last].ends_with('\\') {
            return None;
        }
        Some(s)
    }
}

/// The index after the closing quote of a string whose body starts at `i`;
/// None when it does not close on this line. A backslash escapes the next
/// character, in raw strings too (as Python's tokenizer reads them).
fn string_end(b: &[u8], mut i: usize, q: u8, triple: bool) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return None,
            c if c == q && (!triple || (b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q))) => {
                return Some(i + if triple { 3 } else { 1 });
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(code: &str) -> Option<(Change, String)> {
        change_statement(&[code]).map(|c| (c.change, c.lines.join("\n")))
    }

    #[test]
    fn expected_values_change() {
        let ev = Change::ExpectedValue;
        assert_eq!(
            changed("assert f(1) == 2"),
            Some((ev, "assert f(1) == 3".into()))
        );
        assert_eq!(
            changed("assert 'a' == g(x)  # why"),
            Some((ev, "assert 'ax' == g(x)".into()))
        );
        assert_eq!(
            changed("self.assertEqual(f(a, b), 'x, y')"),
            Some((ev, "self.assertEqual(f(a, b), 'x, yx')".into()))
        );
        assert_eq!(
            changed("self.assertEqual(-1, len(q))"),
            Some((ev, "self.assertEqual(0, len(q))".into()))
        );
        assert_eq!(
            changed("self.assertIs(ok(), True)"),
            Some((ev, "self.assertIs(ok(), False)".into()))
        );
        assert_eq!(
            changed("assert x == 0.5"),
            Some((ev, "assert x == 1.5".into()))
        );
        assert_eq!(
            changed("assert x == 2.0"),
            Some((ev, "assert x == 3.0".into()))
        );
        assert_eq!(
            changed(r#"assert s == r"a\"b""#),
            Some((ev, r#"assert s == r"a\"bx""#.into()))
        );
        assert_eq!(
            changed("assert s == b'''q'''"),
            Some((ev, "assert s == b'''qx'''".into()))
        );
    }

    #[test]
    fn other_forms() {
        assert_eq!(
            changed("self.assertTrue(x.is_valid(), msg)"),
            Some((Change::Sense, "self.assertFalse(x.is_valid(), msg)".into()))
        );
        assert_eq!(
            changed("self.assertEqual(f(x), g(y))"),
            Some((Change::Sense, "self.assertNotEqual(f(x), g(y))".into()))
        );
        assert_eq!(
            changed("self.assertEqual(a, b, 'msg')"),
            Some((Change::Sense, "self.assertNotEqual(a, b, 'msg')".into()))
        );
        assert_eq!(
            changed("self.assertIsNone(f(x))  # note"),
            Some((Change::Sense, "self.assertIsNotNone(f(x))".into()))
        );
        assert_eq!(
            changed("self.assertEqual(mode, 0o644)"),
            Some((
                Change::ExpectedValue,
                "self.assertEqual(mode, 0o645)".into()
            ))
        );
        assert_eq!(
            changed("assert x is None"),
            Some((Change::Negation, "assert not (x is None)".into()))
        );
        // No literal side: negated.
        assert_eq!(
            changed("assert f(x) == [1, 2]"),
            Some((Change::Negation, "assert not (f(x) == [1, 2])".into()))
        );
        assert_eq!(
            changed("assert s == 'a' 'b'"),
            Some((Change::Negation, "assert not (s == 'a' 'b')".into()))
        );
    }

    #[test]
    fn a_statement_of_several_lines_has_its_method_swapped() {
        let lines = [
            "        self.assertEqual(  # the choices",
            "            list(f.choices),",
            "            [('', '---')] + choices if blank else choices,",
            "        )",
        ];
        assert!(is_complete(&lines));
        assert!(!is_complete(&lines[..3]));
        let c = change_statement(&lines).unwrap();
        assert_eq!(c.change, Change::Sense);
        assert_eq!(c.lines[0], "        self.assertNotEqual(  # the choices");
        assert_eq!(c.lines[1..], lines[1..]);
        // A multi-line plain assert or an unknown method: no rule.
        assert!(change_statement(&["    assert f(", "        x) == 1"]).is_none());
        assert!(change_statement(&["    self.check(", "        x)"]).is_none());
        // A string cannot run on to the next line unless it is triple-quoted.
        assert!(!is_complete(&["    x = 'a", "b'"]));
        assert!(is_complete(&["    x = \"\"\"a", "b\"\"\""]));
    }

    #[test]
    fn incomplete_or_unknown_lines_are_left_alone() {
        for code in [
            "self.assertEqual(",
            "assert f(x) == (",
            "assert x, 'message'",
            "self.assertRaises(ValueError, f)",
            "self.assertSequenceEqual(qs, [self.c5])",
            "assert x == 'unterminated",
            "x = 1",
            "self.assertEqual(a, 1) or self.assertEqual(b, 2)",
            "assert a == \\",
            "assert",
        ] {
            assert_eq!(changed(code), None, "{code}");
        }
    }
}
