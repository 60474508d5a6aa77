//! The candidate's test machinery set aside before the tests run
//! (`script::machinery` decides; this reads the texts it decides on): the
//! base text from the mirror, the candidate's from the in-memory apply or
//! the checkout, gold's by applying the gold patch in memory.

use std::path::Path;

use git2::{Oid, Repository};

use crate::backend::Workspace;
use crate::patch::{apply_in_tree, ChangeKind, FileChange, Patch};
use crate::script::machinery::{
    self, restore_sections, MachineryAction, MachineryKind, Sections, SetAside,
};

/// A file's text at `commit` in the bare mirror; None when absent or not
/// UTF-8.
fn text_at(repo: &Repository, commit: &str, path: &str) -> Option<String> {
    let tree = repo
        .find_commit(Oid::from_str(commit).ok()?)
        .ok()?
        .tree()
        .ok()?;
    let blob = tree.get_path(Path::new(path)).ok()?.to_object(repo).ok()?;
    String::from_utf8(blob.as_blob()?.content().to_vec()).ok()
}

/// The candidate's text of `path` in the workspace: the in-memory apply's,
/// else the checkout's; None when deleted.
fn candidate_text(ws: &Workspace, path: &str, base: Option<&str>) -> Option<String> {
    match &ws.applied {
        Some(a) => {
            if a.delete.iter().any(|d| d == path) {
                return None;
            }
            match a.write.iter().find(|(p, _, _)| p == path) {
                Some((_, bytes, _)) => String::from_utf8(bytes.clone()).ok(),
                None => base.map(str::to_string),
            }
        }
        None => std::fs::read_to_string(ws.tree.join(path)).ok(),
    }
}

/// What the eval script does with the candidate's machinery: the records
/// and the commands (empty when the candidate touches none).
pub(super) fn set_aside(
    mirror: &Path,
    base_commit: &str,
    gold_patch: &str,
    candidate: &[FileChange],
    test_changes: &[FileChange],
    ws: &Workspace,
) -> (Vec<SetAside>, String) {
    let picked = machinery::candidates(candidate, test_changes);
    if picked.is_empty() {
        return (Vec::new(), String::new());
    }
    let repo = Repository::open_bare(mirror).ok();
    let base_of = |p: &str| repo.as_ref().and_then(|r| text_at(r, base_commit, p));
    let gold = Patch::parse(gold_patch).ok();
    let gold_tree = gold
        .as_ref()
        .filter(|g| {
            g.files
                .iter()
                .any(|f| picked.iter().any(|(c, _)| c.path == f.path))
        })
        .and_then(|g| apply_in_tree(mirror, base_commit, g));
    let gold_text = |p: &str, base: Option<&str>| match &gold_tree {
        Some(t) if t.delete.iter().any(|d| d == p) => None,
        Some(t) => t
            .write
            .iter()
            .find(|(w, _, _)| w == p)
            .and_then(|(_, b, _)| String::from_utf8(b.clone()).ok())
            .or(base.map(str::to_string)),
        None => base.map(str::to_string),
    };
    let mut decided = Vec::new();
    let mut spliced = Vec::new();
    for (c, kind) in picked {
        let path = c.path.as_str();
        let base = base_of(path);
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut entry = SetAside {
            path: path.to_string(),
            kind,
            action: MachineryAction::Restored,
            sections: Vec::new(),
        };
        let created = matches!(c.kind, ChangeKind::Added | ChangeKind::Copied { .. });
        if gold_tree.is_some()
            && machinery::gold_changes(
                path,
                base.as_deref(),
                gold_text(path, base.as_deref()).as_deref(),
            )
        {
            entry.action = MachineryAction::KeptGoldChangesIt;
        } else if kind != MachineryKind::SharedConfig
            || matches!(c.kind, ChangeKind::Renamed { .. })
        {
            if created {
                entry.action = MachineryAction::Removed;
            }
        } else {
            let cand = candidate_text(ws, path, base.as_deref()).unwrap_or_default();
            match restore_sections(name, base.as_deref(), &cand) {
                Sections::Unchanged => continue,
                Sections::WholeFile if created => entry.action = MachineryAction::Removed,
                Sections::WholeFile => {}
                Sections::Restored { text, names } => {
                    entry.sections = names;
                    if created && text.trim().is_empty() {
                        entry.action = MachineryAction::Removed;
                    } else {
                        entry.action = MachineryAction::SectionsRestored;
                        spliced.push((path.to_string(), text));
                    }
                }
            }
        }
        decided.push((entry, c));
    }
    let commands = machinery::commands(&decided, &spliced, crate::script::delimiter);
    (decided.into_iter().map(|(s, _)| s).collect(), commands)
}
