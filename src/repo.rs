//! Repositories: one bare mirror per repo in the cache, and checkouts of a
//! base commit that carry no history.
//!
//! The reference harness clones the whole repository into the image, so a
//! candidate (or its tests) can read commits newer than the base, including
//! the fix itself. Here the base tree is copied object by object into a fresh
//! repository whose only commit is that tree: nothing else is reachable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use git2::{ObjectType, Oid, Repository, Signature, Time};

/// Caps how much of the mirrors' pack files libgit2 keeps mapped. Packs are
/// read through mmap windows, which count in the process's resident memory:
/// building one django instance image mapped 93 MB of its pack (more than
/// everything else together). Small windows under a low cap bound it, at the
/// cost of remapping (the pages stay in the page cache). Call before any
/// repository is opened; process-wide.
pub fn limit_pack_windows() {
    // SAFETY: libgit2's global options; called once, before any other
    // thread uses libgit2.
    unsafe {
        let _ = git2::opts::set_mwindow_size(PACK_WINDOW);
        let _ = git2::opts::set_mwindow_mapped_limit(PACK_WINDOWS_MAPPED);
    }
}

const PACK_WINDOW: usize = 4 << 20;
const PACK_WINDOWS_MAPPED: usize = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("git error on {repo}: {source}")]
    Git { repo: String, source: git2::Error },
    #[error("failed to clone {url}: {source} (use --mirror-dir to point at local clones)")]
    Clone { url: String, source: git2::Error },
    #[error("commit {commit} not found in the mirror of {repo} ({mirror})")]
    CommitNotFound {
        repo: String,
        commit: String,
        mirror: PathBuf,
    },
    #[error("the mirror of {repo} lacks {path} (object {object}): it is a partial copy (snapshots leave out large files); give a complete clone with --mirror-dir")]
    MissingObject {
        repo: String,
        path: String,
        object: String,
    },
    #[error("`{command}` failed: {stderr}")]
    GitCommand { command: String, stderr: String },
    #[error("failed to import {source_file}: {reason}")]
    Import {
        source_file: PathBuf,
        reason: String,
    },
    #[error("io error at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn git_err(repo: &str) -> impl Fn(git2::Error) -> RepoError + '_ {
    move |source| RepoError::Git {
        repo: repo.to_string(),
        source,
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> RepoError + '_ {
    move |source| RepoError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Where repositories come from and where their mirrors live.
#[derive(Debug, Clone)]
pub struct RepoSources {
    /// Cache folder holding `<owner>__<name>.git` bare mirrors.
    pub cache: PathBuf,
    /// User-supplied clones: `DIR/<owner>__<name>[.git]`, bare or not.
    pub mirror_dir: Option<PathBuf>,
    /// Folders holding `<owner>__<name>.fi` git fast-export streams (datasets
    /// that ship their repositories as text, like the demo).
    pub export_dirs: Vec<PathBuf>,
    /// URL for cloning, with `{repo}` for `owner/name`.
    pub url_template: String,
}

/// `DIR/<owner>__<name>.git` or `DIR/<owner>__<name>`, whichever exists.
pub fn mirror_in(dir: &Path, repo: &str) -> Option<PathBuf> {
    let key = repo.replace('/', "__");
    [dir.join(format!("{key}.git")), dir.join(&key)]
        .into_iter()
        .find(|p| p.exists())
}

pub const DEFAULT_URL_TEMPLATE: &str = "https://github.com/{repo}.git";

/// Bare mirrors, made once per repo even when many workers ask at once.
#[derive(Debug, Clone)]
pub struct RepoCache {
    sources: RepoSources,
    locks: Arc<Mutex<HashMap<String, Arc<Mutex<()>>>>>,
}

impl RepoCache {
    pub fn new(sources: RepoSources) -> RepoCache {
        RepoCache {
            sources,
            locks: Arc::default(),
        }
    }

    fn lock_for(&self, repo: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(repo.to_string()).or_default().clone()
    }

    pub fn mirror_path(&self, repo: &str) -> PathBuf {
        self.sources
            .cache
            .join(format!("{}.git", repo.replace('/', "__")))
    }

    /// The mirror for `repo`, created or refreshed so that `commits` exist.
    pub fn ensure(&self, repo: &str, commits: &[&str]) -> Result<PathBuf, RepoError> {
        let lock = self.lock_for(repo);
        let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let path = self.mirror_path(repo);
        if path.exists() {
            let r = Repository::open_bare(&path).map_err(git_err(repo))?;
            if missing(&r, commits).is_empty() {
                return Ok(path);
            }
            // Stale mirror: fetch from the source again.
            self.fetch_into(repo, &r)?;
            return Ok(path);
        }
        std::fs::create_dir_all(&self.sources.cache).map_err(io_err(&self.sources.cache))?;
        let tmp = tempfile::Builder::new()
            .prefix(".incoming-")
            .tempdir_in(&self.sources.cache)
            .map_err(io_err(&self.sources.cache))?;
        let staging = tmp.path().join("m.git");
        let key = repo.replace('/', "__");
        if let Some(fi) = self
            .sources
            .export_dirs
            .iter()
            .map(|d| d.join(format!("{key}.fi")))
            .find(|p| p.is_file())
        {
            import_fast_export(&fi, &staging)?;
        } else if let Some(src) = self.local_source(repo) {
            // git's own local clone copies (or hardlinks) the packs without
            // walking every object, so it also takes partial clones whose
            // large blobs are absent; libgit2's local fetch refuses those.
            git_cli(&[
                "clone".as_ref(),
                "--bare".as_ref(),
                "--quiet".as_ref(),
                src.as_os_str(),
                staging.as_os_str(),
            ])?;
        } else {
            let r = Repository::init_bare(&staging).map_err(git_err(repo))?;
            self.fetch_into(repo, &r)?;
        }
        // Rename last: a crash never leaves a half-filled mirror in place.
        std::fs::rename(&staging, &path).map_err(io_err(&path))?;
        Ok(path)
    }

    fn local_source(&self, repo: &str) -> Option<PathBuf> {
        mirror_in(self.sources.mirror_dir.as_ref()?, repo)
    }

    /// A mirror of `repo` that is already here, made or fetched nothing:
    /// the cache's, else the `mirror_dir` clone it would be made from (the
    /// audit reads history; it never clones).
    pub fn existing_mirror(&self, repo: &str) -> Option<PathBuf> {
        let cached = self.mirror_path(repo);
        if cached.exists() {
            return Some(cached);
        }
        self.local_source(repo)
    }

    fn fetch_into(&self, repo: &str, r: &Repository) -> Result<(), RepoError> {
        // New tags may change what the nearest one is.
        let _ = std::fs::remove_file(self.versions_path(repo));
        if let Some(src) = self.local_source(repo) {
            let refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];
            let mut args: Vec<&std::ffi::OsStr> = vec![
                "--git-dir".as_ref(),
                r.path().as_os_str(),
                "fetch".as_ref(),
                "--quiet".as_ref(),
                src.as_os_str(),
            ];
            args.extend(refspecs.iter().map(|s| std::ffi::OsStr::new(*s)));
            return git_cli(&args);
        }
        let url = self.sources.url_template.replace("{repo}", repo);
        let mut remote = r.remote_anonymous(&url).map_err(git_err(repo))?;
        // Branches and tags only: remote-tracking refs of a non-bare source
        // are under refs/remotes and carry the same commits.
        let refspecs = [
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
            "+refs/remotes/*:refs/remotes/*",
        ];
        remote
            .fetch(&refspecs, None, None)
            .map_err(|source| RepoError::Clone {
                url: url.clone(),
                source,
            })?;
        Ok(())
    }

    /// What a checkout tells about `commit` without making one: that the
    /// mirror has it (the same error as [`RepoCache::checkout`] otherwise)
    /// and the upstream's nearest version tag.
    pub fn base_version(&self, repo: &str, commit: &str) -> Result<Option<String>, RepoError> {
        let mirror_path = self.mirror_path(repo);
        let mirror = Repository::open_bare(&mirror_path).map_err(git_err(repo))?;
        let base = Oid::from_str(commit)
            .ok()
            .and_then(|o| mirror.find_commit(o).ok())
            .ok_or_else(|| RepoError::CommitNotFound {
                repo: repo.to_string(),
                commit: commit.to_string(),
                mirror: mirror_path.clone(),
            })?;
        Ok(self.cached_version_tag(repo, &base))
    }

    /// `<cache>/<owner>__<name>.versions.json`: base commit -> version tag.
    fn versions_path(&self, repo: &str) -> PathBuf {
        self.sources
            .cache
            .join(format!("{}.versions.json", repo.replace('/', "__")))
    }

    /// [`version_tag`], remembered per commit in the cache: describing a
    /// commit walks the history (0.1-0.3 s on a large repository), and its
    /// answer changes only when the mirror is fetched again (which forgets
    /// them). A lost race only costs a second walk.
    fn cached_version_tag(&self, repo: &str, base: &git2::Commit) -> Option<String> {
        let path = self.versions_path(repo);
        let key = base.id().to_string();
        let mut known: std::collections::BTreeMap<String, Option<String>> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if let Some(v) = known.get(&key) {
            return v.clone();
        }
        let v = version_tag(base);
        known.insert(key, v.clone());
        if let (Ok(text), Some(dir)) = (serde_json::to_vec(&known), path.parent()) {
            if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
                if std::io::Write::write_all(&mut tmp, &text).is_ok() {
                    let _ = tmp.persist(&path);
                }
            }
        }
        v
    }

    /// Materialise `commit`'s tree at `dest` as a fresh repository with a
    /// single commit and no other refs, and check it out.
    pub fn checkout(&self, repo: &str, commit: &str, dest: &Path) -> Result<Checkout, RepoError> {
        let mirror_path = self.mirror_path(repo);
        let mirror = Repository::open_bare(&mirror_path).map_err(git_err(repo))?;
        let not_found = || RepoError::CommitNotFound {
            repo: repo.to_string(),
            commit: commit.to_string(),
            mirror: mirror_path.clone(),
        };
        let oid = Oid::from_str(commit).map_err(|_| not_found())?;
        let base = mirror.find_commit(oid).map_err(|_| not_found())?;
        let tree = base.tree().map_err(git_err(repo))?;

        std::fs::create_dir_all(dest).map_err(io_err(dest))?;
        let fresh = Repository::init(dest).map_err(git_err(repo))?;
        copy_tree(repo, &mirror, &fresh, tree.id())?;
        // Fixed identity and time: the checkout is the same bytes every time.
        let sig = Signature::new("patchgrade", "patchgrade@localhost", &Time::new(0, 0))
            .map_err(git_err(repo))?;
        let fresh_tree = fresh.find_tree(tree.id()).map_err(git_err(repo))?;
        let head = fresh
            .commit(
                Some("HEAD"),
                &sig,
                &sig,
                "patchgrade base tree",
                &fresh_tree,
                &[],
            )
            .map_err(git_err(repo))?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.force();
        fresh.checkout_head(Some(&mut co)).map_err(git_err(repo))?;
        let mut cfg = fresh.config().map_err(git_err(repo))?;
        for (k, v) in [
            ("user.name", "patchgrade"),
            ("user.email", "patchgrade@localhost"),
        ] {
            cfg.set_str(k, v).map_err(git_err(repo))?;
        }
        Ok(Checkout {
            path: dest.to_owned(),
            head: head.to_string(),
            version_tag: self.cached_version_tag(repo, &base),
        })
    }
}

impl RepoCache {
    /// Every file path in `commit`'s tree (from the mirror, no checkout).
    pub fn list_files(&self, repo: &str, commit: &str) -> Result<Vec<String>, RepoError> {
        let mirror = Repository::open_bare(self.mirror_path(repo)).map_err(git_err(repo))?;
        let tree = Oid::from_str(commit)
            .and_then(|o| mirror.find_commit(o))
            .and_then(|c| c.tree())
            .map_err(git_err(repo))?;
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Blob) {
                out.push(format!("{dir}{}", entry.name().unwrap_or("")));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(git_err(repo))?;
        Ok(out)
    }
}

/// A checked-out base tree.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub path: PathBuf,
    /// The single commit of the fresh repository (not the upstream SHA).
    pub head: String,
    /// The upstream's nearest version tag at or before the base commit
    /// ("5.0.1"), for build tools that derive the version from git tags:
    /// the checkout has none, and setuptools_scm would say 0.1.dev.
    pub version_tag: Option<String>,
}

fn version_tag(base: &git2::Commit) -> Option<String> {
    let mut opts = git2::DescribeOptions::new();
    opts.describe_tags();
    let d = base.as_object().describe(&opts).ok()?;
    let mut fmt = git2::DescribeFormatOptions::new();
    fmt.abbreviated_size(0);
    let tag = d.format(Some(&fmt)).ok()?;
    let v = tag.trim_start_matches('v');
    v.starts_with(|c: char| c.is_ascii_digit())
        .then(|| v.to_string())
}

fn missing(r: &Repository, commits: &[&str]) -> Vec<String> {
    commits
        .iter()
        .filter(|c| {
            Oid::from_str(c)
                .ok()
                .and_then(|o| r.find_commit(o).ok())
                .is_none()
        })
        .map(|c| c.to_string())
        .collect()
}

/// Copy a tree and everything under it between object databases.
fn copy_tree(repo: &str, from: &Repository, to: &Repository, tree: Oid) -> Result<(), RepoError> {
    let git = git_err(repo);
    let src = from.odb().map_err(&git)?;
    let dst = to.odb().map_err(&git)?;
    // (object, path in the tree) so that a missing object can be named.
    let mut stack = vec![(tree, String::new())];
    while let Some((id, path)) = stack.pop() {
        if dst.exists(id) {
            continue;
        }
        let obj = src.read(id).map_err(|e| {
            if e.code() == git2::ErrorCode::NotFound {
                RepoError::MissingObject {
                    repo: repo.to_string(),
                    path: path.clone(),
                    object: id.to_string(),
                }
            } else {
                git(e)
            }
        })?;
        if obj.kind() == ObjectType::Tree {
            let t = from.find_tree(id).map_err(&git)?;
            for entry in t.iter() {
                // Submodule entries point at commits of other repositories.
                if matches!(entry.kind(), Some(ObjectType::Tree | ObjectType::Blob)) {
                    let name = entry.name().unwrap_or("?");
                    let child = if path.is_empty() {
                        name.to_string()
                    } else {
                        format!("{path}/{name}")
                    };
                    stack.push((entry.id(), child));
                }
            }
        }
        dst.write(obj.kind(), obj.data()).map_err(&git)?;
    }
    Ok(())
}

/// Run the git command line (for what libgit2 does not do).
fn git_cli(args: &[&std::ffi::OsStr]) -> Result<(), RepoError> {
    let command = || {
        format!(
            "git {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    let out = Command::new("git")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| RepoError::GitCommand {
            command: command(),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(RepoError::GitCommand {
            command: command(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Turn a `git fast-export` stream into a bare repository with git's own
/// importer (libgit2 has none).
fn import_fast_export(file: &Path, dest: &Path) -> Result<(), RepoError> {
    let err = |reason: String| RepoError::Import {
        source_file: file.to_owned(),
        reason,
    };
    Repository::init_bare(dest).map_err(|e| err(e.to_string()))?;
    let input = std::fs::File::open(file).map_err(|e| err(e.to_string()))?;
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(dest)
        .args(["fast-import", "--quiet"])
        .stdin(input)
        .output()
        .map_err(|e| err(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(err(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_file(r: &Repository, name: &str, body: &str, parents: &[&git2::Commit]) -> Oid {
        std::fs::write(r.workdir().unwrap().join(name), body).unwrap();
        let mut idx = r.index().unwrap();
        idx.add_path(Path::new(name)).unwrap();
        idx.write().unwrap();
        let tree = r.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = Signature::now("t", "t@t").unwrap();
        r.commit(Some("HEAD"), &sig, &sig, name, &tree, parents)
            .unwrap()
    }

    #[test]
    fn checkout_has_one_commit_and_no_future_objects() {
        let d = tempfile::tempdir().unwrap();
        let src_dir = d.path().join("mirrors/o__r");
        let src = Repository::init(&src_dir).unwrap();
        let c1 = commit_file(&src, "a.txt", "one\n", &[]);
        let c1c = src.find_commit(c1).unwrap();
        let c2 = commit_file(&src, "b.txt", "future fix\n", &[&c1c]);
        let cache = RepoCache::new(RepoSources {
            cache: d.path().join("cache"),
            mirror_dir: Some(d.path().join("mirrors")),
            export_dirs: vec![],
            url_template: DEFAULT_URL_TEMPLATE.into(),
        });
        cache.ensure("o/r", &[&c1.to_string()]).unwrap();
        let co = cache
            .checkout("o/r", &c1.to_string(), &d.path().join("tree"))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(co.path.join("a.txt")).unwrap(),
            "one\n"
        );
        assert!(!co.path.join("b.txt").exists());
        let r = Repository::open(&co.path).unwrap();
        let mut walk = r.revwalk().unwrap();
        walk.push_head().unwrap();
        assert_eq!(walk.count(), 1);
        // The future commit's blob and the commit itself are unreachable.
        assert!(r.find_commit(c2).is_err());
        assert!(r.find_commit(c1).is_err());
        assert_eq!(r.references().unwrap().count(), 1);
        let err = cache
            .checkout(
                "o/r",
                "deadbeefdeadbeefdeadbeefdeadbeefdeadbeef",
                &d.path().join("t2"),
            )
            .unwrap_err();
        assert!(matches!(err, RepoError::CommitNotFound { .. }), "{err}");
    }
}
