//! A claim's lease on a unit of one of the work queues (deriver batches, summaries, dreams):
//! the unit's row holds `lease_owner` and `lease_until`, and only the claim named there may
//! renew, complete or fail it.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseTransaction};

use super::{StoreError, StoreResult, stmt};

/// The row a claim holds: its unit in `table`, leased to `owner`.
#[derive(Clone, Copy)]
pub(crate) struct Lease<'a> {
    /// The queue's table, `deriver_units`, `summary_units` or `dream_units`.
    pub table: &'static str,
    /// What the unit is called in an error (`deriver unit`).
    pub what: &'static str,
    pub unit_id: i64,
    pub owner: &'a str,
}

impl Lease<'_> {
    /// The error of a claim whose unit another worker holds now.
    pub fn lost(&self) -> StoreError {
        StoreError::Conflict(format!(
            "the lease on {} {} was lost to another worker",
            self.what, self.unit_id
        ))
    }

    /// Extends the lease to `lease` from now; `Conflict` when it is no longer the claim's.
    pub async fn renew(&self, db: &impl ConnectionTrait, lease: Duration) -> StoreResult<()> {
        let done = db
            .execute_raw(stmt(
                &format!(
                    "UPDATE {} SET lease_until = now() + make_interval(secs => $3) \
                     WHERE id = $1 AND lease_owner = $2",
                    self.table
                ),
                [
                    self.unit_id.into(),
                    self.owner.into(),
                    lease.as_secs_f64().into(),
                ],
            ))
            .await?;
        if done.rows_affected() == 0 {
            return Err(self.lost());
        }
        Ok(())
    }

    /// Stops the unit until its failures are retried, with `message` as its last error, and
    /// lets its lease go. A claim that no longer holds the unit changes nothing.
    pub async fn fail(&self, db: &impl ConnectionTrait, message: &str) -> StoreResult<()> {
        db.execute_raw(stmt(
            &format!(
                "UPDATE {} SET {FAILED} WHERE id = $1 AND lease_owner = $2",
                self.table
            ),
            self.failure(message),
        ))
        .await?;
        Ok(())
    }

    /// The values [`FAILED`] and the claim's row take: `$1` the unit, `$2` the owner, `$3` the
    /// error (its first 2000 characters).
    pub fn failure(&self, message: &str) -> [sea_orm::Value; 3] {
        let message: String = message.chars().take(2000).collect();
        [self.unit_id.into(), self.owner.into(), message.into()]
    }

    /// Makes sure the claim still holds its unit, and keeps the row locked until the
    /// transaction ends; else `Conflict`.
    pub async fn hold(&self, txn: &DatabaseTransaction) -> StoreResult<()> {
        let held = txn
            .query_one_raw(stmt(
                &format!(
                    "SELECT id FROM {} WHERE id = $1 AND lease_owner = $2 FOR NO KEY UPDATE",
                    self.table
                ),
                [self.unit_id.into(), self.owner.into()],
            ))
            .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(self.lost()),
        }
    }
}

/// What a failure sets on its unit (the error is `$3`).
pub(crate) const FAILED: &str = "failed_at = now(), last_error = $3, last_error_at = now(), \
                                 lease_owner = NULL, lease_until = NULL";

/// Waits for the deriver's lock on the pair (observer, observed) of `workspace`, held until the
/// transaction ends: batches of one pair from several sessions, and its dreams, write one at a
/// time, so their facts are deduplicated against each other.
pub(crate) async fn lock_pair(
    txn: &DatabaseTransaction,
    workspace: &str,
    observer: &str,
    observed: &str,
) -> StoreResult<()> {
    txn.execute_raw(stmt(
        "SELECT pg_advisory_xact_lock(hashtext($1), hashtext('deriver:' || $2 || ':' || $3))",
        [workspace.into(), observer.into(), observed.into()],
    ))
    .await?;
    Ok(())
}
