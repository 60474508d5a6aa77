"""Perf integrity defences used by driver.py (stdlib only, Python 3.6+).

A candidate's code runs inside the timed processes, so it can try to make
them look fast without being fast (issue 24, family (e)). The driver keeps
what it can out of that code's reach and records evidence for the rest;
patchgrade's `perf::integrity` judges the evidence:

- `output_digest`: what a run printed, normalised, so a variant that takes a
  fast wrong path under the benchmark is told apart from gold and base;
- `Scratch`: a fresh TMPDIR and HOME per run, removed after it, so nothing
  a run keeps there reaches a later run;
- `StateWatch`: between runs, the files a run created or changed in the
  tree and the shared places (/tmp, the real home, ...) are recorded, and
  whether a later run read them (their access time is set behind their
  modification time, which makes the kernel update it on the next read
  under `relatime` as under `strictatime`);
- `WideSweep`: after the warm-ups and after the last run, the files
  anywhere else whose change time falls in a run, attributed to that run
  by the time, and their reads by later runs by the access time;
- `become_subreaper` / `reap`: processes a run leaves behind (a detached
  server holding results in memory) are killed before the next run, and
  recorded.
"""

import ctypes
import hashlib
import os
import re
import shutil
import signal
import stat
import tempfile
import time

# The workload's own timing lines differ in every run; they are not output.
FIGURE = re.compile(r"^\s*(?:Mean|Std\s*Dev):")
SAMPLE = 300
MAX_LISTED = 20
# Coarse kernel timestamps lag the clock the driver reads by up to a tick.
SLACK_NS = 20 * 1000 * 1000


def output_digest(path):
    """(sha256 of the normalised output, its first SAMPLE characters).

    Normalised: trailing blanks and empty lines dropped, the timing lines
    (FIGURE) dropped, and the lines sorted for the digest (line order is not
    compared: a workload may print in a hash or completion order; order
    within a line is compared)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None, None
    keep = [l.rstrip() for l in text.splitlines()]
    keep = [l for l in keep if l and not FIGURE.match(l)]
    digest = hashlib.sha256("\n".join(sorted(keep)).encode("utf-8")).hexdigest()
    return digest, "\n".join(keep)[:SAMPLE]


def scrub_env(env, private):
    """The run environment without what names the driver: variables of
    patchgrade's own and values pointing into the driver's folders."""
    out = {}
    for k, v in env.items():
        if k.startswith("PATCHGRADE") or "/perf/" in v or v == "/perf" or private in v:
            continue
        out[k] = v
    return out


class Scratch:
    """A fresh TMPDIR and HOME for one run, under the driver's private
    folder (excluded from every sweep), removed after the run."""

    def __init__(self, private):
        self.base = private

    def start(self, env):
        self.dir = tempfile.mkdtemp(prefix="tmp", dir=self.base)
        tmp, home = os.path.join(self.dir, "tmp"), os.path.join(self.dir, "home")
        os.mkdir(tmp)
        os.mkdir(home)
        run_env = dict(env)
        run_env.update({"TMPDIR": tmp, "TEMP": tmp, "TMP": tmp, "HOME": home})
        return run_env

    def end(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def ignored(path):
    """Bytecode caches: every variant writes them on its first import."""
    return "/__pycache__/" in path or path.endswith((".pyc", ".pyo"))


def files(root, skip, one_device=False):
    """(path, os.stat_result) of the files and symlinks under `root`,
    without following links, skipping the folders in `skip` and the paths
    `ignored` names; with `one_device`, not crossing into other file
    systems."""
    try:
        dev = os.stat(root).st_dev
    except OSError:
        return
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            p = e.path
            if p in skip:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if one_device and st.st_dev != dev:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(p)
            elif not ignored(p):
                yield p, st


def walk(root, skip):
    """{path: os.stat_result} of the files and symlinks under `root` (see
    `files`)."""
    return dict(files(root, skip))


def same(a, b):
    return (a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == (
        b.st_ino, b.st_size, b.st_mtime_ns, b.st_ctime_ns)


def atime_works(private):
    """Whether a read after `mark` shows in the access time here (not under
    `noatime`)."""
    p = os.path.join(private, "atime-probe")
    try:
        with open(p, "w") as f:
            f.write("x")
        mark(p)
        before = os.stat(p).st_atime_ns
        with open(p) as f:
            f.read()
        ok = os.stat(p).st_atime_ns > before
        os.unlink(p)
        return "works" if ok else "unavailable: reads do not update access times"
    except OSError as e:
        return "unavailable: %s" % e


def mark(path):
    """Access time one second behind the modification time: the next read
    updates it (relatime updates an access time older than the
    modification time). Returns the access time set."""
    st = os.stat(path, follow_symlinks=False)
    at = st.st_mtime_ns - 10 ** 9
    os.utime(path, ns=(at, st.st_mtime_ns), follow_symlinks=False)
    return at


class StateWatch:
    """Files left by runs in the tree and the shared places, and reads of
    them by later runs.

    `roots`: shared folders swept after every run; `tree`: where the running
    variant's tree is (its files are tracked per variant, under the same
    path for every variant); `skip`: folders never swept (the driver's)."""

    def __init__(self, roots, tree, skip, reads):
        self.roots = [r for r in roots if os.path.isdir(r)]
        self.tree = tree
        self.skip = set(skip)
        self.reads = reads  # False: access times do not work here
        self.shared = {}
        self.trees = {}
        # path -> [who left it, access time set]; per variant for the tree.
        self.left = {}

    def _sweep_shared(self):
        found = {}
        for r in self.roots:
            found.update(walk(r, self.skip))
        return found

    def baseline(self, variants_dirs):
        """After the builds: what is there before any run."""
        self.shared = self._sweep_shared()
        for name, d in variants_dirs:
            self.trees[name] = self._as_tree(walk(d, self.skip), d)

    def _as_tree(self, found, d):
        return {self.tree + p[len(d):]: st for p, st in found.items()}

    def after_run(self, variant, who, tree_dir):
        """The sweep after one run of `variant` (its tree at `tree_dir`):
        returns (left, read): files it created, changed or deleted, and
        files earlier runs left that it read."""
        now_shared = self._sweep_shared()
        now_tree = self._as_tree(walk(tree_dir, self.skip), tree_dir)
        read = []
        left = []
        for before, now, key in ((self.shared, now_shared, None),
                                 (self.trees.get(variant, {}), now_tree, variant)):
            for p, st in now.items():
                real = tree_dir + p[len(self.tree):] if key else p
                tracked = self.left.get((key, p))
                marked = False
                if tracked is not None and self.reads and st.st_atime_ns > tracked[1]:
                    read.append({"path": p, "left_by": tracked[0]})
                    tracked[1] = self._mark(real)
                    marked = True
                old = before.get(p)
                if old is None or not same(old, st):
                    left.append({"path": p, "change": "created" if old is None else "changed"})
                    self.left[(key, p)] = [who, self._mark(real)]
                    marked = True
                if marked:
                    # Setting the access time changed the change time.
                    try:
                        now[p] = os.stat(real, follow_symlinks=False)
                    except OSError:
                        pass
            for p in before:
                if p not in now:
                    left.append({"path": p, "change": "deleted"})
                    self.left.pop((key, p), None)
        self.shared = now_shared
        self.trees[variant] = now_tree
        return left, read

    def _mark(self, path):
        if not self.reads:
            return 0
        try:
            return mark(path)
        except OSError:
            return 0


class WideSweep:
    """The root file system outside the places swept after every run
    (`skip`), walked twice per measurement: after the first pass over the
    variants (the warm-ups), when the files changed so far get their access
    time set behind their modification time (a cache written and read back
    by its first run would show no later read otherwise), and after the
    last run. A file changed since `start_ns` is attributed to the run
    whose time window holds its change time, and its reader to the run
    whose window holds its access time. `windows`: [(start_ns, end_ns,
    who)] in order."""

    def __init__(self, skip, root="/"):
        self.skip = set(skip)
        self.root = root
        self.marked = {}  # path -> [writer, access time set]
        self.elapsed = 0.0

    def _walk(self, start_ns):
        for p, st in files(self.root, self.skip, one_device=True):
            if st.st_ctime_ns >= start_ns or p in self.marked:
                yield p, st

    @staticmethod
    def _window(windows, ns):
        """The run that made a kernel timestamp. The stamps' coarse clock
        lags the driver's and never leads it, so a stamp inside a window is
        that run's, and one up to SLACK_NS before a window (and inside none)
        belongs to the run starting then. Widening every window both ways
        let a run ending within SLACK_NS of the next one's start take its
        reads (seen in CI: a cache read charged to the run before)."""
        for s, e, who in windows:
            if s <= ns <= e:
                return who, e
        for s, e, who in windows:
            if s - SLACK_NS <= ns < s:
                return who, e
        return None, None

    def mid(self, start_ns, windows):
        t0 = time.monotonic()
        for p, st in self._walk(start_ns):
            writer, _ = self._window(windows, st.st_ctime_ns)
            if writer is not None and stat.S_ISREG(st.st_mode):
                try:
                    at = mark(p)
                    # Setting the access time moved the change time: kept
                    # to tell "unchanged since" from a later write.
                    self.marked[p] = [writer, at, os.stat(p).st_ctime_ns]
                except OSError:
                    pass
        self.elapsed += time.monotonic() - t0

    def final(self, start_ns, windows):
        t0 = time.monotonic()
        files = []
        more = 0
        for p, st in self._walk(start_ns):
            reader = None
            tracked = self.marked.get(p)
            if tracked is not None and st.st_ctime_ns == tracked[2]:
                # Unchanged since the mid sweep set its access time.
                writer = tracked[0]
                if st.st_atime_ns > tracked[1]:
                    reader, _ = self._window(windows, st.st_atime_ns)
            else:
                writer, end = self._window(windows, st.st_ctime_ns)
                if writer is None:
                    continue  # the driver's own work between runs
                if st.st_atime_ns > end:
                    reader, _ = self._window(windows, st.st_atime_ns)
            if len(files) < 50:
                files.append({"path": p, "written_by": writer, "read_by": reader})
            else:
                more += 1
        self.elapsed += time.monotonic() - t0
        return {"type": "sweep", "elapsed_s": self.elapsed, "files": files, "more": more}


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Orphans of the runs become the driver's children (not init's), so
    the reaper finds them. Returns None, or why it is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return "unavailable: prctl: %s" % os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as e:
        return "unavailable: %s" % e
    return None


def children():
    """Pids of the driver's children, live or not yet reaped."""
    me = os.getpid()
    pids = set()
    try:
        for tid in os.listdir("/proc/%d/task" % me):
            with open("/proc/%d/task/%s/children" % (me, tid)) as f:
                pids.update(int(p) for p in f.read().split())
        return pids
    except (OSError, ValueError):
        pass
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:
                    pids.add(int(p))
            except (OSError, ValueError, IndexError):
                continue
    return pids


def describe(pid):
    """(state, process group, command line) of a process, or None once it
    is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        return fields[0], int(fields[2]), cmd[:200]
    except (OSError, IndexError, ValueError):
        return None


def reap(run_pgid):
    """Kills and reaps every child of the driver: what the last run (its
    process group `run_pgid`, already killed) left. Only the pids found are
    waited for (never "any child"), so the run itself, already waited for,
    is never collected, or recorded, a second time. Returns the processes
    that had left the run's group and were still running."""
    alive = []
    seen = set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pids = children()
        if not pids:
            break
        for pid in pids:
            d = describe(pid)
            if pid not in seen and d is not None and d[0] != "Z" and d[1] != run_pgid:
                alive.append({"pid": pid, "cmdline": d[2]})
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.001)
    return alive


def listed(entries):
    """At most MAX_LISTED entries, and how many more there were."""
    return entries[:MAX_LISTED], max(0, len(entries) - MAX_LISTED)
