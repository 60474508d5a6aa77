//! Helpers of the unit tests: a spec set for a pytest repository `o/r`,
//! specs with a given install, test logs.

use std::path::Path;

use crate::spec::{Spec, SpecSet};

/// The built-in-free spec set with one spec: repository `o/r`, any
/// version, `pytest -rA`, the pytest log parser (written into `dir`).
pub(crate) fn pytest_specs(dir: &Path) -> SpecSet {
    let spec = dir.join("o__r.yaml");
    std::fs::write(
        &spec,
        "repo: o/r\nversions:\n  \"*\":\n    test_cmd: pytest -rA\n    log_parser: pytest\n",
    )
    .unwrap();
    let mut specs = SpecSet::default();
    specs.add_path(&spec).unwrap();
    specs
}

/// The test log of an eval script: `body` between the markers.
pub(crate) fn test_log(body: &str) -> String {
    format!("+ : '>>>>> Start Test Output'\n{body}\n+ : '>>>>> End Test Output'\n")
}

/// A pytest spec with `install` and, if given, an explicit `eval_install`.
pub(crate) fn spec_installing(install: &str, eval_install: Option<&str>) -> Spec {
    Spec {
        install: Some(install.into()),
        eval_install: eval_install.map(String::from),
        ..serde_json::from_str::<Spec>(r#"{"test_cmd":"t","log_parser":"pytest"}"#).unwrap()
    }
}

/// A changed file of a candidate's diff, as the patch parser gives it.
pub(crate) fn file_change(path: &str, kind: crate::patch::ChangeKind) -> crate::patch::FileChange {
    crate::patch::FileChange {
        path: path.into(),
        kind,
        binary: false,
        old_mode: None,
        new_mode: None,
    }
}

/// A diff of `path` adding the `added` lines after one context line.
pub(crate) fn diff_adding(path: &str, added: &[&str]) -> String {
    let mut s = format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,{} @@\n ctx\n",
        added.len() + 1
    );
    for a in added {
        s.push('+');
        s.push_str(a);
        s.push('\n');
    }
    s
}
