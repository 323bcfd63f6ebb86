//! Metadata of a workspace, a peer or a session: read it, or replace it whole.

use std::fmt;

use serde_json::{Value, json};

use super::args::{MetadataOf, SetMetadataArgs};
use super::error::ToolResult;
use super::gate::Gate;
use super::reply::Reply;
use crate::access::{On, rule};
use crate::store::StoreError;

/// What a metadata tool works on, from the ids it was given.
enum Holder<'a> {
    Workspace(&'a str),
    Peer(&'a str, &'a str),
    Session(&'a str, &'a str),
}

impl<'a> Holder<'a> {
    /// The session when one is named, else the peer when one is, else the workspace.
    fn of(ws: &'a str, a: &'a MetadataOf) -> Self {
        match (&a.session_id, &a.peer_id) {
            (Some(session), _) => Holder::Session(ws, session),
            (None, Some(peer)) => Holder::Peer(ws, peer),
            (None, None) => Holder::Workspace(ws),
        }
    }
}

impl fmt::Display for Holder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Workspace(ws) => write!(f, "workspace {ws}"),
            Holder::Peer(_, peer) => write!(f, "peer {peer}"),
            Holder::Session(_, session) => write!(f, "session {session}"),
        }
    }
}

fn reply(holder: &Holder, metadata: Value, said: &str) -> ToolResult<Reply> {
    let text = format!("metadata of {holder}{said}: {metadata}");
    Reply::new(&json!({ "metadata": metadata }), text)
}

/// Reads the metadata under the rule of the GraphQL field that returns its holder.
pub async fn get_metadata(gate: &Gate, a: MetadataOf) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let holder = Holder::of(&ws, &a);
    let metadata = match holder {
        Holder::Workspace(ws) => {
            let access = gate
                .require(rule!(QueryRoot.workspace), On::workspace(ws))
                .await?;
            let found = access.store().workspace(ws).await?;
            found
                .ok_or_else(|| StoreError::not_found("workspace", ws))?
                .metadata
        }
        Holder::Peer(ws, peer) => {
            let access = gate
                .require(rule!(Workspace.peer), On::peer(ws, peer))
                .await?;
            let key = [(ws.to_owned(), peer.to_owned())];
            let found = access.store().peers_by_keys(&key).await?.pop();
            found
                .ok_or_else(|| StoreError::not_found("peer", peer))?
                .metadata
        }
        Holder::Session(ws, session) => {
            let access = gate
                .require(rule!(Workspace.session), On::session(ws, session))
                .await?;
            let found = access.store().session(ws, session).await?;
            found
                .ok_or_else(|| StoreError::not_found("session", session))?
                .metadata
        }
    };
    reply(&holder, metadata, "")
}

/// Replaces the metadata whole, as `updateWorkspace`, `updatePeer` or `updateSession` does.
pub async fn set_metadata(gate: &Gate, a: SetMetadataArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.of.ws.workspace_id.as_deref())?;
    let holder = Holder::of(&ws, &a.of);
    let new = Some(Value::Object(a.metadata));
    let metadata = match holder {
        Holder::Workspace(ws) => {
            let access = gate
                .require(rule!(MutationRoot.updateWorkspace), On::workspace(ws))
                .await?;
            access
                .store()
                .update_workspace(ws, new, None)
                .await?
                .metadata
        }
        Holder::Peer(ws, peer) => {
            let access = gate
                .require(rule!(MutationRoot.updatePeer), On::peer(ws, peer))
                .await?;
            access
                .store()
                .update_peer(ws, peer, new, None)
                .await?
                .metadata
        }
        Holder::Session(ws, session) => {
            let access = gate
                .require(rule!(MutationRoot.updateSession), On::session(ws, session))
                .await?;
            let updated = access
                .store()
                .update_session(ws, session, new, None)
                .await?;
            updated.metadata
        }
    };
    reply(&holder, metadata, " set")
}
