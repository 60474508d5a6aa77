//! A blocking client for OpenAI-compatible chat endpoints
//! (`POST {url}/chat/completions`): vLLM, Ollama, llama.cpp's server and
//! hosted APIs. Call it from a blocking thread (`spawn_blocking`) in async
//! code.
//!
//! Retries with exponential backoff (honouring `Retry-After`) on 429, 5xx,
//! timeouts and connection errors; other statuses fail at once. The API key
//! is read from the environment at each request and only ever put in the
//! `Authorization` header: no error, log line or cache entry holds it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use ureq::tls::{RootCerts, TlsConfig, TlsProvider};

use super::prompt::Message;
use super::JudgeConfig;

/// Tokens one request used, as the server reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A chat reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: String,
    /// `None` when the server did not report usage.
    pub usage: Option<TokenUsage>,
    /// Requests it took (1 without retries).
    pub attempts: u32,
}

/// Why a chat request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("the judge's API key variable {env} is not set")]
    MissingKey { env: String },
    #[error("judge endpoint answered HTTP {status} after {attempts} attempt(s): {body}")]
    Http {
        status: u16,
        attempts: u32,
        /// The start of the response body.
        body: String,
    },
    #[error("judge request timed out after {attempts} attempt(s) of {seconds} s")]
    Timeout { attempts: u32, seconds: f64 },
    #[error("judge request failed after {attempts} attempt(s): {message}")]
    Transport { attempts: u32, message: String },
    #[error("judge endpoint sent an unreadable response: {0}")]
    BadResponse(String),
}

/// The chat completions URL of a base URL (`http://host:8000/v1`), or the
/// URL itself when it already names the endpoint.
pub fn endpoint(url: &str) -> String {
    let u = url.trim_end_matches('/');
    if u.ends_with("/chat/completions") {
        u.to_string()
    } else {
        format!("{u}/chat/completions")
    }
}

/// A client for one configuration; reuses connections.
pub struct Client {
    agent: ureq::Agent,
    cfg: JudgeConfig,
}

enum Attempt {
    Done(Reply),
    /// Retryable, with the server's Retry-After if any.
    Retry(CallError, Option<Duration>),
    Fail(CallError),
}

impl Client {
    pub fn new(cfg: &JudgeConfig) -> Client {
        let tls = TlsConfig::builder()
            .provider(TlsProvider::NativeTls)
            .root_certs(RootCerts::PlatformVerifier)
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(cfg.timeout))
            .http_status_as_error(false)
            .tls_config(tls)
            .build()
            .into();
        Client {
            agent,
            cfg: cfg.clone(),
        }
    }

    /// Sends one chat request, retrying as the module says.
    pub fn chat(&self, messages: &[Message]) -> Result<Reply, CallError> {
        let key = match &self.cfg.key_env {
            Some(env) => Some(
                std::env::var(env)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| CallError::MissingKey { env: env.clone() })?,
            ),
            None => None,
        };
        let mut body = json!({
            "model": self.cfg.model,
            "messages": messages,
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_output_tokens,
        });
        if self.cfg.json_mode {
            body["response_format"] = json!({"type": "json_object"});
        }
        let body = body.to_string();
        let url = endpoint(&self.cfg.url);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.once(&url, key.as_deref(), &body, attempt) {
                Attempt::Done(r) => return Ok(r),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(e, after) => {
                    if attempt > self.cfg.retries {
                        return Err(e);
                    }
                    let backoff = self.cfg.backoff.saturating_mul(1 << (attempt - 1).min(10));
                    let wait = after.unwrap_or(backoff).min(Duration::from_secs(60));
                    tracing::debug!(attempt, ?wait, error = %e, "judge request retried");
                    std::thread::sleep(wait);
                }
            }
        }
    }

    fn once(&self, url: &str, key: Option<&str>, body: &str, attempt: u32) -> Attempt {
        let mut req = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => {
                return Attempt::Retry(
                    CallError::Timeout {
                        attempts: attempt,
                        seconds: self.cfg.timeout.as_secs_f64(),
                    },
                    None,
                )
            }
            Err(e) => {
                return Attempt::Retry(
                    CallError::Transport {
                        attempts: attempt,
                        message: e.to_string(),
                    },
                    None,
                )
            }
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match resp
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
        {
            Ok(t) => t,
            Err(ureq::Error::Timeout(_)) => {
                return Attempt::Retry(
                    CallError::Timeout {
                        attempts: attempt,
                        seconds: self.cfg.timeout.as_secs_f64(),
                    },
                    None,
                )
            }
            Err(e) => return Attempt::Fail(CallError::BadResponse(e.to_string())),
        };
        if status != 200 {
            let err = CallError::Http {
                status,
                attempts: attempt,
                body: text.chars().take(300).collect(),
            };
            return if status == 429 || status >= 500 {
                Attempt::Retry(err, retry_after)
            } else {
                Attempt::Fail(err)
            };
        }
        match read_completion(&text) {
            Ok((content, usage)) => Attempt::Done(Reply {
                content,
                usage,
                attempts: attempt,
            }),
            Err(e) => Attempt::Fail(e),
        }
    }
}

/// The first choice's content and the usage of a chat completion.
fn read_completion(text: &str) -> Result<(String, Option<TokenUsage>), CallError> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| CallError::BadResponse(format!("not JSON: {e}")))?;
    let content = v
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| CallError::BadResponse("no choices[0].message.content".into()))?;
    let usage = v
        .get("usage")
        .and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok());
    Ok((content.to_string(), usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_completions() {
        assert_eq!(
            endpoint("http://h:8000/v1/"),
            "http://h:8000/v1/chat/completions"
        );
        assert_eq!(
            endpoint("https://api.x/v1/chat/completions"),
            "https://api.x/v1/chat/completions"
        );
        let (c, u) = read_completion(r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#).unwrap();
        assert_eq!(c, "hi");
        assert_eq!(
            u,
            Some(TokenUsage {
                prompt_tokens: 3,
                completion_tokens: 1
            })
        );
        let (_, u) = read_completion(r#"{"choices":[{"message":{"content":"x"}}]}"#).unwrap();
        assert_eq!(u, None);
        assert!(read_completion(r#"{"error":"x"}"#).is_err());
    }
}
