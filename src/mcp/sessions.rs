//! Sessions and their messages: create, list, add peers, read pages, a token-budgeted context,
//! and a range by `seqInSession`.

use serde_json::{Value, json};

use super::args::{
    AddMessagesArgs, AddPeersArgs, Filters, ListArgs, MessageRangeArgs, Paging, SessionArgs,
    SessionContextArgs, SessionMessagesArgs, SessionPeer,
};
use super::error::{ToolError, ToolResult};
use super::gate::Gate;
use super::reply::{McpMessage, Reply, message_lines};
use crate::access::{On, rule, session_reach};
use crate::rest::sessions::Session;
use crate::store;
use crate::store::message::{MessageScope, SeqRange};
use crate::store::page::{Cursor, MAX_PAGE, Order, Page, Slice};
use crate::store::session::MemberConfig;

/// A session context's largest token budget, and its default (Honcho v3.0.12's).
const MAX_CONTEXT_TOKENS: i64 = 100_000;

impl Paging {
    /// The store's slice for this page, with the total counted.
    pub fn slice(&self) -> ToolResult<Slice> {
        let page = self.page.unwrap_or(1);
        let size = self.size.unwrap_or(50);
        if page < 1 {
            return Err(ToolError::invalid("page must be at least 1"));
        }
        if !(1..=MAX_PAGE).contains(&size) {
            return Err(ToolError::invalid(format!(
                "size must be between 1 and {MAX_PAGE}"
            )));
        }
        let skip = (page - 1)
            .checked_mul(size)
            .ok_or_else(|| ToolError::invalid("page is too large"))?;
        Ok(Slice {
            first: Some(size),
            after: skip.checked_sub(1).map(Cursor::at),
            want_total: true,
            ..Slice::default()
        })
    }

    /// `{items_key: items, total, page, size, pages}`, as Honcho v3.0.12's MCP server pages.
    pub fn page<T, U: serde::Serialize + From<T>>(&self, key: &str, page: Page<T>) -> Value {
        let size = self.size.unwrap_or(50);
        let total = page.total.unwrap_or(0);
        let items: Vec<U> = page.items.into_iter().map(U::from).collect();
        json!({
            key: items,
            "total": total,
            "page": self.page.unwrap_or(1),
            "size": size,
            "pages": total.div_ceil(size),
        })
    }
}

/// `filters` as the store reads them (`{}` for none).
pub fn filters(f: Option<Filters>) -> Value {
    Value::Object(f.unwrap_or_default())
}

pub async fn create_session(gate: &Gate, a: SessionArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreateSession),
            On::session(&ws, &a.session_id),
        )
        .await?;
    let principal = gate.principal()?;
    let session = access
        .store()
        .get_or_create_session(
            &ws,
            &a.session_id,
            None,
            None,
            &[],
            session_reach(&principal),
        )
        .await?;
    let text = format!("session {}", session.name);
    Reply::new(&Session::from(session), text)
}

pub async fn list_sessions(gate: &Gate, a: ListArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.sessions), On::workspace(&ws))
        .await?;
    let page = access
        .store()
        .list_sessions(&ws, &json!({}), Order::Asc, a.paging.slice()?)
        .await?;
    let names: Vec<String> = page.items.iter().map(|s| s.name.clone()).collect();
    let value = a.paging.page::<_, Session>("sessions", page);
    let text = format!(
        "{} of {} sessions: {}",
        names.len(),
        value["total"],
        names.join(", ")
    );
    Reply::new(&value, text)
}

pub async fn add_peers_to_session(gate: &Gate, a: AddPeersArgs) -> ToolResult<Reply> {
    let s = a.session;
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    let access = gate
        .require(
            rule!(MutationRoot.addPeersToSession),
            On::session(&ws, &s.session_id),
        )
        .await?;
    let members: Vec<MemberConfig> = a
        .peers
        .into_iter()
        .map(|p| match p {
            SessionPeer::Id(peer) => MemberConfig {
                peer,
                observe_me: None,
                observe_others: None,
            },
            SessionPeer::Configured {
                peer_id,
                observe_me,
                observe_others,
            } => MemberConfig {
                peer: peer_id,
                observe_me,
                observe_others,
            },
        })
        .collect();
    let names: Vec<&str> = members.iter().map(|m| m.peer.as_str()).collect();
    let text = format!("added {} to session {}", names.join(", "), s.session_id);
    let session = access
        .store()
        .add_peers_to_session(&ws, &s.session_id, &members)
        .await?;
    Reply::new(&Session::from(session), text)
}

/// Appends the messages to the session (creating it and their authors when missing), all or
/// nothing.
pub async fn add_messages_to_session(gate: &Gate, a: AddMessagesArgs) -> ToolResult<Reply> {
    let s = a.session;
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    let access = gate
        .require(
            rule!(MutationRoot.createMessages),
            On::session(&ws, &s.session_id),
        )
        .await?;
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

pub async fn get_session_messages(gate: &Gate, a: SessionMessagesArgs) -> ToolResult<Reply> {
    let s = a.session;
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Session.messages), On::session(&ws, &s.session_id))
        .await?;
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
    let ws = gate.workspace(s.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Session.messages), On::session(&ws, &s.session_id))
        .await?;
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
        json!({
            "content": s.content,
            "message_id": s.message_id,
            "summary_type": s.kind.as_str(),
            "seq_in_session": s.seq_in_session,
            "token_count": s.token_count,
            "created_at": s.created_at,
        })
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
