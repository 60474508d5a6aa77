//! The local backend: eval scripts run on the host, inside bubblewrap where
//! it is installed (no network, only the workspace writable).
//!
//! A spec's Python environment is a virtualenv cached by content hash and
//! shared read-only by every evaluation; each evaluation gets a thin overlay
//! venv (a `.pth` file pointing at the shared site-packages) so that an
//! editable install of one candidate tree never leaks into another.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::process::Command;

use super::{EnvError, InfraError, RunOutput, Workspace};
use crate::dataset::Instance;
use crate::record::Environment;
use crate::repo::RepoCache;
use crate::spec::{hex, ResolvedSpec};

#[derive(Debug)]
pub struct LocalBackend {
    envs_root: PathBuf,
    repos: RepoCache,
    bwrap: Option<PathBuf>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A prepared local environment.
#[derive(Debug, Clone)]
pub struct LocalEnv {
    /// The interpreter for the spec's Python version, if it names one.
    python: Option<PathBuf>,
    /// The shared venv with the spec's packages, if it has any.
    shared: Option<PathBuf>,
}

impl LocalEnv {
    /// What the record says of it.
    pub fn environment(&self) -> Environment {
        match (&self.shared, &self.python) {
            (Some(s), _) => Environment::Venv(s.clone()),
            (None, Some(p)) => Environment::Python(p.clone()),
            (None, None) => Environment::Host,
        }
    }
}

/// Whether bubblewrap works here (it needs user namespaces).
pub fn detect_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let bwrap = std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())?;
    let ok = std::process::Command::new(&bwrap)
        .args(["--ro-bind", "/", "/", "--unshare-net", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(bwrap)
}

impl LocalBackend {
    pub fn new(cache: &Path, repos: RepoCache, sandbox: bool) -> LocalBackend {
        let bwrap = if sandbox { detect_bwrap() } else { None };
        if bwrap.is_none() {
            tracing::warn!(
                "bubblewrap (bwrap) is not available{}: candidate code runs unsandboxed on this host, with network; install bubblewrap or use --backend docker",
                if sandbox { "" } else { " (--no-sandbox)" }
            );
        }
        LocalBackend {
            envs_root: cache.join("envs"),
            repos,
            bwrap,
            locks: Mutex::default(),
        }
    }

    pub fn sandboxed(&self) -> bool {
        self.bwrap.is_some()
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key.to_string()).or_default().clone()
    }

    pub async fn prepare_env(
        &self,
        rs: &ResolvedSpec,
        inst: &Instance,
        log_dir: &Path,
    ) -> Result<LocalEnv, EnvError> {
        let spec = &rs.spec;
        if !spec.apt_packages.is_empty() || !spec.apt_base_packages.is_empty() {
            let all: Vec<&str> = spec
                .apt_base_packages
                .iter()
                .chain(&spec.apt_packages)
                .map(String::as_str)
                .collect();
            return Err(EnvError::Unsupported(format!(
                "the local backend cannot install apt packages ({}); use --backend docker",
                all.join(" ")
            )));
        }
        let python = match &spec.python {
            Some(v) => Some(find_python(v).await?),
            None => None,
        };
        // An install step needs pip even with no packages to add: every
        // spec with one gets a shared env (pip at least).
        if !spec.needs_env() {
            return Ok(LocalEnv {
                python,
                shared: None,
            });
        }
        let Some(python) = python else {
            return Err(EnvError::Unsupported(
                "a spec with pip packages or an install step must name its python version".into(),
            ));
        };
        if !spec.sources.is_empty() || !spec.submodules.is_empty() || !spec.git_sources.is_empty() {
            let names: Vec<&str> = spec
                .sources
                .keys()
                .chain(spec.git_sources.keys())
                .chain(spec.submodules.keys())
                .map(String::as_str)
                .collect();
            return Err(EnvError::Unsupported(format!(
                "the local backend cannot place source trees or submodules from mirrors ({}); use --backend docker",
                names.join(" ")
            )));
        }
        let requirements = match &spec.requirements {
            Some(path) => Some(super::read_requirements(&self.repos, inst, path)?),
            None => None,
        };
        let packages = crate::conda::translate_packages(&spec.conda_packages)
            .map_err(|e| EnvError::Other(e.to_string()))?;
        if !packages.apt_packages.is_empty() {
            return Err(EnvError::Unsupported(format!(
                "the local backend cannot install the Debian packages conda_packages translates to ({}); use --backend docker",
                packages.apt_packages.join(" ")
            )));
        }
        let environment = super::environment_for(&self.repos, inst, spec)?;
        if let Some(e) = &environment {
            if !e.translation.apt_packages.is_empty() {
                return Err(EnvError::Unsupported(format!(
                    "the local backend cannot install the Debian packages {} translates to ({}); use --backend docker",
                    e.source,
                    e.translation.apt_packages.join(" ")
                )));
            }
        }
        let mut h = Sha256::new();
        // Bumped whenever the way envs are built changes, so old envs are
        // not reused for a new recipe.
        h.update(b"local-env-recipe-3");
        h.update(rs.spec.hash());
        h.update(python.to_string_lossy().as_bytes());
        if let Some(r) = &requirements {
            h.update(r.as_bytes());
        }
        if let Some(e) = &environment {
            h.update(e.requirements_text().as_bytes());
        }
        let key = hex(&h.finalize())[..20].to_string();
        let dir = self.envs_root.join(&key);
        let lock = self.lock_for(&key);
        let _g = lock.lock().await;
        if dir.join(".complete").exists() {
            return Ok(LocalEnv {
                python: Some(python),
                shared: Some(dir),
            });
        }
        // A leftover without the marker is a build that died half-way.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&self.envs_root).map_err(|e| EnvError::Other(e.to_string()))?;
        let log = log_dir.join("env_build.log");
        let mut steps: Vec<(String, Vec<String>)> = vec![(
            python.display().to_string(),
            vec!["-m".into(), "venv".into(), dir.display().to_string()],
        )];
        let vpy = dir.join("bin/python").display().to_string();
        let pip = |args: &[&str]| -> (String, Vec<String>) {
            let mut a: Vec<String> = vec![
                "-m".into(),
                "pip".into(),
                "install".into(),
                "--quiet".into(),
                "--disable-pip-version-check".into(),
            ];
            a.extend(args.iter().map(|s| s.to_string()));
            (vpy.clone(), a)
        };
        // Old interpreters' bundled pip (20.x on 3.9) cannot do editable
        // installs of pyproject-only projects.
        // (<25.1: see the Docker env; the legacy editable fallback.)
        steps.push(pip(&["pip>=21.3,<25.1"]));
        if !spec.pip_base_packages.is_empty() {
            // The pip base first, without dependencies, as the Docker
            // backend's pip base image holds it.
            let mut args = vec!["--no-deps"];
            args.extend(spec.pip_base_packages.iter().map(String::as_str));
            steps.push(pip(&args));
        }
        if !packages.requirements.is_empty() {
            // conda's packages first, in a step of their own.
            let first: Vec<&str> = packages.requirements.iter().map(String::as_str).collect();
            steps.push(pip(&first));
        }
        if let Some(text) = &requirements {
            let req_file = dir.with_extension("requirements.txt");
            std::fs::write(&req_file, super::filter_requirements(text))
                .map_err(|e| EnvError::Other(e.to_string()))?;
            steps.push(pip(&["-r", &req_file.display().to_string()]));
        }
        let pins: Vec<&str> = spec.pip_packages.iter().map(String::as_str).collect();
        if let Some(e) = &environment {
            // One resolve with the pins, as in the docker env.
            let env_file = dir.with_extension("environment.txt");
            std::fs::write(&env_file, e.requirements_text())
                .map_err(|e| EnvError::Other(e.to_string()))?;
            let env_path = env_file.display().to_string();
            let mut args = vec!["-r", env_path.as_str()];
            args.extend(&pins);
            steps.push(pip(&args));
        } else if !pins.is_empty() {
            steps.push(pip(&pins));
        }
        // Byte-compile everything now: the env is read-only during tests,
        // and packages installed the legacy way (no .pyc) would otherwise
        // be compiled at import, where a SyntaxWarning in old code becomes
        // an error under `filterwarnings = error` (flask's blinker 1.4).
        // (Files that do not compile, like Python 2 examples shipped in some
        // packages, are not an error: compile_dir's result is ignored.)
        steps.push((
            vpy.clone(),
            vec![
                "-c".into(),
                "import compileall, sys; compileall.compile_dir(sys.argv[1], quiet=2)".into(),
                dir.join("lib").display().to_string(),
            ],
        ));
        for (prog, args) in steps {
            run_logged(&prog, &args, &log).await?;
        }
        std::fs::write(dir.join(".complete"), b"").map_err(|e| EnvError::Other(e.to_string()))?;
        Ok(LocalEnv {
            python: Some(python),
            shared: Some(dir),
        })
    }

    /// The per-evaluation overlay venv; returns its activation line.
    async fn overlay_venv(
        &self,
        env: &LocalEnv,
        python: &Path,
        ws: &Workspace,
    ) -> Result<String, EnvError> {
        let venv = ws.root.join("venv");
        let base = env
            .shared
            .as_ref()
            .map(|s| s.join("bin/python"))
            .unwrap_or_else(|| python.to_path_buf());
        // --without-pip: pip comes from the shared env through the .pth file.
        run_logged(
            &base.display().to_string(),
            &[
                "-m".into(),
                "venv".into(),
                "--without-pip".into(),
                venv.display().to_string(),
            ],
            &ws.root.join("venv.log"),
        )
        .await?;
        if let Some(shared) = &env.shared {
            let site = site_packages(shared)
                .ok_or_else(|| EnvError::Other("shared venv has no site-packages".into()))?;
            let own = site_packages(&venv)
                .ok_or_else(|| EnvError::Other("overlay venv has no site-packages".into()))?;
            std::fs::write(
                own.join("_patchgrade_shared.pth"),
                format!("{}\n", site.display()),
            )
            .map_err(|e| EnvError::Other(e.to_string()))?;
            wrap_console_scripts(&shared.join("bin"), &venv.join("bin"))
                .map_err(|e| EnvError::Other(e.to_string()))?;
        }
        Ok(format!(
            "source {}",
            crate::script::quote(&venv.join("bin/activate").display().to_string())
        ))
    }

    /// Per-evaluation setup before the candidate patch: the overlay venv
    /// (when the spec names a Python), then pre_install and install in the
    /// base tree; returns the env's activation line, if any.
    pub async fn prepare_workspace(
        &self,
        env: &LocalEnv,
        rs: &ResolvedSpec,
        ws: &Workspace,
    ) -> Result<Option<String>, EnvError> {
        let activate = match &env.python {
            Some(python) => Some(self.overlay_venv(env, python, ws).await?),
            None => None,
        };
        // Setup as the reference does it in the instance image: before the
        // candidate patch, with network, from the base tree (upstream code,
        // not the candidate's).
        let tree = crate::script::quote(&ws.tree.display().to_string());
        let setup_log = ws.root.join("setup.log");
        // The spec's environment applies to setup too (e.g. a pretend
        // version for setuptools_scm, which finds no tags in the checkout).
        let exports: String = rs
            .spec
            .env
            .iter()
            .map(|(k, v)| format!("export {k}={} && ", crate::script::quote(v)))
            .collect();
        let act = activate
            .as_ref()
            .map(|a| format!("{a} && "))
            .unwrap_or_default();
        for cmd in rs.spec.pre_install.iter().chain(rs.spec.install.as_ref()) {
            run_logged(
                "bash",
                &["-c".into(), format!("cd {tree} && {exports}{act}{cmd}")],
                &setup_log,
            )
            .await?;
        }
        if !rs.spec.pre_install.is_empty() {
            // A setup commit, so that resetting test files goes back to the
            // set-up tree and `git diff HEAD` shows only the candidate. Dated
            // like the base tree commit (epoch 0), so it is no "future
            // history" for the audit.
            run_logged("bash", &["-c".into(), format!("cd {tree} && git add -u && GIT_AUTHOR_DATE='@0 +0000' GIT_COMMITTER_DATE='@0 +0000' git commit -q --allow-empty -m 'patchgrade setup'")], &setup_log).await?;
        }
        Ok(activate)
    }

    pub async fn run(
        &self,
        env: &LocalEnv,
        rs: &ResolvedSpec,
        ws: &Workspace,
        script: &str,
        timeout: Duration,
        mut cancel: tokio::sync::watch::Receiver<bool>,
    ) -> Result<RunOutput, InfraError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| InfraError::Io { path, source }
        };
        let script_path = ws.root.join("eval.sh");
        std::fs::write(&script_path, script).map_err(io(&script_path))?;
        let home = ws.root.join("home");
        std::fs::create_dir_all(&home).map_err(io(&home))?;
        let out_path = ws.root.join("output.log");
        let out = std::fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;

        let mut cmd = match &self.bwrap {
            Some(bwrap) => {
                let mut c = Command::new(bwrap);
                let root = ws.root.display().to_string();
                c.args([
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                ]);
                // /tmp is private; the shared env may live under it (a
                // TMPDIR cache), so it is mounted back, read-only.
                if let Some(shared) = &env.shared {
                    let shared = shared.display().to_string();
                    c.args(["--ro-bind", &shared, &shared]);
                }
                c.args(["--bind", &root, &root]);
                c.args([
                    "--unshare-pid",
                    "--unshare-ipc",
                    "--die-with-parent",
                    "--new-session",
                ]);
                if !rs.spec.network {
                    c.arg("--unshare-net");
                }
                if !rs.spec.network && rs.spec.blackhole_routes {
                    // The namespace has only loopback; a default route into
                    // it makes packets to other addresses vanish.
                    c.args([
                        "--cap-add",
                        "CAP_NET_ADMIN",
                        "sh",
                        "-c",
                        &format!("{}; exec bash \"$0\"", super::BLACKHOLE_ROUTES),
                    ]);
                    c.arg(&script_path);
                } else {
                    c.arg("bash").arg(&script_path);
                }
                c
            }
            None => {
                let mut c = Command::new("bash");
                c.arg(&script_path);
                c
            }
        };
        cmd.current_dir(&ws.tree)
            .env("HOME", &home)
            .env("TMPDIR", ws.root.join("home"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true);
        let started = Instant::now();
        let program = self
            .bwrap
            .as_ref()
            .map(|b| b.display().to_string())
            .unwrap_or_else(|| "bash".into());
        let mut child = cmd
            .spawn()
            .map_err(|source| InfraError::Spawn { program, source })?;
        let pid = child.id();
        let (timed_out, cancelled, status) = tokio::select! {
            r = child.wait() => {
                let status = r.map_err(|e| InfraError::Other(format!("waiting for the eval script: {e}")))?;
                (false, false, Some(status))
            }
            _ = tokio::time::sleep(timeout) => (true, false, None),
            _ = cancel.wait_for(|c| *c) => (false, true, None),
        };
        if timed_out || cancelled {
            if let Some(pid) = pid {
                // The whole process group: the tests' children too.
                // SAFETY: kill(2) with a negative pid signals a process group.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
            }
            let _ = child.wait().await;
        }
        let elapsed = started.elapsed();
        let log = std::fs::read(&out_path).map_err(io(&out_path))?;
        if self.bwrap.is_some() {
            if let Some(message) = sandbox_failure(status.and_then(|s| s.code()), &log) {
                return Err(InfraError::SandboxFailed { message });
            }
        }
        Ok(RunOutput {
            log,
            timed_out,
            cancelled,
            elapsed,
            container: None,
            oom_killed_at: None,
            capped: None,
        })
    }
}

/// bubblewrap's own failure, told from the script's: bwrap exits 1 with
/// only its "bwrap: ..." message when it cannot set the sandbox up, while
/// every eval script's first output is its xtrace (`+ ...`).
fn sandbox_failure(code: Option<i32>, log: &[u8]) -> Option<String> {
    if code != Some(1) || !log.starts_with(b"bwrap: ") {
        return None;
    }
    let text = String::from_utf8_lossy(log);
    Some(
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_end()
            .to_string(),
    )
}

fn site_packages(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
}

/// Console scripts of the shared env (pytest, ...) re-pointed at the overlay
/// interpreter, so that they see the candidate's editable install.
fn wrap_console_scripts(shared_bin: &Path, own_bin: &Path) -> std::io::Result<()> {
    let shared_py = shared_bin.join("python");
    let prefix = format!("#!{}", shared_py.display());
    for entry in std::fs::read_dir(shared_bin)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default();
        if own_bin.join(name).exists() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(rest) = text.strip_prefix(&prefix) else {
            continue;
        };
        let target = own_bin.join(name);
        std::fs::write(
            &target,
            format!("#!{}{rest}", own_bin.join("python").display()),
        )?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// An interpreter for `version` ("3.9"): `pythonX.Y` or `python3` on PATH,
/// else a pyenv-installed one (pyenv shims only work for the selected
/// version, so the versions folder is searched directly).
async fn find_python(version: &str) -> Result<PathBuf, EnvError> {
    let names = [format!("python{version}"), "python3".to_string()];
    let mut candidates: Vec<PathBuf> = Vec::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in &names {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(name)));
    }
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(versions) = pyenv_root.map(|r| r.join("versions")) {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&versions)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        dirs.sort();
        dirs.reverse();
        candidates.extend(
            dirs.iter()
                .map(|d| d.join("bin").join(format!("python{version}"))),
        );
    }
    for p in candidates.into_iter().filter(|p| p.is_file()) {
        let out = Command::new(&p)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .output()
            .await;
        if let Ok(out) = out {
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == version {
                return Ok(p);
            }
        }
    }
    Err(EnvError::PythonNotFound {
        version: version.to_string(),
        tried: format!("{} on PATH, pyenv versions", names.join(", ")),
    })
}

/// Run a setup command, appending its output to `log`.
async fn run_logged(program: &str, args: &[String], log: &Path) -> Result<(), EnvError> {
    use std::io::Write;
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| EnvError::Other(format!("failed to start {program}: {e}")))?;
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "$ {program} {}", args.join(" "));
        let _ = f.write_all(&out.stdout);
        let _ = f.write_all(&out.stderr);
    }
    if !out.status.success() {
        return Err(EnvError::Command {
            command: format!("{program} {}", args.join(" ")),
            status: out.status.to_string(),
            log: log.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bwrap's real output when it cannot set up the sandbox is told apart
    /// from a script's log (which starts with its xtrace).
    #[test]
    fn a_sandbox_that_did_not_start_is_told_from_a_script_log() {
        let Some(bwrap) = detect_bwrap() else {
            assert!(
                std::env::var_os("PATCHGRADE_REQUIRE_SANDBOX").is_none(),
                "PATCHGRADE_REQUIRE_SANDBOX is set but bwrap does not work here"
            );
            return;
        };
        let out = std::process::Command::new(bwrap)
            .args([
                "--ro-bind",
                "/",
                "/",
                "--ro-bind",
                "/patchgrade-no-such-path",
                "/x",
            ])
            .args(["bash", "-c", "echo ran"])
            .output()
            .unwrap();
        let mut log = out.stdout.clone();
        log.extend_from_slice(&out.stderr);
        let why = sandbox_failure(out.status.code(), &log).expect("a setup failure");
        assert!(why.starts_with("bwrap: "), "{why}");
        assert!(why.contains("/patchgrade-no-such-path"), "{why}");
        // A script that ran and failed with exit 1 is the script's verdict.
        assert_eq!(sandbox_failure(Some(1), b"+ cd /testbed\nbwrap: x\n"), None);
        assert_eq!(sandbox_failure(Some(0), b"bwrap: x\n"), None);
    }
}
