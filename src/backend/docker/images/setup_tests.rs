//! Unit tests of `images::setup`: the generated setup lines, run in bash
//! where their behaviour matters (real git, no engine). A file of their
//! own: setup.rs stays short.

use super::*;

fn spec(yaml: &str) -> Spec {
    serde_yaml_ng::from_str(yaml).unwrap()
}

const BUILT: &str = "install: pip install -e .\npre_install: [make libs]\ntest_cmd: t\nlog_parser: pytest\nsnapshot_build: true\n";
const PLAIN: &str = "install: pip install -e .\ntest_cmd: t\nlog_parser: pytest\n";

/// An instance over a snapshot whose tree files are racily clean (dated
/// after the index, as the build context's are): the setup commit writes
/// no object the snapshot's pack holds, so that pack (overlayfs would
/// copy it into the layer) is not touched. `commit -a`, as before, does.
#[test]
fn the_setup_commit_leaves_the_snapshots_pack_alone() {
    let t = tempfile::tempdir().unwrap();
    let run = |commit: &str| {
        let script = format!(
            "set -euo pipefail\ncd {root}\nrm -rf snap testbed\n\
             mkdir -p snap/d testbed/d && cd snap && git init -q && echo a > f && echo b > d/g\n\
             git add -A && git -c user.name=t -c user.email=t@t commit -q -m s && git repack -a -d -q\n\
             tree=$(git rev-parse HEAD^{{tree}}); pack=$(ls $PWD/.git/objects/pack/*.pack)\n\
             touch -d @1000000000 $pack\ncd ../testbed && echo a > f && echo b > d/g\n\
             git init -q && echo {root}/snap/.git/objects > .git/objects/info/alternates\n\
             export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t\n\
             git update-ref HEAD \"$(git commit-tree $tree -m base)\"\n\
             touch -d @$(( $(date +%s) + 100 )) f d/g\ngit read-tree HEAD\ngit update-index -q --refresh || true\n\
             {commit}stat -c %Y $pack\n",
            root = t.path().display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(SETUP_COMMIT), "1000000000");
    assert_ne!(
        run("git commit -q --no-verify --allow-empty -am 'patchgrade setup'\n"),
        "1000000000",
        "the old commit touched the pack: the case this guards against"
    );
    // A setup that changes a tracked file still commits it.
    let changed = run(&format!(
        "echo c > f\n{SETUP_COMMIT}git status --porcelain\n"
    ));
    assert_eq!(changed.lines().count(), 1, "{changed}");
}

#[test]
fn a_failing_install_list_stops_the_setup_script() {
    // Run the generated lines in bash as the image build does: an install
    // written `a && b` whose `a` fails must fail the build, and one that
    // succeeds must reach the next line.
    let run = |install: &str| {
        let body = format!(
            "set -euxo pipefail\n{}echo reached\n",
            checked_command(install)
        );
        std::process::Command::new("bash")
            .args(["-c", &body])
            .output()
            .unwrap()
    };
    let failed = run("false && echo built");
    assert_eq!(failed.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&failed.stdout).contains("reached"));
    assert!(String::from_utf8_lossy(&failed.stderr)
        .contains("patchgrade: setup command failed: false && echo built (exit 1)"));
    let ok = run("true && echo built\n");
    assert!(ok.status.success());
    assert!(String::from_utf8_lossy(&ok.stdout).contains("built\nreached"));
    let s = spec("install: make bootstrap && make build\ntest_cmd: t\nlog_parser: jest\n");
    assert!(setup_repo_script(&s).contains("make bootstrap && make build\npatchgrade_rc=$?"));
}

#[test]
fn a_snapshot_build_snapshot_fills_the_cache_and_puts_the_tree_back() {
    let s = setup_snapshot_script(&spec(BUILT));
    let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle}:\n{s}"));
    // The cache comes first, then the steps, each checked, inside the
    // block whose failure is only said.
    assert!(
        at("if ! (") < at("export CCACHE_DIR=/opt/patchgrade/ccache PATH=/usr/lib/ccache:$PATH")
    );
    assert!(at("PATH=/usr/lib/ccache") < at("make libs\npatchgrade_rc=$?"));
    assert!(at("make libs\n") < at("pip install -e .\npatchgrade_rc=$?"));
    assert!(at("pip install -e .\n") < at("); then echo 'patchgrade: the snapshot setup failed"));
    assert!(at("snapshot setup failed") < at("git checkout -q -- ."));
    assert!(at("git checkout -q -- .") < at("git clean -fdxq"));
    assert!(!s.contains("export CCACHE_READONLY"));
    // Cython's cache too, filled in place; the hook gone after.
    assert!(at("export PATCHGRADE_CYTHON_CACHE=/opt/patchgrade/cycache") < at("make libs\n"));
    assert!(at("sys.meta_path.insert") < at("make libs\n"));
    assert!(at("pip install -e .\n") < at("rm -f \"$patchgrade_site/patchgrade_cython_cache.py\""));
    // Every core for the build, before it.
    let jobs = setup_snapshot_script(&spec(&format!("{BUILT}build_jobs: [NPY_NUM_BUILD_JOBS]\n")));
    let j = jobs
        .find("export NPY_NUM_BUILD_JOBS=\"$(nproc)\"\n")
        .expect("exported");
    assert!(j < jobs.find("make libs\n").unwrap());
    assert!(!s.contains("nproc"));
    // In a venv of its own over the env's, removed after.
    assert!(at("-m venv --without-pip /tmp/patchgrade-snapshot-venv") < at("if ! ("));
    assert!(at("if ! (") < at("source /tmp/patchgrade-snapshot-venv/bin/activate"));
    assert!(at("git clean -fdxq") < at("rm -rf /tmp/patchgrade-snapshot-venv /root/.cache/pip"));
    // No repository of its own: the Dockerfile made it.
    assert!(!s.contains("git init"));
}

#[test]
fn a_failed_snapshot_setup_does_not_fail_the_script() {
    // The block as the snapshot runs it, in bash, with a failing step.
    let s = spec("install: 'false'\ntest_cmd: t\nlog_parser: pytest\nsnapshot_build: true\n");
    let body = format!(
        "set -euxo pipefail\nif ! (\n{}); then echo said; fi\necho reached\n",
        s.install
            .iter()
            .map(|c| checked_command(c))
            .collect::<String>()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &body])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("said\nreached"));
    assert!(setup_snapshot_script(&s).contains(&checked_command("false")));
}

#[test]
fn an_instance_over_a_build_snapshot_starts_clean_and_reads_the_cache() {
    let tree = git2::Oid::from_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904").unwrap();
    let s = setup_delta_repo_script(&spec(BUILT), tree);
    let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle}:\n{s}"));
    // Tracked files must be the base tree; the snapshot's build output
    // is removed before anything is built.
    assert!(s.contains("git status --porcelain --untracked-files=no)"));
    assert!(at("git read-tree HEAD") < at("git clean -fdxq"));
    assert!(at("git clean -fdxq") < at("export CCACHE_READONLY=1"));
    assert!(at("export CCACHE_READONLY=1") < at("make libs\n"));
    // Cython's cache through a copy, removed after the install.
    assert!(
        at("cp -a /opt/patchgrade/cycache /tmp/patchgrade-cycache")
            < at("export PATCHGRADE_CYTHON_CACHE=/tmp/patchgrade-cycache")
    );
    assert!(at("PATCHGRADE_CYTHON_CACHE=/tmp/") < at("make libs\n"));
    assert!(at("pip install -e .\n") < s.rfind("rm -rf /tmp/patchgrade-cycache").unwrap());
    assert!(at("pip install -e .\n") < at("rm -rf /testbed/build/temp.*"));
    assert!(at("rm -rf /testbed/build/temp.*") < at("'patchgrade setup'"));
    assert!(at("pip install -e .\n") < at("ccache --show-stats"));
    assert!(at("ccache --show-stats") < at("'patchgrade setup'"));
    // Without `snapshot_build` nothing of it.
    let plain = setup_delta_repo_script(&spec(PLAIN), tree);
    for absent in ["ccache", "git clean", "cycache", "cython"] {
        assert!(!plain.contains(absent), "{absent}:\n{plain}");
    }
    // Its base-tree check counts ignored files too (the setup commit's
    // own check is of tracked files in both).
    assert!(plain.contains("git status --porcelain --ignored)"));
    assert!(!plain.contains("-n \"$(git status --porcelain --untracked-files=no)\" ]; then\necho"));
}

#[test]
fn a_whole_tree_instance_of_a_build_spec_compiles_through_the_store() {
    // No snapshot below: the install reads the store (the remote file)
    // through an empty cache copy, then keeps neither cache nor objects.
    let s = setup_repo_script(&spec(BUILT));
    let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle}:\n{s}"));
    assert!(at("git add -A -f") < at("export CCACHE_DIR=/tmp/patchgrade-ccache"));
    assert!(at("if [ -d /opt/patchgrade/ccache ]; then cp -a") < at("make libs\n"));
    assert!(at(&format!("/testbed/.git/{COMPILER_REMOTE}")) < at("make libs\n"));
    assert!(at("export PATCHGRADE_CYTHON_CACHE=/tmp/patchgrade-cycache") < at("make libs\n"));
    assert!(at("pip install -e .\n") < at("rm -rf /testbed/build/temp.* /tmp/patchgrade-ccache"));
    assert!(at("pip install -e .\n") < s.rfind("rm -rf /tmp/patchgrade-cycache").unwrap());
    assert!(at("ccache --show-stats") < at("'patchgrade setup'"));
    // A spec without `snapshot_build` installs as it always did.
    let plain = setup_repo_script(&spec(PLAIN));
    for absent in ["ccache", "cycache", "cython", "build/temp"] {
        assert!(!plain.contains(absent), "{absent}:\n{plain}");
    }
}

#[test]
fn an_eval_rebuild_sees_the_caches_and_the_tests_do_not() {
    // The wrapped step run in bash, with `python` answering the
    // site-packages question with a folder of the test's.
    let site = tempfile::tempdir().unwrap();
    // The compiler wrappers go to a folder of the test's too.
    let wrappers = tempfile::tempdir().unwrap();
    let w = wrappers.path().join("w").display().to_string();
    let install = "echo \"inside $CCACHE_READONLY $PATCHGRADE_CYTHON_CACHE $(echo $PATH | cut -d: -f1,2)\"; ls \"$patchgrade_site\"\n";
    let body = format!(
        "python() {{ echo {}; }}\n{}echo \"after ${{CCACHE_READONLY:-unset}} ${{PATCHGRADE_CYTHON_CACHE:-unset}} ${{PATH%%:*}}\"; ls {}\ntest ! -e {w} && echo no wrappers\n",
        site.path().display(),
        eval_install_through_caches(install, true).replace(nodebug::WRAPPERS, &w),
        site.path().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &body])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("inside 1 /opt/patchgrade/cycache /usr/lib/ccache:{w}\npatchgrade_cython_cache.pth\npatchgrade_cython_cache.py\n")),
        "{stdout}"
    );
    // After the step: no cache variable, no ccache on PATH, no hook, no
    // wrappers.
    assert!(
        stdout.ends_with("after unset unset /usr/bin\nno wrappers\n"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_dir(site.path()).unwrap().count(), 0);
}

/// The store's address is read from the file the build was sent, not
/// traced, and the file removed; an instance then writes too. Without
/// the file, and in an eval's rebuild, nothing of it.
#[test]
fn a_build_reads_the_store_address_untraced_and_removes_it() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_str().unwrap();
    std::fs::create_dir(t.path().join(".git")).unwrap();
    let file = t.path().join(".git").join(COMPILER_REMOTE);
    let run = |cache: CacheUse| {
        // Cython's URL is the store's, set after the compiler's lines
        // and gone after the setup (`cython_cache_end`).
        let script = format!(
            "set -x\n{}{}{{ set +x; }} 2>/dev/null\necho \"remote=${{CCACHE_REMOTE_STORAGE:-unset}} ro=${{CCACHE_READONLY:-unset}}\"\ntest -e {} || echo removed\necho \"cython=${{{CYTHON_REMOTE_VAR}:-unset}}\"\npatchgrade_site={root}\n{}echo \"cython after=${{{CYTHON_REMOTE_VAR}:-unset}}\"\n",
            compiler_cache_lines(cache).replace(TESTBED, root),
            cython_remote_lines(cache),
            file.display(),
            cython_cache_end(cache),
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let remote = "http://172.17.0.1:4000/5ec7e7|layout=subdirs";
    std::fs::write(&file, remote).unwrap();
    let (stdout, trace) = run(CacheUse::Read);
    assert!(
        stdout.contains(&format!("remote={remote} ro=unset\nremoved")),
        "{stdout}"
    );
    assert!(stdout.contains("compiling through the compiler cache store"));
    assert!(stdout.contains("translating Cython through the compiler cache store"));
    let cython = "cython=http://172.17.0.1:4000/5ec7e7/cython\n";
    assert!(stdout.contains(cython), "{stdout}");
    assert!(stdout.contains("cython after=unset"), "{stdout}");
    assert!(!trace.contains("5ec7e7"), "{trace}");
    let (stdout, _) = run(CacheUse::Read);
    assert!(stdout.contains("remote=unset ro=1"), "{stdout}");
    assert!(stdout.contains("cython=unset"), "{stdout}");
    std::fs::write(&file, remote).unwrap();
    let (stdout, trace) = run(CacheUse::Fill);
    assert!(
        stdout.contains(&format!("remote={remote} ro=unset")),
        "{stdout}"
    );
    assert!(stdout.contains(cython), "{stdout}");
    assert!(!trace.contains("5ec7e7"), "{trace}");
    std::fs::write(&file, remote).unwrap();
    let (stdout, _) = run(CacheUse::Eval);
    assert!(stdout.contains("remote=unset ro=1"), "{stdout}");
    assert!(stdout.contains("cython=unset"), "{stdout}");
    assert!(file.exists());
}
