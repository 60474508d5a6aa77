//! Images on the engine: found, pulled (`--namespace`, `--base-image`),
//! bootstrapped with debootstrap where no registry answers, or built from
//! their plans, each at most once per run however many evaluations ask.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::query_parameters::{BuildImageOptionsBuilder, CreateImageOptionsBuilder};
use bollard::{body_full, body_try_stream};
use futures_util::StreamExt;

use super::plans::{base_plan, env_plan_on, instance_plan, EnvInputs, ImagePlan, Root, TreeSource};
use super::python::{python_image_name, python_plan};
use super::toolchain::{toolchain_image_name, toolchain_plan, ChosenToolchain};
use super::{bootstrap_image, namespace_image, Suite, Tier, BOOTSTRAP_SCRIPT};
use crate::backend::docker::chunks::{ChunkSender, CHUNKS_IN_FLIGHT};
use crate::backend::docker::events::ImageEvent;
use crate::backend::docker::{
    io_err, locked, ChosenPython, DockerBackend, DockerEnv, DockerError, PullFailure, API_TIMEOUT,
};
use crate::backend::EnvError;
use crate::dataset::Instance;
use crate::spec::{ResolvedSpec, Spec};
use crate::toolchain::{Language, Toolchain};

/// The suite a spec without Python is built on when its toolchains prefer
/// one: a JDK version that only one suite packages (Java 11: bullseye).
fn toolchain_suite(spec: &Spec) -> Option<Suite> {
    let java = spec.toolchains.get(&Language::Java)?;
    let v = crate::toolchain::Version::parse(Language::Java, java).ok()?;
    (v.0.len() == 1)
        .then(|| crate::toolchain::java::suite_for(v.0[0]))
        .flatten()
}

/// Limit on pulling a root image before falling back to debootstrap.
const ROOT_PULL_TIMEOUT: Duration = Duration::from_secs(120);

/// Build context paths whose files are not written to the build log
/// folder beside the Dockerfile and scripts.
const NOT_SCRIPTS: [&str; 3] = ["testbed/", "git/", "snapshot-objects/"];

/// The CA bundle to install in images, per `--ca-cert` and the environment.
pub(crate) fn ca_bundle(flag: Option<&str>) -> Result<Option<(PathBuf, Vec<u8>)>, DockerError> {
    let path = match flag {
        Some("none") | Some("") => return Ok(None),
        Some(p) => PathBuf::from(p),
        None => {
            let from_env = ["SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"]
                .iter()
                .filter_map(std::env::var_os)
                .map(PathBuf::from)
                .find(|p| p.is_file());
            match from_env.or_else(|| {
                Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt")).filter(|p| p.is_file())
            }) {
                Some(p) => p,
                None => return Ok(None),
            }
        }
    };
    let data = std::fs::read(&path).map_err(io_err(&path))?;
    Ok(Some((path, data)))
}

/// What an instance image is built on, and whose it is (for the shelf).
pub(super) struct Over<'a> {
    pub parent: &'a str,
    /// `owner/name`.
    pub repo: &'a str,
}

impl<'a> Over<'a> {
    pub fn new(parent: &'a str, inst: &'a Instance) -> Over<'a> {
        Over {
            parent,
            repo: &inst.repo,
        }
    }
}

impl DockerBackend {
    /// The instance image of `inst`: pulled under `--namespace`, else built
    /// tier by tier (root, base, env, instance) where not found.
    pub async fn prepare_env(
        &self,
        rs: &ResolvedSpec,
        inst: &Instance,
        _log_dir: &Path,
    ) -> Result<DockerEnv, EnvError> {
        if let Some(ns) = &self.args.namespace {
            return Ok(self.namespace_env(ns, inst).await?);
        }
        let spec = &rs.spec;
        // The provider chain picks the interpreter and, with it, the suite.
        let python = match &spec.python {
            Some(v) => Some(self.python(v).map_err(DockerError::from)?),
            None => None,
        };
        let suite = python
            .as_ref()
            .map(|p| p.interp.suite)
            .or_else(|| toolchain_suite(spec))
            .unwrap_or(Suite::Bookworm);
        let chosen = self.chosen_toolchains(spec, suite).await?;
        let root = self.root(suite).await?;
        let base = base_plan(suite, &root, self.ca.as_deref());
        self.ensure_built(&base).await?;
        // The spec's `apt_base_packages` go below the interpreter, so that
        // envs on other Pythons naming the same list share them; its
        // `pip_base_packages` on it. Specs with a Python get their env on
        // the python image (the interpreter and a venv with pinned tools);
        // others on the base.
        let below = self.below_python(spec, &base.name, suite).await?;
        let mut parent = match &python {
            Some(p) => {
                let image = self.ensure_python_image(p.clone(), &below).await?;
                self.above_python(spec, image, &p.interp, suite).await?
            }
            None => below,
        };
        // Toolchains come between: shared by every env that asks for them.
        if !chosen.is_empty() {
            let list: Vec<ChosenToolchain> = chosen.iter().map(|c| (**c).clone()).collect();
            let name = toolchain_image_name(&list, &parent, suite);
            let on = parent.clone();
            self.ensure_named(Tier::Base, &name, || async move {
                Ok(toolchain_plan(&list, &on, suite))
            })
            .await?;
            parent = name;
        }
        let toolchains: Vec<Toolchain> = chosen.iter().map(|c| c.toolchain.clone()).collect();
        let inputs = self.env_inputs(spec, inst).await?;
        let interp = python.as_ref().map(|p| &p.interp);
        let env = env_plan_on(suite, interp, &toolchains, &parent, spec, &inputs);
        self.ensure_built(&env).await?;
        let (tree, submodules) = self.base_tree(inst, spec).await?;
        let anchor = match submodules.is_empty() {
            true => self.snapshot_anchor(inst, spec, &tree).await?,
            // Submodule trees come from other mirrors: sent whole.
            false => None,
        };
        let (image, (id, digest)) = match anchor {
            Some(anchor) => {
                self.delta_instance(&env.name, inst, spec, tree, anchor)
                    .await?
            }
            None => {
                let plan = instance_plan(&env.name, &inst.instance_id, spec, tree, submodules);
                let name = plan.name.clone();
                let over = Over::new(&env.name, inst);
                let built = self
                    .ensure_over(Tier::Instance, &name, Some(over), || async {
                        Ok(plan.with_compiler_remote(self.compiler_remote_for(spec).await))
                    })
                    .await?;
                (name, built)
            }
        };
        Ok(DockerEnv {
            image,
            id,
            digest,
            python: interp.cloned(),
            toolchains,
        })
    }

    /// The toolchains of `spec` on `suite`: the provider chain, run once per
    /// (language, version) and run, off the async threads (a registry
    /// download can take a minute).
    async fn chosen_toolchains(
        &self,
        spec: &Spec,
        suite: Suite,
    ) -> Result<Vec<Arc<ChosenToolchain>>, DockerError> {
        let mut out = Vec::new();
        for (lang, asked) in &spec.toolchains {
            let key = (*lang, asked.trim().to_string());
            let mut m = self.toolchains.lock().await;
            if let Some(c) = m.get(&key) {
                out.push(c.clone());
                continue;
            }
            let (lang, asked2, search) = (*lang, key.1.clone(), self.toolchain_search.clone());
            let c = tokio::task::spawn_blocking(move || {
                crate::toolchain::resolve(lang, &asked2, suite, &search)
                    .and_then(super::toolchain::choose)
            })
            .await
            .map_err(|e| DockerError::Config(format!("toolchain task: {e}")))??;
            tracing::info!(
                "toolchain {lang} {}: {}{}",
                key.1,
                c.toolchain.describe(),
                c.copies
                    .iter()
                    .map(|(d, f)| format!(
                        ", {} files ({} MiB) copied to {d}",
                        f.entries(),
                        f.size() >> 20
                    ))
                    .collect::<String>()
            );
            let c = Arc::new(c);
            m.insert(key, c.clone());
            out.push(c);
        }
        Ok(out)
    }

    /// The python image of `python` on `base`: named from the build's file
    /// list (no read), its context (the whole build as a tar) made only when
    /// the engine lacks it or `--force-rebuild` asks for a fresh one.
    async fn ensure_python_image(
        &self,
        python: Arc<ChosenPython>,
        base: &str,
    ) -> Result<String, DockerError> {
        let name = python_image_name(&python.interp, base, python.manifest.as_ref());
        let base = base.to_string();
        self.ensure_named(Tier::Base, &name, || async move {
            tokio::task::spawn_blocking(move || {
                python_plan(&python.interp, &base, python.manifest.as_ref())
            })
            .await
            .map_err(|e| DockerError::Config(format!("python image task: {e}")))?
            .map_err(DockerError::from)
        })
        .await?;
        Ok(name)
    }

    /// Pull `name`; [`DockerError::Pull`] when no registry gives it.
    async fn pull(&self, name: &str, limit: Duration) -> Result<(), DockerError> {
        let opts = CreateImageOptionsBuilder::default()
            .from_image(name)
            .build();
        let mut stream = self.docker().await?.create_image(Some(opts), None, None);
        let pulled = tokio::time::timeout(limit, async {
            while let Some(item) = stream.next().await {
                item.map_err(|error| PullFailure::Registry { error })?;
            }
            Ok(())
        })
        .await;
        pulled
            .unwrap_or(Err(PullFailure::Timeout {
                secs: limit.as_secs(),
            }))
            .map_err(|reason| DockerError::Pull {
                image: name.to_string(),
                reason,
            })
    }

    async fn namespace_env(&self, ns: &str, inst: &Instance) -> Result<DockerEnv, DockerError> {
        let name = namespace_image(ns, &inst.instance_id, &self.args.instance_image_tag);
        let lock = self.lock_for(&name);
        let _g = lock.lock().await;
        let found = self.inspect(&name).await?.is_some();
        if !found {
            tracing::info!("pulling {name}");
            self.pull(&name, Duration::from_secs(self.args.build_timeout))
                .await?;
        }
        let (id, digest) = self
            .inspect(&name)
            .await?
            .ok_or_else(|| DockerError::Pull {
                image: name.clone(),
                reason: PullFailure::Absent,
            })?;
        self.note_used(Tier::Instance, &name);
        // Found in the engine is a hit; pulled, a miss (as a build is).
        self.tell(ImageEvent::Looked {
            tier: Tier::Instance,
            hit: found,
        });
        Ok(DockerEnv {
            image: name,
            id,
            digest,
            python: None,
            toolchains: Vec::new(),
        })
    }

    /// What the env image of `spec` reads from the mirrors for `inst`: the
    /// requirements file and the conda environment file at the setup
    /// commit, and the spec's source trees.
    async fn env_inputs(&self, spec: &Spec, inst: &Instance) -> Result<EnvInputs, EnvError> {
        let (repos, inst, spec) = (self.repos.clone(), inst.clone(), spec.clone());
        tokio::task::spawn_blocking(move || {
            let packages = crate::conda::translate_packages(&spec.conda_packages)
                .map_err(|e| EnvError::Other(e.to_string()))?;
            let requirements = match &spec.requirements {
                Some(path) => Some(crate::backend::filter_requirements(
                    &crate::backend::read_requirements(&repos, &inst, path)?,
                )),
                None => None,
            };
            let environment = crate::backend::environment_for(&repos, &inst, &spec)?;
            let mut sources = Vec::new();
            for (name, src) in &spec.sources {
                let about = format!("source {name} ({} at {})", src.repo, src.commit);
                let (mirror, r, commit) =
                    crate::backend::source_mirror(&repos, &about, &src.repo, &src.commit)?;
                let tree = r
                    .find_commit(commit)
                    .map(|c| c.tree_id())
                    .map_err(|e| crate::backend::source_failed(&about, &src.repo, e))?;
                sources.push((name.clone(), TreeSource { repo: mirror, tree }));
            }
            let git = spec
                .git_sources
                .iter()
                .map(|(name, src)| {
                    let about = format!(
                        "git source {name} ({} at {}, served for {})",
                        src.repo, src.commit, src.url
                    );
                    let (_, r, commit) =
                        crate::backend::source_mirror(&repos, &about, &src.repo, &src.commit)?;
                    super::gitsources::read(&r, name, src, commit)
                        .map_err(|e| crate::backend::source_failed(&about, &src.repo, e))
                })
                .collect::<Result<Vec<_>, EnvError>>()?;
            Ok(EnvInputs {
                packages,
                requirements,
                environment,
                sources,
                git,
            })
        })
        .await
        .map_err(|e| EnvError::Infra(format!("env inputs task: {e}")))?
    }

    /// The root image of a suite: `--base-image` from the engine or a
    /// registry, else bootstrapped with debootstrap. Chosen once per run.
    async fn root(&self, suite: Suite) -> Result<Root, DockerError> {
        let lock = self.lock_for(&format!("root:{}", suite.name()));
        let _g = lock.lock().await;
        if let Some(r) = locked(&self.roots).get(&suite) {
            return Ok(r.clone());
        }
        let wanted = self.args.base_image.replace("{suite}", suite.name());
        let mut why = String::from("--base-image none");
        if self.args.base_image != "none" {
            if let Some((id, _)) = self.inspect(&wanted).await? {
                tracing::info!(
                    "base images for {}: from {wanted} (in the engine)",
                    suite.name()
                );
                return Ok(self.chose_root(suite, Root { name: wanted, id }));
            }
            match self.pull(&wanted, ROOT_PULL_TIMEOUT).await {
                Ok(()) => {
                    if let Some((id, _)) = self.inspect(&wanted).await? {
                        tracing::info!("base images for {}: pulled {wanted}", suite.name());
                        return Ok(self.chose_root(suite, Root { name: wanted, id }));
                    }
                    why = format!("{wanted} absent after its pull");
                }
                Err(DockerError::Pull { reason, .. }) => {
                    why = format!("pulling {wanted} failed: {reason}")
                }
                Err(e) => return Err(e),
            }
        }
        let name = bootstrap_image(suite);
        if let Some((id, _)) = self.inspect(&name).await? {
            tracing::info!(
                "base images for {}: bootstrapped {name} (in the engine; {why})",
                suite.name()
            );
            return Ok(self.chose_root(suite, Root { name, id }));
        }
        tracing::warn!(
            "base images for {}: bootstrapping {name} with debootstrap ({why})",
            suite.name()
        );
        let id = self.bootstrap(suite, &name).await?;
        Ok(self.chose_root(suite, Root { name, id }))
    }

    fn chose_root(&self, suite: Suite, root: Root) -> Root {
        self.note_used(Tier::Base, &root.name);
        locked(&self.roots).insert(suite, root.clone());
        root
    }

    /// Run harness-scripts/bootstrap-base.sh and import its archive.
    async fn bootstrap(&self, suite: Suite, name: &str) -> Result<String, DockerError> {
        let dir = self
            .build_logs
            .join(Tier::Base.log_dir())
            .join(name.replace(':', "__"));
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        std::fs::create_dir_all(&self.scratch).map_err(io_err(&self.scratch))?;
        let script = dir.join("bootstrap-base.sh");
        std::fs::write(&script, BOOTSTRAP_SCRIPT).map_err(io_err(&script))?;
        let log = dir.join("build_image.log");
        let started = Instant::now();
        let out_file = std::fs::File::create(&log).map_err(io_err(&log))?;
        let err_file = out_file.try_clone().map_err(io_err(&log))?;
        let archive =
            self.scratch
                .join(format!("root-{}-{}.tar", suite.name(), std::process::id()));
        let fail = |reason: String| DockerError::Bootstrap {
            suite: suite.name(),
            reason,
            log: log.clone(),
        };
        let mut child = tokio::process::Command::new("bash")
            .arg(&script)
            .arg(suite.name())
            .arg(&archive)
            .stdin(std::process::Stdio::null())
            .stdout(out_file)
            .stderr(err_file)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot run bash: {e}")))?;
        let status =
            match tokio::time::timeout(Duration::from_secs(self.args.build_timeout), child.wait())
                .await
            {
                Ok(s) => s.map_err(|e| fail(e.to_string()))?,
                Err(_) => {
                    return Err(fail(format!(
                        "not done within --build-timeout {}s",
                        self.args.build_timeout
                    )))
                }
            };
        if !status.success() {
            let _ = std::fs::remove_file(&archive);
            return Err(fail(format!("{} exited {status}", script.display())));
        }
        let bytes = tokio::fs::read(&archive).await.map_err(io_err(&archive));
        let _ = std::fs::remove_file(&archive);
        let bytes = bytes?;
        let (repo, tag) = name.rsplit_once(':').unwrap_or((name, "latest"));
        let opts = CreateImageOptionsBuilder::default()
            .from_src("-")
            .repo(repo)
            .tag(tag)
            .build();
        let mut stream =
            self.docker()
                .await?
                .create_image(Some(opts), Some(body_full(bytes.into())), None);
        let imported = tokio::time::timeout(API_TIMEOUT * 5, async {
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        })
        .await;
        match imported {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(DockerError::Api {
                    op: format!("import {name}"),
                    source,
                })
            }
            Err(_) => {
                return Err(DockerError::Timeout {
                    op: format!("import {name}"),
                    secs: API_TIMEOUT.as_secs() * 5,
                })
            }
        }
        let (id, _) = self
            .inspect(name)
            .await?
            .ok_or_else(|| fail("the imported image is absent".into()))?;
        // The same last line as a build's: `patchgrade images` estimates a
        // cold start's bootstrap from it.
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log) {
            use std::io::Write;
            let took = crate::backend::docker::inventory::builds::took_line(
                name,
                started.elapsed().as_secs_f64(),
            );
            let _ = writeln!(f, "\n{took}");
        }
        locked(&self.built).insert(name.to_string());
        Ok(id)
    }

    /// The image of `plan`, built unless it exists (and `--force-rebuild`
    /// did not ask for a fresh one). Concurrent callers wait for one build.
    pub(super) async fn ensure_built(
        &self,
        plan: &ImagePlan,
    ) -> Result<(String, Option<String>), DockerError> {
        let plan = plan.clone();
        self.ensure_named(plan.tier, &plan.name.clone(), || async { Ok(plan) })
            .await
    }

    /// The image `name` of `tier`, built from the plan `make` gives unless
    /// it exists; `make` runs only when a build is due.
    pub(super) async fn ensure_named<F, Fut>(
        &self,
        tier: Tier,
        name: &str,
        make: F,
    ) -> Result<(String, Option<String>), DockerError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ImagePlan, DockerError>>,
    {
        self.ensure_over(tier, name, None, make).await
    }

    /// [`Self::ensure_named`] for an instance image of `over.repo` built on
    /// `over.parent`: one the engine lacks is loaded from the shelf when it
    /// is there.
    pub(super) async fn ensure_over<F, Fut>(
        &self,
        tier: Tier,
        name: &str,
        over: Option<Over<'_>>,
        make: F,
    ) -> Result<(String, Option<String>), DockerError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ImagePlan, DockerError>>,
    {
        let lock = self.lock_for(name);
        let _g = lock.lock().await;
        let fresh = locked(&self.built).contains(name);
        if let Some(o) = &over {
            let known = (o.parent.to_string(), o.repo.to_string());
            locked(&self.parents).insert(name.to_string(), known);
        }
        if !self.args.force_rebuild || fresh {
            if let Some(found) = self.inspect(name).await? {
                self.note_used(tier, name);
                self.tell(ImageEvent::Looked { tier, hit: true });
                return Ok(found);
            }
            if let Some(o) = &over {
                if let Some(found) = self.unshelve(name, o.parent).await {
                    self.note_used(tier, name);
                    self.tell(ImageEvent::Looked { tier, hit: true });
                    return Ok(found);
                }
            }
        }
        let plan = make().await?;
        debug_assert_eq!(plan.name, name);
        let built = self.build(&plan).await;
        crate::heap::release();
        built?;
        self.note_used(tier, name);
        self.tell(ImageEvent::Looked { tier, hit: false });
        locked(&self.built).insert(name.to_string());
        self.inspect(name).await?.ok_or_else(|| DockerError::Build {
            image: name.to_string(),
            reason: "the image is absent after its build".into(),
            log: self.build_dir(&plan).join("build_image.log"),
        })
    }

    fn build_dir(&self, plan: &ImagePlan) -> PathBuf {
        self.build_logs
            .join(plan.tier.log_dir())
            .join(plan.log_name())
    }

    async fn build(&self, plan: &ImagePlan) -> Result<(), DockerError> {
        use std::io::Write;
        let dir = self.build_dir(plan);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        // What built it, for people: Dockerfile and scripts (not the tree).
        for (name, data) in std::iter::once(("Dockerfile", plan.dockerfile.as_bytes())).chain(
            plan.files
                .iter()
                // The tree's files (an instance's pack among them), the git
                // sources' packs and a snapshot's objects are not scripts.
                .filter(|f| !NOT_SCRIPTS.iter().any(|p| f.path.starts_with(p)))
                .map(|f| (f.path.as_str(), f.data.as_slice())),
        ) {
            let p = dir.join(name);
            std::fs::write(&p, data).map_err(io_err(&p))?;
        }
        let log_path = dir.join("build_image.log");
        let mut log = std::fs::File::create(&log_path).map_err(io_err(&log_path))?;
        tracing::info!("building {}", plan.name);
        let started = Instant::now();
        // The context streams to the engine as it is made (`chunks`).
        let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_IN_FLIGHT);
        let plan2 = plan.clone();
        let producer = tokio::task::spawn_blocking(move || {
            let w = ChunkSender::new(tx.clone());
            let made = plan2
                .write_context(w)
                .and_then(|w| w.send().map_err(super::ImageError::Tar));
            if let Err(e) = &made {
                // The engine must not take a cut context for a whole one.
                let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
            made
        });
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        });
        let opts = BuildImageOptionsBuilder::default()
            .t(&plan.name)
            .rm(true)
            .forcerm(true)
            .nocache(self.args.force_rebuild)
            .labels(&HashMap::from([("patchgrade.tier", plan.tier.log_dir())]))
            .build();
        let docker = self.docker().await?;
        let mut stream = docker.build_image(opts, None, Some(body_try_stream(body)));
        let mut tail: Vec<String> = Vec::new();
        let fail = |reason: String| DockerError::Build {
            image: plan.name.clone(),
            reason,
            log: log_path.clone(),
        };
        let limit = Duration::from_secs(self.args.build_timeout);
        let result = tokio::time::timeout(limit, async {
            while let Some(item) = stream.next().await {
                match item {
                    Ok(info) => {
                        if let Some(s) = info.stream.or(info.status) {
                            let _ = log.write_all(s.as_bytes());
                            tail.extend(
                                s.lines().filter(|l| !l.trim().is_empty()).map(String::from),
                            );
                            if tail.len() > 5 {
                                tail.drain(..tail.len() - 5);
                            }
                        }
                    }
                    Err(bollard::errors::Error::DockerStreamError { error }) => {
                        let _ = writeln!(log, "ERROR: {error}");
                        return Err(fail(format!("{error} (last output: {})", tail.join(" | "))));
                    }
                    Err(source) => {
                        return Err(DockerError::Api {
                            op: format!("build {}", plan.name),
                            source,
                        })
                    }
                }
            }
            Ok(())
        })
        .await;
        // `patchgrade images` reads it back for its estimates.
        let _ = writeln!(
            log,
            "\n{}",
            crate::backend::docker::inventory::builds::took_line(
                &plan.name,
                started.elapsed().as_secs_f64()
            )
        );
        drop(stream);
        // A context that could not be made (a blob missing from the
        // mirror, say) is the cause, whatever the engine said of the cut
        // stream; the engine going away first shows as a broken pipe here.
        match producer.await {
            Ok(Err(super::ImageError::Tar(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Ok(Err(e)) => {
                // Should the engine have built from the part it got, the
                // image must not be taken for a whole one on the next run.
                let opts = bollard::query_parameters::RemoveImageOptionsBuilder::default()
                    .force(true)
                    .build();
                let _ = docker.remove_image(&plan.name, Some(opts), None).await;
                return Err(e.into());
            }
            Ok(Ok(())) => {}
            Err(e) => return Err(DockerError::Config(format!("context task: {e}"))),
        }
        match result {
            Ok(r) => r,
            Err(_) => Err(fail(format!(
                "not done within --build-timeout {}s",
                self.args.build_timeout
            ))),
        }
    }
}
