//! Workspaces: list them (admin keys), get or create one, and inspect one at a glance.

use serde_json::json;

use super::args::{CreateWorkspaceArgs, InWorkspace, Paging};
use super::error::ToolResult;
use super::gate::Gate;
use super::pages::listed;
use super::reply::Reply;
use crate::access::{On, rule};
use crate::rest::workspaces::Workspace;
use crate::store::StoreError;
use crate::store::page::Order;

pub async fn list_workspaces(gate: &Gate, a: Paging) -> ToolResult<Reply> {
    let access = gate
        .require(rule!(QueryRoot.workspaces), On::nothing())
        .await?;
    let page = access
        .store()
        .list_workspaces(&json!({}), Order::Asc, a.slice()?)
        .await?;
    listed::<_, Workspace>(&a, "workspaces", page, |w| &w.name)
}

/// Returns the workspace, creating it with `metadata` when missing (an existing one is
/// unchanged).
pub async fn create_workspace(gate: &Gate, a: CreateWorkspaceArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(MutationRoot.getOrCreateWorkspace), On::workspace(&ws))
        .await?;
    let workspace = access
        .store()
        .get_or_create_workspace(&ws, a.metadata.map(serde_json::Value::Object), None)
        .await?;
    let text = format!("workspace {}", workspace.name);
    Reply::new(&Workspace::from(workspace), text)
}

/// A workspace at a glance: its metadata and configuration, and the first page of its peers and
/// of its sessions with their totals.
pub async fn inspect_workspace(gate: &Gate, a: InWorkspace) -> ToolResult<Reply> {
    let ws = gate.workspace(a.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(QueryRoot.workspace), On::workspace(&ws))
        .await?;
    for field in [rule!(Workspace.peers), rule!(Workspace.sessions)] {
        gate.require(field, On::workspace(&ws)).await?;
    }
    let store = access.store();
    let workspace = store
        .workspace(&ws)
        .await?
        .ok_or_else(|| StoreError::not_found("workspace", &ws))?;
    let first = Paging::default();
    let none = json!({});
    let peers = store
        .list_peers(&ws, &none, Order::Asc, first.slice()?)
        .await?;
    let sessions = store
        .list_sessions(&ws, &none, Order::Asc, first.slice()?)
        .await?;
    let peer_ids: Vec<&str> = peers.items.iter().map(|p| p.name.as_str()).collect();
    let session_ids: Vec<&str> = sessions.items.iter().map(|s| s.name.as_str()).collect();
    let (peer_count, session_count) = (peers.total.unwrap_or(0), sessions.total.unwrap_or(0));
    let text = format!(
        "workspace {ws}: {peer_count} peers ({}), {session_count} sessions ({}); metadata {}",
        peer_ids.join(", "),
        session_ids.join(", "),
        workspace.metadata
    );
    let ids = |ids: &[&str]| ids.iter().map(|id| json!({ "id": id })).collect::<Vec<_>>();
    Reply::new(
        &json!({
            "workspace_id": ws,
            "metadata": workspace.metadata,
            "configuration": workspace.configuration,
            "peer_count": peer_count,
            "peers": ids(&peer_ids),
            "session_count": session_count,
            "sessions": ids(&session_ids),
        }),
        text,
    )
}
