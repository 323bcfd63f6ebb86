//! `/v3/workspaces/{workspace_id}/sessions`: get-or-create, list, update, delete, clone, members
//! and their configuration, search.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::messages::Message;
use super::peers::Peer;
use super::workspaces::UpdateBody;
use super::{
    Body, Gate, ListBody, MessageBody, Page, PageParams, RestError, RestResult, SearchBody,
    created_or_found, object,
};
use crate::access::{On, rule, session_reach};
use crate::store::message::MessageScope;
use crate::store::session::{MemberConfig, SessionReach};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(get_or_create))
        .routes(routes!(list))
        .routes(routes!(update, delete))
        .routes(routes!(clone))
        .routes(routes!(peers, add_peers, set_peers, remove_peers))
        .routes(routes!(peer_config, set_peer_config))
        .routes(routes!(search))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Session {
    pub id: String,
    pub is_active: bool,
    pub workspace_id: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(value_type = Object)]
    pub configuration: Value,
    pub created_at: DateTime<Utc>,
}

impl From<crate::store::session::Session> for Session {
    fn from(s: crate::store::session::Session) -> Self {
        Session {
            id: s.name,
            // Honcho v3.0.12's soft-delete flag; here a deleted session is gone at once.
            is_active: true,
            workspace_id: s.workspace_name,
            metadata: object(s.metadata),
            configuration: object(s.configuration),
            created_at: s.created_at,
        }
    }
}

/// A member's settings in a session; null means "not set".
#[derive(Debug, Default, Clone, Deserialize, Serialize, ToSchema)]
pub struct PeerConfig {
    #[serde(default)]
    pub observe_me: Option<bool>,
    #[serde(default)]
    pub observe_others: Option<bool>,
}

/// Peers by id with their settings.
type Members = BTreeMap<String, PeerConfig>;

fn members(peers: Members) -> Vec<MemberConfig> {
    peers
        .into_iter()
        .map(|(peer, c)| MemberConfig {
            peer,
            observe_me: c.observe_me,
            observe_others: c.observe_others,
        })
        .collect()
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionCreateBody {
    #[serde(alias = "name")]
    pub id: String,
    #[serde(flatten)]
    pub fields: UpdateBody,
    /// Members to add, by peer id.
    #[serde(default, alias = "peer_names")]
    pub peers: Option<Members>,
}

/// Returns the session, creating it (its workspace and listed peers too) when missing (201); an
/// existing one gets the metadata, configuration and members given (200).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions",
    request_body = SessionCreateBody,
    responses((status = 201, body = Session), (status = 200, body = Session)))]
async fn get_or_create(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Body(body): Body<SessionCreateBody>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreateSession),
            On::session(&workspace_id, &body.id),
        )
        .await?;
    let principal = gate.principal()?;
    let store = access.store();
    let existed = store.session(&workspace_id, &body.id).await?.is_some();
    let session = store
        .get_or_create_session(
            &workspace_id,
            &body.id,
            body.fields.metadata,
            body.fields.configuration,
            &members(body.peers.unwrap_or_default()),
            session_reach(&principal),
        )
        .await?;
    Ok(created_or_found(!existed, Session::from(session)))
}

/// The workspace's active sessions.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/list", params(PageParams),
    request_body = Option<ListBody>, responses((status = 200, body = Page<Session>)))]
async fn list(
    gate: Gate,
    Path(workspace_id): Path<String>,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Session>>> {
    let access = gate
        .require(rule!(Workspace.sessions), On::workspace(&workspace_id))
        .await?;
    let page = access
        .store()
        .list_sessions(
            &workspace_id,
            &ListBody::filters(body),
            params.order(),
            params.slice()?,
        )
        .await?;
    Ok(params.respond(page))
}

/// Replaces metadata and merges configuration; creates the session when missing.
#[utoipa::path(put, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}",
    request_body = UpdateBody, responses((status = 200, body = Session)))]
async fn update(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(body): Body<Option<UpdateBody>>,
) -> RestResult<Json<Session>> {
    let access = gate
        .require(
            rule!(MutationRoot.updateSession),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let body = body.unwrap_or_default();
    let session = access
        .store()
        .get_or_create_session(
            &workspace_id,
            &session_id,
            body.metadata,
            body.configuration,
            &[],
            SessionReach::Any,
        )
        .await?;
    Ok(Json(session.into()))
}

/// Deletes the session, its messages and memberships.
#[utoipa::path(delete, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}",
    responses((status = 202, body = MessageBody), (status = 404)))]
async fn delete(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.deleteSession),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    access
        .store()
        .delete_session(&workspace_id, &session_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(MessageBody {
            message: "Session deleted successfully".into(),
        }),
    )
        .into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CloneParams {
    /// Copy the messages up to and including this one (all when absent).
    message_id: Option<String>,
}

/// A copy of the session under a new id, with its members and messages.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/clone",
    params(CloneParams), responses((status = 201, body = Session)))]
async fn clone(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(params): Query<CloneParams>,
) -> RestResult<Response> {
    let access = gate
        .require(
            rule!(MutationRoot.cloneSession),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let session = access
        .store()
        .clone_session(&workspace_id, &session_id, params.message_id.as_deref())
        .await?;
    Ok(created_or_found(true, Session::from(session)))
}

/// The session's active members.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers",
    params(PageParams), responses((status = 200, body = Page<Peer>)))]
async fn peers(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(params): Query<PageParams>,
) -> RestResult<Json<Page<Peer>>> {
    let access = gate
        .require(
            rule!(Session.peers),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let (page, size) = params.page_size()?;
    let members = access
        .store()
        .members_by_sessions(&[(workspace_id.clone(), session_id.clone())])
        .await?;
    let total = members.len() as u64;
    let start = usize::try_from((page - 1).saturating_mul(size)).unwrap_or(usize::MAX);
    let keys: Vec<(String, String)> = members
        .into_iter()
        .skip(start)
        .take(size as usize)
        .map(|m| (workspace_id.clone(), m.peer_name))
        .collect();
    let mut rows = access.store().peers_by_keys(&keys).await?;
    rows.sort_by_key(|p| keys.iter().position(|k| k.1 == p.name));
    Ok(Json(params.page(rows, Some(total))))
}

/// Adds members (creating the session and peers when missing); active members keep their
/// settings.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers",
    request_body = BTreeMap<String, PeerConfig>, responses((status = 200, body = Session)))]
async fn add_peers(
    gate: Gate,
    Path(path): Path<(String, String)>,
    Body(body): Body<Members>,
) -> RestResult<Json<Session>> {
    change_members(gate, path, body, false).await
}

/// Makes the peers given the session's only active members.
#[utoipa::path(put, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers",
    request_body = BTreeMap<String, PeerConfig>, responses((status = 200, body = Session)))]
async fn set_peers(
    gate: Gate,
    Path(path): Path<(String, String)>,
    Body(body): Body<Members>,
) -> RestResult<Json<Session>> {
    change_members(gate, path, body, true).await
}

/// Adds `body`'s peers to the session; with `only`, the others leave.
async fn change_members(
    gate: Gate,
    (workspace_id, session_id): (String, String),
    body: Members,
    only: bool,
) -> RestResult<Json<Session>> {
    let access = gate
        .require(
            rule!(MutationRoot.addPeersToSession),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let (store, peers) = (access.store(), members(body));
    let session = if only {
        store
            .set_session_peers(&workspace_id, &session_id, &peers)
            .await?
    } else {
        store
            .add_peers_to_session(&workspace_id, &session_id, &peers)
            .await?
    };
    Ok(Json(session.into()))
}

/// Makes the peers given leave the session.
#[utoipa::path(delete, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers",
    request_body = Vec<String>, responses((status = 200, body = Session)))]
async fn remove_peers(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(body): Body<Vec<String>>,
) -> RestResult<Json<Session>> {
    let access = gate
        .require(
            rule!(MutationRoot.removePeersFromSession),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let session = access
        .store()
        .remove_peers_from_session(&workspace_id, &session_id, &body)
        .await?;
    Ok(Json(session.into()))
}

/// A member's settings in the session.
#[utoipa::path(get,
    path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers/{peer_id}/config",
    responses((status = 200, body = PeerConfig), (status = 404)))]
async fn peer_config(
    gate: Gate,
    Path((workspace_id, session_id, peer_id)): Path<(String, String, String)>,
) -> RestResult<Json<PeerConfig>> {
    let access = gate
        .require(
            rule!(Session.peers),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let member = access
        .store()
        .session_member(&workspace_id, &session_id, &peer_id)
        .await?
        .ok_or_else(|| {
            RestError::not_found(format!(
                "peer {peer_id} is not a member of session {session_id}"
            ))
        })?;
    Ok(Json(
        serde_json::from_value(member.configuration).unwrap_or_default(),
    ))
}

/// Sets the non-null settings of a member, adding the membership when there is none.
#[utoipa::path(put,
    path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers/{peer_id}/config",
    request_body = PeerConfig, responses((status = 204)))]
async fn set_peer_config(
    gate: Gate,
    Path((workspace_id, session_id, peer_id)): Path<(String, String, String)>,
    Body(body): Body<PeerConfig>,
) -> RestResult<StatusCode> {
    let access = gate
        .require(
            rule!(MutationRoot.setSessionPeerConfig),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let config = MemberConfig {
        peer: peer_id,
        observe_me: body.observe_me,
        observe_others: body.observe_others,
    };
    access
        .store()
        .set_session_peer_config(&workspace_id, &session_id, &config)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Messages of the session that match the query.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/search",
    request_body = SearchBody, responses((status = 200, body = Vec<Message>)))]
async fn search(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(body): Body<SearchBody>,
) -> RestResult<Json<Vec<Message>>> {
    let access = gate
        .require(
            rule!(Session.search),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    super::messages::search(
        &gate,
        &access,
        MessageScope::Session(&workspace_id, &session_id),
        &body,
    )
    .await
}
