//! The toolchain image: a base image plus the toolchains a spec's
//! `toolchains:` asks for ([`crate::toolchain`]), between base and env:
//! `base → toolchain → env → instance`. Each toolchain copied from the host
//! (a rustup toolchain, a Go or JDK folder, a registry download in
//! patchgrade's cache) travels in the build context under
//! `toolchains/<language>/`, streamed a file at a time, and is `COPY`ed to
//! its path in the image; a Debian one is installed from the suite. Pure
//! code: it reads host folders to make the context and never talks to the
//! engine.
//!
//! Named from the folders' file lists (stat only, as the python image is),
//! so every instance asking for the same toolchains shares one image, and
//! a toolchain updated on the host gives a new one. Kept and evicted with
//! the base tier (`--cache-level base` and up keep it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::hostfiles::{Manifest, WalkError};
use super::lines::{env_value, label_lines};
use super::plans::{ContextFile, ImagePlan};
use super::{arch, tag_of, Suite, Tier};
use crate::script::quote;
use crate::toolchain::{rust, Language, Source, Toolchain, ToolchainError};

const TOOLCHAIN_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/toolchain.Dockerfile");
const SETUP_TOOLCHAIN: &str = include_str!("../../../../harness-scripts/docker/setup_toolchain.sh");
const JAVA_CACERTS: &str = include_str!("../../../../harness-scripts/docker/java_cacerts.sh");

/// The host's npm, copied beside a Node.js from the registry (whose
/// package holds `node` alone).
pub const HOST_NPM: &str = "/usr/lib/node_modules/npm";

/// A toolchain with the file lists of what the image gets from the host.
#[derive(Debug, Clone)]
pub struct ChosenToolchain {
    pub toolchain: Toolchain,
    /// `(folder in the image, its files)`, walked once per run.
    pub copies: Vec<(String, Arc<Manifest>)>,
}

/// What of a toolchain's host folder goes into the image.
fn keep(t: &Toolchain, rel: &Path) -> bool {
    match (&t.language, &t.source) {
        (Language::Rust, _) => rust::keep(rel),
        // A JDK's docs and man pages, and Go's test data, are not needed to
        // build and test.
        (Language::Java, _) => !(rel.starts_with("docs") || rel.starts_with("man")),
        (Language::Go, _) => !(rel.starts_with("test") || rel.starts_with("api")),
        // The host's Node is in /usr: only node itself.
        (Language::Node, Source::Host { .. }) => {
            rel == Path::new("bin") || rel == Path::new("bin/node")
        }
        (Language::Node, _) => true,
    }
}

/// The file lists of `t`'s host folders (none for a Debian package).
pub fn choose(t: Toolchain) -> Result<ChosenToolchain, ToolchainError> {
    let io = |(path, source): WalkError| ToolchainError::Io {
        language: t.language,
        path,
        source,
    };
    let mut copies = Vec::new();
    if let Some(dir) = t.source.host_dir() {
        let mut m = Manifest::walk(dir, &|rel: &Path| keep(&t, rel)).map_err(io)?;
        if matches!(t.source, Source::GoProxy { .. }) {
            m = m.with_exec(&|rel: &Path| rel.starts_with("bin") || rel.starts_with("pkg/tool"));
        }
        copies.push((t.home.display().to_string(), Arc::new(m)));
        // npm goes beside node: the host's Node folder (`/usr`) is copied
        // as `bin/node` alone, so its npm is copied on its own; a Node from
        // the registry older than the host's npm supports carries its own
        // npm (`node::OWN_NPM`, copied with the package), else it gets the
        // host's.
        let own = dir.join(crate::toolchain::node::OWN_NPM);
        let npm_from = match t.source {
            Source::Host { .. } if own.is_dir() => Some(own),
            Source::Host { .. } => Some(PathBuf::from(HOST_NPM)),
            _ if own.is_dir() => None,
            _ => Some(PathBuf::from(HOST_NPM)),
        };
        if let Some(from) = npm_from.filter(|_| t.language == Language::Node) {
            let npm = Manifest::walk(&from, &|_: &Path| true).map_err(io)?;
            copies.push((
                format!("{}/lib/node_modules/npm", t.home.display()),
                Arc::new(npm),
            ));
        }
    }
    Ok(ChosenToolchain {
        toolchain: t,
        copies,
    })
}

/// The check and setup of one toolchain in the image.
fn step(t: &Toolchain) -> String {
    let home = t.home.display().to_string();
    match t.language {
        Language::Rust => format!(
            "mkdir -p {}\n{home}/bin/rustc --version\n{home}/bin/cargo --version\n",
            rust::CARGO_HOME
        ),
        Language::Go => format!(
            "mkdir -p {}\n{home}/bin/go version\n",
            crate::toolchain::go::GOPATH
        ),
        Language::Node => format!(
            "ln -sf ../lib/node_modules/npm/bin/npm-cli.js {home}/bin/npm\n\
             ln -sf ../lib/node_modules/npm/bin/npx-cli.js {home}/bin/npx\n\
             {home}/bin/node --version\n{home}/bin/npm --version\n"
        ),
        Language::Java => format!(
            "{home}/bin/java -version\n{home}/bin/javac -version\n{}",
            JAVA_CACERTS.replace("{{home}}", &home)
        ),
    }
}

/// The setup script of the toolchain image.
pub fn setup_toolchain_script(chosen: &[ChosenToolchain]) -> String {
    let apt: Vec<String> = chosen
        .iter()
        .filter_map(|c| match &c.toolchain.source {
            Source::Debian { package } => Some(quote(package)),
            _ => None,
        })
        .collect();
    let steps: String = chosen.iter().map(|c| step(&c.toolchain)).collect();
    SETUP_TOOLCHAIN
        .replace("{{apt_packages}}", &apt.join(" "))
        .replace("{{steps}}", steps.trim_end())
}

/// The toolchain image's Dockerfile on `base`.
pub fn toolchain_dockerfile(chosen: &[ChosenToolchain], base: &str) -> String {
    let mut copies = Vec::new();
    let mut path = Vec::new();
    let mut env = Vec::new();
    let mut labels = std::collections::BTreeMap::new();
    for c in chosen {
        for (i, (dest, _)) in c.copies.iter().enumerate() {
            copies.push(format!(
                "COPY {} {dest}",
                context_dir(c.toolchain.language, i)
            ));
        }
        path.extend(c.toolchain.path_entries());
        env.extend(c.toolchain.env());
        labels.extend(c.toolchain.labels());
    }
    let mut env_line = format!("ENV PATH={}:$PATH", path.join(":"));
    for (k, v) in env {
        env_line.push_str(&format!(" \\\n    {k}={}", env_value(&v)));
    }
    TOOLCHAIN_DOCKERFILE
        .replace("{{base}}", base)
        .replace("{{copies}}", &copies.join("\n"))
        .replace("{{env}}", &env_line)
        .replace("{{labels}}", &label_lines(&labels))
}

/// Where the `i`th copy of a language travels in the build context.
fn context_dir(language: Language, i: usize) -> String {
    match i {
        0 => format!("toolchains/{language}"),
        _ => format!("toolchains/{language}-{i}"),
    }
}

/// The toolchain image's name (`patchgrade.tool.rust1.95.0.<arch>.bookworm:<tag>`),
/// the tag a hash of the base, the Dockerfile, the script and the copied
/// folders' file lists (stat only): cheap to ask before every build.
pub fn toolchain_image_name(chosen: &[ChosenToolchain], base: &str, suite: Suite) -> String {
    let dockerfile = toolchain_dockerfile(chosen, base);
    let script = setup_toolchain_script(chosen);
    let prints: Vec<Vec<u8>> = chosen
        .iter()
        .flat_map(|c| {
            c.copies
                .iter()
                .map(|(dest, m)| [dest.as_bytes(), b"\n", &m.fingerprint()].concat())
        })
        .collect();
    let mut parts: Vec<&[u8]> = vec![base.as_bytes(), dockerfile.as_bytes(), script.as_bytes()];
    parts.extend(prints.iter().map(Vec::as_slice));
    let tag = tag_of(&parts);
    let what: Vec<String> = chosen
        .iter()
        .map(|c| format!("{}{}", c.toolchain.language, c.toolchain.given))
        .collect();
    format!(
        "patchgrade.tool.{}.{}.{}:{tag}",
        what.join("-"),
        arch(),
        suite.name()
    )
}

/// Everything needed to build the toolchain image of `chosen` on `base`
/// (the base image of `suite`); the host folders are read as the context
/// streams.
pub fn toolchain_plan(chosen: &[ChosenToolchain], base: &str, suite: Suite) -> ImagePlan {
    let hosts = chosen
        .iter()
        .flat_map(|c| {
            c.copies
                .iter()
                .enumerate()
                .map(|(i, (_, m))| (context_dir(c.toolchain.language, i), m.clone()))
        })
        .collect();
    ImagePlan {
        tier: Tier::Base,
        name: toolchain_image_name(chosen, base, suite),
        dockerfile: toolchain_dockerfile(chosen, base),
        files: vec![ContextFile {
            path: "setup_toolchain.sh".into(),
            data: setup_toolchain_script(chosen).into_bytes(),
            mode: 0o644,
        }],
        trees: Vec::new(),
        blobs: Vec::new(),
        hosts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::docker::images::lines::offline_env_line;
    use crate::toolchain::{resolve, Search};

    #[test]
    fn a_host_toolchain_is_copied_named_by_its_files_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let t = rust::triple();
        crate::toolchain::rust::tests::fake_rustup(d.path(), &[&format!("1.95.0-{t}")]);
        let dir = d.path().join(format!("toolchains/1.95.0-{t}"));
        std::fs::write(dir.join("share/doc/rust/README.md"), "docs").unwrap();
        std::os::unix::fs::symlink("rustc", dir.join("bin/rustc-link")).unwrap();
        let search = Search {
            rustup_home: d.path().to_path_buf(),
            ..Search::from_env(None)
        };
        let chosen =
            choose(resolve(Language::Rust, "1.81", Suite::Bookworm, &search).unwrap()).unwrap();
        let list = [chosen];
        let plan = toolchain_plan(&list, "base:1", Suite::Bookworm);
        assert_eq!(plan.tier, Tier::Base);
        assert!(
            plan.name
                .starts_with(&format!("patchgrade.tool.rust1.95.0.{}.bookworm:", arch())),
            "{}",
            plan.name
        );
        assert!(plan
            .dockerfile
            .contains("COPY toolchains/rust /opt/patchgrade/rust"));
        assert!(plan.dockerfile.contains("CARGO_HOME=/usr/local/cargo"));
        assert!(plan
            .dockerfile
            .contains("\"patchgrade.toolchain.rust.given\"=\"1.95.0\""));
        // What was asked is the env image's, not the shared toolchain image's.
        assert!(!plan.dockerfile.contains("1.81"), "{}", plan.dockerfile);
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        assert!(
            script.contains("/opt/patchgrade/rust/bin/cargo --version"),
            "{script}"
        );
        assert!(!script.contains("{{"), "{script}");

        let tar = plan.context_tar().unwrap();
        let mut seen = std::collections::BTreeMap::new();
        for e in tar::Archive::new(tar.as_slice()).entries().unwrap() {
            let e = e.unwrap();
            let link = e.link_name().unwrap().map(|l| l.display().to_string());
            seen.insert(e.path().unwrap().display().to_string(), link);
        }
        assert!(seen.contains_key("toolchains/rust/bin/cargo"), "{seen:?}");
        assert_eq!(
            seen["toolchains/rust/bin/rustc-link"].as_deref(),
            Some("rustc")
        );
        assert!(!seen.keys().any(|k| k.contains("share/doc")), "{seen:?}");

        // Same files, same name; a changed file, another image; a base too.
        let again =
            choose(resolve(Language::Rust, "1.84", Suite::Bookworm, &search).unwrap()).unwrap();
        assert_eq!(
            toolchain_image_name(std::slice::from_ref(&again), "base:1", Suite::Bookworm),
            plan.name,
            "1.81 and 1.84 both get 1.95.0: one image"
        );
        assert_ne!(
            toolchain_image_name(&[again], "base:2", Suite::Bookworm),
            plan.name
        );
        std::fs::write(dir.join("bin/cargo"), "a new cargo").unwrap();
        let changed =
            choose(resolve(Language::Rust, "1.81", Suite::Bookworm, &search).unwrap()).unwrap();
        assert_ne!(
            toolchain_image_name(&[changed], "base:1", Suite::Bookworm),
            plan.name
        );
    }

    #[test]
    fn a_host_node_in_a_prefix_gets_its_npm_copied_beside_node() {
        // The host's Node folder is a prefix like /usr: node alone is
        // copied from it, so npm must be copied on its own (a CI run found
        // images without npm).
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::write(prefix.join("bin/node"), "node").unwrap();
        std::fs::write(prefix.join("bin/other-tool"), "not node").unwrap();
        let npm = prefix.join(crate::toolchain::node::OWN_NPM);
        std::fs::create_dir_all(npm.join("bin")).unwrap();
        std::fs::write(npm.join("bin/npm-cli.js"), "npm").unwrap();
        let t = Toolchain {
            language: Language::Node,
            asked: "20".into(),
            given: crate::toolchain::Version::parse(Language::Node, "20.20.2").unwrap(),
            source: Source::Host {
                dir: prefix.to_path_buf(),
            },
            home: PathBuf::from(crate::toolchain::node::HOME),
            deviation: None,
        };
        let chosen = choose(t).unwrap();
        let folders: Vec<&str> = chosen.copies.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            folders,
            [
                "/opt/patchgrade/node",
                "/opt/patchgrade/node/lib/node_modules/npm"
            ]
        );
        let plan = toolchain_plan(std::slice::from_ref(&chosen), "base:1", Suite::Bookworm);
        let tar = plan.context_tar().unwrap();
        let names: Vec<String> = tar::Archive::new(tar.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(
            names.iter().any(|n| n.ends_with("node/bin/node")),
            "{names:?}"
        );
        assert!(
            names.iter().any(|n| n.ends_with("node-1/bin/npm-cli.js")),
            "{names:?}"
        );
        assert!(
            plan.dockerfile
                .contains("COPY toolchains/node-1 /opt/patchgrade/node/lib/node_modules/npm"),
            "{}",
            plan.dockerfile
        );
        assert!(
            !names.iter().any(|n| n.ends_with("other-tool")),
            "{names:?}"
        );
    }

    #[test]
    fn the_offline_line_keeps_each_language_off_the_network() {
        assert_eq!(offline_env_line(std::iter::empty()), "");
        let line = offline_env_line([Language::Rust, Language::Go].into_iter());
        assert_eq!(
            line,
            "ENV CARGO_NET_OFFLINE=true GOPROXY=off GOFLAGS=-mod=mod\n"
        );
    }
}
