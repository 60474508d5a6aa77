//! One instance end to end: workload, variants on the host, one container,
//! analysis, the perf.json record. The `perf` command calls this per
//! instance with the instance image its Docker backend prepared.

use std::path::Path;

use bollard::Docker;

use super::container::{measure, ContainerError, MeasureOptions, VariantFiles};
use super::record::{PerfRecord, VariantInfo, SCHEMA_VERSION};
use super::variants::{prepare, PatchVariant, VariantError};
use super::workload::{workload_of, WorkloadError, WorkloadItem};
use super::{analyse, AnalysisOptions};
use crate::dataset::Instance;
use crate::repo::RepoCache;
use crate::spec::Spec;

/// An instance could not be measured at all (one variant's problem is
/// recorded in its notes instead).
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Variants(#[from] VariantError),
    #[error("instance {instance}: base could not be prepared: {reason}")]
    Base { instance: String, reason: String },
    #[error("instance {instance}: {source}")]
    Container {
        instance: String,
        #[source]
        source: ContainerError,
    },
}

impl MeasureOptions {
    /// The spec's part of the options: its environment variables, its
    /// `eval_commands` after `activate` (the line that activates the image's
    /// env), and its `eval_install` as each variant's build step (through
    /// the image's compiler and Cython caches for a `snapshot_build` spec,
    /// as an eval's rebuild).
    pub fn with_spec(mut self, spec: &Spec, activate: Option<String>) -> Self {
        self.env = spec.env.clone();
        self.setup = activate.into_iter().collect();
        self.setup.extend(spec.eval_commands.iter().cloned());
        self.build = spec
            .eval_install()
            .map(|step| crate::backend::docker::images::setup::container_install_step(spec, step));
        self
    }
}

/// What to measure for one instance.
#[derive(Debug, Clone, Copy)]
pub struct PerfJob<'a> {
    /// The instance image (name or id): base tree and env at `/testbed`.
    pub image: &'a str,
    pub repos: &'a RepoCache,
    pub instance: &'a Instance,
    pub spec: &'a Spec,
    /// Base first (see [`PatchVariant`]).
    pub variants: &'a [PatchVariant],
    /// Where the host-side checkouts go.
    pub workdir: &'a Path,
}

/// Measures the job's variants in one container of its image. A variant
/// whose patch does not apply is left out with a note; base failing to
/// prepare is an error.
pub async fn measure_instance(
    docker: &Docker,
    job: PerfJob<'_>,
    measure_opts: &MeasureOptions,
    analysis_opts: &AnalysisOptions,
) -> Result<PerfRecord, PerfError> {
    let PerfJob {
        image,
        repos,
        instance: inst,
        spec,
        variants,
        workdir,
    } = job;
    let workload = workload_of(inst, spec)?;
    let prepared = {
        let (repos, owned, workdir, variants) = (
            repos.clone(),
            inst.clone(),
            workdir.to_owned(),
            variants.to_vec(),
        );
        let test_patch = workload.needs_test_patch();
        // git2 work: off the async threads.
        tokio::task::spawn_blocking(move || {
            prepare(&repos, &owned, &workdir, &variants, test_patch)
        })
        .await
        .map_err(|e| PerfError::Base {
            instance: inst.instance_id.clone(),
            reason: format!("preparation task: {e}"),
        })??
    };
    let mut files: Vec<VariantFiles> = Vec::new();
    let mut infos: Vec<VariantInfo> = Vec::new();
    let mut notes = Vec::new();
    for (v, p) in variants.iter().zip(prepared) {
        match p {
            Ok(f) => {
                files.push(f);
                infos.push(v.info.clone());
            }
            Err(e) if infos.is_empty() => {
                return Err(PerfError::Base {
                    instance: inst.instance_id.clone(),
                    reason: e.to_string(),
                })
            }
            Err(e) => notes.push(format!("not measured: {e}")),
        }
    }
    let measured = measure(docker, image, &files, &workload, measure_opts)
        .await
        .map_err(|source| PerfError::Container {
            instance: inst.instance_id.clone(),
            source,
        })?;
    let script = workload
        .items
        .iter()
        .all(|i| matches!(i, WorkloadItem::Script { .. }));
    let mut analysis = analyse(
        &infos,
        &measured.output,
        workload.items.len(),
        measure_opts.repeat,
        script,
        analysis_opts,
    );
    analysis.notes.extend(notes);
    let overhead = measured.overhead_per_run();
    let elapsed = measured.elapsed.as_secs_f64();
    let out = measured.output;
    Ok(PerfRecord {
        schema_version: SCHEMA_VERSION,
        instance_id: inst.instance_id.clone(),
        workload_source: workload.source,
        items: workload
            .items
            .iter()
            .map(|i| i.name().to_string())
            .collect(),
        repeat: measure_opts.repeat,
        warmup: measure_opts.warmup,
        seed: measure_opts.seed,
        cpuset: measure_opts.cpuset.clone(),
        options: *analysis_opts,
        variants: infos,
        fingerprint: out.fingerprint,
        builds: out.builds,
        warmups: out.warmups,
        runs: out.runs,
        elapsed_s: Some(elapsed),
        overhead_per_run_s: overhead,
        sweep: out.sweep,
        analysis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_snapshot_build_spec_builds_its_variants_through_the_caches() {
        let yaml = "eval_install: pip install -e .\ntest_cmd: t\nlog_parser: pytest\n";
        let plain = MeasureOptions::default().with_spec(&spec(yaml), None);
        assert_eq!(plain.build.as_deref(), Some("pip install -e ."));
        let built = MeasureOptions::default()
            .with_spec(&spec(&format!("snapshot_build: true\n{yaml}")), None);
        let b = built.build.unwrap();
        assert!(b.contains("CCACHE_READONLY=1"), "{b}");
        assert!(b.contains("pip install -e ."), "{b}");
        // A subshell: the caches' variables end with the build.
        assert!(b.starts_with("(\n") && b.ends_with(")\n"), "{b}");
    }
}
