//! Snapshot chains on the real engine (a spec's `snapshots.chain`,
//! images::snapshot::chain): a window's snapshot built over the previous
//! window's, holding only what changed, and an instance over it whose
//! /testbed is its base tree exactly.
//!
//! Skips without a daemon unless PATCHGRADE_REQUIRE_DOCKER=1 (CI).

mod common;

use patchgrade::exit;

use common::cext::*;
use common::layers::{images, layers, widgets_mirror, widgets_patches, EVERY_CHANGE, EVERY_KIND};
use common::widgets::{F2P, P2P};
use common::*;
use serde_json::Value;

/// 91-day windows (the tests' `W`), four to a chain span; `T0` starts one.
const SPEC: &str = "repo: acme/chain\ndefaults:\n  snapshots: {window_days: 91, chain: 4}\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

#[test]
fn docker_a_chained_snapshot_holds_only_its_changes_and_gives_the_base_tree() {
    if !docker_ready("docker_a_chained_snapshot_holds_only_its_changes") {
        return;
    }
    assert_eq!((T0 / W) % 4, 0, "T0 starts a span of four windows");
    let sb = Sandbox::new();
    let repo = sb.mirrors().join("acme__chain");
    widgets_mirror(&repo);
    // Window 0: the chain's first snapshot (b1's tree), whole.
    commit_at(&repo, EVERY_KIND, T0 + 100);
    let b1 = commit_at(&repo, "echo more >> keep.txt", T0 + 200);
    // Window 1: b2 changes the tree in every way a tree can change; its
    // snapshot (of window 2's bases) is a link over b1's.
    let b2 = commit_at(&repo, EVERY_CHANGE, T0 + W + 100);
    // Window 2: the instance over the link.
    let b3 = commit_at(&repo, "echo third > third.txt", T0 + 2 * W + 100);

    let (gold, test_patch) = widgets_patches(&repo);
    let rows: Vec<Value> = [("acme__chain-2", &b2), ("acme__chain-3", &b3)]
        .iter()
        .map(|(id, base)| instance(id, "acme/chain", base, &gold, &test_patch, &[F2P], &[P2P]))
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write("specs/chain.yaml", SPEC);
    let mut args = docker_args("run", "gold", "chain");
    args.extend(["--max-workers", "2", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in ["acme__chain-2", "acme__chain-3"] {
        assert_eq!(sb.outcome("chain", "gold", id), "resolved", "{id}");
    }

    // Two snapshots: b1's whole, b2's a link on it (three layers more).
    let mut snaps: Vec<String> = images("patchgrade.snap.")
        .into_iter()
        .filter(|s| s.contains("acme__chain"))
        .collect();
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    snaps.sort_by_key(|s| layers(s).len());
    let (whole, link) = (&snaps[0], &snaps[1]);
    let (whole_layers, link_layers) = (layers(whole), layers(link));
    assert!(
        link_layers.starts_with(&whole_layers),
        "the link is not on b1's snapshot"
    );
    assert_eq!(
        link_layers.len(),
        whole_layers.len() + 3,
        "two COPYs and a RUN"
    );
    let inst = |id: &str| {
        let found = images(&format!("patchgrade.eval.x86_64.{id}:"));
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        found[0].clone()
    };
    assert!(layers(&inst("acme__chain-2")).starts_with(&whole_layers));
    assert!(!layers(&inst("acme__chain-2")).starts_with(&link_layers));
    assert!(layers(&inst("acme__chain-3")).starts_with(&link_layers));

    // The first is b1's tree.
    let tree1 = run(&repo, "git", &["rev-parse", &format!("{b1}^{{tree}}")], &[]);
    assert_eq!(
        in_image(
            whole,
            "cd /testbed && cat keep.txt old/b.txt && test -L link && echo ok"
        ),
        "keep\nmore\nb\nok",
        "b1's tree ({tree1})"
    );
    // The link's own layers hold b2's changed files, not b1's whole tree.
    let own = docker_out(&["history", "--no-trunc", "--format", "{{.CreatedBy}}", link]);
    assert!(own.lines().take(3).all(|l| !l.contains("FROM")), "{own}");
    let files = in_image(
        link,
        "cd /testbed && ls /opt/patchgrade/snapshot-objects/pack | wc -l && test ! -e .git && \
         test ! -e old && test ! -e gone.txt && test ! -L link && test -f d2f && test -x run.sh && \
         cat data/x keep.txt new.txt && test ! -e third.txt && echo ok",
    );
    assert_eq!(
        files, "4\nx\nchanged\nnew\nok",
        "two packs and their indexes; b2's tree"
    );
    // Every object of b2's tree is in the link's packs: git reads the tree
    // back from them alone.
    let tree2 = run(&repo, "git", &["rev-parse", &format!("{b2}^{{tree}}")], &[]);
    let listed = in_image(
        link,
        &format!(
            "cd /tmp && git init -q r && echo /opt/patchgrade/snapshot-objects > r/.git/objects/info/alternates && \
             git -C r ls-tree -r {tree2} | wc -l"
        ),
    );
    let expected = run(&repo, "git", &["ls-tree", "-r", &tree2], &[])
        .lines()
        .count();
    assert_eq!(listed, expected.to_string());

    // The instance over the link is its base tree exactly, in a one-commit
    // repository, clean.
    let tree3 = run(&repo, "git", &["rev-parse", &format!("{b3}^{{tree}}")], &[]);
    let seen = in_image(
        &inst("acme__chain-3"),
        "cd /testbed && git rev-parse HEAD~1^{tree} && git status --porcelain --ignored && cat third.txt",
    );
    assert_eq!(seen, format!("{tree3}\nthird"));

    // A second run finds every image: the chain is fixed by the history.
    let ours = || {
        let mut v: Vec<String> = images("patchgrade.")
            .into_iter()
            .filter(|i| i.contains("acme__chain"))
            .collect();
        v.sort();
        v
    };
    let before = ours();
    assert_eq!(before.len(), 4, "{before:?}");
    let out = sb.run(&docker_args("run", "gold", "chain-again"));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(ours(), before);
    for img in [
        inst("acme__chain-2"),
        inst("acme__chain-3"),
        link.clone(),
        whole.clone(),
    ] {
        docker_out(&["rmi", &img]);
    }
}
