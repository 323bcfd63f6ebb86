//! The deriver's writes: a derived conclusion is new, or reinforces the live one with the same
//! content, in one race-free upsert.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, EntityTrait};

use super::{
    Conclusion, Level, cols, conclusion_content, require_peers_and_sessions, within_token_limit,
};
use crate::embed::conclusion_text;
use crate::entity::conclusion;
use crate::store::events::{self, Notice};
use crate::store::{Store, StoreError, StoreResult, TxOptions, new_id, stmt};

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

impl Store {
    /// The deriver's door: records a DEDUCTIVE, INDUCTIVE or CONTRADICTION conclusion drawn from
    /// `source_ids` (1..100 live conclusions of the same workspace). Deriving content again for
    /// the same observer and observed while the earlier row is live reinforces that row instead:
    /// `times_derived + 1`, its sources unioned (old ids first, then new ones, each once; a row
    /// never cites itself), level and session unchanged. One `INSERT … ON CONFLICT` over the
    /// partial unique index `uq_conclusions_derived_content` makes this race-free: concurrent
    /// identical derivations yield one row whose count includes every one of them.
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
            let row = upsert_derived(
                &*txn,
                workspace,
                &peers[0],
                &peers[1],
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
    workspace: &str,
    observer: &str,
    observed: &str,
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
                workspace.into(),
                observer.into(),
                observed.into(),
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
