//! The setup scripts the instance and snapshot images run: the one-commit
//! repository at `/testbed`, the spec's fixtures, `pre_install` and
//! `install`, and the setup commit.
//!
//! A spec with `snapshot_build` also runs its setup in the repository's
//! snapshot image, through a compiler cache kept in that image
//! ([`COMPILER_CACHE`]): the compiler runs of the instance images over it
//! are cache hits wherever a translation unit is unchanged. What the
//! snapshot keeps is that cache and nothing else: its setup installs into
//! a venv of its own layered over the env's ([`SNAPSHOT_VENV`], removed
//! after), and its build output is removed. So an instance image's env is
//! the env image's, and it builds from its own clean tree; the cache is
//! keyed by the preprocessed source, compiler and flags, so a hit is the
//! same object. Cython's translation goes through Cython's own cache the
//! same way ([`CYTHON_CACHE`]): a module whose source and every file it
//! cimports are the snapshot's is not translated again.

use super::nodebug;
use super::snapshot::SNAPSHOT_OBJECTS;
use super::{activate_line, TESTBED, VENV};
use crate::script::quote;
use crate::spec::Spec;

/// The name of the pack an instance image over a snapshot is sent.
pub const DELTA_PACK: &str = "pack-patchgrade";

/// What else an instance image over a snapshot is sent in `/testbed/.git`
/// (its one `COPY` sends the whole context there), all removed by its
/// setup: the setup script, the paths to delete, and the files that take
/// the place of deleted paths (type changes), moved in after the deletes.
pub const DELTA_SETUP: &str = "patchgrade-setup.sh";
pub const DELTA_DELETE_LIST: &str = "patchgrade-delete.list";
pub const DELTA_MOVED: &str = "patchgrade-moved";

/// The file in `/testbed/.git` that gives a build the compiler cache
/// store's address ([`crate::backend::docker::compiler_store`]), sent in its
/// context when the store is served and removed by the setup that reads it:
/// not in the image's name (the address changes with every process), and
/// never readable in a container of the image.
pub const COMPILER_REMOTE: &str = "patchgrade-ccache-remote";

/// Where a `snapshot_build` snapshot keeps its compiler cache (ccache).
pub const COMPILER_CACHE: &str = "/opt/patchgrade/ccache";

/// Where a `snapshot_build` snapshot keeps Cython's cache of translated
/// modules (cythonize's `cache` option: the C output under a fingerprint of
/// the `.pyx`, everything it cimports or includes, Cython's version and the
/// options). scikit-learn 0.22: 50 modules, 5.5 MiB.
pub const CYTHON_CACHE: &str = "/opt/patchgrade/cycache";

/// An instance's setup translates through a copy of [`CYTHON_CACHE`]:
/// Cython touches each hit and stores each miss, which in the snapshot's
/// folder would copy files into the instance's layer.
const CYTHON_CACHE_COPY: &str = "/tmp/patchgrade-cycache";

/// An instance's setup compiles through a copy of [`COMPILER_CACHE`]: ccache
/// sets a hit's time (its LRU), read-only too, and in the snapshot's folder
/// that copies each hit whole into the instance's layer (15.6 MB of a
/// scikit-learn 0.21 instance's 86.6).
const COMPILER_CACHE_COPY: &str = "/tmp/patchgrade-ccache";

/// Where a `snapshot_build` snapshot keeps what its build wrote into the
/// tree (extension modules, Cython's C files), at their paths in the tree.
/// An instance's build output that is byte for byte the same becomes a
/// symlink to it, so the instance's layer holds only what its commit
/// changed (scikit-learn 0.21: 65 MB of an 86.6 MB layer were such files).
pub const SNAPSHOT_BUILD: &str = "/opt/patchgrade/snapshot-build";

/// What of a build's untracked files is not kept in [`SNAPSHOT_BUILD`]
/// (an `grep -E` pattern over paths): the build folder (objects), package
/// metadata and bytecode.
const NOT_BUILD_OUTPUT: &str = r"^build/|\.egg-info/|__pycache__/";

/// The compiler's object files of a distutils/setuptools build, which an
/// instance image over a build snapshot removes after its install: the
/// tests import the built modules, never the objects (scikit-learn 0.22:
/// 82 MiB of a 205 MiB layer). setuptools' rebuild (`eval_install`) decides
/// per extension from the module's and the sources' times, never from
/// them; numpy.distutils' (scikit-learn < 1.1) skips an unchanged source of
/// a rebuilt extension when its object is there, so a candidate that
/// touches a multi-source extension compiles all of its sources.
const BUILD_OBJECTS: &str = "build/temp.*";

/// The variable that turns the hook on; the hook module and its `.pth`
/// line are written into the setup's site-packages and removed after it.
const CYTHON_CACHE_VAR: &str = "PATCHGRADE_CYTHON_CACHE";
/// The store's URL for Cython's modules, for the hook.
const CYTHON_REMOTE_VAR: &str = "PATCHGRADE_CYTHON_REMOTE";
/// The store's folder of Cython's modules (ccache's own entries are in
/// two-character folders).
const CYTHON_STORE_FOLDER: &str = "cython";
const CYTHON_CACHE_MODULE: &str = "patchgrade_cython_cache";
const CYTHON_CACHE_HOOK: &str = include_str!("cython_cache.py");

/// The Debian package giving the compiler cache; an env of a
/// `snapshot_build` spec installs it.
pub const COMPILER_CACHE_PACKAGE: &str = "ccache";

/// The venv a snapshot's setup installs into: it sees the env's packages
/// (a `.pth` file adds the env's site-packages after its own) and shadows
/// them with what the older tree's install asks for, which never reaches
/// the env. Without it, sphinx 3.0's snapshot pinned `pytest < 5.3.3` under
/// the instances, whose own install accepts any pytest: 3 of 44 gold
/// patches failed.
pub const SNAPSHOT_VENV: &str = "/tmp/patchgrade-snapshot-venv";

/// Largest the compiler cache of one snapshot may grow (scikit-learn's
/// objects are about 70 MiB, matplotlib's with FreeType about 40).
const COMPILER_CACHE_MAX: &str = "2G";

/// The repo setup script of instance images sent their whole tree (no
/// snapshot: a tree with submodules, or a history that starts in the base
/// commit's window). A `snapshot_build` spec's install compiles as over a
/// snapshot ([`CacheUse::Read`]): there is no snapshot cache below, but the
/// store is read and written when the build is sent its address (astropy
/// 1.3 and 3.1 compiled everything in each of their six instances, 516 s).
pub fn setup_repo_script(spec: &Spec) -> String {
    // The tree as one commit: no history, nothing newer than the base.
    setup_repo_with(
        spec,
        "git init -q\ngit add -A -f\ngit commit -q --no-verify --allow-empty -m 'patchgrade base tree'\n",
        spec.snapshot_build.then_some(CacheUse::Read),
    )
}

/// The repo setup script of an instance image over a snapshot: the same
/// one-commit repository, its objects the pack sent plus the snapshot's (an
/// alternate), `tree` its commit's. The index comes from `read-tree`, whose
/// cache of tree ids lets the setup commit write no tree that exists: git
/// touches an existing object's file when it writes it again, and touching
/// the snapshot's pack would copy it whole into the instance's layer.
pub fn setup_delta_repo_script(spec: &Spec, tree: git2::Oid) -> String {
    // A snapshot that ran the setup holds its build output: untracked and
    // ignored files are expected there, and removed before the setup.
    let (status, clean) = if spec.snapshot_build {
        ("--untracked-files=no", "git clean -fdxq\n")
    } else {
        ("--ignored", "")
    };
    setup_repo_with(
        spec,
        &format!(
            "xargs -0 -r rm -rf -- < .git/{DELTA_DELETE_LIST}\nrm .git/{DELTA_DELETE_LIST}\n\
             if [ -d .git/{DELTA_MOVED} ]; then cp -a .git/{DELTA_MOVED}/. . && rm -rf .git/{DELTA_MOVED}; fi\n\
             git init -q\ngit config gc.auto 0\necho {SNAPSHOT_OBJECTS} > .git/objects/info/alternates\n\
             git index-pack .git/objects/pack/{DELTA_PACK}.pack > /dev/null\n\
             git update-ref HEAD \"$(git commit-tree {tree} -m 'patchgrade base tree')\"\n\
             git read-tree HEAD\ngit update-index -q --refresh || true\n\
             if [ -n \"$(git status --porcelain {status})\" ]; then\n\
             echo 'patchgrade: /testbed is not the base tree:'; git status --porcelain {status} | head -20; exit 1\nfi\n\
             {clean}"
        ),
        spec.snapshot_build.then_some(CacheUse::Read),
    )
}

/// The setup a `snapshot_build` snapshot runs, in its repository of the
/// anchor tree: the spec's fixtures, `pre_install` and `install` through
/// the compiler cache, in [`SNAPSHOT_VENV`]; then the tracked files put
/// back as the anchor has them, and the build output, that venv and pip's
/// download cache removed. A failed setup does not fail the snapshot (an
/// older tree may not build in a newer env): the instances over it then
/// build as without it, with what the cache got.
pub fn setup_snapshot_script(spec: &Spec) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# patchgrade snapshot image setup (generated).\nset -euxo pipefail\n",
    );
    s.push_str(&format!("cd {TESTBED}\n"));
    // `--without-pip`: the env's pip (its pinned version) runs from the
    // env's site-packages and installs here; `pip` is that pip.
    s.push_str(&format!(
        "if [ -x {VENV}/bin/python ]; then\n\
         {VENV}/bin/python -m venv --without-pip {SNAPSHOT_VENV}\n\
         purelib() {{ \"$1\" -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'; }}\n\
         echo \"import site; site.addsitedir('$(purelib {VENV}/bin/python)')\" > \"$(purelib {SNAPSHOT_VENV}/bin/python)/patchgrade-env.pth\"\n\
         printf '#!/bin/sh\\nexec python -m pip \"$@\"\\n' > {SNAPSHOT_VENV}/bin/pip\n\
         chmod +x {SNAPSHOT_VENV}/bin/pip && cp {SNAPSHOT_VENV}/bin/pip {SNAPSHOT_VENV}/bin/pip3\n\
         fi\n"
    ));
    s.push_str("if ! (\n");
    let activate = format!(
        "if [ -f {SNAPSHOT_VENV}/bin/activate ]; then source {SNAPSHOT_VENV}/bin/activate; else {}; fi",
        activate_line()
    );
    s.push_str(&setup_steps(spec, &activate, Some(CacheUse::Fill)));
    s.push_str(&format!(
        "); then echo 'patchgrade: the snapshot setup failed; instance images over it build without its help'; fi\ncd {TESTBED}\n{}",
        // A failed setup stops before its own clean-up.
        nodebug::wrapper_end()
    ));
    s.push_str(
        "if [ -n \"$(git status --porcelain --untracked-files=no)\" ]; then\n\
         echo 'patchgrade: the snapshot setup changed tracked files; put back:'\n\
         git status --porcelain --untracked-files=no | head -20\ngit checkout -q -- .\nfi\n",
    );
    // Every instance removes the build output before its own build, so
    // kept in the tree it would only be counted twice on disk (273 MiB in
    // a scikit-learn snapshot, and the instance layer's whiteouts); the
    // outputs an instance can link to are kept beside it.
    s.push_str(&format!(
        "mkdir -p {SNAPSHOT_BUILD}\n\
         git ls-files -o -z | {{ grep -zvE '{NOT_BUILD_OUTPUT}' || true; }} | xargs -0 -r cp -a --parents -t {SNAPSHOT_BUILD}\n\
         git clean -fdxq\nrm -rf {SNAPSHOT_VENV} /root/.cache/pip\n"
    ));
    s
}

/// How a setup uses the compiler cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CacheUse {
    /// The snapshot: every compiler run stored.
    Fill,
    /// An instance image (over the snapshot, or of a whole tree): the
    /// snapshot's hits used through a copy, if there is a snapshot below,
    /// and the store's; nothing kept (its layer gets no cache files).
    Read,
    /// An eval's rebuild (`eval_install`) in a container of the instance
    /// image: hits used, and the caches read in place (the container is
    /// discarded, so what Cython stores goes nowhere).
    Eval,
}

/// An eval's install step (`step`, from `eval_install`) as a container of
/// `spec`'s instance image runs it: through the caches for a
/// `snapshot_build` spec ([`eval_install_through_caches`]), as is otherwise.
pub fn container_install_step(spec: &Spec, step: String) -> String {
    match spec.snapshot_build {
        true => eval_install_through_caches(&step, nodebug::applies(spec)),
        false => step,
    }
}

/// An eval's install step for a `snapshot_build` spec: the rebuild that
/// `eval_install` runs when a candidate changes compiled sources goes
/// through the snapshot's compiler and Cython caches, which the instance
/// image holds below its own layer. In a subshell, so that neither cache's
/// variables nor `PATH` reach the tests; the statistics go to the log.
/// `nodebug`: the compilers are the setups' wrappers ([`nodebug`]), as
/// they were when the cache was filled (its hits are keyed by them).
pub fn eval_install_through_caches(install: &str, nodebug: bool) -> String {
    let install = install.strip_suffix('\n').unwrap_or(install);
    let (wrap, unwrap) = match nodebug {
        true => (nodebug::wrapper_lines(), nodebug::wrapper_end()),
        false => (String::new(), String::new()),
    };
    format!(
        "(\n{wrap}{}{}{install}\nccache --show-stats || true\n{}{unwrap})\n",
        compiler_cache_lines(CacheUse::Eval),
        cython_cache_lines(CacheUse::Eval),
        cython_cache_end(CacheUse::Eval)
    )
}

fn setup_repo_with(spec: &Spec, make_repo: &str, cache: Option<CacheUse>) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# patchgrade instance image setup (generated).\nset -euxo pipefail\n",
    );
    s.push_str(&format!("cd {TESTBED}\n"));
    s.push_str(make_repo);
    s.push_str(&setup_steps(spec, &activate_line(), cache));
    s.push_str(&format!("cd {TESTBED}\n{SETUP_COMMIT}"));
    s
}

/// The setup commit: `git diff` afterwards shows only the candidate's
/// changes (reference #353); untracked build output stays untracked. `-a`
/// only when the setup changed a tracked file: the build context's files
/// are dated the second after they were sent, so when the index is written
/// within that second git counts them racily clean, and `commit -a` hashes
/// and writes them again. Writing an object that exists touches the pack
/// holding it, and in an instance over a snapshot that pack is the
/// snapshot's (or the instance's own, in the layer below): overlayfs then
/// copies it whole into the instance's layer (10 MB for a django snapshot;
/// 171 of the first 335 instances of a cold Verified run held such a copy,
/// 817 MiB). Without `-a` the commit writes only itself: the index and its
/// tree cache come from `read-tree`.
const SETUP_COMMIT: &str = "if [ -n \"$(git status --porcelain --untracked-files=no)\" ]; then\n\
    git commit -q --no-verify -am 'patchgrade setup'\n\
    else\n\
    git commit -q --no-verify --allow-empty -m 'patchgrade setup'\n\
    fi\n";

/// The env activated (`activate`, a shell line), the spec's environment
/// and fixtures, then `pre_install` and `install`, each checked.
fn setup_steps(spec: &Spec, activate: &str, cache: Option<CacheUse>) -> String {
    let mut s = String::from("set +u\n");
    s.push_str(activate);
    s.push_str("\nset -u\n");
    // The spec's environment applies to setup too (e.g. the pretend version
    // for setuptools_scm, which finds no tags in a one-commit repository).
    for (k, v) in &spec.env {
        s.push_str(&format!("export {k}={}\n", quote(v)));
    }
    for (path, fixture) in &spec.files {
        // A here-document with a delimiter the content does not hold.
        let mut d = String::from("EOF_PATCHGRADE_FIXTURE");
        while fixture.content.contains(&d) {
            d.push('_');
        }
        let body = fixture
            .content
            .strip_suffix('\n')
            .unwrap_or(&fixture.content);
        s.push_str(&format!("cat > {} <<'{d}'\n{body}\n{d}\n", quote(path)));
    }
    for var in &spec.build_jobs {
        s.push_str(&format!("export {var}=\"$(nproc)\"\n"));
    }
    let nodebug = nodebug::applies(spec);
    if nodebug {
        s.push_str(&nodebug::wrapper_lines());
    }
    if let Some(cache) = cache {
        s.push_str(&compiler_cache_lines(cache));
        s.push_str(&cython_cache_lines(cache));
    }
    for cmd in spec.pre_install.iter().chain(&spec.install) {
        s.push_str(&checked_command(cmd));
    }
    if nodebug {
        s.push_str(&nodebug::wrapper_end());
    }
    if let Some(cache) = cache {
        // Hits and misses, for the build log.
        s.push_str("ccache --show-stats || true\n");
        s.push_str(&cython_cache_end(cache));
        if cache == CacheUse::Read {
            s.push_str(&format!(
                "rm -rf {TESTBED}/{BUILD_OBJECTS} {COMPILER_CACHE_COPY}\n"
            ));
            s.push_str(&link_snapshot_outputs());
        }
    }
    s
}

/// Cython's translations through its cache ([`CYTHON_CACHE`]): the hook that
/// turns the cache on is written into the active Python's site-packages.
fn cython_cache_lines(cache: CacheUse) -> String {
    let module = CYTHON_CACHE_HOOK
        .strip_suffix('\n')
        .unwrap_or(CYTHON_CACHE_HOOK);
    let mut s = format!(
        "patchgrade_site=$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')\n\
         cat > \"$patchgrade_site/{CYTHON_CACHE_MODULE}.py\" <<'EOF_PATCHGRADE_HOOK'\n{module}\nEOF_PATCHGRADE_HOOK\n\
         echo \"import os; os.environ.get('{CYTHON_CACHE_VAR}') and __import__('{CYTHON_CACHE_MODULE}')\" > \"$patchgrade_site/{CYTHON_CACHE_MODULE}.pth\"\n"
    );
    match cache {
        CacheUse::Fill => s.push_str(&format!(
            "mkdir -p {CYTHON_CACHE}\nexport {CYTHON_CACHE_VAR}={CYTHON_CACHE}\n"
        )),
        CacheUse::Read => s.push_str(&format!(
            "rm -rf {CYTHON_CACHE_COPY}\nif [ -d {CYTHON_CACHE} ]; then cp -a {CYTHON_CACHE} {CYTHON_CACHE_COPY}; else mkdir -p {CYTHON_CACHE_COPY}; fi\n\
             export {CYTHON_CACHE_VAR}={CYTHON_CACHE_COPY}\n"
        )),
        CacheUse::Eval => s.push_str(&format!("export {CYTHON_CACHE_VAR}={CYTHON_CACHE}\n")),
    }
    s.push_str(&cython_remote_lines(cache));
    s
}

/// Cython's modules through the compiler cache store too, when the build
/// was sent its address ([`compiler_cache_lines`] read it): the hook looks
/// a module up there before translating it, and stores what it
/// translates. Not traced: the address holds the store's secret.
fn cython_remote_lines(cache: CacheUse) -> String {
    match cache {
        CacheUse::Eval => String::new(),
        CacheUse::Fill | CacheUse::Read => format!(
            "{{ set +x; }} 2>/dev/null; if [ -n \"${{CCACHE_REMOTE_STORAGE:-}}\" ]; then export {CYTHON_REMOTE_VAR}=\"${{CCACHE_REMOTE_STORAGE%%|*}}/{CYTHON_STORE_FOLDER}\"; echo 'patchgrade: translating Cython through the compiler cache store'; fi; set -x\n"
        ),
    }
}

/// The hook removed (no test ever loads it), and an instance's copy of the
/// cache. Its hits are in the build log where the install is verbose
/// (`Found compiled … in cache`).
fn cython_cache_end(cache: CacheUse) -> String {
    let mut s = format!(
        "rm -f \"$patchgrade_site/{CYTHON_CACHE_MODULE}.py\" \"$patchgrade_site/{CYTHON_CACHE_MODULE}.pth\" \"$patchgrade_site\"/__pycache__/{CYTHON_CACHE_MODULE}.*\n\
         unset {CYTHON_CACHE_VAR} {CYTHON_REMOTE_VAR}\n"
    );
    if cache == CacheUse::Read {
        s.push_str(&format!("rm -rf {CYTHON_CACHE_COPY}\n"));
    }
    s
}

/// An instance's build outputs that are the snapshot's byte for byte
/// ([`SNAPSHOT_BUILD`]) replaced by symlinks to them, counted in the log.
/// A rebuild in an eval writes through the link into the container's copy,
/// which is discarded with it.
fn link_snapshot_outputs() -> String {
    format!(
        "if [ -d {SNAPSHOT_BUILD} ]; then (set +x; cd {TESTBED}\n\
         linked=0; kept=0\n\
         while IFS= read -r -d '' f; do\n\
         s={SNAPSHOT_BUILD}/$f\n\
         if [ -f \"$f\" ] && [ ! -L \"$f\" ] && [ -f \"$s\" ] && cmp -s \"$f\" \"$s\"; then ln -sf \"$s\" \"$f\"; linked=$((linked + 1)); else kept=$((kept + 1)); fi\n\
         done < <(git ls-files -o -z | grep -zvE '{NOT_BUILD_OUTPUT}')\n\
         echo \"patchgrade: $linked build outputs linked to the snapshot's, $kept its own\")\nfi\n"
    )
}

/// The compiler found first on PATH is ccache's wrapper (Debian's
/// `/usr/lib/ccache`: gcc, g++, cc, c++ and the triplet names), with the
/// cache in [`COMPILER_CACHE`]. Only the setups and an eval's rebuild see
/// it ([`eval_install_through_caches`]): the image's own environment, and so
/// every test, is unchanged. The compiler it runs is hashed by content: the
/// [`nodebug`] wrappers are written anew by every setup, so their times
/// differ between the snapshot that filled the cache and the instances.
fn compiler_cache_lines(cache: CacheUse) -> String {
    let dir = match cache {
        CacheUse::Read => COMPILER_CACHE_COPY,
        CacheUse::Fill | CacheUse::Eval => COMPILER_CACHE,
    };
    let mut s = format!(
        "export CCACHE_DIR={dir} PATH=/usr/lib/ccache:$PATH CCACHE_MAXSIZE={COMPILER_CACHE_MAX} CCACHE_COMPILERCHECK=content\n"
    );
    match cache {
        CacheUse::Fill => s.push_str("mkdir -p \"$CCACHE_DIR\"\n"),
        CacheUse::Read => s.push_str(&format!(
            "rm -rf {dir}\nif [ -d {COMPILER_CACHE} ]; then cp -a {COMPILER_CACHE} {dir}; fi\nexport CCACHE_READONLY=1\n"
        )),
        CacheUse::Eval => s.push_str("export CCACHE_READONLY=1\n"),
    }
    // The store, when the build was sent its address: looked up after the
    // snapshot's cache, and given what this build compiles (an instance's
    // copy of that cache is removed after its setup, so it may be written
    // too). Not traced: the address holds the store's secret.
    if cache != CacheUse::Eval {
        let file = format!("{TESTBED}/.git/{COMPILER_REMOTE}");
        s.push_str(&format!(
            "if [ -f {file} ]; then {{ set +x; }} 2>/dev/null; CCACHE_REMOTE_STORAGE=$(cat {file}); export CCACHE_REMOTE_STORAGE; unset CCACHE_READONLY; rm -f {file}; set -x; echo 'patchgrade: compiling through the compiler cache store'; fi\n"
        ));
    }
    // The statistics the log shows are this setup's own.
    s.push_str("ccache --zero-stats || true\n");
    s
}

/// One setup command, then its status checked: under `set -e` a failing
/// `a && b` (as specs write installs) does not stop the script, so a failed
/// `make bootstrap` used to leave an image without its dependencies
/// (babel 13928). `$?` still holds the list's status on the next line.
pub(super) fn checked_command(cmd: &str) -> String {
    let cmd = cmd.strip_suffix('\n').unwrap_or(cmd);
    // The build error shows the log's last lines: name the command there.
    let first: String = cmd.lines().next().unwrap_or("").chars().take(100).collect();
    let said = quote(&format!("patchgrade: setup command failed: {first}"));
    format!(
        "{cmd}\npatchgrade_rc=$?; if [ \"$patchgrade_rc\" -ne 0 ]; then echo {said} \"(exit $patchgrade_rc)\" >&2; exit \"$patchgrade_rc\"; fi\n"
    )
}

#[cfg(test)]
#[path = "setup_tests.rs"]
mod tests;
