//! `/v3/workspaces/{workspace_id}/peers`: get-or-create, list, update, sessions, search.

use axum::Json;
use axum::extract::{Path, Query};
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::messages::Message;
use super::sessions::Session;
use super::workspaces::{CreateBody, UpdateBody};
use super::{
    Body, Gate, ListBody, Page, PageParams, RestResult, SearchBody, created_or_found, object,
};
use crate::access::{On, peer_reach, rule};
use crate::store::message::MessageScope;

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(get_or_create))
        .routes(routes!(list))
        .routes(routes!(update))
        .routes(routes!(sessions))
        .routes(routes!(search))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Peer {
    pub id: String,
    pub workspace_id: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(value_type = Object)]
    pub configuration: Value,
    pub created_at: DateTime<Utc>,
}

impl From<crate::store::peer::Peer> for Peer {
    fn from(p: crate::store::peer::Peer) -> Self {
        Peer {
            id: p.name,
            workspace_id: p.workspace_name,
            metadata: object(p.metadata),
            configuration: object(p.configuration),
            created_at: p.created_at,
        }
    }
}

/// Returns the peer, creating it (and its workspace) when missing (201); an existing peer gets
/// the metadata and configuration given (200).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers", request_body = CreateBody,
    responses((status = 201, body = Peer), (status = 200, body = Peer)))]
async fn get_or_create(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<CreateBody>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreatePeer),
            On::peer(&workspace_id, &body.id),
        )
        .await?;
    let reach = peer_reach(&gate.principal()?);
    let store = access.store();
    let key = [(workspace_id.clone(), body.id.clone())];
    let existed = !store.peers_by_keys(&key).await?.is_empty();
    let peer = store
        .get_or_create_peer(
            &workspace_id,
            &body.id,
            body.fields.metadata,
            body.fields.configuration,
            reach,
        )
        .await?;
    Ok(created_or_found(!existed, Peer::from(peer)))
}

/// The workspace's peers.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers/list", params(PageParams),
    request_body = Option<ListBody>, responses((status = 200, body = Page<Peer>)))]
async fn list(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Peer>>> {
    let access = gate
        .require(rule!(Workspace.peers), On::workspace(&workspace_id))
        .await?;
    let page = access
        .store()
        .list_peers(
            &workspace_id,
            &ListBody::filters(body),
            params.order(),
            params.slice()?,
        )
        .await?;
    Ok(params.respond(page))
}

/// Replaces the metadata and configuration given; creates the peer when missing.
#[utoipa::path(put, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}",
    request_body = UpdateBody, responses((status = 200, body = Peer)))]
async fn update(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<Option<UpdateBody>>,
) -> RestResult<Json<Peer>> {
    let access = gate
        .require(
            rule!(MutationRoot.updatePeer),
            On::peer(&workspace_id, &peer_id),
        )
        .await?;
    let body = body.unwrap_or_default();
    let peer = access
        .store()
        .get_or_create_peer(
            &workspace_id,
            &peer_id,
            body.metadata,
            body.configuration,
            crate::store::peer::PeerReach::Any,
        )
        .await?;
    Ok(Json(peer.into()))
}

/// Sessions the peer is or was a member of.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/sessions",
    params(PageParams), request_body = Option<ListBody>,
    responses((status = 200, body = Page<Session>)))]
async fn sessions(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Session>>> {
    let access = gate
        .require(rule!(Peer.sessions), On::peer(&workspace_id, &peer_id))
        .await?;
    let page = access
        .store()
        .list_peer_sessions(
            &workspace_id,
            &peer_id,
            &ListBody::filters(body),
            params.order(),
            params.slice()?,
        )
        .await?;
    Ok(params.respond(page))
}

/// Messages the peer wrote, across the workspace, that match the query.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/search",
    request_body = SearchBody, responses((status = 200, body = Vec<Message>)))]
async fn search(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<SearchBody>,
) -> RestResult<Json<Vec<Message>>> {
    let access = gate
        .require(rule!(Peer.search), On::peer(&workspace_id, &peer_id))
        .await?;
    super::messages::search(
        &gate,
        &access,
        MessageScope::Peer(&workspace_id, &peer_id),
        &body,
    )
    .await
}
