//! `/v3/workspaces`: get-or-create, list, update, delete, search.

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::messages::Message;
use super::{
    Body, Gate, ListBody, MessageBody, Page, PageParams, RestResult, SearchBody, created_or_found,
    object,
};
use crate::access::{On, rule};
use crate::store::message::MessageScope;

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(get_or_create))
        .routes(routes!(list))
        .routes(routes!(update, delete))
        .routes(routes!(search))
        .routes(routes!(schedule_dream))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Workspace {
    pub id: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(value_type = Object)]
    pub configuration: Value,
    pub created_at: DateTime<Utc>,
}

impl From<crate::store::workspace::Workspace> for Workspace {
    fn from(w: crate::store::workspace::Workspace) -> Self {
        Workspace {
            id: w.name,
            metadata: object(w.metadata),
            configuration: object(w.configuration),
            created_at: w.created_at,
        }
    }
}

/// New metadata (replaces) and configuration.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct UpdateBody {
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Value>,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub configuration: Option<Value>,
}

/// A workspace or peer to get or create: `id` (or `name`), metadata, configuration.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateBody {
    #[serde(alias = "name")]
    pub id: String,
    #[serde(flatten)]
    pub fields: UpdateBody,
}

/// Returns the workspace, creating it when missing (201) or unchanged when it exists (200).
#[utoipa::path(post, path = "/v3/workspaces", request_body = CreateBody,
    responses((status = 201, body = Workspace), (status = 200, body = Workspace)))]
async fn get_or_create(gate: Gate, Body(body): Body<CreateBody>) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreateWorkspace),
            On::workspace(&body.id),
        )
        .await?;
    let store = access.store();
    let existed = store.workspace(&body.id).await?.is_some();
    let ws = store
        .get_or_create_workspace(&body.id, body.fields.metadata, body.fields.configuration)
        .await?;
    Ok(created_or_found(!existed, Workspace::from(ws)))
}

/// All workspaces (admin keys only).
#[utoipa::path(post, path = "/v3/workspaces/list", params(PageParams),
    request_body = Option<ListBody>, responses((status = 200, body = Page<Workspace>)))]
async fn list(
    gate: Gate,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Workspace>>> {
    let access = gate
        .require(rule!(QueryRoot.workspaces), On::nothing())
        .await?;
    let page = access
        .store()
        .list_workspaces(&ListBody::filters(body), params.order(), params.slice()?)
        .await?;
    Ok(params.respond(page))
}

/// Replaces metadata and merges configuration; creates the workspace when missing.
#[utoipa::path(put, path = "/v3/workspaces/{workspace_id}", request_body = UpdateBody,
    responses((status = 200, body = Workspace)))]
async fn update(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<Option<UpdateBody>>,
) -> RestResult<Json<Workspace>> {
    let access = gate
        .require(
            rule!(MutationRoot.updateWorkspace),
            On::workspace(&workspace_id),
        )
        .await?;
    let body = body.unwrap_or_default();
    let store = access.store();
    store
        .get_or_create_workspace(&workspace_id, None, None)
        .await?;
    let ws = store
        .update_workspace(&workspace_id, body.metadata, body.configuration)
        .await?;
    Ok(Json(ws.into()))
}

/// Deletes the workspace and everything in it; 409 while it has active sessions.
#[utoipa::path(delete, path = "/v3/workspaces/{workspace_id}",
    responses((status = 202, body = MessageBody), (status = 404), (status = 409)))]
async fn delete(gate: Gate, Path(workspace_id): Path<String>) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.deleteWorkspace),
            On::workspace(&workspace_id),
        )
        .await?;
    access.store().delete_workspace(&workspace_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(MessageBody {
            message: "Workspace deletion accepted".into(),
        }),
    )
        .into_response())
}

/// Messages of the workspace that match the query (hybrid full-text and semantic), best first.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/search", request_body = SearchBody,
    responses((status = 200, body = Vec<Message>)))]
async fn search(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<SearchBody>,
) -> RestResult<Json<Vec<Message>>> {
    let access = gate
        .require(rule!(Workspace.search), On::workspace(&workspace_id))
        .await?;
    super::messages::search(
        &gate,
        &access,
        MessageScope::Workspace(&workspace_id),
        &body,
    )
    .await
}

/// Honcho v3.0.12's dream request. `session_id` and `rebuild` are read and ignored: a dream here
/// always consolidates everything the observer holds about the observed, across sessions.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ScheduleDreamBody {
    pub observer: String,
    /// The observer itself when absent.
    #[serde(default)]
    pub observed: Option<String>,
    /// `omni` (the default), the only kind this server dreams.
    #[serde(default)]
    pub dream_type: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub rebuild: Option<bool>,
}

/// Queues a dream (memory consolidation, docs/dreams.md) of what `observer` holds about
/// `observed`; 204. 422 for an unknown `dream_type` or when dreams are off; 404 for an unknown
/// peer.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/schedule_dream",
    request_body = ScheduleDreamBody, responses((status = 204), (status = 404), (status = 422)))]
async fn schedule_dream(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<ScheduleDreamBody>,
) -> RestResult<StatusCode> {
    let access = gate
        .require(
            rule!(MutationRoot.scheduleDream),
            On::workspace(&workspace_id),
        )
        .await?;
    if let Some(kind) = body.dream_type.as_deref()
        && kind != "omni"
    {
        return Err(super::RestError::invalid(format!(
            "dream_type must be \"omni\" (got {kind:?}): the only dream this server runs"
        )));
    }
    let observed = body.observed.as_deref().unwrap_or(&body.observer);
    access
        .store()
        .schedule_dream(&workspace_id, &body.observer, observed)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
