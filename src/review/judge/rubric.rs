//! The judge's rubric: criteria scored 1-5, each score with an anchor.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The default rubric, `images/rubrics/default.yaml`.
pub const DEFAULT_YAML: &str = include_str!("../../../images/rubrics/default.yaml");

/// One criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Key in the judge's reply: lowercase letters, digits, `_`.
    pub id: String,
    pub name: String,
    pub question: String,
    /// Anchors for scores 1 to 5, every one of them.
    pub anchors: BTreeMap<u8, String>,
}

/// A rubric file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    pub name: String,
    #[serde(default)]
    pub version: u32,
    pub criteria: Vec<Criterion>,
}

/// Why a rubric was refused.
#[derive(Debug, thiserror::Error)]
pub enum RubricError {
    #[error("failed to read rubric {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("rubric {path}: {source}")]
    Yaml {
        path: String,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("rubric {path}: {what}")]
    Invalid { path: String, what: String },
}

impl Rubric {
    /// The default rubric.
    pub fn default_rubric() -> Rubric {
        Rubric::parse(DEFAULT_YAML, "images/rubrics/default.yaml")
            .expect("the embedded default rubric is valid (unit-tested)")
    }

    /// Reads and checks a rubric file.
    pub fn load(path: &Path) -> Result<Rubric, RubricError> {
        let text = std::fs::read_to_string(path).map_err(|source| RubricError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Rubric::parse(&text, &path.display().to_string())
    }

    /// Parses and checks rubric YAML; `origin` names it in errors.
    pub fn parse(yaml: &str, origin: &str) -> Result<Rubric, RubricError> {
        let r: Rubric = serde_yaml_ng::from_str(yaml).map_err(|source| RubricError::Yaml {
            path: origin.to_string(),
            source,
        })?;
        let bad = |what: String| RubricError::Invalid {
            path: origin.to_string(),
            what,
        };
        if r.criteria.is_empty() {
            return Err(bad("no criteria".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &r.criteria {
            if c.id.is_empty()
                || !c
                    .id
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
            {
                return Err(bad(format!(
                    "criterion id {:?} must be lowercase letters, digits and _",
                    c.id
                )));
            }
            if !seen.insert(c.id.as_str()) {
                return Err(bad(format!("criterion {} appears twice", c.id)));
            }
            let keys: Vec<u8> = c.anchors.keys().copied().collect();
            if keys != [1, 2, 3, 4, 5] {
                return Err(bad(format!(
                    "criterion {} needs anchors for exactly 1, 2, 3, 4 and 5 (has {keys:?})",
                    c.id
                )));
            }
        }
        Ok(r)
    }

    /// SHA-256 of the rubric's canonical JSON: formatting and comments of the
    /// YAML do not change it, any criterion text does.
    pub fn hash(&self) -> String {
        let json = serde_json::to_string(self).expect("a rubric serialises");
        hex(&Sha256::digest(json.as_bytes()))
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.criteria.iter().map(|c| c.id.as_str())
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_rubric_is_valid() {
        let r = Rubric::default_rubric();
        assert_eq!(
            r.ids().collect::<Vec<_>>(),
            vec!["correctness_risk", "readability", "idiom", "scope", "tests"]
        );
        assert_eq!(r.hash().len(), 64);
        // Comments and layout do not change the hash.
        let again = Rubric::parse(&format!("# note\n{DEFAULT_YAML}\n\n"), "x").unwrap();
        assert_eq!(again.hash(), r.hash());
    }

    #[test]
    fn bad_rubrics_are_refused_with_the_reason() {
        let e = Rubric::parse("name: x\ncriteria: []\n", "r.yaml").unwrap_err();
        assert_eq!(e.to_string(), "rubric r.yaml: no criteria");
        let y = "name: x\ncriteria:\n  - id: a\n    name: A\n    question: q\n    anchors: {1: a, 2: b, 3: c, 5: e}\n";
        let e = Rubric::parse(y, "r.yaml").unwrap_err();
        assert!(e.to_string().contains("exactly 1, 2, 3, 4 and 5"), "{e}");
        let e = Rubric::parse(&y.replace("id: a", "id: A b"), "r.yaml").unwrap_err();
        assert!(e.to_string().contains("lowercase"), "{e}");
        let e = Rubric::parse("name: x\nbogus: 1\ncriteria: []\n", "r.yaml").unwrap_err();
        assert!(e.to_string().contains("r.yaml"), "{e}");
    }
}
