//! A submission's body read and checked before anything is recorded: JSON,
//! known instances, model and sample names a run folder can hold, patches
//! that parse and stay inside the tree. Plain code; each problem is a 4xx
//! naming the item and what is wrong.

use serde::Deserialize;

use std::time::Duration;

use crate::patch::{Patch, PatchError};
use crate::rundir::serve::Accepted;
use crate::settings::Overrides;

/// The model name when a submission gives none.
pub const DEFAULT_MODEL: &str = "serve";

/// At most this many evaluations in one request.
pub const MAX_BATCH: usize = 10_000;

/// One evaluation as submitted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    instance_id: String,
    #[serde(default)]
    model_patch: Option<String>,
    #[serde(default)]
    model_name_or_path: Option<String>,
    #[serde(default, deserialize_with = "sample_id")]
    sample_id: Option<String>,
    /// Seconds the tests get, at most the service's `--timeout`.
    #[serde(default, deserialize_with = "timeout_seconds")]
    timeout_seconds: Option<u64>,
    /// false: no static audit of the result.
    #[serde(default, deserialize_with = "audit")]
    audit: Option<bool>,
}

/// What the service allows a request to ask for.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The service's `--timeout`: no request gets more.
    pub timeout: Duration,
}

fn sample_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(serde_json::Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "sample_id must be a string or a number, got {other}"
        ))),
    }
}

// serde's own messages do not name the field: these do.
fn timeout_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => Err(serde::de::Error::custom(format!(
            "timeout_seconds must be a whole number of seconds, got {other}"
        ))),
    }
}

fn audit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(serde::de::Error::custom(format!(
            "audit must be true or false, got {other}"
        ))),
    }
}

/// Several at once: a list, or `{"evaluations": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    evaluations: Vec<Item>,
}

/// Why a submission was refused before anything was recorded.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("malformed JSON: {0}")]
    Json(String),
    #[error("the request holds no evaluation")]
    Empty,
    #[error("{0} evaluations in one request; at most {MAX_BATCH}")]
    TooMany(usize),
    #[error("evaluation {index} ({instance_id}): {problem}")]
    Item {
        index: usize,
        instance_id: String,
        problem: ItemProblem,
    },
}

/// What is wrong with one evaluation of a request.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ItemProblem {
    #[error("unknown instance_id: not in the service's dataset")]
    UnknownInstance,
    #[error("model_name_or_path {0:?} must be non-empty and not start with '.'")]
    Model(String),
    #[error("sample_id {0:?} must be non-empty with no '/'")]
    Sample(String),
    #[error("model_patch: {0}")]
    Patch(String),
    #[error("timeout_seconds {given} is over the service's limit of {limit} s (--timeout)")]
    TimeoutOverLimit { given: u64, limit: u64 },
    #[error("timeout_seconds must be at least 1")]
    TimeoutZero,
}

impl RequestError {
    /// The HTTP status: 400 for a body that is not a submission, 404 for
    /// an unknown instance, 422 for a submission that cannot be graded.
    pub fn status(&self) -> u16 {
        match self {
            RequestError::Json(_) | RequestError::Empty => 400,
            RequestError::TooMany(_) => 413,
            RequestError::Item {
                problem: ItemProblem::UnknownInstance,
                ..
            } => 404,
            RequestError::Item { .. } => 422,
        }
    }
}

/// The evaluations a body asks for, and whether it is a batch (a list or
/// `{"evaluations": [...]}`, answered as a list); `known` says which
/// instance ids the service's dataset has.
pub fn parse_submission(
    body: &[u8],
    known: impl Fn(&str) -> bool,
    limits: &Limits,
) -> Result<(Vec<Accepted>, bool), RequestError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
    let batch = value.is_array() || value.get("evaluations").is_some();
    let items: Vec<Item> = match value {
        serde_json::Value::Array(_) => serde_json::from_value(value),
        serde_json::Value::Object(ref o) if o.contains_key("evaluations") => {
            serde_json::from_value::<Batch>(value).map(|b| b.evaluations)
        }
        _ => serde_json::from_value(value).map(|i| vec![i]),
    }
    .map_err(|e| RequestError::Json(e.to_string()))?;
    if items.is_empty() {
        return Err(RequestError::Empty);
    }
    if items.len() > MAX_BATCH {
        return Err(RequestError::TooMany(items.len()));
    }
    let checked = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            check(&item, &known, limits).map_err(|problem| RequestError::Item {
                index,
                instance_id: item.instance_id.clone(),
                problem,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((checked, batch))
}

fn check(
    item: &Item,
    known: &impl Fn(&str) -> bool,
    limits: &Limits,
) -> Result<Accepted, ItemProblem> {
    if !known(&item.instance_id) {
        return Err(ItemProblem::UnknownInstance);
    }
    let model = item.model_name_or_path.as_deref().unwrap_or(DEFAULT_MODEL);
    // A model folder beside `.serve` and run.json: never hidden, never empty.
    if model.trim().is_empty() || model.starts_with('.') || model.contains('\0') {
        return Err(ItemProblem::Model(model.to_string()));
    }
    if let Some(s) = &item.sample_id {
        if s.is_empty() || s.contains('/') || s.contains('\0') {
            return Err(ItemProblem::Sample(s.clone()));
        }
    }
    let patch = item.model_patch.as_deref().filter(|p| !p.trim().is_empty());
    if let Some(text) = patch {
        // As the runner reads it: a patch it would refuse is refused here.
        Patch::parse(text)
            .and_then(|p| p.check_safe())
            .map_err(|e: PatchError| ItemProblem::Patch(e.to_string()))?;
    }
    let limit = limits.timeout.as_secs();
    let timeout_seconds = match item.timeout_seconds {
        Some(0) => return Err(ItemProblem::TimeoutZero),
        Some(given) if given > limit => return Err(ItemProblem::TimeoutOverLimit { given, limit }),
        // The service's own limit is no override: the same evaluation.
        Some(given) if given == limit => None,
        t => t,
    };
    let options = Overrides {
        timeout_seconds,
        audit: item.audit.unwrap_or(true),
    };
    Ok(Accepted::new(
        &item.instance_id,
        model,
        item.sample_id.as_deref(),
        patch,
        options,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-a\n+b\n";

    fn dataset() -> impl Fn(&str) -> bool {
        |id| id == "o__r-1"
    }

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(1800),
        }
    }

    fn parse(body: &str) -> Result<(Vec<Accepted>, bool), RequestError> {
        parse_submission(body.as_bytes(), dataset(), &limits())
    }

    fn err(body: &str) -> RequestError {
        parse(body).unwrap_err()
    }

    #[test]
    fn one_a_list_or_a_batch_object() {
        let one = format!(r#"{{"instance_id":"o__r-1","model_patch":{DIFF:?}}}"#);
        let (got, batch) = parse(&one).unwrap();
        assert!(!batch);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].model_name_or_path, DEFAULT_MODEL);
        let list = format!(
            r#"[{{"instance_id":"o__r-1","model_patch":{DIFF:?},"sample_id":7}},{{"instance_id":"o__r-1","model_name_or_path":"org/m"}}]"#
        );
        let (got, batch) = parse(&list).unwrap();
        assert!(batch);
        assert_eq!(got[0].sample_id, "7");
        assert_eq!(
            (got[1].sample_id.as_str(), got[1].model_patch.as_deref()),
            ("empty", None)
        );
        let batch =
            format!(r#"{{"evaluations":[{{"instance_id":"o__r-1","model_patch":{DIFF:?}}}]}}"#);
        let (got, batch) = parse(&batch).unwrap();
        assert!(batch && got.len() == 1);
    }

    #[test]
    fn each_problem_is_named_with_its_status() {
        let e = err("{\"instance_id\": ");
        assert!(
            matches!(e, RequestError::Json(_)) && e.status() == 400,
            "{e}"
        );
        let e = err(r#"{"instance":"o__r-1"}"#);
        assert!(e.to_string().contains("unknown field `instance`"), "{e}");
        assert_eq!(err("[]"), RequestError::Empty);
        let e = err(r#"{"instance_id":"nope"}"#);
        assert_eq!(e.status(), 404);
        assert_eq!(
            e.to_string(),
            "evaluation 0 (nope): unknown instance_id: not in the service's dataset"
        );
        let e = err(r#"{"instance_id":"o__r-1","model_patch":"not a diff at all"}"#);
        assert_eq!(e.status(), 422);
        assert_eq!(
            e.to_string(),
            "evaluation 0 (o__r-1): model_patch: no diff found in the patch text"
        );
        let unsafe_diff = DIFF.replace("f.py", "../f.py");
        let e = err(&format!(
            r#"{{"instance_id":"o__r-1","model_patch":{unsafe_diff:?}}}"#
        ));
        assert!(e.to_string().contains("unsafe path"), "{e}");
        let e = err(r#"{"instance_id":"o__r-1","sample_id":"a/b"}"#);
        assert_eq!(e.status(), 422);
        let e = err(r#"{"instance_id":"o__r-1","model_name_or_path":".serve"}"#);
        assert!(matches!(
            e,
            RequestError::Item {
                problem: ItemProblem::Model(_),
                ..
            }
        ));
    }

    #[test]
    fn options_are_checked_against_the_service_and_join_the_id() {
        let plain = parse(r#"{"instance_id":"o__r-1"}"#).unwrap().0.remove(0);
        let e = err(r#"{"instance_id":"o__r-1","timeout_seconds":1801}"#);
        assert_eq!(e.status(), 422);
        assert_eq!(
            e.to_string(),
            "evaluation 0 (o__r-1): timeout_seconds 1801 is over the service's limit of 1800 s (--timeout)"
        );
        let e = err(r#"{"instance_id":"o__r-1","timeout_seconds":0}"#);
        assert_eq!(e.status(), 422);
        let e = err(r#"{"instance_id":"o__r-1","timeout_seconds":"9"}"#);
        assert!(matches!(e, RequestError::Json(_)), "{e}");
        let e = err(r#"{"instance_id":"o__r-1","audit":"yes"}"#);
        assert!(matches!(e, RequestError::Json(_)), "{e}");
        assert!(e.to_string().contains("audit must be true or false"), "{e}");
        // The service's own settings, spelt out, are the same evaluation.
        let same = parse(r#"{"instance_id":"o__r-1","timeout_seconds":1800,"audit":true}"#)
            .unwrap()
            .0
            .remove(0);
        assert_eq!(same.id, plain.id);
        let short = parse(r#"{"instance_id":"o__r-1","timeout_seconds":60}"#)
            .unwrap()
            .0
            .remove(0);
        assert_eq!(short.options.timeout_seconds, Some(60));
        let unaudited = parse(r#"{"instance_id":"o__r-1","audit":false}"#)
            .unwrap()
            .0
            .remove(0);
        assert!(!unaudited.options.audit);
        let ids = [&plain.id, &short.id, &unaudited.id];
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    }
}
