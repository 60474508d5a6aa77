//! Where an evaluation's tests ran, as its record keeps it.
//!
//! Written as the one line of text records have always held (`image NAME ID
//! (DIGEST); python ...`, `venv PATH`, `python PATH`, `host`, with ` on node
//! N` when a swarm placed it), so records of 0.1.0, today's, and tools that
//! read the text are unaffected; read back into the typed form here, the
//! only place that parses it.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a record's `environment` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Environment {
    /// A Docker image (docker and swarm backends).
    Image(ImageEnv),
    /// The local backend's shared venv of the spec's packages.
    Venv(PathBuf),
    /// The local backend with the spec's interpreter and no venv.
    Python(PathBuf),
    /// The local backend with the host's own interpreter.
    Host,
    /// Text this version does not read, kept as written.
    Other(String),
}

/// The image an evaluation ran in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageEnv {
    /// Image name (`repository:tag`).
    pub image: String,
    /// Image id (`sha256:...`).
    pub id: String,
    /// The registry digest of a pulled image, or the registry reference a
    /// swarm ran (`HOST:PORT/name@sha256:...`).
    pub digest: Option<String>,
    /// The interpreter of the image's venv, described
    /// (`Interpreter::describe`).
    pub python: Option<String>,
    /// The image's toolchains, each described (`Toolchain::describe`:
    /// `rust 1.95.0 (rustup …; spec says 1.81)`), after the interpreter.
    pub toolchains: Vec<String>,
    /// The swarm node that ran the evaluation.
    pub node: Option<String>,
}

const NODE: &str = " on node ";

impl Environment {
    /// The swarm node that ran the evaluation, if one did.
    pub fn node(&self) -> Option<&str> {
        match self {
            Environment::Image(i) => i.node.as_deref(),
            _ => None,
        }
    }

    /// Record the node a backend placed the evaluation on (images only:
    /// the local backend places nothing).
    pub fn set_node(&mut self, node: &str) {
        if let Environment::Image(i) = self {
            i.node = Some(node.to_string());
        }
    }

    /// The image id (`sha256:...`) the tests ran in, if an image.
    pub fn image_id(&self) -> Option<&str> {
        match self {
            Environment::Image(i) => Some(&i.id),
            _ => None,
        }
    }

    /// Read the text a record holds. Anything that does not read back to
    /// the same text is kept as `Other`, so no record changes by being read.
    pub fn parse(text: &str) -> Environment {
        let typed = match text {
            "host" => Some(Environment::Host),
            _ => {
                if let Some(p) = text.strip_prefix("venv ") {
                    Some(Environment::Venv(PathBuf::from(p)))
                } else if let Some(p) = text.strip_prefix("python ") {
                    Some(Environment::Python(PathBuf::from(p)))
                } else {
                    text.strip_prefix("image ")
                        .and_then(parse_image)
                        .map(Environment::Image)
                }
            }
        };
        match typed {
            Some(e) if e.to_string() == text => e,
            _ => Environment::Other(text.to_string()),
        }
    }
}

/// `NAME ID[ (DIGEST)][; PYTHON][ on node N]`.
fn parse_image(rest: &str) -> Option<ImageEnv> {
    let (rest, node) = match rest.rsplit_once(NODE) {
        Some((r, n)) => (r, Some(n.to_string())),
        None => (rest, None),
    };
    // The interpreter's description may hold `; ` itself: the first one
    // ends the image part. Toolchains follow it, each starting `; <lang> `
    // and a digit (`; rust 1.95.0 (...)`).
    let (image_part, tail) = match rest.split_once("; ") {
        Some((i, p)) => (i, Some(p)),
        None => (rest, None),
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(tail) = tail {
        let mut start = 0;
        for (i, _) in tail.match_indices("; ") {
            if starts_toolchain_text(&tail[i + 2..]) {
                parts.push(tail[start..i].to_string());
                start = i + 2;
            }
        }
        parts.push(tail[start..].to_string());
    }
    let python = match parts.first() {
        Some(p) if !starts_toolchain_text(p) => Some(parts.remove(0)),
        _ => None,
    };
    let (image, rest) = image_part.split_once(' ')?;
    let (id, digest) = match rest.split_once(' ') {
        Some((id, d)) => (
            id,
            Some(d.strip_prefix('(')?.strip_suffix(')')?.to_string()),
        ),
        None => (rest, None),
    };
    Some(ImageEnv {
        image: image.to_string(),
        id: id.to_string(),
        digest,
        python,
        toolchains: parts,
        node,
    })
}

/// Whether a part of an image's description is a toolchain's.
fn starts_toolchain_text(s: &str) -> bool {
    crate::toolchain::LANGUAGES.iter().any(|l| {
        s.strip_prefix(l.name())
            .and_then(|r| r.strip_prefix(' '))
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    })
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Environment::Image(i) => {
                write!(f, "image {} {}", i.image, i.id)?;
                if let Some(d) = &i.digest {
                    write!(f, " ({d})")?;
                }
                if let Some(p) = &i.python {
                    write!(f, "; {p}")?;
                }
                for t in &i.toolchains {
                    write!(f, "; {t}")?;
                }
                if let Some(n) = &i.node {
                    write!(f, "{NODE}{n}")?;
                }
                Ok(())
            }
            Environment::Venv(p) => write!(f, "venv {}", p.display()),
            Environment::Python(p) => write!(f, "python {}", p.display()),
            Environment::Host => f.write_str("host"),
            Environment::Other(text) => f.write_str(text),
        }
    }
}

impl Serialize for Environment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Environment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Environment, D::Error> {
        let text = String::deserialize(d)?;
        Ok(Environment::parse(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(digest: Option<&str>, python: Option<&str>, node: Option<&str>) -> Environment {
        Environment::Image(ImageEnv {
            image: "sweb.eval.x86_64.a__b-1:latest".into(),
            id: "sha256:abc".into(),
            digest: digest.map(String::from),
            python: python.map(String::from),
            toolchains: Vec::new(),
            node: node.map(String::from),
        })
    }

    #[test]
    fn every_form_reads_back_to_its_text() {
        let py = "python 3.6.15 (uv /root/.local/share/uv/python/cpython-3.6.15); spec says 3.5, runs on 3.6";
        let cases = [
            (Environment::Host, "host".to_string()),
            (
                Environment::Venv("/c/envs/abc".into()),
                "venv /c/envs/abc".into(),
            ),
            (
                Environment::Python("/usr/bin/python3.9".into()),
                "python /usr/bin/python3.9".into(),
            ),
            (
                image(None, None, None),
                "image sweb.eval.x86_64.a__b-1:latest sha256:abc".into(),
            ),
            (
                image(Some("sha256:def"), Some(py), None),
                format!("image sweb.eval.x86_64.a__b-1:latest sha256:abc (sha256:def); {py}"),
            ),
            (
                image(
                    Some("127.0.0.1:5000/sweb.eval.x86_64.a__b-1@sha256:def"),
                    None,
                    Some("vm-2/k3x"),
                ),
                "image sweb.eval.x86_64.a__b-1:latest sha256:abc (127.0.0.1:5000/sweb.eval.x86_64.a__b-1@sha256:def) on node vm-2/k3x".into(),
            ),
        ];
        for (env, text) in cases {
            assert_eq!(env.to_string(), text);
            assert_eq!(Environment::parse(&text), env, "{text}");
            let json = serde_json::to_value(&env).unwrap();
            assert_eq!(json, serde_json::Value::String(text.clone()));
            let back: Environment = serde_json::from_value(json).unwrap();
            assert_eq!(back, env);
        }
    }

    #[test]
    fn nodes_and_image_ids_are_fields() {
        let mut env = image(None, Some("python 3.11.9 (debian-suite bookworm)"), None);
        assert_eq!(env.node(), None);
        env.set_node("host1/n1");
        assert_eq!(env.node(), Some("host1/n1"));
        assert_eq!(env.image_id(), Some("sha256:abc"));
        let mut local = Environment::Venv("/x/y".into());
        local.set_node("n");
        assert_eq!((local.node(), local.image_id()), (None, None));
    }

    #[test]
    fn unknown_text_is_kept_as_written() {
        for text in ["env x", "image onlyname", "image a b c", "image a b (d", ""] {
            let env = Environment::parse(text);
            assert_eq!(env, Environment::Other(text.to_string()), "{text}");
            assert_eq!(env.to_string(), text);
        }
    }
}

#[cfg(test)]
mod toolchain_tests {
    use super::*;

    #[test]
    fn toolchains_follow_the_interpreter_and_read_back() {
        let rust =
            "rust 1.95.0 (rustup /r/toolchains/1.95.0-x86_64-unknown-linux-gnu; spec says 1.81)";
        let go = "go 1.23.8 (go-proxy golang.org/toolchain@v0.0.1-go1.23.8.linux-amd64)";
        let py = "python 3.6.15 (pyenv /p); spec says 3.5, runs on 3.6";
        for (python, toolchains) in [
            (None, vec![rust.to_string()]),
            (Some(py.to_string()), vec![rust.to_string(), go.to_string()]),
            (Some(py.to_string()), vec![]),
        ] {
            let e = Environment::Image(ImageEnv {
                image: "patchgrade.eval.x86_64.a-1:t".into(),
                id: "sha256:abc".into(),
                digest: None,
                python,
                toolchains,
                node: Some("n1".into()),
            });
            let text = e.to_string();
            assert_eq!(Environment::parse(&text), e, "{text}");
        }
    }
}
