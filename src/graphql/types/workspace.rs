use crate::graphql::scalars::DateTime;
use crate::graphql::types::filter::{
    ConclusionWhere, MessageWhere, PeerWhere, SessionWhere, filter_json,
};
use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use super::search::{self, SearchArgs, SearchResult};
use super::webhook::{WebhookDelivery, WebhookDeliveryStatus, WebhookEndpoint};
use super::{Conclusion, Message, Peer, Session, message};
use crate::access::{On, rule};
use crate::graphql::connection::{Conn, SortOrder, connection, slice};
use crate::graphql::error::{ApiResult, bad_input};
use crate::graphql::guard;
use crate::graphql::loaders::{ConclusionKey, PeerKey, SessionKey};
use crate::graphql::prefetch;
use crate::store::message::MessageScope;

pub struct Workspace(pub crate::store::workspace::Workspace);

#[Object]
impl Workspace {
    /// The workspace's name, chosen by its creator.
    async fn id(&self) -> ID {
        ID(self.0.name.clone())
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

    /// The deriver's queue for this workspace: queued, in progress, failed, and the last error.
    /// All zero when no LLM is configured (nothing is queued).
    async fn deriver_status(&self, ctx: &Context<'_>) -> ApiResult<super::deriver::DeriverStatus> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.deriverStatus), on).await?;
        let status = access.store().deriver_status(&self.0.name).await?;
        Ok(super::deriver::DeriverStatus::of(&self.0.name, status))
    }

    /// The workspace's scopes by creation (`order: DESC` for the newest first): `first`
    /// (1..100, 50) from `offset` (docs/scopes.md).
    async fn scopes(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        offset: Option<i32>,
        #[graphql(default)] order: SortOrder,
    ) -> ApiResult<Vec<super::Scope>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.scopes), on).await?;
        let (skip, take) = super::scope::window(first, offset)?;
        let (items, _) = access
            .store()
            .scopes(&self.0.name, order.into(), skip, take)
            .await?;
        Ok(items.into_iter().map(super::Scope).collect())
    }

    /// A scope, or null.
    async fn scope(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<super::Scope>> {
        let on = On::scope(&self.0.name, &id);
        let access = guard::require(ctx, rule!(Workspace.scope), on).await?;
        let scope = access.store().scope(&self.0.name, &id).await?;
        Ok(scope.map(super::Scope))
    }

    /// A peer's erasure (from `erasePeer`), or null.
    async fn erasure_job(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> ApiResult<Option<super::erasure::ErasureJob>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.erasureJob), on).await?;
        let job = access.store().erasure_job(&self.0.name, &id).await?;
        Ok(job.map(Into::into))
    }

    /// What an export of the workspace holds, and the path that streams it (admin and
    /// workspace keys; docs/export.md).
    async fn export(&self, ctx: &Context<'_>) -> ApiResult<super::export::WorkspaceExport> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.export), on).await?;
        let store = access.store();
        let counts = store.export_counts(&self.0.name).await?;
        let model = store.embedding_model().await?;
        Ok(super::export::WorkspaceExport::new(
            &self.0.name,
            model,
            counts,
        ))
    }

    /// The webhook endpoints the workspace's events are sent to, oldest first (admin and
    /// workspace keys).
    async fn webhooks(&self, ctx: &Context<'_>) -> ApiResult<Vec<WebhookEndpoint>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.webhooks), on).await?;
        let endpoints = access.store().webhooks(&self.0.name).await?;
        Ok(endpoints.into_iter().map(Into::into).collect())
    }

    /// The workspace's webhook deliveries, newest first, of one status when given (`DEAD`: the
    /// dead letters); at most `limit` (1-100).
    async fn webhook_deliveries(
        &self,
        ctx: &Context<'_>,
        status: Option<WebhookDeliveryStatus>,
        #[graphql(default = 20)] limit: i32,
    ) -> ApiResult<Vec<WebhookDelivery>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.webhookDeliveries), on).await?;
        let limit =
            u64::try_from(limit).map_err(|_| bad_input("limit must be between 1 and 100"))?;
        let deliveries = access
            .store()
            .webhook_deliveries(&self.0.name, status.map(Into::into), limit)
            .await?;
        Ok(deliveries.into_iter().map(Into::into).collect())
    }

    /// The peer with this id, or null.
    async fn peer(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Peer>> {
        let access =
            guard::require(ctx, rule!(Workspace.peer), On::peer(&self.0.name, &id)).await?;
        let key = PeerKey(self.0.name.clone(), id.0);
        Ok(access.loader().load_one(key).await?.map(Peer))
    }

    /// The session with this id, or null.
    async fn session(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Session>> {
        let on = On::session(&self.0.name, &id);
        let access = guard::require(ctx, rule!(Workspace.session), on).await?;
        let key = SessionKey(self.0.name.clone(), id.0);
        Ok(access.loader().load_one(key).await?.map(Session))
    }

    /// The message with this id, or null.
    async fn message(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Message>> {
        // Twice: any key that may read some message of the workspace may learn whether this one
        // exists; only a key that may read its session gets it.
        let field = rule!(Workspace.message);
        let lookup = guard::require(ctx, field, On::message(&self.0.name, None)).await?;
        let message = lookup.store().message(&self.0.name, &id).await?;
        let session = message.as_ref().map(|m| m.session_name.as_str());
        guard::require(ctx, field, On::message(&self.0.name, session)).await?;
        Ok(message.map(Message))
    }

    /// Peers, oldest first unless `order: DESC`.
    #[allow(clippy::too_many_arguments)]
    async fn peers(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<PeerWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Peer>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.peers), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_peers(&self.0.name, &filters, order.into(), slice)
            .await?;
        Ok(connection(page, Peer))
    }

    /// Active sessions, oldest first unless `order: DESC`.
    #[allow(clippy::too_many_arguments)]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<SessionWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Session>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.sessions), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_sessions(&self.0.name, &filters, order.into(), slice)
            .await?;
        Ok(connection(page, Session))
    }

    /// Hybrid search over the messages of every session: semantic (with an embedder) and full-text
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
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.search), on).await?;
        search::search(
            ctx,
            &access,
            MessageScope::Workspace(&self.0.name),
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

    /// Messages of every session, in the order they were written.
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
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.messages), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let scope = MessageScope::Workspace(&self.0.name);
        message::page(ctx, &access, scope, &filters, order, slice).await
    }

    /// The live conclusion with this id, or null (absent or deleted).
    async fn conclusion(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Conclusion>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.conclusion), on).await?;
        let key = ConclusionKey(self.0.name.clone(), id.0);
        let list: Vec<_> = access
            .loader()
            .load_one(key)
            .await?
            .flatten()
            .into_iter()
            .collect();
        prefetch::conclusions(&access, &list, [ctx.look_ahead()]).await?;
        Ok(list.into_iter().next().map(Conclusion))
    }

    /// Live conclusions, newest first unless `order: ASC`.
    #[allow(clippy::too_many_arguments)]
    async fn conclusions(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<ConclusionWhere>,
        #[graphql(default_with = "SortOrder::Desc")] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Conclusion>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.conclusions), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_conclusions(&self.0.name, None, &filters, order.into(), slice)
            .await?;
        prefetch::conclusions(&access, &page.items, prefetch::nodes(ctx.look_ahead())).await?;
        Ok(connection(page, Conclusion))
    }

    /// The `topK` (1 to 100) live conclusions semantically closest to `query`, nearest first, by
    /// cosine distance of their embeddings; only those within `maxDistance` (0 to 2) when given,
    /// and matching `filters`. Needs an embedder (BAD_USER_INPUT without one). A blank query
    /// finds nothing.
    async fn query_conclusions(
        &self,
        ctx: &Context<'_>,
        query: String,
        #[graphql(default = 10)] top_k: i32,
        max_distance: Option<f64>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<ConclusionWhere>,
    ) -> ApiResult<Vec<Conclusion>> {
        let on = On::workspace(&self.0.name);
        let access = guard::require(ctx, rule!(Workspace.queryConclusions), on).await?;
        let top_k = u64::try_from(top_k)
            .map_err(|_| bad_input(format!("topK must be between 1 and 100 (got {top_k})")))?;
        let filters = filter_json(filters, where_)?;
        let found = access
            .store()
            .query_conclusions(&self.0.name, &query, top_k, max_distance, &filters)
            .await?;
        prefetch::conclusions(&access, &found, [ctx.look_ahead()]).await?;
        Ok(found.into_iter().map(Conclusion).collect())
    }
}
