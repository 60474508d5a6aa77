//! Applying a candidate to a base tree in the object database, with no
//! checkout: what the docker backend needs when the instance image already
//! holds the tree. Only the clear case is decided here, a strict (libgit2)
//! apply with nothing on the way that the worktree would treat differently;
//! anything else (a refusal, a failed strict apply that the fuzzy fallback
//! may rescue, symlinks, submodules, attributes that filter content) is
//! answered `None`, and the caller applies on a checkout as before, so the
//! outcome is the same either way.

use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::apply::{align_modes_with, touched_paths};
use super::safety::MODE_SYMLINK;
use super::{normalise, read_sections, safety, Patch};

/// A candidate applied in memory: the files it leaves changed or added
/// (content and git mode) and the paths it deletes, both sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeChanges {
    pub write: Vec<(String, Vec<u8>, u32)>,
    pub delete: Vec<String>,
}

/// Words of a `.gitattributes` line that make a checkout's bytes differ
/// from the blob's (or the worktree apply read through a filter).
const FILTERING: [&str; 6] = ["text", "eol", "crlf", "filter", "ident", "encoding"];
// (`working-tree-encoding` ends with "encoding"; `binary` unsets `text`.)

/// Whether a `.gitattributes` text may give `rel` (relative to its folder)
/// an attribute that filters content. Patterns are matched as git does for
/// the simple cases (`*`, `?`, `**`; a pattern without `/` matches the file
/// name); anything else counts as a match.
fn filters(attributes: &str, rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    attributes.lines().any(|line| {
        let mut words = line.split_whitespace();
        let Some(pattern) = words.next().filter(|p| !p.starts_with('#')) else {
            return false;
        };
        let filtering = words.any(|a| {
            let a = a.trim_start_matches(['-', '!']);
            FILTERING
                .iter()
                .any(|w| a == *w || a.starts_with(&format!("{w}=")) || a.ends_with(w))
        });
        if !filtering {
            return false;
        }
        if pattern.contains(['[', '\\']) {
            return true;
        }
        match pattern.trim_start_matches('/') {
            p if !pattern.contains('/') => glob(p.as_bytes(), name.as_bytes()),
            p => glob(p.as_bytes(), rel.as_bytes()),
        }
    })
}

/// `*` and `?` within a path component, `**` across them.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) if p.get(1) == Some(&b'*') => {
            let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        (Some(b'*'), _) => {
            glob(&p[1..], s) || (s.first().is_some_and(|c| *c != b'/') && glob(p, &s[1..]))
        }
        (Some(b'?'), Some(c)) if *c != b'/' => glob(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => glob(&p[1..], &s[1..]),
        _ => false,
    }
}

/// Applies `patch` to the tree of `commit` in the bare repository at
/// `mirror`, writing nothing to it (new blobs stay in memory). `None`: not
/// decidable without a checkout (see the module's notes).
pub fn apply_in_tree(mirror: &Path, commit: &str, patch: &Patch) -> Option<TreeChanges> {
    let repo = Repository::open_bare(mirror).ok()?;
    // New blobs go to an in-memory backend: the shared mirror stays as is.
    repo.odb().ok()?.add_new_mempack_backend(1000).ok()?;
    let base = repo
        .find_commit(Oid::from_str(commit).ok()?)
        .ok()?
        .tree()
        .ok()?;
    let sections = read_sections(&patch.text).ok()?;
    safety::check_sections(&sections).ok()?;
    safety::check_git2(&normalise::emit(&sections)).ok()?;
    let symlink_section = sections.iter().any(|s| {
        [
            s.old_mode,
            s.new_mode,
            s.new_file_mode,
            s.deleted_file_mode,
            s.index_mode,
        ]
        .contains(&Some(MODE_SYMLINK))
    });
    if symlink_section {
        return None;
    }
    let mode_of = |p: &str| -> Option<u32> {
        let e = base.get_path(Path::new(p)).ok()?;
        match e.filemode() as u32 {
            0o100755 => Some(0o100755),
            m if e.kind() == Some(ObjectType::Blob) && m != MODE_SYMLINK => Some(0o100644),
            m => Some(m),
        }
    };
    let text0 = normalise::emit(&sections);
    for p in touched_paths(&sections, &text0) {
        let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
        for k in 1..=comps.len() {
            let prefix = comps[..k].join("/");
            match base.get_path(Path::new(&prefix)) {
                Ok(e) if e.kind() == Some(ObjectType::Tree) => {}
                Ok(e) if e.kind() == Some(ObjectType::Blob) && k == comps.len() => {
                    if e.filemode() as u32 == MODE_SYMLINK {
                        return None;
                    }
                }
                Ok(_) => return None, // a symlink, file or submodule on the way
                Err(_) => break,
            }
        }
        for k in 0..comps.len() {
            let attrs = if k == 0 {
                ".gitattributes".to_string()
            } else {
                format!("{}/.gitattributes", comps[..k].join("/"))
            };
            if let Ok(e) = base.get_path(Path::new(&attrs)) {
                let blob = repo.find_blob(e.id()).ok()?;
                let text = String::from_utf8_lossy(blob.content());
                if filters(&text, &comps[k..].join("/")) {
                    return None;
                }
            }
        }
    }
    let sections = align_modes_with(&sections, &mode_of);
    let text = normalise::emit(&sections);
    safety::check_sections(&sections).ok()?;
    safety::check_git2(&text).ok()?;
    let diff = git2::Diff::from_buffer(text.as_bytes()).ok()?;
    let index = repo.apply_to_tree(&base, &diff, None).ok()?;
    let changed = repo
        .diff_tree_to_index(Some(&base), Some(&index), None)
        .ok()?;
    let mut out = TreeChanges::default();
    for d in changed.deltas() {
        let old = d.old_file();
        let new = d.new_file();
        if d.status() == git2::Delta::Deleted {
            out.delete
                .push(String::from_utf8_lossy(old.path_bytes()?).into_owned());
            continue;
        }
        let mode = u32::from(new.mode());
        if !matches!(mode, 0o100644 | 0o100755) {
            return None;
        }
        let blob = repo.find_blob(new.id()).ok()?;
        out.write.push((
            String::from_utf8_lossy(new.path_bytes()?).into_owned(),
            blob.content().to_vec(),
            mode,
        ));
    }
    out.write.sort_by(|a, b| a.0.cmp(&b.0));
    out.delete.sort();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn repo_with(files: &[(&str, &str, u32)]) -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        let r = Repository::init(d.path()).unwrap();
        for (p, body, mode) in files {
            let full = d.path().join(p);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, body).unwrap();
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        let mut idx = r.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = r.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let c = r
            .commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        (d, c.to_string())
    }

    const BASE: &[(&str, &str, u32)] = &[
        ("a.py", "one\ntwo\nthree\n", 0o644),
        ("gone.py", "g\n", 0o644),
        ("bin/run", "#!/bin/sh\n", 0o755),
    ];

    #[test]
    fn same_files_as_applying_on_the_worktree() {
        let (d, commit) = repo_with(BASE);
        let patch = Patch::parse(
            "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n\
             diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n\
             diff --git a/new/n.py b/new/n.py\nnew file mode 100755\n--- /dev/null\n+++ b/new/n.py\n@@ -0,0 +1 @@\n+n\n\
             diff --git a/bin/run b/bin/run\nold mode 100755\nnew mode 100644\n",
        )
        .unwrap();
        let mem = apply_in_tree(&d.path().join(".git"), &commit, &patch).expect("decidable");
        let written: Vec<&str> = mem.write.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(written, ["a.py", "bin/run", "new/n.py"]);
        assert_eq!(mem.delete, ["gone.py"]);
        // The mirror got no object of the candidate's.
        let r = Repository::open(d.path()).unwrap();
        assert!(r
            .find_blob(git2::Oid::hash_object(ObjectType::Blob, b"n\n").unwrap())
            .is_err());

        assert_eq!(
            crate::patch::apply(d.path(), &patch).unwrap(),
            crate::patch::ApplyStrategy::Strict
        );
        for (p, data, mode) in &mem.write {
            assert_eq!(&std::fs::read(d.path().join(p)).unwrap(), data, "{p}");
            let exec = std::fs::metadata(d.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o111;
            assert_eq!(*mode == 0o100755, exec != 0, "{p}");
        }
        assert!(!d.path().join("gone.py").exists());
    }

    #[test]
    fn what_needs_the_fuzzy_fallback_is_left_to_the_checkout() {
        let (d, commit) = repo_with(BASE);
        // Context at the wrong line: libgit2 refuses, the fuzzy applier would not.
        let patch = Patch::parse(
            "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -5,2 +5,2 @@\n two\n-three\n+THREE\n",
        )
        .unwrap();
        assert!(apply_in_tree(&d.path().join(".git"), &commit, &patch).is_none());
        assert_eq!(
            crate::patch::apply(d.path(), &patch).unwrap(),
            crate::patch::ApplyStrategy::Fuzzy
        );
        // Attributes that filter content: not decided in memory either.
        let (d, commit) = repo_with(&[
            ("a.py", "one\n", 0o644),
            (".gitattributes", "*.py text eol=crlf\n", 0o644),
        ]);
        let patch = Patch::parse(
            "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-one\n+ONE\n",
        )
        .unwrap();
        assert!(apply_in_tree(&d.path().join(".git"), &commit, &patch).is_none());
    }

    #[test]
    fn attributes_that_filter_only_where_their_pattern_matches() {
        let a = "*.py    diff=python\n*.sh    eol=lf\n# c\ndocs/**/*.txt text\n";
        assert!(!filters(a, "sympy/core/x.py"));
        assert!(filters(a, "tools/run.sh"));
        assert!(filters(a, "docs/a/b/c.txt"));
        assert!(!filters(a, "src/c.txt"));
        assert!(filters("* text=auto\n", "a/b.py"));
        assert!(!filters("*.png binary\n*.py -diff\n", "a/b.py"));
        assert!(
            filters("[ab].py text\n", "z.py"),
            "unsure counts as a match"
        );
    }
}
