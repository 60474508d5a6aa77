//! The eval script run in the environment: reset the test files, apply the
//! test patch, run the tests between markers, record the exit code, restore.

pub mod confirm;
pub mod dataset;
pub mod machinery;

use crate::patch::{ChangeKind, FileChange};
use crate::spec::{Spec, TestDirectives};

const TEMPLATE: &str = include_str!("../../harness-scripts/eval.sh.tmpl");
const SYNC_INSTALL: &str = include_str!("../../harness-scripts/sync_install.py");

/// What the eval script runs to put the candidate's code into the env: the
/// spec's `eval_install`. When that is the derived offline reinstall of a
/// non-editable pip install and the candidate only modifies files,
/// `sync_install.py` runs first and copies those files where that is
/// provably what reinstalling would do (about a second saved per
/// evaluation); it declines otherwise and pip reinstalls. A candidate that
/// adds, deletes, renames or copies files (the package's file list may
/// change) or changes a mode is reinstalled with pip.
pub fn install_step(spec: &Spec, candidate: &[FileChange]) -> Option<String> {
    let install = spec.eval_install()?;
    if !spec.derived_reinstall() {
        return Some(install);
    }
    if candidate
        .iter()
        .any(|c| c.kind != ChangeKind::Modified || c.old_mode != c.new_mode)
    {
        return Some(format!(
            ": patchgrade: reinstalling with pip, the candidate adds, deletes or renames files\n{install}"
        ));
    }
    // The interpreter the install names (`python3.9 -m pip ...`), else the
    // env's `python`.
    let python = spec
        .install
        .as_deref()
        .and_then(|i| i.split_whitespace().next())
        .filter(|w| {
            w.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("python"))
        })
        .unwrap_or("python");
    let mut command = format!("{python} -");
    for c in candidate {
        command.push(' ');
        command.push_str(&quote(&c.path));
    }
    let d = delimiter(SYNC_INSTALL);
    Some(format!("{command} <<'{d}' || {install}\n{SYNC_INSTALL}{d}"))
}

/// Files whose extension says they are not tests (the reference's
/// `NON_TEST_EXTS`; its `csv` has no dot, kept as is).
const NON_TEST_EXTS: [&str; 11] = [
    ".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml",
];

/// Runner arguments for the test files a test patch touches.
pub fn directives(changes: &[FileChange], mode: TestDirectives) -> Vec<String> {
    if mode == TestDirectives::None {
        return Vec::new();
    }
    changes
        .iter()
        .filter(|c| !matches!(c.kind, ChangeKind::Deleted))
        .filter_map(|c| directive(&c.path, mode))
        .collect()
}

/// The runner argument for one test file under the spec's rule (`django`:
/// `tests/a/b.py` → `a.b`); None for files that are not tests by extension
/// and when the rule is `none`. Every caller that selects tests goes through
/// it, so a runner never sees an argument form it refuses.
pub fn directive(path: &str, mode: TestDirectives) -> Option<String> {
    if mode == TestDirectives::None || NON_TEST_EXTS.iter().any(|ext| path.ends_with(ext)) {
        return None;
    }
    Some(match mode {
        TestDirectives::Django => {
            let p = path.strip_suffix(".py").unwrap_or(path);
            p.strip_prefix("tests/").unwrap_or(p).replace('/', ".")
        }
        _ => path.to_string(),
    })
}

/// Runner arguments for an instance's `covering_tests` (SWE-fficiency),
/// under the spec's rule; None when it names no test file, or when the spec
/// passes no arguments, so the test patch's files are used as before (an
/// empty argument list would run the whole suite).
pub fn covering_directives(tests: &[String], mode: TestDirectives) -> Option<Vec<String>> {
    if mode == TestDirectives::None {
        return None;
    }
    let dirs: Vec<String> = tests.iter().filter_map(|t| directive(t, mode)).collect();
    (!dirs.is_empty()).then_some(dirs)
}

/// Single-quote for bash.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Commands that put the test files back as they are at base: tracked files
/// are checked out, files the test patch adds are removed (so a candidate
/// that created them cannot pre-empt them, reference #538).
fn reset_commands(changes: &[FileChange]) -> String {
    let mut tracked = Vec::new();
    let mut added = Vec::new();
    for c in changes {
        match &c.kind {
            ChangeKind::Added => added.push(quote(&c.path)),
            ChangeKind::Renamed { from } => {
                tracked.push(quote(from));
                added.push(quote(&c.path));
            }
            ChangeKind::Copied { .. } => added.push(quote(&c.path)),
            ChangeKind::Deleted | ChangeKind::Modified => tracked.push(quote(&c.path)),
        }
    }
    let mut out = Vec::new();
    // Never `git checkout HEAD` with no paths (reference #518): that would
    // reset the whole tree, candidate patch included.
    if !tracked.is_empty() {
        out.push(format!("git checkout HEAD -- {}", tracked.join(" ")));
    }
    if !added.is_empty() {
        out.push(format!("rm -f {}", added.join(" ")));
    }
    out.join("\n")
}

/// A heredoc delimiter that does not occur in `text`.
pub(crate) fn delimiter(text: &str) -> String {
    let mut d = String::from("EOF_114329324912");
    while text.lines().any(|l| l == d) {
        d.push('X');
    }
    d
}

/// Everything that goes into one eval script.
pub struct EvalScript<'a> {
    pub testbed: &'a str,
    /// Shell line(s) that activate the Python env, if any.
    pub activate: Option<String>,
    pub spec: &'a Spec,
    /// What puts the candidate's code into the env before the tests.
    pub install: Option<String>,
    pub test_patch: &'a str,
    pub test_changes: &'a [FileChange],
    /// Runner arguments to use instead of the test patch's files.
    pub directives: Option<Vec<String>>,
    /// The upstream base commit's time: the script then reports commits and
    /// tags newer than it in the repository the tests ran in (the audit's
    /// future-history check, which also covers prebuilt images).
    pub base_time: Option<i64>,
    /// The commands that set the candidate's test machinery aside
    /// ([`machinery::commands`]), run before the install step.
    pub set_aside: Option<String>,
    /// What runs instead of the spec's test command and directives: the
    /// confirmation run's driver ([`confirm::Driver::command`]).
    pub test_cmd: Option<String>,
}

/// The probe line (see `audit::history::PROBE_MARKER`). Setup commits are
/// not counted: patchgrade's and the reference's (by their author emails).
pub(crate) fn history_probe(base_time: Option<i64>) -> String {
    match base_time {
        None => String::from(": no history probe"),
        Some(t) => format!(
            "echo \">>>>> History: $(git log --all --since=@{t} --format=%ae 2>/dev/null | grep -v -c -e '^patchgrade@localhost$' -e '^setup@swebench.config$') newer commits, $(git for-each-ref refs/tags --format='%(creatordate:unix)' 2>/dev/null | awk -v t={t} '$1 > t' | wc -l) newer tags\""
        ),
    }
}

impl EvalScript<'_> {
    pub fn render(&self) -> String {
        let spec = self.spec;
        let mut env: Vec<String> = spec
            .env
            .iter()
            .map(|(k, v)| format!("export {k}={}", quote(v)))
            .collect();
        env.extend(spec.eval_commands.iter().cloned());
        let apply = if self.test_patch.trim().is_empty() {
            String::from(": no test patch")
        } else {
            let mut text = self.test_patch.to_string();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            let d = delimiter(&text);
            format!("if ! git apply -v - <<'{d}'\n{text}{d}\nthen\n    echo '>>>>> Tests Errored: the test patch did not apply'\nfi")
        };
        // The build goes with the test patch (a script without one is the
        // same text as before the key existed).
        let apply = match spec.build.as_deref().filter(|b| !b.trim().is_empty()) {
            Some(build) => format!("{apply}\n{build}"),
            None => apply,
        };
        let test_cmd = match &self.test_cmd {
            Some(cmd) => cmd.clone(),
            None => {
                let mut cmd = spec.test_cmd.clone();
                let dirs = match &self.directives {
                    Some(d) => d.clone(),
                    None => directives(self.test_changes, spec.test_directives),
                };
                for d in dirs {
                    cmd.push(' ');
                    cmd.push_str(&quote(&d));
                }
                cmd
            }
        };
        let install = self
            .install
            .clone()
            .unwrap_or_else(|| String::from(": no install step"));
        let reset = reset_commands(self.test_changes);
        TEMPLATE
            .replace("{{testbed}}", &quote(self.testbed))
            .replace(
                "{{activate}}",
                self.activate.as_deref().unwrap_or(": no env to activate"),
            )
            .replace("{{eval_commands}}", &env.join("\n"))
            .replace("{{install}}", &install)
            .replace(
                "{{reset_tests}}",
                if reset.is_empty() {
                    ": no tests to reset"
                } else {
                    &reset
                },
            )
            .replace("{{test_cmd}}", &test_cmd)
            .replace("{{history_probe}}", &history_probe(self.base_time))
            // Last: the test patch may itself contain `{{` sequences.
            .replace("{{apply_test_patch}}", &apply)
            // The candidate's config text, after the test patch: a `{{`
            // sequence in it is never a placeholder.
            .replace(
                "{{set_aside}}",
                match self.set_aside.as_deref() {
                    Some(s) if !s.is_empty() => s,
                    _ => ": no test machinery to set aside",
                },
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::file_change as change;

    #[test]
    fn the_build_runs_after_the_test_patch_and_before_the_tests() {
        let mut spec = crate::test_support::spec_installing("make", Some("make lib"));
        let script = |spec: &Spec, patch: &str| {
            EvalScript {
                testbed: "/testbed",
                activate: None,
                spec,
                install: install_step(spec, &[]),
                test_patch: patch,
                test_changes: &[],
                directives: None,
                base_time: None,
                set_aside: None,
                test_cmd: None,
            }
            .render()
        };
        let patch = "diff --git a/t.cc b/t.cc\n";
        let without = script(&spec, patch);
        spec.build = Some("make tests".into());
        let with = script(&spec, patch);
        let at = |s: &str, what: &str| s.find(what).unwrap_or_else(|| panic!("{what}: {s}"));
        assert!(at(&with, "make lib") < at(&with, "git apply"));
        assert!(at(&with, "git apply") < at(&with, "make tests"));
        assert!(at(&with, "make tests") < at(&with, "Start Test Output"));
        // Without a build the script is the text it always was.
        assert_eq!(with.replacen("fi\nmake tests\n", "fi\n", 1), without);
        // No test patch: the build still runs.
        assert!(script(&spec, "").contains(": no test patch\nmake tests\n"));
    }

    #[test]
    fn directives_per_mode() {
        let ch = vec![
            change("tests/forms_tests/test_x.py", ChangeKind::Modified),
            change("tests/data/fixture.json", ChangeKind::Added),
            change("tests/old.py", ChangeKind::Deleted),
        ];
        assert_eq!(
            directives(&ch, TestDirectives::Paths),
            vec!["tests/forms_tests/test_x.py"]
        );
        assert_eq!(
            directives(&ch, TestDirectives::Django),
            vec!["forms_tests.test_x"]
        );
        assert!(directives(&ch, TestDirectives::None).is_empty());
    }

    #[test]
    fn install_step_tries_the_copy_only_before_a_derived_reinstall() {
        let spec = crate::test_support::spec_installing;
        let modified = [
            change("pkg/a.py", ChangeKind::Modified),
            change("pkg/b c.py", ChangeKind::Modified),
        ];
        let step = install_step(&spec("python3.9 -m pip install .", None), &modified).unwrap();
        let (first, rest) = step.split_once('\n').unwrap();
        let d = delimiter(SYNC_INSTALL);
        assert_eq!(
            first,
            format!(
                "python3.9 - 'pkg/a.py' 'pkg/b c.py' <<'{d}' || python3.9 -m pip install . --no-deps --no-build-isolation --no-index"
            )
        );
        assert_eq!(rest, format!("{SYNC_INSTALL}{d}"));
        // `pip install .` names no interpreter: the env's python.
        assert!(install_step(&spec("pip install .", None), &modified)
            .unwrap()
            .starts_with("python - 'pkg/a.py'"));
        // A file added (or deleted, renamed, a mode changed): pip, said.
        let mut added = modified.to_vec();
        added.push(change("pkg/new.py", ChangeKind::Added));
        let mut chmod = change("pkg/a.py", ChangeKind::Modified);
        chmod.old_mode = Some(0o100644);
        chmod.new_mode = Some(0o100755);
        for changes in [added, vec![chmod]] {
            assert_eq!(
                install_step(&spec("pip install .", None), &changes).as_deref(),
                Some(": patchgrade: reinstalling with pip, the candidate adds, deletes or renames files\npip install . --no-deps --no-build-isolation --no-index")
            );
        }
        // Editable, explicit and non-pip installs run as they are.
        assert_eq!(
            install_step(&spec("pip install -e .", None), &modified),
            None
        );
        assert_eq!(
            install_step(&spec("pip install .", Some("make")), &modified).as_deref(),
            Some("make")
        );
        assert_eq!(
            install_step(&spec("python setup.py install", None), &modified).as_deref(),
            Some("python setup.py install")
        );
    }

    #[test]
    fn covering_tests_become_directives_under_the_spec_rule() {
        let t = vec![
            "sympy/core/tests/test_mul.py".to_string(),
            "data/cases.json".to_string(),
        ];
        assert_eq!(
            covering_directives(&t, TestDirectives::Paths),
            Some(vec!["sympy/core/tests/test_mul.py".to_string()])
        );
        assert_eq!(
            covering_directives(&["tests/a/test_b.py".into()], TestDirectives::Django),
            Some(vec!["a.test_b".to_string()])
        );
        assert_eq!(covering_directives(&[], TestDirectives::Paths), None);
        assert_eq!(
            covering_directives(&["data/cases.json".into()], TestDirectives::Paths),
            None
        );
        assert_eq!(covering_directives(&t, TestDirectives::None), None);
    }

    #[test]
    fn reset_never_resets_whole_tree() {
        let only_added = vec![change("tests/new_test.py", ChangeKind::Added)];
        let r = reset_commands(&only_added);
        assert_eq!(r, "rm -f 'tests/new_test.py'");
        let renamed = vec![change(
            "b.py",
            ChangeKind::Renamed {
                from: "a.py".into(),
            },
        )];
        assert_eq!(
            reset_commands(&renamed),
            "git checkout HEAD -- 'a.py'\nrm -f 'b.py'"
        );
    }

    #[test]
    fn delimiter_avoids_collisions_and_quote_escapes() {
        assert_eq!(delimiter("x\nEOF_114329324912\n"), "EOF_114329324912X");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
