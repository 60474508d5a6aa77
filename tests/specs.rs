//! The built-in specs against the real SWE-bench Lite data (test + dev, 323
//! instances): every instance finds a spec for its exact (repo, version), and
//! each spec reads its logs, names its tests, picks its Python and installs
//! its requirements the way the reference harness (swebench 4.1.0) does, or
//! deviates only where a deviation is allowed and marked in the spec file.
//!
//! `cargo test --test specs -- --nocapture` prints the instance counts per
//! Python version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use patchgrade::dataset::{Dataset, Instance};
use patchgrade::parse::LogParser::{
    self, Django, Matplotlib, Pytest, PytestOptions, PytestV2, Seaborn, Sympy,
};
use patchgrade::spec::{ResolvedSpec, SpecSet, TestDirectives};

/// Directive modes, short for the table below.
const PATHS: TestDirectives = TestDirectives::Paths;
const LABELS: TestDirectives = TestDirectives::Django;

/// Python versions a Debian suite ships (bullseye, bookworm, trixie). The
/// Docker backend builds the others (3.6-3.10) from a host CPython build
/// (`python::resolve`, docs/python.md); the mappings below predate that.
const BUILDABLE: [&str; 3] = ["3.9", "3.11", "3.13"];

/// The reference's `MAP_REPO_TO_PARSER_PY` (log_parsers/python.py), as the
/// generic parser each per-repo alias stands for, and how its test files
/// become runner arguments (`get_test_directives`: dotted labels for Django,
/// paths otherwise).
const REFERENCE_PARSERS: [(&str, LogParser, TestDirectives); 18] = [
    ("astropy/astropy", PytestV2, PATHS),
    ("django/django", Django, LABELS),
    ("marshmallow-code/marshmallow", Pytest, PATHS),
    ("matplotlib/matplotlib", Matplotlib, PATHS),
    ("mwaskom/seaborn", Seaborn, PATHS),
    ("pallets/flask", Pytest, PATHS),
    ("psf/requests", PytestOptions, PATHS),
    ("pvlib/pvlib-python", Pytest, PATHS),
    ("pydata/xarray", Pytest, PATHS),
    ("pydicom/pydicom", PytestOptions, PATHS),
    ("pylint-dev/astroid", Pytest, PATHS),
    ("pylint-dev/pylint", PytestOptions, PATHS),
    ("pytest-dev/pytest", Pytest, PATHS),
    ("pyvista/pyvista", Pytest, PATHS),
    ("scikit-learn/scikit-learn", PytestV2, PATHS),
    ("sphinx-doc/sphinx", PytestV2, PATHS),
    ("sqlfluff/sqlfluff", Pytest, PATHS),
    ("sympy/sympy", Sympy, PATHS),
];

/// The reference's conda Python for every (repo, version) in Lite
/// (`MAP_REPO_VERSION_TO_SPECS_PY[repo][version]["python"]`).
const REFERENCE_PYTHON: [(&str, &str, &str); 28] = [
    ("astropy/astropy", "1.3", "3.6"),
    ("astropy/astropy", "4.3 5.1 5.2", "3.9"),
    ("django/django", "3.0 3.1 3.2", "3.6"),
    ("django/django", "4.0", "3.8"),
    ("django/django", "4.1 4.2", "3.9"),
    ("django/django", "5.0", "3.11"),
    ("marshmallow-code/marshmallow", "2.20 3.0", "3.9"),
    ("matplotlib/matplotlib", "3.3", "3.8"),
    ("matplotlib/matplotlib", "3.5 3.6 3.7", "3.11"),
    ("mwaskom/seaborn", "0.12 0.13", "3.9"),
    ("pallets/flask", "2.0", "3.9"),
    ("pallets/flask", "2.3", "3.11"),
    ("psf/requests", "0.14 2.3 2.4 2.7 2.10", "3.9"),
    ("pvlib/pvlib-python", "0.7 0.8 0.9", "3.9"),
    ("pydata/xarray", "0.12", "3.10"),
    ("pydicom/pydicom", "1.3", "3.6"),
    ("pydicom/pydicom", "2.0", "3.8"),
    ("pydicom/pydicom", "2.1", "3.9"),
    ("pydicom/pydicom", "2.3", "3.10"),
    ("pylint-dev/astroid", "2.9 2.10 2.12 2.13 2.14", "3.9"),
    ("pylint-dev/pylint", "2.13 2.14 2.15", "3.9"),
    (
        "pytest-dev/pytest",
        "4.4 4.5 4.6 5.0 5.2 5.4 6.0 6.3 7.0 8.0",
        "3.9",
    ),
    ("pyvista/pyvista", "0.39", "3.9"),
    ("scikit-learn/scikit-learn", "0.20 0.21 0.22", "3.6"),
    ("scikit-learn/scikit-learn", "1.3", "3.9"),
    (
        "sphinx-doc/sphinx",
        "3.1 3.2 3.3 3.4 3.5 4.0 5.0 5.1 7.1",
        "3.9",
    ),
    ("sqlfluff/sqlfluff", "0.6 0.8", "3.9"),
    (
        "sympy/sympy",
        "1.0 1.1 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12 1.13",
        "3.9",
    ),
];

/// The only Python mappings the issue allows: the runnable doc's tiers A and
/// A- that name another "run with" version. (repo, version, spec, used).
const ALLOWED_DEVIATIONS: [(&str, &str, &str, &str); 3] = [
    ("pydicom/pydicom", "1.3", "3.6", "3.9"),
    ("pydicom/pydicom", "2.0", "3.8", "3.9"),
    ("pydicom/pydicom", "2.3", "3.10", "3.9"),
];

/// The reference's `MAP_REPO_TO_REQS_PATHS`: the candidate paths of the
/// requirements file, and the Lite versions whose `packages` is
/// "requirements.txt".
const REFERENCE_REQUIREMENTS: [(&str, &[&str], &str); 7] = [
    ("django/django", &["tests/requirements/py3.txt"], "*"),
    (
        "matplotlib/matplotlib",
        &[
            "requirements/dev/dev-requirements.txt",
            "requirements/testing/travis_all.txt",
        ],
        "3.3",
    ),
    ("pallets/flask", &["requirements/dev.txt"], "*"),
    ("pylint-dev/pylint", &["requirements_test.txt"], "*"),
    (
        "pyvista/pyvista",
        &["requirements_test.txt", "requirements.txt"],
        "0.39",
    ),
    ("sqlfluff/sqlfluff", &["requirements_dev.txt"], "*"),
    (
        "sympy/sympy",
        &["requirements-dev.txt", "requirements-test.txt"],
        "1.13",
    ),
];

/// The reference's `MAP_REPO_TO_ENV_YML_PATHS`: the candidate paths of the
/// conda environment file, and the versions whose `packages` is
/// "environment.yml" (those Lite has).
const REFERENCE_ENV_YML: [(&str, &[&str], &str); 2] = [
    ("matplotlib/matplotlib", &["environment.yml"], "3.5 3.6 3.7"),
    (
        "pydata/xarray",
        &["ci/requirements/environment.yml", "environment.yml"],
        "*",
    ),
];

/// Repos whose editable install compiles extensions: the eval must rebuild
/// them offline so that a candidate's change to compiled code is tested.
const COMPILED: [&str; 3] = [
    "astropy/astropy",
    "matplotlib/matplotlib",
    "scikit-learn/scikit-learn",
];

fn lite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-lite")
}

fn lite() -> Vec<Instance> {
    let mut all = Vec::new();
    for split in ["test.jsonl", "dev.jsonl"] {
        let path = lite_dir().join(split);
        let ds = Dataset::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        all.extend(ds.instances);
    }
    all
}

fn specs() -> SpecSet {
    SpecSet::builtin().expect("built-in specs parse")
}

/// The spec of an instance, found under its exact version (never `"*"`).
fn spec_of<'a>(set: &'a SpecSet, inst: &Instance) -> &'a ResolvedSpec {
    let rs = set
        .lookup(&inst.repo, &inst.version)
        .unwrap_or_else(|e| panic!("{}: {e}", inst.instance_id));
    assert_eq!(
        rs.version_key, inst.version,
        "{}: {} {} resolved through {:?}, not its own version",
        inst.instance_id, inst.repo, inst.version, rs.version_key
    );
    rs
}

type PyVersion = (u32, u32, String);

fn py_version(v: &str) -> PyVersion {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
    let major = parts.next().unwrap_or(u32::MAX);
    let minor = parts.next().unwrap_or(u32::MAX);
    (major, minor, v.to_string())
}

fn in_list(list: &str, version: &str) -> bool {
    list.split_whitespace().any(|v| v == version)
}

fn reference_python(repo: &str, version: &str) -> &'static str {
    REFERENCE_PYTHON
        .iter()
        .find(|(r, vs, _)| *r == repo && in_list(vs, version))
        .map(|(_, _, py)| *py)
        .unwrap_or_else(|| panic!("no reference python for {repo} {version} in the table"))
}

/// The spec file's text, read from the source tree (the built-in copy is the
/// same file, embedded at build time).
fn spec_file_text(rs: &ResolvedSpec) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(&rs.source);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn lite_has_323_instances_in_18_repos() {
    let all = lite();
    assert_eq!(all.len(), 323, "test (300) + dev (23)");
    let repos: std::collections::BTreeSet<&str> = all.iter().map(|i| i.repo.as_str()).collect();
    let table: std::collections::BTreeSet<&str> = REFERENCE_PARSERS.iter().map(|r| r.0).collect();
    assert_eq!(
        repos, table,
        "the parser table covers exactly the Lite repos"
    );
}

#[test]
fn every_lite_instance_has_its_reference_parser_and_directives() {
    let set = specs();
    let all = lite();
    // Keyed by (major, minor, text) so that 3.9 sorts before 3.10.
    let mut per_python: BTreeMap<PyVersion, usize> = BTreeMap::new();
    let mut per_repo: BTreeMap<&str, BTreeMap<PyVersion, usize>> = BTreeMap::new();
    let mut mapped = 0;
    for inst in &all {
        let rs = spec_of(&set, inst);
        let (_, parser, directives) = REFERENCE_PARSERS
            .iter()
            .find(|(r, _, _)| *r == inst.repo)
            .unwrap_or_else(|| panic!("{}: repo not in the reference table", inst.instance_id));
        assert_eq!(
            rs.spec.log_parser, *parser,
            "{}: log_parser of {} {}",
            inst.instance_id, inst.repo, inst.version
        );
        assert_eq!(
            rs.spec.test_directives, *directives,
            "{}: test_directives of {} {}",
            inst.instance_id, inst.repo, inst.version
        );
        let py = rs
            .spec
            .python
            .clone()
            .unwrap_or_else(|| panic!("{}: spec names no python", inst.instance_id));
        if reference_python(&inst.repo, &inst.version) != py {
            mapped += 1;
        }
        let py = py_version(&py);
        *per_python.entry(py.clone()).or_default() += 1;
        *per_repo
            .entry(inst.repo.as_str())
            .or_default()
            .entry(py)
            .or_default() += 1;
    }
    let unbuildable: usize = per_python
        .iter()
        .filter(|(py, _)| !BUILDABLE.contains(&py.2.as_str()))
        .map(|(_, n)| n)
        .sum();
    println!("SWE-bench Lite (test + dev): {} instances", all.len());
    for ((_, _, py), n) in &per_python {
        let note = if BUILDABLE.contains(&py.as_str()) {
            ""
        } else {
            "  (no Debian suite: a host build copied in, see docs/python.md)"
        };
        println!("  python {py:>5}: {n:>3}{note}");
    }
    println!(
        "  not shipped by a suite: {unbuildable}; mapped from the reference's python: {mapped}"
    );
    for (repo, pys) in &per_repo {
        let line: Vec<String> = pys
            .iter()
            .map(|((_, _, py), n)| format!("{py}:{n}"))
            .collect();
        println!("  {repo:<30} {}", line.join(" "));
    }
    assert_eq!(per_python.values().sum::<usize>(), all.len());
}

#[test]
fn lite_pythons_are_the_reference_or_a_marked_allowed_deviation() {
    let set = specs();
    let mut seen_deviations = std::collections::BTreeSet::new();
    for inst in &lite() {
        let rs = spec_of(&set, inst);
        let ours = rs.spec.python.as_deref().unwrap_or("");
        let reference = reference_python(&inst.repo, &inst.version);
        if ours == reference {
            continue;
        }
        let allowed = ALLOWED_DEVIATIONS.iter().any(|(r, v, spec, used)| {
            *r == inst.repo && *v == inst.version && *spec == reference && *used == ours
        });
        assert!(
            allowed,
            "{}: {} {} runs on {ours}, the reference says {reference}, and the runnable \
             doc's tiers A/A- do not allow that mapping",
            inst.instance_id, inst.repo, inst.version
        );
        assert!(
            BUILDABLE.contains(&ours),
            "{}: mapped to {ours}, which is not buildable either",
            inst.instance_id
        );
        let marker = format!("# deviation: spec says {reference}, runs on {ours} because");
        assert!(
            spec_file_text(rs).contains(&marker),
            "{}: {} does not mark the deviation with {marker:?}",
            inst.instance_id,
            rs.source.display()
        );
        seen_deviations.insert((inst.repo.clone(), inst.version.clone()));
    }
    // Every allowed mapping is used (a stale entry would hide a regression).
    assert_eq!(seen_deviations.len(), ALLOWED_DEVIATIONS.len());
}

#[test]
fn lite_requirements_follow_the_reference_paths() {
    let set = specs();
    for inst in &lite() {
        let rs = spec_of(&set, inst);
        let entry = REFERENCE_REQUIREMENTS
            .iter()
            .find(|(r, _, _)| *r == inst.repo);
        let expected = entry.filter(|(_, _, vs)| *vs == "*" || in_list(vs, &inst.version));
        match (expected, &rs.spec.requirements) {
            (Some((_, paths, _)), Some(path)) => assert!(
                paths.contains(&path.as_str()),
                "{}: requirements {path:?} is not one of the reference's {paths:?}",
                inst.instance_id
            ),
            (Some(_), None) => panic!(
                "{}: the reference installs a requirements file for {} {}",
                inst.instance_id, inst.repo, inst.version
            ),
            (None, Some(path)) => panic!(
                "{}: requirements {path:?}, but the reference uses none for {} {}",
                inst.instance_id, inst.repo, inst.version
            ),
            (None, None) => {}
        }
    }
}

#[test]
fn lite_environment_files_follow_the_reference_paths() {
    let set = specs();
    let mut translated = 0;
    for inst in &lite() {
        let rs = spec_of(&set, inst);
        let expected = REFERENCE_ENV_YML
            .iter()
            .find(|(r, _, vs)| *r == inst.repo && (*vs == "*" || in_list(vs, &inst.version)));
        match (expected, &rs.spec.environment_yml) {
            (Some((_, paths, _)), Some(path)) => {
                assert!(
                    paths.contains(&path.as_str()),
                    "{}: environment_yml {path:?} is not one of the reference's {paths:?}",
                    inst.instance_id
                );
                translated += 1;
            }
            (Some(_), None) => panic!(
                "{}: the reference builds {} {} from an environment file",
                inst.instance_id, inst.repo, inst.version
            ),
            (None, Some(path)) => panic!(
                "{}: environment_yml {path:?}, but the reference uses none for {} {}",
                inst.instance_id, inst.repo, inst.version
            ),
            (None, None) => assert!(
                rs.spec.conda_skip.is_empty(),
                "{}: conda_skip without an environment file",
                inst.instance_id
            ),
        }
    }
    // matplotlib 3.5-3.7 (22) and xarray (5).
    assert_eq!(translated, 27);
}

#[test]
fn lite_specs_run_tests_offline() {
    let set = specs();
    for inst in &lite() {
        let rs = spec_of(&set, inst);
        assert!(
            !rs.spec.network,
            "{}: tests must run without network",
            inst.instance_id
        );
        assert!(
            rs.spec.install.is_some(),
            "{}: no install",
            inst.instance_id
        );
    }
}

#[test]
fn compiled_code_is_rebuilt_offline_in_the_eval() {
    let set = specs();
    for inst in &lite() {
        let rs = spec_of(&set, inst);
        let eval = rs.spec.eval_install();
        if COMPILED.contains(&inst.repo.as_str()) {
            let cmd = eval.unwrap_or_else(|| {
                panic!(
                    "{}: a C-extension build needs an eval_install",
                    inst.instance_id
                )
            });
            for flag in ["--no-index", "--no-build-isolation", "--no-deps"] {
                assert!(
                    cmd.contains(flag),
                    "{}: eval rebuild {cmd:?} lacks {flag}",
                    inst.instance_id
                );
            }
        } else if inst.repo == "psf/requests" {
            // Non-editable: the derived offline reinstall.
            assert_eq!(
                eval.as_deref(),
                Some("python -m pip install . --no-deps --no-build-isolation --no-index"),
                "{}",
                inst.instance_id
            );
        } else {
            // Pure-Python editable installs already point at the tree.
            assert_eq!(eval, None, "{}: unexpected eval_install", inst.instance_id);
        }
    }
}
