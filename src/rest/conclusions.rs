//! `/v3/workspaces/{workspace_id}/conclusions`: create, list, query, delete (workspace keys
//! only).

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use sea_orm::ActiveEnum;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::{Body, Gate, ListBody, Page, PageParams, RestResult};
use crate::access::{On, rule};
use crate::store::conclusion::NewConclusion;
use crate::store::page::Order;

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(list))
        .routes(routes!(query))
        .routes(routes!(delete))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Conclusion {
    pub id: String,
    pub content: String,
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    /// explicit, deductive, inductive or contradiction.
    pub level: String,
    pub created_at: DateTime<Utc>,
}

impl From<crate::store::conclusion::Conclusion> for Conclusion {
    fn from(c: crate::store::conclusion::Conclusion) -> Self {
        Conclusion {
            id: c.id,
            content: c.content,
            observer_id: c.observer,
            observed_id: c.observed,
            session_id: c.session_name,
            level: c.level.to_value(),
            created_at: c.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ConclusionCreate {
    pub content: String,
    pub observer_id: String,
    pub observed_id: String,
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ConclusionBatch {
    #[serde(alias = "observations")]
    pub conclusions: Vec<ConclusionCreate>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ConclusionQuery {
    pub query: String,
    /// 1 to 100 (10).
    #[serde(default)]
    pub top_k: Option<u64>,
    /// Largest cosine distance, 0 to 1.
    #[serde(default)]
    pub distance: Option<f64>,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub filters: Option<Value>,
}

/// States conclusions (level explicit), embedded at once.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/conclusions",
    request_body = ConclusionBatch, responses((status = 201, body = Vec<Conclusion>)))]
async fn create(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<ConclusionBatch>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.createConclusions),
            On::workspace(&workspace_id),
        )
        .await?;
    let batch = body
        .conclusions
        .into_iter()
        .map(|c| NewConclusion {
            content: c.content,
            observer: c.observer_id,
            observed: c.observed_id,
            session: c.session_id,
            metadata: None,
        })
        .collect();
    let created = access
        .store()
        .create_conclusions(&workspace_id, batch)
        .await?;
    let body: Vec<Conclusion> = created.into_iter().map(Conclusion::from).collect();
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// The workspace's conclusions, newest first (oldest first with `reverse`).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/conclusions/list",
    params(PageParams), request_body = Option<ListBody>,
    responses((status = 200, body = Page<Conclusion>)))]
async fn list(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Conclusion>>> {
    let access = gate
        .require(rule!(Workspace.conclusions), On::workspace(&workspace_id))
        .await?;
    let page = access
        .store()
        .list_conclusions(
            &workspace_id,
            None,
            &ListBody::filters(body),
            params.order_from(Order::Desc),
            params.slice()?,
        )
        .await?;
    Ok(params.respond(page))
}

/// The conclusions nearest the query by meaning.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/conclusions/query",
    request_body = ConclusionQuery, responses((status = 200, body = Vec<Conclusion>)))]
async fn query(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<ConclusionQuery>,
) -> RestResult<Json<Vec<Conclusion>>> {
    let access = gate
        .require(
            rule!(Workspace.queryConclusions),
            On::workspace(&workspace_id),
        )
        .await?;
    let filters = ListBody::filters(Some(ListBody {
        filters: body.filters,
    }));
    let found = access
        .store()
        .query_conclusions(
            &workspace_id,
            &body.query,
            body.top_k.unwrap_or(10),
            body.distance,
            &filters,
        )
        .await?;
    Ok(Json(found.into_iter().map(Conclusion::from).collect()))
}

/// Deletes a conclusion.
#[utoipa::path(delete, path = "/v3/workspaces/{workspace_id}/conclusions/{conclusion_id}",
    responses((status = 204), (status = 404)))]
async fn delete(
    gate: Gate,
    Path((workspace_id, conclusion_id)): Path<(String, String)>,
) -> RestResult<StatusCode> {
    let access = gate
        .require(
            rule!(MutationRoot.deleteConclusion),
            On::workspace(&workspace_id),
        )
        .await?;
    access
        .store()
        .delete_conclusion(&workspace_id, &conclusion_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
