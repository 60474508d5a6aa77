//! The shapes fixture of the reliability tests: `acme/shapes` with a
//! clamp() bug, its gold fix, an overfitted fix, and two instances whose
//! held-out test gold passes.

use serde_json::json;

use super::{instance, jsonl, FixtureRepo, Sandbox};

pub const SHAPES_SPEC: &str = "repo: acme/shapes\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
pub const CORE: &str =
    "def clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef scale(x, k):\n    return x * k\n";
pub const TESTS: &str = "import unittest\nfrom shapes.core import clamp, scale\n\n\nclass TestShapes(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-5, 0, 3), 0)\n\n    def test_scale(self):\n        self.assertEqual(scale(2, 3), 6)\n";

/// The shapes project: a clamp() bug, its gold fix, an overfitted fix,
/// and instances `s-over`, `s-gold` with a held-out test gold passes.
pub struct Shapes {
    pub sb: Sandbox,
    pub gold: String,
    pub overfit: String,
}

pub fn shapes() -> Shapes {
    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/shapes");
    repo.commit(
        &[
            ("shapes/__init__.py", Some(b"")),
            ("shapes/core.py", Some(CORE.as_bytes())),
            ("tests/__init__.py", Some(b"")),
            ("tests/test_core.py", Some(TESTS.as_bytes())),
        ],
        "initial",
    );
    let base = repo.head();
    let fixed = CORE.replace("return max(lo, x)", "return min(hi, max(lo, x))");
    let gold = repo.diff_of(&[("shapes/core.py", Some(fixed.as_bytes()))], false);
    let overfit = CORE.replace("return max(lo, x)", "return 3 if x == 9 else max(lo, x)");
    let overfit = repo.diff_of(&[("shapes/core.py", Some(overfit.as_bytes()))], false);
    let high =
        format!("{TESTS}\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n");
    let test_patch = repo.diff_of(&[("tests/test_core.py", Some(high.as_bytes()))], false);
    let far = format!(
        "{TESTS}\n    def test_high_far(self):\n        self.assertEqual(clamp(100, 0, 3), 3)\n"
    );
    let held_patch = repo.diff_of(&[("tests/test_core.py", Some(far.as_bytes()))], false);
    let f2p = ["tests.test_core.TestShapes.test_high"];
    let p2p = ["tests.test_core.TestShapes.test_low"];
    let mut rows = Vec::new();
    for id in ["s-over", "s-gold"] {
        let mut row = instance(id, "acme/shapes", &base, &gold, &test_patch, &f2p, &p2p);
        row["HELD_OUT_TESTS"] = json!(["tests.test_core.TestShapes.test_high_far"]);
        row["held_out_test_patch"] = json!(held_patch);
        rows.push(row);
    }
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write("specs/shapes.yaml", SHAPES_SPEC);
    Shapes { sb, gold, overfit }
}
