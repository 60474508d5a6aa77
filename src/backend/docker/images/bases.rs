//! The shared images between the base and the env that a spec asks for:
//! the apt base (its `apt_base_packages`, below the interpreter) and the
//! pip base (its `pip_base_packages`, on the interpreter's venv). Each is
//! one layer that every env naming the same list shares, however the
//! env's own packages differ; an env's own layers are shared only when the
//! engine's build cache happens to hold them (and not when two such envs
//! build at the same time).

use super::plans::{apt_step, ContextFile, ImagePlan};
use super::{arch, Suite, Tier, VENV};
use crate::backend::docker::{DockerBackend, DockerError};
use crate::python::Interpreter;
use crate::spec::Spec;

const APT_BASE_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/apt-base.Dockerfile");
const PIP_BASE_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/pip-base.Dockerfile");

/// The apt base image of `packages` (a spec's `apt_base_packages`) on
/// `base`, the base image of `suite`: one apt layer below the python image,
/// shared by every env on that suite that names the same list, whatever its
/// Python. None without a list.
pub fn apt_base_plan(packages: &[String], base: &str, suite: Suite) -> Option<ImagePlan> {
    if packages.is_empty() {
        return None;
    }
    let dockerfile = APT_BASE_DOCKERFILE
        .replace("{{base}}", base)
        .replace("{{apt}}", &apt_step(packages));
    let key = dockerfile.clone();
    Some(ImagePlan::addressed(
        Tier::Base,
        format!("patchgrade.base.apt.{}.{}", arch(), suite.name()),
        &[key.as_bytes()],
        dockerfile,
        Vec::new(),
        Vec::new(),
    ))
}

/// The pip base image of `pins` (a spec's `pip_base_packages`) on
/// `python_image`, the python image of `python`: the pins installed in its
/// venv without their dependencies, one layer shared by every env on that
/// image that names the same list. None without a list.
pub fn pip_base_plan(
    pins: &[String],
    python_image: &str,
    python: &Interpreter,
    suite: Suite,
) -> Option<ImagePlan> {
    if pins.is_empty() {
        return None;
    }
    let dockerfile = PIP_BASE_DOCKERFILE
        .replace("{{python}}", python_image)
        .replace("{{venv}}", VENV);
    let list: String = pins.iter().map(|p| format!("{p}\n")).collect();
    let key = dockerfile.clone();
    Some(ImagePlan::addressed(
        Tier::Base,
        format!(
            "patchgrade.base.pip.py{}.{}.{}",
            python.version,
            arch(),
            suite.name()
        ),
        &[key.as_bytes()],
        dockerfile,
        vec![ContextFile::new("pip-base.txt", list)],
        Vec::new(),
    ))
}

impl DockerBackend {
    /// The image the interpreter goes on: `base`, or the apt base of the
    /// spec's `apt_base_packages` on it (built if missing).
    pub(super) async fn below_python(
        &self,
        spec: &Spec,
        base: &str,
        suite: Suite,
    ) -> Result<String, DockerError> {
        Ok(match apt_base_plan(&spec.apt_base_packages, base, suite) {
            Some(apt) => {
                self.ensure_built(&apt).await?;
                apt.name
            }
            None => base.to_string(),
        })
    }

    /// The image an env with a Python goes on: `python_image`, or the pip
    /// base of the spec's `pip_base_packages` on it (built if missing).
    pub(super) async fn above_python(
        &self,
        spec: &Spec,
        python_image: String,
        python: &Interpreter,
        suite: Suite,
    ) -> Result<String, DockerError> {
        Ok(
            match pip_base_plan(&spec.pip_base_packages, &python_image, python, suite) {
                Some(pip) => {
                    self.ensure_built(&pip).await?;
                    pip.name
                }
                None => python_image,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::kind::Kind;
    use super::super::plans::{env_plan, EnvInputs};
    use super::*;

    fn spec(yaml: &str) -> Spec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn list(l: &[&str]) -> Vec<String> {
        l.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn apt_base_packages_are_an_image_below_the_python_image() {
        let env = |yaml: &str| {
            env_plan(
                Suite::Bookworm,
                None,
                "apt:1",
                &spec(yaml),
                &EnvInputs::default(),
            )
            .dockerfile
        };
        let tex = list(&["texlive", "ghostscript"]);
        let a = apt_base_plan(&tex, "base:1", Suite::Bookworm).unwrap();
        let step = "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends 'texlive' 'ghostscript' && rm -rf /var/lib/apt/lists/*\n";
        assert!(a.dockerfile.contains("FROM base:1\n"), "{}", a.dockerfile);
        assert!(a.dockerfile.contains(step), "{}", a.dockerfile);
        assert!(a
            .name
            .starts_with(&format!("patchgrade.base.apt.{}.bookworm:", arch())));
        assert_eq!(
            Kind::of(&a.name).map(|k| k.0),
            Some(Kind::Base),
            "{}",
            a.name
        );
        // One name per list and base: every spec naming the list shares it.
        let again = apt_base_plan(&tex, "base:1", Suite::Bookworm).unwrap();
        assert_eq!(again.name, a.name);
        for other in [
            apt_base_plan(&list(&["texlive"]), "base:1", Suite::Bookworm),
            apt_base_plan(&tex, "base:2", Suite::Bookworm),
        ] {
            assert_ne!(other.unwrap().name, a.name);
        }
        assert!(apt_base_plan(&[], "base:1", Suite::Bookworm).is_none());
        // The env installs only its own packages; one in both lists is the
        // base's (installed once, below).
        let e = env("apt_base_packages: [texlive, ghostscript]\napt_packages: [texlive, autoconf]\ntest_cmd: t\nlog_parser: pytest\n");
        assert_eq!(e.matches("apt-get install").count(), 1, "{e}");
        assert!(e.contains("'autoconf'") && !e.contains("'texlive'"), "{e}");
        let plain = env("apt_packages: [less]\ntest_cmd: t\nlog_parser: pytest\n");
        assert_eq!(plain.matches("apt-get install").count(), 1, "{plain}");
    }

    #[test]
    fn pip_base_packages_are_an_image_on_the_python_image() {
        let py = crate::python::resolve("3.11", &Default::default()).unwrap();
        let pins = list(&["numpy==1.23.0", "scipy==1.11.1"]);
        let p = pip_base_plan(&pins, "py:1", &py, Suite::Bookworm).unwrap();
        let d = &p.dockerfile;
        assert!(d.starts_with("# patchgrade pip base image"), "{d}");
        assert!(d.contains("\nFROM py:1\n"), "{d}");
        assert!(
            d.contains("RUN /opt/venv/bin/python -m pip install --no-deps -r /root/patchgrade-pip-base.txt"),
            "{d}"
        );
        let file = p.files.iter().find(|f| f.path == "pip-base.txt").unwrap();
        assert_eq!(file.data, b"numpy==1.23.0\nscipy==1.11.1\n");
        assert!(p
            .name
            .starts_with(&format!("patchgrade.base.pip.py3.11.{}.bookworm:", arch())));
        assert_eq!(Kind::of(&p.name).map(|k| k.0), Some(Kind::Base));
        // One name per list and python image; the list is in the tag.
        assert_eq!(
            pip_base_plan(&pins, "py:1", &py, Suite::Bookworm)
                .unwrap()
                .name,
            p.name
        );
        for other in [
            pip_base_plan(&pins[..1], "py:1", &py, Suite::Bookworm),
            pip_base_plan(&pins, "py:2", &py, Suite::Bookworm),
        ] {
            assert_ne!(other.unwrap().name, p.name);
        }
        assert!(pip_base_plan(&[], "py:1", &py, Suite::Bookworm).is_none());
        // The env still names its own pins: its resolve runs over the base
        // and keeps what satisfies it.
        let s = spec("python: '3.11'\npip_base_packages: [numpy==1.23.0]\npip_packages: [numpy==1.23.0, pytest]\ntest_cmd: t\nlog_parser: pytest\n");
        let e = env_plan(
            Suite::Bookworm,
            Some(&py),
            &p.name,
            &s,
            &EnvInputs::default(),
        );
        assert!(
            e.dockerfile.contains(&format!("FROM {}\n", p.name)),
            "{}",
            e.dockerfile
        );
        let setup = e.files.iter().find(|f| f.path == "setup_env.sh").unwrap();
        let setup = String::from_utf8_lossy(&setup.data);
        assert!(
            setup.contains("python -m pip install 'numpy==1.23.0' 'pytest'"),
            "{setup}"
        );
    }
}
