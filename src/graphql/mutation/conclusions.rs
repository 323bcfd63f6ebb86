use async_graphql::{Context, ID, InputObject, Json, Object};
use serde_json::Value;

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::prefetch;
use crate::graphql::types::Conclusion;
use crate::graphql::types::conclusion::ConclusionLevel;
use crate::store::conclusion::{DerivedConclusion, NewConclusion};

/// Conclusions: explicit ones from clients, derived ones from the deriver.
#[derive(Default)]
pub struct ConclusionMutation;

/// A conclusion a client states. It is stored as EXPLICIT with timesDerived 1 and no sources;
/// those fields cannot be set.
#[derive(InputObject)]
pub struct ConclusionInput {
    /// 1 to 65,535 characters (at most 8,192 tokens); NUL bytes are removed.
    pub content: String,
    /// The peer holding the conclusion; must exist.
    pub observer_id: ID,
    /// The peer the conclusion is about; must exist.
    pub observed_id: ID,
    /// The session it was drawn in; must exist when given.
    pub session_id: Option<ID>,
    /// Defaults to {}; the limits of all metadata apply.
    pub metadata: Option<Json<Value>>,
}

/// A conclusion the deriver drew from existing ones.
#[derive(InputObject)]
pub struct DerivedConclusionInput {
    pub content: String,
    pub observer_id: ID,
    pub observed_id: ID,
    pub session_id: Option<ID>,
    /// DEDUCTIVE, INDUCTIVE or CONTRADICTION.
    pub level: ConclusionLevel,
    /// 1 to 100 live conclusions of the same workspace (duplicates are ignored).
    pub source_ids: Vec<ID>,
}

#[Object]
impl ConclusionMutation {
    /// Stores 1 to 100 explicit conclusions, all or nothing, and embeds them. Observer, observed
    /// and session must exist (NOT_FOUND otherwise).
    async fn create_conclusions(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        conclusions: Vec<ConclusionInput>,
    ) -> ApiResult<Vec<Conclusion>> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.createConclusions), on).await?;
        let batch = conclusions
            .into_iter()
            .map(|c| NewConclusion {
                content: c.content,
                observer: c.observer_id.0,
                observed: c.observed_id.0,
                session: c.session_id.map(|s| s.0),
                metadata: c.metadata.map(|m| m.0),
            })
            .collect();
        let created = access
            .store()
            .create_conclusions(&workspace_id, batch)
            .await?;
        prefetch::conclusions(&access, &created, [ctx.look_ahead()]).await?;
        Ok(created.into_iter().map(Conclusion).collect())
    }

    /// Replaces the conclusion's metadata (null leaves it unchanged). Content, level,
    /// timesDerived and sourceIds cannot change. Deleted or unknown → NOT_FOUND.
    async fn update_conclusion(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
        metadata: Option<Json<Value>>,
    ) -> ApiResult<Conclusion> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.updateConclusion), on).await?;
        let updated = access
            .store()
            .update_conclusion_metadata(&workspace_id, &id, metadata.map(|m| m.0))
            .await?;
        prefetch::conclusions(&access, std::slice::from_ref(&updated), [ctx.look_ahead()]).await?;
        Ok(Conclusion(updated))
    }

    /// Soft-deletes the conclusion: it disappears from every read, tree and search. Already
    /// deleted or unknown → NOT_FOUND.
    async fn delete_conclusion(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
    ) -> ApiResult<bool> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.deleteConclusion), on).await?;
        access.store().delete_conclusion(&workspace_id, &id).await?;
        Ok(true)
    }

    /// The deriver's door: records a DEDUCTIVE, INDUCTIVE or CONTRADICTION conclusion drawn from
    /// `sourceIds`. Deriving the same content again for the same observer and observed while the
    /// earlier conclusion is live reinforces it (timesDerived + 1, sources unioned) instead of
    /// inserting a duplicate; concurrent derivations are counted exactly. A reinforcement citing
    /// a source derived from the conclusion it reinforces would close a cycle: BAD_USER_INPUT.
    ///
    /// Admin keys only: provenance is written by the deriver, never by a client's peer key.
    async fn record_derived_conclusion(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        input: DerivedConclusionInput,
    ) -> ApiResult<Conclusion> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.recordDerivedConclusion), on).await?;
        let derived = DerivedConclusion {
            content: input.content,
            observer: input.observer_id.0,
            observed: input.observed_id.0,
            session: input.session_id.map(|s| s.0),
            level: input.level.into(),
            source_ids: input.source_ids.into_iter().map(|s| s.0).collect(),
        };
        let row = access
            .store()
            .record_derived_conclusion(&workspace_id, derived)
            .await?;
        prefetch::conclusions(&access, std::slice::from_ref(&row), [ctx.look_ahead()]).await?;
        Ok(Conclusion(row))
    }

    /// Lets the deriver resume the workspace's work units stopped by a failed batch, and its
    /// failed dreams; returns how many queued messages and dreams that puts back. Admin keys
    /// only.
    async fn retry_failed_derivations(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
    ) -> ApiResult<i64> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.retryFailedDerivations), on).await?;
        let store = access.store();
        let messages = store.retry_failed_derivations(&workspace_id).await?;
        let dreams = store.retry_failed_dreams(&workspace_id).await?;
        Ok(messages + dreams)
    }
}
