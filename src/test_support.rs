//! Helpers of the unit tests: a spec set for a pytest repository `o/r`.

use std::path::Path;

use crate::spec::SpecSet;

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
