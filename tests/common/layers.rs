//! Images on the real engine by their layers: which tagged images another
//! was built on, exactly (a name pattern is not: an engine holding other
//! runs' images of the same tier matches it anyway).

use std::process::Command;

/// The layer chain of an image, bottom first; empty when it is absent.
pub fn layers(name: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .RootFS.Layers}}",
            name,
        ])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// The tagged images named `prefix*` (`name:tag`).
pub fn images(prefix: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker images failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// The tagged images named `prefix*` that `name` was built on: their
/// layers are a prefix of its own.
pub fn tagged_ancestors(name: &str, prefix: &str) -> Vec<String> {
    let own = layers(name);
    images(prefix)
        .into_iter()
        .filter(|n| {
            let l = layers(n);
            !l.is_empty() && own.starts_with(&l)
        })
        .collect()
}
