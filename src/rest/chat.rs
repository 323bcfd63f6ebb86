//! `POST /v3/workspaces/{w}/peers/{p}/chat`: Honcho's dialectic, answered by the configured LLM
//! from the peer's memory ([`crate::dialectic`]). `stream: true` answers with server-sent events
//! in Honcho's shape, one `{"delta": {"content": ...}, "done": false}` per piece as the model
//! writes it, then `{"done": true}`; a model failing halfway ends the stream with
//! `{"done": true, "error": {"status": 503, "detail": ...}}`. Without an LLM the route answers
//! 503 and says what to configure.

use std::convert::Infallible;

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::RestState;
use super::error::ErrorBody;
use super::{Body, Gate, RestError, RestResult, ScopeOption};
use crate::access::Failure;
use crate::access::{On, rule};
use crate::dialectic::{self, DialecticError, Question, ReasoningLevel, session_allowlist};

pub fn routes() -> OpenApiRouter<RestState> {
    OpenApiRouter::new().routes(routes!(chat))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatBody {
    /// The question, 1 to 10,000 characters.
    pub query: String,
    /// A session whose latest messages are shown to the model and whose messages are searched.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The peer asked about, from the path's peer's point of view (the path's peer when absent).
    #[serde(default)]
    pub target: Option<String>,
    /// Only `session_id`: an id, a list of ids or `{"in": [...]}`; recall keeps to those sessions.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub filters: Option<Value>,
    /// Recall only inside this scope's sessions (docs/scopes.md); peer cards are left out.
    #[serde(default)]
    pub scope: Option<ScopeOption>,
    /// Answer with server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// minimal, low (default), medium, high or max: the answer's token budget.
    #[serde(default)]
    pub reasoning_level: Option<String>,
    /// A JSON Schema whose root type is `object`: `content` is then JSON text of that shape.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub response_format: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatAnswer {
    /// The answer; null when the model had nothing to say.
    pub content: Option<String>,
}

impl From<DialecticError> for RestError {
    fn from(e: DialecticError) -> Self {
        Failure::from(e).into()
    }
}

/// Answers a question about the peer (or `target`) from its memory, with the configured LLM.
#[utoipa::path(post, path = "/v3/workspaces/{workspace_id}/peers/{peer_id}/chat",
    request_body = ChatBody,
    responses((status = 200, body = ChatAnswer,
        description = "the answer; with stream: true, text/event-stream"),
        (status = 422, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody,
            description = "no LLM is configured, or it failed")))]
async fn chat(
    gate: Gate,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<ChatBody>,
) -> RestResult<Response> {
    let access = gate
        .require(rule!(Peer.chat), On::peer(&workspace_id, &peer_id))
        .await?;
    let Some(dialectic) = gate.dialectic() else {
        return Err(RestError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "chat answers from an LLM, and none is configured: set HONCHO_LLM=openai and \
             HONCHO_LLM_BASE_URL (any OpenAI-compatible endpoint; see docs/deriver.md); \
             stored conclusions are under POST .../conclusions/list and .../conclusions/query",
        ));
    };
    let within = access.recall_scope(ScopeOption::one(body.scope.as_ref())?)?;
    let mut question = Question {
        observed: body.target.unwrap_or_else(|| peer_id.clone()),
        observer: peer_id,
        workspace: workspace_id,
        sessions: session_allowlist(body.filters.as_ref())?,
        session: body.session_id,
        query: body.query.replace('\0', ""),
        level: match &body.reasoning_level {
            Some(name) => ReasoningLevel::parse(name)?,
            None => ReasoningLevel::default(),
        },
        response_format: body.response_format,
        scoped: false,
    };
    dialectic::confine(access.store(), &mut question, within.as_deref()).await?;
    if !body.stream {
        let content = dialectic.answer(access.store(), &question).await?;
        return Ok(Json(ChatAnswer { content }).into_response());
    }
    let mut pieces = dialectic.answer_stream(access.store(), &question).await?;
    // The status goes with the first piece: a model that fails before it writes anything is
    // still a status and a body, which every client understands.
    let first = match pieces.next().await {
        Some(Err(e)) => return Err(DialecticError::from(e).into()),
        first => first,
    };
    let events = async_stream::stream! {
        let mut next = first;
        loop {
            let data = match next {
                Some(Ok(content)) => json!({"delta": {"content": content}, "done": false}),
                Some(Err(e)) => {
                    let e = RestError::from(DialecticError::from(e));
                    yield event(json!({"done": true,
                        "error": {"status": e.status.as_u16(), "detail": e.detail}}));
                    return;
                }
                None => break,
            };
            yield event(data);
            next = pieces.next().await;
        }
        yield event(json!({"done": true}));
    };
    // Dropping the response (the client went away) drops `pieces`, and with it the model's
    // request.
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn event(data: Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(data.to_string()))
}
