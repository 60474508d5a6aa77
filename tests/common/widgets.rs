//! The widgets fixture shared by the local and docker end-to-end tests:
//! `acme/widgets`, a package with a clamp() bug, its gold fix, a wrong fix
//! and the test patch that catches the bug.

use serde_json::Value;

use super::{instance, FixtureRepo, Sandbox};

pub const CORE_BUGGY: &str = "def clamp(x, lo, hi):\n    return max(lo, x)\n";
pub const CORE_FIXED: &str = "def clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n";
/// Fixes the low bound but gets the high one wrong.
pub const CORE_WRONG: &str = "def clamp(x, lo, hi):\n    return min(hi - 1, max(lo, x))\n";
pub const TESTS_BASE: &str = "import unittest\nfrom widgets.core import clamp\n\n\nclass TestClamp(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-5, 0, 3), 0)\n";
/// The test method the test patch adds: fails on the bug, passes on gold.
pub const HIGH: &str = "    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n";
/// A spec of `acme/widgets` for the Docker tests: unittest on Python 3.11.
pub const UNITTEST_SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
pub const F2P: &str = "tests.test_core.TestClamp.test_high";
pub const P2P: &str = "tests.test_core.TestClamp.test_low";

pub struct Widgets {
    pub sb: Sandbox,
    pub repo: FixtureRepo,
    /// The base commit.
    pub base: String,
    pub gold: String,
    /// Sets widgets/core.py to [`CORE_WRONG`].
    pub wrong: String,
    /// Adds [`HIGH`] to the tests.
    pub test_patch: String,
}

impl Widgets {
    /// The repository in the sandbox's mirrors, its base commit holding the
    /// package, its tests and `extra` files; `spec` as specs/widgets.yaml.
    /// The patches are diffs against the base commit.
    pub fn new(spec: &str, extra: &[(&str, &[u8])]) -> Widgets {
        let sb = Sandbox::new();
        let repo = FixtureRepo::new(&sb, "acme/widgets");
        let mut files: Vec<(&str, Option<&[u8]>)> = vec![
            ("widgets/__init__.py", Some(b"")),
            ("widgets/core.py", Some(CORE_BUGGY.as_bytes())),
            ("tests/__init__.py", Some(b"")),
            ("tests/test_core.py", Some(TESTS_BASE.as_bytes())),
        ];
        files.extend(extra.iter().map(|(p, b)| (*p, Some(*b))));
        repo.commit(&files, "initial");
        let base = repo.head();
        let gold = repo.diff_of(&[("widgets/core.py", Some(CORE_FIXED.as_bytes()))], false);
        let wrong = repo.diff_of(&[("widgets/core.py", Some(CORE_WRONG.as_bytes()))], false);
        sb.write("specs/widgets.yaml", spec);
        let mut w = Widgets {
            sb,
            repo,
            base,
            gold,
            wrong,
            test_patch: String::new(),
        };
        w.test_patch = w.tests_adding(HIGH);
        w
    }

    /// A dataset row for the fixture's issue, with its gold and test patch.
    pub fn row(&self, id: &str) -> Value {
        instance(
            id,
            "acme/widgets",
            &self.base,
            &self.gold,
            &self.test_patch,
            &[F2P],
            &[P2P],
        )
    }

    /// A test patch that adds `body` (a test method of TestClamp) to the
    /// tests, as a diff against the current HEAD.
    pub fn tests_adding(&self, body: &str) -> String {
        let tests = format!("{TESTS_BASE}\n{body}");
        self.repo
            .diff_of(&[("tests/test_core.py", Some(tests.as_bytes()))], false)
    }
}
