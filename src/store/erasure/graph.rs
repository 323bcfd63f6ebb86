//! What an erasure does to the reasoning graph: a conclusion whose premises (the messages it was
//! drawn from, the conclusions it cites) are all gone goes too, transitively; one with a premise
//! left only loses the edge. Soft-deleted conclusions are rows like any other here: they count as
//! premises that exist, and they are pruned like live ones.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, DatabaseTransaction};

use crate::store::events::{self, Notice};
use crate::store::{StoreResult, stmt};

/// What one erasure removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Erased {
    pub messages: u64,
    pub conclusions: u64,
}

/// The one column `id` of the rows `statement` returns.
pub(crate) async fn ids<C: ConnectionTrait, T: sea_orm::TryGetable>(
    db: &C,
    statement: sea_orm::Statement,
) -> StoreResult<Vec<T>> {
    let rows = db.query_all_raw(statement).await?;
    Ok(rows
        .into_iter()
        .map(|r| r.try_get::<T>("", "id"))
        .collect::<Result<_, _>>()?)
}

/// The conclusions drawn from any of the `messages` (before they go: their links cascade with
/// them).
async fn drawn_from<C: ConnectionTrait>(db: &C, messages: &[i64]) -> StoreResult<Vec<String>> {
    let sql = "SELECT DISTINCT conclusion_id AS id FROM conclusion_messages \
               WHERE message_id = ANY($1::bigint[]) ORDER BY id";
    ids(db, stmt(sql, [messages.to_vec().into()])).await
}

/// Deletes the messages `ids` of the workspace and what only they supported, in the caller's
/// transaction. A deriver batch holding one of them loses its lease, so what the worker drew from
/// them is refused when it tries to write it; the rest of its unit is queued again.
pub(crate) async fn erase_messages(
    txn: &DatabaseTransaction,
    workspace: &str,
    ids: &[i64],
) -> StoreResult<Erased> {
    if ids.is_empty() {
        return Ok(Erased::default());
    }
    txn.execute_raw(stmt(
        "UPDATE deriver_units u SET \
           pending_tokens = greatest(u.pending_tokens - i.tokens, 0), \
           lease_owner = CASE WHEN i.claimed THEN NULL ELSE u.lease_owner END, \
           lease_until = CASE WHEN i.claimed THEN NULL ELSE u.lease_until END \
         FROM (SELECT unit_id, sum(token_count) AS tokens, bool_or(claimed) AS claimed \
               FROM deriver_items WHERE message_id = ANY($1::bigint[]) GROUP BY unit_id) i \
         WHERE u.id = i.unit_id",
        [ids.to_vec().into()],
    ))
    .await?;
    // Seqs are never reused: the session remembers the highest one erased.
    txn.execute_raw(stmt(
        "UPDATE sessions s SET internal_metadata = jsonb_set(s.internal_metadata, '{last_seq}', \
           to_jsonb(x.last)) \
         FROM (SELECT session_name, max(seq_in_session) AS last FROM messages \
               WHERE workspace_name = $1 AND id = ANY($2::bigint[]) GROUP BY session_name) x \
         WHERE s.workspace_name = $1 AND s.name = x.session_name \
           AND x.last > COALESCE((s.internal_metadata->>'last_seq')::bigint, 0)",
        [workspace.into(), ids.to_vec().into()],
    ))
    .await?;
    let linked = drawn_from(txn, ids).await?;
    let done = txn
        .execute_raw(stmt(
            "DELETE FROM messages WHERE workspace_name = $1 AND id = ANY($2::bigint[])",
            [workspace.into(), ids.to_vec().into()],
        ))
        .await?;
    let conclusions = prune(txn, workspace, &linked, &[]).await?;
    Ok(Erased {
        messages: done.rows_affected(),
        conclusions,
    })
}

/// Deletes the conclusions `seeds`, and those among `linked` left without a premise, then every
/// conclusion left without a premise by those deletions, and so on; citations of a deleted
/// conclusion are removed from the rest. Returns how many conclusions were deleted. Tells every
/// server's subscriptions to drop what they cached.
pub(crate) async fn prune(
    txn: &DatabaseTransaction,
    workspace: &str,
    linked: &[String],
    seeds: &[String],
) -> StoreResult<u64> {
    let mut frontier: Vec<String> = seeds.to_vec();
    frontier.extend(orphans_among(txn, workspace, linked).await?);
    let mut seen: HashSet<String> = HashSet::new();
    frontier.retain(|id| seen.insert(id.clone()));
    let mut deleted = 0;
    // Reasoning cycles are refused when conclusions are written; `seen` ends the walk anyway.
    while !frontier.is_empty() {
        let done = txn
            .execute_raw(stmt(
                "DELETE FROM conclusions WHERE workspace_name = $1 AND id = ANY($2::text[])",
                [workspace.into(), frontier.clone().into()],
            ))
            .await?;
        deleted += done.rows_affected();
        let rows = txn
            .query_all_raw(stmt(
                "UPDATE conclusions c SET source_ids = ( \
                   SELECT array_agg(s.id ORDER BY s.ord) \
                   FROM unnest(c.source_ids) WITH ORDINALITY AS s(id, ord) \
                   WHERE s.id <> ALL($2::text[])) \
                 WHERE c.workspace_name = $1 AND c.source_ids && $2::text[] \
                 RETURNING c.id, c.source_ids IS NULL \
                   AND NOT EXISTS (SELECT 1 FROM conclusion_messages m WHERE m.conclusion_id = c.id) \
                   AS orphan",
                [workspace.into(), frontier.into()],
            ))
            .await?;
        frontier = Vec::new();
        for row in rows {
            if row.try_get::<bool>("", "orphan")? {
                let id: String = row.try_get("", "id")?;
                if seen.insert(id.clone()) {
                    frontier.push(id);
                }
            }
        }
    }
    let notice = Notice::Erased {
        w: workspace.to_owned(),
    };
    events::publish(txn, &notice).await?;
    Ok(deleted)
}

/// The conclusions among `ids` that had a message premise and have no premise left.
async fn orphans_among<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    candidates: &[String],
) -> StoreResult<Vec<String>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let sql = "SELECT c.id FROM conclusions c \
               WHERE c.workspace_name = $1 AND c.id = ANY($2::text[]) \
                 AND COALESCE(cardinality(c.source_ids), 0) = 0 \
                 AND NOT EXISTS (SELECT 1 FROM conclusion_messages m WHERE m.conclusion_id = c.id) \
               ORDER BY c.id";
    ids(
        db,
        stmt(sql, [workspace.into(), candidates.to_vec().into()]),
    )
    .await
}
