use async_graphql::{Context, ID, Json, Object};
use serde_json::Value;

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::types::Scope;

/// Scopes (workspace keys; docs/scopes.md).
#[derive(Default)]
pub struct ScopesMutation;

#[Object]
impl ScopesMutation {
    /// The scope with this id, created when missing; `metadata`, when given, replaces its
    /// metadata. NOT_FOUND for a missing workspace, BAD_USER_INPUT for a bad id.
    async fn get_or_create_scope(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
    ) -> ApiResult<Scope> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.getOrCreateScope), on).await?;
        let (scope, _) = access
            .store()
            .get_or_create_scope(&workspace_id, &id, metadata.map(|m| m.0))
            .await?;
        Ok(Scope(scope))
    }

    /// Adds existing sessions of the workspace (1 to 100) to the scope; one already in it stays
    /// as it is. All or nothing: NOT_FOUND for a missing scope or session.
    async fn add_sessions_to_scope(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        scope_id: ID,
        session_ids: Vec<ID>,
    ) -> ApiResult<Scope> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.addSessionsToScope), on).await?;
        let sessions: Vec<String> = session_ids.into_iter().map(|s| s.0).collect();
        let store = access.store();
        store
            .add_sessions_to_scope(&workspace_id, &scope_id, &sessions)
            .await?;
        Ok(Scope(store.require_scope(&workspace_id, &scope_id).await?))
    }

    /// Removes a session from the scope (one not in it is left as it is). NOT_FOUND for a
    /// missing scope or session.
    async fn remove_session_from_scope(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        scope_id: ID,
        session_id: ID,
    ) -> ApiResult<Scope> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.removeSessionFromScope), on).await?;
        let store = access.store();
        store
            .remove_session_from_scope(&workspace_id, &scope_id, &session_id)
            .await?;
        Ok(Scope(store.require_scope(&workspace_id, &scope_id).await?))
    }
}
