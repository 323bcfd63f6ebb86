//! `/v3/workspaces/{workspace_id}/webhooks`: Honcho v3.0.12's webhook endpoints (get-or-create by
//! URL, list, delete, test), admin and workspace keys only. docs/webhooks.md has the events.

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::{Body, Gate, Page, PageParams, RestResult, created_or_found};
use crate::access::{On, rule};
use crate::store::page::Order;

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(get_or_create, list))
        .routes(routes!(delete))
        .routes(routes!(test))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpoint {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    pub created_at: DateTime<Utc>,
}

impl From<crate::store::webhook::Endpoint> for WebhookEndpoint {
    fn from(e: crate::store::webhook::Endpoint) -> Self {
        WebhookEndpoint {
            id: e.id,
            workspace_id: e.workspace,
            url: e.url,
            created_at: e.created_at,
        }
    }
}

/// The URL to register.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookBody {
    pub url: String,
}

/// Returns the workspace's endpoint with this URL, registering it when missing (201) or as it
/// is (200). 404 for a missing workspace, 422 for a refused URL, 409 past the limit.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/webhooks", request_body = WebhookBody,
    responses((status = 201, body = WebhookEndpoint), (status = 200, body = WebhookEndpoint),
              (status = 404), (status = 409), (status = 422)))]
async fn get_or_create(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<WebhookBody>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.createWebhook),
            On::workspace(&workspace_id),
        )
        .await?;
    let (endpoint, created) = access
        .store()
        .get_or_create_webhook(&workspace_id, &body.url)
        .await?;
    Ok(created_or_found(created, WebhookEndpoint::from(endpoint)))
}

/// The workspace's endpoints, oldest first (newest with `reverse`).
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/webhooks", params(PageParams),
    responses((status = 200, body = Page<WebhookEndpoint>)))]
async fn list(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Query(params): Query<PageParams>,
) -> RestResult<Json<Page<WebhookEndpoint>>> {
    let access = gate
        .require(rule!(Workspace.webhooks), On::workspace(&workspace_id))
        .await?;
    let (page, size) = params.page_size()?;
    // A workspace has at most HONCHO_WEBHOOK_MAX_ENDPOINTS: paged here.
    let mut all = access.store().webhooks(&workspace_id).await?;
    if params.order() == Order::Desc {
        all.reverse();
    }
    let total = all.len() as u64;
    let skip = usize::try_from((page - 1).saturating_mul(size)).unwrap_or(usize::MAX);
    let items: Vec<_> = all.into_iter().skip(skip).take(size as usize).collect();
    Ok(Json(params.page(items, Some(total))))
}

/// Removes the endpoint and its deliveries. 404 when the workspace has no such endpoint.
#[utoipa::path(delete, path = "/v3/workspaces/{workspace_id}/webhooks/{endpoint_id}",
    responses((status = 204), (status = 404)))]
async fn delete(
    gate: Gate,
    Path((workspace_id, endpoint_id)): Path<(String, String)>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.deleteWebhook),
            On::workspace(&workspace_id),
        )
        .await?;
    access
        .store()
        .delete_webhook(&workspace_id, &endpoint_id)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Queues a `test.event` to every endpoint of the workspace.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/webhooks/test",
    responses((status = 200), (status = 404)))]
async fn test(gate: Gate, Path(workspace_id): Path<String>) -> RestResult<Json<()>> {
    let access = gate
        .require(
            rule!(MutationRoot.testWebhook),
            On::workspace(&workspace_id),
        )
        .await?;
    access.store().test_webhooks(&workspace_id).await?;
    Ok(Json(()))
}
