//! `patchgrade audit RUN_DIR`: re-audit a finished run; with `--rerun`, run
//! the dynamic checks too, with `--confirm` the confirmation run.
//! `patchgrade audit --dataset D --predictions P`: the static audit of a
//! submission, nothing run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::{finished, list, print_json, reused_options, write_report};
use crate::cli::reuse::Given;
use crate::cli::AuditArgs;
use crate::error::ExpectedError;
use patchgrade::analysis::{confirm, reaudit};
use patchgrade::audit::{dynamic, Audit, CheckKind};
use patchgrade::dataset::{Dataset, Instance};
use patchgrade::engine::{Engine, EngineOptions, Executed};
use patchgrade::key::EvalName;
use patchgrade::outcome::Outcome;
use patchgrade::record::EvalRecord;
use patchgrade::review::submission::{audit_submission, SubmissionAudit, SubmissionOptions};
use patchgrade::rundir::{Evaluation, RunDir};

pub async fn audit(args: AuditArgs, given: &Given) -> Result<(), ExpectedError> {
    // clap keeps the two forms apart; this guards a call that bypasses it.
    let run_dir = match (&args.run_dir, args.predictions.is_empty()) {
        (None, false) => return submission(&args),
        (Some(d), true) => d.clone(),
        _ => {
            return Err(ExpectedError::bad(anyhow::anyhow!(
                "audit takes either RUN_DIR or --dataset with --predictions, not both"
            )))
        }
    };
    let started = Instant::now();
    let rundir = RunDir::at(&run_dir);
    let evals = rundir.evaluations().map_err(ExpectedError::bad)?;
    let dataset_path: PathBuf = match &args.dataset {
        Some(p) => p.clone(),
        None => rundir
            .meta()
            .and_then(|m| m.dataset_path())
            .ok_or_else(|| {
                ExpectedError::bad(anyhow::anyhow!(
                    "no --dataset, and {}/run.json names none",
                    run_dir.display()
                ))
            })?,
    };
    let dataset = Dataset::open(&dataset_path).map_err(ExpectedError::bad)?;
    // The run's own setup (specs, mirrors, backend...) unless flags say otherwise.
    let opts = reused_options(&args.engine, args.print, &rundir, given, &dataset_path);
    let specs = opts.sources.spec_set().map_err(ExpectedError::bad)?;
    let held_out = match &args.held_out {
        Some(p) => dynamic::load_sidecar(p).map_err(|e| ExpectedError::bad(anyhow::anyhow!(e)))?,
        None => BTreeMap::new(),
    };
    // The mirrors the run made (or --mirror-dir's): the future-copy check.
    let repos = opts.sources.repo_cache(&dataset_path);
    // The checks run again now: what they found before is dropped.
    let mut again = Vec::new();
    if args.rerun {
        again.extend([CheckKind::HeldOut, CheckKind::GoldDivergence]);
    }
    if args.confirm {
        again.push(CheckKind::Confirmation);
    }
    let mut audits = reaudit::static_audits(
        &evals,
        &dataset,
        &dataset_path,
        &specs,
        Some(&repos),
        &again,
    )
    .map_err(ExpectedError::bad)?;
    let mut done = None;
    if !again.is_empty() {
        let setup = Dynamic {
            held_out: args.rerun.then_some(held_out),
            confirm: args.confirm,
        };
        done = Some(
            rerun(
                opts,
                &rundir,
                &evals,
                (&dataset, &dataset_path),
                setup,
                &mut audits,
            )
            .await?,
        );
    }
    let (records, mut report) = reaudit::write_back(&run_dir, !again.is_empty(), &evals, audits)
        .map_err(ExpectedError::infra)?;
    report.seconds = started.elapsed().as_secs_f64();
    for (e, record) in evals.iter().zip(&records) {
        if let Some(line) = verdict_line(record, &e.dir.leaf()) {
            eprintln!("{line}");
        }
    }
    for (m, c) in &report.models {
        let open = match c.inconclusive_resolved {
            0 => String::new(),
            n => format!(", {n} inconclusive"),
        };
        eprintln!(
            "{m}: {} resolved, {} clean, {} suspect{open}",
            c.resolved, c.clean_resolved, c.suspect_resolved
        );
    }
    let path = run_dir.join("audit.json");
    write_report(&path, &report)?;
    eprintln!("audit written to {}", path.display());
    if args.print.json {
        print_json(&report)?;
    }
    if let Some(done) = &done {
        finished(done)?;
    }
    inconclusive(&evals, &records)
}

/// Exit 4 when some verdicts are inconclusive, naming each evaluation and
/// the checks that could not run.
fn inconclusive(evals: &[Evaluation], records: &[EvalRecord]) -> Result<(), ExpectedError> {
    let open: Vec<String> = evals
        .iter()
        .zip(records)
        .filter(|(_, r)| r.outcome == Outcome::Resolved)
        .filter_map(|(e, r)| {
            let a = r.audit.as_ref().filter(|a| a.is_inconclusive())?;
            let causes: Vec<String> = a.failed_checks().map(|c| c.describe()).collect();
            Some(format!(
                "{} {}: {}",
                r.model_name_or_path,
                e.dir.leaf(),
                causes.join("; ")
            ))
        })
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    Err(ExpectedError::Inconclusive(format!(
        "{} audit(s) could not reach a verdict: {}",
        open.len(),
        list(&open, 10)
    )))
}

/// The dynamic checks asked for: `--rerun`'s (with the held-out tests),
/// the confirmation run.
struct Dynamic {
    held_out: Option<BTreeMap<String, dynamic::HeldOut>>,
    confirm: bool,
}

/// The dynamic checks: their evaluations run in `<run_id>.audit` beside the
/// run; their reasons join the audits. The confirmation's follow-up runs
/// (where its first run disagreed) are a second batch.
async fn rerun(
    mut opts: EngineOptions,
    rundir: &RunDir,
    evals: &[Evaluation],
    (dataset, dataset_path): (&Dataset, &std::path::Path),
    asked: Dynamic,
    audits: &mut BTreeMap<usize, Audit>,
) -> Result<Executed, ExpectedError> {
    opts.log_dir = rundir.log_root().to_owned();
    let audit_run = rundir.audit_run();
    let engine = Engine::build(&opts, audit_run.run_id(), dataset_path)?;
    let repos = engine.runner.repos.clone();
    let list_files = |inst: &Instance| {
        repos
            .ensure(&inst.repo, &[&inst.base_commit])
            .and_then(|_| repos.list_files(&inst.repo, &inst.base_commit))
            .unwrap_or_default()
    };
    let runner = &engine.runner;
    let (rd, specs) = (&runner.cfg.rundir, &runner.specs);
    let plan = match &asked.held_out {
        Some(held_out) => reaudit::plan(evals, dataset, specs, held_out, list_files),
        None => reaudit::Plan::default(),
    };
    let first = if asked.confirm {
        confirm::plan(evals, dataset, specs)
    } else {
        confirm::Plan::default()
    };
    eprintln!(
        "dynamic audit: {} evaluations",
        plan.jobs.len() + first.jobs.len()
    );
    let t = Instant::now();
    let jobs = plan.jobs.iter().chain(&first.jobs).cloned().collect();
    let mut done = engine.execute(jobs).await;
    super::abandoned(&done)?;
    reaudit::judge(evals, audits, rd, specs, plan, &done.records);
    if asked.confirm {
        // Interrupted: no follow-up; what ran is judged, the rest could not.
        let again = if done.interrupted {
            confirm::Plan::default()
        } else {
            confirm::plan_again(evals, dataset, &first, rd, specs, &done.records)
        };
        if !again.jobs.is_empty() {
            eprintln!(
                "confirmation: {} follow-up evaluations (gold's and the candidates' second runs) where the first disagreed",
                again.jobs.len()
            );
            let more = engine.execute(again.jobs.clone()).await;
            super::abandoned(&more)?;
            done.records.extend(more.records);
            done.interrupted |= more.interrupted;
            done.failed_tasks += more.failed_tasks;
            done.unwritten.extend(more.unwritten);
            done.elapsed += more.elapsed;
        }
        confirm::judge(evals, audits, rd, specs, [first, again], &done.records);
    }
    let secs = t.elapsed().as_secs_f64();
    for audit in audits.values_mut() {
        audit
            .notes
            .push(format!("dynamic checks of this run took {secs:.1}s in all"));
    }
    Ok(done)
}

/// `<model>  <leaf>  clean|suspect|inconclusive  reasons|causes|not audited`, for resolved
/// evaluations.
fn verdict_line(record: &EvalRecord, leaf: &str) -> Option<String> {
    if record.outcome != Outcome::Resolved {
        return None;
    }
    let verdict = match &record.audit {
        Some(au) if au.is_suspect() => {
            let kinds: Vec<String> = au
                .reasons
                .iter()
                .map(|r| format!("{}: {}", r.kind.name(), r.message))
                .collect();
            format!("suspect  {}", kinds.join("; "))
        }
        Some(au) if au.is_inconclusive() => {
            let causes: Vec<String> = au.failed_checks().map(|c| c.describe()).collect();
            format!("inconclusive  {}", causes.join("; "))
        }
        Some(_) => "clean".to_string(),
        None => "not audited".to_string(),
    };
    Some(format!("{}  {leaf}  {verdict}", record.model_name_or_path))
}

/// The static audit of a submission: every check that needs no test log,
/// and the review's diff-only findings; no container, no checkout.
fn submission(args: &AuditArgs) -> Result<(), ExpectedError> {
    let dataset_path = args
        .dataset
        .as_deref()
        .ok_or_else(|| ExpectedError::bad(anyhow::anyhow!("--predictions needs --dataset")))?;
    let dataset = Dataset::open(dataset_path).map_err(ExpectedError::bad)?;
    let preds = patchgrade::dataset::load_predictions(&args.predictions, &dataset)
        .map_err(ExpectedError::bad)?;
    let opts = SubmissionOptions {
        with_hints: args.with_hints,
        mirror_dir: args.engine.sources.mirror_dir.clone(),
    };
    let audit = audit_submission(&dataset, &preds, &opts);
    for line in submission_lines(&audit) {
        eprintln!("{line}");
    }
    let s = audit.summary();
    let on = if args.with_hints {
        "problem statement and hints"
    } else {
        "problem statement only"
    };
    eprintln!(
        "\n{} predictions ({} empty, not audited): {} suspect (leakage judged on the {on}); mean review score {}; {:.2}s",
        s.predictions,
        s.empty,
        s.suspect,
        s.mean_score.map_or("-".into(), |m| format!("{m:.1}")),
        audit.seconds
    );
    let counts = |kinds: Vec<(String, usize)>| {
        kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !s.reasons.is_empty() {
        let r = s.reasons.iter().map(|(k, n)| (k.name().to_string(), *n));
        eprintln!("reasons (predictions): {}", counts(r.collect()));
    }
    if !s.findings.is_empty() {
        let f = s.findings.iter().map(|(k, n)| (k.name().to_string(), *n));
        eprintln!("findings (predictions): {}", counts(f.collect()));
    }
    if args.print.json {
        print_json(&serde_json::json!({ "summary": s, "audit": audit }))?;
    }
    Ok(())
}

/// A line per prediction with a reason or a finding, then one per reason
/// and finding with its evidence.
fn submission_lines(audit: &SubmissionAudit) -> Vec<String> {
    let mut out = Vec::new();
    for p in &audit.predictions {
        let (Some(a), Some(r)) = (&p.audit, &p.review) else {
            continue;
        };
        if a.reasons.is_empty() && r.findings.is_empty() {
            continue;
        }
        let who = EvalName::new(&p.instance_id, p.sample_id.as_deref());
        let verdict = if a.is_suspect() { "suspect" } else { "clean" };
        out.push(format!(
            "{}  {who}  {verdict}  score {:.0}",
            p.model_name_or_path, r.score.score
        ));
        for reason in &a.reasons {
            let at = reason
                .evidence
                .iter()
                .find_map(|e| {
                    let f = e.file.as_ref()?;
                    Some(match e.lines.first() {
                        Some(l) => format!(" ({f}:{l})"),
                        None => format!(" ({f})"),
                    })
                })
                .unwrap_or_default();
            out.push(format!(
                "    {}: {}{at}",
                reason.kind.name(),
                reason.message
            ));
        }
        for f in &r.findings {
            let at = f.location();
            let at = if at.is_empty() { at } else { format!(" {at}") };
            out.push(format!("    {}{at}: {}", f.kind.name(), f.message));
        }
    }
    out
}
