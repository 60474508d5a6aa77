//! The LLM judge: a model reads the diff (and the issue) against a rubric.
//!
//! Nothing here runs unless the caller builds a [`JudgeConfig`], which is
//! what the explicit `--judge-url`/`--judge-model` flags will do: there is no
//! silent network call. The judge is plain blocking code (run it under
//! `spawn_blocking`); every request goes through [`client::Client`] (retries,
//! timeouts), every valid reply is cached ([`cache`]), malformed replies are
//! asked again up to `malformed_retries` times and then reported.
//!
//! Modes: pointwise (scores 1-5 per criterion) and pairwise against gold,
//! asked in both orders (candidate as A, then gold as A) to cancel position
//! bias. `samples` repeats each request with its own cache slot; results give
//! the mean and spread per criterion.

pub mod cache;
pub mod client;
pub mod prompt;
pub mod reply;
pub mod rubric;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use self::client::{Client, TokenUsage};
use self::prompt::{PromptInput, Truncation, PROMPT_VERSION};
use self::reply::{Choice, Malformed};
use self::rubric::Rubric;

/// How to reach the judge and what it costs. The key itself is never held:
/// only the name of the environment variable that has it.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeConfig {
    /// Base URL of an OpenAI-compatible API (`http://127.0.0.1:8000/v1`), or
    /// its `/chat/completions` URL.
    pub url: String,
    pub model: String,
    /// Environment variable holding the API key; `None` sends no key (local
    /// servers).
    pub key_env: Option<String>,
    /// Requests per patch (per order in pairwise mode).
    pub samples: u32,
    pub temperature: f64,
    /// Limit on one request, connection to last byte.
    pub timeout: Duration,
    /// US dollars per million prompt tokens.
    pub price_in: Option<f64>,
    /// US dollars per million completion tokens.
    pub price_out: Option<f64>,
    /// The model's context window, in tokens.
    pub max_context_tokens: usize,
    /// Reply length asked for (`max_tokens`), kept free in the window.
    pub max_output_tokens: usize,
    /// Retries on 429, 5xx, timeouts and connection errors.
    pub retries: u32,
    /// First backoff; doubled on each retry (a `Retry-After` wins).
    pub backoff: Duration,
    /// Extra requests after a reply that does not fit the schema.
    pub malformed_retries: u32,
    /// Ask for `response_format: {"type": "json_object"}`.
    pub json_mode: bool,
    /// Where valid replies are cached; `None` caches nothing.
    pub cache_dir: Option<PathBuf>,
}

impl JudgeConfig {
    /// A configuration with the documented defaults (docs/review.md).
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> JudgeConfig {
        JudgeConfig {
            url: url.into(),
            model: model.into(),
            key_env: None,
            samples: 1,
            temperature: 0.0,
            timeout: Duration::from_secs(120),
            price_in: None,
            price_out: None,
            max_context_tokens: 32_768,
            max_output_tokens: 1024,
            retries: 4,
            backoff: Duration::from_secs(1),
            malformed_retries: 2,
            json_mode: true,
            cache_dir: None,
        }
    }
}

/// Pointwise or pairwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Pointwise,
    Pairwise,
}

/// Which patch was shown as A in a pairwise request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    CandidateFirst,
    GoldFirst,
}

/// What one patch is judged on.
#[derive(Debug, Clone, Copy)]
pub struct JudgeInput<'a> {
    pub instance_id: &'a str,
    /// The issue text shown to the judge (problem statement).
    pub issue: &'a str,
    pub candidate: &'a str,
    /// Gold patch: pairwise mode when given.
    pub gold: Option<&'a str>,
}

/// One request's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SampleOutcome {
    Scored {
        scores: BTreeMap<String, u8>,
        reasons: BTreeMap<String, String>,
        summary: String,
    },
    /// Pairwise, in the candidate's terms: 1 candidate better, 0.5 tie, 0
    /// gold better.
    Compared {
        overall: f64,
        criteria: BTreeMap<String, f64>,
        reason: String,
    },
    /// Schema never met, or the request failed.
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    pub cached: bool,
    /// Requests sent for it (0 when cached).
    pub requests: u32,
    /// Replies that failed the schema before this outcome.
    pub malformed: u32,
    #[serde(flatten)]
    pub outcome: SampleOutcome,
}

/// Mean and spread of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub sd: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(v: &[f64]) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Stats {
            n,
            mean,
            sd,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// Tokens and money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Requests sent (cached samples send none).
    pub requests: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Requests whose usage the server did not report (their tokens are
    /// estimated from the text).
    pub estimated: u32,
    /// Cost in US dollars of the requests sent, when both prices are given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// The judgement of one patch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeResult {
    pub instance_id: String,
    pub mode: Mode,
    pub model: String,
    pub rubric: String,
    pub rubric_sha256: String,
    pub prompt_version: u32,
    pub temperature: f64,
    pub samples: Vec<Sample>,
    /// Per criterion: scores 1-5 (pointwise) or the candidate's preference
    /// 0-1 (pairwise), over the samples that succeeded.
    pub criteria: BTreeMap<String, Stats>,
    /// Mean over criteria per sample (pointwise) or overall preference
    /// (pairwise), across samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall: Option<Stats>,
    /// Pairwise: samples whose two orders agreed / samples with both orders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_consistent: Option<(usize, usize)>,
    pub failed: usize,
    /// What the window made us cut (per order in pairwise mode: the larger).
    pub truncation: Truncation,
    pub usage: Usage,
}

/// Why a patch could not be judged at all.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(transparent)]
    TooSmall(#[from] prompt::TooSmall),
    #[error("{instance_id}: {source}")]
    Call {
        instance_id: String,
        #[source]
        source: client::CallError,
    },
}

/// Judges one patch: `samples` requests per order, cached, retried. Request
/// failures of single samples are recorded in the result; only a missing key
/// (which would fail every request) is an error.
pub fn judge(
    client: &Client,
    cfg: &JudgeConfig,
    rubric: &Rubric,
    input: &JudgeInput,
) -> Result<JudgeResult, JudgeError> {
    let mode = if input.gold.is_some() {
        Mode::Pairwise
    } else {
        Mode::Pointwise
    };
    let orders: Vec<Option<Order>> = match mode {
        Mode::Pointwise => vec![None],
        Mode::Pairwise => vec![Some(Order::CandidateFirst), Some(Order::GoldFirst)],
    };
    let rubric_sha = rubric.hash();
    let patch_sha = cache::sha256(&format!(
        "{}\0{}",
        input.candidate,
        input.gold.unwrap_or("")
    ));
    let mut usage = Usage::default();
    let mut samples = Vec::new();
    let mut truncation = Truncation::default();
    for order in &orders {
        let (messages, t) = prompt::build(
            rubric,
            &PromptInput {
                issue: input.issue,
                candidate: input.candidate,
                gold: input.gold,
                gold_first: *order == Some(Order::GoldFirst),
            },
            cfg.max_context_tokens,
            cfg.max_output_tokens,
        )?;
        if t.prompt_tokens_estimate >= truncation.prompt_tokens_estimate {
            truncation = t;
        }
        let messages_sha = cache::sha256(&serde_json::to_string(&messages).expect("serialises"));
        for index in 0..cfg.samples {
            let key = cache::CacheKey {
                patch_sha256: patch_sha.clone(),
                rubric_sha256: rubric_sha.clone(),
                model: cfg.model.clone(),
                prompt_version: PROMPT_VERSION,
                temperature: format!("{}", cfg.temperature),
                sample: index,
                mode: match order {
                    None => "pointwise",
                    Some(Order::CandidateFirst) => "pairwise_candidate_first",
                    Some(Order::GoldFirst) => "pairwise_gold_first",
                }
                .into(),
                messages_sha256: messages_sha.clone(),
            };
            let s = one_sample(client, cfg, rubric, &messages, &key, *order, &mut usage).map_err(
                |source| JudgeError::Call {
                    instance_id: input.instance_id.to_string(),
                    source,
                },
            )?;
            samples.push(s);
        }
    }
    Ok(summarise(
        input, cfg, rubric, mode, samples, truncation, usage, rubric_sha,
    ))
}

fn interpret(
    content: &str,
    rubric: &Rubric,
    order: Option<Order>,
) -> Result<SampleOutcome, Malformed> {
    match order {
        None => reply::parse_scores(content, rubric).map(|s| SampleOutcome::Scored {
            scores: s.scores,
            reasons: s.reasons,
            summary: s.summary,
        }),
        Some(o) => reply::parse_preference(content, rubric).map(|p| {
            let cand = |c: Choice| match (c, o) {
                (Choice::Tie, _) => 0.5,
                (Choice::A, Order::CandidateFirst) | (Choice::B, Order::GoldFirst) => 1.0,
                _ => 0.0,
            };
            SampleOutcome::Compared {
                overall: cand(p.preferred),
                criteria: p.criteria.into_iter().map(|(k, c)| (k, cand(c))).collect(),
                reason: p.reason,
            }
        }),
    }
}

fn one_sample(
    client: &Client,
    cfg: &JudgeConfig,
    rubric: &Rubric,
    messages: &[prompt::Message],
    key: &cache::CacheKey,
    order: Option<Order>,
    usage: &mut Usage,
) -> Result<Sample, client::CallError> {
    let sample = |outcome, cached, requests, malformed| Sample {
        index: key.sample,
        order,
        cached,
        requests,
        malformed,
        outcome,
    };
    if let Some(dir) = &cfg.cache_dir {
        if let Some(e) = cache::get(dir, key) {
            if let Ok(o) = interpret(&e.content, rubric, order) {
                return Ok(sample(o, true, 0, 0));
            }
        }
    }
    let mut requests = 0;
    let mut malformed = 0;
    let mut last = String::new();
    for _ in 0..=cfg.malformed_retries {
        let reply = match client.chat(messages) {
            Ok(r) => r,
            Err(e @ client::CallError::MissingKey { .. }) => return Err(e),
            Err(e) => {
                requests += match &e {
                    client::CallError::Http { attempts, .. }
                    | client::CallError::Timeout { attempts, .. }
                    | client::CallError::Transport { attempts, .. } => *attempts,
                    _ => 1,
                };
                usage.requests += requests;
                return Ok(sample(
                    SampleOutcome::Failed {
                        error: e.to_string(),
                    },
                    false,
                    requests,
                    malformed,
                ));
            }
        };
        requests += reply.attempts;
        let u = reply.usage.unwrap_or_else(|| {
            usage.estimated += 1;
            TokenUsage {
                prompt_tokens: messages
                    .iter()
                    .map(|m| prompt::estimate_tokens(&m.content) as u64)
                    .sum(),
                completion_tokens: prompt::estimate_tokens(&reply.content) as u64,
            }
        });
        usage.prompt_tokens += u.prompt_tokens;
        usage.completion_tokens += u.completion_tokens;
        match interpret(&reply.content, rubric, order) {
            Ok(o) => {
                if let Some(dir) = &cfg.cache_dir {
                    let entry = cache::Entry {
                        key: key.clone(),
                        content: reply.content,
                        usage: reply.usage,
                    };
                    if let Err(e) = cache::put(dir, &entry) {
                        tracing::warn!("judge cache not written in {}: {e}", dir.display());
                    }
                }
                usage.requests += requests;
                return Ok(sample(o, false, requests, malformed));
            }
            Err(e) => {
                malformed += 1;
                last = e.to_string();
            }
        }
    }
    usage.requests += requests;
    Ok(sample(
        SampleOutcome::Failed {
            error: format!("{last} ({malformed} replies, none fit the schema)"),
        },
        false,
        requests,
        malformed,
    ))
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the pieces of one result"
)]
fn summarise(
    input: &JudgeInput,
    cfg: &JudgeConfig,
    rubric: &Rubric,
    mode: Mode,
    samples: Vec<Sample>,
    truncation: Truncation,
    mut usage: Usage,
    rubric_sha: String,
) -> JudgeResult {
    let mut per: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut overall = Vec::new();
    for s in &samples {
        match &s.outcome {
            SampleOutcome::Scored { scores, .. } => {
                for (k, v) in scores {
                    per.entry(k.clone()).or_default().push(f64::from(*v));
                }
                overall.push(
                    scores.values().map(|v| f64::from(*v)).sum::<f64>()
                        / scores.len().max(1) as f64,
                );
            }
            SampleOutcome::Compared {
                overall: o,
                criteria,
                ..
            } => {
                for (k, v) in criteria {
                    per.entry(k.clone()).or_default().push(*v);
                }
                overall.push(*o);
            }
            SampleOutcome::Failed { .. } => {}
        }
    }
    let position_consistent = (mode == Mode::Pairwise).then(|| {
        let mut both = 0;
        let mut agree = 0;
        for i in 0..cfg.samples {
            let of = |o: Order| {
                samples.iter().find_map(|s| match (&s.outcome, s.order) {
                    (SampleOutcome::Compared { overall, .. }, Some(x))
                        if x == o && s.index == i =>
                    {
                        Some(*overall)
                    }
                    _ => None,
                })
            };
            if let (Some(a), Some(b)) = (of(Order::CandidateFirst), of(Order::GoldFirst)) {
                both += 1;
                agree += usize::from(a == b);
            }
        }
        (agree, both)
    });
    if let (Some(pi), Some(po)) = (cfg.price_in, cfg.price_out) {
        usage.cost_usd =
            Some(usage.prompt_tokens as f64 / 1e6 * pi + usage.completion_tokens as f64 / 1e6 * po);
    }
    JudgeResult {
        instance_id: input.instance_id.to_string(),
        mode,
        model: cfg.model.clone(),
        rubric: rubric.name.clone(),
        rubric_sha256: rubric_sha,
        prompt_version: PROMPT_VERSION,
        temperature: cfg.temperature,
        failed: samples
            .iter()
            .filter(|s| matches!(s.outcome, SampleOutcome::Failed { .. }))
            .count(),
        samples,
        criteria: per
            .into_iter()
            .filter_map(|(k, v)| Some((k, Stats::of(&v)?)))
            .collect(),
        overall: Stats::of(&overall),
        position_consistent,
        truncation,
        usage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let s = Stats::of(&[3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.n, s.mean, s.sd, s.min, s.max), (3, 4.0, 1.0, 3.0, 5.0));
        assert_eq!(Stats::of(&[2.0]).unwrap().sd, 0.0);
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn pairwise_choices_are_read_in_the_candidates_terms() {
        let r = Rubric::default_rubric();
        let reply = |p: &str| {
            format!(
                r#"{{"preferred": "{p}", "criteria": {{"correctness_risk": "{p}", "readability": "tie", "idiom": "{p}", "scope": "{p}", "tests": "{p}"}}, "reason": ""}}"#
            )
        };
        let cand = |text: &str, o| match interpret(text, &r, Some(o)).unwrap() {
            SampleOutcome::Compared {
                overall, criteria, ..
            } => (overall, criteria["readability"]),
            other => panic!("{other:?}"),
        };
        assert_eq!(cand(&reply("A"), Order::CandidateFirst), (1.0, 0.5));
        assert_eq!(cand(&reply("A"), Order::GoldFirst), (0.0, 0.5));
        assert_eq!(cand(&reply("B"), Order::GoldFirst), (1.0, 0.5));
        assert_eq!(cand(&reply("tie"), Order::GoldFirst), (0.5, 0.5));
    }
}
