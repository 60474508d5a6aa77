//! The judge's replies, checked against the schema the prompt asks for.
//!
//! A reply is the first JSON object in the message (a ```json fence or prose
//! around it is tolerated, since models add them); it must have exactly the
//! rubric's criteria, pointwise with an integer score 1-5 and a reason each,
//! pairwise with `"A"`, `"B"` or `"tie"` each and overall. Anything else is
//! malformed, and the caller asks again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::rubric::Rubric;

/// A pointwise judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub scores: BTreeMap<String, u8>,
    pub reasons: BTreeMap<String, String>,
    pub summary: String,
}

// (Also `analysis::select::Choice`: each is read only inside its module.)
/// A pairwise choice, as the model wrote it (A/B of its prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Choice {
    A,
    B,
    Tie,
}

/// A pairwise judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preference {
    pub preferred: Choice,
    pub criteria: BTreeMap<String, Choice>,
    pub reason: String,
}

/// Why a reply does not fit the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed judge reply: {0}")]
pub struct Malformed(pub String);

/// The first balanced `{...}` of `text` parsed as JSON.
fn json_object(text: &str) -> Result<serde_json::Map<String, Value>, Malformed> {
    let start = text
        .find('{')
        .ok_or_else(|| Malformed("no JSON object in the reply".into()))?;
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in text[start..].char_indices() {
        if in_str {
            match c {
                _ if esc => esc = false,
                '\\' => esc = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let obj = &text[start..start + i + 1];
                    return match serde_json::from_str::<Value>(obj) {
                        Ok(Value::Object(m)) => Ok(m),
                        Ok(_) => Err(Malformed("not a JSON object".into())),
                        Err(e) => Err(Malformed(format!("invalid JSON: {e}"))),
                    };
                }
            }
            _ => {}
        }
    }
    Err(Malformed("unterminated JSON object".into()))
}

fn criteria_of<'a>(
    m: &'a serde_json::Map<String, Value>,
    key: &str,
    rubric: &Rubric,
) -> Result<&'a serde_json::Map<String, Value>, Malformed> {
    let obj = m
        .get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| Malformed(format!("no `{key}` object")))?;
    for id in rubric.ids() {
        if !obj.contains_key(id) {
            return Err(Malformed(format!("`{key}` lacks criterion `{id}`")));
        }
    }
    if let Some(extra) = obj
        .keys()
        .find(|k| !rubric.ids().any(|id| id == k.as_str()))
    {
        return Err(Malformed(format!(
            "`{key}` has unknown criterion `{extra}`"
        )));
    }
    Ok(obj)
}

/// Reads a pointwise reply.
pub fn parse_scores(text: &str, rubric: &Rubric) -> Result<Scores, Malformed> {
    let m = json_object(text)?;
    let obj = criteria_of(&m, "scores", rubric)?;
    let mut scores = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    for (id, v) in obj {
        let s = v
            .get("score")
            .and_then(Value::as_u64)
            .filter(|s| (1..=5).contains(s))
            .ok_or_else(|| Malformed(format!("`{id}` needs an integer score from 1 to 5")))?;
        let r = v.get("reason").and_then(Value::as_str).unwrap_or_default();
        scores.insert(id.clone(), s as u8);
        reasons.insert(id.clone(), r.to_string());
    }
    Ok(Scores {
        scores,
        reasons,
        summary: m
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

fn choice(v: &Value, what: &str) -> Result<Choice, Malformed> {
    match v.as_str().map(str::to_ascii_lowercase).as_deref() {
        Some("a") => Ok(Choice::A),
        Some("b") => Ok(Choice::B),
        Some("tie") => Ok(Choice::Tie),
        _ => Err(Malformed(format!("{what} must be \"A\", \"B\" or \"tie\""))),
    }
}

/// Reads a pairwise reply.
pub fn parse_preference(text: &str, rubric: &Rubric) -> Result<Preference, Malformed> {
    let m = json_object(text)?;
    let preferred = choice(
        m.get("preferred")
            .ok_or_else(|| Malformed("no `preferred`".into()))?,
        "`preferred`",
    )?;
    let obj = criteria_of(&m, "criteria", rubric)?;
    let mut criteria = BTreeMap::new();
    for (id, v) in obj {
        criteria.insert(id.clone(), choice(v, &format!("`{id}`"))?);
    }
    Ok(Preference {
        preferred,
        criteria,
        reason: m
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> String {
        r#"{"scores": {"correctness_risk": {"score": 4, "reason": "ok"}, "readability": {"score": 5, "reason": "clear"}, "idiom": {"score": 3, "reason": "r"}, "scope": {"score": 5, "reason": "r"}, "tests": {"score": 1, "reason": "none"}}, "summary": "fine"}"#.to_string()
    }

    #[test]
    fn pointwise_replies() {
        let r = Rubric::default_rubric();
        let s = parse_scores(&format!("Here you go:\n```json\n{}\n```", good()), &r).unwrap();
        assert_eq!(s.scores["correctness_risk"], 4);
        assert_eq!(s.scores["tests"], 1);
        assert_eq!(s.summary, "fine");
        for (bad, why) in [
            ("no json here", "no JSON object"),
            ("{\"scores\": {", "unterminated"),
            ("{\"scores\": 3}", "no `scores` object"),
        ] {
            let e = parse_scores(bad, &r).unwrap_err();
            assert!(e.0.contains(why), "{bad}: {e}");
        }
        let e = parse_scores(&good().replace("\"score\": 4", "\"score\": 7"), &r).unwrap_err();
        assert!(e.0.contains("correctness_risk"), "{e}");
        let e = parse_scores(&good().replace("\"idiom\"", "\"style\""), &r).unwrap_err();
        assert!(e.0.contains("lacks criterion `idiom`"), "{e}");
        let e = parse_scores(&good().replace("\"score\": 3", "\"score\": \"3\""), &r).unwrap_err();
        assert!(e.0.contains("idiom"), "{e}");
    }

    #[test]
    fn pairwise_replies() {
        let r = Rubric::default_rubric();
        let ok = r#"{"preferred": "B", "criteria": {"correctness_risk": "B", "readability": "tie", "idiom": "A", "scope": "b", "tests": "Tie"}, "reason": "{braces} in a string"}"#;
        let p = parse_preference(ok, &r).unwrap();
        assert_eq!(p.preferred, Choice::B);
        assert_eq!(p.criteria["scope"], Choice::B);
        assert_eq!(p.criteria["tests"], Choice::Tie);
        assert_eq!(p.reason, "{braces} in a string");
        let e = parse_preference(
            &ok.replace("\"B\", \"criteria\"", "\"C\", \"criteria\""),
            &r,
        )
        .unwrap_err();
        assert!(e.0.contains("`preferred`"), "{e}");
    }
}
