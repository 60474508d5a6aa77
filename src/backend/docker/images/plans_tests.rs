//! Unit tests of `images::plans` (a file of their own: plans.rs stays short).

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
    let s1 = spec("python: '3.11'\npip_packages: [pytest]\ntest_cmd: pytest\nlog_parser: pytest\n");
    let s2 =
        spec("python: '3.11'\npip_packages: [pytest==8.0]\ntest_cmd: pytest\nlog_parser: pytest\n");
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
    let s3 =
        spec("python: '3.11'\npip_packages: [pytest]\ntest_cmd: pytest -x\nlog_parser: pytest\n");
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
        git: Vec::new(),
    };
    let plan = env_plan(Suite::Bookworm, Some(&py), "py:1", &s, &inputs);
    let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
    // The spec's apt packages, then the translation's not yet named, in a
    // Dockerfile step of their own before the context is copied (a layer
    // other env images with the same list share); none in the script.
    let apt = "--no-install-recommends 'wget' 'libhdf5-dev' 'libgtk-4-1' 'gir1.2-gtk-4.0' && rm -rf /var/lib/apt/lists/*\n";
    assert!(plan.dockerfile.contains(apt), "{}", plan.dockerfile);
    assert!(
        plan.dockerfile.find(apt) < plan.dockerfile.find("COPY . "),
        "{}",
        plan.dockerfile
    );
    assert!(!script.contains("apt-get"), "{script}");
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

#[test]
fn toolchain_specs_get_their_env_name_labels_fixtures_and_offline_tests() {
    let mut s = spec(
        "toolchains: {rust: '1.81'}\ninstall: cargo test --no-run\ntest_cmd: cargo test\nlog_parser: cargo\n",
    );
    let t = crate::toolchain::Toolchain {
        language: crate::toolchain::Language::Rust,
        asked: "1.81".into(),
        given: crate::toolchain::Version(vec![1, 95, 0]),
        source: crate::toolchain::Source::Rustup { dir: "/r".into() },
        home: crate::toolchain::rust::HOME.into(),
        deviation: Some("spec says Rust 1.81, runs on 1.95.0".into()),
    };
    let env = env_plan_on(
        Suite::Bookworm,
        None,
        std::slice::from_ref(&t),
        "tool:1",
        &s,
        &EnvInputs::default(),
    );
    assert!(
        env.name
            .starts_with(&format!("patchgrade.env.rust1.81.{}.bookworm:", arch())),
        "{}",
        env.name
    );
    assert!(env.dockerfile.contains("FROM tool:1"));
    assert!(env
        .dockerfile
        .contains("\"patchgrade.toolchain.rust.asked\"=\"1.81\""));
    assert!(env
        .dockerfile
        .contains("patchgrade.toolchain.rust.deviation"));
    // Without toolchains the name is what it was.
    let plain = env_plan(Suite::Bookworm, None, "base:1", &s, &EnvInputs::default());
    assert!(plain.name.contains(".env.py."), "{}", plain.name);

    s.files.insert(
        "Cargo.lock".into(),
        crate::spec::Fixture {
            name: "x.lock".into(),
            content: "# pinned\nEOF_PATCHGRADE_FIXTURE\n".into(),
        },
    );
    let d = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init_bare(d.path()).unwrap();
    let tree = repo.treebuilder(None).unwrap().write().unwrap();
    let plan = instance_plan(
        &env.name,
        "acme__calc-1",
        &s,
        TreeSource {
            repo: repo.path().to_path_buf(),
            tree,
        },
        Vec::new(),
    );
    assert!(
        plan.dockerfile
            .ends_with("WORKDIR /testbed\nENV CARGO_NET_OFFLINE=true\n"),
        "{}",
        plan.dockerfile
    );
    let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
    // The fixture is written before pre_install and install, with a
    // delimiter its content does not hold.
    let at = script
        .find("cat > 'Cargo.lock' <<'EOF_PATCHGRADE_FIXTURE_'\n# pinned\nEOF_PATCHGRADE_FIXTURE\nEOF_PATCHGRADE_FIXTURE_\n")
        .unwrap_or_else(|| panic!("{script}"));
    assert!(at < script.find("cargo test --no-run").unwrap());
    let delta = delta_instance_plan("snap:1", "acme__calc-1", &s, tree);
    assert!(delta.dockerfile.ends_with("ENV CARGO_NET_OFFLINE=true\n"));
}

/// A git source is sent as a pack, served by the setup script, and cargo is
/// told to fetch with git's command line; another history, another tag.
#[test]
fn git_sources_are_packs_in_the_env_context() {
    let s = spec("test_cmd: t\nlog_parser: cargo\ninstall: cargo fetch\n");
    let pack = |bytes: &[u8]| crate::backend::docker::images::gitsources::GitPack {
        name: "reedline".into(),
        url: "https://github.com/nushell/reedline".into(),
        commit: git2::Oid::from_str("a580ea56d4e5a889468b2969d2a1534379504ab6").unwrap(),
        branch: "main".into(),
        pack: bytes.to_vec(),
    };
    let with = |bytes: &[u8]| EnvInputs {
        git: vec![pack(bytes)],
        ..EnvInputs::default()
    };
    let plan = env_plan(Suite::Bookworm, None, "tc:1", &s, &with(b"PACK1"));
    assert!(plan
        .files
        .iter()
        .any(|f| f.path == "git/reedline.pack" && f.data == b"PACK1"));
    assert!(plan
        .dockerfile
        .contains("ENV CARGO_NET_GIT_FETCH_WITH_CLI=true"));
    let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
    assert!(
        script.contains("git init -q --bare '/opt/patchgrade/git/reedline'"),
        "{script}"
    );
    assert!(script.contains(
        "git config --system 'url.file:///opt/patchgrade/git/reedline.insteadOf' 'https://github.com/nushell/reedline'"
    ), "{script}");
    let other = env_plan(Suite::Bookworm, None, "tc:1", &s, &with(b"PACK2"));
    assert_ne!(plan.name, other.name);
    let none = env_plan(Suite::Bookworm, None, "tc:1", &s, &EnvInputs::default());
    assert!(!none.dockerfile.contains("CARGO_NET_GIT_FETCH_WITH_CLI"));
}

/// A `snapshot_build` spec's snapshot runs its setup between the commit
/// and the packing, and its env gets the compiler cache's package; any
/// other spec's snapshot commits nothing in the image: its objects are a
/// pack from the mirror, added when it is built (the name unchanged).
#[test]
fn a_snapshot_build_snapshot_runs_the_setup_before_packing() {
    let anchor = || TreeSource {
        repo: PathBuf::from("/m.git"),
        tree: git2::Oid::from_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904").unwrap(),
    };
    let plain = spec("install: pip install -e .\ntest_cmd: t\nlog_parser: pytest\n");
    let built =
        spec("install: pip install -e .\ntest_cmd: t\nlog_parser: pytest\nsnapshot_build: true\n");
    let p = snapshot_plan("env:1", "acme/w", &plain, anchor());
    assert!(p.files.is_empty());
    let steps: String = p
        .dockerfile
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    for absent in ["{{", "setup_snapshot", "git add", "commit", "repack"] {
        assert!(!steps.contains(absent), "{absent}:\n{}", p.dockerfile);
    }
    let objects = "COPY snapshot-objects /opt/patchgrade/snapshot-objects\nRUN git index-pack /opt/patchgrade/snapshot-objects/pack/pack-patchgrade-snapshot.pack";
    assert!(p.dockerfile.contains(objects), "{}", p.dockerfile);
    let packed = p.clone().with_objects_pack(b"PACK".to_vec());
    assert_eq!(packed.name, p.name);
    assert_eq!(
        packed.files[0].path,
        "snapshot-objects/pack/pack-patchgrade-snapshot.pack"
    );
    let b = snapshot_plan("env:1", "acme/w", &built, anchor());
    assert_ne!(p.name, b.name);
    assert_eq!(b.files.len(), 1);
    assert_eq!(b.files[0].path, "setup_snapshot.sh");
    let d = &b.dockerfile;
    let at = |needle: &str| d.find(needle).unwrap_or_else(|| panic!("{needle}:\n{d}"));
    assert!(at("COPY testbed /testbed") < at("COPY setup_snapshot.sh /root/setup_snapshot.sh"));
    assert!(at("commit -q --no-verify") < at("bash /root/setup_snapshot.sh"));
    assert!(at("bash /root/setup_snapshot.sh") < at("repack -a -d"));
    let apt = |s: &Spec| apt_step(&apt_packages(s, &EnvInputs::default()));
    assert!(apt(&built).contains("'ccache'"), "{}", apt(&built));
    assert_eq!(apt(&plain), "# no apt packages");
}
