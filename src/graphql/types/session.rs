use crate::graphql::scalars::DateTime;
use crate::graphql::types::filter::{MessageWhere, filter_json};
use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use super::search::{self, SearchArgs, SearchResult};
use super::summary::{SessionContext, SessionSummaries, SessionSummary};
use super::{Message, Peer, message};
use crate::access::{On, rule};
use crate::graphql::connection::{Conn, SortOrder, slice};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::loaders::{MembersKey, PeerKey};
use crate::graphql::prefetch;
use crate::store::StoreError;
use crate::store::message::MessageScope;

pub struct Session(pub crate::store::session::Session);

#[Object]
impl Session {
    async fn id(&self) -> ID {
        ID(self.0.name.clone())
    }

    async fn workspace_id(&self) -> ID {
        ID(self.0.workspace_name.clone())
    }

    /// Always true: a deleted session is gone at once, with its messages.
    async fn is_active(&self) -> bool {
        true
    }

    async fn metadata(&self) -> Json<&Value> {
        Json(&self.0.metadata)
    }

    async fn configuration(&self) -> Json<&Value> {
        Json(&self.0.configuration)
    }

    async fn created_at(&self) -> DateTime {
        self.0.created_at.into()
    }

    /// Active members with their per-session configuration, in join order.
    async fn peers(&self, ctx: &Context<'_>) -> ApiResult<Vec<SessionPeer>> {
        let on = On::session(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Session.peers), on).await?;
        let key = MembersKey(self.0.workspace_name.clone(), self.0.name.clone());
        let loader = access.loader();
        let members = loader.load_one(key).await?.unwrap_or_default();
        if ctx.look_ahead().field("peer").exists() {
            loader
                .load_many(
                    members
                        .iter()
                        .map(|m| PeerKey(m.workspace_name.clone(), m.peer_name.clone())),
                )
                .await?;
        }
        Ok(members.into_iter().map(SessionPeer).collect())
    }

    /// Hybrid search over the messages of this session: semantic (with an embedder) and full-text
    /// rankings, both filtered by `filters`, fused by Reciprocal Rank Fusion. `limit` 1..100;
    /// `includeContext` adds snippets of `contextWindow` (0..10) messages around the matches.
    #[allow(clippy::too_many_arguments)]
    async fn search(
        &self,
        ctx: &Context<'_>,
        query: String,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<MessageWhere>,
        #[graphql(default_with = "Some(10)")] limit: Option<i32>,
        #[graphql(default_with = "Some(false)")] include_context: Option<bool>,
        #[graphql(default_with = "Some(2)")] context_window: Option<i32>,
        scope: Option<ID>,
    ) -> ApiResult<SearchResult> {
        let on = On::session(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Session.search), on).await?;
        search::search(
            ctx,
            &access,
            MessageScope::Session(&self.0.workspace_name, &self.0.name),
            SearchArgs {
                query,
                filters,
                where_,
                limit,
                include_context,
                context_window,
                scope,
            },
        )
        .await
    }

    /// Messages in `seqInSession` order (`order: DESC` for newest first).
    #[allow(clippy::too_many_arguments)]
    async fn messages(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<MessageWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Message>> {
        let on = On::session(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Session.messages), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let scope = MessageScope::Session(&self.0.workspace_name, &self.0.name);
        message::page(ctx, &access, scope, &filters, order, slice).await
    }

    /// The short and long summaries the deriver keeps of this session (docs/summaries.md).
    async fn summaries(&self, ctx: &Context<'_>) -> ApiResult<SessionSummaries> {
        let on = On::session(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Session.summaries), on).await?;
        let both = access
            .store()
            .session_summaries(&self.0.workspace_name, &self.0.name)
            .await?;
        Ok(SessionSummaries(both))
    }

    /// The context of a next turn within `tokens` (1..100000, 100000): with `summary`, the
    /// summary that fits 40% of the budget and the newest messages after it; without, the
    /// newest messages that fit. REST's `GET .../context` and MCP's `get_session_context`.
    async fn context(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 100_000)] tokens: i64,
        #[graphql(default = true)] summary: bool,
    ) -> ApiResult<SessionContext> {
        let on = On::session(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Session.context), on).await?;
        if !(1..=MAX_CONTEXT_TOKENS).contains(&tokens) {
            return Err(StoreError::invalid(format!(
                "tokens must be between 1 and {MAX_CONTEXT_TOKENS}"
            ))
            .into());
        }
        let context = access
            .store()
            .session_context(&self.0.workspace_name, &self.0.name, tokens, summary)
            .await?;
        let selection = ctx.look_ahead().field("messages");
        prefetch::messages(&access, &context.messages, &[selection]).await?;
        Ok(SessionContext {
            summary: context.summary.map(SessionSummary),
            messages: context.messages.into_iter().map(Message).collect(),
        })
    }
}

/// The largest context budget (Honcho v3.0.12's).
const MAX_CONTEXT_TOKENS: i64 = 100_000;

/// A peer's membership in a session.
pub struct SessionPeer(pub crate::store::session::SessionPeer);

impl SessionPeer {
    fn flag(&self, key: &str) -> Option<bool> {
        self.0.configuration.get(key).and_then(Value::as_bool)
    }
}

#[Object]
impl SessionPeer {
    async fn peer_id(&self) -> ID {
        ID(self.0.peer_name.clone())
    }

    async fn peer(&self, ctx: &Context<'_>) -> ApiResult<Option<Peer>> {
        let access = guard::require(ctx, rule!(SessionPeer.peer), On::nothing()).await?;
        let key = PeerKey(self.0.workspace_name.clone(), self.0.peer_name.clone());
        Ok(access.loader().load_one(key).await?.map(Peer))
    }

    async fn session_id(&self) -> ID {
        ID(self.0.session_name.clone())
    }

    /// Whether others in this session form conclusions about this peer; null = not set here.
    async fn observe_me(&self) -> Option<bool> {
        self.flag("observe_me")
    }

    /// Whether this peer forms conclusions about others in this session; null = not set here.
    async fn observe_others(&self) -> Option<bool> {
        self.flag("observe_others")
    }

    async fn joined_at(&self) -> DateTime {
        self.0.joined_at.into()
    }

    /// Set when the peer left; null while it is a member.
    async fn left_at(&self) -> Option<DateTime> {
        self.0.left_at.map(Into::into)
    }
}
