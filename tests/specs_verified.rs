//! The built-in specs against SWE-bench Verified (500 instances, 12 repos;
//! `tests/fixtures/swebench-verified/instances.tsv` holds each instance's id,
//! repo, version and the `log_parser` the dataset row names): every instance
//! finds a spec under its exact version, runs on the reference's Python (3.5
//! through the 3.5 → 3.6 rule), is read with a parser patchgrade knows, and
//! the requests instances whose tests call httpbin get the local stand-in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use patchgrade::dataset::Instance;
use patchgrade::python::{substitute, PyVersion};
use patchgrade::spec::SpecSet;

/// The reference's conda Python per (repo, version) of Verified
/// (`MAP_REPO_VERSION_TO_SPECS_PY`; shared/reference/swebench-harness.md 4.4).
const REFERENCE_PYTHON: [(&str, &str, &str); 20] = [
    ("astropy/astropy", "1.3", "3.6"),
    ("astropy/astropy", "3.1 4.3 5.0 5.1 5.2", "3.9"),
    ("django/django", "1.11 2.2", "3.5"),
    ("django/django", "3.0 3.1 3.2", "3.6"),
    ("django/django", "4.0", "3.8"),
    ("django/django", "4.1 4.2", "3.9"),
    ("django/django", "5.0", "3.11"),
    ("matplotlib/matplotlib", "3.0", "3.7"),
    ("matplotlib/matplotlib", "3.1 3.4", "3.8"),
    ("matplotlib/matplotlib", "3.5 3.6 3.7", "3.11"),
    ("mwaskom/seaborn", "0.12", "3.9"),
    ("pallets/flask", "2.3", "3.11"),
    ("psf/requests", "1.1 2.0 2.3 2.4 2.9 2.26 2.27", "3.9"),
    ("pydata/xarray", "0.12 2022.03 2022.06 2022.09", "3.10"),
    ("pylint-dev/pylint", "2.9 2.10 2.14 2.15 3.0", "3.9"),
    (
        "pytest-dev/pytest",
        "4.5 4.6 5.0 5.1 5.2 5.4 6.0 6.2 6.3 7.2",
        "3.9",
    ),
    ("scikit-learn/scikit-learn", "0.20 0.21 0.22", "3.6"),
    ("scikit-learn/scikit-learn", "1.3", "3.9"),
    (
        "sphinx-doc/sphinx",
        "3.0 3.1 3.2 3.3 3.4 3.5 4.0 4.1 4.2 4.3 5.0 5.1 5.2 7.1 7.2",
        "3.9",
    ),
    (
        "sympy/sympy",
        "1.0 1.1 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12",
        "3.9",
    ),
];

/// Verified instances of psf/requests whose test_requests.py reads
/// HTTPBIN_URL (default httpbin.org): they need the local stand-in.
const NEED_HTTPBIN: [&str; 5] = [
    "psf__requests-1142",
    "psf__requests-1724",
    "psf__requests-1766",
    "psf__requests-1921",
    "psf__requests-2317",
];

fn verified() -> Vec<Instance> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/swebench-verified/instances.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 4, "{}:{}: want 4 fields", path.display(), n + 2);
            serde_json::from_value(serde_json::json!({
                "instance_id": f[0], "repo": f[1], "version": f[2], "log_parser": f[3],
                "base_commit": "0",
            }))
            .unwrap()
        })
        .collect()
}

fn reference_python(repo: &str, version: &str) -> &'static str {
    REFERENCE_PYTHON
        .iter()
        .find(|(r, vs, _)| *r == repo && vs.split_whitespace().any(|v| v == version))
        .map(|(_, _, py)| *py)
        .unwrap_or_else(|| panic!("no reference python for {repo} {version} in the table"))
}

#[test]
fn verified_has_500_instances_in_12_repos() {
    let all = verified();
    assert_eq!(all.len(), 500);
    let repos: BTreeSet<&str> = all.iter().map(|i| i.repo.as_str()).collect();
    assert_eq!(repos.len(), 12, "{repos:?}");
}

#[test]
fn every_verified_instance_has_a_spec_on_the_reference_python_and_a_known_parser() {
    let set = SpecSet::builtin().expect("built-in specs parse");
    let mut per_python: BTreeMap<String, usize> = BTreeMap::new();
    for inst in &verified() {
        let rs = set
            .for_instance(inst)
            .unwrap_or_else(|e| panic!("{}: {e}", inst.instance_id));
        assert_eq!(
            rs.version_key, inst.version,
            "{}: {} {} resolved through {:?}, not its own version",
            inst.instance_id, inst.repo, inst.version, rs.version_key
        );
        let ours = rs.spec.python.as_deref().unwrap_or("");
        assert_eq!(
            ours,
            reference_python(&inst.repo, &inst.version),
            "{}: {} {} runs on {ours}",
            inst.instance_id,
            inst.repo,
            inst.version
        );
        let (used, _) = substitute(PyVersion::parse(ours).unwrap());
        *per_python.entry(used.to_string()).or_default() += 1;
        assert!(
            !rs.spec.network,
            "{}: tests must run offline",
            inst.instance_id
        );
    }
    // The reference's totals (3.5 counted as the 3.6 it runs on here).
    let expect: BTreeMap<String, usize> = [
        ("3.6", 142),
        ("3.7", 1),
        ("3.8", 42),
        ("3.9", 241),
        ("3.10", 22),
        ("3.11", 52),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(per_python, expect);
}

#[test]
fn requests_instances_that_call_httpbin_get_the_local_stand_in() {
    let set = SpecSet::builtin().unwrap();
    for inst in verified().iter().filter(|i| i.repo == "psf/requests") {
        let spec = &set.for_instance(inst).unwrap().spec;
        let local = spec
            .eval_commands
            .iter()
            .any(|c| c.contains("127.0.0.1 httpbin.org"));
        let needs = NEED_HTTPBIN.contains(&inst.instance_id.as_str());
        assert_eq!(local, needs, "{}: local httpbin {local}", inst.instance_id);
        if needs {
            assert!(
                spec.pip_packages.iter().any(|p| p.starts_with("httpbin==")),
                "{}: the env must install a pinned httpbin",
                inst.instance_id
            );
            assert!(
                spec.eval_commands
                    .iter()
                    .any(|c| c.contains("from httpbin import app")),
                "{}: the server is never started",
                inst.instance_id
            );
        }
    }
}
