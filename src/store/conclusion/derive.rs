//! Every write of a derived conclusion, in one place: `recordDerivedConclusion`'s
//! ([`Store::record_derived_conclusion`]) and the deriver's batches ([`record_batch`], called by
//! the queue inside the transaction that checks the batch's lease). A derived conclusion is new,
//! or reinforces the live one with the same content, in one race-free upsert; an explicit fact
//! reinforces its duplicate (the same content, or a near vector) or is inserted.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, DatabaseTransaction, EntityTrait};

use super::{
    Conclusion, Level, cols, conclusion_content, require_peers_and_sessions, within_token_limit,
};
use crate::embed::conclusion_text;
use crate::entity::conclusion;
use crate::store::events::{self, Notice};
use crate::store::{Store, StoreError, StoreResult, TxOptions, columns, new_id, stmt};

/// Most source ids one derivation may cite.
pub const MAX_SOURCES: usize = 100;

/// A conclusion the deriver drew from others.
#[derive(Clone, Debug)]
pub struct DerivedConclusion {
    pub content: String,
    pub observer: String,
    pub observed: String,
    pub session: Option<String>,
    pub level: Level,
    pub source_ids: Vec<String>,
}

/// An explicit fact drawn from a batch.
#[derive(Clone, Debug)]
pub struct NewFact {
    pub content: String,
    pub embedding: Option<Vec<f32>>,
    /// Internal ids of the messages it comes from.
    pub message_ids: Vec<i64>,
}

/// A premise of a derived conclusion: one of the batch's facts, or an existing conclusion.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Premise {
    Fact(usize),
    Existing(String),
}

/// A derived conclusion the reasoning pass proposes.
#[derive(Clone, Debug)]
pub struct NewDerived {
    pub level: Level,
    pub content: String,
    pub embedding: Option<Vec<f32>>,
    pub premises: Vec<Premise>,
}

/// What a batch wrote.
#[derive(Clone, Debug, Default)]
pub struct BatchOutcome {
    /// The conclusion each fact became or reinforced, in fact order.
    pub facts: Vec<Conclusion>,
    pub facts_created: usize,
    pub facts_reinforced: usize,
    pub derived: Vec<Conclusion>,
    pub derived_created: usize,
    pub derived_reinforced: usize,
    /// Derived conclusions refused: no live premise left, or a cycle.
    pub refused: usize,
    /// Entries the observer's card of the observed now has from the deriver, when the batch
    /// rewrote them.
    pub card_entries: Option<usize>,
}

impl Store {
    /// The deriver's door: records a DEDUCTIVE, INDUCTIVE or CONTRADICTION conclusion drawn from
    /// `source_ids` (1..100 live conclusions of the same workspace). Deriving content again for
    /// the same observer and observed while the earlier row is live reinforces that row instead:
    /// `times_derived + 1`, its sources unioned (old ids first, then new ones, each once; a row
    /// never cites itself), level and session unchanged. One `INSERT … ON CONFLICT` over the
    /// partial unique index `uq_conclusions_derived_content` makes this race-free: concurrent
    /// identical derivations yield one row whose count includes every one of them. A
    /// reinforcement citing a source that derives from the row itself would close a reasoning
    /// cycle and is refused, as the deriver refuses it.
    #[tracing::instrument(name = "store.record_derived_conclusion", level = "debug", skip_all)]
    pub async fn record_derived_conclusion(
        &self,
        workspace: &str,
        input: DerivedConclusion,
    ) -> StoreResult<Conclusion> {
        if input.level == Level::Explicit {
            return Err(StoreError::invalid(
                "a derived conclusion's level must be DEDUCTIVE, INDUCTIVE or CONTRADICTION",
            ));
        }
        let content = conclusion_content("content", &input.content)?;
        let content = within_token_limit("content", vec![content])
            .await?
            .pop()
            .unwrap_or_default();
        let mut seen = HashSet::new();
        let sources: Vec<String> = input
            .source_ids
            .into_iter()
            .filter(|s| seen.insert(s.clone()))
            .collect();
        if sources.is_empty() || sources.len() > MAX_SOURCES {
            return Err(StoreError::invalid(format!(
                "sourceIds must name 1 to {MAX_SOURCES} distinct conclusions (got {})",
                sources.len()
            )));
        }
        let text = conclusion_text(&input.observer, &input.observed, &content);
        let embedding = self.embed_texts(&[text]).await.pop().flatten();

        let sessions: Vec<String> = input.session.iter().cloned().collect();
        let peers = [input.observer, input.observed];
        let (session, level) = (&input.session, input.level);
        let (content, sources, embedding, sessions, peers) =
            (&content, &sources, &embedding, &sessions, &peers);
        self.transaction(TxOptions::default(), |txn| async move {
            require_peers_and_sessions(&*txn, workspace, peers, sessions).await?;
            let live = live_ids(&*txn, workspace, sources).await?;
            if let Some(missing) = sources.iter().find(|s| !live.contains(*s)) {
                return Err(StoreError::not_found("conclusion", missing.clone()));
            }
            let whose = Whose {
                workspace,
                observer: &peers[0],
                observed: &peers[1],
            };
            if would_cycle(&*txn, whose, content, sources).await? {
                return Err(StoreError::invalid(
                    "sourceIds would close a reasoning cycle: one of them derives from the \
                     conclusion this content reinforces",
                ));
            }
            let row = upsert_derived(
                &*txn,
                whose,
                session.as_deref(),
                level,
                content,
                sources,
                embedding.as_deref(),
            )
            .await?;
            // A new conclusion is an event; a reinforcement (times_derived bumped) is not.
            if row.times_derived == 1 {
                let notice = Notice::Conclusion {
                    w: workspace.to_owned(),
                    ids: vec![row.id.clone()],
                };
                events::publish(&*txn, &notice).await?;
                let ids = [row.id.clone()];
                super::super::webhook::outbox::emit_conclusions(&*txn, workspace, &ids).await?;
            }
            Ok(row)
        })
        .await
    }
}

/// The ids among `ids` that are live conclusions of the workspace, in `ids` order.
pub(crate) async fn live_ids<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    ids: &[String],
) -> StoreResult<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let live: HashSet<String> = db
        .query_all_raw(stmt(
            "SELECT id FROM conclusions \
             WHERE workspace_name = $1 AND id = ANY($2::text[]) AND deleted_at IS NULL",
            [workspace.into(), ids.to_vec().into()],
        ))
        .await?
        .into_iter()
        .map(|r| r.try_get::<String>("", "id"))
        .collect::<Result<_, _>>()?;
    Ok(ids.iter().filter(|i| live.contains(*i)).cloned().collect())
}

/// The upsert behind [`Store::record_derived_conclusion`] and the deriver, in the caller's
/// transaction: a new live derived row, or the live row with the same (observer, observed,
/// content) reinforced (`times_derived + 1`, sources unioned, old ones first; a row never cites
/// itself). Sources are the caller's to check.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn upsert_derived<C: ConnectionTrait>(
    db: &C,
    whose: Whose<'_>,
    session: Option<&str>,
    level: Level,
    content: &str,
    sources: &[String],
    embedding: Option<&[f32]>,
) -> StoreResult<Conclusion> {
    conclusion::Entity::find()
        .from_raw_sql(stmt(
            &format!(
                "INSERT INTO conclusions (id, workspace_name, observer, observed, session_name, \
                   content, level, times_derived, source_ids, embedding) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8::text[], $9::real[]::vector) \
                 ON CONFLICT (workspace_name, observer, observed, md5(content)) \
                   WHERE deleted_at IS NULL AND level <> 'explicit' \
                 DO UPDATE SET \
                   times_derived = conclusions.times_derived + 1, \
                   source_ids = COALESCE(( \
                     SELECT array_agg(u.id ORDER BY u.first) FROM ( \
                       SELECT x.id, min(x.ord) AS first \
                       FROM unnest(COALESCE(conclusions.source_ids, '{{}}'::text[]) \
                                   || EXCLUDED.source_ids) WITH ORDINALITY AS x(id, ord) \
                       WHERE x.id <> conclusions.id \
                       GROUP BY x.id) u), conclusions.source_ids), \
                   embedding = COALESCE(conclusions.embedding, EXCLUDED.embedding) \
                 RETURNING {}",
                cols("")
            ),
            [
                new_id().into(),
                whose.workspace.into(),
                whose.observer.into(),
                whose.observed.into(),
                session.into(),
                content.into(),
                level.into(),
                sources.to_vec().into(),
                embedding.map(<[f32]>::to_vec).into(),
            ],
        ))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Internal("derived conclusion upsert returned no row".into()))
}

/// Who a batch's conclusions are by and about, and the session they were drawn in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair<'a> {
    pub workspace: &'a str,
    pub observer: &'a str,
    pub observed: &'a str,
    pub session: &'a str,
}

impl Pair<'_> {
    fn whose(&self) -> Whose<'_> {
        Whose {
            workspace: self.workspace,
            observer: self.observer,
            observed: self.observed,
        }
    }
}

/// Whose conclusions: `observer`'s about `observed`, in `workspace`.
#[derive(Clone, Copy)]
pub(crate) struct Whose<'a> {
    pub workspace: &'a str,
    pub observer: &'a str,
    pub observed: &'a str,
}

/// Writes what the deriver drew from one batch, in the caller's transaction: the facts first (each
/// reinforcing its duplicate or inserted, and linked to its messages), then the derived
/// conclusions, each through [`upsert_derived`] citing its live premises (a fact premise is the
/// conclusion that fact became). One left without a live premise, or that would close a cycle,
/// is refused and counted. Returns what was written and the ids of the new rows.
///
/// `recordDerivedConclusion` calls the same upsert and the same cycle check; there a cycle is the
/// caller's error (BAD_USER_INPUT) rather than a refusal counted in the batch.
pub(crate) async fn record_batch(
    txn: &DatabaseTransaction,
    pair: Pair<'_>,
    facts: &[NewFact],
    derived: &[NewDerived],
    dedup_similarity: f64,
) -> StoreResult<(BatchOutcome, Vec<String>)> {
    let mut out = BatchOutcome::default();
    let mut new_ids = record_facts(txn, pair, facts, dedup_similarity, &mut out).await?;
    new_ids.extend(record_derived(txn, pair, derived, &mut out).await?);
    Ok((out, new_ids))
}

/// Records the batch's facts in order (into `out`); returns the ids of the new conclusions.
async fn record_facts(
    txn: &DatabaseTransaction,
    pair: Pair<'_>,
    facts: &[NewFact],
    dedup_similarity: f64,
    out: &mut BatchOutcome,
) -> StoreResult<Vec<String>> {
    let mut new_ids = Vec::new();
    for fact in facts {
        let (row, created) = record_fact(txn, pair, fact, dedup_similarity).await?;
        if created {
            out.facts_created += 1;
            new_ids.push(row.id.clone());
        } else {
            out.facts_reinforced += 1;
        }
        out.facts.push(row);
    }
    Ok(new_ids)
}

/// Records the batch's derived conclusions (into `out`), each citing its live premises: a fact
/// premise is the conclusion that fact became (`out.facts`, so the facts come first). Refuses
/// those left without a live premise or that would close a cycle. Returns the new ids.
async fn record_derived(
    txn: &DatabaseTransaction,
    pair: Pair<'_>,
    derived: &[NewDerived],
    out: &mut BatchOutcome,
) -> StoreResult<Vec<String>> {
    let mut new_ids = Vec::new();
    for d in derived {
        let mut sources: Vec<String> = Vec::new();
        for p in &d.premises {
            let id = match p {
                Premise::Fact(i) => out.facts.get(*i).map(|c| c.id.clone()),
                Premise::Existing(id) => Some(id.clone()),
            };
            if let Some(id) = id
                && !sources.contains(&id)
            {
                sources.push(id);
            }
        }
        let sources = live_ids(txn, pair.workspace, &sources).await?;
        if sources.is_empty() || would_cycle(txn, pair.whose(), &d.content, &sources).await? {
            tracing::warn!(
                content = %d.content,
                "deriver: refused a derived conclusion (no live premise, or a cycle)"
            );
            out.refused += 1;
            continue;
        }
        let row = upsert_derived(
            txn,
            pair.whose(),
            Some(pair.session),
            d.level,
            &d.content,
            &sources,
            d.embedding.as_deref(),
        )
        .await?;
        if row.times_derived == 1 {
            out.derived_created += 1;
            new_ids.push(row.id.clone());
        } else {
            out.derived_reinforced += 1;
        }
        out.derived.push(row);
    }
    Ok(new_ids)
}

/// Stores one fact of a batch: reinforces its duplicate, or inserts it; links its messages.
/// Returns the row and whether it is new.
async fn record_fact(
    txn: &DatabaseTransaction,
    pair: Pair<'_>,
    fact: &NewFact,
    dedup_similarity: f64,
) -> StoreResult<(Conclusion, bool)> {
    use sea_orm::EntityTrait;
    let vector = fact.embedding.clone();
    let max_distance = (1.0 - dedup_similarity).max(0.0);
    let columns = columns::list::<conclusion::Entity>("");
    let duplicate = conclusion::Entity::find()
        .from_raw_sql(stmt(
            &format!(
                "UPDATE conclusions SET times_derived = times_derived + 1 WHERE id = ( \
                   SELECT id FROM conclusions \
                   WHERE workspace_name = $1 AND observer = $2 AND observed = $3 \
                     AND level = 'explicit' AND deleted_at IS NULL \
                     AND (md5(content) = md5($4) \
                          OR ($5::real[] IS NOT NULL \
                              AND embedding <=> $5::real[]::vector <= $6)) \
                   ORDER BY md5(content) = md5($4) DESC, embedding <=> $5::real[]::vector, id \
                   LIMIT 1) \
                 RETURNING {columns}"
            ),
            [
                pair.workspace.into(),
                pair.observer.into(),
                pair.observed.into(),
                fact.content.clone().into(),
                vector.clone().into(),
                max_distance.into(),
            ],
        ))
        .one(txn)
        .await?;
    let (row, created) = match duplicate {
        Some(row) => (row, false),
        None => {
            let row = conclusion::Entity::find()
                .from_raw_sql(stmt(
                    &format!(
                        "INSERT INTO conclusions (id, workspace_name, observer, observed, \
                           session_name, content, level, times_derived, embedding) \
                         VALUES ($1, $2, $3, $4, $5, $6, 'explicit', 1, $7::real[]::vector) \
                         RETURNING {columns}"
                    ),
                    [
                        new_id().into(),
                        pair.workspace.into(),
                        pair.observer.into(),
                        pair.observed.into(),
                        pair.session.into(),
                        fact.content.clone().into(),
                        vector.into(),
                    ],
                ))
                .one(txn)
                .await?
                .ok_or_else(|| StoreError::Internal("fact insert returned no row".into()))?;
            (row, true)
        }
    };
    if !fact.message_ids.is_empty() {
        txn.execute_raw(stmt(
            "INSERT INTO conclusion_messages (conclusion_id, message_id) \
             SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
            [row.id.clone().into(), fact.message_ids.clone().into()],
        ))
        .await?;
    }
    Ok((row, created))
}

/// Whether recording `content` from `sources` would close a cycle: it would reinforce a live
/// row (same observer, observed and content) that is itself among the sources or that one of the
/// sources derives from.
pub(crate) async fn would_cycle<C: ConnectionTrait>(
    db: &C,
    whose: Whose<'_>,
    content: &str,
    sources: &[String],
) -> StoreResult<bool> {
    let row = db
        .query_one_raw(stmt(
            "WITH RECURSIVE target AS ( \
               SELECT id FROM conclusions \
               WHERE workspace_name = $1 AND observer = $2 AND observed = $3 \
                 AND md5(content) = md5($4) AND deleted_at IS NULL AND level <> 'explicit' \
             ), down(id) AS ( \
               SELECT id FROM target \
               UNION \
               SELECT c.id FROM conclusions c JOIN down ON c.source_ids @> ARRAY[down.id] \
               WHERE c.workspace_name = $1 AND c.deleted_at IS NULL \
             ) \
             SELECT EXISTS (SELECT 1 FROM down WHERE id = ANY($5::text[])) AS cycle",
            [
                whose.workspace.into(),
                whose.observer.into(),
                whose.observed.into(),
                content.into(),
                sources.to_vec().into(),
            ],
        ))
        .await?;
    Ok(row
        .map(|r| r.try_get::<bool>("", "cycle"))
        .transpose()?
        .unwrap_or(false))
}
