//! What earlier builds took, from their logs: every build writes
//! `<logs>/build_images/<tier>/<image>/Dockerfile` and `build_image.log`,
//! the log ending in `# patchgrade: build of <image> took <s>s`
//! (`images::build`). The Dockerfile's `FROM` names the parent, so the
//! logs give each image's chain down to the root, and its seconds.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

use super::{InventoryError, Kind};

/// One recorded build.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    pub name: String,
    pub kind: Kind,
    /// The image it was built `FROM`.
    pub parent: Option<String>,
    pub seconds: f64,
    /// The log has an engine error: what it took is not what a build takes.
    pub failed: bool,
    /// When the log was last written (the latest build of a repository wins).
    pub when: SystemTime,
}

/// The recorded builds, by image name; a failed build is kept but said.
#[derive(Debug, Default, Clone)]
pub struct Builds {
    pub by_name: BTreeMap<String, Build>,
}

/// How much of a log's end is read: the last line, and the engine's error
/// just before it.
const TAIL: u64 = 16 << 10;

impl Builds {
    /// The builds recorded under `dir` (`<logs>/build_images`); none there
    /// is none recorded.
    pub fn read(dir: &Path) -> Result<Builds, InventoryError> {
        let mut out = Builds::default();
        for tier in ["base", "env", "instances"] {
            let tier_dir = dir.join(tier);
            let entries = match std::fs::read_dir(&tier_dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(InventoryError::Io {
                        path: tier_dir,
                        source,
                    })
                }
            };
            for entry in entries.flatten() {
                // One unreadable folder (a build going on) is skipped.
                if let Some(b) = read_one(&entry.path()) {
                    out.insert(b);
                }
            }
        }
        Ok(out)
    }

    /// Adds a build; of two of one name, the later stays.
    pub fn insert(&mut self, b: Build) {
        match self.by_name.get(&b.name) {
            Some(old) if old.when > b.when => {}
            _ => {
                self.by_name.insert(b.name.clone(), b);
            }
        }
    }

    /// The latest successful build of each instance image of `repo`, by
    /// repository (the newest tag of each instance).
    pub fn instances_of(&self, repo: &str) -> Vec<&Build> {
        let mut latest: BTreeMap<&str, &Build> = BTreeMap::new();
        for b in self.by_name.values() {
            if b.kind != Kind::Instance || b.failed {
                continue;
            }
            let Some((_, rest)) = Kind::of(&b.name) else {
                continue;
            };
            if super::repo_of(Kind::Instance, rest, &Default::default()).as_deref() != Some(repo) {
                continue;
            }
            let r = super::repository(&b.name);
            match latest.get(r) {
                Some(old) if old.when >= b.when => {}
                _ => {
                    latest.insert(r, b);
                }
            }
        }
        latest.into_values().collect()
    }

    /// How many failed builds of `repo`'s instance images are recorded.
    pub fn failed_instances_of(&self, repo: &str) -> usize {
        self.by_name
            .values()
            .filter(|b| b.kind == Kind::Instance && b.failed)
            .filter_map(|b| Kind::of(&b.name))
            .filter(|(_, rest)| {
                super::repo_of(Kind::Instance, rest, &Default::default()).as_deref() == Some(repo)
            })
            .count()
    }

    /// The latest successful build of an image of this repository.
    pub fn latest_of_repository(&self, repository: &str) -> Option<&Build> {
        self.by_name
            .values()
            .filter(|b| !b.failed && super::repository(&b.name) == repository)
            .max_by_key(|b| b.when)
    }
}

/// The build in one image's log folder, if it finished writing its log.
fn read_one(dir: &Path) -> Option<Build> {
    let log = dir.join("build_image.log");
    let mut f = std::fs::File::open(&log).ok()?;
    let len = f.metadata().ok()?.len();
    let when = f.metadata().ok()?.modified().ok()?;
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    let (name, seconds) = tail.lines().rev().find_map(took)?;
    let failed = tail.lines().any(|l| l.starts_with("ERROR: "));
    let parent = std::fs::read_to_string(dir.join("Dockerfile"))
        .ok()
        .and_then(|d| from_line(&d));
    let (kind, _) = Kind::of(&name)?;
    Some(Build {
        name,
        kind,
        parent,
        seconds,
        failed,
        when,
    })
}

/// The last line of a build log (`images::build` writes it, [`took`]
/// reads it back).
pub fn took_line(name: &str, seconds: f64) -> String {
    format!("# patchgrade: build of {name} took {seconds:.1}s")
}

/// `# patchgrade: build of <name> took <s>s` to its name and seconds.
pub fn took(line: &str) -> Option<(String, f64)> {
    let rest = line.trim().strip_prefix("# patchgrade: build of ")?;
    let (name, secs) = rest.rsplit_once(" took ")?;
    let secs: f64 = secs.strip_suffix('s')?.parse().ok()?;
    Some((name.to_string(), secs))
}

/// The image of a Dockerfile's first `FROM` (a root's is Debian's).
pub fn from_line(dockerfile: &str) -> Option<String> {
    dockerfile.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        let first = words.next()?;
        first
            .eq_ignore_ascii_case("FROM")
            .then(|| words.find(|w| !w.starts_with("--")))
            .flatten()
            .map(String::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_and_the_from_line() {
        assert_eq!(
            took("# patchgrade: build of patchgrade.eval.x86_64.a__b-1:abc took 4.4s"),
            Some(("patchgrade.eval.x86_64.a__b-1:abc".to_string(), 4.4))
        );
        assert_eq!(took("Step 1/3 : FROM x"), None);
        assert_eq!(took(&took_line("a:b", 2.5)), Some(("a:b".to_string(), 2.5)));
        let d = "# comment\nFROM --platform=linux/amd64 patchgrade.env.py.x86_64.bookworm:e\nRUN x\nFROM other\n";
        assert_eq!(
            from_line(d).as_deref(),
            Some("patchgrade.env.py.x86_64.bookworm:e")
        );
    }

    fn write_build(dir: &Path, tier: &str, name: &str, from: &str, log: &str) {
        let d = dir.join(tier).join(name.replace(':', "__"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("Dockerfile"), format!("FROM {from}\n")).unwrap();
        std::fs::write(d.join("build_image.log"), log).unwrap();
    }

    #[test]
    fn logs_give_seconds_parents_and_failures() {
        let t = tempfile::tempdir().unwrap();
        let env = "patchgrade.env.py3.9.x86_64.bookworm:e1";
        let ok = "patchgrade.eval.x86_64.acme__w-1:t1";
        let bad = "patchgrade.eval.x86_64.acme__w-2:t2";
        write_build(
            t.path(),
            "env",
            env,
            "patchgrade.base.py3.9.x86_64.bookworm:p",
            &format!("Step 1\n\n# patchgrade: build of {env} took 60.5s\n"),
        );
        write_build(
            t.path(),
            "instances",
            ok,
            env,
            &format!("x\n# patchgrade: build of {ok} took 4.4s\n"),
        );
        write_build(
            t.path(),
            "instances",
            bad,
            env,
            &format!("ERROR: pip failed\n\n# patchgrade: build of {bad} took 2.0s\n"),
        );
        // A build still going has no last line: not a record.
        write_build(
            t.path(),
            "instances",
            "patchgrade.eval.x86_64.acme__w-3:t",
            env,
            "Step 1\n",
        );
        let b = Builds::read(t.path()).unwrap();
        assert_eq!(b.by_name.len(), 3);
        assert_eq!(b.by_name[ok].parent.as_deref(), Some(env));
        assert_eq!(b.by_name[env].kind, Kind::Env);
        assert!(b.by_name[bad].failed);
        let of: Vec<&str> = b
            .instances_of("acme__w")
            .iter()
            .map(|b| b.name.as_str())
            .collect();
        assert_eq!(of, vec![ok]);
        assert_eq!(b.failed_instances_of("acme__w"), 1);
        assert!(Builds::read(&t.path().join("none"))
            .unwrap()
            .by_name
            .is_empty());
    }
}
