//! `search`: hybrid search over messages (a workspace's, a peer's, or a session's), with the
//! merged conversation windows around the matches on request, and a peer's conclusions.

use serde::Serialize;
use serde_json::json;

use super::args::{InWorkspace, PeerArgs, SearchArgs};
use super::conclusions::pair;
use super::error::ToolResult;
use super::gate::Gate;
use super::pages::filters;
use super::reply::{McpMessage, Reply, conclusion_lines, message_lines};
use crate::access::Code;
use crate::access::{On, rule};
use crate::rest::conclusions::Conclusion;
use crate::store::message::MessageScope;
use crate::store::search::{
    DEFAULT_CONTEXT_WINDOW, DEFAULT_SEARCH_LIMIT, assemble_snippets, check_context_window,
    plan_snippets,
};

/// Matched messages of one session within their surrounding messages.
#[derive(Serialize)]
struct Snippet {
    session_id: String,
    /// The ids of the matches in this window.
    matched: Vec<String>,
    /// Every message of the merged window, in seqInSession order.
    context: Vec<McpMessage>,
}

pub async fn search(gate: &Gate, a: SearchArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let (field, on, scope) = match (&a.session_id, &a.peer_id) {
        (Some(s), _) => (
            rule!(Session.search),
            On::session(&ws, s),
            MessageScope::Session(&ws, s),
        ),
        (None, Some(p)) => (
            rule!(Peer.search),
            On::peer(&ws, p),
            MessageScope::Peer(&ws, p),
        ),
        (None, None) => (
            rule!(Workspace.search),
            On::workspace(&ws),
            MessageScope::Workspace(&ws),
        ),
    };
    let access = gate.require(field, on).await?;
    let window = a.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW);
    check_context_window(window)?;
    let store = access.store();
    let keys = gate.search_keys(&ws).await;
    // A scope key searches inside its scope whatever it asks; others where they ask.
    let within = access.recall_scope(a.scope.as_deref())?;
    let message_filters = store
        .within_scope(&ws, within.as_deref(), filters(a.message_filters))
        .await?;
    let results = store
        .search(
            scope,
            &a.query,
            &message_filters,
            a.message_limit.unwrap_or(DEFAULT_SEARCH_LIMIT),
            keys,
        )
        .await?;

    let snippets = if a.include_context.unwrap_or(false) {
        let plans = plan_snippets(&results, window);
        // Each window is read where its session is readable, as `MessageSnippet.context`.
        for plan in &plans {
            let on = On::session(&plan.range.workspace, &plan.range.session);
            gate.require(rule!(MessageSnippet.context), on).await?;
        }
        let ranges: Vec<_> = plans.iter().map(|p| p.range.clone()).collect();
        let rows = if window == 0 || ranges.is_empty() {
            Vec::new()
        } else {
            store.messages_in_ranges(&ranges).await?
        };
        let snippets = assemble_snippets(plans, window, |r| {
            rows.iter()
                .filter(|m| {
                    m.workspace_name == r.workspace
                        && m.session_name == r.session
                        && (r.from..=r.to).contains(&m.seq_in_session)
                })
                .cloned()
                .collect()
        });
        Some(
            snippets
                .into_iter()
                .map(|s| Snippet {
                    session_id: s.session,
                    matched: s.matched.into_iter().map(|m| m.public_id).collect(),
                    context: s.context.into_iter().map(McpMessage::from).collect(),
                })
                .collect::<Vec<_>>(),
        )
    } else {
        None
    };

    // A peer's conclusions about itself, where the key may query conclusions and there is an
    // embedder to query with (else null, as Honcho v3.0.12's server leaves them out).
    let conclusions = match &a.peer_id {
        Some(peer) if store.embedder().is_some() => {
            match gate
                .require(rule!(Workspace.queryConclusions), On::workspace(&ws))
                .await
            {
                Ok(access) => {
                    let me = PeerArgs {
                        ws: InWorkspace::default(),
                        peer_id: peer.clone(),
                        target_peer_id: None,
                    };
                    let filter = pair(&me, filters(a.conclusion_filters));
                    let filter = store.within_scope(&ws, within.as_deref(), filter).await?;
                    let found = access
                        .store()
                        .query_conclusions(
                            &ws,
                            &a.query,
                            a.conclusion_top_k.unwrap_or(10),
                            None,
                            &filter,
                        )
                        .await?;
                    Some(found.into_iter().map(Conclusion::from).collect::<Vec<_>>())
                }
                Err(e) if e.code == Code::Forbidden.as_str() => None,
                Err(e) => return Err(e),
            }
        }
        _ => None,
    };

    let messages: Vec<McpMessage> = results.into_iter().map(McpMessage::from).collect();
    let mut text = match &snippets {
        Some(snippets) if !snippets.is_empty() => snippets
            .iter()
            .map(|s| message_lines(&s.context))
            .collect::<Vec<_>>()
            .join("\n---\n"),
        _ => message_lines(&messages),
    };
    if let Some(c) = &conclusions {
        text.push_str("\n\nConclusions:\n");
        text.push_str(&conclusion_lines(c));
    }
    let mut value = json!({ "messages": messages, "conclusions": conclusions });
    if let Some(snippets) = snippets {
        value["snippets"] = serde_json::to_value(snippets).unwrap_or_default();
    }
    Reply::new(&value, text)
}
