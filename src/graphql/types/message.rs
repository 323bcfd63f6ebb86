use crate::graphql::scalars::DateTime;
use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use super::{Peer, Session};
use crate::access::{On, rule};
use crate::graphql::connection::{Conn, SortOrder, connection};
use crate::graphql::error::ApiResult;
use crate::graphql::guard::{self, Access};
use crate::graphql::loaders::{PeerKey, RangeKey, SessionKey};
use crate::graphql::prefetch;
use crate::store::message::{MessageScope, SeqRange};
use crate::store::page::Slice;

pub const DEFAULT_CONTEXT_SIDE: i64 = 2;

pub struct Message(pub crate::store::message::Message);

#[Object]
impl Message {
    async fn id(&self) -> ID {
        ID(self.0.public_id.clone())
    }

    async fn content(&self) -> &str {
        &self.0.content
    }

    async fn peer_id(&self) -> ID {
        ID(self.0.peer_name.clone())
    }

    async fn peer(&self, ctx: &Context<'_>) -> ApiResult<Option<Peer>> {
        let access = guard::require(ctx, rule!(Message.peer), On::nothing()).await?;
        let key = PeerKey(self.0.workspace_name.clone(), self.0.peer_name.clone());
        Ok(access.loader().load_one(key).await?.map(Peer))
    }

    async fn session_id(&self) -> ID {
        ID(self.0.session_name.clone())
    }

    async fn session(&self, ctx: &Context<'_>) -> ApiResult<Option<Session>> {
        let access = guard::require(ctx, rule!(Message.session), On::nothing()).await?;
        let key = SessionKey(self.0.workspace_name.clone(), self.0.session_name.clone());
        Ok(access.loader().load_one(key).await?.map(Session))
    }

    async fn workspace_id(&self) -> ID {
        ID(self.0.workspace_name.clone())
    }

    async fn metadata(&self) -> Json<&Value> {
        Json(&self.0.metadata)
    }

    async fn created_at(&self) -> DateTime {
        self.0.created_at.into()
    }

    /// Tokens in the content under tiktoken's o200k_base.
    async fn token_count(&self) -> i32 {
        self.0.token_count
    }

    /// Position in the session: 1 for the first message, no gaps.
    async fn seq_in_session(&self) -> i64 {
        self.0.seq_in_session
    }

    /// This message with up to `before` messages before it and `after` after it in its session,
    /// in seqInSession order. Batched: context on a whole list of messages is one query.
    async fn context(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 2)] before: i32,
        #[graphql(default = 2)] after: i32,
    ) -> ApiResult<Vec<Message>> {
        let on = On::session(&self.0.workspace_name, &self.0.session_name);
        let access = guard::require(ctx, rule!(Message.context), on).await?;
        let key = RangeKey(SeqRange::around(&self.0, before.into(), after.into())?);
        let msgs = access.loader().load_one(key).await?.unwrap_or_default();
        prefetch::messages(&access, &msgs, &[ctx.look_ahead()]).await?;
        Ok(msgs.into_iter().map(Message).collect())
    }
}

/// The body of `messages` on Workspace, Peer and Session, once the field's rule passed and its
/// arguments were read: the page of `scope`'s messages, with what the selection asks of them
/// prefetched.
pub(super) async fn page(
    ctx: &Context<'_>,
    access: &Access<'_>,
    scope: MessageScope<'_>,
    filters: &Value,
    order: SortOrder,
    slice: Slice,
) -> ApiResult<Conn<Message>> {
    let page = access
        .store()
        .list_messages(scope, filters, order.into(), slice)
        .await?;
    prefetch::messages(access, &page.items, &prefetch::nodes(ctx.look_ahead())).await?;
    Ok(connection(page, Message))
}
