//! Webhooks (Honcho v3.0.12's webhook endpoints): the URLs a workspace registers, and the outbox
//! of the events delivered to them.
//!
//! [`endpoints`](self) are get-or-create by URL, at most [`WebhookPolicy::max_endpoints`] per
//! workspace. [`outbox`] holds every write of a delivery row: the events are inserted by the
//! transaction of the change they report (so an event exists exactly when its change committed),
//! one row per endpoint, and the delivery worker (`crate::webhook`) claims, completes and retries
//! them. [`target`] decides which URLs and addresses may be called.

pub(crate) mod outbox;
pub mod target;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, QueryResult};

use super::{Store, StoreError, StoreResult, new_id, stmt, validate};
pub use outbox::{Delivery, DeliveryStatus, DueDelivery, EventType};

/// Most endpoints one workspace may register by default (Honcho v3.0.12's
/// `WEBHOOK_MAX_WORKSPACE_LIMIT`).
pub const DEFAULT_MAX_ENDPOINTS: usize = 10;

/// What registering an endpoint checks: set from the webhook module's settings at start.
#[derive(Clone, Copy, Debug)]
pub struct WebhookPolicy {
    /// Loopback, private and reserved targets are accepted (tests, local development).
    pub allow_private: bool,
    pub max_endpoints: usize,
}

impl Default for WebhookPolicy {
    fn default() -> Self {
        WebhookPolicy {
            allow_private: false,
            max_endpoints: DEFAULT_MAX_ENDPOINTS,
        }
    }
}

/// A registered URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub id: String,
    pub workspace: String,
    pub url: String,
    pub created_at: DateTime<Utc>,
}

impl Endpoint {
    fn from_row(row: &QueryResult) -> StoreResult<Endpoint> {
        Ok(Endpoint {
            id: row.try_get("", "id")?,
            workspace: row.try_get("", "workspace_name")?,
            url: row.try_get("", "url")?,
            created_at: row.try_get("", "created_at")?,
        })
    }
}

impl Store {
    /// The endpoint of the workspace with this URL, registered when missing (`true`: it is new).
    /// NOT_FOUND for a missing workspace; CONFLICT when the workspace already has the most
    /// endpoints allowed; BAD_USER_INPUT for a URL [`target::check_url`] refuses.
    #[tracing::instrument(name = "store.get_or_create_webhook", level = "debug", skip_all)]
    pub async fn get_or_create_webhook(
        &self,
        workspace: &str,
        url: &str,
    ) -> StoreResult<(Endpoint, bool)> {
        validate::name("workspace", workspace)?;
        let policy = self.webhook_policy();
        let url = target::check_url(url, policy.allow_private)?;
        let url = url.as_str();
        self.transaction(Default::default(), |txn| async move {
            // Serializes registrations of one workspace, so the count below stays a bound.
            let ws = txn
                .query_one_raw(stmt(
                    "SELECT name FROM workspaces WHERE name = $1 FOR NO KEY UPDATE",
                    [workspace.into()],
                ))
                .await?;
            if ws.is_none() {
                return Err(StoreError::not_found("workspace", workspace));
            }
            let rows = txn
                .query_all_raw(stmt(
                    "SELECT id, workspace_name, url, created_at FROM webhook_endpoints \
                     WHERE workspace_name = $1 ORDER BY created_at, id",
                    [workspace.into()],
                ))
                .await?;
            let existing = rows
                .iter()
                .map(Endpoint::from_row)
                .collect::<StoreResult<Vec<_>>>()?;
            if let Some(found) = existing.into_iter().find(|e| e.url == url) {
                return Ok((found, false));
            }
            if rows.len() >= policy.max_endpoints {
                return Err(StoreError::Conflict(format!(
                    "the workspace has the most webhook endpoints allowed ({}; \
                     HONCHO_WEBHOOK_MAX_ENDPOINTS raises it)",
                    policy.max_endpoints
                )));
            }
            let row = txn
                .query_one_raw(stmt(
                    "INSERT INTO webhook_endpoints (id, workspace_name, url) VALUES ($1, $2, $3) \
                     RETURNING id, workspace_name, url, created_at",
                    [new_id().into(), workspace.into(), url.into()],
                ))
                .await?
                .ok_or_else(|| StoreError::Internal("insert returned no row".into()))?;
            Ok((Endpoint::from_row(&row)?, true))
        })
        .await
    }

    /// The workspace's endpoints, oldest first (at most [`WebhookPolicy::max_endpoints`]).
    #[tracing::instrument(name = "store.webhooks", level = "debug", skip_all)]
    pub async fn webhooks(&self, workspace: &str) -> StoreResult<Vec<Endpoint>> {
        list(self.reader(), workspace).await
    }

    /// Removes the endpoint and its deliveries (pending and dead alike). NOT_FOUND when the
    /// workspace has no endpoint with this id.
    #[tracing::instrument(name = "store.delete_webhook", level = "debug", skip_all)]
    pub async fn delete_webhook(&self, workspace: &str, id: &str) -> StoreResult<()> {
        let done = self
            .db()
            .execute_raw(stmt(
                "DELETE FROM webhook_endpoints WHERE workspace_name = $1 AND id = $2",
                [workspace.into(), id.into()],
            ))
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("webhook endpoint", id));
        }
        Ok(())
    }

    /// Queues a `test.event` to every endpoint of the workspace; returns how many deliveries
    /// that made (0 without endpoints). NOT_FOUND for a missing workspace.
    #[tracing::instrument(name = "store.test_webhooks", level = "debug", skip_all)]
    pub async fn test_webhooks(&self, workspace: &str) -> StoreResult<u64> {
        if self.workspace(workspace).await?.is_none() {
            return Err(StoreError::not_found("workspace", workspace));
        }
        let data = serde_json::json!([{ "workspace_id": workspace }]);
        outbox::emit(self.db(), workspace, EventType::Test, data).await
    }
}

async fn list<C: ConnectionTrait>(db: &C, workspace: &str) -> StoreResult<Vec<Endpoint>> {
    db.query_all_raw(stmt(
        "SELECT id, workspace_name, url, created_at FROM webhook_endpoints \
         WHERE workspace_name = $1 ORDER BY created_at, id",
        [workspace.into()],
    ))
    .await?
    .iter()
    .map(Endpoint::from_row)
    .collect()
}
