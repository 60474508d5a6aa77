//! Layers images share, on the real engine: instance images over a shared
//! snapshot image (images::snapshot: base commits in one 91-day window share
//! the snapshot of the last commit before it, each instance image holds only
//! the differences, and its /testbed is the same one-commit repository a
//! whole tree gives), and env images sharing their apt step.
//!
//! Skips without a daemon unless PATCHGRADE_REQUIRE_DOCKER=1 (CI).

mod common;

use patchgrade::exit;

use common::cext::*;
use common::layers::{
    images, layers, tagged_ancestors, widgets_mirror, widgets_patches, EVERY_CHANGE, EVERY_KIND,
};
use common::widgets::{Widgets, F2P, P2P};
use common::*;
use serde_json::Value;

const SPEC: &str = "repo: acme/snap\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

#[test]
fn docker_instances_of_one_window_share_a_snapshot_and_hold_only_their_changes() {
    if !docker_ready("docker_instances_of_one_window_share_a_snapshot") {
        return;
    }
    let sb = Sandbox::new();
    let repo = sb.mirrors().join("acme__snap");
    widgets_mirror(&repo);
    // Window 0: the root and the first base (no earlier commit: a whole
    // tree). Its tree has what the later bases change, in every way a tree
    // can change.
    commit_at(&repo, EVERY_KIND, T0 + 100);
    let b1 = commit_at(&repo, "echo more >> keep.txt", T0 + 200);
    // Window 1: two bases over b1's snapshot.
    let b2 = commit_at(&repo, EVERY_CHANGE, T0 + W + 100);
    let b3 = commit_at(&repo, "echo third > third.txt", T0 + W + 200);

    let (gold, test_patch) = widgets_patches(&repo);
    let rows: Vec<Value> = [
        ("acme__snap-1", &b1),
        ("acme__snap-2", &b2),
        ("acme__snap-3", &b3),
    ]
    .iter()
    .map(|(id, base)| instance(id, "acme/snap", base, &gold, &test_patch, &[F2P], &[P2P]))
    .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write("specs/snap.yaml", SPEC);
    let mut args = docker_args("run", "gold", "snap");
    args.extend(["--max-workers", "2", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["acme__snap-1", "acme__snap-2", "acme__snap-3"] {
        assert_eq!(sb.outcome("snap", "gold", id), "resolved", "{id}");
    }

    // One snapshot (of b1's tree), under the two window-1 instances only.
    let snaps = images("patchgrade.snap.");
    let snap: Vec<&String> = snaps.iter().filter(|s| s.contains("acme__snap")).collect();
    assert_eq!(snap.len(), 1, "{snaps:?}");
    let snap_layers = layers(snap[0]);
    let inst = |id: &str| {
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        found[0].clone()
    };
    for id in ["acme__snap-2", "acme__snap-3"] {
        let own = layers(&inst(id));
        assert!(
            own.starts_with(&snap_layers),
            "{id} is not built on the snapshot"
        );
        assert_eq!(
            own.len(),
            snap_layers.len() + 2,
            "{id}: one COPY and one RUN over the snapshot"
        );
    }
    assert!(!layers(&inst("acme__snap-1")).starts_with(&snap_layers));
    // Its objects are the pack made from the mirror; its tree has no .git.
    assert_eq!(
        in_image(
            snap[0],
            "ls /opt/patchgrade/snapshot-objects/pack; test ! -e /testbed/.git && echo no .git"
        ),
        "pack-patchgrade-snapshot.idx\npack-patchgrade-snapshot.pack\nno .git"
    );

    // Each /testbed is its base tree exactly, in a one-commit repository.
    for (id, base) in [("acme__snap-2", &b2), ("acme__snap-3", &b3)] {
        let tree = run(
            &repo,
            "git",
            &["rev-parse", &format!("{base}^{{tree}}")],
            &[],
        );
        let check = "cd /testbed && git rev-parse HEAD~1^{tree} && git rev-list --all --count && \
                     git status --porcelain --ignored && ls -l run.sh link && cat data/x && \
                     test ! -e old && test ! -e gone.txt && test ! -L link && test -f d2f && \
                     test -z \"$(ls .git | grep patchgrade)\" && test ! -e /root/setup_repo.sh && \
                     cat keep.txt";
        let seen = in_image(&inst(id), check);
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines[0], tree, "{id}: {seen}");
        assert_eq!(
            lines[1], "2",
            "{id}: the base tree commit and the setup commit\n{seen}"
        );
        assert!(
            lines[2].starts_with("-rw-r--r--"),
            "{id}: link is a file\n{seen}"
        );
        assert!(
            lines[3].starts_with("-rwxr-xr-x"),
            "{id}: run.sh is executable\n{seen}"
        );
        assert_eq!(&lines[4..], ["x", "changed"], "{id}: {seen}");
    }
    // A second run reuses every image.
    let ours = || {
        let mut v: Vec<String> = images("patchgrade.")
            .into_iter()
            .filter(|i| i.contains("acme__snap"))
            .collect();
        v.sort();
        v
    };
    let before = ours();
    assert_eq!(before.len(), 4, "{before:?}");
    let out = sb.run(&docker_args("run", "gold", "snap-again"));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(ours(), before);
    for img in [
        inst("acme__snap-1"),
        inst("acme__snap-2"),
        inst("acme__snap-3"),
        snap[0].clone(),
    ] {
        docker_out(&["rmi", &img]);
    }
}

#[test]
fn docker_env_images_with_the_same_apt_packages_share_that_layer() {
    if !docker_ready("docker_env_images_with_the_same_apt_packages_share_that_layer") {
        return;
    }
    // Two versions whose envs differ (the second's pip step), same apt list;
    // a third with that list as `apt_base_packages` and one more package,
    // and a fourth like the third on another Python where the host has one.
    // Required where Docker is (CI): python_images.rs needs 3.8 there too.
    let other_python = available(
        "CPython 3.8 (the apt base shared across Pythons)",
        "PATCHGRADE_REQUIRE_DOCKER",
        patchgrade::python::resolve("3.8", &patchgrade::python::HostSearch::from_env(vec![]))
            .is_ok(),
    );
    let spec = "repo: acme/widgets\nversions:\n  \"1.0\":\n    python: \"3.11\"\n    apt_packages: [less]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n  \"2.0\":\n    python: \"3.11\"\n    apt_packages: [less]\n    pip_packages: [pip]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n  \"3.0\":\n    python: \"3.11\"\n    apt_base_packages: [less]\n    apt_packages: [file]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n  \"4.0\":\n    python: \"3.8\"\n    apt_base_packages: [less]\n    apt_packages: [file]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
    let w = Widgets::new(spec, &[]);
    let sb = &w.sb;
    let mut versions = vec![
        ("acme__apt-1", "1.0"),
        ("acme__apt-2", "2.0"),
        ("acme__apt-3", "3.0"),
    ];
    if other_python {
        versions.push(("acme__apt-4", "4.0"));
    }
    let rows: Vec<Value> = versions
        .iter()
        .map(|(id, version)| {
            let mut r = w.row(id);
            r["version"] = (*version).into();
            r
        })
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    let mut args = docker_args("run", "gold", "apt");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for (id, _) in &versions {
        assert_eq!(sb.outcome("apt", "gold", id), "resolved", "{id}");
    }
    let inst = |id: &str| {
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        found[0].clone()
    };
    let (a, b) = (inst("acme__apt-1"), inst("acme__apt-2"));
    let (la, lb) = (layers(&a), layers(&b));
    let common = |x: &[String], y: &[String]| x.iter().zip(y).take_while(|(p, q)| p == q).count();
    let shared = common(&la, &lb);
    // The history, oldest first, without its `#(nop)` lines (metadata, but
    // also COPY): positions give the steps' order, not layer indexes.
    let steps = |img: &str| -> Vec<String> {
        docker_out(&["history", "--no-trunc", "--format", "{{.CreatedBy}}", img])
            .lines()
            .rev()
            .filter(|c| !c.contains("#(nop)"))
            .map(str::to_string)
            .collect()
    };
    let step_at = |img: &str, what: &str, package: &str| {
        steps(img)
            .iter()
            .position(|c| c.contains(what) && c.contains(package))
            .unwrap_or_else(|| panic!("no {what} {package} step in {img}: {:#?}", steps(img)))
    };
    let apt_at = |img: &str| step_at(img, "apt-get install", "'less'");
    assert_eq!(apt_at(&a), apt_at(&b));
    assert!(
        shared > apt_at(&a),
        "the apt layer (step {}) is not shared: {shared} layers in common",
        apt_at(&a)
    );
    assert_ne!(la[shared..], lb[shared..], "the env images differ after it");
    // The third's base list is below its interpreter (an image of its own
    // on the base), its own package in the env above.
    let c = inst("acme__apt-3");
    let python_at = |img: &str| step_at(img, "setup_python.sh", "");
    assert!(apt_at(&c) < python_at(&c), "{:#?}", steps(&c));
    assert!(python_at(&c) < step_at(&c, "apt-get install", "'file'"));
    let apt_base = tagged_ancestors(&c, "patchgrade.base.apt.");
    assert_eq!(apt_base.len(), 1, "{apt_base:?}");
    let python_of_c = tagged_ancestors(&c, "patchgrade.base.py3.11.");
    assert_eq!(python_of_c.len(), 1, "{python_of_c:?}");
    assert_eq!(
        tagged_ancestors(&python_of_c[0], "patchgrade.base.apt."),
        apt_base
    );
    assert_eq!(
        in_image(&c, "command -v less >/dev/null && command -v file"),
        "/usr/bin/file"
    );
    let mut made = vec![a, b, c.clone()];
    // On another Python the same list is the same layer: the envs share
    // everything up to it, then part at their interpreters.
    if other_python {
        let d = inst("acme__apt-4");
        assert_eq!(tagged_ancestors(&d, "patchgrade.base.apt."), apt_base);
        // Everything up to the apt base in common, nothing above it.
        let with_d = common(&layers(&c), &layers(&d));
        assert_eq!(with_d, layers(&apt_base[0]).len());
        assert_eq!(
            in_image(&d, "command -v less >/dev/null && command -v file"),
            "/usr/bin/file"
        );
        made.push(d);
    }
    for img in made {
        docker_out(&["rmi", &img]);
    }
}

#[test]
fn docker_env_images_with_the_same_pip_base_share_it_and_keep_its_pins() {
    if !docker_ready("docker_env_images_with_the_same_pip_base_share_it_and_keep_its_pins") {
        return;
    }
    // Two envs on one Python, one pip base list, other pip packages. Both
    // ask for `six` unpinned: a fresh resolve takes the newest (1.17.0 on),
    // an env over the base keeps the base's pin.
    let spec = "repo: acme/widgets\nversions:\n  \"1.0\":\n    python: \"3.11\"\n    pip_base_packages: [six==1.16.0]\n    pip_packages: [six]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n  \"2.0\":\n    python: \"3.11\"\n    pip_base_packages: [six==1.16.0]\n    pip_packages: [six, packaging==23.1]\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
    let w = Widgets::new(spec, &[]);
    let sb = &w.sb;
    let versions = [("acme__pip-1", "1.0"), ("acme__pip-2", "2.0")];
    let rows: Vec<Value> = versions
        .iter()
        .map(|(id, version)| {
            let mut r = w.row(id);
            r["version"] = (*version).into();
            r
        })
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    let mut args = docker_args("run", "gold", "pipbase");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    let mut made = Vec::new();
    for (id, _) in &versions {
        assert_eq!(sb.outcome("pipbase", "gold", id), "resolved", "{id}");
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        made.push(found[0].clone());
    }
    let (a, b) = (&made[0], &made[1]);
    let base = tagged_ancestors(a, "patchgrade.base.pip.py3.11.");
    assert_eq!(base.len(), 1, "{base:?}");
    assert_eq!(tagged_ancestors(b, "patchgrade.base.pip.py3.11."), base);
    // Everything up to the pip base in common, nothing above it.
    let (la, lb) = (layers(a), layers(b));
    let common = la.iter().zip(&lb).take_while(|(p, q)| p == q).count();
    assert_eq!(common, layers(&base[0]).len());
    let version = "/opt/venv/bin/python -c 'import six; print(six.__version__)'";
    for img in [a, b] {
        assert_eq!(in_image(img, version), "1.16.0", "{img}");
    }
    assert_eq!(
        in_image(
            b,
            "/opt/venv/bin/python -c 'import packaging; print(packaging.__version__)'"
        ),
        "23.1"
    );
    for img in made {
        docker_out(&["rmi", &img]);
    }
}

#[test]
fn docker_snapshot_build_compiles_through_the_cache_from_a_clean_tree() {
    if !docker_ready("docker_snapshot_build_compiles_through_the_cache_from_a_clean_tree") {
        return;
    }
    remove_images_of("acme__cext");
    let sb = Sandbox::new();
    let repo = sb.mirrors().join("acme__cext");
    let tests = "import unittest\nfrom calc import _other\n\nclass T(unittest.TestCase):\n    def test_other(self):\n        self.assertEqual(_other.other(), 7)\n";
    // The snapshot's older tree asks for a package the instances' do not:
    // it must not reach their env.
    write_calc_repo(
        &repo,
        &SETUP_PY.replace(
            "packages=['calc'],",
            "packages=['calc'], install_requires=['six'],",
        ),
        tests,
    );
    // Window 0: the snapshot's commit. Window 1: a base that changes no C
    // or Cython source, then one that changes _speed.c and _fast.pyx (the
    // snapshot's builds of them must not be what that instance tests).
    commit_at(&repo, "true", T0 + 100);
    let b1 = commit_at(
        &repo,
        &format!("echo notes > NOTES && cat > setup.py <<'EOF'\n{SETUP_PY}EOF"),
        T0 + W + 100,
    );
    let b2 = commit_at(
        &repo,
        &format!(
            "cat > calc/_speed.c <<'EOF'\n{}EOF\ncat > calc/_fast.pyx <<'EOF'\n{}EOF",
            c_module("speed", 2),
            pyx_module(4)
        ),
        T0 + W + 200,
    );
    let gold = calc_gold(&repo);
    // Each instance's test asserts its own base's C and Cython code.
    let test_patch = |speed: i64| {
        diff_of_write(
            &repo,
            "tests/test_calc.py",
            &format!("{tests}\n    def test_add(self):\n        from calc import add, _speed, _fast\n        self.assertEqual(add(2, 3), 5)\n        self.assertEqual(_speed.speed(), {speed})\n        self.assertEqual(_fast.fast(), {speed} + 2)\n"),
        )
    };
    let f2p = "tests.test_calc.T.test_add";
    let p2p = "tests.test_calc.T.test_other";
    let rows: Vec<Value> = [("acme__cext-1", &b1, 1), ("acme__cext-2", &b2, 2)]
        .iter()
        .map(|(id, base, speed)| {
            instance(
                id,
                "acme/cext",
                base,
                &gold,
                &test_patch(*speed),
                &[f2p],
                &[p2p],
            )
        })
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write("specs/cext.yaml", BUILD_SPEC);
    let mut args = docker_args("run", "gold", "cext");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["acme__cext-1", "acme__cext-2"] {
        assert_eq!(sb.outcome("cext", "gold", id), "resolved", "{id}");
    }
    // The three extensions of b1 are the snapshot's sources: three hits,
    // and _fast.pyx is not translated again; b2's changed _speed.c is
    // compiled again and its changed _fast.pyx translated again, _other.c
    // is a hit.
    let log1 = instance_build_log(sb.path(), "acme__cext-1");
    let log2 = instance_build_log(sb.path(), "acme__cext-2");
    assert_eq!(cache_hits(&log1), 3, "{log1}");
    assert_eq!(cache_hits(&log2), 1, "{log2}");
    let found = "Found compiled calc/_fast.pyx in cache";
    assert!(log1.contains(found), "{log1}");
    assert!(!log2.contains(found), "{log2}");
    assert!(log2.contains("Cythonizing calc/_fast.pyx"), "{log2}");
    assert!(log1.contains("git clean -fdxq"), "{log1}");
    // An eval's rebuild (`eval_install`) compiles through the snapshot's
    // cache too: a candidate that puts a comment at the end of a line of
    // `_other.c` rebuilds that extension, whose preprocessed unit is the
    // snapshot's, a hit. The gold evals compiled nothing.
    let candidate = {
        std::fs::write(
            repo.join("calc/__init__.py"),
            "def add(a, b):\n    return a + b\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("calc/_other.c"),
            c_module("other", 7).replacen("<Python.h>", "<Python.h> /* reviewed */", 1),
        )
        .unwrap();
        let d = run(&repo, "git", &["diff"], &[]);
        run(&repo, "git", &["checkout", "-q", "--", "."], &[]);
        d
    };
    sb.write(
        "cand.jsonl",
        &jsonl(&[prediction("acme__cext-1", "cand", Some(&candidate))]),
    );
    let mut args = docker_args("run", "cand.jsonl", "cext-cand");
    args.extend([
        "--max-workers",
        "1",
        "--cache-level",
        "instance",
        "--instance-ids",
        "acme__cext-1",
    ]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    let eval_log = |run_id: &str, model: &str| {
        let p = sb
            .path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join(model)
            .join("acme__cext-1/test_output.txt");
        std::fs::read_to_string(&p).unwrap()
    };
    let rebuilt = eval_log("cext-cand", "cand");
    assert_eq!(
        sb.outcome("cext-cand", "cand", "acme__cext-1"),
        "resolved",
        "{rebuilt}"
    );
    assert!(rebuilt.contains("building 'calc._other'"), "{rebuilt}");
    assert_eq!(cache_hits(&rebuilt), 1, "{rebuilt}");
    assert!(!eval_log("cext", "gold").contains("building 'calc."));

    let snaps: Vec<String> = images("patchgrade.snap.")
        .into_iter()
        .filter(|s| s.contains("acme__cext"))
        .collect();
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    // Both caches, and no hook left where a test would load it.
    let results = "find /opt/patchgrade/ccache -type f -name '*R' | wc -l; ls /opt/patchgrade/cycache | wc -l; \
                   find / -xdev -name 'patchgrade_cython_cache*' | wc -l";
    let in_snapshot = in_image(&snaps[0], results);
    assert_eq!(
        in_snapshot, "3\n1\n0",
        "the snapshot's caches hold the three objects and the one translation"
    );
    // Its build output is gone: each instance builds its own.
    let outputs = in_image(
        &snaps[0],
        "find /testbed -name '*.so' -o -name build -prune | wc -l",
    );
    assert_eq!(outputs, "0", "build output left in the snapshot");
    // Kept beside the tree instead: the three modules and Cython's C file.
    let kept = in_image(
        &snaps[0],
        "cd /opt/patchgrade/snapshot-build && find . -type f | sort | sed 's/\\.cpython.*\\.so$/.so/'",
    );
    assert_eq!(
        kept, "./calc/_fast.c\n./calc/_fast.so\n./calc/_other.so\n./calc/_speed.so",
        "the snapshot's build outputs"
    );
    // Compiled without debug information (`images::nodebug`), and the
    // env's apt step (ccache) kept none of the packages it downloaded.
    let debug = in_image(
        &snaps[0],
        "all=0; with=0; for f in $(find /opt/patchgrade/snapshot-build -name '*.so'); do all=$((all + 1)); \
         if readelf -S $f | grep -q debug_info; then with=$((with + 1)); fi; done; echo \"$with of $all\"; \
         ls /var/cache/apt/archives | grep -c deb; ls /usr/bin/ccache",
    );
    assert_eq!(
        debug, "0 of 3\n0\n/usr/bin/ccache",
        "modules with debug sections; .deb files kept"
    );
    // An instance's outputs that are the snapshot's bytes are links to
    // them; what its commit changed is its own. b1 changed no compiled
    // source; b2 changed _speed.c and _fast.pyx.
    let links = "cd /testbed && for f in calc/_fast.c calc/_*.so; do if [ -L \"$f\" ]; then echo \"$f link\"; else echo \"$f own\"; fi; done | sed 's/\\.cpython[^ ]*\\.so/.so/'";
    let inst = |id: &str| {
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        found[0].clone()
    };
    assert_eq!(
        in_image(&inst("acme__cext-1"), links),
        "calc/_fast.c link\ncalc/_fast.so link\ncalc/_other.so link\ncalc/_speed.so link"
    );
    assert!(
        log1.contains("patchgrade: 4 build outputs linked to the snapshot's, 0 its own"),
        "{log1}"
    );
    assert_eq!(
        in_image(&inst("acme__cext-2"), links),
        "calc/_fast.c own\ncalc/_fast.so own\ncalc/_other.so link\ncalc/_speed.so own"
    );
    // The instances compiled through a copy of the cache: no hit had its
    // time set in the snapshot's folder (which would copy it into the
    // instance's layer).
    for id in ["acme__cext-1", "acme__cext-2"] {
        let touched = in_image(
            &inst(id),
            "find /opt/patchgrade/ccache -type f -name '*R' -newer /opt/patchgrade/snapshot-build | wc -l",
        );
        assert_eq!(touched, "0", "{id}: cache entries touched by its build");
    }
    // Its env is the env image's: the older tree's install went to a venv
    // of its own, removed.
    let env = in_image(
        &snaps[0],
        "ls /tmp; /opt/venv/bin/python -c 'import six' 2>/dev/null && echo six leaked; \
         /opt/venv/bin/python -m pip list 2>/dev/null | grep -ci '^calc ' || true",
    );
    assert_eq!(env, "0", "the snapshot's env changed: {env}");
    for id in ["acme__cext-1", "acme__cext-2"] {
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        // The instance adds no cache entries (read only), and its tree is
        // the base tree (git sees no change; the build output is ignored).
        let seen = in_image(
            &found[0],
            &format!(
                "cd /testbed && git status --porcelain && {results} && \
                 (python -c 'import six' 2>/dev/null && echo six leaked || true)"
            ),
        );
        assert_eq!(seen, in_snapshot, "{id}: {seen}");
        // Its object files are gone, its built modules there.
        let built = in_image(
            &found[0],
            "cd /testbed && ls -d build/temp.* 2>/dev/null | wc -l; ls calc/*.so | wc -l",
        );
        assert_eq!(built, "0\n3", "{id}: object files kept or modules missing");
        docker_out(&["rmi", &found[0]]);
    }
    docker_out(&["rmi", &snaps[0]]);
}
