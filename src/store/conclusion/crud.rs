//! What clients do with conclusions: create explicit ones, read them (by id, by page, by
//! meaning), replace their metadata, delete them.

use std::collections::HashMap;

use chrono::{Duration, Utc};
use sea_orm::prelude::PgVector;
use sea_orm::sea_query::{Expr, Order as SqlOrder};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait,
};
use serde_json::{Value, json};

use super::{
    Conclusion, Level, NewConclusion, cols, conclusion_content, require_peers_and_sessions,
    within_token_limit,
};
use crate::embed::{EmbedError, conclusion_text, embed_non_blank};
use crate::entity::conclusion;
use crate::store::embedding::set_embeddings;
use crate::store::events::{self, Notice};
use crate::store::filter::{self, Resource};
use crate::store::page::{Order, Page, Slice};
use crate::store::{
    IterativeScan, Store, StoreError, StoreResult, TxOptions, new_id, search, stmt, validate,
};

/// `topK` of a semantic query: 1..=100.
pub const MAX_TOP_K: u64 = 100;
/// Cosine distance lies in 0..=2.
pub const MAX_DISTANCE: f64 = 2.0;

impl Store {
    /// Live conclusions for many (workspace, id) keys in one statement; absent and deleted keys
    /// are simply missing.
    #[tracing::instrument(name = "store.conclusions_by_ids", level = "debug", skip_all)]
    pub async fn conclusions_by_ids(
        &self,
        keys: &[(String, String)],
    ) -> StoreResult<Vec<Conclusion>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (ws, ids): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        Ok(conclusion::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "SELECT {} FROM conclusions c \
                     JOIN unnest($1::text[], $2::text[]) AS k(w, i) \
                       ON c.id = k.i AND c.workspace_name = k.w \
                     WHERE c.deleted_at IS NULL",
                    cols("c")
                ),
                [ws.into(), ids.into()],
            ))
            .all(self.reader())
            .await?)
    }

    /// Stores 1 to 100 explicit conclusions in one transaction: all or nothing. Observer, observed
    /// and session (if given) must exist in the workspace (NOT_FOUND names the first missing one;
    /// Honcho v3.0.12 does not create them here). Contents are embedded before the transaction opens.
    /// Returns the rows in input order; a batch's rows are 1 µs apart in `created_at`, in input
    /// order, so time order is input order.
    #[tracing::instrument(name = "store.create_conclusions", level = "debug", skip_all)]
    pub async fn create_conclusions(
        &self,
        workspace: &str,
        batch: Vec<NewConclusion>,
    ) -> StoreResult<Vec<Conclusion>> {
        validate::batch_len("conclusions", batch.len())?;
        let mut prepared = Vec::with_capacity(batch.len());
        for (i, mut c) in batch.into_iter().enumerate() {
            let content = conclusion_content(&format!("conclusions[{i}].content"), &c.content)?;
            let metadata = match c.metadata.take() {
                Some(v) => validate::metadata(&format!("conclusions[{i}].metadata"), v)?,
                None => json!({}),
            };
            prepared.push((c, content, metadata));
        }
        let contents = prepared
            .iter_mut()
            .map(|p| std::mem::take(&mut p.1))
            .collect();
        let contents = within_token_limit("conclusions[{}].content", contents).await?;
        for (p, content) in prepared.iter_mut().zip(contents) {
            p.1 = content;
        }
        let peers: Vec<String> = prepared
            .iter()
            .flat_map(|(c, ..)| [c.observer.clone(), c.observed.clone()])
            .collect();
        let sessions: Vec<String> = prepared
            .iter()
            .filter_map(|(c, ..)| c.session.clone())
            .collect();
        let texts: Vec<String> = prepared
            .iter()
            .map(|(c, content, _)| conclusion_text(&c.observer, &c.observed, content))
            .collect();
        let embeddings = self.embed_texts(&texts).await;

        let now = Utc::now();
        let ids: Vec<String> = prepared.iter().map(|_| new_id()).collect();
        let rows = prepared
            .into_iter()
            .zip(&ids)
            .enumerate()
            .map(
                |(i, ((c, content, metadata), id))| conclusion::ActiveModel {
                    id: Set(id.clone()),
                    workspace_name: Set(workspace.to_owned()),
                    observer: Set(c.observer),
                    observed: Set(c.observed),
                    session_name: Set(c.session),
                    content: Set(content),
                    level: Set(Level::Explicit),
                    times_derived: Set(1),
                    source_ids: Set(None),
                    internal_metadata: Set(json!({})),
                    metadata: Set(metadata),
                    created_at: Set(now + Duration::microseconds(i as i64)),
                    deleted_at: Set(None),
                },
            )
            .collect::<Vec<_>>();

        let (rows, peers, sessions, ids, embeddings) =
            (&rows, &peers, &sessions, &ids, &embeddings);
        let created = self
            .transaction(TxOptions::default(), |txn| async move {
                require_peers_and_sessions(&*txn, workspace, peers, sessions).await?;
                let created = conclusion::Entity::insert_many(rows.clone())
                    .exec_with_returning(&*txn)
                    .await?;
                set_embeddings(&*txn, "conclusions", ids, embeddings).await?;
                // Delivered to listeners at commit, never if this rolls back.
                let notice = Notice::Conclusion {
                    w: workspace.to_owned(),
                    ids: ids.clone(),
                };
                events::publish(&*txn, &notice).await?;
                super::super::webhook::outbox::emit_conclusions(&*txn, workspace, ids).await?;
                Ok(created)
            })
            .await?;
        let mut by_id: HashMap<String, Conclusion> =
            created.into_iter().map(|c| (c.id.clone(), c)).collect();
        ids.iter()
            .map(|id| {
                by_id
                    .remove(id)
                    .ok_or_else(|| StoreError::Internal("inserted conclusion not returned".into()))
            })
            .collect()
    }

    /// Replaces a live conclusion's metadata; `None` leaves it as it is. Deleted or unknown →
    /// NOT_FOUND. Nothing else about a conclusion can change.
    #[tracing::instrument(name = "store.update_conclusion_metadata", level = "debug", skip_all)]
    pub async fn update_conclusion_metadata(
        &self,
        workspace: &str,
        id: &str,
        metadata: Option<Value>,
    ) -> StoreResult<Conclusion> {
        let metadata = validate::optional_metadata(metadata)?;
        conclusion::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "UPDATE conclusions SET metadata = COALESCE($3, metadata) \
                     WHERE workspace_name = $1 AND id = $2 AND deleted_at IS NULL \
                     RETURNING {}",
                    cols("")
                ),
                [workspace.into(), id.into(), metadata.into()],
            ))
            .one(self.db())
            .await?
            .ok_or_else(|| StoreError::not_found("conclusion", id))
    }

    /// Soft delete: the row stays (its id may be cited) but no read, tree or search sees it
    /// again. Already deleted or unknown → NOT_FOUND.
    #[tracing::instrument(name = "store.delete_conclusion", level = "debug", skip_all)]
    pub async fn delete_conclusion(&self, workspace: &str, id: &str) -> StoreResult<()> {
        let done = self
            .db()
            .execute_raw(stmt(
                "UPDATE conclusions SET deleted_at = now() \
                 WHERE workspace_name = $1 AND id = $2 AND deleted_at IS NULL",
                [workspace.into(), id.into()],
            ))
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("conclusion", id));
        }
        Ok(())
    }

    /// Live conclusions of the workspace (of one observer when given). `Order::Desc` is newest
    /// first (Honcho v3.0.12's default for conclusions); ties broken by id.
    #[tracing::instrument(name = "store.list_conclusions", level = "debug", skip_all)]
    pub async fn list_conclusions(
        &self,
        workspace: &str,
        observer: Option<&str>,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Conclusion>> {
        let mut select = conclusion::Entity::find()
            .filter(conclusion::Column::WorkspaceName.eq(workspace))
            .filter(conclusion::Column::DeletedAt.is_null());
        if let Some(observer) = observer {
            select = select.filter(conclusion::Column::Observer.eq(observer));
        }
        self.list(select, filters, order, slice).await
    }

    /// The `limit` live conclusions matching `filters` derived most often (`times_derived`),
    /// newest first among equals, then by id (Honcho v3.0.12's "most frequent").
    #[tracing::instrument(name = "store.most_derived_conclusions", level = "debug", skip_all)]
    pub async fn most_derived_conclusions(
        &self,
        workspace: &str,
        filters: &Value,
        limit: u64,
    ) -> StoreResult<Vec<Conclusion>> {
        let filter = filter::parse(Resource::Conclusion, filters)?;
        Ok(conclusion::Entity::find()
            .filter(conclusion::Column::WorkspaceName.eq(workspace))
            .filter(conclusion::Column::DeletedAt.is_null())
            .filter(filter.condition("conclusions"))
            .order_by(conclusion::Column::TimesDerived, SqlOrder::Desc)
            .order_by(conclusion::Column::CreatedAt, SqlOrder::Desc)
            .order_by(conclusion::Column::Id, SqlOrder::Asc)
            .limit(limit)
            .all(self.reader())
            .await?)
    }

    /// The `top_k` live conclusions that best answer `query`, among those matching `filters`:
    /// the nearest by cosine distance and those holding any of its words (in the content or in
    /// either peer's id), fused by Reciprocal Rank Fusion. `max_distance` bounds both. Conclusions
    /// without an embedding are not candidates. A blank query finds nothing. Needs an embedder.
    #[tracing::instrument(name = "store.query_conclusions", level = "debug", skip_all)]
    pub async fn query_conclusions(
        &self,
        workspace: &str,
        query: &str,
        top_k: u64,
        max_distance: Option<f64>,
        filters: &Value,
    ) -> StoreResult<Vec<Conclusion>> {
        if !(1..=MAX_TOP_K).contains(&top_k) {
            return Err(StoreError::invalid(format!(
                "topK must be between 1 and {MAX_TOP_K} (got {top_k})"
            )));
        }
        if let Some(d) = max_distance
            && !(0.0..=MAX_DISTANCE).contains(&d)
        {
            return Err(StoreError::invalid(format!(
                "maxDistance must be between 0 and {MAX_DISTANCE} (cosine distance; got {d})"
            )));
        }
        search::check_query(query)?;
        let filter = filter::parse(Resource::Conclusion, filters)?;
        let Some(embedder) = self.embedder() else {
            return Err(StoreError::invalid(
                "a semantic query needs an embedder, and this server has none (HONCHO_EMBEDDER=none)",
            ));
        };
        within_token_limit("query", vec![query.to_owned()]).await?;
        let vector = embed_non_blank(embedder.as_ref(), &[query.to_owned()])
            .await
            .map_err(|e| match e {
                EmbedError::Busy { .. } => StoreError::Busy(e.to_string()),
                e => StoreError::Internal(format!("embedding the query failed: {e}")),
            })?
            .pop()
            .flatten();
        let Some(vector) = vector else {
            return Ok(Vec::new());
        };
        let dims = u32::try_from(vector.len()).unwrap_or(u32::MAX);
        let q = PgVector::from(vector);
        let distance = || Expr::cust_with_values("conclusions.embedding <=> $1", [q.clone()]);
        let mut candidates = conclusion::Entity::find()
            .filter(conclusion::Column::WorkspaceName.eq(workspace))
            .filter(conclusion::Column::DeletedAt.is_null())
            .filter(Expr::cust("conclusions.embedding IS NOT NULL"))
            .filter(filter.condition("conclusions"));
        if let Some(d) = max_distance {
            candidates = candidates.filter(Expr::cust_with_values(
                "(conclusions.embedding <=> $1) <= $2",
                [sea_orm::Value::from(q.clone()), d.into()],
            ));
        }
        let pool = top_k * POOL_PER_RESULT;
        // Distance alone in ORDER BY: a second key would keep the HNSW index from ordering.
        let nearest = if migration::indexes_half_precision(dims) {
            // The index holds the vectors' half-precision casts: more candidates in its order,
            // the pool of them by exact distance.
            let by_index = candidates
                .clone()
                .select_only()
                .column(conclusion::Column::Id)
                .order_by(
                    Expr::cust_with_values(
                        migration::indexed_distance("conclusions.embedding", "$1", dims),
                        [q.clone()],
                    ),
                    SqlOrder::Asc,
                )
                .limit(pool * CANDIDATES_PER_HALF_PRECISION_HIT)
                .into_query();
            conclusion::Entity::find()
                .filter(conclusion::Column::Id.in_subquery(by_index))
                .order_by(distance(), SqlOrder::Asc)
                .order_by(conclusion::Column::Id, SqlOrder::Asc)
                .limit(pool)
        } else {
            candidates
                .clone()
                .order_by(distance(), SqlOrder::Asc)
                .limit(pool)
        };
        // Any of the query's lexemes, in the content or either peer's id (`content_tsv`).
        let any_lexeme = migration::any_lexeme_tsquery("$1");
        let text = query.replace('\0', "");
        let matching = candidates
            .filter(Expr::cust_with_values(
                format!("conclusions.content_tsv @@ {any_lexeme}"),
                [text.clone()],
            ))
            .order_by(
                Expr::cust_with_values(
                    format!("ts_rank_cd(conclusions.content_tsv, {any_lexeme})"),
                    [text],
                ),
                SqlOrder::Desc,
            )
            .order_by(conclusion::Column::CreatedAt, SqlOrder::Desc)
            .order_by(conclusion::Column::Id, SqlOrder::Asc)
            .limit(pool);
        // With a selective filter, an HNSW scan that stops after ef_search candidates could
        // return fewer than top_k rows; pgvector ≥ 0.8 keeps scanning until the filter is met.
        let options = TxOptions::default().iterative_scan(IterativeScan::Strict);
        let (nearest, matching) = (&nearest, &matching);
        let (by_meaning, by_words) = self
            .read_transaction(options, |txn| async move {
                let by_meaning = nearest.clone().all(&*txn).await?;
                let by_words = matching.clone().all(&*txn).await?;
                Ok((by_meaning, by_words))
            })
            .await?;
        Ok(fuse(by_meaning, by_words, top_k))
    }
}

/// Each leg keeps this many candidates per result asked for.
const POOL_PER_RESULT: u64 = 2;
/// Candidates read from a half-precision index per hit the vector leg keeps after ranking them by
/// exact distance: half precision reorders only near-ties.
const CANDIDATES_PER_HALF_PRECISION_HIT: u64 = 2;
/// Reciprocal Rank Fusion's constant (the message search's).
const RRF_K: f64 = 60.0;

/// The `top_k` best of two ranked lists by Reciprocal Rank Fusion (`Σ 1 / (k + rank)` over the
/// lists a conclusion is in), ties by id, so one query always gives one order.
fn fuse(by_meaning: Vec<Conclusion>, by_words: Vec<Conclusion>, top_k: u64) -> Vec<Conclusion> {
    let mut fused: HashMap<String, (f64, Conclusion)> = HashMap::new();
    for list in [by_meaning, by_words] {
        for (rank, c) in list.into_iter().enumerate() {
            let score = 1.0 / (RRF_K + rank as f64 + 1.0);
            fused
                .entry(c.id.clone())
                .and_modify(|e| e.0 += score)
                .or_insert((score, c));
        }
    }
    let mut ranked: Vec<(f64, Conclusion)> = fused.into_values().collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    ranked
        .into_iter()
        .take(top_k as usize)
        .map(|(_, c)| c)
        .collect()
}
