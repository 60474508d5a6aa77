//! Future history: the repository the candidate ran in can reach commits
//! newer than the base commit, so the candidate could have read the fix.
//!
//! SWE-bench #465: agents ran `git log --all` and `git show <sha>` on the
//! full clones in the eval images and found the gold patch. patchgrade's own
//! checkouts hold one commit (see `repo.rs`), but candidates produced
//! elsewhere ran in repositories we do not control. This check collects every
//! starting point that can keep history alive (all references, peeled tags,
//! HEAD and the special heads such as ORIG_HEAD/FETCH_HEAD, and both sides of
//! every reflog entry, including reflogs whose ref is gone), walks every
//! commit reachable from them (minus the base and its ancestors when the base
//! is present), and reports the commits and annotated tags dated after the
//! base commit (the later of author and committer time), naming the refs and
//! reflogs that reach them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::{excerpt, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;

/// Why the history check could not run.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot open a git repository at {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: git2::Error,
    },
    #[error("git error: {0}")]
    Git(#[from] git2::Error),
    #[error("no base time: base commit {0} is not in the repository and the instance has no usable created_at")]
    NoBaseTime(String),
}

/// Heads git keeps outside `refs/` that can point at any commit.
const SPECIAL_HEADS: [&str; 8] = [
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_HEAD",
    "AUTO_MERGE",
];

/// What the walk found.
#[derive(Debug, Clone, Default)]
pub struct HistoryScan {
    /// Commits reachable from any ref or reflog (the base's ancestry aside).
    pub reachable: usize,
    /// Commits dated after the base: (id, time, summary).
    pub future_commits: Vec<(Oid, i64, String)>,
    /// Annotated tags dated after the base: (name, time).
    pub future_tags: Vec<(String, i64)>,
    /// Start points (ref names, special heads, `reflog:<name>`) whose
    /// commits are future, with those commits.
    pub sources: BTreeMap<String, Vec<Oid>>,
}

/// The later of author and committer time of `commit` in the repository at
/// `repo` (a mirror, say), or None when it is not there.
pub fn base_commit_time(repo: &Path, commit: &str) -> Option<i64> {
    let r = Repository::open(repo).ok()?;
    let c = r.find_commit(Oid::from_str(commit).ok()?).ok()?;
    Some(commit_time(&c))
}

fn commit_time(c: &git2::Commit) -> i64 {
    c.time().seconds().max(c.author().when().seconds())
}

/// The check: `base_time` if known, else the base commit's time in `repo`,
/// else the instance's `created_at` (later than the base, so fewer flags).
pub fn check(
    repo: &Path,
    base_time: Option<i64>,
    instance: &Instance,
) -> Result<Vec<Reason>, HistoryError> {
    let r = Repository::open(repo).map_err(|source| HistoryError::Open {
        path: repo.display().to_string(),
        source,
    })?;
    let base_in_repo = Oid::from_str(&instance.base_commit)
        .ok()
        .and_then(|o| r.find_commit(o).ok())
        .map(|c| commit_time(&c));
    let threshold = base_time
        .or(base_in_repo)
        .or_else(|| parse_iso8601(&instance.created_at))
        .ok_or_else(|| HistoryError::NoBaseTime(instance.base_commit.clone()))?;
    let scan = scan_repo(&r, threshold, Some(&instance.base_commit))?;
    Ok(reasons(&scan, threshold))
}

/// Scans the repository at `repo` for history after `base_time`.
pub fn scan(
    repo: &Path,
    base_time: i64,
    base_commit: Option<&str>,
) -> Result<HistoryScan, HistoryError> {
    let r = Repository::open(repo).map_err(|source| HistoryError::Open {
        path: repo.display().to_string(),
        source,
    })?;
    Ok(scan_repo(&r, base_time, base_commit)?)
}

fn scan_repo(
    r: &Repository,
    base_time: i64,
    base_commit: Option<&str>,
) -> Result<HistoryScan, git2::Error> {
    let mut out = HistoryScan::default();
    // Start points: name -> commit ids.
    let mut starts: BTreeMap<String, BTreeSet<Oid>> = BTreeMap::new();
    let add = |name: String, oid: Oid, starts: &mut BTreeMap<String, BTreeSet<Oid>>| {
        if !oid.is_zero() {
            starts.entry(name).or_default().insert(oid);
        }
    };

    let mut ref_names = BTreeSet::new();
    for reference in r.references()?.flatten() {
        let Some(name) = reference.name().map(str::to_string) else {
            continue;
        };
        ref_names.insert(name.clone());
        // An annotated tag dated after the base is itself future history.
        if let Some(oid) = reference.target() {
            if let Ok(tag) = r.find_tag(oid) {
                let when = tag.tagger().map(|s| s.when().seconds());
                if let Some(t) = when.filter(|t| *t > base_time) {
                    out.future_tags.push((name.clone(), t));
                }
            }
        }
        if let Ok(c) = reference.peel(ObjectType::Commit) {
            add(name, c.id(), &mut starts);
        }
    }
    let gitdir = r.path().to_path_buf();
    for head in SPECIAL_HEADS {
        if let Ok(text) = std::fs::read_to_string(gitdir.join(head)) {
            for oid in hex_ids(&text) {
                add(head.to_string(), oid, &mut starts);
            }
            if let Ok(reference) = r.find_reference(head) {
                if let Ok(c) = reference.peel(ObjectType::Commit) {
                    add(head.to_string(), c.id(), &mut starts);
                }
            }
        }
    }
    // Reflogs of live refs, HEAD, and any log file left behind.
    let mut log_names: BTreeSet<String> = ref_names;
    log_names.insert("HEAD".into());
    collect_log_names(&gitdir.join("logs"), String::new(), &mut log_names);
    for name in &log_names {
        let Ok(log) = r.reflog(name) else { continue };
        for e in log.iter() {
            for oid in [e.id_old(), e.id_new()] {
                add(format!("reflog:{name}"), oid, &mut starts);
            }
        }
    }

    let mut walk = r.revwalk()?;
    let mut pushed = 0;
    for oids in starts.values() {
        for oid in oids {
            // Ids of objects that are gone (pruned) are skipped.
            if r.find_commit(*oid).is_ok() && walk.push(*oid).is_ok() {
                pushed += 1;
            }
        }
    }
    if let Some(base) = base_commit
        .and_then(|b| Oid::from_str(b).ok())
        .filter(|o| r.find_commit(*o).is_ok())
    {
        walk.hide(base)?;
    }
    let mut future: HashSet<Oid> = HashSet::new();
    if pushed > 0 {
        for oid in walk.flatten() {
            out.reachable += 1;
            let Ok(c) = r.find_commit(oid) else { continue };
            let t = commit_time(&c);
            if t > base_time {
                future.insert(oid);
                out.future_commits.push((
                    oid,
                    t,
                    c.summary().unwrap_or("").chars().take(120).collect(),
                ));
            }
        }
    }
    // Which start points reach future history: those whose tip is future.
    // (Dates follow ancestry closely enough that a ref with an old tip and
    // future ancestors is not worth a walk per ref; its commits are counted
    // above all the same.)
    for (name, oids) in &starts {
        let hit: Vec<Oid> = oids
            .iter()
            .filter(|o| future.contains(o))
            .copied()
            .collect();
        if !hit.is_empty() {
            out.sources.insert(name.clone(), hit);
        }
    }
    out.future_commits.sort_by_key(|(_, t, _)| *t);
    Ok(out)
}

fn collect_log_names(dir: &Path, prefix: String, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let full = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        match e.file_type() {
            Ok(t) if t.is_dir() => collect_log_names(&e.path(), full, out),
            Ok(_) => {
                out.insert(full);
            }
            Err(_) => {}
        }
    }
}

/// Every 40-hex word in `text` (FETCH_HEAD lines, say).
fn hex_ids(text: &str) -> Vec<Oid> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|w| w.len() == 40)
        .filter_map(|w| Oid::from_str(w).ok())
        .collect()
}

fn reasons(scan: &HistoryScan, base_time: i64) -> Vec<Reason> {
    if scan.future_commits.is_empty() && scan.future_tags.is_empty() {
        return Vec::new();
    }
    let mut evidence = Vec::new();
    if !scan.future_commits.is_empty() {
        let shown: Vec<String> = scan
            .future_commits
            .iter()
            .map(|(oid, t, s)| format!("{} {} {s}", &oid.to_string()[..12], iso8601(*t)))
            .collect();
        evidence.push(Evidence {
            score: Some(scan.future_commits.len() as f64),
            excerpt: Some(excerpt(shown.iter().map(String::as_str), 10)),
            ..Evidence::default()
        });
    }
    for (name, oids) in &scan.sources {
        evidence.push(Evidence {
            file: Some(name.clone()),
            score: Some(oids.len() as f64),
            excerpt: Some(
                oids.iter()
                    .map(|o| o.to_string()[..12].to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            ..Evidence::default()
        });
    }
    for (name, t) in &scan.future_tags {
        evidence.push(Evidence {
            file: Some(name.clone()),
            excerpt: Some(format!("annotated tag dated {}", iso8601(*t))),
            ..Evidence::default()
        });
    }
    let names: Vec<&str> = scan.sources.keys().map(String::as_str).collect();
    vec![Reason {
        kind: ReasonKind::FutureHistory,
        message: format!(
            "the repository reaches {} commit(s) and {} annotated tag(s) dated after the base commit ({}){}",
            scan.future_commits.len(),
            scan.future_tags.len(),
            iso8601(base_time),
            if names.is_empty() {
                String::new()
            } else {
                format!(" via {}", names.join(", "))
            }
        ),
        evidence,
    }]
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// `2022-01-04T15:09:43Z` (a `+hh:mm` offset and fractions are accepted).
pub fn parse_iso8601(s: &str) -> Option<i64> {
    let s = s.trim();
    let num = |a: usize, b: usize| -> Option<i64> { s.get(a..b)?.parse().ok() };
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, se) = if s.len() >= 19 {
        (num(11, 13)?, num(14, 16)?, num(17, 19)?)
    } else {
        (0, 0, 0)
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let mut t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
    // Offset after the seconds (and any fraction).
    let rest = s.get(19..).unwrap_or("");
    let rest = rest.trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
    if let Some(sign) = rest.chars().next().filter(|c| *c == '+' || *c == '-') {
        let digits: String = rest[1..].chars().filter(char::is_ascii_digit).collect();
        if digits.len() >= 4 {
            let oh: i64 = digits[..2].parse().ok()?;
            let om: i64 = digits[2..4].parse().ok()?;
            let off = oh * 3600 + om * 60;
            t -= if sign == '+' { off } else { -off };
        }
    }
    Some(t)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn iso8601(t: i64) -> String {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2022-01-04T15:09:43Z",
            "2000-02-29T23:59:59Z",
        ] {
            assert_eq!(iso8601(parse_iso8601(s).unwrap()), s);
        }
        assert_eq!(parse_iso8601("2022-01-04T15:09:43Z"), Some(1641308983));
        assert_eq!(
            parse_iso8601("2022-01-04T17:09:43+02:00"),
            parse_iso8601("2022-01-04T15:09:43Z")
        );
        assert_eq!(parse_iso8601(""), None);
        assert_eq!(parse_iso8601("garbage"), None);
    }
}

/// The eval script's probe line: `>>>>> History: N newer commits, M newer tags`
/// (see harness-scripts/eval.sh.tmpl). It is printed from inside the
/// environment the tests ran in, so it covers prebuilt images whose
/// repository patchgrade never sees (`--namespace`).
pub const PROBE_MARKER: &str = ">>>>> History: ";

/// Future history reported by the probe line of a test log, if any.
pub fn check_log(log: &str) -> Option<Reason> {
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(PROBE_MARKER))?;
    let mut nums = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>().ok());
    let commits = nums.next()??;
    let tags = nums.next()??;
    (commits > 0 || tags > 0).then(|| Reason {
        kind: ReasonKind::FutureHistory,
        message: format!(
            "the environment the tests ran in holds {commits} commit(s) and {tags} tag(s) newer than the base commit"
        ),
        evidence: vec![Evidence { excerpt: Some(format!("{PROBE_MARKER}{line}")), ..Evidence::default() }],
    })
}

#[cfg(test)]
mod probe_tests {
    use super::*;

    #[test]
    fn probe_line_flags_newer_history_only() {
        assert!(check_log("x\n>>>>> History: 0 newer commits, 0 newer tags\n").is_none());
        let r = check_log(">>>>> History: 12 newer commits, 1 newer tags\n").unwrap();
        assert_eq!(r.kind, ReasonKind::FutureHistory);
        assert!(r.message.contains("12 commit"));
        assert!(check_log("no probe here").is_none());
    }
}
