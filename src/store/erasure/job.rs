//! A peer's erasure as a durable job: one row in `erasure_jobs` holds its phase and counts, and
//! each step erases one batch and advances the row in the same transaction, so a crash loses at
//! most the batch in flight and running the job again continues where it stopped.

use sea_orm::{ConnectionTrait, DatabaseTransaction, EntityTrait};

use super::graph::{Erased, erase_messages, ids, prune};
use crate::entity::erasure_job::{self, Phase};
use crate::store::{Store, StoreError, StoreResult, TxOptions, new_id, stmt};

pub type ErasureJob = erasure_job::Model;

/// Messages (or conclusions) one step erases: one transaction each, so locks and undo stay small
/// however much the peer said.
pub const DEFAULT_ERASURE_BATCH: u64 = 1000;

/// What a running erasure reports after each step (the CLI draws a bar from it).
pub trait ErasureProgress: Sync {
    fn advanced(&self, _job: &ErasureJob) {}
}

impl ErasureProgress for () {}

impl Store {
    /// Starts erasing the peer, or returns its unfinished job (whose `keep_observed` stands):
    /// the job is recorded, nothing is erased yet ([`Store::run_erasure`] does it). NOT_FOUND
    /// when the peer does not exist and no job of it is unfinished.
    #[tracing::instrument(name = "store.start_peer_erasure", level = "debug", skip_all)]
    pub async fn start_peer_erasure(
        &self,
        workspace: &str,
        peer: &str,
        keep_observed: bool,
    ) -> StoreResult<ErasureJob> {
        self.transaction(TxOptions::default(), |txn| async move {
            if let Some(job) = unfinished(&*txn, workspace, peer).await? {
                return Ok(job);
            }
            let exists = txn
                .query_one_raw(stmt(
                    "SELECT 1 AS one FROM peers WHERE workspace_name = $1 AND name = $2",
                    [workspace.into(), peer.into()],
                ))
                .await?
                .is_some();
            if !exists {
                return Err(StoreError::not_found("peer", peer));
            }
            let inserted = erasure_job::Entity::find()
                .from_raw_sql(stmt(
                    "INSERT INTO erasure_jobs (id, workspace_name, peer_name, keep_observed, \
                       messages_total) \
                     SELECT $1, $2, $3, $4, count(*) FROM messages \
                     WHERE workspace_name = $2 AND peer_name = $3 \
                     ON CONFLICT (workspace_name, peer_name) WHERE phase <> 'done' DO NOTHING \
                     RETURNING *",
                    [
                        new_id().into(),
                        workspace.into(),
                        peer.into(),
                        keep_observed.into(),
                    ],
                ))
                .one(&*txn)
                .await?;
            match inserted {
                Some(job) => Ok(job),
                // Started by someone else since the first look.
                None => unfinished(&*txn, workspace, peer)
                    .await?
                    .ok_or_else(|| StoreError::Internal("erasure job vanished".into())),
            }
        })
        .await
    }

    /// The erasure job `id` of the workspace, None when there is none.
    #[tracing::instrument(name = "store.erasure_job", level = "debug", skip_all)]
    pub async fn erasure_job(&self, workspace: &str, id: &str) -> StoreResult<Option<ErasureJob>> {
        Ok(erasure_job::Entity::find()
            .from_raw_sql(stmt(
                "SELECT * FROM erasure_jobs WHERE workspace_name = $1 AND id = $2",
                [workspace.into(), id.into()],
            ))
            .one(self.db())
            .await?)
    }

    /// Jobs not done (left by a crash or a stopped server), oldest first.
    pub async fn unfinished_erasures(&self) -> StoreResult<Vec<ErasureJob>> {
        Ok(erasure_job::Entity::find()
            .from_raw_sql(stmt(
                "SELECT * FROM erasure_jobs WHERE phase <> 'done' ORDER BY created_at",
                [],
            ))
            .all(self.db())
            .await?)
    }

    /// Runs the job to its end, a step at a time, reporting each; returns it done.
    #[tracing::instrument(name = "store.run_erasure", level = "debug", skip_all)]
    pub async fn run_erasure(
        &self,
        id: &str,
        batch: u64,
        progress: &dyn ErasureProgress,
    ) -> StoreResult<ErasureJob> {
        loop {
            let job = self.erasure_step(id, batch).await?;
            progress.advanced(&job);
            if job.phase == Phase::Done {
                return Ok(job);
            }
        }
    }

    /// Runs the job in the background ([`Store::run_erasure`]); a failure is logged, and running
    /// the job again continues it.
    pub fn spawn_erasure(&self, id: String) {
        let store = self.clone();
        tokio::spawn(async move {
            if let Err(error) = store.run_erasure(&id, DEFAULT_ERASURE_BATCH, &()).await {
                tracing::error!(job = %id, %error, "erasure stopped; run it again to continue");
            }
        });
    }

    /// One step of the job: at most `batch` rows of its phase erased (the cascade they start in
    /// the reasoning graph included), and the job advanced, in one transaction.
    #[tracing::instrument(name = "store.erasure_step", level = "debug", skip_all)]
    pub async fn erasure_step(&self, id: &str, batch: u64) -> StoreResult<ErasureJob> {
        let batch = batch.max(1);
        self.transaction(TxOptions::default(), |txn| async move {
            let job = erasure_job::Entity::find()
                .from_raw_sql(stmt(
                    "SELECT * FROM erasure_jobs WHERE id = $1 FOR UPDATE",
                    [id.into()],
                ))
                .one(&*txn)
                .await?
                .ok_or_else(|| StoreError::not_found("erasure job", id))?;
            let (phase, erased) = match job.phase {
                Phase::Done => return Ok(job),
                Phase::Queue => (dequeue(&txn, &job, batch).await?, Erased::default()),
                Phase::Messages => {
                    let ids = message_ids(&*txn, &job, batch).await?;
                    let erased = erase_messages(&txn, &job.workspace_name, &ids).await?;
                    let more = ids.len() as u64 == batch;
                    (
                        if more {
                            Phase::Messages
                        } else {
                            Phase::Conclusions
                        },
                        erased,
                    )
                }
                Phase::Conclusions => {
                    let (erased, more) = conclusions(&txn, &job, batch).await?;
                    (
                        if more {
                            Phase::Conclusions
                        } else {
                            Phase::Peer
                        },
                        erased,
                    )
                }
                Phase::Peer => finish(&txn, &job, batch).await?,
            };
            erasure_job::Entity::find()
                .from_raw_sql(stmt(
                    "UPDATE erasure_jobs SET phase = $2, \
                       messages_erased = messages_erased + $3, \
                       conclusions_erased = conclusions_erased + $4, updated_at = now(), \
                       finished_at = CASE WHEN $2 = 'done' THEN now() END \
                     WHERE id = $1 RETURNING *",
                    [
                        id.into(),
                        sea_orm::ActiveEnum::to_value(&phase).into(),
                        (erased.messages as i64).into(),
                        (erased.conclusions as i64).into(),
                    ],
                ))
                .one(&*txn)
                .await?
                .ok_or_else(|| StoreError::not_found("erasure job", id))
        })
        .await
    }
}

async fn unfinished<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    peer: &str,
) -> StoreResult<Option<ErasureJob>> {
    Ok(erasure_job::Entity::find()
        .from_raw_sql(stmt(
            "SELECT * FROM erasure_jobs \
             WHERE workspace_name = $1 AND peer_name = $2 AND phase <> 'done' FOR UPDATE",
            [workspace.into(), peer.into()],
        ))
        .one(db)
        .await?)
}

/// Takes a batch of the deriver's queued work by or about the peer off the queue, so nothing
/// more is drawn from what is about to go; the units follow once their items are gone.
async fn dequeue(txn: &DatabaseTransaction, job: &ErasureJob, batch: u64) -> StoreResult<Phase> {
    let done = txn
        .execute_raw(stmt(
            "DELETE FROM deriver_items WHERE id IN ( \
               SELECT i.id FROM deriver_items i JOIN deriver_units u ON u.id = i.unit_id \
               WHERE u.workspace_name = $1 AND (u.observer = $2 OR u.observed = $2) LIMIT $3)",
            [
                job.workspace_name.clone().into(),
                job.peer_name.clone().into(),
                (batch as i64).into(),
            ],
        ))
        .await?;
    if done.rows_affected() == batch {
        return Ok(Phase::Queue);
    }
    delete_units(txn, job).await?;
    Ok(Phase::Messages)
}

async fn delete_units(txn: &DatabaseTransaction, job: &ErasureJob) -> StoreResult<()> {
    txn.execute_raw(stmt(
        "DELETE FROM deriver_units WHERE workspace_name = $1 AND (observer = $2 OR observed = $2)",
        [
            job.workspace_name.clone().into(),
            job.peer_name.clone().into(),
        ],
    ))
    .await?;
    Ok(())
}

/// Up to `limit` of the peer's messages (internal ids).
async fn message_ids<C: ConnectionTrait>(
    db: &C,
    job: &ErasureJob,
    limit: u64,
) -> StoreResult<Vec<i64>> {
    let sql = "SELECT id FROM messages WHERE workspace_name = $1 AND peer_name = $2 \
               ORDER BY id LIMIT $3";
    let values = [
        job.workspace_name.clone().into(),
        job.peer_name.clone().into(),
        (limit as i64).into(),
    ];
    ids(db, stmt(sql, values)).await
}

/// One batch of the peer's conclusions: those about it are deleted, with their consequences;
/// those it drew about others are deleted too, or, with `keep_observed`, handed over. Returns
/// what was erased and whether a full batch was found (there may be more).
async fn conclusions(
    txn: &DatabaseTransaction,
    job: &ErasureJob,
    batch: u64,
) -> StoreResult<(Erased, bool)> {
    let (ws, peer) = (&job.workspace_name, &job.peer_name);
    let mut seeds = Vec::new();
    let mut handled = 0;
    if job.keep_observed {
        let (moved, merged) = hand_over(txn, ws, peer, batch).await?;
        handled += moved + merged.len() as u64;
        seeds.extend(merged);
    }
    let sql = "SELECT id FROM conclusions WHERE workspace_name = $1 \
                 AND (observed = $2 OR (observer = $2 AND NOT $3)) \
               ORDER BY id LIMIT $4";
    let values = [
        ws.clone().into(),
        peer.clone().into(),
        job.keep_observed.into(),
        (batch as i64).into(),
    ];
    let own: Vec<String> = ids(txn, stmt(sql, values)).await?;
    let more = own.len() as u64 == batch || handled == batch;
    seeds.extend(own);
    let conclusions = prune(txn, ws, &[], &seeds).await?;
    Ok((
        Erased {
            messages: 0,
            conclusions,
        },
        more,
    ))
}

/// `keep_observed`: up to `batch` conclusions the peer drew about others become the observed
/// peer's own (observer = observed), their vectors cleared (they were made from a text naming the
/// erased peer; `reembed` makes new ones). A live derived one whose content the observed peer
/// already holds is merged into that one instead: its count added, its citations moved to it.
/// Returns how many were handed over, and the merged ones (still to delete).
async fn hand_over(
    txn: &DatabaseTransaction,
    workspace: &str,
    peer: &str,
    batch: u64,
) -> StoreResult<(u64, Vec<String>)> {
    let rows = txn
        .query_all_raw(stmt(
            "SELECT m.id, m.times_derived, s.id AS survivor FROM ( \
               SELECT id, observed, content, level, deleted_at, times_derived FROM conclusions \
               WHERE workspace_name = $1 AND observer = $2 AND observed <> $2 \
               ORDER BY id LIMIT $3 FOR UPDATE) m \
             LEFT JOIN LATERAL ( \
               SELECT s.id FROM conclusions s \
               WHERE s.workspace_name = $1 AND s.observer = m.observed AND s.observed = m.observed \
                 AND md5(s.content) = md5(m.content) AND s.deleted_at IS NULL \
                 AND s.level <> 'explicit' \
                 AND m.deleted_at IS NULL AND m.level <> 'explicit' \
               LIMIT 1) s ON true",
            [workspace.into(), peer.into(), (batch as i64).into()],
        ))
        .await?;
    let mut moved = Vec::new();
    let mut merged = Vec::new();
    for row in rows {
        let id: String = row.try_get("", "id")?;
        match row.try_get::<Option<String>>("", "survivor")? {
            None => moved.push(id),
            Some(survivor) => {
                let times: i32 = row.try_get("", "times_derived")?;
                merge(txn, workspace, &id, &survivor, times).await?;
                merged.push(id);
            }
        }
    }
    if !moved.is_empty() {
        txn.execute_raw(stmt(
            "UPDATE conclusions SET observer = observed, embedding = NULL \
             WHERE workspace_name = $1 AND id = ANY($2::text[])",
            [workspace.into(), moved.clone().into()],
        ))
        .await?;
    }
    Ok((moved.len() as u64, merged))
}

/// Moves `old`'s weight and citations to `survivor` (each citing row citing it once, never
/// itself).
async fn merge(
    txn: &DatabaseTransaction,
    workspace: &str,
    old: &str,
    survivor: &str,
    times: i32,
) -> StoreResult<()> {
    txn.execute_raw(stmt(
        "UPDATE conclusions SET times_derived = times_derived + $3 \
         WHERE workspace_name = $1 AND id = $2",
        [workspace.into(), survivor.into(), times.into()],
    ))
    .await?;
    txn.execute_raw(stmt(
        "UPDATE conclusions c SET source_ids = ( \
           SELECT array_agg(d.id ORDER BY d.first) FROM ( \
             SELECT u.id, min(u.ord) AS first \
             FROM unnest(array_replace(c.source_ids, $2, $3)) WITH ORDINALITY AS u(id, ord) \
             WHERE u.id <> c.id GROUP BY u.id) d) \
         WHERE c.workspace_name = $1 AND c.source_ids @> ARRAY[$2]::text[]",
        [workspace.into(), old.into(), survivor.into()],
    ))
    .await?;
    Ok(())
}

/// The last step, with the peer's row locked so nothing new can name it: what was written by or
/// about it since its phase ran (at most a batch; more sends the job back to that phase), other
/// peers' cards of it, and the peer (its memberships, cards and queue go with it).
async fn finish(
    txn: &DatabaseTransaction,
    job: &ErasureJob,
    batch: u64,
) -> StoreResult<(Phase, Erased)> {
    let (ws, peer) = (&job.workspace_name, &job.peer_name);
    let locked = txn
        .query_one_raw(stmt(
            "SELECT 1 AS one FROM peers WHERE workspace_name = $1 AND name = $2 FOR UPDATE",
            [ws.clone().into(), peer.clone().into()],
        ))
        .await?
        .is_some();
    if !locked {
        return Ok((Phase::Done, Erased::default()));
    }
    let ids = message_ids(txn, job, batch + 1).await?;
    if ids.len() as u64 > batch {
        return Ok((Phase::Messages, Erased::default()));
    }
    let mut erased = erase_messages(txn, ws, &ids).await?;
    let (own, more) = conclusions(txn, job, batch).await?;
    erased.conclusions += own.conclusions;
    if more {
        return Ok((Phase::Conclusions, erased));
    }
    delete_units(txn, job).await?;
    txn.execute_raw(stmt(
        "UPDATE peers SET internal_metadata = internal_metadata #- ARRAY['peer_cards', $2] \
         WHERE workspace_name = $1 AND internal_metadata->'peer_cards' ? $2",
        [ws.clone().into(), peer.clone().into()],
    ))
    .await?;
    txn.execute_raw(stmt(
        "DELETE FROM peers WHERE workspace_name = $1 AND name = $2",
        [ws.clone().into(), peer.clone().into()],
    ))
    .await?;
    Ok((Phase::Done, erased))
}
