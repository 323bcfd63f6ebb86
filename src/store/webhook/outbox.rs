//! The outbox of webhook deliveries: one row per event and endpoint.
//!
//! [`emit`] inserts an event's rows with the caller's connection, so inside a transaction the
//! rows commit or roll back with the change they report; without endpoints it inserts nothing.
//! Each row's id is the delivery id and is part of its body, which is fixed at insert: every
//! attempt sends the same bytes, so a receiver that deduplicates by id sees each event once even
//! though a worker killed after sending, before recording it, sends it again (at least once).
//!
//! A worker claims due rows with `FOR UPDATE SKIP LOCKED` ([`Store::claim_deliveries`]), and
//! the claim is a lease: `next_attempt_at` moves to the lease's end and `lease_owner` names the
//! claim, so a worker that dies leaves its rows due again once the lease ends. The attempt is
//! counted at the claim, so a delivery that kills its worker still runs out of attempts.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, FromQueryResult, QueryResult};
use serde_json::Value;

use super::super::{Store, StoreError, StoreResult, new_id, stmt};

/// The events a webhook receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// A deriver work unit (session, observer, observed) has no queued message left.
    QueueEmpty,
    /// `GET …/webhooks/test`, `testWebhook`.
    Test,
    MessageCreated,
    ConclusionCreated,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::QueueEmpty => "queue.empty",
            EventType::Test => "test.event",
            EventType::MessageCreated => "message.created",
            EventType::ConclusionCreated => "conclusion.created",
        }
    }
}

/// Where a delivery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt (or being attempted).
    Pending,
    /// A 2xx answer came back.
    Delivered,
    /// Every attempt failed: the dead letter, kept for inspection.
    Dead,
}

impl DeliveryStatus {
    fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Dead => "dead",
        }
    }

    fn parse(s: &str) -> StoreResult<Self> {
        Ok(match s {
            "pending" => DeliveryStatus::Pending,
            "delivered" => DeliveryStatus::Delivered,
            "dead" => DeliveryStatus::Dead,
            other => {
                return Err(StoreError::Internal(format!(
                    "unknown delivery status {other}"
                )));
            }
        })
    }
}

/// A delivery as `webhookDeliveries` shows it.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub id: String,
    pub endpoint_id: String,
    pub url: String,
    pub event_type: String,
    pub body: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

impl Delivery {
    fn from_row(row: &QueryResult) -> StoreResult<Delivery> {
        let status = DeliveryStatus::parse(&row.try_get::<String>("", "status")?)?;
        Ok(Delivery {
            id: row.try_get("", "id")?,
            endpoint_id: row.try_get("", "endpoint_id")?,
            url: row.try_get("", "url")?,
            event_type: row.try_get("", "event_type")?,
            body: row.try_get("", "body")?,
            status,
            attempts: row.try_get("", "attempts")?,
            next_attempt_at: match status {
                DeliveryStatus::Pending => Some(row.try_get("", "next_attempt_at")?),
                _ => None,
            },
            last_status: row.try_get("", "last_status")?,
            last_error: row.try_get("", "last_error")?,
            created_at: row.try_get("", "created_at")?,
            delivered_at: row.try_get("", "delivered_at")?,
        })
    }
}

/// A claimed delivery, to be sent now.
#[derive(Clone, Debug)]
pub struct DueDelivery {
    pub id: String,
    pub workspace: String,
    pub url: String,
    pub event_type: String,
    pub body: String,
    /// This one included.
    pub attempts: i32,
    /// Unique to this claim: recording the outcome needs it.
    pub owner: String,
}

/// The columns a claim returns.
#[derive(FromQueryResult)]
struct Claimed {
    id: String,
    workspace_name: String,
    url: String,
    event_type: String,
    body: String,
    attempts: i32,
}

/// How the rows of events are inserted: `{data}` is a query yielding one `data` jsonb per event
/// (column `data`), `$1` the workspace and `$2` the event type.
fn insert_events(data: &str) -> String {
    format!(
        "WITH events AS ({data}), \
         rows AS MATERIALIZED ( \
           SELECT gen_random_uuid()::text AS id, e.id AS endpoint_id, ev.data \
           FROM webhook_endpoints e CROSS JOIN events ev WHERE e.workspace_name = $1) \
         INSERT INTO webhook_deliveries (id, workspace_name, endpoint_id, event_type, body) \
         SELECT id, $1, endpoint_id, $2, jsonb_build_object( \
           'id', id, 'type', $2::text, 'data', data, \
           'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))::text \
         FROM rows"
    )
}

/// Inserts the rows of the events `data_sql` yields (`$3` is `param`). The events are read only
/// when the workspace has an endpoint: a workspace without webhooks pays one index probe.
async fn insert<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    event: EventType,
    data_sql: &str,
    param: sea_orm::Value,
) -> StoreResult<u64> {
    let data = format!(
        "{data_sql} AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE workspace_name = $1)"
    );
    let done = db
        .execute_raw(stmt(
            &insert_events(&data),
            [workspace.into(), event.as_str().into(), param],
        ))
        .await?;
    Ok(done.rows_affected())
}

/// Queues the events whose `data` are the elements of the JSON array `data` to every endpoint of
/// the workspace; returns the rows inserted.
pub(crate) async fn emit<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    event: EventType,
    data: Value,
) -> StoreResult<u64> {
    let sql = "SELECT value AS data FROM jsonb_array_elements($3::jsonb) WHERE true";
    insert(db, workspace, event, sql, data.into()).await
}

/// Queues a `message.created` for each message of `ids` (internal ids), read back in the same
/// transaction.
pub(crate) async fn emit_messages<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    ids: &[i64],
) -> StoreResult<u64> {
    let sql = "SELECT jsonb_build_object('workspace_id', m.workspace_name, \
                 'session_id', m.session_name, 'peer_id', m.peer_name, 'message_id', m.public_id, \
                 'seq_in_session', m.seq_in_session, 'content', m.content, \
                 'metadata', m.metadata, 'created_at', m.created_at) AS data \
               FROM messages m WHERE m.id = ANY($3::bigint[])";
    insert(
        db,
        workspace,
        EventType::MessageCreated,
        sql,
        ids.to_vec().into(),
    )
    .await
}

/// Queues a `conclusion.created` for each conclusion of `ids`, read back in the same transaction.
pub(crate) async fn emit_conclusions<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    ids: &[String],
) -> StoreResult<u64> {
    let sql = "SELECT jsonb_build_object('workspace_id', c.workspace_name, 'conclusion_id', c.id, \
                 'observer_id', c.observer, 'observed_id', c.observed, \
                 'session_id', c.session_name, 'level', c.level, 'content', c.content, \
                 'created_at', c.created_at) AS data \
               FROM conclusions c WHERE c.workspace_name = $1 AND c.id = ANY($3::text[])";
    insert(
        db,
        workspace,
        EventType::ConclusionCreated,
        sql,
        ids.to_vec().into(),
    )
    .await
}

/// Most deliveries one `webhookDeliveries` page shows.
pub const MAX_DELIVERIES_PAGE: u64 = 100;

impl Store {
    /// Claims up to `limit` due deliveries for `lease` (the attempt is counted now).
    #[tracing::instrument(name = "store.claim_deliveries", level = "debug", skip_all)]
    pub async fn claim_deliveries(
        &self,
        worker: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<DueDelivery>> {
        let owner = format!("{worker}:{}", new_id());
        let rows = self
            .db()
            .query_all_raw(stmt(
                "WITH due AS ( \
                   SELECT id FROM webhook_deliveries \
                   WHERE status = 'pending' AND next_attempt_at <= now() \
                   ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
                 UPDATE webhook_deliveries d SET attempts = d.attempts + 1, lease_owner = $2, \
                   next_attempt_at = now() + make_interval(secs => $3) \
                 FROM due, webhook_endpoints e \
                 WHERE d.id = due.id AND e.id = d.endpoint_id \
                 RETURNING d.id, d.workspace_name, e.url, d.event_type, d.body, d.attempts",
                [
                    i64::from(limit).into(),
                    owner.clone().into(),
                    lease.as_secs_f64().into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|r| {
                let row = Claimed::from_query_result(r, "")?;
                Ok(DueDelivery {
                    id: row.id,
                    workspace: row.workspace_name,
                    url: row.url,
                    event_type: row.event_type,
                    body: row.body,
                    attempts: row.attempts,
                    owner: owner.clone(),
                })
            })
            .collect()
    }

    /// Records a 2xx answer. `false` when the claim no longer holds the row (its lease ended and
    /// another worker took it: that one records its own outcome).
    pub async fn delivery_succeeded(&self, d: &DueDelivery, status: u16) -> StoreResult<bool> {
        let done = self
            .db()
            .execute_raw(stmt(
                "UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), \
                   lease_owner = NULL, last_status = $3, last_error = NULL \
                 WHERE id = $1 AND lease_owner = $2",
                [
                    d.id.clone().into(),
                    d.owner.clone().into(),
                    i32::from(status).into(),
                ],
            ))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a failed attempt: the row is due again after `retry_in`, or dead when `None`.
    /// `false` when the claim no longer holds the row.
    pub async fn delivery_failed(
        &self,
        d: &DueDelivery,
        status: Option<u16>,
        error: &str,
        retry_in: Option<Duration>,
    ) -> StoreResult<bool> {
        let error: String = error.chars().take(2000).collect();
        let done = self
            .db()
            .execute_raw(stmt(
                "UPDATE webhook_deliveries SET lease_owner = NULL, last_status = $3, \
                   last_error = $4, \
                   status = CASE WHEN $5::float8 IS NULL THEN 'dead' ELSE 'pending' END, \
                   next_attempt_at = CASE WHEN $5::float8 IS NULL THEN next_attempt_at \
                     ELSE now() + make_interval(secs => $5::float8) END \
                 WHERE id = $1 AND lease_owner = $2",
                [
                    d.id.clone().into(),
                    d.owner.clone().into(),
                    status.map(i32::from).into(),
                    error.into(),
                    retry_in.map(|t| t.as_secs_f64()).into(),
                ],
            ))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The workspace's deliveries, newest first, of one status when given (at most
    /// [`MAX_DELIVERIES_PAGE`]).
    #[tracing::instrument(name = "store.webhook_deliveries", level = "debug", skip_all)]
    pub async fn webhook_deliveries(
        &self,
        workspace: &str,
        status: Option<DeliveryStatus>,
        limit: u64,
    ) -> StoreResult<Vec<Delivery>> {
        if !(1..=MAX_DELIVERIES_PAGE).contains(&limit) {
            return Err(StoreError::invalid(format!(
                "limit must be between 1 and {MAX_DELIVERIES_PAGE} (got {limit})"
            )));
        }
        self.reader()
            .query_all_raw(stmt(
                "SELECT d.id, d.endpoint_id, e.url, d.event_type, d.body, d.status, d.attempts, \
                   d.next_attempt_at, d.last_status, d.last_error, d.created_at, d.delivered_at \
                 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
                 WHERE d.workspace_name = $1 AND ($2::text IS NULL OR d.status = $2) \
                 ORDER BY d.created_at DESC, d.id LIMIT $3",
                [
                    workspace.into(),
                    status.map(|s| s.as_str().to_owned()).into(),
                    (limit as i64).into(),
                ],
            ))
            .await?
            .iter()
            .map(Delivery::from_row)
            .collect()
    }

    /// Deletes up to `limit` delivered and dead rows older than `age`; returns how many.
    pub async fn prune_deliveries(&self, age: Duration, limit: u32) -> StoreResult<u64> {
        let done = self
            .db()
            .execute_raw(stmt(
                "DELETE FROM webhook_deliveries WHERE id IN ( \
                   SELECT id FROM webhook_deliveries \
                   WHERE status <> 'pending' AND created_at < now() - make_interval(secs => $1) \
                   LIMIT $2)",
                [age.as_secs_f64().into(), i64::from(limit).into()],
            ))
            .await?;
        Ok(done.rows_affected())
    }
}
