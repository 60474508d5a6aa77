//! The key of one evaluation: model, instance, and sample when the model
//! has several for the instance. Its text forms are made and read here only.

use std::fmt;
use std::str::FromStr;

/// Which evaluation a record is: `<model>/<instance>[@<sample>]` as text.
/// Ordered by model, instance, sample (the order runs list records in).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EvalKey {
    pub model: String,
    pub instance_id: String,
    pub sample_id: Option<String>,
}

impl EvalKey {
    pub fn new(model: &str, instance_id: &str, sample_id: Option<&str>) -> EvalKey {
        EvalKey {
            model: model.to_string(),
            instance_id: instance_id.to_string(),
            sample_id: sample_id.map(str::to_string),
        }
    }

    /// `<instance>[@<sample>]`: the evaluation among its model's.
    pub fn name(&self) -> EvalName<'_> {
        EvalName {
            instance_id: &self.instance_id,
            sample_id: self.sample_id.as_deref(),
        }
    }
}

/// An evaluation among its model's, `<instance>[@<sample>]`: its folder's
/// name in a run folder and how messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalName<'a> {
    pub instance_id: &'a str,
    pub sample_id: Option<&'a str>,
}

impl<'a> EvalName<'a> {
    pub fn new(instance_id: &'a str, sample_id: Option<&'a str>) -> EvalName<'a> {
        EvalName {
            instance_id,
            sample_id,
        }
    }

    /// Read back from its text: the first `@` ends the instance id (the
    /// reference's ids have none; a sample id may).
    pub fn parse(text: &'a str) -> EvalName<'a> {
        match text.split_once('@') {
            Some((instance_id, sample)) => EvalName::new(instance_id, Some(sample)),
            None => EvalName::new(text, None),
        }
    }
}

impl fmt::Display for EvalName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sample_id {
            Some(s) => write!(f, "{}@{s}", self.instance_id),
            None => f.write_str(self.instance_id),
        }
    }
}

impl fmt::Display for EvalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.model, self.name())
    }
}

/// Text that is not `<model>/<instance>[@<sample>]`.
#[derive(Debug, thiserror::Error)]
#[error("not an evaluation key (<model>/<instance>[@<sample>]): {0:?}")]
pub struct BadEvalKey(pub String);

impl FromStr for EvalKey {
    type Err = BadEvalKey;

    /// The last `/` ends the model (model names may hold `/`, instance ids
    /// and sample ids do not).
    fn from_str(s: &str) -> Result<EvalKey, BadEvalKey> {
        let bad = || BadEvalKey(s.to_string());
        let (model, name) = s.rsplit_once('/').ok_or_else(bad)?;
        let name = EvalName::parse(name);
        if model.is_empty() || name.instance_id.is_empty() || name.sample_id == Some("") {
            return Err(bad());
        }
        Ok(EvalKey::new(model, name.instance_id, name.sample_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_what_they_write() {
        let cases = [
            (EvalKey::new("m", "a__b-1", None), "m/a__b-1"),
            (EvalKey::new("m", "a__b-2", Some("3")), "m/a__b-2@3"),
            (
                EvalKey::new("org/model", "a__b-2", Some("x@y")),
                "org/model/a__b-2@x@y",
            ),
        ];
        for (key, text) in cases {
            assert_eq!(key.to_string(), text);
            assert_eq!(text.parse::<EvalKey>().unwrap(), key);
        }
        for bad in ["a__b-1", "/a__b-1", "m/", "m/@3", "m/a@"] {
            assert!(bad.parse::<EvalKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_order_as_the_tuples_did() {
        let mut keys = [
            EvalKey::new("m", "a__b-10", None),
            EvalKey::new("m", "a__b-1", Some("2")),
            EvalKey::new("l", "z", None),
            EvalKey::new("m", "a__b-1", None),
        ];
        keys.sort();
        let text: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(text, ["l/z", "m/a__b-1", "m/a__b-1@2", "m/a__b-10"]);
    }
}
