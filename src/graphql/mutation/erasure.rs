use async_graphql::{Context, ID, Object};

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::types::erasure::{ErasureJob, MessageErasure};

/// Erasure (docs/erasure.md): workspace and admin keys only.
#[derive(Default)]
pub struct ErasureMutation;

#[Object]
impl ErasureMutation {
    /// Deletes the message for good, with the conclusions it alone supported (transitively);
    /// conclusions it supported with others lose it as a premise. NOT_FOUND when absent.
    async fn delete_message(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        id: ID,
    ) -> ApiResult<MessageErasure> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.deleteMessage), on).await?;
        Ok(access
            .store()
            .delete_message(&workspace_id, &id)
            .await?
            .into())
    }

    /// Erases the peer: everything it said, every conclusion about it, and (unless
    /// `keepObserved`) every conclusion it drew about others; what only those supported goes
    /// too. Runs in batches in the background: the job is returned at once, and asking again
    /// returns (and continues) the unfinished job. With `keepObserved: true` the conclusions it
    /// drew about others become theirs instead.
    async fn erase_peer(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        peer_id: ID,
        #[graphql(default = false)] keep_observed: bool,
    ) -> ApiResult<ErasureJob> {
        let on = On::peer(&workspace_id, &peer_id);
        let access = guard::require(ctx, rule!(MutationRoot.erasePeer), on).await?;
        let store = access.store();
        let job = store
            .start_peer_erasure(&workspace_id, &peer_id, keep_observed)
            .await?;
        store.spawn_erasure(job.id.clone());
        Ok(job.into())
    }
}
