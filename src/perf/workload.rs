//! What gets timed for an instance: its workload, found in the instance's
//! own fields in a fixed order.
//!
//! 1. A script: `workload` (SWE-fficiency: a Python script that imports the
//!    package and times a call; patchgrade's own datasets use the same field,
//!    and a script starting with `#!` runs with the interpreter it names),
//!    or GSO's `tests` (a list of Python performance-test scripts, each run as
//!    `python3 test.py RESULT_FILE --file_prefix PREFIX`, as GSO's harness
//!    does) with `prob_script` as the fallback when `tests` is empty.
//! 2. Test ids: `perf_tests` (patchgrade), or SWE-Perf's `efficiency_test`.
//! 3. The instance's FAIL_TO_PASS then PASS_TO_PASS tests.
//!
//! Each script and each test is its own timed process; a test runs as the
//! spec's `test_cmd` followed by that one test's id. Test ids need the test
//! patch in the tree ([`Workload::needs_test_patch`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dataset::json_kind as kind;
use crate::dataset::Instance;
use crate::parse::LogParser;
use crate::script::quote;
use crate::spec::Spec;

/// The workload of an instance could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("instance {instance}: field `{field}` {reason}")]
    BadField {
        instance: String,
        field: &'static str,
        reason: String,
    },
    #[error("instance {instance}: no workload (no `workload`, `tests`/`prob_script`, `perf_tests`/`efficiency_test` field, and no FAIL_TO_PASS/PASS_TO_PASS tests)")]
    Nothing { instance: String },
    #[error("instance {instance}: test ids of the {parser} log parser cannot be run one at a time ({why}); give the instance a `workload` script")]
    UnsupportedRunner {
        instance: String,
        parser: &'static str,
        why: &'static str,
    },
}

/// Which field the workload came from; recorded with every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadSource {
    /// `workload` (SWE-fficiency, patchgrade).
    Workload,
    /// GSO's `tests` scripts.
    GsoTests,
    /// GSO's `prob_script`.
    GsoProbScript,
    /// `perf_tests` (patchgrade).
    PerfTests,
    /// SWE-Perf's `efficiency_test`.
    EfficiencyTest,
    /// FAIL_TO_PASS + PASS_TO_PASS.
    Tests,
}

impl WorkloadSource {
    pub fn field(self) -> &'static str {
        match self {
            WorkloadSource::Workload => "workload",
            WorkloadSource::GsoTests => "tests",
            WorkloadSource::GsoProbScript => "prob_script",
            WorkloadSource::PerfTests => "perf_tests",
            WorkloadSource::EfficiencyTest => "efficiency_test",
            WorkloadSource::Tests => "FAIL_TO_PASS+PASS_TO_PASS",
        }
    }
}

/// One timed process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadItem {
    /// A script file, written into the container's script folder and run
    /// with `interpreter` (e.g. `["python3"]`) from the variant's tree.
    Script {
        name: String,
        file_name: String,
        body: String,
        interpreter: Vec<String>,
        /// Arguments after the script path; `{dir}` stands for the script
        /// folder (GSO's result and reference files go there).
        args: Vec<String>,
    },
    /// One test: a shell line run with `bash -c` in the variant's tree.
    Test { name: String, command: String },
}

impl WorkloadItem {
    pub fn name(&self) -> &str {
        match self {
            WorkloadItem::Script { name, .. } | WorkloadItem::Test { name, .. } => name,
        }
    }

    /// The argv of the timed process, with scripts in `script_dir`.
    pub fn argv(&self, script_dir: &str) -> Vec<String> {
        match self {
            WorkloadItem::Script {
                file_name,
                interpreter,
                args,
                ..
            } => {
                let mut v = interpreter.clone();
                v.push(format!("{script_dir}/{file_name}"));
                v.extend(args.iter().map(|a| a.replace("{dir}", script_dir)));
                v
            }
            WorkloadItem::Test { command, .. } => {
                vec!["bash".into(), "-c".into(), command.clone()]
            }
        }
    }
}

/// The timed processes of one instance, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub source: WorkloadSource,
    pub items: Vec<WorkloadItem>,
}

impl Workload {
    /// Test ids from FAIL_TO_PASS exist only once the test patch is in the
    /// tree; the evaluation applies it in every variant, base included.
    pub fn needs_test_patch(&self) -> bool {
        self.source == WorkloadSource::Tests
    }
}

/// The workload of `inst`, whose tests run with `spec` (see the module doc
/// for the order of fields).
pub fn workload_of(inst: &Instance, spec: &Spec) -> Result<Workload, WorkloadError> {
    let id = &inst.instance_id;
    if let Some(script) = nonempty_str(inst, "workload")? {
        return Ok(Workload {
            source: WorkloadSource::Workload,
            items: vec![script_item("workload", "workload", script)],
        });
    }
    let gso = inst.extra.contains_key("prob_script") || inst.extra.contains_key("opt_commit");
    if gso {
        let tests = str_list(inst, "tests")?;
        if !tests.is_empty() {
            let items = tests
                .iter()
                .enumerate()
                .map(|(i, body)| gso_item(i, body))
                .collect();
            return Ok(Workload {
                source: WorkloadSource::GsoTests,
                items,
            });
        }
        if let Some(script) = nonempty_str(inst, "prob_script")? {
            return Ok(Workload {
                source: WorkloadSource::GsoProbScript,
                items: vec![gso_item(0, script)],
            });
        }
    }
    for (field, source) in [
        ("perf_tests", WorkloadSource::PerfTests),
        ("efficiency_test", WorkloadSource::EfficiencyTest),
    ] {
        let ids = str_list(inst, field)?;
        if !ids.is_empty() {
            return Ok(Workload {
                source,
                items: test_items(id, &ids, spec)?,
            });
        }
    }
    let ids: Vec<String> = inst
        .fail_to_pass
        .iter()
        .chain(&inst.pass_to_pass)
        .cloned()
        .collect();
    if ids.is_empty() {
        return Err(WorkloadError::Nothing {
            instance: id.clone(),
        });
    }
    Ok(Workload {
        source: WorkloadSource::Tests,
        items: test_items(id, &ids, spec)?,
    })
}

fn bad(inst: &Instance, field: &'static str, reason: impl Into<String>) -> WorkloadError {
    WorkloadError::BadField {
        instance: inst.instance_id.clone(),
        field,
        reason: reason.into(),
    }
}

fn nonempty_str<'a>(
    inst: &'a Instance,
    field: &'static str,
) -> Result<Option<&'a str>, WorkloadError> {
    match inst.extra.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        // A missing value exported through pandas reads `nan`; SWE-fficiency's
        // harness treats that text as no workload, and so does this.
        Some(Value::String(s)) if s.trim() == "nan" => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad(
            inst,
            field,
            format!("must be a script (a string), got {}", kind(other)),
        )),
    }
}

/// A list of strings, given as a list or as a JSON-encoded list in a string
/// (how SWE-bench-style datasets ship lists).
fn str_list(inst: &Instance, field: &'static str) -> Result<Vec<String>, WorkloadError> {
    let v = match inst.extra.get(field) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .map_err(|e| bad(inst, field, format!("is a string but not a JSON list: {e}")))?,
        Some(v) => v.clone(),
    };
    serde_json::from_value::<Vec<String>>(v.clone()).map_err(|_| {
        bad(
            inst,
            field,
            format!("must be a list of strings, got {}", kind(&v)),
        )
    })
}

/// A script runs with the interpreter of its `#!` line, else Python (all
/// three benchmarks ship Python).
fn script_item(name: &str, stem: &str, body: &str) -> WorkloadItem {
    let shebang = body
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|w| !w.is_empty());
    let (interpreter, ext) = match shebang {
        Some(w) if !w.iter().any(|x| x.contains("python")) => (w, "sh"),
        // `python3`, not `python`: venvs and conda envs have both, a
        // Debian image without an env has only `python3`.
        _ => (vec!["python3".to_string()], "py"),
    };
    WorkloadItem::Script {
        name: name.to_string(),
        file_name: format!("{stem}.{ext}"),
        body: body.to_string(),
        interpreter,
        args: Vec::new(),
    }
}

/// GSO's harness runs `python gso_test_i.py RESULT --reference|--eqcheck
/// --file_prefix gso_i`; timing needs neither reference nor check.
fn gso_item(i: usize, body: &str) -> WorkloadItem {
    WorkloadItem::Script {
        name: format!("gso_test_{i}"),
        file_name: format!("gso_test_{i}.py"),
        body: body.to_string(),
        interpreter: vec!["python3".to_string()],
        args: vec![
            format!("{{dir}}/gso_result_{i}.txt"),
            "--file_prefix".into(),
            format!("{{dir}}/gso_{i}"),
        ],
    }
}

/// One item per test id, deduplicated in order.
fn test_items(
    instance: &str,
    ids: &[String],
    spec: &Spec,
) -> Result<Vec<WorkloadItem>, WorkloadError> {
    let unsupported = |why| WorkloadError::UnsupportedRunner {
        instance: instance.to_string(),
        parser: spec.log_parser.name(),
        why,
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut items = Vec::new();
    for id in ids {
        let directive = match spec.log_parser {
            LogParser::Pytest
            | LogParser::PytestOptions
            | LogParser::PytestV2
            | LogParser::Seaborn
            | LogParser::Matplotlib => pytest_directive(id),
            LogParser::Django => django_directive(id),
            LogParser::Unittest => id.clone(),
            LogParser::Sympy => return Err(unsupported("its ids name a function, not its file")),
            LogParser::Cargo
            | LogParser::GoTest
            | LogParser::Phpunit
            | LogParser::Minitest
            | LogParser::Cucumber
            | LogParser::RubyUnit
            | LogParser::RspecTransformedJson
            | LogParser::Jekyll
            | LogParser::Redis
            | LogParser::Jq
            | LogParser::Googletest
            | LogParser::Doctest
            | LogParser::MicropythonTest => {
                return Err(unsupported("selecting one test is not implemented for it"))
            }
            LogParser::Maven
            | LogParser::Ant
            | LogParser::GradleCustom
            | LogParser::Jest
            | LogParser::JestJson
            | LogParser::Vitest
            | LogParser::Karma
            | LogParser::Tap
            | LogParser::ImmutableJs => {
                return Err(unsupported("selecting one test is not implemented for it"))
            }
        };
        if seen.insert(directive.clone()) {
            items.push(WorkloadItem::Test {
                name: id.clone(),
                command: format!("{} {}", spec.test_cmd, quote(&directive)),
            });
        }
    }
    Ok(items)
}

/// SWE-bench cuts parametrised pytest ids at the first space
/// (`test_f[a b]` is stored as `test_f[a`): such an id selects nothing, so
/// the whole function runs instead.
fn pytest_directive(id: &str) -> String {
    match id.find('[') {
        Some(i) if !id.ends_with(']') => id[..i].to_string(),
        _ => id.to_string(),
    }
}

/// Django's ids are `test_name (module.Class)` (maybe with the docstring's
/// first line after them); runtests.py takes `module.Class.test_name`.
fn django_directive(id: &str) -> String {
    let first = id.lines().next().unwrap_or(id);
    if let Some((name, rest)) = first.split_once(" (") {
        if let Some(class) = rest.split(')').next() {
            if !name.contains(' ') && !class.is_empty() {
                return format!("{class}.{name}");
            }
        }
    }
    first.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(extra: Value) -> Instance {
        let mut v = json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc",
            "FAIL_TO_PASS": "[\"tests/test_a.py::test_f2p\"]",
            "PASS_TO_PASS": ["tests/test_a.py::test_p[x y", "tests/test_a.py::test_f2p"],
        });
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn spec(parser: &str) -> Spec {
        serde_yaml_ng::from_str(&format!("test_cmd: pytest -rA\nlog_parser: {parser}\n")).unwrap()
    }

    #[test]
    fn swe_fficiency_workload_script_comes_first() {
        let body = "import timeit\nprint('Mean:', 1.0)\n";
        let w = workload_of(
            &instance(json!({"workload": body, "perf_tests": ["t::x"]})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.source, WorkloadSource::Workload);
        assert!(!w.needs_test_patch());
        assert_eq!(w.items.len(), 1);
        assert_eq!(
            w.items[0].argv("/perf/w"),
            ["python3", "/perf/w/workload.py"]
        );
        // SWE-fficiency's missing workload (`nan`) is no workload.
        let w = workload_of(&instance(json!({"workload": " nan\n"})), &spec("pytest")).unwrap();
        assert_eq!(w.source, WorkloadSource::Tests);
        // A shell script keeps its interpreter.
        let w = workload_of(
            &instance(json!({"workload": "#!/bin/bash -e\necho hi\n"})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.items[0].argv("/w"), ["/bin/bash", "-e", "/w/workload.sh"]);
    }

    #[test]
    fn gso_tests_then_prob_script() {
        let w = workload_of(
            &instance(json!({"opt_commit": "def", "prob_script": "p", "tests": ["t0", "t1"]})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.source, WorkloadSource::GsoTests);
        assert_eq!(
            w.items[1].argv("/w"),
            [
                "python3",
                "/w/gso_test_1.py",
                "/w/gso_result_1.txt",
                "--file_prefix",
                "/w/gso_1"
            ]
        );
        let w = workload_of(
            &instance(json!({"prob_script": "p", "tests": "[]"})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.source, WorkloadSource::GsoProbScript);
        // `tests` of a non-GSO dataset is not a workload.
        let w = workload_of(&instance(json!({"tests": ["x"]})), &spec("pytest")).unwrap();
        assert_eq!(w.source, WorkloadSource::Tests);
    }

    #[test]
    fn perf_tests_and_swe_perf_efficiency_test() {
        let w = workload_of(
            &instance(json!({"efficiency_test": ["tests/t.py::test_speed"]})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.source, WorkloadSource::EfficiencyTest);
        assert_eq!(
            w.items[0].argv("/w"),
            ["bash", "-c", "pytest -rA 'tests/t.py::test_speed'"]
        );
        let w = workload_of(
            &instance(json!({"perf_tests": "[\"a\", \"b\"]", "efficiency_test": ["c"]})),
            &spec("pytest"),
        )
        .unwrap();
        assert_eq!(w.source, WorkloadSource::PerfTests);
        assert_eq!(w.items.len(), 2);
    }

    #[test]
    fn tests_fallback_dedups_and_repairs_cut_ids() {
        let w = workload_of(&instance(json!({})), &spec("pytest")).unwrap();
        assert_eq!(w.source, WorkloadSource::Tests);
        assert!(w.needs_test_patch());
        let cmds: Vec<String> = w.items.iter().map(|i| i.argv("/w")[2].clone()).collect();
        assert_eq!(
            cmds,
            [
                "pytest -rA 'tests/test_a.py::test_f2p'",
                "pytest -rA 'tests/test_a.py::test_p'"
            ]
        );
    }

    #[test]
    fn django_and_unittest_ids() {
        assert_eq!(
            django_directive("test_x (admin.tests.AdminTests)"),
            "admin.tests.AdminTests.test_x"
        );
        assert_eq!(
            django_directive("test_y (m.C)\nThe docstring line."),
            "m.C.test_y"
        );
        let mut s = spec("unittest");
        s.test_cmd = "python3 -m unittest -v".into();
        let i = instance(json!({"FAIL_TO_PASS": ["tests.test_a.T.test_one"], "PASS_TO_PASS": []}));
        let w = workload_of(&i, &s).unwrap();
        assert_eq!(
            w.items[0].argv("/w")[2],
            "python3 -m unittest -v 'tests.test_a.T.test_one'"
        );
    }

    #[test]
    fn bad_fields_and_unsupported_runners_are_named() {
        let e = workload_of(&instance(json!({"workload": 3})), &spec("pytest")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "instance o__r-1: field `workload` must be a script (a string), got a number"
        );
        let e = workload_of(
            &instance(json!({"perf_tests": "not json"})),
            &spec("pytest"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("instance o__r-1: field `perf_tests` is a string but not a JSON list"),
            "{e}"
        );
        let e = workload_of(&instance(json!({})), &spec("sympy")).unwrap_err();
        assert!(matches!(
            e,
            WorkloadError::UnsupportedRunner {
                parser: "sympy",
                ..
            }
        ));
        let e = workload_of(
            &instance(json!({"FAIL_TO_PASS": [], "PASS_TO_PASS": []})),
            &spec("pytest"),
        )
        .unwrap_err();
        assert_eq!(
            e,
            WorkloadError::Nothing {
                instance: "o__r-1".into()
            }
        );
    }
}
