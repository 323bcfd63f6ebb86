//! What a tool answers: structured content (the JSON an agent or program reads, in Honcho's field
//! names) and a short text rendering of it (what a chat client shows and a model reads first).

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use super::error::{ToolError, ToolResult};
use crate::rest::conclusions::Conclusion;
use crate::rest::messages::Message;
use crate::store::summary::Summary;

/// A tool's answer before it goes on the wire.
pub struct Reply {
    /// A JSON object (MCP's structured content is one).
    pub value: Value,
    pub text: String,
}

impl Reply {
    pub fn new<T: Serialize>(value: &T, text: impl Into<String>) -> ToolResult<Self> {
        let value = serde_json::to_value(value)
            .map_err(|e| ToolError::new(crate::access::Code::Internal, e.to_string()))?;
        let value = if value.is_object() {
            value
        } else {
            json!({ "result": value })
        };
        Ok(Reply {
            value,
            text: text.into(),
        })
    }
}

/// The wire form of a tool's outcome.
pub fn respond(outcome: ToolResult<Reply>) -> CallToolResult {
    match outcome {
        Ok(reply) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(reply.text)]);
            result.structured_content = Some(reply.value);
            result
        }
        Err(e) => e.into_result(),
    }
}

/// A message as the tools show it: REST's fields and its place in the session.
#[derive(Debug, Serialize)]
pub struct McpMessage {
    #[serde(flatten)]
    pub message: Message,
    pub seq_in_session: i64,
}

impl From<crate::store::message::Message> for McpMessage {
    fn from(m: crate::store::message::Message) -> Self {
        let seq_in_session = m.seq_in_session;
        McpMessage {
            message: Message::from(m),
            seq_in_session,
        }
    }
}

/// A session summary as the tools show it (`summary_type` is `short` or `long`).
pub fn summary_json(s: &Summary) -> Value {
    json!({
        "content": s.content,
        "message_id": s.message_id,
        "summary_type": s.kind.as_str(),
        "seq_in_session": s.seq_in_session,
        "token_count": s.token_count,
        "created_at": s.created_at,
    })
}

/// Messages, one line each: `[session #seq] peer: content`.
pub fn message_lines(messages: &[McpMessage]) -> String {
    if messages.is_empty() {
        return "(no messages)".into();
    }
    messages
        .iter()
        .map(|m| {
            format!(
                "[{} #{}] {}: {}",
                m.message.session_id, m.seq_in_session, m.message.peer_id, m.message.content
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Conclusions, one line each: `- content (id, level, observer → observed)`.
pub fn conclusion_lines(conclusions: &[Conclusion]) -> String {
    if conclusions.is_empty() {
        return "(no conclusions)".into();
    }
    conclusions
        .iter()
        .map(|c| {
            format!(
                "- {} ({}, {}, {} → {})",
                c.content, c.id, c.level, c.observer_id, c.observed_id
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
