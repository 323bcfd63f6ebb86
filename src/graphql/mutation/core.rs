use crate::graphql::scalars::DateTime;
use async_graphql::{Context, ID, InputObject, Json, Object};
use serde_json::Value;

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::prefetch;
use crate::graphql::types::{Message, Peer, Session, SessionPeer, Workspace};
use crate::store::message::NewMessage;
use crate::store::session::MemberConfig;

/// Workspaces, peers, sessions and messages.
#[derive(Default)]
pub struct CoreMutation;

/// A message to append to a session.
#[derive(InputObject)]
pub struct MessageInput {
    /// Author; created (and joined to the session) if new.
    pub peer_id: ID,
    /// Up to 25,000 characters; NUL bytes are removed.
    pub content: String,
    pub metadata: Option<Json<Value>>,
    /// Defaults to the time of the write.
    pub created_at: Option<DateTime>,
    /// Its settings over the session's and the workspace's; only `reasoning` is read
    /// (`{"reasoning": {"enabled": false}}`: the deriver does not learn from this message).
    pub configuration: Option<Json<Value>>,
}

/// A peer's membership settings in a session.
#[derive(InputObject)]
pub struct SessionPeerInput {
    pub peer_id: ID,
    pub observe_me: Option<bool>,
    pub observe_others: Option<bool>,
}

impl From<SessionPeerInput> for MemberConfig {
    fn from(p: SessionPeerInput) -> Self {
        MemberConfig {
            peer: p.peer_id.0,
            observe_me: p.observe_me,
            observe_others: p.observe_others,
        }
    }
}

fn json(v: Option<Json<Value>>) -> Option<Value> {
    v.map(|j| j.0)
}

#[Object]
impl CoreMutation {
    /// Returns the workspace, creating it if needed. An existing workspace is returned unchanged.
    async fn get_or_create_workspace(
        &self,
        ctx: &Context<'_>,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
    ) -> ApiResult<Workspace> {
        let on = On::workspace(&id);
        let access = guard::require(ctx, rule!(MutationRoot.getOrCreateWorkspace), on).await?;
        let ws = access
            .store()
            .get_or_create_workspace(&id, json(metadata), json(configuration))
            .await?;
        Ok(Workspace(ws))
    }

    /// Replaces metadata and merges configuration keys into the existing configuration.
    async fn update_workspace(
        &self,
        ctx: &Context<'_>,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
    ) -> ApiResult<Workspace> {
        let on = On::workspace(&id);
        let access = guard::require(ctx, rule!(MutationRoot.updateWorkspace), on).await?;
        let ws = access
            .store()
            .update_workspace(&id, json(metadata), json(configuration))
            .await?;
        Ok(Workspace(ws))
    }

    /// Deletes the workspace and all it holds; refused (CONFLICT) while it has sessions.
    async fn delete_workspace(&self, ctx: &Context<'_>, id: ID) -> ApiResult<bool> {
        let on = On::workspace(&id);
        let access = guard::require(ctx, rule!(MutationRoot.deleteWorkspace), on).await?;
        access.store().delete_workspace(&id).await?;
        Ok(true)
    }

    /// Returns the peer, creating it (and its workspace) if needed; given metadata and
    /// configuration replace the stored ones.
    async fn get_or_create_peer(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
    ) -> ApiResult<Peer> {
        let on = On::peer(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.getOrCreatePeer), on).await?;
        let reach = crate::access::peer_reach(&guard::principal(ctx)?);
        let peer = access
            .store()
            .get_or_create_peer(
                &workspace_id,
                &id,
                json(metadata),
                json(configuration),
                reach,
            )
            .await?;
        Ok(Peer(peer))
    }

    /// Replaces the peer's metadata and/or configuration.
    async fn update_peer(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
    ) -> ApiResult<Peer> {
        let on = On::peer(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.updatePeer), on).await?;
        let peer = access
            .store()
            .update_peer(&workspace_id, &id, json(metadata), json(configuration))
            .await?;
        Ok(Peer(peer))
    }

    /// Returns the session, creating it (and its workspace and peers) if needed. On an existing
    /// session, metadata is replaced, configuration merged, and the listed peers made members.
    async fn get_or_create_session(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
        peers: Option<Vec<SessionPeerInput>>,
    ) -> ApiResult<Session> {
        let on = On::session(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.getOrCreateSession), on).await?;
        let peers: Vec<MemberConfig> = peers
            .unwrap_or_default()
            .into_iter()
            .map(Into::into)
            .collect();
        let principal = guard::principal(ctx)?;
        let session = access
            .store()
            .get_or_create_session(
                &workspace_id,
                &id,
                json(metadata),
                json(configuration),
                &peers,
                crate::access::session_reach(&principal),
            )
            .await?;
        Ok(Session(session))
    }

    /// Replaces metadata and merges configuration keys.
    async fn update_session(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
        configuration: Option<Json<Value>>,
    ) -> ApiResult<Session> {
        let on = On::session(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.updateSession), on).await?;
        let session = access
            .store()
            .update_session(&workspace_id, &id, json(metadata), json(configuration))
            .await?;
        Ok(Session(session))
    }

    /// Deletes the session with its messages and memberships.
    async fn delete_session(&self, ctx: &Context<'_>, workspace_id: ID, id: ID) -> ApiResult<bool> {
        let on = On::session(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.deleteSession), on).await?;
        access.store().delete_session(&workspace_id, &id).await?;
        Ok(true)
    }

    /// Copies the session (messages up to and including `upToMessageId`, or all) under a new id.
    async fn clone_session(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        up_to_message_id: Option<ID>,
    ) -> ApiResult<Session> {
        let on = On::session(&workspace_id, &id);
        let access = guard::require(ctx, rule!(MutationRoot.cloneSession), on).await?;
        let session = access
            .store()
            .clone_session(
                &workspace_id,
                &id,
                up_to_message_id.as_ref().map(|m| m.as_str()),
            )
            .await?;
        Ok(Session(session))
    }

    /// Makes peers members of the session, creating session and peers when missing.
    async fn add_peers_to_session(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        session_id: ID,
        peers: Vec<SessionPeerInput>,
    ) -> ApiResult<Session> {
        let on = On::session(&workspace_id, &session_id);
        let access = guard::require(ctx, rule!(MutationRoot.addPeersToSession), on).await?;
        let peers: Vec<MemberConfig> = peers.into_iter().map(Into::into).collect();
        let session = access
            .store()
            .add_peers_to_session(&workspace_id, &session_id, &peers)
            .await?;
        Ok(Session(session))
    }

    /// Marks peers as having left the session.
    async fn remove_peers_from_session(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        session_id: ID,
        peer_ids: Vec<ID>,
    ) -> ApiResult<Session> {
        let on = On::session(&workspace_id, &session_id);
        let access = guard::require(ctx, rule!(MutationRoot.removePeersFromSession), on).await?;
        let peers: Vec<String> = peer_ids.into_iter().map(|p| p.0).collect();
        let session = access
            .store()
            .remove_peers_from_session(&workspace_id, &session_id, &peers)
            .await?;
        Ok(Session(session))
    }

    /// Sets the given (non-null) observation flags of a peer in a session.
    async fn set_session_peer_config(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        session_id: ID,
        peer_id: ID,
        observe_me: Option<bool>,
        observe_others: Option<bool>,
    ) -> ApiResult<SessionPeer> {
        let on = On::session(&workspace_id, &session_id);
        let access = guard::require(ctx, rule!(MutationRoot.setSessionPeerConfig), on).await?;
        let config = MemberConfig {
            peer: peer_id.0,
            observe_me,
            observe_others,
        };
        let member = access
            .store()
            .set_session_peer_config(&workspace_id, &session_id, &config)
            .await?;
        Ok(SessionPeer(member))
    }

    /// Appends 1 to 100 messages to the session, creating workspace, session and authors as
    /// needed. All or nothing.
    async fn create_messages(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        session_id: ID,
        messages: Vec<MessageInput>,
    ) -> ApiResult<Vec<Message>> {
        let on = On::session(&workspace_id, &session_id);
        let access = guard::require(ctx, rule!(MutationRoot.createMessages), on).await?;
        prefetch::check_context_arguments(ctx.field())?;
        let batch = messages
            .into_iter()
            .map(|m| NewMessage {
                peer: m.peer_id.0,
                content: m.content,
                metadata: json(m.metadata),
                created_at: m.created_at.map(|t| t.0),
                configuration: json(m.configuration),
            })
            .collect();
        let created = access
            .store()
            .create_messages(&workspace_id, &session_id, batch)
            .await?;
        prefetch::messages(&access, &created, &[ctx.look_ahead()]).await?;
        Ok(created.into_iter().map(Message).collect())
    }

    /// Replaces the message's metadata (null leaves it unchanged).
    async fn update_message(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
    ) -> ApiResult<Message> {
        // Twice, as Workspace.message: first may the key write some message of the workspace,
        // then this one's session.
        let field = rule!(MutationRoot.updateMessage);
        let lookup = guard::require(ctx, field, On::message(&workspace_id, None)).await?;
        let found = lookup.store().message(&workspace_id, &id).await?;
        let on = On::message(
            &workspace_id,
            found.as_ref().map(|m| m.session_name.as_str()),
        );
        let access = guard::require(ctx, field, on).await?;
        let message = access
            .store()
            .update_message(&workspace_id, &id, json(metadata))
            .await?;
        Ok(Message(message))
    }
}
