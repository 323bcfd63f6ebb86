use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use super::connection::{Conn, SortOrder, connection, slice};
use super::error::ApiResult;
use super::guard;
use super::prefetch;
use super::types::Workspace;
use super::types::filter::{WorkspaceWhere, filter_json};
use crate::access::{On, rule};

pub struct QueryRoot;

#[Object]
impl QueryRoot {
    /// The workspace with this id, or null.
    async fn workspace(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Workspace>> {
        let access = guard::require(ctx, rule!(QueryRoot.workspace), On::workspace(&id)).await?;
        // With the sessions, peers and conclusions the selection names by id: one round trip
        // for the whole path (their resolvers check their own access rules).
        Ok(prefetch::workspace_path(&access, &id, ctx.field())
            .await?
            .map(Workspace))
    }

    /// All workspaces, oldest first unless `order: DESC`.
    #[allow(clippy::too_many_arguments)]
    async fn workspaces(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<WorkspaceWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Workspace>> {
        let access = guard::require(ctx, rule!(QueryRoot.workspaces), On::nothing()).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_workspaces(&filters, order.into(), slice)
            .await?;
        Ok(connection(page, Workspace))
    }
}
