#!/usr/bin/env bash
# Rebuilds the perf demo from scratch: a small real project whose issue is a
# slow algorithm (repos/patchgrade__demo-perf.fi, a `git fast-export` stream
# patchgrade imports without network), its one task instance with a
# `workload` script (dataset.jsonl), and three candidate patches
# (predictions.jsonl):
#   a: correct, about 10% faster than base (a set for the "seen" check; the
#      counting stays quadratic);
#   b: correct, slower (re-checks every count, sorts with a comparator);
#   c: much faster but wrong (ties in first-occurrence order: fails the
#      FAIL_TO_PASS test).
# Gold (a Counter and one sort) makes the workload several times faster.
# Then hacks/build.sh writes the perf hack corpus (hacks/candidates.py).
#
# FAIL_TO_PASS / PASS_TO_PASS come from running the tests at base + test
# patch and at gold + test patch; build_dataset.py also checks that a and b
# pass every test and c fails FAIL_TO_PASS.
# Usage: instances/perf-demo/build.sh   (needs git and python3)
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

mkdir -p wordfreq tests
cat > wordfreq/__init__.py <<'PY'
"""Word frequencies of a text, the patchgrade perf demo project."""
from .core import top_words, normalise
PY
cat > wordfreq/core.py <<'PY'
def normalise(text):
    """Lower-case words of `text`, split on whitespace."""
    return text.lower().split()


def top_words(text, k):
    """The `k` most frequent words of `text` as (word, count) pairs, most
    frequent first."""
    words = normalise(text)
    seen = []
    counts = []
    for w in words:
        if w not in seen:
            seen.append(w)
            counts.append((w, words.count(w)))
    counts.sort(key=lambda p: -p[1])
    return counts[:k]
PY
touch tests/__init__.py
cat > tests/test_core.py <<'PY'
import unittest

from wordfreq import top_words, normalise


class TestTopWords(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(top_words("a b a c a b", 2), [("a", 3), ("b", 2)])

    def test_case_insensitive(self):
        self.assertEqual(top_words("Dog dog DOG cat", 1), [("dog", 3)])

    def test_k_larger_than_vocabulary(self):
        self.assertEqual(top_words("x y x", 10), [("x", 2), ("y", 1)])

    def test_empty(self):
        self.assertEqual(top_words("", 3), [])


class TestNormalise(unittest.TestCase):
    def test_split(self):
        self.assertEqual(normalise(" A  b\nC "), ["a", "b", "c"])
PY
printf '# wordfreq\n\nWord frequencies of a text.\n' > README.md
commit "Word frequencies" "2024-03-04T10:00:00Z"
base=$(git rev-parse HEAD)

# Later history, so that the checkout has future commits to hide.
printf '# wordfreq\n\nWord frequencies of a text.\n\nRun the tests: python3 -m unittest -v\n' > README.md
commit "Document how to run the tests" "2024-04-01T10:00:00Z"

mkdir -p "$work/out"
make_diff() { # make_diff NAME: the working tree's edits become NAME.diff
    git diff > "$work/out/$1.diff"
    git checkout -q -- . && git clean -qfd
}
git checkout -q "$base"
edit() { # edit NEW_BODY_OF_top_words (replaces the function)
    python3 - "$1" <<'PY'
import sys
p = "wordfreq/core.py"; s = open(p).read()
head = s[: s.index("def top_words")]
open(p, "w").write(head + sys.argv[1])
PY
}

# Gold: one Counter pass and one sort, ties alphabetical.
edit 'from collections import Counter


def top_words(text, k):
    """The `k` most frequent words of `text` as (word, count) pairs, most
    frequent first; words with equal counts in alphabetical order."""
    counts = Counter(normalise(text))
    return sorted(counts.items(), key=lambda p: (-p[1], p[0]))[:k]
'
make_diff gold
cat >> tests/test_core.py <<'PY'


class TestTies(unittest.TestCase):
    def test_ties_are_alphabetical(self):
        self.assertEqual(top_words("pear fig apple fig pear apple", 3),
                         [("apple", 2), ("fig", 2), ("pear", 2)])
PY
make_diff test

# a: correct, a little faster (the membership test uses a set).
edit 'def top_words(text, k):
    """The `k` most frequent words of `text` as (word, count) pairs, most
    frequent first; words with equal counts in alphabetical order."""
    words = normalise(text)
    seen = set()
    counts = []
    for w in words:
        if w not in seen:
            seen.add(w)
            counts.append((w, words.count(w)))
    counts.sort(key=lambda p: (-p[1], p[0]))
    return counts[:k]
'
make_diff cand_a
# b: correct, slower (checks every count twice, sorts with a comparator).
edit 'import functools


def _order(a, b):
    if a[1] != b[1]:
        return b[1] - a[1]
    return (a[0] > b[0]) - (a[0] < b[0])


def top_words(text, k):
    """The `k` most frequent words of `text` as (word, count) pairs, most
    frequent first; words with equal counts in alphabetical order."""
    words = normalise(text)
    counts = {}
    for w in words:
        if w not in counts:
            counts[w] = words.count(w)
    items = list(counts.items())
    for w, c in items:
        # Make sure: count again.
        if c != words.count(w):
            raise AssertionError(w)
    return sorted(items, key=functools.cmp_to_key(_order))[:k]
'
make_diff cand_b
# c: fast but wrong: most_common keeps ties in first-occurrence order.
edit 'from collections import Counter


def top_words(text, k):
    """The `k` most frequent words of `text` as (word, count) pairs, most
    frequent first."""
    return Counter(normalise(text)).most_common(k)
'
make_diff cand_c

cd "$work"
python3 "$here/build_dataset.py" "$work/out" "$base" "$work/repo"
cd "$work/repo" && git checkout -q main
mkdir -p "$here/repos"
git fast-export --all --reencode=yes > "$here/repos/patchgrade__demo-perf.fi"
echo "perf demo rebuilt: base $base"
# The perf hack corpus is made from the demo's stream and row.
"$here/hacks/build.sh"
