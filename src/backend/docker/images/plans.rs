//! What builds each image: its Dockerfile (from `harness-scripts/docker/`),
//! the generated setup scripts, the build context's files and, for
//! instances, the base commit's tree; and the tag that addresses them.

use std::path::PathBuf;

use super::python::label_lines;
use super::{activate_line, arch, name_part, tag_of, ImageError, Suite, Tier, TESTBED, VENV};
use crate::backend::docker::archive::{append_dir, append_file, append_tree, TreeError};
use crate::python::Interpreter;
use crate::script::quote;
use crate::spec::{Spec, SOURCES_DIR};

const BASE_DOCKERFILE: &str = include_str!("../../../../harness-scripts/docker/base.Dockerfile");
const SETUP_BASE: &str = include_str!("../../../../harness-scripts/docker/setup_base.sh");
const ENV_DOCKERFILE: &str = include_str!("../../../../harness-scripts/docker/env.Dockerfile");
const INSTANCE_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/instance.Dockerfile");

/// A file of a build context besides the Dockerfile.
#[derive(Debug, Clone)]
pub struct ContextFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

impl ContextFile {
    fn new(path: &str, data: impl Into<Vec<u8>>) -> ContextFile {
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
}

impl ImagePlan {
    /// A plan named `<repository>:<tag>`, the tag a hash of `keys` and the
    /// context files: what built the image, so a change makes a new one.
    fn addressed(
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
        b.into_inner().map_err(ImageError::Tar)
    }
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
}

/// The env setup script: apt packages, then the spec's packages into the
/// venv. `python` is the env's interpreter: its python image (the parent)
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
    if let Some(p) = python {
        s.push_str(&format!(
            "{VENV}/bin/python -c 'import sys; v = \"%d.%d\" % sys.version_info[:2]; sys.exit(0 if v == {v:?} else \"the venv has Python \" + v + \", the env wants {v}\")'\n",
            v = p.version.to_string()
        ));
    }
    let mut apt: Vec<&String> = spec.apt_packages.iter().collect();
    for p in inputs.packages.apt_packages.iter().chain(
        inputs
            .environment
            .iter()
            .flat_map(|e| &e.translation.apt_packages),
    ) {
        if !apt.contains(&p) {
            apt.push(p);
        }
    }
    if !apt.is_empty() {
        let pkgs: Vec<String> = apt.iter().map(|p| quote(p)).collect();
        s.push_str(&format!(
            "apt-get update -qq\napt-get install -y -qq --no-install-recommends {}\nrm -rf /var/lib/apt/lists/*\n",
            pkgs.join(" ")
        ));
    }
    if let Some(p) = python {
        s.push_str(&format!("source {VENV}/bin/activate\n"));
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
    let mut dockerfile = ENV_DOCKERFILE.replace("{{base}}", parent);
    if let Some(p) = python {
        dockerfile.push_str(&label_lines(&p.request_labels()));
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
    let trees: Vec<(String, TreeSource)> = inputs
        .sources
        .iter()
        .map(|(name, t)| (format!("sources/{name}"), t.clone()))
        .collect();
    let tree_keys: String = trees
        .iter()
        .map(|(dir, t)| format!("{dir}={}\n", t.tree))
        .collect();
    let py = python.map(|p| p.version.to_string()).unwrap_or_default();
    // Tree ids only when there are trees: the tags of other env images stay
    // what they were before sources existed.
    let mut keys: Vec<&[u8]> = vec![dockerfile.as_bytes()];
    if !tree_keys.is_empty() {
        keys.push(tree_keys.as_bytes());
    }
    ImagePlan::addressed(
        Tier::Env,
        format!("patchgrade.env.py{py}.{}.{}", arch(), suite.name()),
        &keys,
        dockerfile.clone(),
        files,
        trees,
    )
}

/// The repo setup script of instance images.
pub fn setup_repo_script(spec: &Spec) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# patchgrade instance image setup (generated).\nset -euxo pipefail\n",
    );
    s.push_str(&format!("cd {TESTBED}\n"));
    // The tree as one commit: no history, nothing newer than the base.
    s.push_str("git init -q\ngit add -A -f\ngit commit -q --no-verify --allow-empty -m 'patchgrade base tree'\n");
    s.push_str("set +u\n");
    s.push_str(&activate_line());
    s.push_str("\nset -u\n");
    // The spec's environment applies to setup too (e.g. the pretend version
    // for setuptools_scm, which finds no tags in a one-commit repository).
    for (k, v) in &spec.env {
        s.push_str(&format!("export {k}={}\n", quote(v)));
    }
    for cmd in &spec.pre_install {
        s.push_str(cmd);
        s.push('\n');
    }
    if let Some(install) = &spec.install {
        s.push_str(install);
        s.push('\n');
    }
    // A setup commit: `git diff` afterwards shows only the candidate's
    // changes (reference #353); untracked build output stays untracked.
    s.push_str(&format!(
        "cd {TESTBED}\ngit commit -q --no-verify --allow-empty -am 'patchgrade setup'\n"
    ));
    s
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
    let dockerfile = INSTANCE_DOCKERFILE.replace("{{env}}", env);
    let files = vec![ContextFile::new("setup_repo.sh", setup_repo_script(spec))];
    let mut tree_id = tree.tree.to_string();
    let mut trees = vec![("testbed".to_string(), tree)];
    for (path, t) in submodules {
        tree_id.push_str(&format!("\n{path}={}", t.tree));
        trees.push((format!("testbed/{path}"), t));
    }
    ImagePlan::addressed(
        Tier::Instance,
        format!("patchgrade.eval.{}.{}", arch(), name_part(instance_id)),
        &[dockerfile.as_bytes(), tree_id.as_bytes()],
        dockerfile.clone(),
        files,
        trees,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn reqs(text: &str) -> EnvInputs {
        EnvInputs {
            requirements: Some(text.into()),
            ..Default::default()
        }
    }

    #[test]
    fn tags_are_content_addressed() {
        let root = Root {
            name: "debian:bookworm-slim".into(),
            id: "sha256:1".into(),
        };
        let a = base_plan(Suite::Bookworm, &root, Some(b"cert"));
        assert_eq!(
            a.name,
            base_plan(Suite::Bookworm, &root, Some(b"cert")).name
        );
        assert_ne!(
            a.name,
            base_plan(Suite::Bookworm, &root, Some(b"other")).name
        );
        let renamed = Root {
            name: "127.0.0.1:5000/debian:bookworm-slim".into(),
            ..root.clone()
        };
        assert_eq!(
            a.name,
            base_plan(Suite::Bookworm, &renamed, Some(b"cert")).name
        );
        let root2 = Root {
            id: "sha256:2".into(),
            ..root
        };
        assert_ne!(
            a.name,
            base_plan(Suite::Bookworm, &root2, Some(b"cert")).name
        );

        let py = crate::python::resolve("3.11", &Default::default()).unwrap();
        let s1 =
            spec("python: '3.11'\npip_packages: [pytest]\ntest_cmd: pytest\nlog_parser: pytest\n");
        let s2 = spec(
            "python: '3.11'\npip_packages: [pytest==8.0]\ntest_cmd: pytest\nlog_parser: pytest\n",
        );
        let e1 = env_plan(
            Suite::Bookworm,
            Some(&py),
            &a.name,
            &s1,
            &EnvInputs::default(),
        );
        assert_eq!(
            e1.name,
            env_plan(
                Suite::Bookworm,
                Some(&py),
                &a.name,
                &s1,
                &EnvInputs::default()
            )
            .name
        );
        assert_ne!(
            e1.name,
            env_plan(
                Suite::Bookworm,
                Some(&py),
                &a.name,
                &s2,
                &EnvInputs::default()
            )
            .name
        );
        assert_ne!(
            e1.name,
            env_plan(Suite::Bookworm, Some(&py), &a.name, &s1, &reqs("six\n")).name
        );
        // The test command is not part of the env: specs differing only
        // there share env images.
        let s3 = spec(
            "python: '3.11'\npip_packages: [pytest]\ntest_cmd: pytest -x\nlog_parser: pytest\n",
        );
        assert_eq!(
            e1.name,
            env_plan(
                Suite::Bookworm,
                Some(&py),
                &a.name,
                &s3,
                &EnvInputs::default()
            )
            .name
        );
        // Without an environment file or sources the tag is what it was
        // before they existed: the Dockerfile and the context files.
        let parts: Vec<&[u8]> = std::iter::once(e1.dockerfile.as_bytes())
            .chain(e1.files.iter().map(|f| f.data.as_slice()))
            .collect();
        assert_eq!(e1.name.rsplit(':').next(), Some(tag_of(&parts).as_str()));
        assert!(e1.files[0].data.starts_with(b"#!/bin/bash"));
        assert!(String::from_utf8_lossy(&e1.files[0].data).contains("pip install 'pytest'"));
    }

    #[test]
    fn env_scripts_use_the_python_images_venv() {
        use crate::python::{resolve, HostSearch};
        let d = tempfile::tempdir().unwrap();
        crate::python::find::tests::fake_build(&d.path().join("pyenv/versions/3.6.15"), "3.6.15");
        let search = HostSearch {
            pyenv_roots: vec![d.path().join("pyenv")],
            ..Default::default()
        };
        let s = spec("python: '3.5'\npip_packages: [six]\ntest_cmd: t\nlog_parser: pytest\n");
        let copied = resolve("3.5", &search).unwrap();
        let plan = env_plan(
            Suite::Bookworm,
            Some(&copied),
            "py:1",
            &s,
            &EnvInputs::default(),
        );
        assert!(
            plan.name
                .starts_with(&format!("patchgrade.env.py3.6.{}.bookworm:", arch())),
            "{}",
            plan.name
        );
        assert!(plan.dockerfile.contains("FROM py:1"));
        assert!(
            plan.dockerfile
                .contains("\"patchgrade.python.requested\"=\"3.5\""),
            "{}",
            plan.dockerfile
        );
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        // The python image made the venv with pinned tools: no second venv,
        // no pip upgrade; the version check and the .pth of the copied
        // build's own site-packages go through its paths.
        assert!(
            !script.contains("-m venv") && !script.contains("install 'pip"),
            "{script}"
        );
        assert!(
            script.contains(&format!("{VENV}/bin/python -c")),
            "{script}"
        );
        assert!(script.contains("v == \"3.6\""), "{script}");
        let exe = d.path().join("pyenv/versions/3.6.15/bin/python3.6");
        assert!(
            script.contains(&format!(
                "sysdir=$({} -c",
                quote(&exe.display().to_string())
            )),
            "{script}"
        );
        assert!(script.contains("pip install 'six'"), "{script}");
        // The suite's python3: the same script through /usr/bin/python3.11.
        let suite = resolve("3.11", &search).unwrap();
        let plan = env_plan(
            Suite::Bookworm,
            Some(&suite),
            "py:2",
            &s,
            &EnvInputs::default(),
        );
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        assert!(
            script.contains("sysdir=$('/usr/bin/python3.11' -c"),
            "{script}"
        );
        // Without Python: no venv lines at all, on the base.
        let none = spec("test_cmd: t\nlog_parser: pytest\n");
        let plan = env_plan(
            Suite::Bookworm,
            None,
            "base:1",
            &none,
            &EnvInputs::default(),
        );
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        assert!(!script.contains(VENV), "{script}");
        assert!(plan.name.starts_with("patchgrade.env.py."), "{}", plan.name);
    }

    #[test]
    fn an_environment_file_and_sources_go_into_the_env_image() {
        let d = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(d.path().join("ft.git")).unwrap();
        let blob = repo.blob(b"int x;\n").unwrap();
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("x.c", blob, 0o100644).unwrap();
        let tree = tb.write().unwrap();
        let py = crate::python::resolve("3.11", &Default::default()).unwrap();
        let s = spec("python: '3.11'\napt_packages: [wget, libhdf5-dev]\npip_packages: [numpy==1.25.2]\ntest_cmd: t\nlog_parser: pytest\n");
        let env = crate::conda::translate(
            "environment.yml at c0ffee",
            "dependencies: [hdf5, gtk4, pytest]\n",
            &[],
            &s.pip_packages,
        )
        .unwrap();
        let inputs = EnvInputs {
            packages: crate::conda::translate_packages(&["setuptools==38.2.4".into()]).unwrap(),
            requirements: None,
            environment: Some(crate::backend::EnvFile {
                source: "environment.yml at c0ffee".into(),
                translation: env,
            }),
            sources: vec![(
                "ft-2.6.1".into(),
                TreeSource {
                    repo: d.path().join("ft.git"),
                    tree,
                },
            )],
        };
        let plan = env_plan(Suite::Bookworm, Some(&py), "py:1", &s, &inputs);
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        // The spec's apt packages, then the translation's not yet named.
        assert!(
            script.contains(
                "--no-install-recommends 'wget' 'libhdf5-dev' 'libgtk-4-1' 'gir1.2-gtk-4.0'\n"
            ),
            "{script}"
        );
        // One resolve: the environment file with the pins.
        assert!(
            script.contains(
                "python -m pip install -r /root/patchgrade-env/environment.txt 'numpy==1.25.2'\n"
            ),
            "{script}"
        );
        assert!(!script.contains("pip install 'numpy"), "{script}");
        // conda's packages first, on their own.
        let first = script
            .find("python -m pip install 'setuptools==38.2.4'\n")
            .expect(&script);
        assert!(first < script.find("environment.txt").unwrap(), "{script}");
        assert!(
            script.contains(&format!("mv /root/patchgrade-env/sources {SOURCES_DIR}\n")),
            "{script}"
        );
        let envtxt = plan
            .files
            .iter()
            .find(|f| f.path == "environment.txt")
            .unwrap();
        let envtxt = String::from_utf8_lossy(&envtxt.data);
        assert!(envtxt.ends_with("\npytest\n"), "{envtxt}");
        let bytes = plan.context_tar().unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let names: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(
            names.iter().any(|n| n == "sources/ft-2.6.1/x.c"),
            "{names:?}"
        );
        // Another source tree, another image.
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("y.c", blob, 0o100644).unwrap();
        let other = EnvInputs {
            sources: vec![(
                "ft-2.6.1".into(),
                TreeSource {
                    repo: d.path().join("ft.git"),
                    tree: tb.write().unwrap(),
                },
            )],
            ..inputs.clone()
        };
        assert_ne!(
            plan.name,
            env_plan(Suite::Bookworm, Some(&py), "py:1", &s, &other).name
        );
    }

    #[test]
    fn instance_context_has_the_tree_with_modes_and_links() {
        let d = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(d.path().join("m.git")).unwrap();
        let blob = repo.blob(b"print(1)\n").unwrap();
        let exe = repo.blob(b"#!/bin/sh\n").unwrap();
        let link = repo.blob(b"a.py").unwrap();
        let mut sub = repo.treebuilder(None).unwrap();
        sub.insert("x.py", blob, 0o100644).unwrap();
        let sub = sub.write().unwrap();
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("a.py", blob, 0o100644).unwrap();
        tb.insert("run.sh", exe, 0o100755).unwrap();
        tb.insert("alias.py", link, 0o120000).unwrap();
        tb.insert("pkg", sub, 0o040000).unwrap();
        let tree = tb.write().unwrap();
        let s = spec("python: '3.11'\ninstall: pip install -e .\npre_install: [\"sed -i s/a/b/ tox.ini\"]\ntest_cmd: t\nlog_parser: pytest\n");
        let plan = instance_plan(
            "env:1",
            "Acme__W-1",
            &s,
            TreeSource {
                repo: d.path().join("m.git"),
                tree,
            },
            Vec::new(),
        );
        assert!(
            plan.name
                .starts_with(&format!("patchgrade.eval.{}.acme__w-1:", arch())),
            "{}",
            plan.name
        );
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        let (pre, inst, setup) = (
            script.find("sed -i").unwrap(),
            script.find("pip install -e .").unwrap(),
            script.find("patchgrade setup").unwrap(),
        );
        assert!(pre < inst && inst < setup, "{script}");
        let bytes = plan.context_tar().unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut seen = Vec::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let p = e.path().unwrap().display().to_string();
            let h = e.header();
            seen.push((
                p,
                h.entry_type(),
                h.mode().unwrap(),
                e.link_name().unwrap().map(|l| l.display().to_string()),
            ));
        }
        let find = |p: &str| {
            seen.iter()
                .find(|s| s.0.trim_end_matches('/') == p)
                .unwrap_or_else(|| panic!("{p} in {seen:?}"))
                .clone()
        };
        assert!(find("Dockerfile").1.is_file());
        assert_eq!(find("testbed/run.sh").2, 0o755);
        assert_eq!(find("testbed/a.py").2, 0o644);
        assert!(find("testbed/alias.py").1.is_symlink());
        assert_eq!(find("testbed/alias.py").3.as_deref(), Some("a.py"));
        assert!(find("testbed/pkg").1.is_dir());
        assert!(find("testbed/pkg/x.py").1.is_file());
        // Another tree, another tag.
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("a.py", exe, 0o100644).unwrap();
        let other = tb.write().unwrap();
        let plan2 = instance_plan(
            "env:1",
            "Acme__W-1",
            &s,
            TreeSource {
                repo: d.path().join("m.git"),
                tree: other,
            },
            Vec::new(),
        );
        assert_ne!(plan.name, plan2.name);
        // A submodule filled from a mirror: its files under its path, and
        // another image than the same base tree without it.
        let plan3 = instance_plan(
            "env:1",
            "Acme__W-1",
            &s,
            TreeSource {
                repo: d.path().join("m.git"),
                tree,
            },
            vec![(
                "vendor/helpers".into(),
                TreeSource {
                    repo: d.path().join("m.git"),
                    tree: sub,
                },
            )],
        );
        assert_ne!(plan.name, plan3.name);
        let bytes = plan3.context_tar().unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let names: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        for want in ["testbed/a.py", "testbed/vendor/helpers/x.py"] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
    }
}
