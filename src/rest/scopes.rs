//! Scopes, at Honcho main's paths and shapes (after v3.0.12): named groups of a workspace's
//! sessions that bound what recall may see (docs/scopes.md). Managed with a workspace key; a key
//! limited to a scope reads that scope and its sessions.

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::sessions::Session;
use super::{Body, Gate, Page, PageParams, RestResult, RestState, created_or_found, object};
use crate::access::{On, rule};
use crate::store::scope::{Scope as Row, ScopeStatus as StatusRow};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(get_or_create))
        .routes(routes!(list))
        .routes(routes!(get))
        .routes(routes!(add_sessions))
        .routes(routes!(remove_session))
        .routes(routes!(list_sessions))
        .routes(routes!(status))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ScopeCreate {
    /// The scope's id: 1 to 512 of `[A-Za-z0-9_-]`.
    pub id: String,
    /// Replaces the scope's metadata when given.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Scope {
    pub id: String,
    pub workspace_id: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

impl From<Row> for Scope {
    fn from(s: Row) -> Self {
        Scope {
            id: s.name,
            workspace_id: s.workspace_name,
            metadata: object(s.metadata),
            created_at: s.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ScopeSessionsAdd {
    /// Ids of existing sessions of the workspace, 1 to 100.
    pub session_ids: Vec<String>,
}

/// Honcho's `backfill_status` (always `{}` here: a membership change is in effect when it
/// commits, nothing is copied later), and what the scope's recall reaches now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScopeStatus {
    #[schema(value_type = Object)]
    pub backfill_status: Value,
    pub session_count: i64,
    pub message_count: i64,
    pub conclusion_count: i64,
    /// The deriver's queued messages of the scope's sessions.
    pub pending_work_units: i64,
}

impl From<StatusRow> for ScopeStatus {
    fn from(s: StatusRow) -> Self {
        ScopeStatus {
            backfill_status: json!({}),
            session_count: s.sessions,
            message_count: s.messages,
            conclusion_count: s.conclusions,
            pending_work_units: s.pending_work_units,
        }
    }
}

/// Gets the scope with this id, or creates it: 201 when new, 200 when it existed.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes", request_body = ScopeCreate,
    responses((status = 201, body = Scope), (status = 200, body = Scope),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn get_or_create(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<ScopeCreate>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreateScope),
            On::workspace(&workspace_id),
        )
        .await?;
    let (scope, created) = access
        .store()
        .get_or_create_scope(&workspace_id, &body.id, body.metadata)
        .await?;
    Ok(created_or_found(created, Scope::from(scope)))
}

/// The workspace's scopes, oldest first (newest with `reverse`).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes/list", params(PageParams),
    responses((status = 200, body = Page<Scope>)))]
async fn list(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Query(params): Query<PageParams>,
) -> RestResult<Json<Page<Scope>>> {
    let access = gate
        .require(rule!(Workspace.scopes), On::workspace(&workspace_id))
        .await?;
    let (page, size) = params.page_size()?;
    let (items, total) = access
        .store()
        .scopes(
            &workspace_id,
            params.order(),
            (page - 1).saturating_mul(size),
            size,
        )
        .await?;
    Ok(Json(params.page(items, Some(total))))
}

/// One scope.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/scopes/{scope_id}",
    responses((status = 200, body = Scope), (status = 404, body = ErrorBody)))]
async fn get(
    gate: Gate,
    Path((workspace_id, scope_id)): Path<(String, String)>,
) -> RestResult<Json<Scope>> {
    let access = gate
        .require(rule!(Workspace.scope), On::scope(&workspace_id, &scope_id))
        .await?;
    let scope = access
        .store()
        .require_scope(&workspace_id, &scope_id)
        .await?;
    Ok(Json(scope.into()))
}

/// Adds existing sessions of the workspace to the scope (one already in it stays as it is).
/// All or nothing: 404 for a missing scope or session.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions",
    request_body = ScopeSessionsAdd,
    responses((status = 204), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn add_sessions(
    gate: Gate,
    Path((workspace_id, scope_id)): Path<(String, String)>,
    Body(body): Body<ScopeSessionsAdd>,
) -> RestResult<StatusCode> {
    let access = gate
        .require(
            rule!(MutationRoot.addSessionsToScope),
            On::workspace(&workspace_id),
        )
        .await?;
    access
        .store()
        .add_sessions_to_scope(&workspace_id, &scope_id, &body.session_ids)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a session from the scope (one not in it is left as it is).
#[utoipa::path(delete,
    path = "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/{session_id}",
    responses((status = 204), (status = 404, body = ErrorBody)))]
async fn remove_session(
    gate: Gate,
    Path((workspace_id, scope_id, session_id)): Path<(String, String, String)>,
) -> RestResult<StatusCode> {
    let access = gate
        .require(
            rule!(MutationRoot.removeSessionFromScope),
            On::workspace(&workspace_id),
        )
        .await?;
    access
        .store()
        .remove_session_from_scope(&workspace_id, &scope_id, &session_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The scope's sessions, longest-standing member first (most recently added with `reverse`).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/list",
    params(PageParams),
    responses((status = 200, body = Page<Session>), (status = 404, body = ErrorBody)))]
async fn list_sessions(
    gate: Gate,
    Path((workspace_id, scope_id)): Path<(String, String)>,
    Query(params): Query<PageParams>,
) -> RestResult<Json<Page<Session>>> {
    let access = gate
        .require(rule!(Scope.sessions), On::scope(&workspace_id, &scope_id))
        .await?;
    let (page, size) = params.page_size()?;
    let (items, total) = access
        .store()
        .scope_sessions(
            &workspace_id,
            &scope_id,
            params.order(),
            (page - 1).saturating_mul(size),
            size,
        )
        .await?;
    Ok(Json(params.page(items, Some(total))))
}

/// What the scope holds now.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/scopes/{scope_id}/status",
    responses((status = 200, body = ScopeStatus), (status = 404, body = ErrorBody)))]
async fn status(
    gate: Gate,
    Path((workspace_id, scope_id)): Path<(String, String)>,
) -> RestResult<Json<ScopeStatus>> {
    let access = gate
        .require(rule!(Scope.status), On::scope(&workspace_id, &scope_id))
        .await?;
    let status = access
        .store()
        .scope_status(&workspace_id, &scope_id)
        .await?;
    Ok(Json(ScopeStatus::from(status)))
}
