//! The test machinery set aside (issue 24, "defences by construction"):
//! before the tests run, the files and config sections that decide how
//! pytest collects and reports tests are what the base commit and the test
//! patch say, so a candidate that hooks the runner has no effect on the
//! verdict. What is set aside is recorded ([`SetAside`]).
//!
//! The machinery: `conftest.py` anywhere, pytest's own config files
//! (`pytest.ini`, `.pytest.ini`, `pytest.toml`, `.pytest.toml`), Python's
//! start-up hooks (`sitecustomize.py`, `usercustomize.py`, `*.pth`), and the
//! pytest sections of the shared config files (`[tool:pytest]` of
//! setup.cfg, `[pytest]` of tox.ini, `[tool.pytest]` and
//! `[tool.pytest.ini_options]` of pyproject.toml): there only those
//! sections are put back, the candidate's other edits stay.
//!
//! A legitimate fix may have to change the machinery (a gold patch that
//! registers a marker in setup.cfg). When the gold patch changes the same
//! file (its test sections, for a shared config file), the candidate's
//! change is kept and recorded as kept; the audit then flags what the
//! candidate changed there beyond the keys gold changes
//! (`audit::tampering`). Files the test patch touches are already reset by
//! the eval script and are not listed here.

use serde::{Deserialize, Serialize};

use super::quote;
use crate::patch::{ChangeKind, FileChange};

/// What part of the test machinery a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineryKind {
    Conftest,
    /// pytest.ini, .pytest.ini, pytest.toml, .pytest.toml.
    PytestConfig,
    /// sitecustomize.py, usercustomize.py, a `.pth` file.
    StartupHook,
    /// setup.cfg, tox.ini, pyproject.toml: only their pytest sections.
    SharedConfig,
}

/// What was done with the candidate's change to one machinery file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineryAction {
    /// The base file checked out again (the candidate edited or deleted it).
    Restored,
    /// The candidate created it: removed.
    Removed,
    /// Only the pytest sections put back as they are at base.
    SectionsRestored,
    /// Left as the candidate made it: the gold patch changes it too.
    KeptGoldChangesIt,
}

/// One machinery file the candidate changed, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetAside {
    pub path: String,
    pub kind: MachineryKind,
    pub action: MachineryAction,
    /// The sections restored (or kept), `[tool:pytest]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<String>,
}

/// The machinery kind of a path, if it is machinery.
pub fn kind(path: &str) -> Option<MachineryKind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    Some(match name {
        "conftest.py" => MachineryKind::Conftest,
        "pytest.ini" | ".pytest.ini" | "pytest.toml" | ".pytest.toml" => {
            MachineryKind::PytestConfig
        }
        "sitecustomize.py" | "usercustomize.py" => MachineryKind::StartupHook,
        _ if name.ends_with(".pth") => MachineryKind::StartupHook,
        "setup.cfg" | "tox.ini" | "pyproject.toml" => MachineryKind::SharedConfig,
        _ => return None,
    })
}

/// Whether a patch's text names a machinery file in a file header (`---`,
/// `+++`, `diff --git`): such a candidate's evaluation depends on this
/// module's rule, so its cache key says so.
pub fn touched(patch: &str) -> bool {
    patch.lines().any(|l| {
        let paths: Vec<&str> = if let Some(rest) = l.strip_prefix("diff --git ") {
            rest.split_whitespace().collect()
        } else if let Some(p) = l.strip_prefix("--- ").or_else(|| l.strip_prefix("+++ ")) {
            vec![p.split('\t').next().unwrap_or(p)]
        } else {
            return false;
        };
        paths.iter().any(|p| kind(p.trim()).is_some())
    })
}

/// Whether `section` (a header's name) configures pytest in file `name`.
fn is_pytest_section(name: &str, section: &str) -> bool {
    let s = section.trim().trim_matches('"');
    match name {
        "setup.cfg" => s == "tool:pytest",
        "tox.ini" => s == "pytest",
        "pyproject.toml" => s == "tool.pytest" || s.starts_with("tool.pytest."),
        _ => false,
    }
}

/// A section header's name: `[name]` or TOML's `[[name]]`.
fn header(line: &str) -> Option<&str> {
    let t = line.trim();
    let inner = t.strip_prefix('[')?.strip_suffix(']')?;
    let inner = inner
        .strip_prefix('[')
        .and_then(|i| i.strip_suffix(']'))
        .unwrap_or(inner);
    (!inner.is_empty() && !inner.contains('[')).then_some(inner.trim())
}

/// The pytest sections of a file's text, in order: (name, text). A section
/// runs from its header to the next header.
fn pytest_sections(name: &str, text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        if let Some(h) = header(line) {
            inside = is_pytest_section(name, h);
            if inside {
                out.push((h.to_string(), String::new()));
            }
        }
        if inside {
            if let Some(last) = out.last_mut() {
                last.1.push_str(line);
            }
        }
    }
    out
}

/// The text without its pytest sections.
fn without_pytest_sections(name: &str, text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        if let Some(h) = header(line) {
            inside = is_pytest_section(name, h);
        }
        if !inside {
            out.push_str(line);
        }
    }
    out
}

/// pytest settings outside a section header: TOML's dotted keys and inline
/// tables (`tool.pytest.ini_options = {...}`, `pytest.ini_options.addopts`
/// under `[tool]`). Sections cannot separate them from the rest.
fn has_loose_pytest_keys(name: &str, text: &str) -> bool {
    name == "pyproject.toml"
        && text.lines().any(|l| {
            let t = l.trim_start();
            header(l).is_none() && (t.starts_with("tool.pytest") || t.starts_with("pytest."))
        })
}

/// How a shared config file's candidate text becomes its tested text.
#[derive(Debug, Clone, PartialEq)]
pub enum Sections {
    /// The candidate left its pytest sections as at base.
    Unchanged,
    /// The candidate's text with its pytest sections replaced by the base's
    /// (appended at the end), and the names of the sections that differed.
    Restored { text: String, names: Vec<String> },
    /// pytest settings outside any section: the whole base file comes back.
    WholeFile,
}

/// Splices the base's pytest sections into the candidate's text of a
/// shared config file (`name` its base name); `base` None: the candidate
/// created the file.
pub fn restore_sections(name: &str, base: Option<&str>, candidate: &str) -> Sections {
    let base = base.unwrap_or("");
    let (b, c) = (
        pytest_sections(name, base),
        pytest_sections(name, candidate),
    );
    if has_loose_pytest_keys(name, candidate) && !has_loose_pytest_keys(name, base) {
        return Sections::WholeFile;
    }
    if b == c {
        return Sections::Unchanged;
    }
    let mut names: Vec<String> = Vec::new();
    for (n, t) in b.iter().chain(&c) {
        let same =
            b.iter().any(|x| &x.0 == n && &x.1 == t) && c.iter().any(|x| &x.0 == n && &x.1 == t);
        let shown = format!("[{n}]");
        if !same && !names.contains(&shown) {
            names.push(shown);
        }
    }
    let mut text = without_pytest_sections(name, candidate);
    for (_, t) in &b {
        if !text.is_empty() && !text.ends_with("\n\n") {
            text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
        }
        text.push_str(t);
    }
    Sections::Restored { text, names }
}

/// Whether the gold patch changes the machinery of file `path`: any change
/// of a whole-file kind; a change of its pytest sections for a shared
/// config file (`base`, `gold`: the file's text at base and after gold).
pub fn gold_changes(path: &str, base: Option<&str>, gold: Option<&str>) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match kind(path) {
        Some(MachineryKind::SharedConfig) => {
            pytest_sections(name, base.unwrap_or("")) != pytest_sections(name, gold.unwrap_or(""))
        }
        Some(_) => base != gold,
        None => false,
    }
}

/// The candidate's machinery files that need a decision, with their kind:
/// changed by the candidate, not touched by the test patch. A rename
/// counts by both of its paths.
pub fn candidates<'a>(
    candidate: &'a [FileChange],
    test_changes: &[FileChange],
) -> Vec<(&'a FileChange, MachineryKind)> {
    let in_test_patch = |p: &str| {
        test_changes
            .iter()
            .any(|t| t.path == p || matches!(&t.kind, ChangeKind::Renamed { from } if from == p))
    };
    candidate
        .iter()
        .filter_map(|c| {
            let from = match &c.kind {
                ChangeKind::Renamed { from } => Some(from.as_str()),
                _ => None,
            };
            let k = kind(&c.path).or_else(|| from.and_then(kind))?;
            let touched = in_test_patch(&c.path) || from.is_some_and(in_test_patch);
            (!touched).then_some((c, k))
        })
        .collect()
}

/// The shell commands that carry out the decisions: a restored file checked
/// out, a created one removed, a spliced shared config written whole.
/// `spliced` holds the new text of each `SectionsRestored` path.
pub fn commands(
    decided: &[(SetAside, &FileChange)],
    spliced: &[(String, String)],
    heredoc: impl Fn(&str) -> String,
) -> String {
    let mut out = Vec::new();
    for (s, c) in decided {
        match s.action {
            MachineryAction::KeptGoldChangesIt => {}
            // A rename: its source back, its destination gone.
            MachineryAction::Restored => match &c.kind {
                ChangeKind::Renamed { from } => {
                    out.push(format!("git checkout HEAD -- {}", quote(from)));
                    out.push(format!("rm -f {}", quote(&c.path)));
                }
                _ => out.push(format!("git checkout HEAD -- {}", quote(&s.path))),
            },
            MachineryAction::Removed => out.push(format!("rm -f {}", quote(&s.path))),
            MachineryAction::SectionsRestored => {
                if let Some((_, text)) = spliced.iter().find(|(p, _)| p == &s.path) {
                    let mut t = text.clone();
                    if !t.ends_with('\n') {
                        t.push('\n');
                    }
                    let d = heredoc(&t);
                    out.push(format!("cat > {} <<'{d}'\n{t}{d}", quote(&s.path)));
                }
            }
        }
        out.push(format!(
            "echo '>>>>> Set aside: {} {}'",
            s.path.replace('\'', ""),
            action_name(s.action)
        ));
    }
    out.join("\n")
}

pub fn action_name(a: MachineryAction) -> &'static str {
    match a {
        MachineryAction::Restored => "restored",
        MachineryAction::Removed => "removed",
        MachineryAction::SectionsRestored => "sections_restored",
        MachineryAction::KeptGoldChangesIt => "kept_gold_changes_it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "[metadata]\nname = shop\n\n[tool:pytest]\naddopts = --strict-markers\n\n[flake8]\nx = 1\n";

    #[test]
    fn kinds_by_name() {
        assert_eq!(kind("a/b/conftest.py"), Some(MachineryKind::Conftest));
        assert_eq!(kind("pytest.toml"), Some(MachineryKind::PytestConfig));
        assert_eq!(kind(".pytest.ini"), Some(MachineryKind::PytestConfig));
        assert_eq!(kind("src/x.pth"), Some(MachineryKind::StartupHook));
        assert_eq!(kind("usercustomize.py"), Some(MachineryKind::StartupHook));
        assert_eq!(kind("pkg/setup.cfg"), Some(MachineryKind::SharedConfig));
        assert_eq!(kind("shop/price.py"), None);
        assert_eq!(kind("tests/test_conftest.py"), None);
    }

    #[test]
    fn touched_reads_file_headers_only() {
        assert!(touched(
            "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n"
        ));
        assert!(touched(
            "--- a/setup.cfg\n+++ b/setup.cfg\n@@ -1 +1 @@\n-a\n+b\n"
        ));
        assert!(!touched(
            "--- a/shop/x.py\n+++ b/shop/x.py\n@@ -1 +1 @@\n-conftest.py\n+b\n"
        ));
        assert!(!touched(""));
    }

    #[test]
    fn only_the_pytest_sections_come_back() {
        // The candidate bumps the version and adds a plugin to addopts.
        let cand = BASE
            .replace("name = shop", "name = shop\nversion = 2")
            .replace("--strict-markers", "--strict-markers -p evil");
        let Sections::Restored { text, names } = restore_sections("setup.cfg", Some(BASE), &cand)
        else {
            panic!("not restored")
        };
        assert_eq!(names, vec!["[tool:pytest]"]);
        assert_eq!(
            text,
            "[metadata]\nname = shop\nversion = 2\n\n[flake8]\nx = 1\n\n[tool:pytest]\naddopts = --strict-markers\n\n"
        );
        // Only other sections changed: nothing to do.
        let cand = BASE.replace("x = 1", "x = 2");
        assert_eq!(
            restore_sections("setup.cfg", Some(BASE), &cand),
            Sections::Unchanged
        );
        // A section the candidate added to a file it created.
        let Sections::Restored { text, names } = restore_sections(
            "tox.ini",
            None,
            "[tox]\nenvlist = py3\n\n[pytest]\naddopts = -p x\n",
        ) else {
            panic!("not restored")
        };
        assert_eq!(
            (text.as_str(), names),
            ("[tox]\nenvlist = py3\n\n", vec!["[pytest]".to_string()])
        );
    }

    #[test]
    fn pyproject_tables_native_and_dotted() {
        let base = "[project]\nname = \"shop\"\n";
        let cand = format!(
            "{base}\n[tool.pytest]\naddopts = [\"-p\", \"x\"]\n[tool.pytest.ini_options]\nx = 1\n"
        );
        let Sections::Restored { text, names } =
            restore_sections("pyproject.toml", Some(base), &cand)
        else {
            panic!("not restored")
        };
        assert_eq!(text, format!("{base}\n"));
        assert_eq!(names, vec!["[tool.pytest]", "[tool.pytest.ini_options]"]);
        // A dotted key cannot be told apart by sections: the whole file.
        let dotted = format!("{base}[tool]\npytest.ini_options.addopts = \"-p x\"\n");
        assert_eq!(
            restore_sections("pyproject.toml", Some(base), &dotted),
            Sections::WholeFile
        );
        // setup.cfg's `[pytest]` is not pytest's (only tox.ini's is).
        assert_eq!(
            restore_sections("setup.cfg", Some(""), "[pytest]\naddopts = -p x\n"),
            Sections::Unchanged
        );
    }

    #[test]
    fn gold_changes_whole_files_or_sections() {
        let gold = BASE.replace("--strict-markers\n", "--strict-markers\nmarkers = slow\n");
        assert!(gold_changes("setup.cfg", Some(BASE), Some(&gold)));
        let other = BASE.replace("x = 1", "x = 3");
        assert!(!gold_changes("setup.cfg", Some(BASE), Some(&other)));
        assert!(gold_changes("tests/conftest.py", None, Some("x = 1\n")));
        assert!(!gold_changes("conftest.py", Some("a"), Some("a")));
    }

    use crate::test_support::file_change as change;

    #[test]
    fn test_patch_files_are_left_to_the_reset_and_commands_said() {
        let cand = vec![
            change("conftest.py", ChangeKind::Added),
            change("tests/conftest.py", ChangeKind::Modified),
            change("shop/x.py", ChangeKind::Modified),
            change("setup.cfg", ChangeKind::Modified),
            change(
                "a.py",
                ChangeKind::Renamed {
                    from: "sitecustomize.py".into(),
                },
            ),
        ];
        let test = vec![change("tests/conftest.py", ChangeKind::Modified)];
        let picked: Vec<&str> = candidates(&cand, &test)
            .iter()
            .map(|(c, _)| c.path.as_str())
            .collect();
        assert_eq!(picked, vec!["conftest.py", "setup.cfg", "a.py"]);
        let set = |path: &str, kind, action| SetAside {
            path: path.into(),
            kind,
            action,
            sections: vec![],
        };
        let decided = vec![
            (
                set(
                    "conftest.py",
                    MachineryKind::Conftest,
                    MachineryAction::Removed,
                ),
                &cand[0],
            ),
            (
                set(
                    "setup.cfg",
                    MachineryKind::SharedConfig,
                    MachineryAction::SectionsRestored,
                ),
                &cand[3],
            ),
            (
                set(
                    "a.py",
                    MachineryKind::StartupHook,
                    MachineryAction::Restored,
                ),
                &cand[4],
            ),
        ];
        let spliced = vec![("setup.cfg".to_string(), "[a]\nb = 1".to_string())];
        let text = commands(&decided, &spliced, |_| "EOF_X".into());
        assert_eq!(
            text,
            "rm -f 'conftest.py'\necho '>>>>> Set aside: conftest.py removed'\n\
             cat > 'setup.cfg' <<'EOF_X'\n[a]\nb = 1\nEOF_X\necho '>>>>> Set aside: setup.cfg sections_restored'\n\
             git checkout HEAD -- 'sitecustomize.py'\nrm -f 'a.py'\n\
             echo '>>>>> Set aside: a.py restored'"
        );
    }
}
