//! Dreams' queue, in PostgreSQL, beside the deriver's ([`super::queue`]) and run by its workers.
//!
//! A *dream unit* is one (observer, observed) pair of a workspace. A dream is pending while the
//! unit's `requested_at` is set: by [`Store::schedule_dream`] (on demand) or by
//! [`Store::schedule_due_dreams`] (the scheduled check, with Honcho v3.0.12's trigger: enough new
//! explicit conclusions since the last dream, the pair idle for a while, and enough time since
//! the last dream). A worker claims the oldest pending unit with `FOR UPDATE SKIP LOCKED` and
//! takes a lease, as it does a deriver unit; what the dream decides is written in one transaction
//! that first checks the lease ([`Store::complete_dream`]). A failed dream stops its unit until
//! `retryFailedDerivations`, and shows in `deriverStatus.dreams`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseTransaction};

use super::conclusion::Conclusion;
use super::conclusion::dream::{DreamOutcome, DreamPlan, apply};
use super::conclusion::require_peers_and_sessions;
use super::events::{self, Notice};
use super::lease::{self, Lease};
use super::{Store, StoreError, StoreResult, TxOptions, columns, new_id, stmt, webhook};
use crate::entity::conclusion;

/// When the scheduled check asks a pair to dream (Honcho v3.0.12's conditions).
#[derive(Clone, Copy, Debug)]
pub struct DreamTriggers {
    /// Live explicit conclusions added since the pair's last dream.
    pub threshold: i64,
    /// The pair's newest explicit conclusion is at least this old.
    pub idle: Duration,
    /// The pair's last dream ended at least this long ago.
    pub min_gap: Duration,
}

/// A dream unit a worker holds.
#[derive(Clone, Debug)]
pub struct DreamClaim {
    pub unit_id: i64,
    /// Unique to this claim: completing needs it.
    pub owner: String,
    pub workspace: String,
    pub observer: String,
    pub observed: String,
}

/// Dreams of a workspace, in pairs (observer, observed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DreamStatus {
    pub pending: i64,
    pub in_progress: i64,
    pub failed: i64,
    /// The newest failure of a pair that has not dreamt since.
    pub last_error: Option<(String, DateTime<Utc>)>,
}

impl Store {
    /// Asks for a dream of `observer` about `observed` (both peers of the workspace, else
    /// NOT_FOUND). One pending dream per pair: asking again while one waits changes nothing.
    /// Asking again lifts a failure, as `retryFailedDerivations` does. Refused (BAD_USER_INPUT)
    /// when dreams are off or this server derives nothing (no LLM).
    #[tracing::instrument(name = "store.schedule_dream", level = "debug", skip_all)]
    pub async fn schedule_dream(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
    ) -> StoreResult<()> {
        if !self.dreams() {
            return Err(StoreError::invalid(
                "dreams are not enabled on this server (they need an LLM, HONCHO_LLM, and \
                 HONCHO_DREAM_ENABLED=true)",
            ));
        }
        let peers = [observer.to_owned(), observed.to_owned()];
        let peers = &peers;
        self.transaction(TxOptions::default(), |txn| async move {
            require_peers_and_sessions(&*txn, workspace, peers, &[]).await?;
            txn.execute_raw(stmt(
                "INSERT INTO dream_units (workspace_name, observer, observed, requested_at, reason) \
                 VALUES ($1, $2, $3, now(), 'manual') \
                 ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET \
                   requested_at = COALESCE(dream_units.requested_at, now()), \
                   reason = COALESCE(dream_units.reason, 'manual'), failed_at = NULL",
                [workspace.into(), peers[0].clone().into(), peers[1].clone().into()],
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// The scheduled check: asks every pair that meets `t` to dream, unless one is pending or
    /// failed. Returns how many were asked. One statement over the live explicit conclusions,
    /// grouped by pair.
    #[tracing::instrument(name = "store.schedule_due_dreams", level = "debug", skip_all)]
    pub async fn schedule_due_dreams(&self, t: DreamTriggers) -> StoreResult<u64> {
        let done = self
            .db()
            .execute_raw(stmt(
                "WITH pairs AS ( \
                   SELECT workspace_name, observer, observed, count(*) AS n, \
                          max(created_at) AS newest \
                   FROM conclusions WHERE level = 'explicit' AND deleted_at IS NULL \
                   GROUP BY workspace_name, observer, observed) \
                 INSERT INTO dream_units AS d (workspace_name, observer, observed, requested_at, \
                   reason) \
                 SELECT p.workspace_name, p.observer, p.observed, now(), 'threshold' \
                 FROM pairs p LEFT JOIN dream_units u ON u.workspace_name = p.workspace_name \
                   AND u.observer = p.observer AND u.observed = p.observed \
                 WHERE p.n - COALESCE(u.explicit_at_last_dream, 0) >= $1 \
                   AND p.newest <= now() - make_interval(secs => $2) \
                   AND (u.last_dream_at IS NULL \
                        OR u.last_dream_at <= now() - make_interval(secs => $3)) \
                   AND u.requested_at IS NULL AND u.failed_at IS NULL \
                 ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET \
                   requested_at = now(), reason = 'threshold' \
                 WHERE d.requested_at IS NULL AND d.failed_at IS NULL",
                [
                    t.threshold.max(1).into(),
                    t.idle.as_secs_f64().into(),
                    t.min_gap.as_secs_f64().into(),
                ],
            ))
            .await?;
        Ok(done.rows_affected())
    }

    /// Claims the oldest pending dream no live lease holds. `None` when there is none.
    pub async fn claim_dream(
        &self,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Option<DreamClaim>> {
        let owner = format!("{worker}:{}", new_id());
        let row = self
            .db()
            .query_one_raw(stmt(
                "UPDATE dream_units SET lease_owner = $1, \
                   lease_until = now() + make_interval(secs => $2) \
                 WHERE id = ( \
                   SELECT id FROM dream_units \
                   WHERE requested_at IS NOT NULL AND failed_at IS NULL \
                     AND (lease_until IS NULL OR lease_until < now()) \
                   ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 RETURNING id, workspace_name, observer, observed",
                [owner.clone().into(), lease.as_secs_f64().into()],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(DreamClaim {
            unit_id: row.try_get("", "id")?,
            owner,
            workspace: row.try_get("", "workspace_name")?,
            observer: row.try_get("", "observer")?,
            observed: row.try_get("", "observed")?,
        }))
    }

    /// What a dream reads: the pair's newest `limit` live conclusions, oldest first.
    pub async fn dream_material(
        &self,
        claim: &DreamClaim,
        limit: i64,
    ) -> StoreResult<Vec<Conclusion>> {
        use sea_orm::EntityTrait;
        let mut rows = conclusion::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "SELECT {} FROM conclusions c \
                     WHERE c.workspace_name = $1 AND c.observer = $2 AND c.observed = $3 \
                       AND c.deleted_at IS NULL \
                     ORDER BY c.created_at DESC, c.id LIMIT $4",
                    columns::list::<conclusion::Entity>("c")
                ),
                [
                    claim.workspace.clone().into(),
                    claim.observer.clone().into(),
                    claim.observed.clone().into(),
                    limit.into(),
                ],
            ))
            .all(self.db())
            .await?;
        rows.reverse();
        Ok(rows)
    }

    /// Extends the claim's lease to `lease` from now. `Conflict` when it is no longer the
    /// claim's.
    pub async fn renew_dream_lease(&self, claim: &DreamClaim, lease: Duration) -> StoreResult<()> {
        claim.lease().renew(self.db(), lease).await
    }

    /// Writes what the dream decided (merges, contradictions, inductions; see
    /// [`super::conclusion::dream`]) and ends the dream, in one transaction, if the claim still
    /// holds its unit (else `Conflict`, and nothing is written).
    #[tracing::instrument(name = "store.complete_dream", level = "debug", skip_all)]
    pub async fn complete_dream(
        &self,
        claim: &DreamClaim,
        plan: &DreamPlan,
    ) -> StoreResult<DreamOutcome> {
        self.transaction(TxOptions::default(), |txn| async move {
            hold(&txn, claim).await?;
            let out = apply(
                &txn,
                &claim.workspace,
                &claim.observer,
                &claim.observed,
                plan,
            )
            .await?;
            txn.execute_raw(stmt(
                "UPDATE dream_units SET requested_at = NULL, reason = NULL, lease_owner = NULL, \
                   lease_until = NULL, last_error = NULL, last_error_at = NULL, \
                   last_dream_at = now(), explicit_at_last_dream = ( \
                     SELECT count(*) FROM conclusions WHERE workspace_name = $2 \
                       AND observer = $3 AND observed = $4 AND level = 'explicit' \
                       AND deleted_at IS NULL) \
                 WHERE id = $1",
                [
                    claim.unit_id.into(),
                    claim.workspace.clone().into(),
                    claim.observer.clone().into(),
                    claim.observed.clone().into(),
                ],
            ))
            .await?;
            if !out.new_ids.is_empty() {
                webhook::outbox::emit_conclusions(&*txn, &claim.workspace, &out.new_ids).await?;
                let notice = Notice::Conclusion {
                    w: claim.workspace.clone(),
                    ids: out.new_ids.clone(),
                };
                events::publish(&*txn, &notice).await?;
            }
            Ok(out)
        })
        .await
    }

    /// Records that the claim's dream failed: the unit stops (its request stays) until
    /// [`Store::retry_failed_dreams`]. A claim that no longer holds the unit changes nothing.
    #[tracing::instrument(name = "store.fail_dream", level = "debug", skip_all)]
    pub async fn fail_dream(&self, claim: &DreamClaim, message: &str) -> StoreResult<()> {
        claim.lease().fail(self.db(), message).await
    }

    /// Lets the workspace's failed dreams be claimed again; returns how many.
    #[tracing::instrument(name = "store.retry_failed_dreams", level = "debug", skip_all)]
    pub async fn retry_failed_dreams(&self, workspace: &str) -> StoreResult<i64> {
        let done = self
            .db()
            .execute_raw(stmt(
                "UPDATE dream_units SET failed_at = NULL \
                 WHERE workspace_name = $1 AND failed_at IS NOT NULL",
                [workspace.into()],
            ))
            .await?;
        Ok(done.rows_affected() as i64)
    }

    /// The workspace's dreams by state, and the newest failure of a pair not dreamt since.
    #[tracing::instrument(name = "store.dream_status", level = "debug", skip_all)]
    pub async fn dream_status(&self, workspace: &str) -> StoreResult<DreamStatus> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "SELECT \
                   count(*) FILTER (WHERE requested_at IS NOT NULL AND failed_at IS NULL \
                     AND NOT COALESCE(lease_until > now(), false)) AS pending, \
                   count(*) FILTER (WHERE requested_at IS NOT NULL AND failed_at IS NULL \
                     AND lease_until > now()) AS in_progress, \
                   count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed, \
                   (array_agg(last_error ORDER BY last_error_at DESC) \
                     FILTER (WHERE last_error IS NOT NULL))[1] AS last_error, \
                   max(last_error_at) AS last_error_at \
                 FROM dream_units WHERE workspace_name = $1",
                [workspace.into()],
            ))
            .await?;
        let mut status = DreamStatus::default();
        if let Some(r) = row {
            status.pending = r.try_get("", "pending")?;
            status.in_progress = r.try_get("", "in_progress")?;
            status.failed = r.try_get("", "failed")?;
            let message: Option<String> = r.try_get("", "last_error")?;
            let at: Option<DateTime<Utc>> = r.try_get("", "last_error_at")?;
            status.last_error = message.zip(at);
        }
        Ok(status)
    }
}

impl DreamClaim {
    fn lease(&self) -> Lease<'_> {
        Lease {
            table: "dream_units",
            what: "dream unit",
            unit_id: self.unit_id,
            owner: &self.owner,
        }
    }
}

/// Makes sure the claim still holds its unit, and keeps it until the transaction ends; else
/// `Conflict`. Takes the same per-pair lock as a deriver batch, so a dream and a batch of the
/// same pair never write at once.
async fn hold(txn: &DatabaseTransaction, claim: &DreamClaim) -> StoreResult<()> {
    lease::lock_pair(txn, &claim.workspace, &claim.observer, &claim.observed).await?;
    claim.lease().hold(txn).await
}
