//! The HTTP/JSON API over a [`Service`] (axum): routes, the bearer token,
//! and every refusal as a 4xx with `{"error": "..."}` naming the problem.
//! The API is documented in `openapi.json` (served at /openapi.json) and
//! docs/serve.md.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::state::State as EvalState;
use super::{Cancelled, Service, SubmitError};
use crate::rundir::serve::is_eval_id;

/// The OpenAPI 3 document of this API.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Longest long poll, seconds; the default is 30.
pub const MAX_WAIT_SECS: u64 = 600;

type Svc = Arc<Service>;

/// The API's routes over `service`.
pub fn router(service: Svc) -> Router {
    Router::new()
        .route("/v1/evaluations", get(list).post(submit))
        .route("/v1/evaluations/{id}", get(status).delete(cancel))
        .route("/v1/evaluations/{id}/wait", get(wait))
        .route("/v1/evaluations/{id}/events", get(events))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(service.clone(), auth))
        .with_state(service)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": message.to_string() }))).into_response()
}

/// Whether the request carries the token (compared in constant time).
fn authorised(req: &Request, token: &str) -> bool {
    let Some(given) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(svc): State<Svc>, req: Request, next: Next) -> Response {
    let open = matches!(req.uri().path(), "/healthz" | "/readyz");
    match &svc.opts.token {
        Some(token) if !open && !authorised(&req, token) => {
            svc.refused("unauthorized");
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: Authorization: Bearer <token of --token-file>",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
        _ => next.run(req).await,
    }
}

async fn submit(State(svc): State<Svc>, body: Body) -> Response {
    let limit = svc.opts.max_body;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            svc.refused("bad_request");
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over {limit} bytes (--max-body)"),
            );
        }
    };
    match svc.submit(&bytes).await {
        Ok(done) => {
            let created = done.items.iter().any(|(_, new)| *new);
            let code = if created {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            if done.batch {
                let items: Vec<_> = done.items.into_iter().map(|(s, _)| s).collect();
                (code, Json(json!({ "evaluations": items }))).into_response()
            } else {
                let Some((one, _)) = done.items.into_iter().next() else {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, "nothing accepted");
                };
                let location = format!("/v1/evaluations/{}", one.id);
                let mut r = (code, Json(one)).into_response();
                if let Ok(v) = HeaderValue::from_str(&location) {
                    r.headers_mut().insert(header::LOCATION, v);
                }
                r
            }
        }
        Err(e) => submit_error(e),
    }
}

fn submit_error(e: SubmitError) -> Response {
    match &e {
        SubmitError::Request(r) => error(
            StatusCode::from_u16(r.status()).unwrap_or(StatusCode::BAD_REQUEST),
            &e,
        ),
        SubmitError::Full { retry_after, .. } => {
            let mut r = error(StatusCode::TOO_MANY_REQUESTS, &e);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            r
        }
        SubmitError::Conflict { .. } => error(StatusCode::CONFLICT, &e),
        SubmitError::Draining => {
            let mut r = error(StatusCode::SERVICE_UNAVAILABLE, &e);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(5u64));
            r
        }
        // The machine's failure, not the request's: worth a retry.
        SubmitError::Unrecorded(_) => error(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}

fn unknown(id: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no evaluation {id:?}"))
}

async fn status(State(svc): State<Svc>, Path(id): Path<String>) -> Response {
    match is_eval_id(&id).then(|| svc.status(&id, true)).flatten() {
        Some(s) => Json(s).into_response(),
        None => unknown(&id),
    }
}

async fn wait(
    State(svc): State<Svc>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let secs = match q.get("timeout").map(|t| t.parse::<f64>()) {
        None => 30.0,
        Some(Ok(t)) if t.is_finite() && t >= 0.0 => t.min(MAX_WAIT_SECS as f64),
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("timeout must be seconds from 0 to {MAX_WAIT_SECS}"),
            )
        }
    };
    if !is_eval_id(&id) {
        return unknown(&id);
    }
    match svc.wait(&id, Duration::from_secs_f64(secs)).await {
        Some(s) => Json(s).into_response(),
        None => unknown(&id),
    }
}

/// Server-sent events: the evaluation as it stands, then at each change
/// of its state (the event named by the state); the stream ends when it
/// ends (the last event has the record) or the service stops.
async fn events(State(svc): State<Svc>, Path(id): Path<String>) -> Response {
    if !is_eval_id(&id) || svc.status(&id, false).is_none() {
        return unknown(&id);
    }
    let changes = svc.subscribe();
    let start = (svc, id, changes, None::<EvalState>, false);
    let stream =
        futures_util::stream::unfold(start, |(svc, id, mut changes, last, done)| async move {
            if done {
                return None;
            }
            loop {
                let s = svc.status(&id, true)?;
                if Some(s.state) != last {
                    let end = s.state.is_final() || svc.is_closed();
                    let state = s.state;
                    let event = Event::default().event(state.name()).json_data(&s).ok()?;
                    return Some((
                        Ok::<_, Infallible>(event),
                        (svc, id, changes, Some(state), end),
                    ));
                }
                if svc.is_closed() {
                    return None;
                }
                changes.changed().await.ok()?;
            }
        });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn cancel(State(svc): State<Svc>, Path(id): Path<String>) -> Response {
    if !is_eval_id(&id) {
        return unknown(&id);
    }
    match svc.cancel(&id).await {
        Ok(Cancelled::Now) => match svc.status(&id, false) {
            Some(s) => Json(s).into_response(),
            None => unknown(&id),
        },
        Ok(Cancelled::Ended(state)) => error(
            StatusCode::CONFLICT,
            format!("evaluation {id} is {} already", state.name()),
        ),
        Ok(Cancelled::Unknown) => unknown(&id),
        Err(e) => submit_error(e),
    }
}

async fn list(State(svc): State<Svc>, Query(q): Query<HashMap<String, String>>) -> Response {
    let state = match q.get("state") {
        None => None,
        Some(s) => match EvalState::parse(s) {
            Some(s) => Some(s),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("state {s:?} is none of queued, running, finished, cancelled"),
                )
            }
        },
    };
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 1000,
        Some(Ok(l)) => l,
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "limit must be a whole number"),
    };
    let after = q.get("after").map(String::as_str);
    match svc.list(state, limit, after) {
        Some((items, total, next)) => {
            Json(json!({ "total": total, "evaluations": items, "next": next })).into_response()
        }
        None => error(
            StatusCode::BAD_REQUEST,
            format!(
                "after {:?} is no evaluation of this service",
                after.unwrap_or_default()
            ),
        ),
    }
}

async fn metrics(State(svc): State<Svc>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        svc.metrics(),
    )
        .into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn healthz() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

/// Ready while it accepts evaluations.
async fn readyz(State(svc): State<Svc>) -> Response {
    let (queued, running) = svc.load();
    let body = json!({ "ready": !svc.is_draining(), "queued": queued, "running": running });
    let code = if svc.is_draining() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, Json(body)).into_response()
}

async fn not_found(req: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint: {} {} (see /openapi.json)",
            req.method(),
            req.uri().path()
        ),
    )
}
