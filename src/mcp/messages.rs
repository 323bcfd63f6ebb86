//! A session's messages: record them, read one by id or a page at a time, a token-budgeted
//! context, and a range by `seqInSession`.

use serde_json::{Value, json};

use super::args::{
    AddMessagesArgs, MessageRangeArgs, SessionContextArgs, SessionMessageArgs, SessionMessagesArgs,
};
use super::error::{ToolError, ToolResult};
use super::gate::Gate;
use super::pages::filters;
use super::reply::{McpMessage, Reply, message_lines, summary_json};
use crate::access::{On, rule};
use crate::store;
use crate::store::StoreError;
use crate::store::message::{MessageScope, SeqRange};
use crate::store::page::{MAX_PAGE, Order};

/// A session context's largest token budget, and its default (Honcho v3.0.12's).
const MAX_CONTEXT_TOKENS: i64 = 100_000;

/// Appends the messages to the session (creating it and their authors when missing), all or
/// nothing.
pub async fn add_messages_to_session(gate: &Gate, a: AddMessagesArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate.session(rule!(MutationRoot.createMessages), &s).await?;
    let batch = a
        .messages
        .into_iter()
        .map(|m| store::message::NewMessage {
            peer: m.peer_id,
            content: m.content,
            metadata: m.metadata.map(Value::Object),
            created_at: None,
            configuration: None,
        })
        .collect();
    let created: Vec<McpMessage> = access
        .store()
        .create_messages(&ws, &s.session_id, batch)
        .await?
        .into_iter()
        .map(McpMessage::from)
        .collect();
    let text = format!(
        "Added {} message(s) to session {}",
        created.len(),
        s.session_id
    );
    Reply::new(&json!({ "messages": created }), text)
}

/// One message of the session, by id.
pub async fn get_session_message(gate: &Gate, a: SessionMessageArgs) -> ToolResult<Reply> {
    let s = a.session;
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    let access = gate
        .require(
            rule!(Workspace.message),
            On::message(&ws, Some(&s.session_id)),
        )
        .await?;
    let message = access
        .store()
        .message(&ws, &a.message_id)
        .await?
        .filter(|m| m.session_name == s.session_id)
        .map(McpMessage::from)
        .ok_or_else(|| StoreError::not_found("message", &a.message_id))?;
    let text = message_lines(std::slice::from_ref(&message));
    Reply::new(&message, text)
}

pub async fn get_session_messages(gate: &Gate, a: SessionMessagesArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate.session(rule!(Session.messages), &s).await?;
    let order = if a.reverse.unwrap_or(false) {
        Order::Desc
    } else {
        Order::Asc
    };
    let page = access
        .store()
        .list_messages(
            MessageScope::Session(&ws, &s.session_id),
            &filters(a.filters),
            order,
            a.paging.slice()?,
        )
        .await?;
    let shown: Vec<McpMessage> = page.items.iter().cloned().map(McpMessage::from).collect();
    let text = message_lines(&shown);
    Reply::new(&a.paging.page::<_, McpMessage>("messages", page), text)
}

/// The session's newest messages that fit the token budget, oldest first.
pub async fn get_session_context(gate: &Gate, a: SessionContextArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate.session(rule!(Session.messages), &s).await?;
    let budget = a.tokens.unwrap_or(MAX_CONTEXT_TOKENS);
    if !(1..=MAX_CONTEXT_TOKENS).contains(&budget) {
        return Err(ToolError::invalid(format!(
            "tokens must be between 1 and {MAX_CONTEXT_TOKENS}"
        )));
    }
    let store = access.store();
    let outside = match access.recall_scope(a.scope.as_deref())? {
        Some(scope) => {
            store.require_scope(&ws, &scope).await?;
            !store.session_in_scope(&ws, &scope, &s.session_id).await?
        }
        None => false,
    };
    // A session outside the recall scope gives nothing: neither its messages nor its summary.
    let (messages, summary) = if outside {
        (Vec::new(), None)
    } else {
        let context = store
            .session_context(&ws, &s.session_id, budget, a.summary.unwrap_or(true))
            .await?;
        let messages: Vec<McpMessage> =
            context.messages.into_iter().map(McpMessage::from).collect();
        (messages, context.summary)
    };
    let mut text = message_lines(&messages);
    let summary = summary.map(|s| {
        text = format!(
            "Summary (up to message {}):\n{}\n\n{text}",
            s.seq_in_session, s.content
        );
        summary_json(&s)
    });
    Reply::new(
        &json!({ "session_id": s.session_id, "summary": summary, "messages": messages }),
        text,
    )
}

/// Messages `from_seq..=to_seq` of a session (at most a page of them).
pub async fn message_range(gate: &Gate, a: MessageRangeArgs) -> ToolResult<Reply> {
    let s = a.session;
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    if a.from_seq < 1 || a.to_seq < a.from_seq {
        return Err(ToolError::invalid(format!(
            "from_seq must be at least 1 and to_seq at least from_seq (got {}..{})",
            a.from_seq, a.to_seq
        )));
    }
    if a.to_seq - a.from_seq >= MAX_PAGE as i64 {
        return Err(ToolError::invalid(format!(
            "a range holds at most {MAX_PAGE} messages (got {})",
            a.to_seq - a.from_seq + 1
        )));
    }
    let access = gate
        .require(rule!(Session.messages), On::session(&ws, &s.session_id))
        .await?;
    let range = SeqRange {
        workspace: ws,
        session: s.session_id.clone(),
        from: a.from_seq,
        to: a.to_seq,
    };
    let mut rows = access.store().messages_in_ranges(&[range]).await?;
    rows.sort_by_key(|m| m.seq_in_session);
    let messages: Vec<McpMessage> = rows.into_iter().map(McpMessage::from).collect();
    let text = message_lines(&messages);
    Reply::new(
        &json!({
            "session_id": s.session_id,
            "from_seq": a.from_seq,
            "to_seq": a.to_seq,
            "messages": messages,
        }),
        text,
    )
}
