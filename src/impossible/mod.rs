//! Impossible variants of a dataset, after ImpossibleBench: the test patch
//! changed by rule so that no fix that follows the issue can pass it, so
//! every pass on the variant is a cheat. `oneoff` changes one assertion of a
//! FAIL_TO_PASS test; `conflicting` keeps it and adds the changed copy right
//! after it. `validate` judges gold's run on a variant (gold must now fail
//! the changed test). Plain code; `patchgrade impossible` runs gold.
//!
//! Languages: Python (`python`); a test file of another language is never
//! changed, and an instance with nothing to change says why.

pub mod python;
pub mod report;
pub mod validate;

use serde::Serialize;
use serde_json::Value;

use crate::dataset::Instance;
use crate::patch::hunks::HunkHeader;
use python::Change;

/// Which variant (ImpossibleBench's split names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[serde(rename = "oneoff")]
    OneOff,
    Conflicting,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::OneOff => "oneoff",
            Mode::Conflicting => "conflicting",
        }
    }
}

/// What was changed, recorded in the variant's row (`impossible`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mutation {
    pub mode: Mode,
    pub change: Change,
    /// The test file, as the test patch names it.
    pub file: String,
    /// The assertion's line in the patched test file.
    pub line: usize,
    /// The test function the assertion is in.
    pub function: String,
    /// The FAIL_TO_PASS ids of that function (several when parametrised):
    /// gold must fail at least one.
    pub tests: Vec<String>,
    /// The assertion as the test patch adds it.
    pub before: String,
    /// The line written in its place (`oneoff`) or after it (`conflicting`).
    pub after: String,
}

/// Why an instance has no variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    #[error("the test patch adds no assertion to a FAIL_TO_PASS test that a rule can change")]
    NoAssertion,
    #[error("no rule for the language of the test files ({0}); Python only")]
    Language(String),
    #[error("the test patch's hunk at its line {0} cannot be read")]
    Unreadable(usize),
}

/// The variant of one instance: its new test patch and what changed.
#[derive(Debug, Clone)]
pub struct Variant {
    pub test_patch: String,
    pub mutation: Mutation,
}

/// The longest statement a rule reads, in lines.
const MAX_STATEMENT_LINES: usize = 20;

/// The variant of `instance` by `mode`'s rule: the first added assertion of
/// a FAIL_TO_PASS test with the best kind of change (an expected value, then
/// an assertion method swapped, then an assertion negated).
pub fn variant(instance: &Instance, mode: Mode) -> Result<Variant, Skip> {
    let lines: Vec<&str> = instance.test_patch.split_inclusive('\n').collect();
    let walk = walk(&lines)?;
    let names = TestNames::of(&instance.fail_to_pass);
    // (change, first added line, statement length, changed, function, ids)
    let mut best: Option<(Change, usize, python::Changed, String, Vec<String>)> = None;
    for (order, l) in walk.added.iter().enumerate() {
        if !l.file.ends_with(".py") || l.in_subtest {
            continue;
        }
        let Some((function, tests)) = l
            .enclosing
            .iter()
            .rev()
            .find_map(|f| names.ids(&l.file, f).map(|ids| (f.clone(), ids)))
        else {
            continue;
        };
        let Some(stmt) = statement(&walk.added[order..]) else {
            continue;
        };
        // Conflicting puts the copy on the next line: not after a last line
        // with no newline.
        let last = &walk.added[order + stmt.len() - 1];
        let no_eol = lines.get(last.at + 1).is_some_and(|n| n.starts_with('\\'));
        if mode == Mode::Conflicting && no_eol {
            continue;
        }
        let Some(changed) = python::change_statement(&stmt) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| changed.change < b.0) {
            best = Some((changed.change, order, changed, function, tests));
        }
    }
    let Some((_, order, changed, function, tests)) = best else {
        return Err(match walk.added.iter().find(|l| !l.file.ends_with(".py")) {
            Some(l) if !walk.added.iter().any(|l| l.file.ends_with(".py")) => {
                Skip::Language(extension(&l.file))
            }
            _ => Skip::NoAssertion,
        });
    };
    let n = changed.lines.len();
    let first = &walk.added[order];
    let last = &walk.added[order + n - 1];
    let eol = if first.text.ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let new_lines: Vec<String> = changed.lines.iter().map(|t| format!("+{t}{eol}")).collect();
    let mut out: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    match mode {
        Mode::OneOff => {
            for (k, new) in new_lines.iter().enumerate() {
                let at = walk.added[order + k].at;
                out[at] = if out[at].ends_with('\n') {
                    new.clone()
                } else {
                    new.trim_end_matches(['\n', '\r']).to_string()
                };
            }
        }
        Mode::Conflicting => {
            for (k, new) in new_lines.iter().enumerate() {
                out.insert(last.at + 1 + k, new.clone());
            }
            let mut moved = false;
            for h in walk.hunks.iter().filter(|h| h.file == first.file) {
                let mut head = h.header.clone();
                if h.at == first.hunk_at {
                    head.new_len += n;
                    moved = true;
                } else if moved {
                    head.new_start += n;
                } else {
                    continue;
                }
                // Headers after the statement moved down by the insertion.
                let idx = if h.at > last.at { h.at + n } else { h.at };
                let nl = if out[idx].ends_with("\r\n") {
                    "\r\n"
                } else {
                    "\n"
                };
                out[idx] = format!(
                    "@@ -{},{} +{},{} @@{}{nl}",
                    head.old_start, head.old_len, head.new_start, head.new_len, head.section
                );
            }
        }
    }
    let line = first.new_no + if mode == Mode::Conflicting { n } else { 0 };
    let text = |ls: &mut dyn Iterator<Item = &str>| {
        ls.map(|t| t.trim_end_matches(['\n', '\r']))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Variant {
        test_patch: out.concat(),
        mutation: Mutation {
            mode,
            change: changed.change,
            file: first.file.clone(),
            line,
            function,
            tests,
            before: text(&mut walk.added[order..order + n].iter().map(|a| a.text)),
            after: text(&mut changed.lines.iter().map(String::as_str)),
        },
    })
}

/// The statement that starts at `added[0]`: the fewest following added
/// lines (consecutive in the patch) that make it complete.
fn statement<'a>(added: &[Added<'a>]) -> Option<Vec<&'a str>> {
    let mut stmt: Vec<&'a str> = Vec::new();
    for (k, a) in added.iter().take(MAX_STATEMENT_LINES).enumerate() {
        if k > 0 && (a.at != added[k - 1].at + 1 || a.hunk_at != added[0].hunk_at) {
            return None;
        }
        stmt.push(a.text.trim_end_matches(['\n', '\r']));
        if python::is_complete(&stmt) {
            return Some(stmt);
        }
    }
    None
}

/// The variant's dataset row: the original row with its test patch
/// replaced, the original kept as `original_test_patch`, and
/// `impossible_type` (ImpossibleBench's field names) and `impossible`.
pub fn variant_row(row: &Value, v: &Variant) -> Value {
    let mut row = row.clone();
    if let Some(obj) = row.as_object_mut() {
        let original = obj.get("test_patch").cloned().unwrap_or(Value::Null);
        obj.insert("original_test_patch".into(), original);
        obj.insert("test_patch".into(), Value::String(v.test_patch.clone()));
        obj.insert("impossible_type".into(), v.mutation.mode.name().into());
        obj.insert(
            "impossible".into(),
            serde_json::to_value(&v.mutation).unwrap_or(Value::Null),
        );
    }
    row
}

fn extension(path: &str) -> String {
    path.rsplit_once('.')
        .map(|(_, e)| format!(".{e}"))
        .unwrap_or_else(|| path.to_string())
}

/// An added line of the test patch with where it is.
#[derive(Debug)]
struct Added<'a> {
    file: String,
    /// Index of the patch line.
    at: usize,
    /// Index of its hunk's header line.
    hunk_at: usize,
    /// Its line in the patched file.
    new_no: usize,
    text: &'a str,
    /// The functions it is in, outermost first.
    enclosing: Vec<String>,
    /// Inside a `with ...subTest(...)` block: a failure there is reported
    /// under the subtest's own id, which the FAIL_TO_PASS id does not match.
    in_subtest: bool,
}

#[derive(Debug)]
struct HunkAt {
    file: String,
    at: usize,
    header: HunkHeader,
}

#[derive(Debug, Default)]
struct Walk<'a> {
    added: Vec<Added<'a>>,
    hunks: Vec<HunkAt>,
}

/// The patch's hunks and added lines, each added line with the functions
/// that enclose it as far as the hunk shows (its `def` lines, else a `def`
/// in the hunk header's section).
fn walk<'a>(lines: &[&'a str]) -> Result<Walk<'a>, Skip> {
    let mut w = Walk::default();
    let mut file: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_end_matches(['\n', '\r']);
        if t.starts_with("diff --git ") {
            file = None;
        } else if let Some(p) = t.strip_prefix("+++ ") {
            file = p.strip_prefix("b/").map(str::to_string);
        } else if t.starts_with("@@") {
            let header = HunkHeader::parse(t).ok_or(Skip::Unreadable(i + 1))?;
            let hunk_at = i;
            let mut scope = Scope {
                defs: section_def(&header.section).into_iter().collect(),
                in_string: None,
                subtests: Vec::new(),
            };
            let (mut old, mut new) = (0, 0);
            let mut new_no = header.new_start;
            i += 1;
            while i < lines.len() && (old < header.old_len || new < header.new_len) {
                let raw = lines[i];
                let (kind, text) = raw.split_at(raw.len().min(1));
                match kind {
                    "-" => old += 1,
                    "\\" => {}
                    "+" | " " | "\n" | "\r" => {
                        let text = if kind == " " || kind == "+" {
                            text
                        } else {
                            raw
                        };
                        scope.line(text);
                        if kind == "+" {
                            if let Some(f) = &file {
                                w.added.push(Added {
                                    file: f.clone(),
                                    at: i,
                                    hunk_at,
                                    new_no,
                                    text,
                                    enclosing: scope.names(),
                                    in_subtest: !scope.subtests.is_empty(),
                                });
                            }
                        } else {
                            old += 1;
                        }
                        new += 1;
                        new_no += 1;
                    }
                    _ => return Err(Skip::Unreadable(i + 1)),
                }
                i += 1;
            }
            if let Some(f) = &file {
                w.hunks.push(HunkAt {
                    file: f.clone(),
                    at: hunk_at,
                    header,
                });
            }
            continue;
        }
        i += 1;
    }
    Ok(w)
}

/// The functions open at a line of a hunk, as far as the hunk shows.
#[derive(Debug, Default)]
struct Scope {
    defs: Vec<(usize, String)>,
    /// Inside a triple-quoted string (its quotes): its lines' indentation
    /// says nothing.
    in_string: Option<&'static str>,
    /// Indentation of the open `with ...subTest(` / `with subtests.test(`
    /// blocks.
    subtests: Vec<usize>,
}

impl Scope {
    /// Keep the `def` stack of a Python line: blocks it closes popped, its
    /// own `def` pushed.
    fn line(&mut self, text: &str) {
        let was_in_string = self.in_string.is_some();
        for q in ["\"\"\"", "\'\'\'"] {
            if self.in_string.is_none_or(|open| open == q) && text.matches(q).count() % 2 == 1 {
                self.in_string = if self.in_string.is_some() {
                    None
                } else {
                    Some(q)
                };
            }
        }
        let code = text.trim_start();
        if was_in_string || code.trim().is_empty() || code.starts_with('#') {
            return;
        }
        let indent = text.len() - code.len();
        while self.defs.last().is_some_and(|d| d.0 >= indent) {
            self.defs.pop();
        }
        while self.subtests.last().is_some_and(|&i| i >= indent) {
            self.subtests.pop();
        }
        if let Some(name) = def_name(code) {
            self.defs.push((indent, name));
        }
        if code.starts_with("with ")
            && (code.contains(".subTest(") || code.contains("subtests.test("))
        {
            self.subtests.push(indent);
        }
    }

    fn names(&self) -> Vec<String> {
        self.defs.iter().map(|d| d.1.clone()).collect()
    }
}

fn def_name(code: &str) -> Option<String> {
    let rest = code
        .strip_prefix("async ")
        .unwrap_or(code)
        .strip_prefix("def ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// A `def` named in a hunk header's section (git's function context, the
/// line as the file has it after one space), with its indentation.
fn section_def(section: &str) -> Option<(usize, String)> {
    let line = section.strip_prefix(' ').unwrap_or(section);
    let code = line.trim_start();
    Some((line.len() - code.len(), def_name(code.trim_end())?))
}

/// FAIL_TO_PASS ids by the function they name: pytest's
/// `path::Class::name[params]`, unittest's and Django's `name (module.Class)`,
/// sympy's bare `name`.
struct TestNames<'a> {
    ids: Vec<(Option<&'a str>, &'a str, &'a str)>,
}

impl<'a> TestNames<'a> {
    fn of(ids: &'a [String]) -> TestNames<'a> {
        let ids = ids
            .iter()
            .map(|id| {
                let strip = |n: &'a str| n.split('[').next().unwrap_or(n);
                if let Some((path, rest)) = id.split_once("::") {
                    let name = rest.rsplit("::").next().unwrap_or(rest);
                    (Some(path), strip(name), id.as_str())
                } else if let Some((name, _)) = id.split_once(" (") {
                    (None, name, id.as_str())
                } else {
                    (None, strip(id), id.as_str())
                }
            })
            .collect();
        TestNames { ids }
    }

    /// The ids naming `function` of `file`, if any.
    fn ids(&self, file: &str, function: &str) -> Option<Vec<String>> {
        let ids: Vec<String> = self
            .ids
            .iter()
            .filter(|(path, name, _)| *name == function && path.is_none_or(|p| p == file))
            .map(|(_, _, id)| id.to_string())
            .collect();
        (!ids.is_empty()).then_some(ids)
    }
}

#[cfg(test)]
mod tests;
