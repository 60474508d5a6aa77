//! The image-cache counters of /metrics on the Docker backend for the
//! instance images the other tests do not make: one made as a delta over
//! a snapshot image (a base commit with history before its 91-day window),
//! and one pulled under `--namespace` from a registry on loopback.

use super::*;

/// `patchgrade_image_cache_{hits,misses}_total` by tier: (hits, misses).
fn lookups(srv: &Server) -> std::collections::BTreeMap<String, (u64, u64)> {
    let text = srv.call("GET", "/metrics", None).body;
    let mut by_tier = std::collections::BTreeMap::new();
    for line in text.as_str().unwrap().lines() {
        for (prefix, hit) in [
            ("patchgrade_image_cache_hits_total{tier=\"", true),
            ("patchgrade_image_cache_misses_total{tier=\"", false),
        ] {
            let Some(rest) = line.strip_prefix(prefix) else {
                continue;
            };
            let (tier, n) = rest.split_once("\"} ").unwrap();
            let n: u64 = n.parse().unwrap();
            let e: &mut (u64, u64) = by_tier.entry(tier.to_string()).or_default();
            if hit {
                e.0 = n;
            } else {
                e.1 = n;
            }
        }
    }
    by_tier
}

fn git(dir: &std::path::Path, args: &[&str], date: Option<i64>) -> String {
    let mut c = Command::new("git");
    c.args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir);
    if let Some(t) = date {
        let d = format!("@{t} +0000");
        c.env("GIT_AUTHOR_DATE", &d).env("GIT_COMMITTER_DATE", &d);
    }
    let out = c.output().expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Images this test made, removed at its end (pass or fail).
struct Made(Vec<String>);

impl Drop for Made {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("docker").args(["rmi", name]).output();
        }
    }
}

fn docker_ok(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("docker");
    assert!(out.status.success(), "docker {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn docker_serve_counts_delta_and_namespace_instance_images() {
    if !docker_ready("docker_serve_counts_delta_and_namespace_instance_images") {
        return;
    }
    let _engine = crate::server::one_on_the_engine();
    let w = Widgets::new(UNITTEST_SPEC, &[]);
    // The fixture's commit dated 200 days back, and the base a commit of
    // now on it: its instance image is a delta over the older one's
    // snapshot.
    let repo = w.sb.mirrors().join("acme__widgets");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    git(
        &repo,
        &["commit", "-q", "--amend", "--no-edit"],
        Some(now - 200 * 86400),
    );
    std::fs::write(repo.join("NOTES"), "notes\n").unwrap();
    git(&repo, &["add", "NOTES"], None);
    git(&repo, &["commit", "-q", "-m", "base"], Some(now));
    let base = git(&repo, &["rev-parse", "HEAD"], None);
    let iid = format!("w-delta{}", std::process::id());
    let row = common::instance(
        &iid,
        "acme/widgets",
        &base,
        &w.gold,
        &w.test_patch,
        &[common::widgets::F2P],
        &[common::widgets::P2P],
    );
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let docker = ["--backend", "docker", "--base-image", "none"];

    // Two evaluations of one instance: two lookups of its (delta) instance
    // image, the second a hit.
    let mut srv = Server::launch(&w.sb, &docker, &[]);
    let gold = srv.wait(&id(&srv.submit(&item(&iid, &w.gold))));
    assert_eq!(gold["outcome"], "resolved", "{gold}");
    let wrong = srv.wait(&id(&srv.submit(&item(&iid, &w.wrong))));
    assert_eq!(wrong["outcome"], "unresolved", "{wrong}");
    let image = common::image_of(&gold["record"]);
    let mut made = Made(vec![image.clone()]);
    let ancestors = common::tagged_ancestors(&image);
    assert!(
        ancestors.iter().any(|n| n.starts_with("patchgrade.snap.")),
        "{image} is a delta over a snapshot: {ancestors:?}"
    );
    let (hits, misses) = lookups(&srv)["instance"];
    assert_eq!((hits + misses, hits >= 1), (2, true), "{:?}", lookups(&srv));
    srv.terminate(0);
    drop(srv);

    // The same image under --namespace in a registry: pulled on the first
    // lookup (a miss), found on the second (a hit); no other tier looked up.
    let Some(registry) = common::LoopbackRegistry::start(&w.sb.path().join("registry")) else {
        return;
    };
    let ns = format!("127.0.0.1:{}/pgtest", registry.port);
    let arch = match docker_ok(&["version", "--format", "{{.Server.Arch}}"]).as_str() {
        "amd64" => "x86_64".to_string(),
        other => other.to_string(),
    };
    let remote = format!("{ns}/sweb.eval.{arch}.{iid}:latest");
    made.0.push(remote.clone());
    docker_ok(&["tag", &image, &remote]);
    docker_ok(&["push", &remote]);
    docker_ok(&["rmi", &remote]);
    let namespace = [&docker[..], &["--namespace", &ns, "--cache-level", "env"]].concat();
    let mut srv = Server::launch(&w.sb, &namespace, &[]);
    // Other patch texts than above: other evaluations.
    for patch in [format!("{}\n", w.gold), format!("{}\n", w.wrong)] {
        let done = srv.wait(&id(&srv.submit(&item(&iid, &patch))));
        assert_eq!(done["state"], "finished", "{done}");
        let env = done["record"]["environment"].as_str().unwrap_or("");
        assert!(env.contains(&remote), "{done}");
    }
    let counted = lookups(&srv);
    assert_eq!(counted["instance"], (1, 1), "{counted:?}");
    assert_eq!((counted["base"], counted["env"]), ((0, 0), (0, 0)));
    srv.terminate(0);
    // --cache-level env removed the pulled image.
    let left = Command::new("docker")
        .args(["image", "inspect", &remote])
        .output()
        .unwrap();
    assert!(
        !left.status.success(),
        "{remote} left after --cache-level env"
    );
}
