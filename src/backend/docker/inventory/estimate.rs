//! What a cold run of a dataset would build, before it starts: per
//! instance, whether its image is in the engine, and if not what building
//! it and its missing parents took when they were last built here.
//!
//! The images are matched, not computed: an instance image's tag is a hash
//! of its env's tag, which needs the mirrors read and the interpreter
//! chosen (what a run does), so an instance is warm when the engine holds
//! an image of its repository (`patchgrade.eval.<arch>.<id>`) under any
//! tag. Its parents are the chain its last recorded build came `FROM`
//! (else, the latest recorded build of its repository's instances), each
//! needed unless the engine holds that exact name. A spec changed since
//! makes new tags this cannot see. Nothing recorded is `None` ("unknown"),
//! never a guess.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use super::super::images::name_part;
use super::super::images::plans::instance_repository;
use super::super::shelf::Shelved;
use super::builds::Builds;
use super::{repo_key, repository, Held, Kind};

/// One instance of the dataset.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub id: String,
    /// `owner/name`.
    pub repo: String,
}

/// Where an instance's estimated build seconds come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Its image is in the engine: nothing to build.
    Warm,
    /// Its image is on the shelf over a parent the engine holds: loaded,
    /// not built.
    Shelved,
    /// Its own last recorded build.
    Own,
    /// The mean of the latest builds of its repository's other instances.
    Repository,
    /// Its repository's recorded builds all failed: no time to go by.
    Failed,
    /// Nothing recorded for its repository.
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstanceNeed {
    pub id: String,
    /// `owner__name`.
    pub repo: String,
    /// The engine's image of it, when warm.
    pub image: Option<String>,
    pub basis: Basis,
    /// Build seconds of its instance image (0 when warm).
    pub seconds: Option<f64>,
    /// Disk its image would add: the mean own size of its repository's
    /// instance images in the engine.
    pub bytes: Option<u64>,
    /// Its tests' seconds last time (`<cache>/durations.json`).
    pub tests: Option<f64>,
}

/// A parent image (env, snapshot, python, toolchain, base, root) some cold
/// instances need and the engine lacks.
#[derive(Debug, Clone, Serialize)]
pub struct ParentNeed {
    pub name: String,
    pub kind: Kind,
    pub seconds: Option<f64>,
    /// The own size of an image of the same repository in the engine.
    pub bytes: Option<u64>,
    /// The repository whose instances asked first (its row counts it).
    pub first_repo: String,
}

/// One repository's line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RepoPlan {
    pub repo: String,
    pub instances: usize,
    /// Nothing to build: in the engine, or on the shelf (`shelved` of them).
    pub warm: usize,
    pub shelved: usize,
    pub cold: usize,
    /// Seconds of its cold instance images and of the parents counted
    /// here; `unknown` of them have no record.
    pub build_seconds: f64,
    pub unknown_seconds: usize,
    pub bytes: u64,
    pub unknown_bytes: usize,
    pub parents: usize,
    /// Cold instances with no recorded chain: their parents are unknown.
    pub unknown_parents: usize,
    pub tests_seconds: f64,
    pub unknown_tests: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ColdPlan {
    pub start: Start,
    pub instances: Vec<InstanceNeed>,
    pub parents: Vec<ParentNeed>,
    pub repos: Vec<RepoPlan>,
    /// The sum of the rows.
    pub total: RepoPlan,
}

/// `name_part(instance id)` (how instance images spell it) to its
/// repository key, for [`super::repo_of`].
pub fn instance_names(wanted: &[Wanted]) -> HashMap<String, String> {
    wanted
        .iter()
        .map(|w| (name_part(&w.id), repo_key(&w.repo)))
        .collect()
}

/// What a run starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// The engine as it is: its images are warm.
    Engine,
    /// An empty engine (the cold start): everything is built; the
    /// engine's images still give the sizes.
    Empty,
}

/// The plan for `wanted` from `start`, with the engine holding `held`, the
/// shelf holding `shelved` and the builds recorded; `tests` gives an
/// instance's last test seconds.
pub fn estimate(
    wanted: &[Wanted],
    start: Start,
    held: &[Held],
    shelved: &[Shelved],
    builds: &Builds,
    tests: impl Fn(&str) -> Option<f64>,
) -> ColdPlan {
    let names: HashSet<&str> = match start {
        Start::Engine => held.iter().map(|h| h.name.as_str()).collect(),
        Start::Empty => HashSet::new(),
    };
    let by_repository: BTreeMap<&str, &Held> =
        held.iter().map(|h| (repository(&h.name), h)).collect();
    let mut instances = Vec::new();
    let mut parents: BTreeMap<String, ParentNeed> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut rows: BTreeMap<String, RepoPlan> = BTreeMap::new();
    for w in wanted {
        let repo = repo_key(&w.repo);
        if !rows.contains_key(&repo) {
            order.push(repo.clone());
        }
        let row = rows.entry(repo.clone()).or_insert_with(|| RepoPlan {
            repo: repo.clone(),
            ..RepoPlan::default()
        });
        row.instances += 1;
        match tests(&w.id) {
            Some(s) => row.tests_seconds += s,
            None => row.unknown_tests += 1,
        }
        let own_repository = instance_repository(&w.id);
        let warm = match start {
            Start::Engine => by_repository.get(own_repository.as_str()),
            Start::Empty => None,
        };
        // Else loadable from the shelf: its parent is in the engine as it was.
        let on_shelf = || {
            shelved.iter().find(|s| {
                repository(&s.name) == own_repository && names.contains(s.parent.as_str())
            })
        };
        let found = match warm {
            Some(h) => Some((h.name.clone(), Basis::Warm)),
            None => on_shelf().map(|s| (s.name.clone(), Basis::Shelved)),
        };
        if let Some((image, basis)) = found {
            row.warm += 1;
            row.shelved += usize::from(basis == Basis::Shelved);
            instances.push(InstanceNeed {
                id: w.id.clone(),
                repo,
                image: Some(image),
                basis,
                seconds: Some(0.0),
                bytes: Some(0),
                tests: tests(&w.id),
            });
            continue;
        }
        row.cold += 1;
        let siblings = builds.instances_of(&repo);
        let own = builds.latest_of_repository(&own_repository);
        let (basis, seconds) = match own {
            Some(b) => (Basis::Own, Some(b.seconds)),
            None if !siblings.is_empty() => (
                Basis::Repository,
                Some(siblings.iter().map(|b| b.seconds).sum::<f64>() / siblings.len() as f64),
            ),
            None if builds.failed_instances_of(&repo) > 0 => (Basis::Failed, None),
            None => (Basis::Unknown, None),
        };
        let sizes: Vec<u64> = held
            .iter()
            .filter(|h| h.kind == Kind::Instance && h.repo.as_deref() == Some(&repo))
            .map(|h| h.own)
            .collect();
        let bytes = (!sizes.is_empty()).then(|| sizes.iter().sum::<u64>() / sizes.len() as u64);
        match seconds {
            Some(s) => row.build_seconds += s,
            None => row.unknown_seconds += 1,
        }
        match bytes {
            Some(b) => row.bytes += b,
            None => row.unknown_bytes += 1,
        }
        // The chain its build (or its repository's latest) came from.
        let template = own.or_else(|| siblings.iter().max_by_key(|b| b.when).copied());
        let mut next = match template {
            Some(b) => b.parent.clone(),
            None => {
                row.unknown_parents += 1;
                None
            }
        };
        while let Some(p) = next.take() {
            let Some((kind, _)) = Kind::of(&p) else { break };
            if names.contains(p.as_str()) {
                break;
            }
            let recorded = builds.by_name.get(&p);
            // Built under another log root: the engine's layers still say
            // what it is built on.
            next = recorded
                .and_then(|b| b.parent.clone())
                .or_else(|| held_parent(held, &p));
            if parents.contains_key(&p) {
                // Its chain was walked for an earlier instance.
                break;
            }
            let seconds = recorded.filter(|b| !b.failed).map(|b| b.seconds);
            let bytes = by_repository.get(repository(&p)).map(|h| h.own);
            row.parents += 1;
            match seconds {
                Some(s) => row.build_seconds += s,
                None => row.unknown_seconds += 1,
            }
            match bytes {
                Some(b) => row.bytes += b,
                None => row.unknown_bytes += 1,
            }
            parents.insert(
                p.clone(),
                ParentNeed {
                    name: p,
                    kind,
                    seconds,
                    bytes,
                    first_repo: repo.clone(),
                },
            );
        }
        instances.push(InstanceNeed {
            id: w.id.clone(),
            repo,
            image: None,
            basis,
            seconds,
            bytes,
            tests: tests(&w.id),
        });
    }
    let repos: Vec<RepoPlan> = order.iter().filter_map(|r| rows.remove(r)).collect();
    let mut total = RepoPlan {
        repo: "total".into(),
        ..RepoPlan::default()
    };
    for r in &repos {
        total.instances += r.instances;
        total.warm += r.warm;
        total.shelved += r.shelved;
        total.cold += r.cold;
        total.build_seconds += r.build_seconds;
        total.unknown_seconds += r.unknown_seconds;
        total.bytes += r.bytes;
        total.unknown_bytes += r.unknown_bytes;
        total.parents += r.parents;
        total.unknown_parents += r.unknown_parents;
        total.tests_seconds += r.tests_seconds;
        total.unknown_tests += r.unknown_tests;
    }
    let mut parents: Vec<ParentNeed> = parents.into_values().collect();
    parents.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    ColdPlan {
        start,
        instances,
        parents,
        repos,
        total,
    }
}

/// The held image `name` is built on: the one with the most layers that
/// are a proper prefix of its own.
fn held_parent(held: &[Held], name: &str) -> Option<String> {
    let me = held.iter().find(|h| h.name == name)?;
    held.iter()
        .filter(|p| p.layers.len() < me.layers.len() && me.layers.starts_with(&p.layers))
        .max_by_key(|p| p.layers.len())
        .map(|p| p.name.clone())
}

/// The repositories with no successful build recorded (each with
/// [`Basis::Unknown`] or [`Basis::Failed`]), for the output's note.
pub fn unknown_repos(plan: &ColdPlan) -> BTreeMap<&str, Basis> {
    let known: BTreeSet<&str> = plan
        .instances
        .iter()
        .filter(|i| !matches!(i.basis, Basis::Unknown | Basis::Failed))
        .map(|i| i.repo.as_str())
        .collect();
    plan.instances
        .iter()
        .filter(|i| !known.contains(i.repo.as_str()))
        .map(|i| (i.repo.as_str(), i.basis))
        .collect()
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
