#!/usr/bin/env python3
# The per-test statuses of two runs compared: each instance's
# test_output.txt, its pytest -rA summary lines (PASSED/FAILED/SKIPPED/
# ERROR/XFAIL/XPASS <test id>), in two folders of evaluations
# (<log root>/<run id>/<model>). Prints the first 20 differences and the
# counts.
#
#   harness-scripts/test-statuses.py RUN_A/gold RUN_B/gold
import os, re, sys
a, b = sys.argv[1:3]
pat = re.compile(r'^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\s+(\S+)')
def load(d):
    out = {}
    for inst in sorted(os.listdir(d)):
        p = os.path.join(d, inst, 'test_output.txt')
        if not os.path.exists(p): continue
        st = {}
        for line in open(p, errors='replace'):
            m = pat.match(line)
            if m: st[m.group(2)] = m.group(1)
        out[inst] = st
    return out
A, B = load(a), load(b)
n = diff = 0
for inst in sorted(set(A) | set(B)):
    sa, sb = A.get(inst, {}), B.get(inst, {})
    for t in set(sa) | set(sb):
        n += 1
        if sa.get(t) != sb.get(t):
            diff += 1
            if diff <= 20: print('differs', inst, t, sa.get(t), sb.get(t))
print(f'{len(A)} vs {len(B)} instances, {n} test statuses, {diff} differ')
