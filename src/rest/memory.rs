//! The reads Honcho v3.0.12 fills by LLM, served from what is stored: a peer's representation (its
//! conclusions, by level, as Honcho v3.0.12 formats them), peer cards, peer and session context,
//! session summaries (written by the deriver), and the deriver's queue status.

use axum::Json;
use axum::extract::{Path, Query};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::messages::Message;
use super::{Body, Gate, RestError, RestResult, ScopeOption};
use crate::access::{On, rule};
use crate::dialectic::representation::{self, DEFAULT_MAX_CONCLUSIONS, Recall};
use crate::store::{Store, summary};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(representation))
        .routes(routes!(card, set_card))
        .routes(routes!(peer_context))
        .routes(routes!(session_context))
        .routes(routes!(summaries))
        .routes(routes!(queue_status))
}

/// A session context's token budget when none is asked for, and the largest one (Honcho v3.0.12's).
const MAX_CONTEXT_TOKENS: i64 = 100_000;

/// `observer`'s representation of `observed` (of `session`'s conclusions only, when given; of
/// the conclusions of the scope's sessions only, when `within` one).
async fn represent(
    store: &Store,
    workspace: &str,
    observer: &str,
    observed: &str,
    session: Option<&str>,
    within: Option<&str>,
    recall: &Recall,
) -> RestResult<String> {
    let scope = session.map_or_else(|| json!({}), |s| json!({"session_id": s}));
    let scope = store.within_scope(workspace, within, scope).await?;
    Ok(
        representation::represent_with(store, workspace, observer, observed, &scope, recall)
            .await?,
    )
}

/// Honcho v3.0.12's semantic options of a representation, as the REST routes take them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SearchOptions {
    /// Curates the representation around the conclusions that best answer this.
    #[serde(default)]
    pub search_query: Option<String>,
    /// With `search_query`: how many conclusions the search gives, 1 to 100 (a third of
    /// `max_conclusions`).
    #[serde(default)]
    pub search_top_k: Option<u64>,
    /// With `search_query`: cosine distance, 0 to 1, beyond which a conclusion is not found.
    #[serde(default)]
    pub search_max_distance: Option<f64>,
    /// Gives a share to the conclusions derived most often.
    #[serde(default)]
    pub include_most_frequent: Option<bool>,
    /// 1 to 100 (25).
    #[serde(default)]
    pub max_conclusions: Option<u64>,
}

/// The search options of a query-string struct (serde_urlencoded reads no numbers through
/// `#[serde(flatten)]`, so those structs repeat the fields).
macro_rules! search_of {
    ($p:expr) => {
        SearchOptions {
            search_query: $p.search_query.clone(),
            search_top_k: $p.search_top_k,
            search_max_distance: $p.search_max_distance,
            include_most_frequent: $p.include_most_frequent,
            max_conclusions: $p.max_conclusions,
        }
    };
}

impl SearchOptions {
    /// The recall these options ask for; `frequent` is the route's `include_most_frequent`
    /// default (Honcho v3.0.12's defaults differ between routes).
    fn recall(&self, frequent: bool) -> Recall {
        Recall {
            max: self.max_conclusions.unwrap_or(DEFAULT_MAX_CONCLUSIONS),
            search_query: self.search_query.clone(),
            search_top_k: self.search_top_k,
            search_max_distance: self.search_max_distance,
            include_most_frequent: self.include_most_frequent.unwrap_or(frequent),
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct RepresentationBody {
    /// Only conclusions drawn in this session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The peer represented (the path's peer when absent).
    #[serde(default)]
    pub target: Option<String>,
    #[serde(flatten)]
    pub search: SearchOptions,
    /// Only conclusions drawn in this scope's sessions (docs/scopes.md).
    #[serde(default)]
    pub scope: Option<ScopeOption>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Representation {
    pub representation: String,
}

/// What the peer knows of itself, or of `target`, from its stored conclusions.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/representation",
    request_body = RepresentationBody, responses((status = 200, body = Representation)))]
async fn representation(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<Option<RepresentationBody>>,
) -> RestResult<Json<Representation>> {
    let access = gate
        .require(
            rule!(Peer.representation),
            On::peer(&workspace_id, &peer_id),
        )
        .await?;
    let body = body.unwrap_or_default();
    let within = access.recall_scope(ScopeOption::one(body.scope.as_ref())?)?;
    let target = body.target.as_deref().unwrap_or(&peer_id);
    let representation = represent(
        access.store(),
        &workspace_id,
        &peer_id,
        target,
        body.session_id.as_deref(),
        within.as_deref(),
        &body.search.recall(false),
    )
    .await?;
    Ok(Json(Representation { representation }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TargetParams {
    /// The other peer (the path's peer when absent).
    target: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PeerCard {
    pub peer_card: Option<Vec<String>>,
}

/// The peer's card of itself, or of `target`; null when never set.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/card",
    params(TargetParams), responses((status = 200, body = PeerCard)))]
async fn card(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(params): Query<TargetParams>,
) -> RestResult<Json<PeerCard>> {
    let access = gate
        .require(rule!(Peer.card), On::peer(&workspace_id, &peer_id))
        .await?;
    let target = params.target.as_deref().unwrap_or(&peer_id);
    let peer_card = access
        .store()
        .peer_card(&workspace_id, &peer_id, target)
        .await?;
    Ok(Json(PeerCard { peer_card }))
}

/// Replaces the peer's card of itself, or of `target`.
#[utoipa::path(put, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/card",
    params(TargetParams), request_body = PeerCard, responses((status = 200, body = PeerCard)))]
async fn set_card(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(params): Query<TargetParams>,
    Body(body): Body<PeerCard>,
) -> RestResult<Json<PeerCard>> {
    let access = gate
        .require(
            rule!(MutationRoot.updatePeer),
            On::peer(&workspace_id, &peer_id),
        )
        .await?;
    let target = params.target.as_deref().unwrap_or(&peer_id);
    let card = access
        .store()
        .set_peer_card(
            &workspace_id,
            &peer_id,
            target,
            body.peer_card.unwrap_or_default(),
        )
        .await?;
    Ok(Json(PeerCard {
        peer_card: Some(card),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PeerContext {
    pub peer_id: String,
    pub target_id: String,
    pub representation: String,
    pub peer_card: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PeerContextParams {
    /// The other peer (the path's peer when absent).
    target: Option<String>,
    /// Curates the representation around the conclusions that best answer this.
    search_query: Option<String>,
    /// With `search_query`: how many conclusions the search gives, 1 to 100.
    search_top_k: Option<u64>,
    /// With `search_query`: cosine distance, 0 to 1, beyond which a conclusion is not found.
    search_max_distance: Option<f64>,
    /// Gives a share to the conclusions derived most often.
    include_most_frequent: Option<bool>,
    /// 1 to 100 (25).
    max_conclusions: Option<u64>,
    /// Only conclusions drawn in this scope's sessions; the card is then left out.
    scope: Option<String>,
}

/// The peer's representation and card of itself, or of `target`, in one call. The most
/// frequent conclusions are included unless `include_most_frequent=false` (Honcho v3.0.12's
/// default here).
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/context",
    params(PeerContextParams), responses((status = 200, body = PeerContext)))]
async fn peer_context(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(params): Query<PeerContextParams>,
) -> RestResult<Json<PeerContext>> {
    let access = gate
        .require(
            rule!(Peer.representation),
            On::peer(&workspace_id, &peer_id),
        )
        .await?;
    let store = access.store();
    let within = access.recall_scope(params.scope.as_deref())?;
    let target = params.target.clone().unwrap_or_else(|| peer_id.clone());
    let recall = search_of!(params).recall(true);
    let representation = represent(
        store,
        &workspace_id,
        &peer_id,
        &target,
        None,
        within.as_deref(),
        &recall,
    )
    .await?;
    // A card is bound to no session: recall inside a scope leaves it out.
    let peer_card = match within {
        Some(_) => None,
        None => {
            gate.require(rule!(Peer.card), On::peer(&workspace_id, &peer_id))
                .await?;
            store.peer_card(&workspace_id, &peer_id, &target).await?
        }
    };
    Ok(Json(PeerContext {
        peer_id,
        target_id: target,
        representation,
        peer_card,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionContextParams {
    /// Token budget of the messages, up to 100000 (100000).
    tokens: Option<i64>,
    /// Add this peer's representation and card.
    peer_target: Option<String>,
    /// Whose view of `peer_target` (its own when absent).
    peer_perspective: Option<String>,
    /// Curates the representation around the conclusions that best answer this.
    search_query: Option<String>,
    /// With `search_query`: how many conclusions the search gives, 1 to 100.
    search_top_k: Option<u64>,
    /// With `search_query`: cosine distance, 0 to 1, beyond which a conclusion is not found.
    search_max_distance: Option<f64>,
    /// Gives a share to the conclusions derived most often.
    include_most_frequent: Option<bool>,
    /// 1 to 100 (25).
    max_conclusions: Option<u64>,
    /// Open with the session's summary that fits 40% of the budget (true).
    summary: Option<bool>,
    /// Recall inside this scope: no messages unless the session is one of its sessions, and
    /// `peer_target`'s representation only from its sessions, without the card (docs/scopes.md).
    scope: Option<String>,
}

/// A summary of a session, written by the deriver.
#[derive(Debug, Serialize, ToSchema)]
pub struct Summary {
    pub content: String,
    /// The last message it covers.
    pub message_id: String,
    /// `honcho_chat_summary_short` or `honcho_chat_summary_long`, as Honcho v3.0.12 names them.
    pub summary_type: String,
    pub created_at: DateTime<Utc>,
    pub token_count: i64,
}

impl From<summary::Summary> for Summary {
    fn from(s: summary::Summary) -> Self {
        Summary {
            content: s.content,
            message_id: s.message_id,
            summary_type: format!("honcho_chat_summary_{}", s.kind.as_str()),
            created_at: s.created_at,
            token_count: i64::from(s.token_count),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionContext {
    pub id: String,
    pub messages: Vec<Message>,
    pub summary: Option<Summary>,
    pub peer_representation: Option<String>,
    pub peer_card: Option<Vec<String>>,
}

/// The session's newest messages that fit the token budget (oldest first), and optionally a
/// peer's representation and card.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/context",
    params(SessionContextParams), responses((status = 200, body = SessionContext)))]
async fn session_context(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(params): Query<SessionContextParams>,
) -> RestResult<Json<SessionContext>> {
    let access = gate
        .require(
            rule!(Session.messages),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    // `peer_target` adds the perspective peer's memory, which the session's key does not
    // cover: its conclusions (`Peer.representation`, as the representation route) and its
    // cards, kept in its own row (`Peer.card`, as the card route), which recall inside a
    // scope leaves out. Checked before anything is read.
    let mut within = access.recall_scope(params.scope.as_deref())?;
    if let Some(target) = &params.peer_target {
        let on = On::peer(
            &workspace_id,
            params.peer_perspective.as_deref().unwrap_or(target),
        );
        let recall = gate.require(rule!(Peer.representation), on).await?;
        within = recall.recall_scope(params.scope.as_deref())?;
        if within.is_none() {
            gate.require(rule!(Peer.card), on).await?;
        }
    }
    search_of!(params).recall(false).check()?;
    let store = access.store();
    let budget = params.tokens.unwrap_or(MAX_CONTEXT_TOKENS);
    if !(1..=MAX_CONTEXT_TOKENS).contains(&budget) {
        return Err(RestError::invalid(format!(
            "tokens must be between 1 and {MAX_CONTEXT_TOKENS}"
        )));
    }
    let outside = match &within {
        Some(scope) => {
            store.require_scope(&workspace_id, scope).await?;
            !store
                .session_in_scope(&workspace_id, scope, &session_id)
                .await?
        }
        None => false,
    };
    // A session outside the recall scope gives nothing: neither its messages nor its summary.
    let (messages, summary) = if outside {
        (Vec::new(), None)
    } else {
        let context = store
            .session_context(
                &workspace_id,
                &session_id,
                budget,
                params.summary.unwrap_or(true),
            )
            .await?;
        let messages: Vec<Message> = context.messages.into_iter().map(Message::from).collect();
        (messages, context.summary)
    };
    let (peer_representation, peer_card) = match &params.peer_target {
        Some(target) => {
            let observer = params.peer_perspective.as_deref().unwrap_or(target);
            let recall = search_of!(params).recall(false);
            let rep = represent(
                store,
                &workspace_id,
                observer,
                target,
                None,
                within.as_deref(),
                &recall,
            )
            .await?;
            let card = match within {
                Some(_) => None,
                None => store
                    .peer_card(&workspace_id, observer, target)
                    .await
                    .ok()
                    .flatten(),
            };
            (Some(rep), card)
        }
        None => (None, None),
    };
    Ok(Json(SessionContext {
        id: session_id,
        messages,
        summary: summary.map(Summary::from),
        peer_representation,
        peer_card,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Summaries {
    pub id: String,
    pub short_summary: Option<Summary>,
    pub long_summary: Option<Summary>,
}

/// The session's short and long summaries, each null until the deriver has written one.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/summaries",
    responses((status = 200, body = Summaries)))]
async fn summaries(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
) -> RestResult<Json<Summaries>> {
    let access = gate
        .require(
            rule!(Session.messages),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let both = access
        .store()
        .session_summaries(&workspace_id, &session_id)
        .await?;
    Ok(Json(Summaries {
        id: session_id,
        short_summary: both.short.map(Summary::from),
        long_summary: both.long.map(Summary::from),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct QueueStatus {
    pub total_work_units: i64,
    /// Always 0: finished units are deleted, not counted.
    pub completed_work_units: i64,
    pub in_progress_work_units: i64,
    pub pending_work_units: i64,
    #[schema(value_type = Object)]
    pub sessions: Value,
}

/// The deriver's queue for the workspace.
#[utoipa::path(get, path = "/v3/workspaces/{workspace_id}/queue/status",
    responses((status = 200, body = QueueStatus)))]
async fn queue_status(
    gate: Gate,
    Path(workspace_id): Path<String>,
) -> RestResult<Json<QueueStatus>> {
    let access = gate
        .require(rule!(Workspace.deriverStatus), On::workspace(&workspace_id))
        .await?;
    let status = access.store().deriver_status(&workspace_id).await?;
    Ok(Json(QueueStatus {
        total_work_units: status.pending + status.in_progress,
        completed_work_units: 0,
        in_progress_work_units: status.in_progress,
        pending_work_units: status.pending,
        sessions: json!({}),
    }))
}
