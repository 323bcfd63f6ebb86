//! Sessions: create, list, delete, clone and inspect them, and their members.

use serde::Serialize;
use serde_json::json;

use super::args::{
    AddPeersArgs, CloneSessionArgs, ListArgs, RemovePeersArgs, SessionArgs, SessionPeer,
};
use super::error::ToolResult;
use super::gate::Gate;
use super::pages::listed;
use super::reply::{Reply, summary_json};
use crate::access::{Access, On, rule, session_reach};
use crate::rest::sessions::{PeerConfig, Session};
use crate::store::StoreError;
use crate::store::message::MessageScope;
use crate::store::page::{Order, Slice};
use crate::store::session::MemberConfig;

pub async fn create_session(gate: &Gate, a: SessionArgs) -> ToolResult<Reply> {
    let (ws, access) = gate
        .session(rule!(MutationRoot.getOrCreateSession), &a)
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
    listed::<_, Session>(&a.paging, "sessions", page, |s| &s.name)
}

/// Deletes the session with its messages and memberships, at once.
pub async fn delete_session(gate: &Gate, a: SessionArgs) -> ToolResult<Reply> {
    let (ws, access) = gate.session(rule!(MutationRoot.deleteSession), &a).await?;
    access.store().delete_session(&ws, &a.session_id).await?;
    let text = format!("session {} deleted, with its messages", a.session_id);
    Reply::new(&json!({"session_id": a.session_id, "deleted": true}), text)
}

/// A copy of the session under a new id: its members and its messages (up to `message_id`).
pub async fn clone_session(gate: &Gate, a: CloneSessionArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate.session(rule!(MutationRoot.cloneSession), &s).await?;
    let clone = access
        .store()
        .clone_session(&ws, &s.session_id, a.message_id.as_deref())
        .await?;
    let text = format!("session {} cloned as {}", s.session_id, clone.name);
    Reply::new(&Session::from(clone), text)
}

pub async fn add_peers_to_session(gate: &Gate, a: AddPeersArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate
        .session(rule!(MutationRoot.addPeersToSession), &s)
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

/// The peers leave the session (their messages stay).
pub async fn remove_peers_from_session(gate: &Gate, a: RemovePeersArgs) -> ToolResult<Reply> {
    let s = a.session;
    let (ws, access) = gate
        .session(rule!(MutationRoot.removePeersFromSession), &s)
        .await?;
    let session = access
        .store()
        .remove_peers_from_session(&ws, &s.session_id, &a.peer_ids)
        .await?;
    let text = format!(
        "removed {} from session {}",
        a.peer_ids.join(", "),
        s.session_id
    );
    Reply::new(&Session::from(session), text)
}

/// An active member of a session: its id and its settings there (null: not set).
#[derive(Serialize)]
struct Member {
    id: String,
    #[serde(flatten)]
    config: PeerConfig,
}

/// The session's active members, in join order, under a passed `Session.peers` check.
async fn members(access: &Access<'_>, ws: &str, session: &str) -> ToolResult<Vec<Member>> {
    let rows = access
        .store()
        .members_by_sessions(&[(ws.to_owned(), session.to_owned())])
        .await?;
    Ok(rows
        .into_iter()
        .map(|m| Member {
            id: m.peer_name,
            config: serde_json::from_value(m.configuration).unwrap_or_default(),
        })
        .collect())
}

fn member_line(session: &str, members: &[Member]) -> String {
    let ids: Vec<&str> = members.iter().map(|m| m.id.as_str()).collect();
    if ids.is_empty() {
        format!("session {session} has no peers")
    } else {
        format!("peers of session {session}: {}", ids.join(", "))
    }
}

pub async fn get_session_peers(gate: &Gate, a: SessionArgs) -> ToolResult<Reply> {
    let (ws, access) = gate.session(rule!(Session.peers), &a).await?;
    let peers = members(&access, &ws, &a.session_id).await?;
    let text = member_line(&a.session_id, &peers);
    Reply::new(&json!({"session_id": a.session_id, "peers": peers}), text)
}

/// A session at a glance: its metadata, members, message count and summaries, under the rules
/// of the GraphQL fields that read them.
pub async fn inspect_session(gate: &Gate, a: SessionArgs) -> ToolResult<Reply> {
    let (ws, access) = gate.session(rule!(Workspace.session), &a).await?;
    for field in [
        rule!(Session.peers),
        rule!(Session.messages),
        rule!(Session.summaries),
    ] {
        gate.session(field, &a).await?;
    }
    let store = access.store();
    let session = store
        .session(&ws, &a.session_id)
        .await?
        .ok_or_else(|| StoreError::not_found("session", &a.session_id))?;
    let peers = members(&access, &ws, &a.session_id).await?;
    let count = Slice {
        first: Some(1),
        want_total: true,
        ..Slice::default()
    };
    let message_count = store
        .list_messages(
            MessageScope::Session(&ws, &a.session_id),
            &json!({}),
            Order::Asc,
            count,
        )
        .await?
        .total
        .unwrap_or(0);
    let summaries = store.session_summaries(&ws, &a.session_id).await?;
    let written: Vec<String> = [("short", &summaries.short), ("long", &summaries.long)]
        .into_iter()
        .filter_map(|(kind, s)| {
            s.as_ref()
                .map(|s| format!("{kind} up to message {}", s.seq_in_session))
        })
        .collect();
    let text = format!(
        "{}; {message_count} messages; summaries: {}",
        member_line(&a.session_id, &peers),
        if written.is_empty() {
            "none yet".to_owned()
        } else {
            written.join(", ")
        }
    );
    Reply::new(
        &json!({
            "session_id": a.session_id,
            "metadata": session.metadata,
            "configuration": session.configuration,
            "peers": peers,
            "message_count": message_count,
            "summaries": {
                "short_summary": summaries.short.as_ref().map(summary_json),
                "long_summary": summaries.long.as_ref().map(summary_json),
            },
        }),
        text,
    )
}
