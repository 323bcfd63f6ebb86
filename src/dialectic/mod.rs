//! The dialectic: a question about a peer answered by the LLM from what memory holds.
//!
//! Honcho v3.0.12's dialectic is an agent that calls search tools in a loop. Here the material is gathered
//! up front, in a few statements, and the model is asked once: the observer's cards, its
//! representation of the observed peer (newest conclusions by level), the conclusions nearest the
//! question, the observed peer's messages that match it, and, when a session is named, that
//! session's latest turns. One call keeps the latency and the cost of a chat predictable on small
//! local models, which follow one well-filled prompt better than a tool protocol.

mod prompt;
pub mod representation;

use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::llm::{JsonRequest, Llm, LlmError, TextRequest, TextStream};
use crate::store::conclusion::Conclusion;
use crate::store::message::{Message, MessageScope};
use crate::store::page::{Order, Slice};
use crate::store::search::check_query;
use crate::store::search_keys::SearchKeys;
use crate::store::{Store, StoreError};

/// Longest question accepted (characters; Honcho v3.0.12's).
pub const MAX_QUERY_CHARS: usize = 10_000;
/// Conclusions nearest the question that are shown besides the representation.
const RELEVANT_CONCLUSIONS: u64 = 10;
/// Messages matching the question that are shown.
const FOUND_MESSAGES: u64 = 10;
/// A named session's latest turns that are shown.
const RECENT_MESSAGES: u64 = 20;

/// How hard the model may think: Honcho's levels, here the answer's token budget. Named in
/// lower case over REST, in any case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, strum::EnumString, strum::VariantNames)]
#[strum(serialize_all = "lowercase", ascii_case_insensitive)]
pub enum ReasoningLevel {
    Minimal,
    #[default]
    Low,
    Medium,
    High,
    Max,
}

impl ReasoningLevel {
    pub fn parse(name: &str) -> Result<Self, DialecticError> {
        name.parse().map_err(|_| {
            DialecticError::Invalid(format!(
                "reasoning_level must be one of {} (got {name:?})",
                <Self as strum::VariantNames>::VARIANTS.join(", ")
            ))
        })
    }

    fn max_tokens(self) -> u32 {
        match self {
            ReasoningLevel::Minimal => 512,
            ReasoningLevel::Low => 1024,
            ReasoningLevel::Medium => 2048,
            ReasoningLevel::High => 4096,
            ReasoningLevel::Max => 8192,
        }
    }
}

/// One question to the dialectic.
#[derive(Clone, Debug)]
pub struct Question {
    pub workspace: String,
    /// Who asks; the material is what this peer holds.
    pub observer: String,
    /// Who the question is about (the observer itself for its own memory).
    pub observed: String,
    /// A session whose latest turns are shown and whose messages are searched.
    pub session: Option<String>,
    /// The only sessions whose conclusions and messages may be used (Honcho v3.0.12's `session_id`
    /// filter), none for all.
    pub sessions: Option<Vec<String>>,
    pub query: String,
    pub level: ReasoningLevel,
    /// A JSON Schema (an object at the root): the answer is then a JSON object of that shape.
    pub response_format: Option<Value>,
    /// Recall is confined to a scope ([`confine`]): peer cards, which no session bounds, are
    /// left out.
    pub scoped: bool,
}

/// Confines the question's recall to the scope's sessions (nothing changes without a scope): the
/// allowed sessions become those of the scope, or of both when the question already had some.
/// NOT_FOUND for a missing scope.
pub async fn confine(
    store: &Store,
    q: &mut Question,
    scope: Option<&str>,
) -> Result<(), DialecticError> {
    let Some(scope) = scope else {
        return Ok(());
    };
    let members = store.scope_session_names(&q.workspace, scope).await?;
    q.sessions = Some(match q.sessions.take() {
        Some(asked) => asked.into_iter().filter(|s| members.contains(s)).collect(),
        None => members,
    });
    q.scoped = true;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum DialecticError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
    /// The model could not be asked, or did not answer with what was asked for.
    #[error("the LLM did not answer: {0}")]
    Llm(#[from] LlmError),
}

/// The dialectic over one LLM; see the module docs.
#[derive(Clone)]
pub struct Dialectic {
    llm: Arc<dyn Llm>,
}

/// What the model is shown.
struct Material {
    observer_card: Option<Vec<String>>,
    observed_card: Option<Vec<String>>,
    representation: String,
    relevant: Vec<Conclusion>,
    found: Vec<Message>,
    recent: Vec<Message>,
}

impl Dialectic {
    pub fn new(llm: Arc<dyn Llm>) -> Self {
        Dialectic { llm }
    }

    /// The answer to `q`, None when the model had nothing to say. With a `response_format`, the
    /// answer is that object as JSON text.
    #[tracing::instrument(name = "dialectic.answer", level = "debug", skip_all)]
    pub async fn answer(
        &self,
        store: &Store,
        q: &Question,
    ) -> Result<Option<String>, DialecticError> {
        let (system, user) = self.prompts(store, q).await?;
        let answer = self
            .ask(q, system, user)
            .await
            .inspect_err(|e| self.warn(e))?;
        Ok(Some(answer).filter(|a| !a.is_empty()))
    }

    /// The answer of [`Dialectic::answer`] in pieces as the model writes them, trimmed like it;
    /// no piece when the model had nothing to say. A bad question, missing memory or a model that
    /// refuses the request is the outer error; a model failing after it began is the last item.
    /// An answer to a `response_format` is one piece: a JSON object is of no use before it is
    /// whole, and it is checked against the schema first.
    #[tracing::instrument(name = "dialectic.answer_stream", level = "debug", skip_all)]
    pub async fn answer_stream(
        &self,
        store: &Store,
        q: &Question,
    ) -> Result<TextStream, DialecticError> {
        let (system, user) = self.prompts(store, q).await?;
        if q.response_format.is_some() {
            let answer = self
                .ask(q, system, user)
                .await
                .inspect_err(|e| self.warn(e))?;
            return Ok(futures::stream::iter((!answer.is_empty()).then_some(Ok(answer))).boxed());
        }
        let req = TextRequest {
            system,
            user,
            max_tokens: q.level.max_tokens(),
        };
        let pieces = self
            .llm
            .stream_text(&req)
            .await
            .inspect_err(|e| self.warn(e))?;
        let this = self.clone();
        Ok(trimmed(pieces)
            .inspect(move |piece| {
                if let Err(e) = piece {
                    this.warn(e);
                }
            })
            .boxed())
    }

    fn warn(&self, e: &LlmError) {
        tracing::warn!(model = self.llm.model_id(), error = %e, "dialectic: the LLM did not answer");
    }

    /// Checks `q`, gathers its material and writes the system and user prompts.
    async fn prompts(
        &self,
        store: &Store,
        q: &Question,
    ) -> Result<(String, String), DialecticError> {
        check(q)?;
        let material = gather(store, q).await?;
        let system = prompt::system(&q.observer, &q.observed, q.response_format.is_some());
        let user = prompt::user(&q.observer, &q.observed, &material, &q.query);
        Ok((system, user))
    }

    async fn ask(&self, q: &Question, system: String, user: String) -> Result<String, LlmError> {
        let max_tokens = q.level.max_tokens();
        let answer = match &q.response_format {
            Some(schema) => {
                let req = JsonRequest {
                    system,
                    user,
                    schema_name: "dialectic_answer".into(),
                    schema: schema.clone(),
                    max_tokens,
                };
                self.llm.complete_json(&req).await?.value.to_string()
            }
            None => {
                let req = TextRequest {
                    system,
                    user,
                    max_tokens,
                };
                self.llm.complete_text(&req).await?.trim().to_owned()
            }
        };
        Ok(answer)
    }
}

/// `pieces` without the whitespace that starts or ends the whole answer: leading whitespace is
/// dropped until a piece has more, and trailing whitespace is held back until more text follows
/// it, so the pieces join to the trimmed answer.
fn trimmed(pieces: TextStream) -> impl Stream<Item = Result<String, LlmError>> {
    async_stream::try_stream! {
        let mut held = String::new();
        let mut started = false;
        for await piece in pieces {
            let piece = piece?;
            let piece = if started { piece.as_str() } else { piece.trim_start() };
            let body = piece.trim_end();
            if body.is_empty() {
                if started {
                    held.push_str(piece);
                }
                continue;
            }
            started = true;
            let out = std::mem::take(&mut held) + body;
            held.push_str(&piece[body.len()..]);
            yield out;
        }
    }
}

/// Refuses a question the model should never see: an empty or over-long query, a response
/// format whose root is not an object, a session outside the allowed ones.
fn check(q: &Question) -> Result<(), DialecticError> {
    let chars = q.query.chars().count();
    if q.query.trim().is_empty() || chars > MAX_QUERY_CHARS {
        return Err(DialecticError::Invalid(format!(
            "query must have 1 to {MAX_QUERY_CHARS} characters (got {chars})"
        )));
    }
    if let Some(schema) = &q.response_format
        && (!schema.is_object() || schema.get("type").and_then(Value::as_str) != Some("object"))
    {
        return Err(DialecticError::Invalid(
            "response_format must be a JSON Schema whose root type is 'object'".into(),
        ));
    }
    if let (Some(session), Some(allowed)) = (&q.session, &q.sessions)
        && !allowed.contains(session)
    {
        return Err(DialecticError::Invalid(format!(
            "session_id {session:?} is not among the sessions the filters allow"
        )));
    }
    Ok(())
}

/// Honcho v3.0.12's chat `filters`: only `session_id`, as one id, a list of ids or `{"in": [...]}`.
/// None (all sessions) for no filter.
pub fn session_allowlist(filters: Option<&Value>) -> Result<Option<Vec<String>>, DialecticError> {
    let invalid = || {
        DialecticError::Invalid(
            "chat filters take only session_id: an id, a list of ids or {\"in\": [ids]}".into(),
        )
    };
    let Some(filters) = filters.filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let obj = filters.as_object().ok_or_else(invalid)?;
    if obj.is_empty() {
        return Ok(None);
    }
    if obj.len() != 1 {
        return Err(invalid());
    }
    let value = obj.get("session_id").ok_or_else(invalid)?;
    let list = match value {
        Value::String(s) => return Ok(Some(vec![s.clone()])),
        Value::Array(list) => list,
        Value::Object(o) if o.len() == 1 => {
            o.get("in").and_then(Value::as_array).ok_or_else(invalid)?
        }
        _ => return Err(invalid()),
    };
    list.iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(invalid))
        .collect::<Result<_, _>>()
        .map(Some)
}

async fn gather(store: &Store, q: &Question) -> Result<Material, DialecticError> {
    let w = q.workspace.as_str();
    let keys = [
        (q.workspace.clone(), q.observer.clone()),
        (q.workspace.clone(), q.observed.clone()),
    ];
    let peers = store.peers_by_keys(&keys).await?;
    for (_, name) in &keys {
        if !peers.iter().any(|p| &p.name == name) {
            return Err(StoreError::not_found("peer", name.clone()).into());
        }
    }
    if let Some(s) = &q.session
        && store.session(w, s).await?.is_none()
    {
        return Err(StoreError::not_found("session", s.clone()).into());
    }
    let scope = session_filter(q);
    let observer_card = if q.scoped {
        None
    } else {
        store.peer_card(w, &q.observer, &q.observer).await?
    };
    let observed_card = if q.observer == q.observed || q.scoped {
        None
    } else {
        store.peer_card(w, &q.observer, &q.observed).await?
    };
    let representation = representation::represent(
        store,
        w,
        &q.observer,
        &q.observed,
        &scope,
        representation::DEFAULT_MAX_CONCLUSIONS,
    )
    .await?;
    // The query also searches; one too long for search still goes to the model, unsearched.
    let searchable = check_query(&q.query).is_ok();
    let relevant = if searchable && store.embedder().is_some() {
        let filters =
            json!({"AND": [{"observer_id": q.observer, "observed_id": q.observed}, scope]});
        match store
            .query_conclusions(w, &q.query, RELEVANT_CONCLUSIONS, None, &filters)
            .await
        {
            Ok(found) => found,
            // A busy embedder costs the answer some recall, not the answer.
            Err(StoreError::Busy(e)) => {
                tracing::warn!(error = %e, "dialectic: conclusions not searched");
                Vec::new()
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        Vec::new()
    };
    let found = if searchable {
        let scope_of = match &q.session {
            Some(s) => MessageScope::Session(w, s),
            None => MessageScope::Peer(w, &q.observed),
        };
        // The chat is for callers who may read the workspace's conclusions (`Peer.chat`'s
        // rule), so the conclusions citing messages may rank them.
        store
            .search(
                scope_of,
                &q.query,
                &scope,
                FOUND_MESSAGES,
                SearchKeys::WithConclusions,
            )
            .await?
    } else {
        Vec::new()
    };
    let recent = match &q.session {
        Some(s) => {
            let slice = Slice {
                first: Some(RECENT_MESSAGES),
                ..Slice::default()
            };
            let mut page = store
                .list_messages(MessageScope::Session(w, s), &json!({}), Order::Desc, slice)
                .await?;
            page.items.reverse();
            page.items
        }
        None => Vec::new(),
    };
    Ok(Material {
        observer_card,
        observed_card,
        representation,
        relevant,
        found,
        recent,
    })
}

/// The filter of the allowed sessions, for conclusions and messages alike (`{}` for all).
fn session_filter(q: &Question) -> Value {
    match &q.sessions {
        Some(ids) => json!({"session_id": {"in": ids}}),
        None => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn joined(pieces: &[&str]) -> Vec<String> {
        let pieces: Vec<Result<String, LlmError>> =
            pieces.iter().map(|p| Ok((*p).to_owned())).collect();
        trimmed(futures::stream::iter(pieces).boxed())
            .map(Result::unwrap)
            .collect()
            .await
    }

    #[tokio::test]
    async fn streamed_pieces_join_to_the_trimmed_answer() {
        for pieces in [
            &["  ", "\n Alice", " likes ", " ", "tea. ", "\n"][..],
            &["Alice likes tea."],
            &[" Alice", "", " likes", " tea.  "],
        ] {
            let out = joined(pieces).await;
            assert_eq!(out.concat(), pieces.concat().trim(), "{pieces:?}");
            assert!(out.iter().all(|p| !p.is_empty()), "{out:?}");
        }
        assert!(joined(&[" ", "\n"]).await.is_empty());
    }

    #[test]
    fn reasoning_levels_are_read_by_their_lowercase_names_in_any_case() {
        let read =
            ["minimal", "Low", "MEDIUM", "high", "max"].map(|n| ReasoningLevel::parse(n).ok());
        use ReasoningLevel::*;
        assert_eq!(
            read,
            [
                Some(Minimal),
                Some(Low),
                Some(Medium),
                Some(High),
                Some(Max)
            ]
        );
    }

    #[test]
    fn an_unknown_reasoning_level_is_refused_with_the_names_it_may_take() {
        let Err(DialecticError::Invalid(message)) = ReasoningLevel::parse("extreme") else {
            panic!("an unknown level was accepted");
        };
        assert!(
            message.contains("minimal, low, medium, high, max") && message.contains("extreme"),
            "{message}"
        );
    }
}
