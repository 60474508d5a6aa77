use super::*;

fn set(text: &str) -> Result<SpecSet, SpecError> {
    let mut s = SpecSet::default();
    s.add_text(Path::new("t.yaml"), text, false).map(|_| s)
}

#[test]
fn an_instance_log_parser_field_picks_the_parser() {
    let s = set("repo: o/r\ndefaults:\n  test_cmd: pytest -rA\n  log_parser: pytest\nversions:\n  \"*\":\n    python: \"3.11\"\n")
        .unwrap();
    let inst = |extra: serde_json::Value| -> crate::dataset::Instance {
        let mut row = serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "0", "version": "1.0"
        });
        for (k, v) in extra.as_object().unwrap() {
            row[k] = v.clone();
        }
        serde_json::from_value(row).unwrap()
    };
    let plain = s.for_instance(&inst(serde_json::json!({}))).unwrap();
    assert!(matches!(plain, std::borrow::Cow::Borrowed(_)));
    let base_hash = plain.spec.hash();
    // The reference's per-repo registry names, as Verified rows carry them.
    let own = s
        .for_instance(&inst(serde_json::json!({"log_parser": "parse_log_scikit"})))
        .unwrap();
    assert_eq!(own.spec.log_parser, LogParser::PytestV2);
    assert_ne!(own.spec.hash(), base_hash, "another parser, another result");
    let same = s
        .for_instance(&inst(serde_json::json!({"log_parser": "parse_log_pytest"})))
        .unwrap();
    assert_eq!(same.spec.hash(), base_hash);
    let e = s
        .for_instance(&inst(serde_json::json!({"log_parser": "parse_log_cobol"})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("o__r-1") && e.contains("parse_log_cobol"), "{e}");
    // A parser that dispatches on the instance is resolved here.
    let own = s
        .for_instance(&inst(serde_json::json!({
            "instance_id": "immutable-js__immutable-js-2005",
            "log_parser": "parse_log_immutable_js"
        })))
        .unwrap();
    assert_eq!(own.spec.log_parser, LogParser::JestJson);
    let e = s
        .for_instance(&inst(serde_json::json!({
            "instance_id": "immutable-js__immutable-js-7",
            "log_parser": "parse_log_immutable_js"
        })))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "instance immutable-js__immutable-js-7: the reference's parse_log_immutable_js \
         has no parser for this instance id"
    );
    // jekyll picks minitest or cucumber by its PR number.
    let jekyll = |id: &str| {
        s.for_instance(&inst(
            serde_json::json!({"log_parser": "parse_log_jekyll", "instance_id": id}),
        ))
        .map(|rs| rs.spec.log_parser)
    };
    assert_eq!(jekyll("jekyll__jekyll-8047").unwrap(), LogParser::Minitest);
    assert_eq!(jekyll("jekyll__jekyll-8771").unwrap(), LogParser::Cucumber);
    let e = jekyll("jekyll__jekyll-1").unwrap_err().to_string();
    assert!(
        e.contains("jekyll__jekyll-1") && e.contains("parse_log_jekyll"),
        "{e}"
    );
}

#[test]
fn defaults_merge_and_star_fallback() {
    let s = set("repo: o/r\ndefaults:\n  test_cmd: pytest -rA\n  log_parser: pytest\nversions:\n  \"1.0 1.1\":\n    python: \"3.9\"\n  \"*\":\n    python: \"3.11\"\n")
        .unwrap();
    assert_eq!(
        s.lookup("o/r", "1.1").unwrap().spec.python.as_deref(),
        Some("3.9")
    );
    assert_eq!(
        s.lookup("o/r", "9.9").unwrap().spec.python.as_deref(),
        Some("3.11")
    );
    assert_eq!(s.lookup("o/r", "1.0").unwrap().spec.test_cmd, "pytest -rA");
    assert!(matches!(
        s.lookup("x/y", "1"),
        Err(SpecError::Missing { .. })
    ));
}

#[test]
fn unknown_key_is_an_error_naming_version_and_key() {
    let e = set("repo: o/r\nversions:\n  \"1.0\":\n    test_cmd: t\n    log_parser: pytest\n    pip_pakages: [x]\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"1.0\"") && e.contains("pip_pakages"), "{e}");
}

#[test]
fn unknown_parser_is_an_error() {
    let e = set("repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: nosuch\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch"), "{e}");
}

#[test]
fn hash_changes_with_content() {
    let a =
        set("repo: o/r\nversions:\n  \"1\":\n    test_cmd: a\n    log_parser: pytest\n").unwrap();
    let b =
        set("repo: o/r\nversions:\n  \"1\":\n    test_cmd: b\n    log_parser: pytest\n").unwrap();
    assert_ne!(
        a.lookup("o/r", "1").unwrap().spec.hash(),
        b.lookup("o/r", "1").unwrap().spec.hash()
    );
}

#[test]
fn eval_install_skips_editable_and_reinstalls_others_offline() {
    let spec = crate::test_support::spec_installing;
    assert_eq!(
        spec("python -m pip install -e .", None).eval_install(),
        None
    );
    assert_eq!(
        spec("pip install --editable .[dev]", None).eval_install(),
        None
    );
    assert_eq!(
        spec("python -m pip install .", None)
            .eval_install()
            .as_deref(),
        Some("python -m pip install . --no-deps --no-build-isolation --no-index")
    );
    assert_eq!(
        spec("python setup.py install", None)
            .eval_install()
            .as_deref(),
        Some("python setup.py install")
    );
    assert_eq!(
        spec("pip install -e .", Some("make build"))
            .eval_install()
            .as_deref(),
        Some("make build")
    );
    assert_eq!(spec("pip install .", Some("")).eval_install(), None);
}

#[test]
fn new_env_fields_leave_other_specs_hashes_alone() {
    let plain = "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: pytest\n";
    let a = set(plain).unwrap();
    let h = a.lookup("o/r", "1").unwrap().spec.hash();
    // The hash of a spec without the new keys is what it was before
    // they existed (the JSON it is taken of has no trace of them).
    let json = serde_json::to_string(&a.lookup("o/r", "1").unwrap().spec).unwrap();
    assert!(
        !json.contains("environment_yml")
            && !json.contains("conda_skip")
            && !json.contains("sources"),
        "{json}"
    );
    let b = set(&format!("{plain}    environment_yml: environment.yml\n")).unwrap();
    let spec = &b.lookup("o/r", "1").unwrap().spec;
    assert_ne!(spec.hash(), h);
    assert!(spec.needs_env());
}

#[test]
fn sources_are_checked_when_read() {
    let with = |src: &str| {
        set(&format!(
            "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: pytest\n    sources:\n{src}"
        ))
    };
    let ok = with(
        "      ft: {repo: freetype/freetype, commit: 8cabd919ca63f0e6c12e8405e8542a45d910fa62}\n",
    )
    .unwrap();
    let spec = &ok.lookup("o/r", "1").unwrap().spec;
    assert_eq!(spec.sources["ft"].repo, "freetype/freetype");
    for (bad, says) in [
        (
            "      ft: {repo: freetype/freetype, commit: VER-2-6-1}\n",
            "40-digit",
        ),
        (
            "      ft: {repo: freetype, commit: 8cabd919ca63f0e6c12e8405e8542a45d910fa62}\n",
            "owner/name",
        ),
        (
            "      \"../x\": {repo: a/b, commit: 8cabd919ca63f0e6c12e8405e8542a45d910fa62}\n",
            "plain folder",
        ),
        (
            "      ft: {repo: a/b, commit: 8cabd919ca63f0e6c12e8405e8542a45d910fa62, tag: x}\n",
            "tag",
        ),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("\"1\""), "{bad}: {e}");
    }
}

#[test]
fn git_sources_are_checked_when_read() {
    let with = |src: &str| {
        set(&format!(
            "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: cargo\n    git_sources:\n{src}"
        ))
    };
    const C: &str = "a580ea56d4e5a889468b2969d2a1534379504ab6";
    let ok = with(&format!(
        "      reedline: {{url: \"https://github.com/nushell/reedline\", repo: nushell/reedline, commit: {C}, branch: main}}\n"
    ))
    .unwrap();
    let spec = &ok.lookup("o/r", "1").unwrap().spec;
    assert_eq!(spec.git_sources["reedline"].branch.as_deref(), Some("main"));
    let h = spec.hash();
    let other = with(&format!(
        "      reedline: {{url: \"https://github.com/nushell/reedline\", repo: nushell/reedline, commit: {C}}}\n"
    ))
    .unwrap();
    assert_ne!(
        other.lookup("o/r", "1").unwrap().spec.hash(),
        h,
        "in the hash"
    );
    for (bad, says) in [
        (
            format!("      r: {{url: \"file:///x\", repo: a/b, commit: {C}}}\n"),
            "URL",
        ),
        (
            format!("      r: {{url: \"https://h/x\", repo: ab, commit: {C}}}\n"),
            "owner/name",
        ),
        (
            "      r: {url: \"https://h/x\", repo: a/b, commit: main}\n".to_string(),
            "40-digit",
        ),
        (
            format!("      r: {{url: \"https://h/x\", repo: a/b, commit: {C}, branch: \"a b\"}}\n"),
            "branch",
        ),
        (
            format!("      \"../r\": {{url: \"https://h/x\", repo: a/b, commit: {C}}}\n"),
            "plain folder",
        ),
    ] {
        let e = with(&bad).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("\"1\""), "{bad}: {e}");
    }
}

#[test]
fn submodule_paths_are_checked_when_read() {
    let with = |sub: &str| {
        set(&format!(
            "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: pytest\n    submodules:\n{sub}"
        ))
    };
    let ok = with("      astropy_helpers: astropy/astropy-helpers\n").unwrap();
    assert_eq!(
        ok.lookup("o/r", "1").unwrap().spec.submodules["astropy_helpers"],
        "astropy/astropy-helpers"
    );
    for (bad, says) in [
        ("      ../x: a/b\n", "relative path"),
        ("      /x: a/b\n", "relative path"),
        ("      x: ab\n", "owner/name"),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn absent_files_are_relative_paths() {
    let with = |list: &str| {
        set(&format!(
            "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: maven\n    absent_files: {list}\n"
        ))
    };
    let ok = with("[scripts/tool.jar]").unwrap();
    assert_eq!(
        ok.lookup("o/r", "1").unwrap().spec.absent_files,
        vec!["scripts/tool.jar".to_string()]
    );
    for bad in ["[../x.jar]", "[/x.jar]", "[a//b]"] {
        let e = with(bad).unwrap_err().to_string();
        assert!(
            e.contains("absent file") && e.contains("relative path"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn toolchains_are_typed_and_unknown_languages_refused() {
    let s = set("repo: o/r\nversions:\n  \"1\":\n    test_cmd: cargo test\n    log_parser: cargo\n    toolchains: {rust: \"1.81\"}\n")
        .unwrap();
    let spec = &s.lookup("o/r", "1").unwrap().spec;
    assert_eq!(spec.toolchains[&crate::toolchain::Language::Rust], "1.81");
    let e = set("repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: cargo\n    toolchains: {cobol: \"85\"}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cobol") && e.contains("\"1\""), "{e}");
}

#[test]
fn fixtures_are_read_when_loaded_and_hashed_by_content() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("fixtures")).unwrap();
    std::fs::write(d.path().join("fixtures/x.lock"), "pinned 1\n").unwrap();
    let spec_path = d.path().join("o.yaml");
    std::fs::write(
        &spec_path,
        "repo: o/r\nversions:\n  \"1\":\n    test_cmd: t\n    log_parser: cargo\n    files: {Cargo.lock: x.lock}\n",
    )
    .unwrap();
    let load = || {
        let mut s = SpecSet::default();
        s.add_path(&spec_path).map(|_| s)
    };
    let a = load().unwrap();
    let spec = &a.lookup("o/r", "1").unwrap().spec;
    assert_eq!(spec.files["Cargo.lock"].content, "pinned 1\n");
    let h1 = spec.hash();
    std::fs::write(d.path().join("fixtures/x.lock"), "pinned 2\n").unwrap();
    assert_ne!(load().unwrap().lookup("o/r", "1").unwrap().spec.hash(), h1);
    std::fs::remove_file(d.path().join("fixtures/x.lock")).unwrap();
    let e = load().unwrap_err().to_string();
    assert!(e.contains("x.lock") && e.contains("Cargo.lock"), "{e}");
    // The built-in ones are embedded.
    let builtin = SpecSet::builtin().unwrap();
    let axum = &builtin.lookup("tokio-rs/axum", "682").unwrap().spec;
    assert!(axum.files["Cargo.lock"].content.contains("[[package]]"));
}

#[test]
fn builtin_specs_parse() {
    let s = SpecSet::builtin().unwrap();
    assert!(s.repos().count() >= 1);
}

#[test]
fn a_spec_at_another_commit_pretends_that_commits_version() {
    let mut s: Spec = serde_yaml_ng::from_str("test_cmd: t\nlog_parser: pytest\n").unwrap();
    // Nothing pretended: nothing to change.
    assert!(s.at_version(Some("4.0.1".into())).env.is_empty());
    s.env.insert(PRETEND_VERSION.into(), "4.0.2".into());
    s.env.insert("OTHER".into(), "x".into());
    let at = s.at_version(Some("4.0.1".into()));
    assert_eq!(at.env[PRETEND_VERSION], "4.0.1");
    assert_eq!(at.env["OTHER"], "x");
    // No version at that commit (no tag reaches it): the spec's own.
    assert_eq!(s.at_version(None).env[PRETEND_VERSION], "4.0.2");
}

/// Where the built-in specs build through the snapshot (issue 22): only
/// where a gold run measured a gain and no verdict change.
#[test]
fn snapshot_build_is_on_where_it_was_measured() {
    let b = SpecSet::builtin().unwrap();
    let on = |repo: &str, version: &str| b.lookup(repo, version).unwrap().spec.snapshot_build;
    for v in ["0.20", "0.21", "0.22", "1.3"] {
        assert!(on("scikit-learn/scikit-learn", v), "{v}");
    }
    // astropy's pyproject.toml builds, not its setup.py ones.
    for v in ["4.3", "5.0", "5.1", "5.2"] {
        assert!(on("astropy/astropy", v), "{v}");
    }
    // matplotlib's, once its builds left link-time optimisation.
    for v in ["3.4", "3.5", "3.6", "3.7"] {
        assert!(on("matplotlib/matplotlib", v), "{v}");
    }
    for (repo, v) in [
        ("astropy/astropy", "1.3"),
        ("astropy/astropy", "3.1"),
        ("matplotlib/matplotlib", "3.0"),
        ("matplotlib/matplotlib", "3.1"),
        ("sphinx-doc/sphinx", "3.0"),
        ("django/django", "3.0"),
    ] {
        assert!(!on(repo, v), "{repo} {v}");
    }
}

/// The cold start's per-repository choices (issue 22) where they were
/// measured: django's and sympy's snapshot cuts, django 4.0-5.0's editable
/// install without build isolation (3.x installs as the reference does).
#[test]
fn snapshot_cuts_and_isolation_are_where_they_were_measured() {
    let b = SpecSet::builtin().unwrap();
    let spec = |repo: &str, version: &str| b.lookup(repo, version).unwrap().spec.clone();
    let cut = |window_days, chain| Some(SnapshotRule { window_days, chain });
    for v in ["2.2", "3.0", "4.2", "5.0"] {
        assert_eq!(spec("django/django", v).snapshots, cut(30, 12), "{v}");
    }
    assert_eq!(spec("sympy/sympy", "1.11").snapshots, cut(91, 8));
    for (repo, v) in [
        ("sphinx-doc/sphinx", "7.1"),
        ("scikit-learn/scikit-learn", "1.3"),
    ] {
        assert_eq!(spec(repo, v).snapshots, None, "{repo}");
    }
    for v in ["4.0", "4.1", "4.2", "5.0"] {
        let install = spec("django/django", v).install.unwrap();
        assert_eq!(
            install, "python -m pip install --no-build-isolation -e .",
            "{v}"
        );
        // Still an editable install: the eval does not re-run it.
        assert_eq!(spec("django/django", v).eval_install(), None, "{v}");
    }
    for v in ["3.0", "3.2"] {
        assert_eq!(
            spec("django/django", v).install.as_deref(),
            Some("python -m pip install -e ."),
            "{v}"
        );
    }
}

/// Where the built-in specs install a pip base (issue 22): one list for
/// every sphinx version on Python 3.9 (what all 44 Verified instances
/// resolved to), none on 3.10, where it was not measured; django's per
/// Python.
#[test]
fn pip_bases_are_where_they_were_measured() {
    let b = SpecSet::builtin().unwrap();
    let pins = |repo: &str, version: &str| {
        b.lookup(repo, version)
            .unwrap()
            .spec
            .pip_base_packages
            .clone()
    };
    let sphinx = pins("sphinx-doc/sphinx", "3.0");
    assert!(
        sphinx.iter().any(|p| p.starts_with("babel==")),
        "{sphinx:?}"
    );
    for v in ["3.5", "4.1", "5.0", "7.1", "7.2"] {
        assert_eq!(pins("sphinx-doc/sphinx", v), sphinx, "{v}");
    }
    assert!(pins("sphinx-doc/sphinx", "8.0").is_empty());
    assert!(!pins("pydata/xarray", "2022.06").is_empty());
    // django: 3.0-3.2 on 3.6 and 4.1-4.2 on 3.9 (what their Verified envs
    // resolved to); none where it was not measured.
    for (v, numpy) in [
        ("3.0", "numpy==1.19.5"),
        ("3.2", "numpy==1.19.5"),
        ("4.1", "numpy==2.0.2"),
        ("4.2", "numpy==2.0.2"),
    ] {
        assert!(pins("django/django", v).iter().any(|p| p == numpy), "{v}");
        assert!(
            !pins("django/django", v)
                .iter()
                .any(|p| p.starts_with("pylibmc")),
            "{v}"
        );
    }
    for v in ["2.2", "4.0", "5.0"] {
        assert!(pins("django/django", v).is_empty(), "{v}");
    }
}

#[test]
fn snapshot_cuts_are_checked_and_leave_other_specs_as_they_were() {
    let text = |extra: &str| {
        format!(
            "repo: o/r\nversions:\n  \"1.0\":\n    test_cmd: t\n    log_parser: pytest\n{extra}"
        )
    };
    let s = set(&text("    snapshots: {window_days: 30, chain: 12}\n")).unwrap();
    assert_eq!(
        s.lookup("o/r", "1.0").unwrap().spec.snapshots,
        Some(SnapshotRule {
            window_days: 30,
            chain: 12
        })
    );
    for (bad, says) in [
        ("    snapshots: {window_days: 0, chain: 2}\n", "at least 1"),
        ("    snapshots: {window_days: 30, chain: 0}\n", "at least 1"),
        (
            "    snapshot_build: true\n    snapshots: {window_days: 30, chain: 4}\n",
            "without snapshot_build",
        ),
        ("    snapshots: {window_days: 30}\n", "chain"),
    ] {
        let e = set(&text(bad)).unwrap_err().to_string();
        assert!(
            e.contains("t.yaml") && e.contains("1.0") && e.contains(says),
            "{bad}: {e}"
        );
    }
    // A snapshot_build spec may still change its windows.
    set(&text(
        "    snapshot_build: true\n    snapshots: {window_days: 30, chain: 1}\n",
    ))
    .unwrap();
    // Unset, the field is not serialised: no other spec's images change.
    let plain = set(&text("")).unwrap();
    let json = serde_json::to_string(&plain.lookup("o/r", "1.0").unwrap().spec).unwrap();
    assert!(!json.contains("snapshots"), "{json}");
}

#[test]
fn build_jobs_are_variable_names_and_leave_other_specs_as_they_were() {
    let text = |jobs: &str| {
        format!("repo: o/r\nversions:\n  \"1.0\":\n    test_cmd: t\n    log_parser: pytest\n{jobs}")
    };
    let s = set(&text("    build_jobs: [NPY_NUM_BUILD_JOBS]\n")).unwrap();
    assert_eq!(
        s.lookup("o/r", "1.0").unwrap().spec.build_jobs,
        ["NPY_NUM_BUILD_JOBS"]
    );
    let e = set(&text("    build_jobs: [\"A; rm -rf /\"]\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.yaml") && e.contains("1.0") && e.contains("build_jobs"),
        "{e}"
    );
    // Unset, the field is not serialised: no other spec's images change.
    let plain = set(&text("")).unwrap();
    let json = serde_json::to_string(&plain.lookup("o/r", "1.0").unwrap().spec).unwrap();
    assert!(!json.contains("build_jobs"), "{json}");
}

#[test]
fn pip_base_packages_are_exact_pins_each_named_once() {
    let text = |extra: &str| {
        format!(
            "repo: o/r\nversions:\n  \"1.0\":\n    python: \"3.11\"\n    test_cmd: t\n    log_parser: pytest\n{extra}"
        )
    };
    let s = set(&text(
        "    pip_base_packages: [numpy==1.23.0, Py_YAML==6.0.1]\n",
    ))
    .unwrap();
    let spec = &s.lookup("o/r", "1.0").unwrap().spec;
    assert_eq!(spec.pip_base_packages, ["numpy==1.23.0", "Py_YAML==6.0.1"]);
    assert!(spec.needs_env());
    for (bad, why) in [
        ("[numpy>=1.23]", "not an exact pin"),
        ("[\"numpy==1.23; rm -rf /\"]", "not an exact pin"),
        ("[numpy==]", "not an exact pin"),
        ("[py-yaml==6.0, Py.YAML==6.0.1]", "pinned twice"),
    ] {
        let e = set(&text(&format!("    pip_base_packages: {bad}\n")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.yaml") && e.contains("1.0") && e.contains(why),
            "{bad}: {e}"
        );
    }
    let no_python = set(
        "repo: o/r\nversions:\n  \"1.0\":\n    test_cmd: t\n    log_parser: pytest\n    pip_base_packages: [a==1]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(no_python.contains("has no python"), "{no_python}");
    // Unset, the field is not serialised: no other spec's images change.
    let plain = set(&text("")).unwrap();
    let json = serde_json::to_string(&plain.lookup("o/r", "1.0").unwrap().spec).unwrap();
    assert!(!json.contains("pip_base"), "{json}");
}
