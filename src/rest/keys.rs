//! `/v3/keys`: mint a key (admin keys only).

use axum::Json;
use axum::extract::Query;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::{Gate, RestError, RestResult};
use crate::access::{On, rule};
use crate::auth::{KeySpec, MintError};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new().routes(routes!(create))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KeyParams {
    workspace_id: Option<String>,
    peer_id: Option<String>,
    session_id: Option<String>,
    /// Limits a workspace key to this scope's sessions, read only (this server's).
    scope_id: Option<String>,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Key {
    pub key: String,
}

/// A key for a workspace, a peer or a session. 405 when auth is off.
#[utoipa::path(post, path = "/v3/keys", params(KeyParams),
    responses((status = 200, body = Key), (status = 405), (status = 422)))]
async fn create(gate: Gate, Query(params): Query<KeyParams>) -> RestResult<Json<Key>> {
    gate.require(rule!(MutationRoot.createKey), On::nothing())
        .await?;
    let auth = gate
        .auth()
        .ok_or_else(|| RestError::new(StatusCode::METHOD_NOT_ALLOWED, "auth is not configured"))?;
    let spec = KeySpec {
        admin: false,
        workspace: params.workspace_id,
        peer: params.peer_id,
        session: params.session_id,
        scope: params.scope_id,
        expires_at: params.expires_at,
    };
    let key = auth.mint(&spec).map_err(|e| match e {
        MintError::Disabled => RestError::new(StatusCode::METHOD_NOT_ALLOWED, e.to_string()),
        MintError::Signing => RestError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        _ => RestError::invalid(e.to_string()),
    })?;
    Ok(Json(Key { key }))
}
