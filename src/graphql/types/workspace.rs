use crate::graphql::scalars::DateTime;
use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use super::{Message, Peer, Session};
use crate::graphql::connection::{Conn, SortOrder, connection, slice};
use crate::graphql::error::ApiResult;
use crate::graphql::guard::{self, On, rule};
use crate::graphql::{prefetch, store};
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

    /// The peer with this id, or null.
    async fn peer(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Peer>> {
        guard::require(ctx, rule!(Workspace.peer), On::peer(&self.0.name, &id)).await?;
        Ok(store(ctx)?.peer(&self.0.name, &id).await?.map(Peer))
    }

    /// The session with this id, or null.
    async fn session(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Session>> {
        let on = On::session(&self.0.name, &id);
        guard::require(ctx, rule!(Workspace.session), on).await?;
        Ok(store(ctx)?.session(&self.0.name, &id).await?.map(Session))
    }

    /// The message with this id, or null.
    async fn message(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Message>> {
        let message = store(ctx)?.message(&self.0.name, &id).await?;
        let session = message.as_ref().map(|m| m.session_name.as_str());
        let on = On::message(&self.0.name, session);
        guard::require(ctx, rule!(Workspace.message), on).await?;
        Ok(message.map(Message))
    }

    /// Peers, oldest first unless `order: DESC`.
    #[allow(clippy::too_many_arguments)]
    async fn peers(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Peer>> {
        let on = On::workspace(&self.0.name);
        guard::require(ctx, rule!(Workspace.peers), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filters.map(|f| f.0).unwrap_or(Value::Null);
        let page = store(ctx)?
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
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Session>> {
        let on = On::workspace(&self.0.name);
        guard::require(ctx, rule!(Workspace.sessions), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filters.map(|f| f.0).unwrap_or(Value::Null);
        let page = store(ctx)?
            .list_sessions(&self.0.name, &filters, order.into(), slice)
            .await?;
        Ok(connection(page, Session))
    }

    /// Messages of every session, in the order they were written.
    #[allow(clippy::too_many_arguments)]
    async fn messages(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Message>> {
        let on = On::workspace(&self.0.name);
        guard::require(ctx, rule!(Workspace.messages), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filters.map(|f| f.0).unwrap_or(Value::Null);
        let page = store(ctx)?
            .list_messages(
                MessageScope::Workspace(&self.0.name),
                &filters,
                order.into(),
                slice,
            )
            .await?;
        prefetch::messages(ctx, &page.items, &prefetch::nodes(ctx.look_ahead())).await?;
        Ok(connection(page, Message))
    }
}
