# Workload of the perf demo (patchgrade__demo-perf-1): the ranking of a
# 18,000-word text with a 7,000-word vocabulary, Zipf-like frequencies,
# generated deterministically (same text in every run and every variant).
# It runs from the tree being measured, which is the working directory.
import os
import sys

sys.path.insert(0, os.getcwd())
from wordfreq import top_words  # noqa: E402

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "so"]


def make_text(n_words=18000, vocab=7000, seed=12345):
    words = []
    for i in range(vocab):
        w, j = "", i
        for _ in range(3):
            w += SYLLABLES[j % 10]
            j //= 10
        words.append(w + str(i % 7))
    x, out = seed, []
    for _ in range(n_words):
        x = (x * 1103515245 + 12345) % 2**31
        out.append(words[int(vocab * (x / 2**31) ** 13)])
    return " ".join(out)


top = top_words(make_text(), 10)
print(" ".join("%s:%d" % p for p in top))
