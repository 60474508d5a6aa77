//! Real linters at their pinned versions on real git repositories: ruff
//! finds the planted problems at their lines and nothing on gold, flake8
//! and pylint run with the project's configuration, and ruff reads the
//! project's own configuration or else checks likely errors.

use super::*;

#[test]
fn planted_problems_found_at_their_lines_with_real_ruff_and_none_on_gold() {
    use patchgrade::review::hygiene::Context;
    use patchgrade::review::local::{review_trees, LocalTools};
    use patchgrade::review::FindingKind;

    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let tools = LocalTools { ruff };
    let base = repo_with(&[("pkg/core.py", CORE_BASE), ("pkg/other.py", "VALUE = 1\n")]);
    let (gold_tree, gold) = patched(base.path(), &[("pkg/core.py", CORE_GOLD)]);
    let issue = "core: div() raises ZeroDivisionError; sub() is fine.";
    let ctx = Context {
        issue,
        gold_patch: Some(&gold),
    };

    let (tree, patch) = patched(
        base.path(),
        &[
            ("pkg/core.py", CORE_PLANTED),
            ("pkg/other.py", "VALUE = 1\nOTHER = 2\n"),
        ],
    );
    let r = review_trees(&tools, base.path(), tree.path(), &patch, &ctx);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    let got: Vec<(FindingKind, String)> =
        r.findings.iter().map(|f| (f.kind, f.location())).collect();
    assert_eq!(
        got,
        vec![
            (FindingKind::NewLint, "pkg/core.py:14".into()),
            (FindingKind::DebugPrint, "pkg/core.py:5".into()),
            (FindingKind::CommentedOutCode, "pkg/core.py:15".into()),
            (FindingKind::WhitespaceOnlyHunk, "pkg/core.py:25".into()),
            (FindingKind::UnrelatedFile, "pkg/other.py:2".into()),
            (FindingKind::MoreFilesThanGold, String::new()),
        ],
        "{:#?}",
        r.findings
    );
    assert!(
        r.findings[0].message.contains("F821"),
        "{}",
        r.findings[0].message
    );
    let d = r.lint.as_ref().unwrap();
    // The pre-existing F401 in helper moved from line 13 to 20: kept.
    assert_eq!(d.kept, 1);
    assert_eq!(d.new.len(), 1);
    assert_eq!(r.score.score, 100.0 - 6.0 - 10.0 - 5.0 - 4.0 - 8.0 - 4.0);
    // Complexity was measured: scale is new (1); sub and mul touched (1 -> 1).
    let cx: Vec<(&str, Option<u32>, u32)> = r
        .complexity
        .iter()
        .map(|c| (c.name.as_str(), c.before, c.after))
        .collect();
    assert_eq!(
        cx,
        vec![("scale", None, 1), ("sub", Some(1), 1), ("mul", Some(1), 1)]
    );

    // Gold reviewed the same way: nothing at all.
    let g = review_trees(&tools, base.path(), gold_tree.path(), &gold, &ctx);
    assert!(
        g.findings.is_empty() && g.notes.is_empty(),
        "{:#?} {:?}",
        g.findings,
        g.notes
    );
    assert_eq!(g.score.score, 100.0);
    assert_eq!(g.lint.as_ref().unwrap().kept, 1);

    // A linter that cannot run is a note, never a clean delta.
    let broken = LocalTools {
        ruff: PathBuf::from("/nonexistent/ruff"),
    };
    let b = review_trees(&broken, base.path(), tree.path(), &patch, &ctx);
    assert!(b.lint.is_none());
    assert!(
        b.notes.iter().any(|n| n.starts_with("ruff not run")),
        "{:?}",
        b.notes
    );
}

#[test]
fn real_flake8_and_pylint_with_the_projects_config() {
    use lint::{Tool, FLAKE8_VERSION, PYLINT_VERSION};
    let (Some(flake8), Some(pylint)) = (
        pinned("flake8", &format!("{FLAKE8_VERSION} ")),
        pinned("pylint", &format!("pylint {PYLINT_VERSION}\n")),
    ) else {
        available(
            &format!("flake8 {FLAKE8_VERSION} and pylint {PYLINT_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    // The project's config: flake8 lines of 40 characters at most; pylint
    // only unused-variable (W0612).
    let base_src = "def f(a):\n    return 'a line longer than forty characters', a\n";
    let new_src = "def g(b):\n    unused = 2\n    return b\n\n\ndef f(a):\n    return 'a line longer than forty characters', a\n\n\nX = 'another line longer than forty characters'\n";
    let base = repo_with(&[
        (
            "setup.cfg",
            "[flake8]\nmax-line-length = 40\nselect = E501\n",
        ),
        (
            "pyproject.toml",
            "[tool.pylint.main]\ndisable = \"all\"\nenable = \"W0612\"\n",
        ),
        ("m.py", base_src),
    ]);
    assert_eq!(
        lint::configured(base.path()),
        vec![Tool::Flake8, Tool::Pylint]
    );
    let (tree, patch) = patched(base.path(), &[("m.py", new_src)]);
    let files = parse_diff(&patch).unwrap();

    let run = |tool, exe: &PathBuf, root: &Path| {
        let args = match tool {
            Tool::Flake8 => lint::flake8_args(&["m.py"]),
            _ => lint::pylint_args(&["m.py"]),
        };
        lint::run_linter(tool, exe, root, &args).unwrap()
    };
    let (b, p) = (
        run(Tool::Flake8, &flake8, base.path()),
        run(Tool::Flake8, &flake8, tree.path()),
    );
    assert_eq!(brief(&b), vec![("m.py".into(), 2, "E501".into())]);
    let d = lint::delta(&b, &p, &files);
    assert_eq!(brief(&d.new), vec![("m.py".into(), 10, "E501".into())]);
    assert_eq!(d.kept, 1, "the moved long line is not blamed");

    let (b, p) = (
        run(Tool::Pylint, &pylint, base.path()),
        run(Tool::Pylint, &pylint, tree.path()),
    );
    assert!(b.is_empty(), "{b:?}");
    let d = lint::delta(&b, &p, &files);
    assert_eq!(brief(&d.new), vec![("m.py".into(), 2, "W0612".into())]);
}

#[test]
fn real_ruff_reads_the_projects_own_config_and_else_checks_likely_errors() {
    let Some(ruff) = ruff() else {
        available(
            &format!("ruff {RUFF_VERSION}"),
            "PATCHGRADE_REQUIRE_PYPI",
            false,
        );
        return;
    };
    let src = "import os\n\n\ndef f(x):\n    return 'x=%s' % x\n";
    // No ruff config: likely errors only (F401), not pyupgrade's UP031.
    let plain = repo_with(&[("m.py", src)]);
    assert!(!lint::ruff_configured(plain.path()));
    let f = lint::run_ruff(
        &ruff,
        plain.path(),
        &lint::ruff_check_args(&["m.py"], false),
    )
    .unwrap();
    assert_eq!(brief(&f), vec![("m.py".into(), 1, "F401".into())]);
    // The project selects UP031 only: that is what runs.
    let configured = repo_with(&[
        (
            "pyproject.toml",
            "[project]\nname = \"m\"\n\n[tool.ruff.lint]\nselect = [\"UP031\"]\n",
        ),
        ("m.py", src),
    ]);
    assert!(lint::ruff_configured(configured.path()));
    let f = lint::run_ruff(
        &ruff,
        configured.path(),
        &lint::ruff_check_args(&["m.py"], true),
    )
    .unwrap();
    assert_eq!(brief(&f), vec![("m.py".into(), 5, "UP031".into())]);
}
