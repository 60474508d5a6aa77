//! `patchgrade images` on the real engine and the real binary: the test
//! makes its own tiny image chain (a root imported from a tar, no registry
//! needed; an env and two instance images built on it with COPY only),
//! every name holding `imgtest<pid>` and every image the label
//! `patchgrade.test=images-<pid>`. It checks the holdings (own sizes,
//! shared layers once), the cold-run estimate against build logs it
//! writes in the builds' format, and eviction: the cache folder's index
//! holds the test's images only, so nothing else can be a candidate; the
//! image a container was made from stays, and so do its parents. It
//! removes only the images it made, by name, at the end.
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1, where it fails.

mod common;

use std::path::Path;
use std::process::Command;

use patchgrade::exit;
use serde_json::{json, Value};

use common::*;

fn docker(args: &[&str]) -> std::process::Output {
    let out = Command::new("docker").args(args).output().expect("docker");
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn present(name: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn inspect(name: &str) -> Value {
    let out = docker(&["image", "inspect", name]);
    serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone()
}

/// Bytes that do not compress.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The test's images and container, removed by name however it ends.
struct Made {
    images: Vec<String>,
    container: Option<String>,
}

impl Drop for Made {
    fn drop(&mut self) {
        if let Some(c) = &self.container {
            let _ = Command::new("docker").args(["rm", "-f", c]).output();
        }
        // Children first: a parent with a child is only untagged.
        for name in self.images.iter().rev() {
            let _ = Command::new("docker").args(["rmi", name]).output();
        }
    }
}

/// `docker build` of a context holding one file, FROM `parent`.
fn build(dir: &Path, name: &str, parent: &str, bytes: usize, seed: u64, label: &str) {
    let ctx = dir.join(name.replace([':', '/'], "_"));
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(ctx.join("data.bin"), noise(bytes, seed)).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {parent}\nCOPY data.bin /data-{seed}.bin\n"),
    )
    .unwrap();
    docker(&[
        "build",
        "-q",
        "--label",
        label,
        "-t",
        name,
        ctx.to_str().unwrap(),
    ]);
}

/// A build log folder as `images::build` leaves it.
fn build_log(logs: &Path, tier: &str, name: &str, from: &str, secs: f64) {
    let d = logs.join(tier).join(name.replace([':', '/'], "__"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("Dockerfile"), format!("FROM {from}\nRUN true\n")).unwrap();
    std::fs::write(
        d.join("build_image.log"),
        format!(
            "Step 1/2 : FROM {from}\n\n{}\n",
            patchgrade::backend::docker::inventory::builds::took_line(name, secs)
        ),
    )
    .unwrap();
}

fn images_json(sb: &Sandbox, extra: &[&str]) -> (Value, String, Option<i32>) {
    let mut args = vec![
        "images",
        "--dataset",
        "dataset.jsonl",
        "--log-dir",
        "logs/run_evaluation",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = sb.run(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (v, err, out.status.code())
}

#[test]
fn images_lists_estimates_and_evicts_only_its_cache_folders_images() {
    if !docker_ready("images") {
        return;
    }
    let sb = Sandbox::new();
    let pid = std::process::id();
    let arch = patchgrade::backend::docker::images::arch();
    let label = format!("patchgrade.test=images-{pid}");
    let repo = format!("imgtest{pid}__w");
    let root = format!("patchgrade.root.imgtest{pid}:t");
    let env = format!("patchgrade.env.py.{arch}.imgtest{pid}:t");
    let i1 = format!("patchgrade.eval.{arch}.{repo}-1:t");
    let i2 = format!("patchgrade.eval.{arch}.{repo}-2:t");
    let mut made = Made {
        images: vec![root.clone()],
        container: None,
    };

    // The root: one file, imported (no registry, no base image).
    let rootfs = sb.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::write(rootfs.join("hello"), noise(64 << 10, 1)).unwrap();
    let tar = sb.path().join("root.tar");
    let ok = Command::new("tar")
        .args([
            "-cf",
            tar.to_str().unwrap(),
            "-C",
            rootfs.to_str().unwrap(),
            ".",
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    docker(&[
        "import",
        "--change",
        &format!("LABEL {}", label.replace('=', "=\"") + "\""),
        tar.to_str().unwrap(),
        &root,
    ]);
    made.images.push(env.clone());
    build(sb.path(), &env, &root, 1 << 20, 2, &label);
    made.images.push(i1.clone());
    build(sb.path(), &i1, &env, 2 << 20, 3, &label);
    made.images.push(i2.clone());
    build(sb.path(), &i2, &env, 1 << 20, 4, &label);

    // Instances 1 and 2 have images; 3 has a recorded build over a
    // snapshot the engine lacks; 4 of another repository has nothing.
    let rows: Vec<Value> = (1..=3)
        .map(|n| json!({"instance_id": format!("{repo}-{n}"), "repo": format!("imgtest{pid}/w"), "base_commit": "0"}))
        .chain(std::iter::once(json!({"instance_id": format!("imgtest{pid}__z-4"), "repo": format!("imgtest{pid}/z"), "base_commit": "0"})))
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    let logs = sb.path().join("logs/build_images");
    let snap = format!("patchgrade.snap.{arch}.{repo}:s");
    build_log(&logs, "env", &snap, &env, 12.0);
    let i3 = format!("patchgrade.eval.{arch}.{repo}-3:t");
    build_log(&logs, "instances", &i3, &snap, 7.5);
    sb.write(
        "cache/durations.json",
        &json!({"tests": {format!("{repo}-1"): 2.5}}).to_string(),
    );

    let (v, err, code) = images_json(&sb, &[]);
    assert_eq!(code, Some(exit::OK), "{err}");
    let held: Vec<&Value> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| {
            h["name"]
                .as_str()
                .unwrap()
                .contains(&format!("imgtest{pid}"))
        })
        .collect();
    let own = |name: &str| {
        held.iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {v}"))["own"]
            .as_u64()
            .unwrap()
    };
    // Each counts what it adds over its parent: about its own file.
    let mib = 1u64 << 20;
    assert!(
        (2 * mib..2 * mib + mib / 4).contains(&own(&i1)),
        "{}",
        own(&i1)
    );
    assert!((mib..mib + mib / 4).contains(&own(&i2)), "{}", own(&i2));
    assert!((mib..mib + mib / 4).contains(&own(&env)), "{}", own(&env));
    // The env and root serve this repository's images alone.
    for name in [&env, &root] {
        let h = held.iter().find(|h| h["name"] == name.as_str()).unwrap();
        assert_eq!(h["repo"], repo.as_str(), "{h}");
    }
    let group = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["repo"] == repo.as_str() && g["kind"] == "instance")
        .unwrap_or_else(|| panic!("no group of {repo}: {err}"));
    assert_eq!(group["images"], 2);
    assert_eq!(group["bytes"].as_u64(), Some(own(&i1) + own(&i2)));
    assert!(
        err.lines()
            .any(|l| l.trim_start().starts_with("instance") && l.contains(&repo)),
        "{err}"
    );

    let cold = &v["cold_run"];
    let basis: Vec<&str> = cold["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["basis"].as_str().unwrap())
        .collect();
    assert_eq!(basis, ["warm", "warm", "own", "unknown"], "{cold}");
    assert_eq!(cold["instances"][2]["seconds"], 7.5);
    assert_eq!(cold["parents"][0]["name"], snap.as_str());
    assert_eq!(cold["parents"][0]["seconds"], 12.0);
    let w = &cold["repos"][0];
    assert_eq!((w["warm"].as_u64(), w["cold"].as_u64()), (Some(2), Some(1)));
    assert_eq!(w["build_seconds"], 19.5);
    assert_eq!(w["tests_seconds"], 2.5);
    assert_eq!(w["bytes"].as_u64(), Some((own(&i1) + own(&i2)) / 2));
    assert!(
        err.contains(&format!(
            "no build recorded under logs/build_images for imgtest{pid}__z"
        )),
        "{err}"
    );

    // From an empty engine: the held instances are built too (no log of
    // theirs: the repository's mean), and the env and root under them.
    let (v, err, code) = images_json(&sb, &["--from-empty"]);
    assert_eq!(code, Some(exit::OK), "{err}");
    let cold = &v["cold_run"];
    let basis: Vec<&str> = cold["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["basis"].as_str().unwrap())
        .collect();
    assert_eq!(
        basis,
        ["repository", "repository", "own", "unknown"],
        "{cold}"
    );
    let parents: Vec<&str> = cold["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        parents,
        [root.as_str(), env.as_str(), snap.as_str()],
        "{cold}"
    );
    assert_eq!(cold["parents"][1]["bytes"].as_u64(), Some(own(&env)));

    // The cache folder's index: this test's images, 1 the least recently
    // used. Instance 2 gets a container: it, and so its env and root, stay.
    let entries: serde_json::Map<String, Value> = [(&root, 1), (&env, 1), (&i1, 2), (&i2, 3)]
        .into_iter()
        .map(|(name, used)| {
            let i = inspect(name);
            (
                name.clone(),
                json!({"id": i["Id"], "last_used": used, "layers": i["RootFS"]["Layers"], "size": i["Size"]}),
            )
        })
        .collect();
    sb.write(
        "cache/docker/images.json",
        &json!({ "images": entries }).to_string(),
    );
    let name = format!("imgtest{pid}-holder");
    docker(&["create", "--name", &name, "--label", &label, &i2, "/none"]);
    made.container = Some(name);

    let (v, err, code) = images_json(&sb, &["--evict", "--dry-run", "--cache-budget", "1"]);
    assert_eq!(code, Some(exit::OK), "{err}");
    let plan = &v["eviction"]["plan"];
    assert_eq!(plan["waves"], json!([[i1.as_str()]]), "{err}");
    assert_eq!(plan["in_use"], 1);
    assert_eq!(plan["indexed"], 4);
    assert!(err.contains("would remove 1 images"), "{err}");
    assert!(present(&i1), "a dry run removes nothing");

    // A run of this cache folder is going: eviction is refused.
    let lease = hold_lease(&sb.cache().join("docker/images.lock"));
    let (_, err, code) = images_json(&sb, &["--evict", "--cache-budget", "1"]);
    assert_eq!(code, Some(exit::INFRA), "{err}");
    assert!(err.contains("eviction is left to the last run"), "{err}");
    assert!(present(&i1));
    drop(lease);

    let (v, err, code) = images_json(&sb, &["--evict", "--cache-budget", "1"]);
    assert_eq!(code, Some(exit::OK), "{err}");
    assert_eq!(
        v["eviction"]["removals"],
        json!([{"outcome": "removed", "name": i1.as_str()}])
    );
    assert!(!present(&i1), "{err}");
    for kept in [&i2, &env, &root] {
        assert!(present(kept), "{kept}: {err}");
    }
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.cache().join("docker/images.json")).unwrap(),
    )
    .unwrap();
    assert!(index["images"].get(&i1).is_none(), "{index}");
    assert!(index["images"].get(&i2).is_some(), "{index}");
    drop(made);
}
