use async_graphql::{Enum, ID, Json, SimpleObject};
use serde_json::Value;

use crate::graphql::scalars::DateTime;
use crate::store::webhook::{Delivery, DeliveryStatus, Endpoint};

/// A URL the workspace's events are POSTed to (docs/webhooks.md).
#[derive(SimpleObject)]
pub struct WebhookEndpoint {
    pub id: ID,
    pub workspace_id: ID,
    pub url: String,
    pub created_at: DateTime,
}

impl From<Endpoint> for WebhookEndpoint {
    fn from(e: Endpoint) -> Self {
        WebhookEndpoint {
            id: ID(e.id),
            workspace_id: ID(e.workspace),
            url: e.url,
            created_at: e.created_at.into(),
        }
    }
}

/// Where a webhook delivery is.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum WebhookDeliveryStatus {
    /// Waiting for its next attempt, or being attempted.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Every attempt failed (HONCHO_WEBHOOK_MAX_ATTEMPTS): the dead letter, kept for inspection.
    Dead,
}

impl From<WebhookDeliveryStatus> for DeliveryStatus {
    fn from(s: WebhookDeliveryStatus) -> Self {
        match s {
            WebhookDeliveryStatus::Pending => DeliveryStatus::Pending,
            WebhookDeliveryStatus::Delivered => DeliveryStatus::Delivered,
            WebhookDeliveryStatus::Dead => DeliveryStatus::Dead,
        }
    }
}

/// One event sent to one endpoint: its body, state and attempts.
#[derive(SimpleObject)]
pub struct WebhookDelivery {
    /// The delivery id: the same on every attempt (header `X-Honcho-Delivery-Id`, and `id` in
    /// the body), for receivers to deduplicate by.
    pub id: ID,
    pub endpoint_id: ID,
    pub url: String,
    /// `message.created`, `conclusion.created`, `queue.empty` or `test.event`.
    pub event_type: String,
    /// The JSON body sent: `{id, type, data, timestamp}`.
    pub payload: Json<Value>,
    pub status: WebhookDeliveryStatus,
    /// Attempts made so far (one is counted when a worker takes the delivery).
    pub attempts: i32,
    /// When the next attempt is due (pending deliveries only).
    pub next_attempt_at: Option<DateTime>,
    /// The HTTP status of the last attempt, when one came back.
    pub last_status: Option<i32>,
    /// Why the last attempt failed (the start of the endpoint's answer, or the network error).
    pub last_error: Option<String>,
    pub created_at: DateTime,
    pub delivered_at: Option<DateTime>,
}

impl From<Delivery> for WebhookDelivery {
    fn from(d: Delivery) -> Self {
        WebhookDelivery {
            id: ID(d.id),
            endpoint_id: ID(d.endpoint_id),
            url: d.url,
            event_type: d.event_type,
            payload: Json(serde_json::from_str(&d.body).unwrap_or(Value::String(d.body))),
            status: match d.status {
                DeliveryStatus::Pending => WebhookDeliveryStatus::Pending,
                DeliveryStatus::Delivered => WebhookDeliveryStatus::Delivered,
                DeliveryStatus::Dead => WebhookDeliveryStatus::Dead,
            },
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at.map(Into::into),
            last_status: d.last_status,
            last_error: d.last_error,
            created_at: d.created_at.into(),
            delivered_at: d.delivered_at.map(Into::into),
        }
    }
}
