//! Honcho's routes this server does not serve, scopes (Honcho's main after v3.0.12), for want of
//! a data model here yet, answer 501. Each says so in its body, so an SDK call fails with a
//! reason instead of a bare 404.

use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::error::ErrorBody;
use super::{RestError, RestResult};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(scopes))
        .routes(routes!(scope))
}

fn not_implemented(what: &str) -> RestResult<()> {
    Err(RestError::new(
        StatusCode::NOT_IMPLEMENTED,
        format!("{what} are not served by this server (see docs/rest.md)"),
    ))
}

/// Not served: scopes.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes",
    responses((status = 501, body = ErrorBody)))]
async fn scopes() -> RestResult<()> {
    not_implemented("scopes")
}

/// Not served: scopes.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes/{rest}",
    responses((status = 501, body = ErrorBody)))]
async fn scope() -> RestResult<()> {
    not_implemented("scopes")
}
