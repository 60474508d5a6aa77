use super::*;

fn backend(d: &Path, python_dirs: Vec<PythonDir>) -> DockerBackend {
    backend_with(d, options(python_dirs)).unwrap()
}

fn options(python_dirs: Vec<PythonDir>) -> DockerOptions {
    DockerOptions {
        namespace: None,
        instance_image_tag: "latest".into(),
        base_image: "none".into(),
        ca_cert: Some("none".into()),
        cache_level: Some(CacheLevel::Env),
        cache_budget: None,
        clean: false,
        shelve: false,
        force_rebuild: false,
        memory: "1g".into(),
        cpus: 1.0,
        pids_limit: 64,
        build_timeout: 60,
        python_dirs,
    }
}

fn backend_with(d: &Path, opts: DockerOptions) -> Result<DockerBackend, DockerError> {
    let repos = RepoCache::new(crate::repo::RepoSources {
        cache: d.join("cache"),
        mirror_dir: None,
        export_dirs: vec![],
        url_template: String::new(),
    });
    let rundir = crate::rundir::RunDir::new(&d.join("logs/run_evaluation"), "t");
    DockerBackend::new(opts, &d.join("cache"), &rundir, repos)
}

#[test]
fn shelve_is_refused_where_it_would_contradict_another_flag() {
    let d = tempfile::tempdir().unwrap();
    let with = |level: Option<CacheLevel>, namespace: Option<&str>| {
        let mut o = options(Vec::new());
        o.shelve = true;
        o.cache_level = level;
        o.namespace = namespace.map(String::from);
        backend_with(d.path(), o).err().map(|e| e.to_string())
    };
    assert_eq!(with(Some(CacheLevel::Env), None), None);
    assert_eq!(with(None, None), None);
    for refused in [
        with(Some(CacheLevel::Instance), None),
        with(None, Some("ns")),
    ] {
        assert!(refused.is_some_and(|e| e.contains("--shelve")));
    }
}

#[test]
fn interpreters_are_chosen_once_per_value_and_listed() {
    let d = tempfile::tempdir().unwrap();
    let prefix = d.path().join("py37");
    crate::python::find::tests::fake_build(&prefix, "3.7.9");
    let dir = PythonDir::parse(&format!("3.7={}", prefix.display())).unwrap();
    let b = backend(d.path(), vec![dir]);
    assert!(b.interpreters().is_empty());
    let first = b.python("3.7").unwrap();
    assert_eq!(first.interp.provider.name(), "python-dir");
    assert!(first.manifest.is_some(), "a copied build has a file list");
    // The same value again: the same choice, not a second search.
    assert!(Arc::ptr_eq(&first, &b.python(" 3.7").unwrap()));
    let suite = b.python("3.11").unwrap();
    assert!(suite.manifest.is_none());
    let listed: Vec<String> = b
        .interpreters()
        .iter()
        .map(|i| i.record().provider)
        .collect();
    assert_eq!(listed, ["python-dir", "debian-suite"]);
    // A version found nowhere is an error naming --python-dir, and is
    // not listed.
    let e = b.python("3.99").unwrap_err().to_string();
    assert!(e.contains("--python-dir 3.99=PREFIX"), "{e}");
    assert_eq!(b.interpreters().len(), 2);
}

#[test]
fn sizes() {
    assert_eq!(parse_size("4g").unwrap(), 4 << 30);
    assert_eq!(parse_size("512m").unwrap(), 512 << 20);
    assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
    assert_eq!(parse_size("1024").unwrap(), 1024);
    assert!(parse_size("lots").is_err());
    assert!(parse_size("-1g").is_err());
}
