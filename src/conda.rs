//! Conda environment files (`environment.yml`) translated, by rule, into what
//! patchgrade installs: pip requirements for the venv and Debian packages
//! for the compiled libraries conda would have brought.
//!
//! The reference builds some envs (matplotlib 3.5+, xarray) with `conda env
//! create` from the repository's file at the environment setup commit, then
//! `pip install`s the spec's pins over it. No conda channel is reachable
//! here, so each dependency becomes a pip requirement or a Debian package:
//!
//! 1. `python` and `pip` are dropped: the python image provides them.
//! 2. A name in the spec's `conda_skip` is dropped (the spec says why).
//! 3. A name the spec's `pip_packages` pins is dropped: the pin wins, as the
//!    reference's later `pip install` of the pins makes it win.
//! 4. A conda package that is a system library ([`SYSTEM_LIBRARIES`])
//!    becomes its Debian package.
//! 5. Any other conda package becomes a pip requirement under its PyPI name
//!    ([`PYPI_NAMES`] where conda-forge names it differently), with its
//!    version constraint in pip syntax (`=1.2` is conda's `1.2.*`).
//! 6. Entries of the `pip:` section are pip requirements already; rules 2
//!    and 3 apply to them too.
//!
//! A name in neither table is taken to be on PyPI under the same name; if
//! it is not, the env build fails naming it and the spec skips it.

use std::collections::BTreeSet;

use serde_yaml_ng::Value;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CondaError {
    #[error("{path}: not a conda environment file: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: dependency {spec:?} has no pip equivalent: {reason}")]
    Unsupported {
        path: String,
        spec: String,
        reason: String,
    },
}

/// conda-forge names that PyPI spells differently (normalised names).
pub const PYPI_NAMES: &[(&str, &str)] = &[
    ("matplotlib-base", "matplotlib"),
    ("dask-core", "dask"),
    ("pytables", "tables"),
    ("python-graphviz", "graphviz"),
    ("pyqt", "PyQt5"),
    ("iris", "scitools-iris"),
    ("pytorch", "torch"),
    ("msgpack-python", "msgpack"),
    ("py-opencv", "opencv-python"),
];

/// conda packages that are C/C++ libraries or tools, not Python packages:
/// their Debian packages (bookworm names).
pub const SYSTEM_LIBRARIES: &[(&str, &[&str])] = &[
    ("hdf5", &["libhdf5-dev"]),
    ("libnetcdf", &["libnetcdf-dev"]),
    ("graphviz", &["graphviz"]),
    ("gtk3", &["libgtk-3-0", "gir1.2-gtk-3.0"]),
    ("gtk4", &["libgtk-4-1", "gir1.2-gtk-4.0"]),
    ("cairo", &["libcairo2-dev"]),
    ("freetype", &["libfreetype-dev"]),
    ("qhull", &["libqhull-dev"]),
    ("ghostscript", &["ghostscript"]),
    ("ffmpeg", &["ffmpeg"]),
    ("imagemagick", &["imagemagick"]),
    ("pkg-config", &["pkg-config"]),
    ("geos", &["libgeos-dev"]),
    ("proj", &["libproj-dev", "proj-bin"]),
    ("udunits2", &["libudunits2-dev"]),
    ("eccodes", &["libeccodes-dev"]),
    ("c-compiler", &["build-essential"]),
    ("cxx-compiler", &["build-essential"]),
    ("compilers", &["build-essential", "gfortran"]),
];

/// What one environment file becomes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Translation {
    /// pip requirement lines, in the file's order.
    pub requirements: Vec<String>,
    /// Debian packages, in the file's order, without repeats.
    pub apt_packages: Vec<String>,
    /// What was left out and why (`name: reason`), for the build log.
    pub dropped: Vec<String>,
}

impl Translation {
    /// The requirements file the env image installs: what was dropped as
    /// comments first (pip ignores them), then one requirement a line.
    pub fn requirements_text(&self, source: &str) -> String {
        let mut s = format!("# translated from {source} by patchgrade (src/conda.rs)\n");
        for d in &self.dropped {
            s.push_str(&format!("# dropped {d}\n"));
        }
        for r in &self.requirements {
            s.push_str(r);
            s.push('\n');
        }
        s
    }
}

/// PEP 503 normalised name: lowercase, runs of `-_.` as one `-`.
pub fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.extend(c.to_lowercase());
    }
    out
}

/// The name at the start of a requirement (pip or conda), normalised.
fn requirement_name(spec: &str) -> String {
    let spec = spec.rsplit("::").next().unwrap_or(spec).trim();
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    normalise(&spec[..end])
}

/// Translate `text`, the environment file at `path`. `skip` is the spec's
/// `conda_skip`, `pins` its `pip_packages`.
pub fn translate(
    path: &str,
    text: &str,
    skip: &[String],
    pins: &[String],
) -> Result<Translation, CondaError> {
    let invalid = |reason: String| CondaError::Invalid {
        path: path.to_string(),
        reason,
    };
    let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let deps = match doc.get("dependencies") {
        Some(Value::Sequence(d)) => d,
        Some(_) => return Err(invalid("`dependencies` is not a list".into())),
        None => return Err(invalid("no `dependencies` list".into())),
    };
    let skip: BTreeSet<String> = skip.iter().map(|s| normalise(s)).collect();
    let pinned: BTreeSet<String> = pins.iter().map(|p| requirement_name(p)).collect();
    let mut t = Translation::default();
    // Rules 1-3, shared by conda and pip entries; true when `name` stays.
    let keep = |t: &mut Translation, name: &str, conda: bool| -> bool {
        let reason = if conda && matches!(name, "python" | "pip") {
            "provided by the python image"
        } else if skip.contains(name) {
            "listed in the spec's conda_skip"
        } else if pinned.contains(name) {
            "pinned by the spec's pip_packages"
        } else {
            return true;
        };
        t.dropped.push(format!("{name}: {reason}"));
        false
    };
    for dep in deps {
        match dep {
            Value::String(spec) => {
                let name = normalise(split_conda(spec).0);
                if name.is_empty() {
                    return Err(invalid(format!("dependency {spec:?} has no name")));
                }
                if keep(&mut t, &name, true) {
                    add_conda(&mut t, path, spec)?;
                }
            }
            Value::Mapping(m) => {
                for (k, v) in m {
                    if k.as_str() != Some("pip") {
                        return Err(invalid(format!("unexpected mapping entry {k:?}")));
                    }
                    let Value::Sequence(items) = v else {
                        return Err(invalid("`pip:` is not a list".into()));
                    };
                    for item in items {
                        let Some(req) = item.as_str() else {
                            return Err(invalid(format!("pip entry {item:?} is not a string")));
                        };
                        if keep(&mut t, &requirement_name(req), false) {
                            t.requirements.push(req.trim().to_string());
                        }
                    }
                }
            }
            other => return Err(invalid(format!("dependency {other:?} is not a string"))),
        }
    }
    Ok(t)
}

/// Rules 4 and 5 for one conda match spec.
fn add_conda(t: &mut Translation, path: &str, spec: &str) -> Result<(), CondaError> {
    let (name, version) = split_conda(spec);
    let name = normalise(name);
    if let Some((_, debs)) = SYSTEM_LIBRARIES.iter().find(|(c, _)| *c == name) {
        for d in debs.iter() {
            if !t.apt_packages.iter().any(|a| a == d) {
                t.apt_packages.push(d.to_string());
            }
        }
        return Ok(());
    }
    let pypi = PYPI_NAMES
        .iter()
        .find(|(c, _)| *c == name)
        .map_or(name.as_str(), |(_, p)| *p);
    let constraint = pip_constraint(version).map_err(|reason| CondaError::Unsupported {
        path: path.to_string(),
        spec: spec.to_string(),
        reason,
    })?;
    t.requirements.push(format!("{pypi}{constraint}"));
    Ok(())
}

/// The reference's conda `packages` string of a spec (`conda create ...
/// python=X <packages>`), given as a list: rules 1, 4 and 5. conda installs
/// them before pip runs, so the env installs them in a pip step of their
/// own, first (astropy 1.3's `setuptools==38.2.4` must be there before the
/// pins are built: MarkupSafe 1.0's setup.py needs its `Feature`).
pub fn translate_packages(specs: &[String]) -> Result<Translation, CondaError> {
    let mut t = Translation::default();
    for spec in specs {
        let name = normalise(split_conda(spec).0);
        if name.is_empty() {
            return Err(CondaError::Invalid {
                path: "conda_packages".into(),
                reason: format!("{spec:?} has no name"),
            });
        }
        if matches!(name.as_str(), "python" | "pip") {
            t.dropped
                .push(format!("{name}: provided by the python image"));
            continue;
        }
        add_conda(&mut t, "conda_packages", spec)?;
    }
    Ok(t)
}

/// `channel::name[ version[ build]]` or `name<op>version[=build]` →
/// (name, version part).
fn split_conda(spec: &str) -> (&str, &str) {
    let spec = spec.rsplit("::").next().unwrap_or(spec).trim();
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    (&spec[..end], spec[end..].trim())
}

/// A conda version constraint in pip syntax ("" for none).
fn pip_constraint(version: &str) -> Result<String, String> {
    let v = version.trim();
    if v.is_empty() {
        return Ok(String::new());
    }
    if v.contains('|') {
        return Err("`|` (either version) cannot be written as one pip requirement".into());
    }
    if v.starts_with('[') {
        // Extras (`nbconvert[execute]!=6.0.0`) are pip syntax already.
        return Ok(v.replace(' ', ""));
    }
    // `name 1.2.* build` (space-separated): the build string is dropped.
    let v = v.replace(", ", ",");
    let v = v.split_whitespace().next().unwrap_or_default();
    let mut parts = Vec::new();
    for clause in v.split(',') {
        let c = clause.trim();
        let op_end = c
            .find(|ch: char| !matches!(ch, '=' | '<' | '>' | '!' | '~'))
            .unwrap_or(c.len());
        let (op, ver) = c.split_at(op_end);
        // `=1.2=py_0`: version, then build string.
        let ver = ver.split('=').next().unwrap_or(ver);
        if ver.is_empty() {
            return Err(format!("clause {c:?} has no version"));
        }
        let op = match op {
            // conda's `=1.2` means "1.2 or any 1.2.x".
            "=" if !ver.ends_with('*') => {
                parts.push(format!("=={ver}.*"));
                continue;
            }
            "=" | "" => "==",
            "==" | ">=" | "<=" | ">" | "<" | "!=" | "~=" => op,
            other => return Err(format!("operator {other:?} is not conda's")),
        };
        parts.push(format!("{op}{ver}"));
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    const MPL: &str = r#"
# comment
name: mpl-dev
channels:
  - conda-forge
dependencies:
  - cairocffi
  - contourpy>=1.0.1
  - numpy>=1.21
  - pybind11>=2.6.0
  - pygobject
  - python-dateutil>=2.1
  - setuptools_scm
  - gtk4
  - graphviz
  - matplotlib-base
  - conda-forge::dask-core=2022.8
  - nbconvert[execute]!=6.0.0,!=6.0.1
  - pytest!=4.6.0,!=5.4.0
  - python=3.11
  - pip
  - pip:
      - mpl-sphinx-theme
      - pikepdf
      - numpy==1.99
"#;

    #[test]
    fn a_matplotlib_style_file_by_the_rules() {
        let t = translate(
            "environment.yml",
            MPL,
            &s(&["pygobject", "gtk4"]),
            &s(&["numpy==1.25.2", "pikepdf"]),
        )
        .unwrap();
        assert_eq!(
            t.requirements,
            s(&[
                "cairocffi",
                "contourpy>=1.0.1",
                "pybind11>=2.6.0",
                "python-dateutil>=2.1",
                "setuptools-scm",
                "matplotlib",
                "dask==2022.8.*",
                "nbconvert[execute]!=6.0.0,!=6.0.1",
                "pytest!=4.6.0,!=5.4.0",
                "mpl-sphinx-theme",
            ])
        );
        assert_eq!(t.apt_packages, s(&["graphviz"]));
        assert_eq!(
            t.dropped,
            s(&[
                "numpy: pinned by the spec's pip_packages",
                "pygobject: listed in the spec's conda_skip",
                "gtk4: listed in the spec's conda_skip",
                "python: provided by the python image",
                "pip: provided by the python image",
                "pikepdf: pinned by the spec's pip_packages",
                "numpy: pinned by the spec's pip_packages",
            ])
        );
        let text = t.requirements_text("environment.yml at abc");
        assert!(text.starts_with("# translated from environment.yml at abc"));
        assert!(text.contains("# dropped gtk4: listed"));
        assert!(text.ends_with("mpl-sphinx-theme\n"), "{text}");
    }

    #[test]
    fn version_constraints_in_pip_syntax() {
        let c = |v: &str| pip_constraint(v);
        assert_eq!(c("").unwrap(), "");
        assert_eq!(c("=1.2").unwrap(), "==1.2.*");
        assert_eq!(c("=1.2.*").unwrap(), "==1.2.*");
        assert_eq!(c("=1.2=py_0").unwrap(), "==1.2.*");
        assert_eq!(c("==1.2").unwrap(), "==1.2");
        assert_eq!(c("1.2.*").unwrap(), "==1.2.*");
        assert_eq!(c("1.2.* py_0").unwrap(), "==1.2.*");
        assert_eq!(c(">=1,<2").unwrap(), ">=1,<2");
        assert_eq!(c(">=1, <2").unwrap(), ">=1,<2");
        assert_eq!(c("<1.24").unwrap(), "<1.24");
        assert_eq!(c("!=2021.7.0").unwrap(), "!=2021.7.0");
        assert!(c("1.2|1.4").unwrap_err().contains('|'));
        assert!(c(">=").is_err());
    }

    #[test]
    fn system_libraries_become_debian_packages_once() {
        let t = translate(
            "e.yml",
            "dependencies: [hdf5, c-compiler, cxx-compiler, h5py, numpy<1.24]\n",
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(t.apt_packages, s(&["libhdf5-dev", "build-essential"]));
        assert_eq!(t.requirements, s(&["h5py", "numpy<1.24"]));
    }

    #[test]
    fn a_conda_package_string_by_the_same_rules() {
        let t = translate_packages(&s(&[
            "setuptools==38.2.4",
            "python=3.6",
            "numpy=1.16",
            "hdf5",
        ]))
        .unwrap();
        assert_eq!(t.requirements, s(&["setuptools==38.2.4", "numpy==1.16.*"]));
        assert_eq!(t.apt_packages, s(&["libhdf5-dev"]));
        assert_eq!(t.dropped, s(&["python: provided by the python image"]));
        let e = translate_packages(&s(&["x 1|2"])).unwrap_err().to_string();
        assert!(e.contains("conda_packages") && e.contains('|'), "{e}");
    }

    #[test]
    fn names_compare_normalised() {
        assert_eq!(normalise("Typing_Extensions"), "typing-extensions");
        assert_eq!(normalise("a.-_b"), "a-b");
        assert_eq!(requirement_name("PyYAML==6.0.1"), "pyyaml");
        assert_eq!(requirement_name("nbconvert[execute]>=6"), "nbconvert");
        let t = translate(
            "e.yml",
            "dependencies: [typing_extensions, PyYAML]\n",
            &s(&["pyyaml"]),
            &s(&["typing-extensions==4.7.1"]),
        )
        .unwrap();
        assert!(t.requirements.is_empty(), "{t:?}");
        assert_eq!(t.dropped.len(), 2);
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let e = translate("ci/env.yml", "name: x\n", &[], &[]).unwrap_err();
        assert!(e.to_string().contains("ci/env.yml") && e.to_string().contains("dependencies"));
        let e = translate("e.yml", "dependencies: [\"x 1|2\"]\n", &[], &[]).unwrap_err();
        assert!(matches!(e, CondaError::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("\"x 1|2\""), "{e}");
        let e = translate("e.yml", "dependencies:\n  - conda: [x]\n", &[], &[]).unwrap_err();
        assert!(e.to_string().contains("conda"), "{e}");
        assert!(translate("e.yml", "dependencies: [\"\"]\n", &[], &[]).is_err());
    }
}
