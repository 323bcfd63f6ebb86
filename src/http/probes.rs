//! The probes: `/health` (the process is up), `/ready` (it can serve) and `/metrics`.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use super::{AppState, listener};

/// Prometheus text format.
pub(super) async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    let replicas = app
        .store
        .read_pool()
        .map(|pool| crate::graphql::metrics::encode(&pool.gather()))
        .unwrap_or_default();
    (
        [("content-type", "text/plain; version=0.0.4")],
        format!(
            "{}{}{}{}{replicas}",
            crate::graphql::metrics::render(),
            crate::graphql::metrics::encode(&crate::deriver::metrics::gather()),
            crate::graphql::metrics::encode(&crate::webhook::metrics::gather()),
            listener::render(),
        ),
    )
}

/// The process is up.
pub(super) async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// The database answers and the listener has file descriptors to spare; load balancers should
/// route here only when this is 200. The body shows the listener's health either way, and the
/// state of each read replica (a replica that is down does not make the server unready).
pub(super) async fn ready(State(app): State<AppState>) -> impl IntoResponse {
    let database = tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await;
    let listener = listener::Health::now();
    let (status, text) = match database {
        Ok(Ok(())) if listener.fds_ok() => (StatusCode::OK, "ready"),
        Ok(Ok(())) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "file descriptors running out",
        ),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable"),
    };
    let mut body = json!({"status": text, "listener": listener});
    // Vectors of an older server: search works, and finds less until they are recomputed.
    if status == StatusCode::OK && app.store.vectors_predate_context().await.unwrap_or(false) {
        body["vectors"] = json!({
            "predate_contextual_embeddings": true,
            "fix": "honcho-graphql reembed --all",
        });
    }
    // Replicas inform, they do not decide: without them reads go to the primary.
    if let Some(pool) = app.store.read_pool() {
        body["replicas"] = json!(pool.status());
    }
    (status, Json(body))
}
