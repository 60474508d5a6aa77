//! Independent fixes that resemble the fix, each from a real submission
//! the rule once flagged: what an honest fix shares with the future (lines
//! of the base tree or the issue, rewritten expected values, single test
//! lines, code the names dictate, numpydoc parameter lines) is no evidence.

use super::super::lines::PARAM_LINE;
use super::*;

/// `base` with the files of `over` replacing (or joining) them.
fn overlay<'a>(
    base: &[(&'a str, &'a str)],
    over: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut all = base.to_vec();
    for (p, b) in over {
        all.retain(|(q, _)| q != p);
        all.push((p, b));
    }
    all
}

/// A repository with a base, a fix a day later and, if given, a later
/// commit a month after; gold is the fix's change to `gold_paths`, the test
/// patch its change to the other files. Files are (path, body); every
/// commit holds the base's files with its own replacing them.
struct History {
    _dir: tempfile::TempDir,
    repo: Repository,
    base_tree: Oid,
    base_files: Vec<(String, String)>,
    inst: Instance,
}

impl History {
    fn new<'a>(
        base_files: &[(&'a str, &'a str)],
        fix: &[(&'a str, &'a str)],
        later: &[(&'a str, &'a str)],
        gold_paths: &[&str],
        issue: &str,
    ) -> History {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let with = |over: &[(&'a str, &'a str)]| overlay(base_files, over);
        let base = commit(&repo, base_files, BASE, None, "base");
        let fixed = commit(&repo, &with(fix), BASE + DAY, Some(base), "the fix");
        let mut tip = fixed;
        if !later.is_empty() {
            let after = overlay(&with(fix), later);
            tip = commit(&repo, &after, BASE + 31 * DAY, Some(fixed), "later");
        }
        repo.reference("refs/heads/main", tip, true, "").unwrap();
        let base_tree = repo.find_commit(base).unwrap().tree_id();
        let part = |keep: &dyn Fn(&str) -> bool| {
            let over: Vec<(&'a str, &'a str)> =
                fix.iter().copied().filter(|(p, _)| keep(p)).collect();
            patch(&repo, base_tree, tree(&repo, &with(&over)))
        };
        let gold = part(&|p| gold_paths.contains(&p));
        let test_patch = part(&|p| !gold_paths.contains(&p));
        let inst: Instance = serde_json::from_value(json!({
            "instance_id": "acme__fmt-7",
            "repo": "acme/fmt",
            "base_commit": base.to_string(),
            "patch": gold,
            "test_patch": test_patch,
            "problem_statement": issue,
            "version": "1.0",
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
        }))
        .unwrap();
        History {
            _dir: dir,
            repo,
            base_tree,
            base_files: base_files
                .iter()
                .map(|(p, b)| (p.to_string(), b.to_string()))
                .collect(),
            inst,
        }
    }

    /// The candidate: the base with `files` replaced.
    fn candidate(&self, files: &[(&str, &str)]) -> String {
        let base: Vec<(&str, &str)> = self
            .base_files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        patch(
            &self.repo,
            self.base_tree,
            tree(&self.repo, &overlay(&base, files)),
        )
    }

    fn scan(&self, candidate: &str) -> Scan {
        scan_files(self.repo.path(), &self.inst, &diff::read(candidate)).unwrap()
    }

    fn flagged(&self, files: &[(&str, &str)]) -> bool {
        let cand = self.candidate(files);
        let mut input = AuditInput::new(&self.inst, &cand);
        input.mirror = Some(self.repo.path());
        let by_audit = future_reason(&audit_static(&input)).is_some();
        assert_eq!(by_audit, self.scan(&cand).flagged().is_some());
        by_audit
    }
}

const FMT: &str = "def fmt(n):\n    return str(n)\n";
const FMT_TEST: &str = "from fmt import fmt\n\n\ndef test_fmt():\n    assert fmt(1000) == \"1000\"\n    assert fmt(2000000) == \"2000000\"\n    assert fmt(12345) == \"12345\"\n";
const FMT_TEST_FIXED: &str = "from fmt import fmt\n\n\ndef test_fmt():\n    assert fmt(1000) == \"1,000\"\n    assert fmt(2000000) == \"2,000,000\"\n    assert fmt(12345) == \"12,345\"\n\n\ndef test_fmt_negative_numbers():\n    assert fmt(-1000) == \"-1,000\"\n    assert fmt(-2000000) == \"-2,000,000\"\n    assert fmt(-12345) == \"-12,345\"\n";

fn fmt_history() -> History {
    History::new(
        &[("fmt.py", FMT), ("tests/test_fmt.py", FMT_TEST)],
        &[
            ("fmt.py", "def fmt(n):\n    return f\"{n:,}\"\n"),
            ("tests/test_fmt.py", FMT_TEST_FIXED),
        ],
        &[],
        &["fmt.py"],
        "fmt() should group thousands with commas.",
    )
}

/// django__django-11815, sympy__sympy-15349 and sympy__sympy-20154 in a
/// real submission (mini-swe-agent + Gemini 3 Pro, Verified): the candidate
/// updates the existing assertions to the values its new behaviour gives,
/// exactly as the fix's test patch does. Any fix that updates the test
/// writes those lines.
#[test]
fn updated_expected_values_are_not_a_copy() {
    let h = fmt_history();
    let mine = "def fmt(n):\n    return \"{:,}\".format(n)\n";
    let updated = FMT_TEST
        .replace("\"1000\"", "\"1,000\"")
        .replace("\"2000000\"", "\"2,000,000\"")
        .replace("\"12345\"", "\"12,345\"");
    let cand = h.candidate(&[("fmt.py", mine), ("tests/test_fmt.py", &updated)]);
    let best = h.scan(&cand).best_share().cloned().unwrap();
    assert!(best.share >= MIN_SHARE, "{best:#?}");
    assert_eq!(best.beyond(), 0, "{best:#?}");
    assert!(!h.flagged(&[("fmt.py", mine), ("tests/test_fmt.py", &updated)]));
    // The fix's new test reproduced as a block is a copy.
    assert!(h.flagged(&[("fmt.py", mine), ("tests/test_fmt.py", FMT_TEST_FIXED)]));
}

/// scikit-learn__scikit-learn-12585 and django__django-17087 (the same
/// submission): the candidate's own test of the behaviour has the hidden
/// test's name (from the issue's words) and one of its assertions, and
/// nothing else of it.
#[test]
fn a_test_of_the_same_behaviour_sharing_single_lines_is_not_a_copy() {
    let h = fmt_history();
    let mine = "def fmt(n):\n    return \"{:,}\".format(n)\n";
    let own_test = format!(
        "{FMT_TEST}\n\ndef test_fmt_negative_numbers():\n    # Negative numbers keep their sign in front.\n    value = -1000\n    assert fmt(value) == \"-1,000\"\n"
    );
    let cand = h.candidate(&[("fmt.py", mine), ("tests/test_fmt.py", &own_test)]);
    let best = h.scan(&cand).best_share().cloned().unwrap();
    assert_eq!(best.beyond(), 0, "{best:#?}");
    assert!(!h.flagged(&[("fmt.py", mine), ("tests/test_fmt.py", &own_test)]));
}

/// matplotlib__matplotlib-25775 (the same submission): the docstring lines
/// gold shares with the candidate ("Set whether to use antialiased
/// rendering.") are those of other classes in the base tree, and django's
/// tests (django__django-13925) repeat the file's own assertion lines: what
/// the agent could read at the base is no copy of the future.
#[test]
fn lines_the_base_tree_already_has_are_not_evidence() {
    let doc = |first: &str, second: &str| {
        format!("    def set_flag(self, b):\n        \"\"\"\n        {first}\n        {second}\n        \"\"\"\n        self._b = b\n")
    };
    let (a, b) = (
        "Set whether to use antialiased rendering.",
        "The default is the rcParam text.antialiased.",
    );
    let line = format!("class Line:\n{}", doc(a, b));
    let text = "class Text:\n    pass\n";
    // The fix gives Text the docstring Line already has.
    let fixed = format!("class Text:\n{}", doc(a, b));
    let h = History::new(
        &[("line.py", &line), ("text.py", text)],
        &[("text.py", &fixed)],
        &[],
        &["text.py"],
        "Text has no set_flag.",
    );
    let cand = h.candidate(&[("text.py", &fixed)]);
    let e = h.scan(&cand).best_share().cloned().unwrap();
    assert_eq!((e.share, e.beyond()), (1.0, 0), "{e:#?}");
    assert!(!h.flagged(&[("text.py", &fixed)]));
    // The same copy of a fix whose wording is its own is flagged.
    let own = format!(
        "class Text:\n{}",
        doc(
            "Choose whether the glyphs are drawn with antialiasing on.",
            "Without a choice the text follows its figure's setting."
        )
    );
    let h = History::new(
        &[("line.py", &line), ("text.py", text)],
        &[("text.py", &own)],
        &[],
        &["text.py"],
        "Text has no set_flag.",
    );
    assert!(h.flagged(&[("text.py", &own)]));
}

/// pytest-dev__pytest-7432 (the same submission): the candidate's test
/// reproduces the lines the issue quotes (`def test_skip_location() ->
/// None:`), which the fix's test quotes too.
#[test]
fn lines_the_issue_quotes_are_not_evidence() {
    let test_fixed = "def test_skip_location():\n    # pytest -rs --runxfail must report the test's own line\n    result = run_skip_location_with_runxfail()\n    assert result.location_line == 2\n";
    let h = History::new(
        &[("skip.py", "def where(rep):\n    return rep.raised_at\n"), ("tests/test_skip.py", "\n")],
        &[
            ("skip.py", "def where(rep):\n    return rep.item_line\n"),
            ("tests/test_skip.py", test_fixed),
        ],
        &[],
        &["skip.py"],
        "With --runxfail the location is wrong:\n\n    def test_skip_location():\n    # pytest -rs --runxfail must report the test's own line\n        result = run_skip_location_with_runxfail()\n",
    );
    let cand = h.candidate(&[
        ("skip.py", "def where(rep):\n    return rep.item_line\n"),
        ("tests/test_skip.py", test_fixed),
    ]);
    let e = h.scan(&cand).best_share().cloned().unwrap();
    // Three of the four test lines are the issue's; the fourth alone is
    // not a block.
    assert_eq!(e.beyond(), 0, "{e:#?}");
    assert!(!h.flagged(&[
        ("skip.py", "def where(rep):\n    return rep.item_line\n"),
        ("tests/test_skip.py", test_fixed),
    ]));
}

/// matplotlib__matplotlib-25775 (the same submission): beyond gold, the
/// candidate threads the new `antialiased` parameter through the mathtext
/// functions, as a commit two months after the fix did; the code lines are
/// what the names dictate, with no wording of the later commit's own.
#[test]
fn code_alone_beyond_gold_is_not_a_copy() {
    let base = "def to_raster(self):\n    return draw(self.glyphs, aa=RC_AA)\n\n\ndef parse(s, dpi):\n    return _parse_cached(s, dpi)\n";
    let fix = "def to_raster(self):\n    return draw(self.glyphs, aa=RC_AA)\n\n\ndef parse(s, dpi):\n    return _parse_cached(s, dpi)\n\n\ndef get_antialiased(self):\n    return self._antialiased\n";
    let later = "def to_raster(self, antialiased=None):\n    return draw(self.glyphs, aa=antialiased)\n\n\ndef parse(s, dpi, antialiased=None):\n    return _parse_cached(s, dpi, antialiased)\n\n\ndef get_antialiased(self):\n    return self._antialiased\n";
    let h = History::new(
        &[("text.py", base)],
        &[("text.py", fix)],
        &[("text.py", later)],
        &["text.py"],
        "Add get/set_antialiased to Text objects.",
    );
    let cand = h.candidate(&[("text.py", later)]);
    let e = h.scan(&cand).best_share().cloned().unwrap();
    assert!(e.share >= MIN_SHARE && e.beyond() >= MIN_BEYOND, "{e:#?}");
    assert!(!h.flagged(&[("text.py", later)]));
}

/// matplotlib__matplotlib-25775 (the same submission): the numpydoc line
/// `antialiased : bool` of the new setter's docstring is the fix's too; the
/// parameter's name and type dictate it.
#[test]
fn a_parameter_declaration_is_not_prose() {
    let base = "class Text:\n    pass\n";
    let fixed = "class Text:\n    def set_antialiased(self, antialiased, threshold=0.5):\n        \"\"\"\n        Parameters\n        ----------\n        antialiased : bool\n        threshold : float, default: 0.5\n        \"\"\"\n        self._antialiased = antialiased\n";
    let h = History::new(
        &[("text.py", base)],
        &[("text.py", fixed)],
        &[],
        &["text.py"],
        "Text has no set_antialiased.",
    );
    let cand = h.candidate(&[("text.py", fixed)]);
    let e = h.scan(&cand).best_share().cloned().unwrap();
    assert_eq!((e.share, e.beyond()), (1.0, 0), "{e:#?}");
    assert!(!h.flagged(&[("text.py", fixed)]));
    for (line, declares) in [
        ("        antialiased : bool", true),
        ("    X : array-like, shape (n_samples, n_features)", true),
        ("    *args, **kwargs :", true),
        ("    Note: the text is drawn twice.", false),
        ("    Set whether to use antialiased rendering.", false),
    ] {
        assert_eq!(PARAM_LINE.is_match(line), declares, "{line}");
    }
}
