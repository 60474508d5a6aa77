//! SWE-bench Multilingual's PHP and Ruby repositories need Packagist and
//! RubyGems, which this machine cannot reach: their built-in specs say so,
//! and an evaluation ends `environment_build_failed` naming the registry,
//! before anything is built or checked out (no mirror is given here), and
//! the run says its results are inconclusive.

mod common;

use common::*;
use patchgrade::exit;
use serde_json::json;

fn row(id: &str, repo: &str) -> serde_json::Value {
    json!({
        "instance_id": id,
        "repo": repo,
        "base_commit": "0000000000000000000000000000000000000000",
        "patch": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        "test_patch": "",
        "version": "1234",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": []
    })
}

#[test]
fn php_and_ruby_instances_end_naming_the_unreachable_registry() {
    let sb = Sandbox::new();
    sb.write(
        "dataset.jsonl",
        &jsonl(&[
            row("briannesbitt__carbon-1234", "briannesbitt/carbon"),
            row("rubocop__rubocop-1234", "rubocop/rubocop"),
        ]),
    );
    let out = sb.run(&[
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "u",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE));
    for (id, registry) in [
        ("briannesbitt__carbon-1234", "Packagist"),
        ("rubocop__rubocop-1234", "RubyGems"),
    ] {
        let r = sb.record("u", "gold", id);
        assert_eq!(r["outcome"], "environment_build_failed", "{r}");
        let detail = r["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(registry) && detail.contains("cannot reach"),
            "{detail}"
        );
    }
}
