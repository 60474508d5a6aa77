//! A graded run's measurement ([`measure`]): per instance, base, an A/A
//! copy of base, gold and the candidates in one container of the instance
//! image the grading left ([`measure_instance`]), one instance after the
//! other; `RUN_DIR/perf/<instance>/perf.json`, `RUN_DIR/perf/report.md`
//! and its SVG plots. Driven by the engine: its Docker connection, its
//! reporter, its Ctrl-C.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::container::MeasureOptions;
use super::instance::{measure_instance, PerfJob};
use super::record::{PerfRecord, Role, VariantInfo};
use super::variants::PatchVariant;
use super::{aggregate, render, Aggregate, AnalysisOptions};
use crate::backend::docker::images::activate_line;
use crate::backend::docker::DockerError;
use crate::backend::Backend;
use crate::dataset::{Dataset, GOLD};
use crate::engine::Engine;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::record::EvalRecord;
use crate::rundir::atomic::{write_atomic, write_json_atomic};
use crate::runner::jobs::{Job, Records};
use crate::runner::{Notice, RunEvent};

/// What measuring a run gave (each instance's container measurement is
/// [`super::container::Measured`]).
#[derive(Debug)]
pub struct Measurements {
    pub records: Vec<PerfRecord>,
    pub aggregates: BTreeMap<String, Aggregate>,
    /// Instances that could not be measured, with why.
    pub failed: Vec<String>,
    /// `RUN_DIR/perf`, where perf.json files and report.md are.
    pub dir: PathBuf,
}

/// A run could not be measured, or its reports not written.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("perf measures in containers: the engine's backend is {0}, not docker")]
    NotDocker(crate::backend::BackendKind),
    #[error(transparent)]
    Docker(#[from] DockerError),
    #[error("cannot create a scratch folder: {0}")]
    Scratch(std::io::Error),
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot render the perf report: {0}")]
    Render(String),
    /// Ctrl-C: the running measurement stopped (its container removed);
    /// the perf.json files of measured instances stay.
    #[error("interrupted")]
    Interrupted,
}

/// Measures every instance of `jobs` (measurements must not compete for
/// the CPU) with the grading's `records`, and writes the reports.
/// `only_resolved` (`run --perf`): candidates the grading did not resolve
/// are not measured.
pub async fn measure(
    engine: &Engine,
    dataset: &Dataset,
    jobs: &[Job],
    records: &Records,
    mopts: &MeasureOptions,
    aopts: &AnalysisOptions,
    only_resolved: bool,
) -> Result<Measurements, MeasureError> {
    let runner = &engine.runner;
    let Backend::Docker(backend) = &runner.backend else {
        return Err(MeasureError::NotDocker(runner.backend.kind()));
    };
    let dir = runner.cfg.rundir.path().join("perf");
    std::fs::create_dir_all(&dir).map_err(|source| MeasureError::Create {
        path: dir.clone(),
        source,
    })?;
    let docker = backend.docker().await?;
    let mut session = engine.session();
    let (say, cancel) = (session.events(), session.cancel());
    let measuring = async {
        let mut out = Measurements {
            records: Vec::new(),
            aggregates: BTreeMap::new(),
            failed: Vec::new(),
            dir: dir.clone(),
        };
        for inst in &dataset.instances {
            let Some(plan) = plan_instance(inst, jobs, records, only_resolved) else {
                continue;
            };
            let id = &inst.instance_id;
            if plan.nothing_resolved {
                let _ = say.send(RunEvent::Notice(Notice::NothingToMeasure {
                    instance_id: id.clone(),
                }));
                continue;
            }
            let Some(image) = plan.image else {
                out.failed.push(format!(
                    "{id}: no evaluation left an instance image to measure in"
                ));
                continue;
            };
            let spec = match runner.specs.lookup(&inst.repo, &inst.version) {
                Ok(s) => &s.spec,
                Err(e) => {
                    out.failed.push(format!("{id}: {e}"));
                    continue;
                }
            };
            let work = tempfile::Builder::new()
                .prefix("patchgrade-perf-")
                .tempdir()
                .map_err(MeasureError::Scratch)?;
            let job = PerfJob {
                image: &image,
                repos: &runner.repos,
                instance: inst,
                spec,
                variants: &plan.variants,
                workdir: work.path(),
            };
            let opts = mopts.clone().with_spec(spec, Some(activate_line()));
            let _ = say.send(RunEvent::Notice(Notice::Measuring {
                instance_id: id.clone(),
                variants: plan.variants.len(),
                rounds: opts.repeat,
            }));
            // Ctrl-C drops the measurement, which removes its container.
            let mut stop = cancel.clone();
            let result = tokio::select! {
                r = measure_instance(docker, job, &opts, aopts) => r,
                Ok(_) = stop.wait_for(|c| *c) => return Err(MeasureError::Interrupted),
            };
            match result {
                Ok(mut record) => {
                    if !plan.skipped.is_empty() {
                        let why = if only_resolved {
                            "not resolved or empty"
                        } else {
                            "empty patch"
                        };
                        record
                            .analysis
                            .notes
                            .push(format!("not measured ({why}): {}", plan.skipped.join(", ")));
                    }
                    let path = dir.join(id).join("perf.json");
                    write_json_atomic(&path, &record)
                        .map_err(|source| MeasureError::Write { path, source })?;
                    out.records.push(record);
                }
                Err(e) => out.failed.push(e.to_string()),
            }
        }
        Ok(out)
    };
    let measured = session.drive(measuring).await;
    drop(say);
    session.close().await;
    let mut out = measured.ok_or(MeasureError::Interrupted)??;
    out.aggregates = aggregate(out.records.iter().map(|r| &r.analysis));
    write_reports(&out, runner.cfg.rundir.run_id())?;
    Ok(out)
}

/// One instance's variants, before measuring.
struct InstancePlan {
    variants: Vec<PatchVariant>,
    /// Candidates not measured (empty, or not resolved with `only_resolved`).
    skipped: Vec<String>,
    /// `only_resolved` and nothing the run resolved: nothing to measure.
    nothing_resolved: bool,
    /// The instance image, from any of its evaluations.
    image: Option<String>,
}

/// The variants of `inst`; `None` when no job is of it.
fn plan_instance(
    inst: &crate::dataset::Instance,
    jobs: &[Job],
    records: &Records,
    only_resolved: bool,
) -> Option<InstancePlan> {
    let id = &inst.instance_id;
    let mine: Vec<&Job> = jobs
        .iter()
        .filter(|j| &j.instance.instance_id == id)
        .collect();
    if mine.is_empty() {
        return None;
    }
    let models: BTreeSet<&str> = jobs
        .iter()
        .map(|j| j.prediction.model_name_or_path.as_str())
        .filter(|m| *m != GOLD)
        .collect();
    let resolved = |k: &EvalKey| records.get(k).map(|r| r.outcome == Outcome::Resolved);
    let gold_key = EvalKey::new(GOLD, id, None);
    let mut variants = vec![
        PatchVariant::base(),
        PatchVariant::base_copy(),
        PatchVariant {
            info: VariantInfo {
                name: "gold".into(),
                role: Role::Gold,
                model: None,
                resolved: resolved(&gold_key),
            },
            patch: Some(inst.patch.clone()),
        },
    ];
    let mut skipped = Vec::new();
    for j in mine
        .iter()
        .filter(|j| j.prediction.model_name_or_path != GOLD)
    {
        let model = &j.prediction.model_name_or_path;
        let name = variant_name(
            &match (&j.sample, models.len()) {
                (Some(s), 1) => s.clone(),
                (Some(s), _) => format!("{model}.{s}"),
                (None, _) => model.clone(),
            },
            &variants,
        );
        let ok = resolved(&j.key());
        if j.prediction.is_empty_patch() || (only_resolved && ok != Some(true)) {
            skipped.push(name);
            continue;
        }
        variants.push(PatchVariant {
            info: VariantInfo {
                name,
                role: Role::Candidate,
                model: Some(model.clone()),
                resolved: ok,
            },
            patch: j.prediction.model_patch.clone(),
        });
    }
    let nothing_resolved =
        only_resolved && variants.len() == 3 && resolved(&gold_key) != Some(true);
    let image = records
        .get(&gold_key)
        .and_then(|r| image_of(r))
        .or_else(|| {
            mine.iter()
                .find_map(|j| records.get(&j.key()).and_then(|r| image_of(r)))
        });
    Some(InstancePlan {
        variants,
        skipped,
        nothing_resolved,
        image,
    })
}

/// The id of the instance image an evaluation ran in.
fn image_of(r: &EvalRecord) -> Option<String> {
    let id = r.environment.as_ref()?.image_id()?;
    id.starts_with("sha256:").then(|| id.to_string())
}

/// A variant's name as the container's folders allow it (letters, digits,
/// `.`, `_`, `-`), unique among the instance's variants; the model is
/// recorded beside it.
fn variant_name(want: &str, taken: &[PatchVariant]) -> String {
    let clean: String = want
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    let clean = if clean.is_empty() {
        "candidate".to_string()
    } else {
        clean
    };
    let free = |n: &str| taken.iter().all(|v| v.info.name != n);
    if free(&clean) {
        return clean;
    }
    (2..)
        .map(|i| format!("{clean}-{i}"))
        .find(|n| free(n))
        .unwrap()
}

/// report.md and its plots in RUN_DIR/perf.
fn write_reports(m: &Measurements, run_id: &str) -> Result<(), MeasureError> {
    let files = render::report_files(&format!("Efficiency: {run_id}"), &m.records, &m.aggregates)
        .map_err(|e| MeasureError::Render(e.to_string()))?;
    for (i, (name, text)) in files.iter().enumerate() {
        let name = if i == 0 { "report.md" } else { name.as_str() };
        let path = m.dir.join(name);
        write_atomic(&path, text.as_bytes())
            .map_err(|source| MeasureError::Write { path, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Environment;

    #[test]
    fn variant_names_are_safe_and_unique() {
        let taken = vec![PatchVariant::base(), PatchVariant::base_copy()];
        assert_eq!(variant_name("org/model@s 1", &taken), "org_model_s_1");
        assert_eq!(variant_name("base", &taken), "base-2");
        assert_eq!(variant_name("..", &taken), "candidate");
        assert_eq!(variant_name("a.b_c-d", &taken), "a.b_c-d");
    }

    #[test]
    fn the_image_is_read_from_the_environment() {
        let mut r = EvalRecord::new("i", "m", crate::settings::BackendKind::Docker);
        r.environment = Some(Environment::parse(
            "image sweb.eval.x:latest sha256:abc; python 3.11 (debian-suite)",
        ));
        assert_eq!(image_of(&r).as_deref(), Some("sha256:abc"));
        r.environment = Some(Environment::parse("venv /x/y"));
        assert_eq!(image_of(&r), None);
    }
}
