use async_graphql::{Context, ID, Object};

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;

/// Dreams: memory consolidation on demand (docs/dreams.md).
#[derive(Default)]
pub struct DreamsMutation;

#[Object]
impl DreamsMutation {
    /// Asks the deriver to dream over what `observerId` holds about `observedId` (itself when
    /// absent): merge duplicate conclusions, mark contradictions, derive patterns across
    /// sessions. Returns true once the dream is queued; one pending dream per pair, so asking
    /// again while one waits changes nothing. NOT_FOUND for an unknown peer; BAD_USER_INPUT when
    /// dreams are off (HONCHO_DREAM_ENABLED) or the server has no LLM. Workspace keys.
    async fn schedule_dream(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        observer_id: ID,
        observed_id: Option<ID>,
    ) -> ApiResult<bool> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.scheduleDream), on).await?;
        let observed = observed_id
            .as_deref()
            .map_or(observer_id.as_str(), String::as_str);
        access
            .store()
            .schedule_dream(&workspace_id, &observer_id, observed)
            .await?;
        Ok(true)
    }
}
