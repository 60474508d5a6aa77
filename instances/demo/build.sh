#!/usr/bin/env bash
# Rebuilds the demo dataset from scratch: a small real project with its own
# git history (repos/patchgrade__demo-calc.fi, a `git fast-export` stream that
# patchgrade imports without network), its task instances (dataset.jsonl)
# and a predictions file covering every outcome (predictions.jsonl).
#
# The FAIL_TO_PASS / PASS_TO_PASS ids are not written by hand: they come from
# running the tests at base + test patch and at gold + test patch.
# Usage: instances/demo/build.sh   (needs git and python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GIT_AUTHOR_NAME="Demo Dev" GIT_AUTHOR_EMAIL="dev@demo.invalid"
export GIT_COMMITTER_NAME="Demo Dev" GIT_COMMITTER_EMAIL="dev@demo.invalid"
commit() { # commit MESSAGE DATE
    git add -A && GIT_AUTHOR_DATE="$2" GIT_COMMITTER_DATE="$2" git commit -q -m "$1"
}
cd "$work" && git init -q -b main repo && cd repo

mkdir -p calc tests
cat > calc/__init__.py <<'PY'
"""A tiny calculator, the patchgrade demo project."""
from .ops import add, sub, mul, div, CalcError
from .stats import mean
PY
cat > calc/ops.py <<'PY'
class CalcError(Exception):
    """Raised for invalid calculations."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b
PY
cat > calc/stats.py <<'PY'
def mean(values):
    return sum(values) / len(values)
PY
touch tests/__init__.py
cat > tests/test_ops.py <<'PY'
import unittest

from calc import add, sub, mul, div


class TestOps(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_sub(self):
        self.assertEqual(sub(2, 3), -1)

    def test_mul(self):
        self.assertEqual(mul(4, 3), 12)

    def test_div(self):
        self.assertEqual(div(6, 3), 2)
PY
cat > tests/test_stats.py <<'PY'
import unittest

from calc import mean


class TestStats(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)
PY
printf '# calc\n\nA tiny calculator.\n' > README.md
commit "Initial calculator" "2024-01-02T10:00:00Z"

cat > calc/parse.py <<'PY'
from .ops import add, sub, mul, div

OPS = {"+": add, "-": sub, "*": mul, "/": div}


def evaluate(expr):
    """Evaluate "a op b" where a and b are integers."""
    left, op, right = expr.split(" ")
    return OPS[op](int(left), int(right))
PY
cat > tests/test_parse.py <<'PY'
import unittest

from calc.parse import evaluate


class TestParse(unittest.TestCase):
    def test_spaced(self):
        self.assertEqual(evaluate("1 + 2"), 3)

    def test_mul(self):
        self.assertEqual(evaluate("3 * 4"), 12)
PY
commit "Add expression evaluation" "2024-01-09T10:00:00Z"
base=$(git rev-parse HEAD)

# Later history, so that the checkout has future commits to hide.
printf '# calc\n\nA tiny calculator.\n\nRun the tests: python3 -m unittest -v\n' > README.md
commit "Document how to run the tests" "2024-02-01T10:00:00Z"

# Each instance: a gold patch and a test patch against $base, made as real
# diffs of edits.
mkdir -p "$work/out"
make_diff() { # make_diff NAME -- edits happen in the callback, diff is saved
    git diff > "$work/out/$1.diff"
    git checkout -q -- . && git clean -qfd
}
git checkout -q "$base"

# 1: div by zero should raise CalcError.
python3 - <<'PY'
import re
p = "calc/ops.py"; s = open(p).read()
s = s.replace("def div(a, b):\n    return a / b\n",
 "def div(a, b):\n    if b == 0:\n        raise CalcError(\"division by zero\")\n    return a / b\n")
open(p, "w").write(s)
PY
make_diff gold1
cat >> tests/test_ops.py <<'PY'


class TestDivZero(unittest.TestCase):
    def test_div_zero_raises_calc_error(self):
        from calc import CalcError
        with self.assertRaises(CalcError):
            div(1, 0)
PY
make_diff test1

# 2: evaluate should accept expressions without spaces.
python3 - <<'PY'
p = "calc/parse.py"; s = open(p).read()
s = s.replace('''    left, op, right = expr.split(" ")
    return OPS[op](int(left), int(right))''', '''    for i, ch in enumerate(expr.strip()):
        if ch in OPS and i > 0:
            left, op, right = expr[:i], ch, expr[i + 1:]
            return OPS[op](int(left), int(right))
    raise ValueError("not an expression: %r" % expr)''')
open(p, "w").write(s)
PY
make_diff gold2
python3 - <<'PY'
p = "tests/test_parse.py"; s = open(p).read()
s += '''
    def test_unspaced(self):
        self.assertEqual(evaluate("1+2"), 3)

    def test_negative_result(self):
        self.assertEqual(evaluate("2-5"), -3)
'''
open(p, "w").write(s)
PY
make_diff test2

# 3: mean of an empty list should be 0.
python3 - <<'PY'
p = "calc/stats.py"; s = open(p).read()
s = s.replace("def mean(values):\n", "def mean(values):\n    if not values:\n        return 0\n")
open(p, "w").write(s)
PY
make_diff gold3
cat >> tests/test_stats.py <<'PY'

    def test_mean_empty(self):
        self.assertEqual(mean([]), 0)
PY
make_diff test3

# 4: mul should support repeating strings only with ints (mul("ab", 2)).
python3 - <<'PY'
p = "calc/ops.py"; s = open(p).read()
s = s.replace("def mul(a, b):\n    return a * b\n",
 "def mul(a, b):\n    if isinstance(a, str) and not isinstance(b, int):\n        raise CalcError(\"can only repeat a string an integer number of times\")\n    return a * b\n")
open(p, "w").write(s)
PY
make_diff gold4
cat >> tests/test_ops.py <<'PY'


class TestMulStrings(unittest.TestCase):
    def test_repeat(self):
        self.assertEqual(mul("ab", 2), "abab")

    def test_repeat_float_raises(self):
        from calc import CalcError
        with self.assertRaises(CalcError):
            mul("ab", 1.5)
PY
make_diff test4

# 5: sub with three arguments (an issue nobody answered: empty patch).
python3 - <<'PY'
p = "calc/ops.py"; s = open(p).read()
s = s.replace("def sub(a, b):\n    return a - b\n", "def sub(a, b, *rest):\n    return a - b - sum(rest)\n")
open(p, "w").write(s)
PY
make_diff gold5
cat >> tests/test_ops.py <<'PY'


class TestSubMany(unittest.TestCase):
    def test_sub_many(self):
        self.assertEqual(sub(10, 1, 2, 3), 4)
PY
make_diff test5

# Candidate patches from a pretend agent, one per outcome.
# 1 resolved: a different but correct fix.
python3 - <<'PY'
p = "calc/ops.py"; s = open(p).read()
s = s.replace("def div(a, b):\n    return a / b\n",
 "def div(a, b):\n    try:\n        return a / b\n    except ZeroDivisionError as e:\n        raise CalcError(str(e)) from None\n")
open(p, "w").write(s)
PY
make_diff cand1
# 2 unresolved: handles "1+2" but not "2-5" (FAIL_TO_PASS still fails).
python3 - <<'PY'
p = "calc/parse.py"; s = open(p).read()
s = s.replace('    left, op, right = expr.split(" ")\n', '    if "+" in expr and " " not in expr:\n        left, right = expr.split("+")\n        return add(int(left), int(right))\n    left, op, right = expr.split(" ")\n')
open(p, "w").write(s)
PY
make_diff cand2
# 3 broken PASS_TO_PASS: empty list fixed, but mean now truncates.
python3 - <<'PY'
p = "calc/stats.py"; s = open(p).read()
s = s.replace("def mean(values):\n    return sum(values) / len(values)\n", "def mean(values):\n    if not values:\n        return 0\n    return sum(values) // len(values) + 1\n")
open(p, "w").write(s)
PY
make_diff cand3
cd "$work"
python3 "$here/build_dataset.py" "$work/out" "$base" "$work/repo"
cd "$work/repo" && git checkout -q main
mkdir -p "$here/repos"
git fast-export --all --reencode=yes > "$here/repos/patchgrade__demo-calc.fi"
echo "demo rebuilt: $(wc -l < "$here/dataset.jsonl") instances, base $base"
