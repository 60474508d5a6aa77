//! A spec's `git_sources` in the env image: what a build fetches by git URL
//! (Cargo's git dependencies on GitHub, not reachable from the images here)
//! served from the mirrors instead.
//!
//! Each source's history up to its commit goes into the build context as a
//! pack; the env image's setup makes a bare repository of it under
//! [`GIT_SOURCES_DIR`] and a system-wide `url.<file>.insteadOf <url>`, and
//! cargo is told to fetch with the git command line (which honours that
//! rule). The lock file stays what the repository wrote: the dependency's
//! URL and commit are the same, only where git reads them from changes.

use git2::{Oid, Repository};

use crate::spec::{GitSource, GIT_SOURCES_DIR};

use crate::script::quote;

/// One git source, read from its mirror.
#[derive(Debug, Clone)]
pub struct GitPack {
    /// The spec's name for it: the served repository's folder.
    pub name: String,
    pub url: String,
    pub commit: Oid,
    /// The branch pointed at `commit` (`patchgrade` when the spec names
    /// none).
    pub branch: String,
    /// Every object reachable from `commit`.
    pub pack: Vec<u8>,
}

/// The branch of a served repository whose spec names none.
pub const DEFAULT_BRANCH: &str = "patchgrade";

impl GitPack {
    /// Its pack's path in the build context.
    pub fn context_path(&self) -> String {
        format!("git/{}.pack", self.name)
    }

    /// Where the env image serves it.
    pub fn served_at(&self) -> String {
        format!("{GIT_SOURCES_DIR}/{}", self.name)
    }
}

/// A pack of every commit, tree and blob reachable from `commit`: a
/// fetch by commit id or by branch finds all it walks. The same history
/// gives the same bytes (one thread), so the env image's tag is stable.
pub fn history_pack(repo: &Repository, commit: Oid) -> Result<Vec<u8>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.push(commit)?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let mut pb = repo.packbuilder()?;
    pb.set_threads(1);
    pb.insert_walk(&mut walk)?;
    let mut buf = git2::Buf::new();
    pb.write_buf(&mut buf)?;
    Ok(buf.to_vec())
}

/// The spec's git source `name` read from its mirror `repo`, at `commit`.
pub fn read(
    repo: &Repository,
    name: &str,
    src: &GitSource,
    commit: Oid,
) -> Result<GitPack, git2::Error> {
    Ok(GitPack {
        name: name.to_string(),
        url: src.url.clone(),
        commit,
        branch: src.branch.clone().unwrap_or_else(|| DEFAULT_BRANCH.into()),
        pack: history_pack(repo, commit)?,
    })
}

/// The env setup script's lines that serve `packs`, read from
/// `context_dir` (where the build context is copied).
pub fn setup_lines(packs: &[GitPack], context_dir: &str) -> String {
    let mut s = String::new();
    for p in packs {
        let dir = p.served_at();
        let branch = format!("refs/heads/{}", p.branch);
        s.push_str(&format!(
            "git init -q --bare {d}\n\
             git -C {d} index-pack --stdin < {ctx}/{pack} > /dev/null\n\
             git -C {d} update-ref {b} {c}\n\
             git -C {d} symbolic-ref HEAD {b}\n\
             git -C {d} config uploadpack.allowAnySHA1InWant true\n\
             git config --system {rule} {url}\n",
            d = quote(&dir),
            ctx = context_dir,
            pack = quote(&p.context_path()),
            b = quote(&branch),
            c = p.commit,
            // A URL in a config key needs no quoting beyond the shell's.
            rule = quote(&format!("url.file://{dir}.insteadOf")),
            url = quote(&p.url),
        ));
    }
    s
}

/// The Dockerfile line an env image with git sources ends with: cargo's
/// own git client ignores `insteadOf`; the command line honours it.
pub const CARGO_GIT_CLI: &str = "ENV CARGO_NET_GIT_FETCH_WITH_CLI=true";

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn commit_file(repo: &Repository, name: &str, text: &str, parent: Option<Oid>) -> Oid {
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert(name, blob, 0o100644).unwrap();
        let tree = repo.find_tree(tb.write().unwrap()).unwrap();
        let sig = git2::Signature::new("t", "t@example.com", &git2::Time::new(1, 0)).unwrap();
        let parents: Vec<git2::Commit> = parent
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(None, &sig, &sig, name, &tree, &refs).unwrap()
    }

    fn git(args: &[&str], home: &std::path::Path) -> std::process::Output {
        Command::new("git")
            .args(args)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .output()
            .expect("git runs")
    }

    /// The setup lines, run with real git (the user's config standing in
    /// for the system's), serve the history: a clone of the GitHub URL gets
    /// the pinned commit and not what came after it.
    #[test]
    fn the_served_repository_answers_for_the_url() {
        let d = tempfile::tempdir().unwrap();
        let mirror = Repository::init_bare(d.path().join("m.git")).unwrap();
        let first = commit_file(&mirror, "a.txt", "one", None);
        let pinned = commit_file(&mirror, "b.txt", "two", Some(first));
        let later = commit_file(&mirror, "c.txt", "three", Some(pinned));
        let pack = history_pack(&mirror, pinned).unwrap();
        assert_eq!(
            pack,
            history_pack(&mirror, pinned).unwrap(),
            "a stable pack"
        );
        let served = d.path().join("served");
        let p = GitPack {
            name: "dep".into(),
            url: "https://github.com/o/dep.git".into(),
            commit: pinned,
            branch: "main".into(),
            pack,
        };
        std::fs::create_dir_all(d.path().join("ctx/git")).unwrap();
        std::fs::write(d.path().join("ctx").join(p.context_path()), &p.pack).unwrap();
        let script = setup_lines(
            std::slice::from_ref(&p),
            &d.path().join("ctx").display().to_string(),
        )
        .replace(GIT_SOURCES_DIR, &served.display().to_string())
        .replace("git config --system", "git config --global");
        let home = d.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let out = Command::new("bash")
            .args(["-euc", &script])
            .env("HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let clone = d.path().join("clone");
        let out = git(
            &[
                "clone",
                "-q",
                "--branch",
                "main",
                &p.url,
                &clone.display().to_string(),
            ],
            &home,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let head = git(
            &["-C", &clone.display().to_string(), "rev-parse", "HEAD"],
            &home,
        );
        assert_eq!(
            String::from_utf8_lossy(&head.stdout).trim(),
            pinned.to_string()
        );
        // Each commit's tree holds its one file.
        assert!(clone.join("b.txt").exists());
        assert!(!clone.join("c.txt").exists(), "{later} is not served");
        // A fetch by commit id, as cargo does for a locked revision.
        let bare = d.path().join("byid.git");
        assert!(git(
            &["init", "-q", "--bare", &bare.display().to_string()],
            &home
        )
        .status
        .success());
        let out = git(
            &[
                "-C",
                &bare.display().to_string(),
                "fetch",
                "-q",
                &p.url,
                &format!("+{first}:refs/commit/{first}"),
            ],
            &home,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
