//! `--eval-script dataset`: the instance's own `eval_script` field (as the
//! reference's current datasets carry it) run unchanged in patchgrade's
//! image, inside a wrapper that provides what it assumes of the reference's
//! image (a conda env, the base commit under its id, installs with network;
//! `harness-scripts/dataset-eval.sh.tmpl` says how).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{history_probe, quote};
use crate::dataset::{sha256_hex, Instance};
use crate::spec::Spec;

const WRAPPER: &str = include_str!("../../harness-scripts/dataset-eval.sh.tmpl");

/// Where an evaluation's eval script comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptSource {
    /// Rendered from the spec (`harness-scripts/eval.sh.tmpl`).
    #[default]
    Spec,
    /// The instance's own `eval_script` field, unchanged.
    Dataset,
}

impl ScriptSource {
    pub fn name(self) -> &'static str {
        match self {
            ScriptSource::Spec => "spec",
            ScriptSource::Dataset => "dataset",
        }
    }
}

/// What a record says about a dataset script it ran (absent: the spec's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptUsed {
    pub source: ScriptSource,
    /// sha256 of the `eval_script` field as the dataset has it.
    pub sha256: String,
}

/// Instances that cannot run under `--eval-script dataset`.
#[derive(Debug, thiserror::Error)]
#[error(
    "--eval-script dataset needs an eval_script field (a non-empty string) in every instance it runs; without one: {}",
    .ids.join(", ")
)]
pub struct MissingScripts {
    pub ids: Vec<String>,
}

/// The instance's own eval script: its `eval_script` field when that is a
/// non-empty string.
pub fn eval_script_of(inst: &Instance) -> Option<&str> {
    match inst.extra.get("eval_script") {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
        _ => None,
    }
}

/// Every instance has a script to run, or the ones that do not, named.
pub fn check_all<'a>(
    instances: impl IntoIterator<Item = &'a Instance>,
) -> Result<(), MissingScripts> {
    let ids: Vec<String> = instances
        .into_iter()
        .filter(|i| eval_script_of(i).is_none())
        .map(|i| i.instance_id.clone())
        .collect();
    if ids.is_empty() {
        Ok(())
    } else {
        Err(MissingScripts { ids })
    }
}

/// What the record keeps of the script an instance ran.
pub fn used(script: &str) -> ScriptUsed {
    ScriptUsed {
        source: ScriptSource::Dataset,
        sha256: sha256_hex(script),
    }
}

/// The marker line that ends the tests in the reference's scripts.
const END_LINE: &str = ": '>>>>> End Test Output'";

/// The script with the test command's exit code recorded around its End
/// marker, as the reference's harness does to these scripts
/// (`record_test_exit_code`): the exit-code cross-check of grading then
/// applies to them as to patchgrade's own. The last such line is the
/// marker (a test patch in the heredoc comes before it); a script without
/// one is left as it is.
pub fn record_exit_code(script: &str) -> String {
    let lines: Vec<&str> = script.split('\n').collect();
    let Some(at) = lines.iter().rposition(|l| l.trim_end() == END_LINE) else {
        return script.to_string();
    };
    let mut out: Vec<&str> = Vec::with_capacity(lines.len() + 2);
    out.extend(&lines[..at]);
    out.push("PATCHGRADE_TEST_EXIT_CODE=$?");
    out.push(lines[at]);
    out.push("echo \">>>>> Test Exit Code: $PATCHGRADE_TEST_EXIT_CODE\"");
    out.extend(&lines[at + 1..]);
    out.join("\n")
}

/// Everything that goes into one wrapped dataset script.
pub struct DatasetScript<'a> {
    pub testbed: &'a str,
    /// The env the conda stand-in activates.
    pub venv: &'a str,
    pub base_commit: &'a str,
    /// The instance's `eval_script`, as the dataset has it.
    pub script: &'a str,
    /// Activates patchgrade's env before the spec's commands.
    pub activate: &'a str,
    /// Its `env` and `eval_commands` run before the dataset's script.
    pub spec: &'a Spec,
    /// The upstream base commit's time (the history probe, as in the spec's script).
    pub base_time: Option<i64>,
}

impl DatasetScript<'_> {
    pub fn render(&self) -> String {
        let mut env: Vec<String> = self
            .spec
            .env
            .iter()
            .map(|(k, v)| format!("export {k}={}", quote(v)))
            .collect();
        env.extend(self.spec.eval_commands.iter().cloned());
        let env = if env.is_empty() {
            String::from(": no spec env or eval_commands")
        } else {
            env.join("\n")
        };
        let mut script = record_exit_code(self.script);
        if !script.ends_with('\n') {
            script.push('\n');
        }
        WRAPPER
            .replace("{{testbed}}", &quote(self.testbed))
            .replace("{{venv}}", self.venv)
            .replace(
                "{{base_object}}",
                &quote(&format!("{}^{{commit}}", self.base_commit)),
            )
            .replace(
                "{{replace_ref}}",
                &quote(&format!("refs/replace/{}", self.base_commit)),
            )
            .replace("{{sha256}}", &sha256_hex(self.script))
            .replace("{{activate}}", self.activate)
            .replace("{{env}}", &env)
            .replace("{{history_probe}}", &history_probe(self.base_time))
            // Last: the dataset's script may itself contain `{{` sequences.
            .replace("{{dataset_script}}\n", &script)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(extra: Value) -> Instance {
        let mut v =
            serde_json::json!({"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc"});
        if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
            o.extend(e);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_instance_without_a_usable_script_is_named() {
        let good = inst(serde_json::json!({"eval_script": "#!/bin/bash\ntrue\n"}));
        let none = inst(serde_json::json!({"instance_id": "o__r-2"}));
        let empty = inst(serde_json::json!({"instance_id": "o__r-3", "eval_script": "  "}));
        let number = inst(serde_json::json!({"instance_id": "o__r-4", "eval_script": 3}));
        assert_eq!(eval_script_of(&good), Some("#!/bin/bash\ntrue\n"));
        assert!(check_all([&good]).is_ok());
        let e = check_all([&good, &none, &empty, &number]).unwrap_err();
        assert_eq!(e.ids, ["o__r-2", "o__r-3", "o__r-4"]);
        assert_eq!(
            e.to_string(),
            "--eval-script dataset needs an eval_script field (a non-empty string) in every instance it runs; without one: o__r-2, o__r-3, o__r-4"
        );
    }

    #[test]
    fn the_exit_code_goes_around_the_last_end_marker_only() {
        let s = "a\n: '>>>>> End Test Output'\nb\n: '>>>>> End Test Output'\nc";
        assert_eq!(
            record_exit_code(s),
            "a\n: '>>>>> End Test Output'\nb\nPATCHGRADE_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $PATCHGRADE_TEST_EXIT_CODE\"\nc"
        );
        assert_eq!(record_exit_code("a\nb\n"), "a\nb\n");
    }

    #[test]
    fn the_script_goes_in_verbatim_after_the_stand_ins() {
        let base = "d26b2424437dabeeca94d7900b37d2df4410da0c";
        let script = format!(
            "#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\ngit checkout {base} t.py\ngit apply -v - <<'EOF_114329324912'\n{{{{x}}}}\nEOF_114329324912\n: '>>>>> Start Test Output'\npytest -rA t.py\n: '>>>>> End Test Output'\ngit checkout {base} t.py"
        );
        let mut spec: Spec =
            serde_json::from_str(r#"{"test_cmd":"t","log_parser":"pytest"}"#).unwrap();
        spec.env
            .insert("SETUPTOOLS_SCM_PRETEND_VERSION".into(), "1.2".into());
        spec.eval_commands
            .push("export HTTPBIN_URL=http://127.0.0.1:8099/".into());
        let out = DatasetScript {
            testbed: "/testbed",
            venv: "/opt/venv",
            activate: "source /opt/venv/bin/activate",
            base_commit: base,
            script: &script,
            spec: &spec,
            base_time: Some(1_600_000_000),
        }
        .render();
        // Unchanged but for the exit code around the End marker, `{{`
        // included, and a final newline before what follows.
        let recorded = record_exit_code(&script);
        assert_eq!(
            recorded
                .replace("PATCHGRADE_TEST_EXIT_CODE=$?\n", "")
                .replace(
                    "\necho \">>>>> Test Exit Code: $PATCHGRADE_TEST_EXIT_CODE\"",
                    ""
                ),
            script
        );
        assert!(recorded.contains(
            "pytest -rA t.py\nPATCHGRADE_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $PATCHGRADE_TEST_EXIT_CODE\"\ngit checkout"
        ));
        assert!(out.contains(&format!("{recorded}\n")), "{out}");
        let at = out.find(&recorded).unwrap();
        let before = &out[..at];
        let after = &out[at + recorded.len()..];
        assert!(before.contains(&format!("git update-ref 'refs/replace/{base}'")));
        assert!(before.contains("source /opt/venv/bin/activate"));
        assert!(before.contains("PIP_NO_INDEX=1 PIP_NO_DEPS=1 PIP_NO_BUILD_ISOLATION=0"));
        assert!(before.contains(
            "source /opt/venv/bin/activate\nexport SETUPTOOLS_SCM_PRETEND_VERSION='1.2'\nexport HTTPBIN_URL=http://127.0.0.1:8099/\n"
        ));
        assert!(before.contains(&sha256_hex(&script)));
        assert!(after.contains(">>>>> History: "));
        // Besides the exit code, the wrapper prints no grading marker.
        for m in [
            crate::grade::START_MARKER,
            crate::grade::END_MARKER,
            crate::grade::EXIT_CODE_MARKER,
        ] {
            assert!(!before.contains(m) && !after.contains(m), "{m}");
        }
        // Every placeholder filled.
        assert!(!before.contains("{{") && !after.contains("{{"), "{out}");
        assert!(out.starts_with("#!/bin/bash\n") && out.trim_end().ends_with('}'));
    }
}
