//! `patchgrade images`: what the engine holds of patchgrade's images per
//! tier and repository; with `--dataset`, what a cold run of it would
//! build (`inventory::estimate`); with `--evict`, eviction by the cache
//! budget's rule (`--dry-run`: nothing removed). Tables on stderr, the
//! whole report as JSON on stdout with `--json`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{list, load_dataset, print_json};
use crate::cli::{DatasetArg, ImagesArgs};
use crate::error::ExpectedError;
use patchgrade::backend::docker::cache::human;
use patchgrade::backend::docker::compiler_store::{Store, Usage};
use patchgrade::backend::docker::inventory::builds::Builds;
use patchgrade::backend::docker::inventory::engine::{self, EvictionPlan, Removal};
use patchgrade::backend::docker::inventory::estimate::{
    estimate, instance_names, unknown_repos, Basis, ColdPlan, RepoPlan, Start, Wanted,
};
use patchgrade::backend::docker::inventory::{by_kind, groups, Group, Held, Kind};
use patchgrade::backend::docker::shelf::{self, Shelf, ShelfGroup, Shelved};
use patchgrade::backend::docker::{daemon, parse_size};
use patchgrade::engine::default_cache_dir;
use patchgrade::runner::schedule::Durations;
use patchgrade::table::{render, Layout};

/// How disk is counted, said under every table.
const DISK_NOTE: &str = "disk: each image's own size, what it adds over its nearest patchgrade parent image (image inspect sizes, layer prefixes), so parents count once; layers siblings share without a parent image (the env tier's apt layer) count once per image, and root images include the Debian image they came from";

#[derive(Serialize)]
struct Report<'a> {
    images: &'a [Held],
    groups: &'a [Group],
    shelf: ShelfReport<'a>,
    compiler_store: StoreReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    cold_run: Option<&'a ColdPlan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eviction: Option<Eviction<'a>>,
}

#[derive(Serialize)]
struct ShelfReport<'a> {
    dir: String,
    images: &'a [Shelved],
    groups: &'a [ShelfGroup],
}

/// The compiler cache store's folder and what it holds.
#[derive(Serialize)]
struct StoreReport {
    dir: String,
    #[serde(flatten)]
    usage: Usage,
}

#[derive(Serialize)]
struct Eviction<'a> {
    dry_run: bool,
    plan: &'a EvictionPlan,
    removals: &'a [Removal],
}

pub async fn images(args: ImagesArgs) -> Result<(), ExpectedError> {
    let wanted: Option<Vec<Wanted>> = match &args.dataset {
        Some(p) => {
            let source = DatasetArg {
                dataset: Some(p.clone()),
                task_repo: None,
            };
            let d = load_dataset(&source, &args.instance_ids)?;
            Some(
                d.instances
                    .iter()
                    .map(|i| Wanted {
                        id: i.instance_id.clone(),
                        repo: i.repo.clone(),
                    })
                    .collect(),
            )
        }
        None => None,
    };
    let budget = match &args.cache_budget {
        Some(s) => Some(parse_size(s).map(|b| b as u64).map_err(|_| {
            ExpectedError::bad(anyhow::anyhow!(
                "--cache-budget {s:?}: expected a size such as 50g or 800m"
            ))
        })?),
        None => None,
    };
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let docker = daemon::connect().await.map_err(ExpectedError::infra)?;
    let ids = wanted.as_deref().map(instance_names).unwrap_or_default();
    let held = engine::holdings(&docker, &ids)
        .await
        .map_err(ExpectedError::infra)?;
    let groups = groups(&held);
    eprint!("{}", holdings_table(&held, &groups));
    let shelf = Shelf::new(&cache_dir.join("docker"));
    let shelved = shelf.list();
    let shelf_groups = shelf::by_repository(&shelved);
    eprint!("{}", shelf_table(&shelf, &shelf_groups));
    let store = Store::new(&cache_dir.join("docker"));
    let store_usage = store.usage();
    if store_usage.files > 0 {
        eprintln!(
            "\ncompiler cache store ({}): {} entries, {}",
            store.dir().display(),
            store_usage.files,
            human(store_usage.bytes)
        );
    }

    let cold = match &wanted {
        Some(w) => {
            let logs = args
                .log_dir
                .parent()
                .map(|p| p.join("build_images"))
                .unwrap_or_else(|| "build_images".into());
            let builds = Builds::read(&logs).map_err(ExpectedError::infra)?;
            let durations_path = cache_dir.join("durations.json");
            let durations = Durations::load(&durations_path).map_err(ExpectedError::bad)?;
            let start = if args.from_empty {
                Start::Empty
            } else {
                Start::Engine
            };
            let plan = estimate(w, start, &held, &shelved, &builds, |id| durations.get(id));
            let source = args.dataset.as_deref().unwrap_or("dataset".as_ref());
            eprint!(
                "{}",
                cold_table(
                    &plan,
                    &source.display().to_string(),
                    &logs.display().to_string()
                )
            );
            Some(plan)
        }
        None => None,
    };

    let mut evicted = None;
    if args.evict {
        let (plan, index) = engine::plan(&docker, &cache_dir, budget, &held)
            .await
            .map_err(ExpectedError::infra)?;
        eprint!("{}", eviction_text(&plan, args.dry_run));
        let removals = if args.dry_run {
            Vec::new()
        } else {
            engine::evict(&docker, &cache_dir, &plan, index)
                .await
                .map_err(ExpectedError::infra)?
        };
        for r in &removals {
            match r {
                Removal::Removed { name } => eprintln!("  removed {name}"),
                Removal::Failed { name, error } => eprintln!("  not removed {name}: {error}"),
            }
        }
        evicted = Some((plan, removals));
    }
    if args.print.json {
        print_json(&Report {
            images: &held,
            groups: &groups,
            shelf: ShelfReport {
                dir: shelf.dir().display().to_string(),
                images: &shelved,
                groups: &shelf_groups,
            },
            compiler_store: StoreReport {
                dir: store.dir().display().to_string(),
                usage: store_usage,
            },
            cold_run: cold.as_ref(),
            eviction: evicted.as_ref().map(|(plan, removals)| Eviction {
                dry_run: args.dry_run,
                plan,
                removals,
            }),
        })?;
    }
    if let Some((_, removals)) = &evicted {
        let failed: Vec<String> = removals
            .iter()
            .filter_map(|r| match r {
                Removal::Failed { name, .. } => Some(name.clone()),
                Removal::Removed { .. } => None,
            })
            .collect();
        if !failed.is_empty() {
            return Err(ExpectedError::infra(anyhow::anyhow!(
                "{} image(s) could not be removed: {}",
                failed.len(),
                list(&failed, 10)
            )));
        }
    }
    Ok(())
}

/// The holdings: one line per kind and repository, then per kind.
fn holdings_table(held: &[Held], groups: &[Group]) -> String {
    let total: u64 = groups.iter().map(|g| g.bytes).sum();
    let ids: std::collections::HashSet<&str> = held.iter().map(|h| h.id.as_str()).collect();
    let mut out = format!(
        "patchgrade images in the engine: {} names, {} images, {}\n",
        held.len(),
        ids.len(),
        human(total)
    );
    let mut rows = vec![cells(&[
        "tier",
        "kind",
        "repository",
        "images",
        "disk",
        "in use",
    ])];
    for g in groups {
        rows.push(vec![
            g.tier.to_string(),
            g.kind.name().to_string(),
            match (&g.repo, g.serves) {
                (Some(r), _) => r.clone(),
                (None, true) => "(shared)".into(),
                (None, false) => "(nothing held on it)".into(),
            },
            g.images.to_string(),
            human(g.bytes),
            g.in_use.to_string(),
        ]);
    }
    out.push_str(&render(&rows, indented()));
    let kinds: BTreeMap<Kind, (usize, u64)> = by_kind(groups);
    let per: Vec<String> = kinds
        .iter()
        .map(|(k, (n, b))| format!("{} {n} ({})", k.name(), human(*b)))
        .collect();
    out.push_str(&format!("  by kind: {}\n  {DISK_NOTE}\n", per.join(", ")));
    out
}

/// The shelf: one line per repository (nothing when it is empty).
fn shelf_table(shelf: &Shelf, groups: &[ShelfGroup]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let (n, raw, stored) = groups.iter().fold((0, 0, 0), |(n, r, s), g| {
        (n + g.images, r + g.raw_bytes, s + g.stored_bytes)
    });
    let mut out = format!(
        "\non the shelf ({}): {n} instance images, {} of layers in {} of archives\n",
        shelf.dir().display(),
        human(raw),
        human(stored)
    );
    let mut rows = vec![cells(&["repository", "images", "layers", "archives"])];
    for g in groups {
        rows.push(vec![
            g.repo.clone(),
            g.images.to_string(),
            human(g.raw_bytes),
            human(g.stored_bytes),
        ]);
    }
    out.push_str(&render(&rows, indented()));
    out
}

/// The cold run's estimate: one line per repository, then the total.
fn cold_table(plan: &ColdPlan, dataset: &str, logs: &str) -> String {
    let t = &plan.total;
    let from = match plan.start {
        Start::Engine => "the engine lacks",
        Start::Empty => "to build (from an empty engine)",
    };
    let shelved = match t.shelved {
        0 => String::new(),
        n => format!(" ({n} of them on the shelf)"),
    };
    let mut out = format!(
        "\ncold run of {dataset}: {} instances, {} warm{shelved}, {} to build, and {} parent images {from}\n",
        t.instances, t.warm, t.cold, t.parents
    );
    let mut rows = vec![cells(&[
        "repository",
        "instances",
        "warm",
        "to build",
        "parents",
        "build (one worker)",
        "disk",
        "tests (one worker)",
    ])];
    for r in plan.repos.iter().chain(std::iter::once(t)) {
        rows.push(repo_row(r));
    }
    out.push_str(&render(&rows, indented()));
    let mut parents: BTreeMap<Kind, (usize, f64, usize)> = BTreeMap::new();
    for p in &plan.parents {
        let e = parents.entry(p.kind).or_default();
        e.0 += 1;
        match p.seconds {
            Some(s) => e.1 += s,
            None => e.2 += 1,
        }
    }
    if !parents.is_empty() {
        let per: Vec<String> = parents
            .iter()
            .map(|(k, (n, s, u))| {
                let time = match *u {
                    0 => seconds(*s),
                    u if u == *n => "unknown".to_string(),
                    u => format!("{}, {u} unknown", seconds(*s)),
                };
                format!("{n} {} ({time})", k.name())
            })
            .collect();
        out.push_str(&format!("  parents to build: {}\n", per.join(", ")));
    }
    let unknown = unknown_repos(plan);
    for (basis, what) in [
        (Basis::Unknown, "no build recorded"),
        (Basis::Failed, "only failed builds recorded"),
    ] {
        let repos: Vec<String> = unknown
            .iter()
            .filter(|(_, b)| **b == basis)
            .map(|(r, _)| r.to_string())
            .collect();
        if !repos.is_empty() {
            out.push_str(&format!(
                "  unknown: {what} under {logs} for {}\n",
                list(&repos, 12)
            ));
        }
    }
    out.push_str(&format!(
        "  from the build logs under {logs} (each image's last build) and the cache's durations.json; \
         an instance is warm when the engine holds an image of its name under any tag (tags are not \
         computed: that needs the mirrors and the interpreter choice), its parents are the chain its \
         last recorded build (or its repository's latest) came FROM; disk is the mean own size of the \
         repository's instance images the engine holds, parents' that of a held image of the same name\n"
    ));
    out
}

fn repo_row(r: &RepoPlan) -> Vec<String> {
    let with_unknown = |text: String, unknown: usize| match unknown {
        0 => text,
        n => format!("{text} (+{n} unknown)"),
    };
    let build = match (r.cold + r.parents, r.unknown_seconds) {
        (0, _) => "-".to_string(),
        (n, u) if u == n => "unknown".to_string(),
        (_, u) => with_unknown(seconds(r.build_seconds), u),
    };
    let disk = match (r.cold + r.parents, r.unknown_bytes) {
        (0, _) => "-".to_string(),
        (n, u) if u == n => "unknown".to_string(),
        (_, u) => with_unknown(human(r.bytes), u),
    };
    let tests = match (r.instances, r.unknown_tests) {
        (n, u) if u == n => "unknown".to_string(),
        (_, u) => with_unknown(seconds(r.tests_seconds), u),
    };
    let parents = with_unknown(r.parents.to_string(), r.unknown_parents);
    vec![
        r.repo.clone(),
        r.instances.to_string(),
        r.warm.to_string(),
        r.cold.to_string(),
        parents,
        build,
        disk,
        tests,
    ]
}

fn eviction_text(plan: &EvictionPlan, dry_run: bool) -> String {
    let mut out = format!(
        "\neviction by {}: {} indexed images, {}; budget {} ({}); {} patchgrade images not indexed (never candidates), {} in use by containers (kept)\n",
        plan.index.display(),
        plan.indexed,
        human(plan.usage),
        human(plan.budget),
        plan.rule,
        plan.not_indexed,
        plan.in_use,
    );
    let n: usize = plan.waves.iter().map(Vec::len).sum();
    if n == 0 {
        out.push_str("  nothing to remove: the cache fits its budget\n");
        return out;
    }
    if plan.leased {
        out.push_str("  a run of this cache folder is going: it evicts when it ends\n");
    }
    let verb = if dry_run { "would remove" } else { "removing" };
    out.push_str(&format!(
        "  {verb} {n} images, least recently used first, freeing {}:\n",
        human(plan.freed)
    ));
    if dry_run {
        for name in plan.waves.iter().flatten() {
            out.push_str(&format!("    {name}\n"));
        }
    }
    out
}

fn seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!("{s:.0} s ({:.1} h)", s / 3600.0)
    } else {
        format!("{s:.0} s")
    }
}

fn cells(c: &[&str]) -> Vec<String> {
    c.iter().map(|s| s.to_string()).collect()
}

fn indented() -> Layout<'static> {
    Layout {
        indent: "  ",
        ..Layout::default()
    }
}
