//! Peers: get or create one, and list the workspace's.

use serde_json::json;

use super::args::{CreatePeerArgs, ListArgs};
use super::error::ToolResult;
use super::gate::Gate;
use super::pages::listed;
use super::reply::Reply;
use crate::access::{On, peer_reach, rule};
use crate::rest::peers::Peer;
use crate::store::page::Order;

/// Returns the peer, creating it (and its workspace) when missing; a configuration given
/// replaces the peer's.
pub async fn create_peer(gate: &Gate, a: CreatePeerArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(
            rule!(MutationRoot.getOrCreatePeer),
            On::peer(&ws, &a.peer_id),
        )
        .await?;
    let reach = peer_reach(&gate.principal()?);
    // Stored under the name the deriver reads (`observe_me`), as REST and GraphQL store it.
    let configuration = a
        .configuration
        .map(|c| json!({ "observe_me": c.observe_me }));
    let peer = access
        .store()
        .get_or_create_peer(&ws, &a.peer_id, None, configuration, reach)
        .await?;
    let text = format!("peer {}", peer.name);
    Reply::new(&Peer::from(peer), text)
}

pub async fn list_peers(gate: &Gate, a: ListArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.peers), On::workspace(&ws))
        .await?;
    let page = access
        .store()
        .list_peers(&ws, &json!({}), Order::Asc, a.paging.slice()?)
        .await?;
    listed::<_, Peer>(&a.paging, "peers", page, |p| &p.name)
}
