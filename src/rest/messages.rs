//! `/v3/workspaces/{workspace_id}/sessions/{session_id}/messages`: create a batch, list, get,
//! update; and the message list every search route answers with.

use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::pdf;
use super::workspaces::UpdateBody;
use super::{
    Body, Form, Gate, ListBody, Page, PageParams, RestError, RestResult, SearchBody, object,
};
use crate::access::{Access, On, rule};
use crate::store::Store;
use crate::store::message::{MessageScope, NewMessage};
use crate::store::validate::{MAX_BATCH, MAX_MESSAGE_CHARS};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(upload))
                .layer(DefaultBodyLimit::max(UPLOAD_MAX_BYTES)),
        )
        .routes(routes!(list))
        .routes(routes!(get, update))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Message {
    pub id: String,
    pub content: String,
    pub peer_id: String,
    pub session_id: String,
    pub workspace_id: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
    pub token_count: i32,
}

impl From<crate::store::message::Message> for Message {
    fn from(m: crate::store::message::Message) -> Self {
        Message {
            id: m.public_id,
            content: m.content,
            peer_id: m.peer_name,
            session_id: m.session_name,
            workspace_id: m.workspace_name,
            metadata: object(m.metadata),
            created_at: m.created_at,
            token_count: m.token_count,
        }
    }
}

/// One message to create.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageCreate {
    pub peer_id: String,
    pub content: String,
    /// Metadata, and a configuration whose `reasoning.enabled` decides whether the deriver
    /// learns from this message (over the session's and the workspace's).
    #[serde(flatten)]
    pub attributes: UpdateBody,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageBatch {
    pub messages: Vec<MessageCreate>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageUpdate {
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// Adds the messages, in order, to the session (created with its peers when missing).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages",
    request_body = MessageBatch, responses((status = 201, body = Vec<Message>)))]
async fn create(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(body): Body<MessageBatch>,
) -> RestResult<Response> {
    let access = may_add(&gate, &workspace_id, &session_id).await?;
    let batch = body
        .messages
        .into_iter()
        .map(|m| NewMessage {
            peer: m.peer_id,
            content: m.content,
            metadata: m.attributes.metadata,
            created_at: m.created_at,
            configuration: m.attributes.configuration,
        })
        .collect();
    insert(access.store(), &workspace_id, &session_id, batch).await
}

/// The largest upload body: a file of [`MAX_BATCH`] messages of [`MAX_MESSAGE_CHARS`] characters
/// at 4 bytes each (UTF-8's most), and 64 KiB for the other fields and the form's framing. A
/// file within that which still makes more than 100 messages is 413 once it is read.
pub const UPLOAD_MAX_BYTES: usize = MAX_BATCH * MAX_MESSAGE_CHARS * 4 + 64 * 1024;

/// Adds a text, JSON or PDF file as messages by `peer_id`, one per chunk of at most 25,000
/// characters (multipart fields `file`, `peer_id`, and optionally `metadata`, `configuration` and
/// `created_at`). A PDF's text is extracted page by page ([`pdf`]; 422 when it cannot be read or
/// has no text); other types are 415. At most 100 chunks, in one transaction (413 above, and for
/// a body over [`UPLOAD_MAX_BYTES`]).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/upload",
    responses((status = 201, body = Vec<Message>), (status = 413), (status = 415),
        (status = 422), (status = 503)))]
async fn upload(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Form(mut form): Form,
) -> RestResult<Response> {
    let access = may_add(&gate, &workspace_id, &session_id).await?;
    let (mut text, mut peer, mut metadata, mut created_at) = (None, None, None, None);
    let mut configuration = None;
    let bad = |e: axum::extract::multipart::MultipartError| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => RestError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the upload is larger than {UPLOAD_MAX_BYTES} bytes: a file makes at most \
                 {MAX_BATCH} messages of {MAX_MESSAGE_CHARS} characters"
            ),
        ),
        _ => RestError::invalid(e.body_text()),
    };
    while let Some(field) = form.next_field().await.map_err(bad)? {
        match field.name().unwrap_or_default() {
            "file" => {
                let kind = field.content_type().unwrap_or("text/plain").to_owned();
                let is_pdf = kind == "application/pdf";
                if !(is_pdf || kind.starts_with("text/") || kind == "application/json") {
                    return Err(RestError::new(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        format!("{kind} files are not supported: text, JSON and PDF files only"),
                    ));
                }
                let bytes = field.bytes().await.map_err(bad)?;
                text = Some(match is_pdf {
                    true => pdf::text(bytes.to_vec(), MAX_BATCH * MAX_MESSAGE_CHARS).await?,
                    false => String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            "peer_id" => peer = Some(field.text().await.map_err(bad)?),
            // As Honcho v3.0.12: a value that does not parse is left out.
            "metadata" => metadata = serde_json::from_str(&field.text().await.map_err(bad)?).ok(),
            "configuration" => {
                configuration = serde_json::from_str(&field.text().await.map_err(bad)?).ok()
            }
            "created_at" => created_at = field.text().await.map_err(bad)?.parse().ok(),
            _ => {}
        }
    }
    let text = text.ok_or_else(|| RestError::invalid("the form needs a file field"))?;
    let peer = peer.ok_or_else(|| RestError::invalid("the form needs a peer_id field"))?;
    let chars: Vec<char> = text.chars().collect();
    let chunks: Vec<String> = chars
        .chunks(MAX_MESSAGE_CHARS)
        .map(|c| c.iter().collect())
        .collect();
    if chunks.len() > MAX_BATCH {
        return Err(RestError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the file makes more than 100 messages of 25,000 characters",
        ));
    }
    let batch = chunks
        .into_iter()
        .map(|content| NewMessage {
            peer: peer.clone(),
            content,
            metadata: metadata.clone(),
            created_at,
            configuration: configuration.clone(),
        })
        .collect();
    insert(access.store(), &workspace_id, &session_id, batch).await
}

/// The check both ways of adding messages pass first: an upload is not read before it.
async fn may_add<'a>(
    gate: &'a Gate,
    workspace_id: &str,
    session_id: &str,
) -> RestResult<Access<'a>> {
    gate.require(
        rule!(MutationRoot.createMessages),
        On::session(workspace_id, session_id),
    )
    .await
}

/// Creates the batch; 201 with the messages.
async fn insert(
    store: &Store,
    workspace_id: &str,
    session_id: &str,
    batch: Vec<NewMessage>,
) -> RestResult<Response> {
    let created = store
        .create_messages(workspace_id, session_id, batch)
        .await?;
    let body: Vec<Message> = created.into_iter().map(Message::from).collect();
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// The session's messages, oldest first (newest first with `reverse`).
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/list",
    params(PageParams), request_body = Option<ListBody>,
    responses((status = 200, body = Page<Message>)))]
async fn list(
    gate: Gate,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(params): Query<PageParams>,
    Body(body): Body<Option<ListBody>>,
) -> RestResult<Json<Page<Message>>> {
    let access = gate
        .require(
            rule!(Session.messages),
            On::session(&workspace_id, &session_id),
        )
        .await?;
    let page = access
        .store()
        .list_messages(
            MessageScope::Session(&workspace_id, &session_id),
            &ListBody::filters(body),
            params.order(),
            params.slice()?,
        )
        .await?;
    Ok(params.respond(page))
}

/// Looks the message of a `(workspace_id, session_id, message_id)` path up, in that session
/// only; the rule is checked on the session.
async fn message_of(
    gate: &Gate,
    (workspace_id, session_id, message_id): &(String, String, String),
    field: crate::access::Field,
) -> RestResult<(crate::store::message::Message, Store)> {
    let access = gate
        .require(field, On::message(workspace_id, Some(session_id)))
        .await?;
    let store = access.store().clone();
    let found = store
        .message(workspace_id, message_id)
        .await?
        .filter(|m| m.session_name == *session_id)
        .ok_or_else(|| RestError::not_found(format!("Message with ID {message_id} not found")))?;
    Ok((found, store))
}

/// One message of the session.
#[utoipa::path(get,
    path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/{message_id}",
    responses((status = 200, body = Message), (status = 404)))]
async fn get(gate: Gate, Path(path): Path<(String, String, String)>) -> RestResult<Json<Message>> {
    let (found, _) = message_of(&gate, &path, rule!(Workspace.message)).await?;
    Ok(Json(found.into()))
}

/// Replaces the message's metadata.
#[utoipa::path(put,
    path = "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/{message_id}",
    request_body = MessageUpdate, responses((status = 200, body = Message), (status = 404)))]
async fn update(
    gate: Gate,
    Path(path): Path<(String, String, String)>,
    Body(body): Body<MessageUpdate>,
) -> RestResult<Json<Message>> {
    let (_, store) = message_of(&gate, &path, rule!(MutationRoot.updateMessage)).await?;
    let (workspace_id, _, message_id) = &path;
    let updated = store
        .update_message(workspace_id, message_id, body.metadata)
        .await?;
    Ok(Json(updated.into()))
}

/// The messages of `scope` that match the search, best first.
pub async fn search(
    gate: &Gate,
    access: &Access<'_>,
    scope: MessageScope<'_>,
    body: &SearchBody,
) -> RestResult<Json<Vec<Message>>> {
    let store = access.store();
    let keys = gate.search_keys(scope.workspace()).await;
    // A scope key searches inside its scope whatever it asks; others where they ask.
    let within = access.recall_scope(body.scope.as_deref())?;
    let filters = store
        .within_scope(scope.workspace(), within.as_deref(), body.filters())
        .await?;
    let found = store
        .search(scope, &body.query, &filters, body.limit(), keys)
        .await?;
    Ok(Json(found.into_iter().map(Message::from).collect()))
}
