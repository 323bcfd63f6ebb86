//! The deriver's queue, in PostgreSQL.
//!
//! A *work unit* is (session, observer, observed): the messages of `observed` in the session that
//! `observer` has yet to learn from. `createMessages` queues each new message, in its own
//! transaction, for every observer the observation rules give it ([`enqueue`]). A worker claims
//! the oldest ready unit with `FOR UPDATE SKIP LOCKED` and takes a lease on it; the lease, not a
//! row lock, is what it holds while it calls the LLM, so a worker that dies only delays its unit
//! until the lease runs out. Everything a batch produces is written in one transaction that first
//! checks the lease is still the worker's ([`Store::complete_batch`]): a unit's messages have
//! their effects committed once, by one worker, in `seq_in_session` order.
//!
//! A unit whose batch failed (the LLM could not be reached, or its answer could not be used) stops
//! until `retryFailedDerivations`, so later messages never overtake earlier ones; the failure is
//! visible in `deriverStatus`, the metrics and the log.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseTransaction};

use super::conclusion::Conclusion;
pub use super::conclusion::derive::{BatchOutcome, NewDerived, NewFact, Premise};
use super::conclusion::derive::{Pair, record_batch};
use super::events::{self, Notice};
use super::lease::{self, FAILED, Lease};
use super::peer_card::{self, NewCardEntry};
use super::vectors::{FlatVectors, nth_vector};
use super::webhook::{self, EventType};
use super::{Store, StoreResult, TxOptions, columns, new_id, stmt};
use crate::entity::conclusion;

/// Queues the messages `ids` (just inserted in `txn`) for every observer the observation rules
/// give them:
/// - a sender whose effective `observe_me` is false is observed by nobody. Effective: the
///   membership's `observe_me` when set, else the peer configuration's `observe_me` when set,
///   else true;
/// - otherwise the sender observes itself, and so does every other active member whose
///   membership has `observe_others: true`.
///
/// One statement: the units are upserted (pending tokens added) and the items inserted.
pub(crate) async fn enqueue<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
    ids: &[i64],
) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    db.execute_raw(stmt(
        "WITH pairs AS ( \
           SELECT m.id AS message_id, m.seq_in_session, m.token_count, o.observer, \
                  m.peer_name AS observed \
           FROM messages m \
           JOIN peers p ON p.workspace_name = m.workspace_name AND p.name = m.peer_name \
           LEFT JOIN session_peers sp ON sp.workspace_name = m.workspace_name \
             AND sp.session_name = m.session_name AND sp.peer_name = m.peer_name \
           CROSS JOIN LATERAL ( \
             SELECT m.peer_name AS observer \
             UNION \
             SELECT o.peer_name FROM session_peers o \
             WHERE o.workspace_name = m.workspace_name AND o.session_name = m.session_name \
               AND o.left_at IS NULL AND o.peer_name <> m.peer_name \
               AND (o.configuration->>'observe_others')::boolean IS TRUE \
           ) o \
           WHERE m.id = ANY($3::bigint[]) \
             AND COALESCE((sp.configuration->>'observe_me')::boolean, \
                          (p.configuration->>'observe_me')::boolean, true) \
         ), \
         units AS ( \
           INSERT INTO deriver_units AS u (workspace_name, session_name, observer, observed, \
             pending_tokens, oldest_at) \
           SELECT $1, $2, observer, observed, sum(greatest(token_count, 1)), now() \
           FROM pairs GROUP BY observer, observed \
           ON CONFLICT (workspace_name, session_name, observer, observed) DO UPDATE SET \
             pending_tokens = u.pending_tokens + EXCLUDED.pending_tokens, \
             oldest_at = COALESCE(u.oldest_at, EXCLUDED.oldest_at) \
           RETURNING id, observer, observed \
         ) \
         INSERT INTO deriver_items (unit_id, message_id, seq_in_session, token_count) \
         SELECT u.id, p.message_id, p.seq_in_session, greatest(p.token_count, 1) \
         FROM pairs p JOIN units u ON u.observer = p.observer AND u.observed = p.observed",
        [workspace.into(), session.into(), ids.to_vec().into()],
    ))
    .await?;
    Ok(())
}

/// When a unit is ready, and how much one batch takes.
#[derive(Clone, Copy, Debug)]
pub struct ClaimRules {
    /// Ready at this many pending tokens...
    pub ready_tokens: i64,
    /// ...or when its oldest pending message has waited this long.
    pub ready_after: Duration,
    /// Most tokens of messages in one batch (at least one message is taken).
    pub max_batch_tokens: i64,
    /// How long the claim is the worker's.
    pub lease: Duration,
}

/// A unit a worker holds, and the batch it is to process.
#[derive(Clone, Debug)]
pub struct Claim {
    pub unit_id: i64,
    /// Unique to this claim: completing needs it.
    pub owner: String,
    pub workspace: String,
    pub session: String,
    pub observer: String,
    pub observed: String,
    /// Queue items of the batch, in seq order.
    pub item_ids: Vec<i64>,
    /// The batch's messages (internal ids), in seq order.
    pub message_ids: Vec<i64>,
    /// The batch's first and last seq.
    pub first_seq: i64,
    pub last_seq: i64,
    pub tokens: i64,
}

/// `deriverStatus` of a workspace, in queued messages (one per message and observer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStatus {
    pub pending: i64,
    pub in_progress: i64,
    pub failed: i64,
    pub last_error: Option<QueueError>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueError {
    pub message: String,
    pub at: DateTime<Utc>,
    pub session: String,
}

impl Store {
    /// Claims the oldest ready unit no live lease holds, with its next batch (seq order, cut at
    /// `max_batch_tokens`). `None` when nothing is ready.
    pub async fn claim_unit(&self, worker: &str, rules: ClaimRules) -> StoreResult<Option<Claim>> {
        self.transaction(TxOptions::default(), |txn| async move {
            let Some(unit) = txn
            .query_one_raw(stmt(
                "SELECT id, workspace_name, session_name, observer, observed FROM deriver_units \
                 WHERE pending_tokens > 0 AND failed_at IS NULL \
                   AND (lease_until IS NULL OR lease_until < now()) \
                   AND (pending_tokens >= $1 OR oldest_at <= now() - make_interval(secs => $2)) \
                 ORDER BY oldest_at LIMIT 1 FOR UPDATE SKIP LOCKED",
                [
                    rules.ready_tokens.into(),
                    rules.ready_after.as_secs_f64().into(),
                ],
            ))
            .await?
        else {
            return Ok(None);
        };
            let unit_id: i64 = unit.try_get("", "id")?;
            let items = txn
                .query_all_raw(stmt(
                    "SELECT id, message_id, seq_in_session, token_count FROM deriver_items \
                 WHERE unit_id = $1 ORDER BY seq_in_session LIMIT 1000",
                    [unit_id.into()],
                ))
                .await?;
            let mut claim = Claim {
                unit_id,
                owner: format!("{worker}:{}", new_id()),
                workspace: unit.try_get("", "workspace_name")?,
                session: unit.try_get("", "session_name")?,
                observer: unit.try_get("", "observer")?,
                observed: unit.try_get("", "observed")?,
                item_ids: Vec::new(),
                message_ids: Vec::new(),
                first_seq: 0,
                last_seq: 0,
                tokens: 0,
            };
            for item in items {
                let tokens = i64::from(item.try_get::<i32>("", "token_count")?);
                if !claim.item_ids.is_empty() && claim.tokens + tokens > rules.max_batch_tokens {
                    break;
                }
                let seq: i64 = item.try_get("", "seq_in_session")?;
                if claim.item_ids.is_empty() {
                    claim.first_seq = seq;
                }
                claim.last_seq = seq;
                claim.tokens += tokens;
                claim.item_ids.push(item.try_get("", "id")?);
                claim.message_ids.push(item.try_get("", "message_id")?);
            }
            if claim.item_ids.is_empty() {
                // Counters out of step with the items (cannot happen through this module): repair.
                txn.execute_raw(stmt(
                    "UPDATE deriver_units SET pending_tokens = 0, oldest_at = NULL WHERE id = $1",
                    [unit_id.into()],
                ))
                .await?;
                return Ok(None);
            }
            txn.execute_raw(stmt(
                "UPDATE deriver_units SET lease_owner = $2, \
               lease_until = now() + make_interval(secs => $3) WHERE id = $1",
                [
                    unit_id.into(),
                    claim.owner.clone().into(),
                    rules.lease.as_secs_f64().into(),
                ],
            ))
            .await?;
            txn.execute_raw(stmt(
                "UPDATE deriver_items SET claimed = true WHERE id = ANY($1::bigint[])",
                [claim.item_ids.clone().into()],
            ))
            .await?;
            Ok(Some(claim))
        })
        .await
    }

    /// Writes what a batch produced and takes its messages off the queue, in one transaction,
    /// if the claim still holds the unit (else `Conflict`, and nothing is written: the unit's
    /// new holder processes the batch).
    ///
    /// Each fact reinforces the live explicit conclusion of the same observer and observed with
    /// the same content, or one whose embedding is within `1 - dedup_similarity` cosine distance
    /// (`times_derived + 1`), or becomes a new explicit conclusion; either way it is linked to
    /// its messages. Derived conclusions go through the same upsert as `recordDerivedConclusion`,
    /// citing their live premises; one whose premises are all gone, or that would reinforce a
    /// conclusion its premises derive from (a cycle), is refused.
    pub async fn complete_batch(
        &self,
        claim: &Claim,
        facts: &[NewFact],
        derived: &[NewDerived],
        dedup_similarity: f64,
    ) -> StoreResult<BatchOutcome> {
        self.complete_batch_with_card(claim, facts, derived, dedup_similarity, None)
            .await
    }

    /// [`Store::complete_batch`], and with `card` the observer's card of the observed gets
    /// these deriver entries in place of its earlier ones (its client entries stay;
    /// [`super::peer_card`]), in the same transaction.
    #[tracing::instrument(name = "store.complete_batch", level = "debug", skip_all)]
    pub async fn complete_batch_with_card(
        &self,
        claim: &Claim,
        facts: &[NewFact],
        derived: &[NewDerived],
        dedup_similarity: f64,
        card: Option<&[NewCardEntry]>,
    ) -> StoreResult<BatchOutcome> {
        self.transaction(TxOptions::default(), |txn| async move {
            hold_unit(&txn, claim).await?;
            let pair = Pair {
                workspace: &claim.workspace,
                observer: &claim.observer,
                observed: &claim.observed,
                session: &claim.session,
            };
            let (mut out, new_ids) =
                record_batch(&txn, pair, facts, derived, dedup_similarity).await?;
            if let Some(entries) = card {
                let fact_ids: Vec<String> = out.facts.iter().map(|c| c.id.clone()).collect();
                let written = peer_card::write_derived(
                    &txn,
                    &claim.workspace,
                    &claim.observer,
                    &claim.observed,
                    entries,
                    &fact_ids,
                )
                .await?;
                out.card_entries = Some(written);
            }
            dequeue_batch(&txn, claim).await?;
            if !new_ids.is_empty() {
                webhook::outbox::emit_conclusions(&*txn, &claim.workspace, &new_ids).await?;
                let notice = Notice::Conclusion {
                    w: claim.workspace.clone(),
                    ids: new_ids,
                };
                events::publish(&*txn, &notice).await?;
            }
            queue_empty_event(&txn, claim).await?;
            Ok(out)
        })
        .await
    }

    /// Extends the claim's lease to `lease` from now (before another long LLM call). `Conflict`
    /// when the unit is no longer the claim's: its new holder does the work.
    pub async fn renew_lease(&self, claim: &Claim, lease: Duration) -> StoreResult<()> {
        claim.lease().renew(self.db(), lease).await
    }

    /// Records that the claim's batch failed: the unit stops (its messages stay queued) until
    /// [`Store::retry_failed_derivations`]. A claim that no longer holds the unit changes nothing.
    #[tracing::instrument(name = "store.fail_batch", level = "debug", skip_all)]
    pub async fn fail_batch(&self, claim: &Claim, message: &str) -> StoreResult<()> {
        self.db()
            .execute_raw(stmt(
                &format!(
                    "WITH u AS ( \
                       UPDATE deriver_units SET {FAILED} \
                       WHERE id = $1 AND lease_owner = $2 RETURNING id) \
                     UPDATE deriver_items SET claimed = false WHERE unit_id IN (SELECT id FROM u)"
                ),
                claim.lease().failure(message),
            ))
            .await?;
        Ok(())
    }

    /// Lets the workspace's failed units be claimed again, summary units too; returns how many
    /// queued messages (and summaries) that puts back.
    #[tracing::instrument(name = "store.retry_failed_derivations", level = "debug", skip_all)]
    pub async fn retry_failed_derivations(&self, workspace: &str) -> StoreResult<i64> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "WITH u AS ( \
                   UPDATE deriver_units SET failed_at = NULL \
                   WHERE workspace_name = $1 AND failed_at IS NOT NULL RETURNING id), \
                 su AS ( \
                   UPDATE summary_units SET failed_at = NULL, due_at = now() \
                   WHERE workspace_name = $1 AND failed_at IS NOT NULL RETURNING id) \
                 SELECT (SELECT count(*) FROM deriver_items WHERE unit_id IN (SELECT id FROM u)) \
                   + (SELECT count(*) FROM su) AS n",
                [workspace.into()],
            ))
            .await?;
        Ok(row.map(|r| r.try_get("", "n")).transpose()?.unwrap_or(0))
    }

    /// Queued messages of the workspace by state (one per message and observer), and the newest
    /// failure of a unit that has not completed a batch since.
    #[tracing::instrument(name = "store.deriver_status", level = "debug", skip_all)]
    pub async fn deriver_status(&self, workspace: &str) -> StoreResult<QueueStatus> {
        let counts = self
            .reader()
            .query_one_raw(stmt(
                "SELECT \
                   count(*) FILTER (WHERE u.failed_at IS NULL \
                     AND NOT (i.claimed AND u.lease_until > now())) AS pending, \
                   count(*) FILTER (WHERE u.failed_at IS NULL \
                     AND i.claimed AND u.lease_until > now()) AS in_progress, \
                   count(*) FILTER (WHERE u.failed_at IS NOT NULL) AS failed \
                 FROM deriver_units u JOIN deriver_items i ON i.unit_id = u.id \
                 WHERE u.workspace_name = $1",
                [workspace.into()],
            ))
            .await?;
        let mut status = QueueStatus::default();
        if let Some(r) = counts {
            status.pending = r.try_get("", "pending")?;
            status.in_progress = r.try_get("", "in_progress")?;
            status.failed = r.try_get("", "failed")?;
        }
        // Each due summary counts as one queued item.
        let summaries = self
            .reader()
            .query_one_raw(stmt(
                "SELECT \
                   count(*) FILTER (WHERE failed_at IS NULL \
                     AND NOT COALESCE(lease_until > now(), false)) AS pending, \
                   count(*) FILTER (WHERE failed_at IS NULL AND lease_until > now()) AS in_progress, \
                   count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed \
                 FROM summary_units WHERE workspace_name = $1 AND due_seq > done_seq",
                [workspace.into()],
            ))
            .await?;
        if let Some(r) = summaries {
            status.pending += r.try_get::<i64>("", "pending")?;
            status.in_progress += r.try_get::<i64>("", "in_progress")?;
            status.failed += r.try_get::<i64>("", "failed")?;
        }
        let last = self
            .db()
            .query_one_raw(stmt(
                "SELECT last_error, last_error_at, session_name FROM ( \
                   SELECT last_error, last_error_at, session_name FROM deriver_units \
                   WHERE workspace_name = $1 AND last_error IS NOT NULL \
                   UNION ALL \
                   SELECT last_error, last_error_at, session_name FROM summary_units \
                   WHERE workspace_name = $1 AND last_error IS NOT NULL) e \
                 ORDER BY last_error_at DESC LIMIT 1",
                [workspace.into()],
            ))
            .await?;
        if let Some(r) = last {
            status.last_error = Some(QueueError {
                message: r.try_get("", "last_error")?,
                at: r.try_get("", "last_error_at")?,
                session: r.try_get("", "session_name")?,
            });
        }
        Ok(status)
    }

    /// Queued messages across all workspaces that no failure holds back (for the progress log).
    pub async fn deriver_backlog(&self) -> StoreResult<i64> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "SELECT count(*) AS n FROM deriver_items i JOIN deriver_units u \
                   ON u.id = i.unit_id WHERE u.failed_at IS NULL",
                [],
            ))
            .await?;
        Ok(row.map(|r| r.try_get("", "n")).transpose()?.unwrap_or(0))
    }

    /// The live conclusions of `observer` about `observed` nearest to any of `vectors` (cosine),
    /// at most `limit`, nearest first; without vectors, the newest.
    #[tracing::instrument(name = "store.nearest_conclusions", level = "debug", skip_all)]
    pub async fn nearest_conclusions(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
        vectors: &[Vec<f32>],
        limit: i64,
    ) -> StoreResult<Vec<Conclusion>> {
        let columns = columns::list::<conclusion::Entity>("c");
        let base = "c.workspace_name = $1 AND c.observer = $2 AND c.observed = $3 \
            AND c.deleted_at IS NULL";
        let statement = if vectors.is_empty() {
            stmt(
                &format!(
                    "SELECT {columns} FROM conclusions c WHERE {base} \
                     ORDER BY c.created_at DESC, c.id LIMIT $4"
                ),
                [
                    workspace.into(),
                    observer.into(),
                    observed.into(),
                    limit.into(),
                ],
            )
        } else {
            let (flat, _) = FlatVectors::new(vectors.iter().map(|v| Some(v.as_slice())))?;
            let query = nth_vector("$5::real[]", "$6::int", "q.ord");
            stmt(
                &format!(
                    "SELECT {columns} FROM conclusions c \
                     CROSS JOIN LATERAL (SELECT min(c.embedding <=> {query}) AS d \
                       FROM generate_series(1, $7::bigint) AS q(ord)) near \
                     WHERE {base} AND c.embedding IS NOT NULL \
                     ORDER BY near.d, c.id LIMIT $4"
                ),
                [
                    workspace.into(),
                    observer.into(),
                    observed.into(),
                    limit.into(),
                    flat.values.into(),
                    flat.dims.into(),
                    (vectors.len() as i64).into(),
                ],
            )
        };
        use sea_orm::EntityTrait;
        Ok(conclusion::Entity::find()
            .from_raw_sql(statement)
            .all(self.reader())
            .await?)
    }

    /// The messages each conclusion was drawn from, for many (workspace, conclusion id) keys in
    /// one statement, in seq order.
    #[tracing::instrument(name = "store.source_messages", level = "debug", skip_all)]
    pub async fn source_messages(
        &self,
        keys: &[(String, String)],
    ) -> StoreResult<HashMap<(String, String), Vec<crate::store::message::Message>>> {
        use sea_orm::{EntityTrait, FromQueryResult};
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (ws, ids): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &format!(
                    "SELECT cm.conclusion_id, {} \
                     FROM unnest($1::text[], $2::text[]) AS k(w, i) \
                     JOIN conclusion_messages cm ON cm.conclusion_id = k.i \
                     JOIN messages m ON m.id = cm.message_id AND m.workspace_name = k.w \
                     ORDER BY m.session_name, m.seq_in_session",
                    columns::list::<crate::entity::message::Entity>("m")
                ),
                [ws.into(), ids.into()],
            ))
            .await?;
        let mut out: HashMap<(String, String), Vec<_>> = HashMap::new();
        for row in rows {
            let conclusion: String = row.try_get("", "conclusion_id")?;
            let m = <crate::entity::message::Entity as EntityTrait>::Model::from_query_result(
                &row, "",
            )?;
            out.entry((m.workspace_name.clone(), conclusion))
                .or_default()
                .push(m);
        }
        Ok(out)
    }
}

impl Claim {
    fn lease(&self) -> Lease<'_> {
        Lease {
            table: "deriver_units",
            what: "deriver unit",
            unit_id: self.unit_id,
            owner: &self.owner,
        }
    }
}

/// Honcho v3.0.12's `queue.empty`, when the batch just written left its unit with no queued
/// message: per unit (session, observer, observed), not per workspace, as Honcho sends it. Only
/// `representation` work is queued here (no summaries).
async fn queue_empty_event(txn: &DatabaseTransaction, claim: &Claim) -> StoreResult<()> {
    let left = txn
        .query_one_raw(stmt(
            "SELECT EXISTS (SELECT 1 FROM deriver_items WHERE unit_id = $1) AS remaining",
            [claim.unit_id.into()],
        ))
        .await?
        .map(|r| r.try_get::<bool>("", "remaining"))
        .transpose()?
        .unwrap_or(false);
    if left {
        return Ok(());
    }
    let data = serde_json::json!([{
        "workspace_id": claim.workspace,
        "queue_type": "representation",
        "session_id": claim.session,
        "observer": claim.observer,
        "observed": claim.observed,
    }]);
    webhook::outbox::emit(txn, &claim.workspace, EventType::QueueEmpty, data).await?;
    Ok(())
}

/// Makes sure the claim still holds its unit, and keeps it until the transaction ends; else
/// `Conflict`. Also serializes batches of one (observer, observed) from several sessions, so
/// their facts are deduplicated one batch at a time.
async fn hold_unit(txn: &DatabaseTransaction, claim: &Claim) -> StoreResult<()> {
    lease::lock_pair(txn, &claim.workspace, &claim.observer, &claim.observed).await?;
    claim.lease().hold(txn).await
}

/// Takes the batch's messages off the queue and releases the unit's lease; what is left queued
/// sets when the unit is next ready. A batch that got this far succeeded, so the unit's last
/// error is cleared: `deriverStatus.lastError` names only units that have not recovered (each
/// failure stays in the log and in `honcho_deriver_batches_total{outcome="failed"}`).
async fn dequeue_batch(txn: &DatabaseTransaction, claim: &Claim) -> StoreResult<()> {
    txn.execute_raw(stmt(
        "DELETE FROM deriver_items WHERE id = ANY($1::bigint[])",
        [claim.item_ids.clone().into()],
    ))
    .await?;
    txn.execute_raw(stmt(
        "UPDATE deriver_units SET \
           pending_tokens = greatest(pending_tokens - $2, 0), \
           oldest_at = (SELECT min(enqueued_at) FROM deriver_items WHERE unit_id = $1), \
           lease_owner = NULL, lease_until = NULL, last_error = NULL, last_error_at = NULL \
         WHERE id = $1",
        [claim.unit_id.into(), claim.tokens.into()],
    ))
    .await?;
    Ok(())
}
