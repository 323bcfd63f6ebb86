use async_graphql::{Context, ID, Json, Object, SimpleObject};
use serde_json::Value;

use super::Session;
use crate::access::{On, rule};
use crate::graphql::connection::SortOrder;
use crate::graphql::error::{ApiResult, bad_input};
use crate::graphql::guard;
use crate::graphql::scalars::DateTime;
use crate::store::page::{DEFAULT_PAGE, MAX_PAGE};

/// A named group of a workspace's sessions that bounds what recall may see: `search`,
/// `Peer.chat` and `Peer.representation` given `scope` read only its sessions' messages and
/// conclusions, and a key limited to it reads nothing else (docs/scopes.md).
pub struct Scope(pub crate::store::scope::Scope);

/// What a scope holds now.
#[derive(SimpleObject)]
pub struct ScopeStatus {
    pub session_count: i64,
    pub message_count: i64,
    pub conclusion_count: i64,
    /// The deriver's queued messages of the scope's sessions, not yet turned into conclusions.
    pub pending_work_units: i64,
}

/// `first` (1..100, 50 when absent) and `offset` (0 or more) as the store's skip and take.
pub(crate) fn window(first: Option<i32>, offset: Option<i32>) -> ApiResult<(u64, u64)> {
    let take = match first {
        None => DEFAULT_PAGE,
        Some(n) => u64::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| bad_input(format!("first must be between 1 and {MAX_PAGE}")))?,
    };
    let skip =
        u64::try_from(offset.unwrap_or(0)).map_err(|_| bad_input("offset must be 0 or more"))?;
    Ok((skip, take))
}

#[Object]
impl Scope {
    async fn id(&self) -> ID {
        ID(self.0.name.clone())
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

    /// The scope's sessions by when they joined it (`order: DESC` for the newest members
    /// first): `first` (1..100, 50) from `offset`.
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        offset: Option<i32>,
        #[graphql(default)] order: SortOrder,
    ) -> ApiResult<Vec<Session>> {
        let on = On::scope(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Scope.sessions), on).await?;
        let (skip, take) = window(first, offset)?;
        let (items, _) = access
            .store()
            .scope_sessions(
                &self.0.workspace_name,
                &self.0.name,
                order.into(),
                skip,
                take,
            )
            .await?;
        Ok(items.into_iter().map(Session).collect())
    }

    /// What the scope holds now. A membership change is in effect when it commits: there is
    /// nothing to backfill.
    async fn status(&self, ctx: &Context<'_>) -> ApiResult<ScopeStatus> {
        let on = On::scope(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Scope.status), on).await?;
        let s = access
            .store()
            .scope_status(&self.0.workspace_name, &self.0.name)
            .await?;
        Ok(ScopeStatus {
            session_count: s.sessions,
            message_count: s.messages,
            conclusion_count: s.conclusions,
            pending_work_units: s.pending_work_units,
        })
    }
}
