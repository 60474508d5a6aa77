//! What builds each image: its Dockerfile (from `harness-scripts/docker/`),
//! the generated setup scripts, the build context's files and, for
//! instances, the base commit's tree; and the tag that addresses them.

use std::path::PathBuf;

use super::lines::{label_lines, offline_env_line};
use super::setup::{
    setup_delta_repo_script, setup_repo_script, setup_snapshot_script, COMPILER_CACHE_PACKAGE,
    COMPILER_REMOTE, DELTA_DELETE_LIST, DELTA_MOVED, DELTA_PACK, DELTA_SETUP,
};
use super::snapshot::{TreeDelta, Write, SNAPSHOT_OBJECTS};
use super::{arch, name_part, tag_of, ImageError, Suite, Tier, VENV};
use crate::backend::docker::archive::{
    append_dir, append_file, append_symlink, append_tree, TreeError,
};
use crate::python::Interpreter;
use crate::script::quote;
use crate::spec::{Spec, SOURCES_DIR};
use crate::toolchain::Toolchain;

const BASE_DOCKERFILE: &str = include_str!("../../../../harness-scripts/docker/base.Dockerfile");
const SETUP_BASE: &str = include_str!("../../../../harness-scripts/docker/setup_base.sh");
const ENV_DOCKERFILE: &str = include_str!("../../../../harness-scripts/docker/env.Dockerfile");
const INSTANCE_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/instance.Dockerfile");
const SNAPSHOT_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/snapshot.Dockerfile");
const SNAPSHOT_TREE_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/snapshot-tree.Dockerfile");
/// The pack of a snapshot's objects made from the mirror
/// ([`ImagePlan::with_objects_pack`]), under [`SNAPSHOT_OBJECTS`]`/pack`.
pub(super) const SNAPSHOT_PACK: &str = "pack-patchgrade-snapshot";
const DELTA_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/instance-delta.Dockerfile");

/// A file of a build context besides the Dockerfile.
#[derive(Debug, Clone)]
pub struct ContextFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

impl ContextFile {
    pub(super) fn new(path: &str, data: impl Into<Vec<u8>>) -> ContextFile {
        ContextFile {
            path: path.into(),
            data: data.into(),
            mode: 0o644,
        }
    }
}

/// A git tree to send as `testbed/` in an instance image's build context.
#[derive(Debug, Clone)]
pub struct TreeSource {
    /// The bare mirror holding the tree.
    pub repo: PathBuf,
    pub tree: git2::Oid,
}

/// Single files of a git repository sent under `dir` in a build context:
/// an instance image's changes over its snapshot.
#[derive(Debug, Clone)]
pub struct BlobFiles {
    pub repo: PathBuf,
    pub dir: String,
    pub files: Vec<Write>,
}

/// Everything needed to build one image.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    pub tier: Tier,
    /// `repository:tag`, the tag content-addressed.
    pub name: String,
    pub dockerfile: String,
    pub files: Vec<ContextFile>,
    /// Git trees sent in the context, each under its folder (`testbed` for
    /// an instance's base tree, `sources/<name>` for a spec's sources).
    pub trees: Vec<(String, TreeSource)>,
    /// Files picked from a repository (not whole trees).
    pub blobs: Vec<BlobFiles>,
    /// Host folders sent under a folder of the context each (toolchains),
    /// read a file at a time as the context streams.
    pub hosts: Vec<(String, std::sync::Arc<super::hostfiles::Manifest>)>,
}

impl ImagePlan {
    /// A plan named `<repository>:<tag>`, the tag a hash of `keys` and the
    /// context files: what built the image, so a change makes a new one.
    pub(super) fn addressed(
        tier: Tier,
        repository: String,
        keys: &[&[u8]],
        dockerfile: String,
        files: Vec<ContextFile>,
        trees: Vec<(String, TreeSource)>,
    ) -> ImagePlan {
        // The trees are in `keys` (their ids): the callers say how, so that
        // the tags of images without extra trees stay what they were.
        let mut parts = keys.to_vec();
        parts.extend(files.iter().map(|f| f.data.as_slice()));
        let tag = tag_of(&parts);
        ImagePlan {
            tier,
            name: format!("{repository}:{tag}"),
            dockerfile,
            files,
            trees,
            blobs: Vec::new(),
            hosts: Vec::new(),
        }
    }

    /// Folder name of its build logs (`:` is not welcome in paths).
    pub fn log_name(&self) -> String {
        self.name.replace([':', '/'], "__")
    }

    /// The build context as a tar archive in memory.
    #[cfg(test)]
    pub fn context_tar(&self) -> Result<Vec<u8>, ImageError> {
        self.write_context(Vec::new())
    }

    /// The build context as a tar archive, written to `w` as it is made (a
    /// build streams it: a django tree is 40 MiB).
    pub fn write_context<W: std::io::Write>(&self, w: W) -> Result<W, ImageError> {
        let mut b = tar::Builder::new(w);
        b.mode(tar::HeaderMode::Deterministic);
        let mut files = vec![ContextFile::new("Dockerfile", self.dockerfile.as_bytes())];
        files.extend(self.files.iter().cloned());
        for f in &files {
            append_file(&mut b, &f.path, &f.data, f.mode).map_err(ImageError::Tar)?;
        }
        for (dir, src) in &self.trees {
            let what = || format!("tree {} in {}", src.tree, src.repo.display());
            let repo =
                git2::Repository::open_bare(&src.repo).map_err(|source| ImageError::Git {
                    what: what(),
                    source,
                })?;
            let mut prefix = String::new();
            for part in dir.split('/') {
                prefix = if prefix.is_empty() {
                    part.to_string()
                } else {
                    format!("{prefix}/{part}")
                };
                append_dir(&mut b, &prefix).map_err(ImageError::Tar)?;
            }
            append_tree(&mut b, &repo, src.tree, dir).map_err(|e| match e {
                TreeError::Git(source) => ImageError::Git {
                    what: what(),
                    source,
                },
                TreeError::Io(e) => ImageError::Tar(e),
            })?;
        }
        for blobs in &self.blobs {
            append_blobs(&mut b, blobs)?;
        }
        for (dir, m) in &self.hosts {
            m.append_to(&mut b, std::path::Path::new(dir))
                .map_err(|(path, e)| {
                    ImageError::Tar(std::io::Error::new(
                        e.kind(),
                        format!("{}: {e}", path.display()),
                    ))
                })?;
        }
        b.into_inner().map_err(ImageError::Tar)
    }

    /// The instance plan of [`delta_instance_plan`] completed with what its
    /// build sends: the delete list, the files and the missing objects.
    /// Its name does not change: the snapshot's name and the base tree's id
    /// already determine all three.
    pub fn with_delta(self, repo: PathBuf, delta: TreeDelta, pack: Vec<u8>) -> ImagePlan {
        // All in /testbed/.git before `git init`, so that one `COPY` sends
        // everything: the pack is stored once, in the layer that sends it.
        let pack = ContextFile::new(
            &format!("testbed/.git/objects/pack/{DELTA_PACK}.pack"),
            pack,
        );
        self.with_changes(repo, delta, pack)
    }

    /// The delete list under `testbed/.git`, the written files under
    /// `testbed` (those replacing a deleted path beside them) and `pack`:
    /// what turns one tree into another in an image.
    pub(super) fn with_changes(
        mut self,
        repo: PathBuf,
        delta: TreeDelta,
        pack: ContextFile,
    ) -> ImagePlan {
        self.files.push(ContextFile::new(
            &format!("testbed/.git/{DELTA_DELETE_LIST}"),
            delta.delete_list(),
        ));
        self.files.push(pack);
        let (in_place, moved) = delta.split_writes();
        self.blobs.push(BlobFiles {
            repo: repo.clone(),
            dir: "testbed".into(),
            files: in_place,
        });
        if !moved.is_empty() {
            self.blobs.push(BlobFiles {
                repo,
                dir: format!("testbed/.git/{DELTA_MOVED}"),
                files: moved,
            });
        }
        self
    }

    /// A snapshot plan of a spec without `snapshot_build` with its git
    /// objects, `pack` ([`super::snapshot::tree_pack`] of its tree): made
    /// only when the image is built. Its name does not change: the pack is
    /// a function of the tree, which the name holds.
    pub fn with_objects_pack(mut self, pack: Vec<u8>) -> ImagePlan {
        self.files.push(ContextFile::new(
            &format!("snapshot-objects/pack/{SNAPSHOT_PACK}.pack"),
            pack,
        ));
        self
    }

    /// The plan with the compiler cache store's address (`remote`, ccache's
    /// remote storage line) for its setup to read ([`COMPILER_REMOTE`]): a
    /// snapshot's or instance image's build of a `snapshot_build` spec.
    /// Its name does not change: the store is a cache, and a hit is the
    /// same object as a compile.
    pub fn with_compiler_remote(mut self, remote: Option<String>) -> ImagePlan {
        if let Some(remote) = remote {
            self.files.push(ContextFile::new(
                &format!("testbed/.git/{COMPILER_REMOTE}"),
                remote,
            ));
        }
        self
    }
}

/// `blobs.files` under `blobs.dir`, each with its folders (git keeps no
/// folder entries: they get the usual 0755).
fn append_blobs<W: std::io::Write>(
    b: &mut tar::Builder<W>,
    blobs: &BlobFiles,
) -> Result<(), ImageError> {
    let git = |source| ImageError::Git {
        what: format!("files of {}", blobs.repo.display()),
        source,
    };
    let repo = git2::Repository::open_bare(&blobs.repo).map_err(git)?;
    let mut dirs = std::collections::HashSet::new();
    append_dir(b, &blobs.dir).map_err(ImageError::Tar)?;
    for f in &blobs.files {
        let path = format!("{}/{}", blobs.dir, f.path);
        let mut parent = blobs.dir.clone();
        if let Some((folders, _)) = f.path.rsplit_once('/') {
            for part in folders.split('/') {
                parent = format!("{parent}/{part}");
                if dirs.insert(parent.clone()) {
                    append_dir(b, &parent).map_err(ImageError::Tar)?;
                }
            }
        }
        if f.mode == 0o160000 {
            append_dir(b, &path).map_err(ImageError::Tar)?;
            continue;
        }
        let blob = repo.find_blob(f.blob).map_err(git)?;
        match f.mode {
            0o120000 => {
                let target = String::from_utf8_lossy(blob.content()).into_owned();
                append_symlink(b, &path, std::path::Path::new(&target))
            }
            0o100755 => append_file(b, &path, blob.content(), 0o755),
            _ => append_file(b, &path, blob.content(), 0o644),
        }
        .map_err(ImageError::Tar)?;
    }
    Ok(())
}

/// The root image a base is built from (pulled or bootstrapped).
#[derive(Debug, Clone)]
pub struct Root {
    pub name: String,
    /// Its image id: a re-pulled or re-bootstrapped root makes a new base.
    pub id: String,
}

/// The base image of a suite.
pub fn base_plan(suite: Suite, root: &Root, ca: Option<&[u8]>) -> ImagePlan {
    let copy_ca = if ca.is_some() {
        "COPY patchgrade-ca.crt /usr/local/share/ca-certificates/patchgrade-ca.crt"
    } else {
        "# no extra CA certificate (--ca-cert none)"
    };
    let dockerfile = BASE_DOCKERFILE
        .replace("{{root}}", &root.name)
        .replace("{{copy_ca}}", copy_ca);
    let mut files = vec![ContextFile::new("setup_base.sh", SETUP_BASE)];
    if let Some(ca) = ca {
        files.push(ContextFile::new("patchgrade-ca.crt", ca));
    }
    // Addressed by the root's id, not its name: the same root pulled or
    // bootstrapped under another name gives the same base.
    let unnamed = BASE_DOCKERFILE.replace("{{copy_ca}}", copy_ca);
    ImagePlan::addressed(
        Tier::Base,
        format!("patchgrade.base.py.{}.{}", arch(), suite.name()),
        &[root.id.as_bytes(), unnamed.as_bytes()],
        dockerfile,
        files,
        Vec::new(),
    )
}

/// What an env image installs besides the spec's own lists, read from the
/// mirrors for one instance: the filtered requirements file, the translated
/// conda environment file and the spec's source trees.
#[derive(Debug, Clone, Default)]
pub struct EnvInputs {
    /// The spec's `conda_packages`, translated.
    pub packages: crate::conda::Translation,
    pub requirements: Option<String>,
    pub environment: Option<crate::backend::EnvFile>,
    /// `(name, tree)` per spec source, put at `SOURCES_DIR/<name>`.
    pub sources: Vec<(String, TreeSource)>,
    /// The spec's git sources with their histories, served under
    /// `GIT_SOURCES_DIR`.
    pub git: Vec<super::gitsources::GitPack>,
}

/// The env setup script: the spec's packages into the venv (its apt
/// packages come first, in a layer of their own: [`apt_step`]). `python` is the env's interpreter: its python image (the parent)
/// made the venv with pinned pip, setuptools and wheel; None: no Python env.
pub fn setup_env_script(
    suite: Suite,
    python: Option<&Interpreter>,
    spec: &Spec,
    inputs: &EnvInputs,
) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# patchgrade env image setup (generated).\nset -euxo pipefail\n",
    );
    if !inputs.sources.is_empty() {
        // Kept in the image: pre_install copies from here.
        let parent = SOURCES_DIR.rsplit_once('/').map_or("/", |(p, _)| p);
        s.push_str(&format!(
            "mkdir -p {parent}\nmv /root/patchgrade-env/sources {SOURCES_DIR}\n"
        ));
    }
    s.push_str(&super::gitsources::setup_lines(
        &inputs.git,
        "/root/patchgrade-env",
    ));
    if let Some(p) = python {
        s.push_str(&format!(
            "{VENV}/bin/python -c 'import sys; v = \"%d.%d\" % sys.version_info[:2]; sys.exit(0 if v == {v:?} else \"the venv has Python \" + v + \", the env wants {v}\")'\n",
            v = p.version.to_string()
        ));
    }
    if let Some(p) = python {
        s.push_str(&format!("source {VENV}/bin/activate\n"));
        // Extension modules without debug information (`nodebug`).
        s.push_str(&super::nodebug::wrapper_lines());
        if !inputs.packages.requirements.is_empty() {
            // conda's packages come first, in a step of their own.
            let first: Vec<String> = inputs
                .packages
                .requirements
                .iter()
                .map(|p| quote(p))
                .collect();
            s.push_str(&format!("python -m pip install {}\n", first.join(" ")));
        }
        if inputs.requirements.is_some() {
            s.push_str("python -m pip install -r /root/patchgrade-env/requirements.txt\n");
        }
        let pkgs: Vec<String> = spec.pip_packages.iter().map(|p| quote(p)).collect();
        if inputs.environment.is_some() {
            // One resolve for the environment file and the pins, so that
            // what it picks fits the pins (the reference installs the pins
            // over a solved conda env, which can leave it inconsistent).
            s.push_str(&format!(
                "python -m pip install -r /root/patchgrade-env/environment.txt {}\n",
                pkgs.join(" ")
            ));
        } else if !pkgs.is_empty() {
            s.push_str(&format!("python -m pip install {}\n", pkgs.join(" ")));
        }
        // A symlink to the venv's python (tox-current-env runs the tests
        // through one in .tox/) starts the base interpreter without the
        // venv; the reference's conda env has no such split. The image is
        // single-purpose, so the base interpreter (the suite's, or the
        // copied build's own site-packages) is pointed at the venv's
        // packages too.
        s.push_str(&format!(
            "sysdir=$({} -c 'import site; print(site.getsitepackages()[0])')\nmkdir -p \"$sysdir\"\n\
             python -c 'import site; print(site.getsitepackages()[0])' > \"$sysdir/patchgrade-venv.pth\"\n",
            quote(&p.executable.display().to_string())
        ));
        s.push_str(&super::nodebug::wrapper_end());
        // Byte-compile now: packages installed the legacy way have no .pyc,
        // and compiling them at import turns a SyntaxWarning in old code
        // into an error under `filterwarnings = error` (flask's blinker).
        s.push_str(&format!(
            "python -c 'import compileall, sys; compileall.compile_dir(sys.argv[1], quiet=2)' {VENV}/lib\n"
        ));
    }
    s.push_str(&format!(
        "echo 'patchgrade env for {} ready'\n",
        suite.name()
    ));
    s
}

/// The Debian packages of an env image beyond `apt_base_packages`: the
/// spec's, then those the conda translations add that it does not name.
fn apt_packages(spec: &Spec, inputs: &EnvInputs) -> Vec<String> {
    let mut apt: Vec<String> = spec
        .apt_packages
        .iter()
        .filter(|p| !spec.apt_base_packages.contains(p))
        .cloned()
        .collect();
    let cache = spec
        .snapshot_build
        .then(|| COMPILER_CACHE_PACKAGE.to_string());
    for p in inputs
        .packages
        .apt_packages
        .iter()
        .chain(
            inputs
                .environment
                .iter()
                .flat_map(|e| &e.translation.apt_packages),
        )
        .chain(&cache)
    {
        if !apt.contains(p) && !spec.apt_base_packages.contains(p) {
            apt.push(p.clone());
        }
    }
    apt
}

/// One apt step: the packages installed, the lists removed.
pub(super) fn apt_step(apt: &[String]) -> String {
    if apt.is_empty() {
        return "# no apt packages".into();
    }
    let pkgs: Vec<String> = apt.iter().map(|p| quote(p)).collect();
    format!(
        "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends {} && rm -rf /var/lib/apt/lists/*",
        pkgs.join(" ")
    )
}

/// The env image of a spec, on `parent`: the python image of `python`, or
/// the base image for a spec without Python. `inputs` are what was read
/// from the mirrors for it (see [`EnvInputs`]).
pub fn env_plan(
    suite: Suite,
    python: Option<&Interpreter>,
    parent: &str,
    spec: &Spec,
    inputs: &EnvInputs,
) -> ImagePlan {
    env_plan_on(suite, python, &[], parent, spec, inputs)
}

/// [`env_plan`] for a spec with toolchains too: `parent` is then its
/// toolchain image, and the env image is labelled with what was asked.
pub fn env_plan_on(
    suite: Suite,
    python: Option<&Interpreter>,
    toolchains: &[Toolchain],
    parent: &str,
    spec: &Spec,
    inputs: &EnvInputs,
) -> ImagePlan {
    let mut dockerfile = ENV_DOCKERFILE
        .replace("{{base}}", parent)
        .replace("{{apt}}", &apt_step(&apt_packages(spec, inputs)));
    if let Some(p) = python {
        dockerfile.push_str(&label_lines(&p.request_labels()));
        dockerfile.push('\n');
    }
    if !toolchains.is_empty() {
        let mut asked = std::collections::BTreeMap::new();
        for t in toolchains {
            asked.extend(t.request_labels());
        }
        dockerfile.push_str(&label_lines(&asked));
        dockerfile.push('\n');
    }
    let mut files = vec![ContextFile::new(
        "setup_env.sh",
        setup_env_script(suite, python, spec, inputs),
    )];
    if let Some(r) = &inputs.requirements {
        files.push(ContextFile::new("requirements.txt", r.as_str()));
    }
    if let Some(e) = &inputs.environment {
        files.push(ContextFile::new("environment.txt", e.requirements_text()));
    }
    for g in &inputs.git {
        files.push(ContextFile::new(&g.context_path(), g.pack.as_slice()));
    }
    if !inputs.git.is_empty() {
        dockerfile.push_str(super::gitsources::CARGO_GIT_CLI);
        dockerfile.push('\n');
    }
    let trees: Vec<(String, TreeSource)> = inputs
        .sources
        .iter()
        .map(|(name, t)| (format!("sources/{name}"), t.clone()))
        .collect();
    let tree_keys: String = trees
        .iter()
        .map(|(dir, t)| format!("{dir}={}\n", t.tree))
        .collect();
    // `py` alone for a spec with neither, as before toolchains existed.
    let mut parts: Vec<String> = Vec::new();
    if python.is_some() || toolchains.is_empty() {
        let py = python.map(|p| p.version.to_string()).unwrap_or_default();
        parts.push(format!("py{py}"));
    }
    parts.extend(
        toolchains
            .iter()
            .map(|t| format!("{}{}", t.language, t.asked)),
    );
    let what = name_part(&parts.join("-"));
    // Tree ids only when there are trees: the tags of other env images stay
    // what they were before sources existed.
    let mut keys: Vec<&[u8]> = vec![dockerfile.as_bytes()];
    if !tree_keys.is_empty() {
        keys.push(tree_keys.as_bytes());
    }
    ImagePlan::addressed(
        Tier::Env,
        format!("patchgrade.env.{what}.{}.{}", arch(), suite.name()),
        &keys,
        dockerfile.clone(),
        files,
        trees,
    )
}

/// The repository (the name before the tag) of an instance's image, the
/// same whether it is built whole or over a snapshot: `patchgrade images`
/// matches instances to images by it.
pub fn instance_repository(instance_id: &str) -> String {
    format!("patchgrade.eval.{}.{}", arch(), name_part(instance_id))
}

/// The repository of a dataset repository's (`owner/name`) snapshots.
pub fn snapshot_repository(repo: &str) -> String {
    format!(
        "patchgrade.snap.{}.{}",
        arch(),
        name_part(&repo.replace('/', "__"))
    )
}

/// The instance image of one instance: the base tree at /testbed, and the
/// spec's submodules filled from mirrors (`(path in the repository, tree)`).
pub fn instance_plan(
    env: &str,
    instance_id: &str,
    spec: &Spec,
    tree: TreeSource,
    submodules: Vec<(String, TreeSource)>,
) -> ImagePlan {
    let mut dockerfile = INSTANCE_DOCKERFILE.replace("{{env}}", env);
    dockerfile.push_str(&offline_env_line(spec.toolchains.keys().copied()));
    let files = vec![ContextFile::new("setup_repo.sh", setup_repo_script(spec))];
    let mut tree_id = tree.tree.to_string();
    let mut trees = vec![("testbed".to_string(), tree)];
    for (path, t) in submodules {
        tree_id.push_str(&format!("\n{path}={}", t.tree));
        trees.push((format!("testbed/{path}"), t));
    }
    ImagePlan::addressed(
        Tier::Instance,
        instance_repository(instance_id),
        &[dockerfile.as_bytes(), tree_id.as_bytes()],
        dockerfile.clone(),
        files,
        trees,
    )
}

/// The snapshot image of `repo` at tree `anchor` on `env` (see
/// [`super::snapshot`]); kept and evicted with the env tier. A spec that
/// builds nothing in its snapshot gets its git objects as a pack made from
/// the mirror when the image is built ([`ImagePlan::with_objects_pack`]);
/// a `snapshot_build` spec's setup needs a repository of the tree, so its
/// snapshot commits the tree in the image and packs that.
pub fn snapshot_plan(env: &str, repo: &str, spec: &Spec, anchor: TreeSource) -> ImagePlan {
    let (dockerfile, files) = if spec.snapshot_build {
        // The setup runs in the snapshot's repository, before its objects
        // are packed away (see `setup`).
        let parent = SNAPSHOT_OBJECTS.rsplit_once('/').map_or("/", |(p, _)| p);
        let dockerfile = SNAPSHOT_DOCKERFILE
            .replace("{{env}}", env)
            .replace("{{objects_parent}}", parent)
            .replace("{{objects}}", SNAPSHOT_OBJECTS);
        let setup = ContextFile::new("setup_snapshot.sh", setup_snapshot_script(spec));
        (dockerfile, vec![setup])
    } else {
        let dockerfile = SNAPSHOT_TREE_DOCKERFILE
            .replace("{{env}}", env)
            .replace("{{objects}}", SNAPSHOT_OBJECTS)
            .replace("{{pack}}", SNAPSHOT_PACK);
        (dockerfile, Vec::new())
    };
    let tree_id = anchor.tree.to_string();
    ImagePlan::addressed(
        Tier::Env,
        snapshot_repository(repo),
        &[dockerfile.as_bytes(), tree_id.as_bytes()],
        dockerfile.clone(),
        files,
        vec![("testbed".to_string(), anchor)],
    )
}

/// The instance image of one instance over `snapshot`, named but without
/// its changes: [`ImagePlan::with_delta`] adds them when it is built.
pub fn delta_instance_plan(
    snapshot: &str,
    instance_id: &str,
    spec: &Spec,
    tree: git2::Oid,
) -> ImagePlan {
    let mut dockerfile = DELTA_DOCKERFILE
        .replace("{{snapshot}}", snapshot)
        .replace("{{setup}}", DELTA_SETUP);
    dockerfile.push_str(&offline_env_line(spec.toolchains.keys().copied()));
    let files = vec![ContextFile::new(
        &format!("testbed/.git/{DELTA_SETUP}"),
        setup_delta_repo_script(spec, tree),
    )];
    ImagePlan::addressed(
        Tier::Instance,
        instance_repository(instance_id),
        &[dockerfile.as_bytes()],
        dockerfile.clone(),
        files,
        Vec::new(),
    )
}

#[cfg(test)]
#[path = "plans_tests.rs"]
mod tests;
