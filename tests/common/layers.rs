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

/// A mirror of the widgets repository in `repo` (created): buggy code,
/// one test, no commit yet. The snapshot tests commit over it.
pub fn widgets_mirror(repo: &std::path::Path) {
    use super::cext::run;
    use super::widgets::{CORE_BUGGY, TESTS_BASE};
    std::fs::create_dir_all(repo.join("widgets")).unwrap();
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    run(repo, "git", &["init", "-q"], &[]);
    run(repo, "git", &["config", "user.name", "t"], &[]);
    run(repo, "git", &["config", "user.email", "t@t"], &[]);
    std::fs::write(repo.join("widgets/__init__.py"), "").unwrap();
    std::fs::write(repo.join("widgets/core.py"), CORE_BUGGY).unwrap();
    std::fs::write(repo.join("tests/__init__.py"), "").unwrap();
    std::fs::write(repo.join("tests/test_core.py"), TESTS_BASE).unwrap();
}

/// A tree with what [`EVERY_CHANGE`] changes: folders, a file, a symlink,
/// a script.
pub const EVERY_KIND: &str =
    "mkdir -p old/deep && echo a > old/deep/a.txt && echo b > old/b.txt && echo f > data && \
     echo s > run.sh && ln -s run.sh link && echo keep > keep.txt && echo gone > gone.txt && \
     mkdir d2f && echo y > d2f/y";

/// Every way a tree can change, over [`EVERY_KIND`]: folders and a file
/// gone, a file becoming a folder, a folder a file, a symlink a file, a
/// mode, an addition, a modification.
pub const EVERY_CHANGE: &str =
    "rm -r old gone.txt && rm data && mkdir data && echo x > data/x && chmod +x run.sh && \
     rm link && echo 'a file now' > link && echo new > new.txt && echo changed > keep.txt && \
     rm -r d2f && echo 'a file now' > d2f";

/// The widgets fix and the test patch adding `test_high`, against `repo`.
pub fn widgets_patches(repo: &std::path::Path) -> (String, String) {
    use super::cext::diff_of_write;
    use super::widgets::{CORE_FIXED, HIGH, TESTS_BASE};
    let gold = diff_of_write(repo, "widgets/core.py", CORE_FIXED);
    let tests = diff_of_write(repo, "tests/test_core.py", &format!("{TESTS_BASE}\n{HIGH}"));
    (gold, tests)
}
