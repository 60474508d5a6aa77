//! Measures the future-copy check on real mirrors (ignored; run by
//! `harness-scripts/measure-future.sh`): every prediction of a dataset whose
//! repository has a mirror, scanned; one row per prediction, then counts
//! with the rule and with its share condition alone. For gold, `later`
//! counts those a single commit other than the fix (or a copy of it)
//! flags: gold is an independent fix of everything after it.
//!
//! PATCHGRADE_FUTURE_DATASET  dataset (.jsonl)
//! PATCHGRADE_FUTURE_PREDS    predictions file, or `gold` (default)
//! PATCHGRADE_MIRRORS         folder of bare mirrors `<owner>__<name>[.git]`

use patchgrade::audit::future::{self, FutureError, MIN_SHARE};
use patchgrade::dataset::load_predictions;
use patchgrade::repo::mirror_in;

use super::*;

#[test]
#[ignore]
fn measure_future_copy() {
    let (Ok(ds), Ok(mirrors)) = (
        std::env::var("PATCHGRADE_FUTURE_DATASET"),
        std::env::var("PATCHGRADE_MIRRORS"),
    ) else {
        eprintln!("set PATCHGRADE_FUTURE_DATASET and PATCHGRADE_MIRRORS");
        return;
    };
    let preds = std::env::var("PATCHGRADE_FUTURE_PREDS").unwrap_or_else(|_| "gold".into());
    let ds = Dataset::load(Path::new(&ds)).unwrap();
    let preds = load_predictions(&[PathBuf::from(&preds)], &ds).unwrap();
    let (mut scanned, mut no_mirror, mut no_base, mut empty, mut failed) = (0, 0, 0, 0, 0);
    let (mut share_only, mut flagged, mut fix_found, mut later) = (0, 0, 0, 0);
    let mut secs: Vec<f64> = Vec::new();
    println!("instance\tscored\ttouching\tbest_share\tbest_beyond\tflagged\tcommit\tfix\tbeyond_kinds\tlater\tseconds");
    for p in &preds {
        let Some(inst) = ds.get(&p.instance_id) else {
            continue;
        };
        let Some(patch) = p.model_patch.as_deref().filter(|s| !s.trim().is_empty()) else {
            empty += 1;
            continue;
        };
        let Some(mirror) = mirror_in(Path::new(&mirrors), &inst.repo) else {
            no_mirror += 1;
            continue;
        };
        let t = Instant::now();
        let scan = match future::scan(&mirror, inst, patch) {
            Ok(s) => s,
            Err(FutureError::BaseMissing(_)) => {
                no_base += 1;
                continue;
            }
            // A mirror missing objects (a partial snapshot) is the audit's
            // note, not a measurement: counted and named.
            Err(e) => {
                eprintln!("{}: scan failed: {e}", inst.instance_id);
                failed += 1;
                continue;
            }
        };
        let s = t.elapsed().as_secs_f64();
        secs.push(s);
        scanned += 1;
        fix_found += usize::from(scan.fix.is_some());
        let best = scan.best_share();
        share_only += usize::from(best.is_some_and(|b| b.share >= MIN_SHARE));
        let hit = scan.flagged();
        flagged += usize::from(hit.is_some());
        // A single commit other than the fix that the rule flags on its own,
        // leaving out the fix's copies (a backport, the same pull request
        // merged into another branch): for gold, those that explain it at
        // least as much as the fix does.
        let fix_id = scan.fix.as_ref().map(|c| c.id.as_str());
        let fix_share = scan
            .explanations
            .iter()
            .find(|e| e.run.is_empty() && Some(e.commit.id.as_str()) == fix_id)
            .map(|e| e.share);
        let other = scan.explanations.iter().find(|e| {
            e.flagged()
                && e.run.is_empty()
                && Some(e.commit.id.as_str()) != fix_id
                && fix_share.is_none_or(|f| e.share < f)
        });
        later += usize::from(other.is_some());
        let shown = hit.or(best);
        let kinds = shown
            .map(|e| {
                let mut k: Vec<&str> = e
                    .matched
                    .iter()
                    .filter_map(|m| m.beyond.map(|b| b.name()))
                    .collect();
                k.sort_unstable();
                k.dedup();
                k.join(",")
            })
            .unwrap_or_default();
        let short = |id: &str| id[..12].to_string();
        println!(
            "{}\t{}\t{}\t{:.2}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.3}",
            inst.instance_id,
            scan.scored,
            scan.touching,
            best.map_or(0.0, |b| b.share),
            shown.map_or(0, |b| b.beyond()),
            hit.is_some(),
            shown.map_or("-".into(), |e| format!(
                "{}{}",
                short(&e.commit.id),
                if e.run.is_empty() {
                    String::new()
                } else {
                    format!("+run{}", e.run.len())
                }
            )),
            scan.fix.as_ref().map_or("-".into(), |c| short(&c.id)),
            kinds,
            other.map_or("-".into(), |e| short(&e.commit.id)),
            s
        );
    }
    secs.sort_by(f64::total_cmp);
    let mean = secs.iter().sum::<f64>() / secs.len().max(1) as f64;
    eprintln!(
        "predictions {}: empty {empty}, no mirror {no_mirror}, base not in mirror {no_base}, scan failed {failed}, scanned {scanned} (fix commit found for {fix_found})",
        preds.len()
    );
    eprintln!(
        "share >= {MIN_SHARE} alone: {share_only}; the rule (share and >= {} lines beyond the minimal fix): {flagged}; by a single commit other than the fix or a copy of it: {later}",
        future::MIN_BEYOND
    );
    if let Some(max) = secs.last() {
        eprintln!(
            "seconds per scan: mean {mean:.3}, median {:.3}, max {max:.3}",
            secs[secs.len() / 2]
        );
    }
}
