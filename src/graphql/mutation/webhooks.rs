use async_graphql::{Context, ID, Object};

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::types::webhook::WebhookEndpoint;

/// Webhook endpoints (admin and workspace keys only; docs/webhooks.md).
#[derive(Default)]
pub struct WebhooksMutation;

#[Object]
impl WebhooksMutation {
    /// Registers `url` for the workspace's events, or returns the endpoint already registered
    /// with it. The workspace must exist (NOT_FOUND); the URL must be http or https and, unless
    /// HONCHO_WEBHOOK_ALLOW_PRIVATE is set, not on a loopback, private or reserved address
    /// (BAD_USER_INPUT); CONFLICT past HONCHO_WEBHOOK_MAX_ENDPOINTS.
    async fn create_webhook(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        url: String,
    ) -> ApiResult<WebhookEndpoint> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.createWebhook), on).await?;
        let (endpoint, _) = access
            .store()
            .get_or_create_webhook(&workspace_id, &url)
            .await?;
        Ok(endpoint.into())
    }

    /// Removes the endpoint and its deliveries, pending and dead alike. NOT_FOUND when the
    /// workspace has no endpoint with this id.
    async fn delete_webhook(&self, ctx: &Context<'_>, workspace_id: ID, id: ID) -> ApiResult<bool> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.deleteWebhook), on).await?;
        access.store().delete_webhook(&workspace_id, &id).await?;
        Ok(true)
    }

    /// Queues a `test.event` to every endpoint of the workspace; returns how many deliveries
    /// that queued (0 without endpoints).
    async fn test_webhook(&self, ctx: &Context<'_>, workspace_id: ID) -> ApiResult<i32> {
        let on = On::workspace(&workspace_id);
        let access = guard::require(ctx, rule!(MutationRoot.testWebhook), on).await?;
        let n = access.store().test_webhooks(&workspace_id).await?;
        Ok(i32::try_from(n).unwrap_or(i32::MAX))
    }
}
