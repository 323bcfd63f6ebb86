//! What a dream writes into the reasoning graph of one observer and observed, in the caller's
//! transaction ([`crate::store::Store::complete_dream`]):
//!
//! - **merges**: a group of duplicate conclusions (same level) becomes its oldest member, the
//!   *survivor*. The survivor's `times_derived` grows by the others' counts, its sources take in
//!   theirs, it is linked to their messages, and every live conclusion that cited one of them cites
//!   the survivor instead. The others are soft-deleted with `merged_into` naming the survivor,
//!   and the survivor lists them (`merged_from`, GraphQL `Conclusion.mergedIds`): no citation, no
//!   message link and no count is lost, and nothing is deleted without a record of where it went.
//! - **contradictions**: a CONTRADICTION conclusion citing the conflicting conclusions (at least
//!   two). Nothing is deleted or changed: both stay, and the contradiction says they conflict.
//! - **inductions**: an INDUCTIVE conclusion citing premises drawn in at least two sessions.
//!
//! Every write keeps the graph acyclic: a merge whose redirected citations would close a cycle is
//! rolled back (to a savepoint) and counted as refused, and the new conclusions go through the
//! deriver's upsert and cycle check ([`super::derive`]).

use std::collections::{HashMap, HashSet};

use sea_orm::{ConnectionTrait, DatabaseTransaction, TransactionTrait};

use super::Conclusion;
use super::derive::{Whose, upsert_derived, would_cycle};
use crate::entity::conclusion::Level;
use crate::store::{StoreResult, stmt};

/// A conclusion a dream proposes: its content, the conclusions it cites, and its vector.
#[derive(Clone, Debug)]
pub struct Dreamt {
    pub content: String,
    pub premises: Vec<String>,
    pub embedding: Option<Vec<f32>>,
}

/// What a dream decided, over conclusions it was shown.
#[derive(Clone, Debug, Default)]
pub struct DreamPlan {
    /// Groups of duplicates (ids), each to become one conclusion.
    pub merges: Vec<Vec<String>>,
    pub contradictions: Vec<Dreamt>,
    pub inductions: Vec<Dreamt>,
}

/// What a dream wrote.
#[derive(Clone, Debug, Default)]
pub struct DreamOutcome {
    /// Each merge: the survivor and the conclusions merged into it.
    pub merged: Vec<(String, Vec<String>)>,
    /// CONTRADICTION conclusions written (new or reinforced).
    pub contradictions: Vec<Conclusion>,
    /// INDUCTIVE conclusions written (new or reinforced).
    pub inductions: Vec<Conclusion>,
    /// Proposals refused: fewer than two live members or premises, mixed levels, premises from
    /// one session (an induction), or a cycle.
    pub refused: usize,
    /// The new conclusions' ids.
    pub new_ids: Vec<String>,
}

/// Writes `plan` for `observer`'s conclusions about `observed` (module docs). Merges come first,
/// so a proposal citing a merged-away conclusion cites its survivor.
pub(crate) async fn apply(
    txn: &DatabaseTransaction,
    workspace: &str,
    observer: &str,
    observed: &str,
    plan: &DreamPlan,
) -> StoreResult<DreamOutcome> {
    let pair = Whose {
        workspace,
        observer,
        observed,
    };
    let mut out = DreamOutcome::default();
    let mut into: HashMap<String, String> = HashMap::new();
    for group in &plan.merges {
        match merge(txn, pair, group).await? {
            Some((kept, gone)) => {
                for g in &gone {
                    into.insert(g.clone(), kept.clone());
                }
                out.merged.push((kept, gone));
            }
            None => out.refused += 1,
        }
    }
    for (level, proposals) in [
        (Level::Contradiction, &plan.contradictions),
        (Level::Inductive, &plan.inductions),
    ] {
        for d in proposals {
            let Some(row) = record(txn, pair, level, d, &into).await? else {
                out.refused += 1;
                continue;
            };
            if row.times_derived == 1 {
                out.new_ids.push(row.id.clone());
            }
            match level {
                Level::Contradiction => out.contradictions.push(row),
                _ => out.inductions.push(row),
            }
        }
    }
    Ok(out)
}

/// The live conclusions of the pair among `ids`, oldest first: (id, level, session).
async fn live_members<C: ConnectionTrait>(
    db: &C,
    pair: Whose<'_>,
    ids: &[String],
    lock: bool,
) -> StoreResult<Vec<(String, String, Option<String>)>> {
    let rows = db
        .query_all_raw(stmt(
            &format!(
                "SELECT id, level, session_name FROM conclusions \
                 WHERE workspace_name = $1 AND observer = $2 AND observed = $3 \
                   AND id = ANY($4::text[]) AND deleted_at IS NULL \
                 ORDER BY created_at, id{}",
                if lock { " FOR UPDATE" } else { "" }
            ),
            [
                pair.workspace.into(),
                pair.observer.into(),
                pair.observed.into(),
                ids.to_vec().into(),
            ],
        ))
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok((
                r.try_get("", "id")?,
                r.try_get("", "level")?,
                r.try_get("", "session_name")?,
            ))
        })
        .collect()
}

/// Merges one group into its oldest live member (module docs), in a savepoint rolled back if
/// the result would hold a cycle. `None` when refused.
async fn merge(
    txn: &DatabaseTransaction,
    pair: Whose<'_>,
    group: &[String],
) -> StoreResult<Option<(String, Vec<String>)>> {
    let members = live_members(txn, pair, group, true).await?;
    if members.len() < 2 || members.iter().any(|m| m.1 != members[0].1) {
        return Ok(None);
    }
    let kept = members[0].0.clone();
    let gone: Vec<String> = members[1..].iter().map(|m| m.0.clone()).collect();
    let sp = txn.begin().await?;
    let ws = pair.workspace;
    // The survivor: the others' counts, their sources (a merged-away id read as the survivor,
    // never the survivor itself), and the record of what it absorbed.
    sp.execute_raw(stmt(
        "UPDATE conclusions k SET \
           times_derived = k.times_derived + ( \
             SELECT COALESCE(sum(g.times_derived), 0) FROM conclusions g \
             WHERE g.workspace_name = $1 AND g.id = ANY($3::text[]))::int, \
           source_ids = ( \
             SELECT array_agg(x.id ORDER BY x.first) FROM ( \
               SELECT CASE WHEN u.id = ANY($3::text[]) THEN $2 ELSE u.id END AS id, \
                      min(u.ord) AS first \
               FROM unnest(COALESCE(k.source_ids, '{}'::text[]) || COALESCE(( \
                 SELECT array_agg(t.s ORDER BY g.created_at, g.id, t.o) \
                 FROM conclusions g \
                 CROSS JOIN LATERAL unnest(g.source_ids) WITH ORDINALITY AS t(s, o) \
                 WHERE g.workspace_name = $1 AND g.id = ANY($3::text[])), '{}'::text[])) \
                 WITH ORDINALITY AS u(id, ord) \
               GROUP BY 1) x \
             WHERE x.id <> $2), \
           internal_metadata = jsonb_set(k.internal_metadata, '{merged_from}', \
             COALESCE(k.internal_metadata->'merged_from', '[]'::jsonb) || to_jsonb($3::text[])) \
         WHERE k.workspace_name = $1 AND k.id = $2",
        [ws.into(), kept.clone().into(), gone.clone().into()],
    ))
    .await?;
    // Every live conclusion citing a merged-away one cites the survivor instead, once.
    sp.execute_raw(stmt(
        "UPDATE conclusions c SET source_ids = ( \
           SELECT array_agg(d.id ORDER BY d.first) FROM ( \
             SELECT CASE WHEN u.id = ANY($3::text[]) THEN $2 ELSE u.id END AS id, \
                    min(u.ord) AS first \
             FROM unnest(c.source_ids) WITH ORDINALITY AS u(id, ord) GROUP BY 1) d \
           WHERE d.id <> c.id) \
         WHERE c.workspace_name = $1 AND c.source_ids && $3::text[] \
           AND c.deleted_at IS NULL AND c.id <> ALL($3::text[])",
        [ws.into(), kept.clone().into(), gone.clone().into()],
    ))
    .await?;
    sp.execute_raw(stmt(
        "INSERT INTO conclusion_messages (conclusion_id, message_id) \
         SELECT $1, message_id FROM conclusion_messages WHERE conclusion_id = ANY($2::text[]) \
         ON CONFLICT DO NOTHING",
        [kept.clone().into(), gone.clone().into()],
    ))
    .await?;
    sp.execute_raw(stmt(
        "UPDATE conclusions SET deleted_at = now(), \
           internal_metadata = internal_metadata || jsonb_build_object('merged_into', $2::text) \
         WHERE workspace_name = $1 AND id = ANY($3::text[])",
        [ws.into(), kept.clone().into(), gone.clone().into()],
    ))
    .await?;
    // Every new edge ends or starts at the survivor, so a new cycle would pass through it.
    let cycle = sp
        .query_one_raw(stmt(
            "WITH RECURSIVE up(id) AS ( \
               SELECT s FROM conclusions c CROSS JOIN LATERAL unnest(c.source_ids) AS s \
               WHERE c.workspace_name = $1 AND c.id = $2 \
               UNION \
               SELECT s FROM conclusions c JOIN up ON c.id = up.id \
               CROSS JOIN LATERAL unnest(c.source_ids) AS s \
               WHERE c.workspace_name = $1 AND c.deleted_at IS NULL) \
             SELECT EXISTS (SELECT 1 FROM up WHERE id = $2) AS cycle",
            [ws.into(), kept.clone().into()],
        ))
        .await?
        .map(|r| r.try_get::<bool>("", "cycle"))
        .transpose()?
        .unwrap_or(false);
    if cycle {
        sp.rollback().await?;
        tracing::warn!(survivor = %kept, "dream: a merge would close a reasoning cycle; refused");
        return Ok(None);
    }
    sp.commit().await?;
    Ok(Some((kept, gone)))
}

/// Records a CONTRADICTION or INDUCTIVE conclusion citing its live premises (a merged-away one
/// read as its survivor). `None` when refused: fewer than two live premises, an induction whose
/// premises come from fewer than two sessions, or a cycle.
async fn record(
    txn: &DatabaseTransaction,
    pair: Whose<'_>,
    level: Level,
    d: &Dreamt,
    into: &HashMap<String, String>,
) -> StoreResult<Option<Conclusion>> {
    let mut seen = HashSet::new();
    let premises: Vec<String> = d
        .premises
        .iter()
        .map(|p| into.get(p).unwrap_or(p).clone())
        .filter(|p| seen.insert(p.clone()))
        .collect();
    let members = live_members(txn, pair, &premises, false).await?;
    if members.len() < 2 {
        return Ok(None);
    }
    let sessions: HashSet<&str> = members.iter().filter_map(|m| m.2.as_deref()).collect();
    let session = match level {
        Level::Inductive if sessions.len() < 2 => return Ok(None),
        // A contradiction within one session belongs to it; across sessions, to none.
        Level::Contradiction if sessions.len() == 1 && members.iter().all(|m| m.2.is_some()) => {
            sessions.into_iter().next().map(str::to_owned)
        }
        _ => None,
    };
    // In the order the dream cited them.
    let sources: Vec<String> = premises
        .into_iter()
        .filter(|p| members.iter().any(|m| &m.0 == p))
        .collect();
    if would_cycle(txn, pair, &d.content, &sources).await? {
        tracing::warn!(content = %d.content, "dream: a conclusion would close a reasoning cycle; refused");
        return Ok(None);
    }
    let row = upsert_derived(
        txn,
        pair,
        session.as_deref(),
        level,
        &d.content,
        &sources,
        d.embedding.as_deref(),
    )
    .await?;
    Ok(Some(row))
}
