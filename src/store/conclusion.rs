//! Conclusions (Honcho's documents): facts one peer holds about
//! another, with public metadata, read-only provenance (level, times_derived, source_ids) and the
//! reasoning graph those source ids span.
//!
//! Explicit conclusions come from clients ([`Store::create_conclusions`]); derived ones only from
//! the deriver ([`Store::record_derived_conclusion`]), which reinforces an existing live derived
//! conclusion with the same content instead of inserting a duplicate.

use std::collections::{HashMap, HashSet};

use chrono::{Duration, Utc};
use sea_orm::prelude::PgVector;
use sea_orm::sea_query::{Expr, Order as SqlOrder};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect,
};
use serde_json::{Value, json};

use super::embedding::set_embeddings;
use super::events::{self, Notice};
use super::filter::{self, Resource};
use super::page::{self, Order, Page, Slice};
use super::{
    IterativeScan, Store, StoreError, StoreResult, TxOptions, columns, new_id, stmt, tokens,
    validate, vector_literal,
};
use crate::embed::{EmbedError, conclusion_text, embed_non_blank};
use crate::entity::conclusion;

pub type Conclusion = conclusion::Model;

/// Most tokens (o200k_base) a conclusion's content or a semantic query may have (Honcho's
/// EMBEDDING_MAX_INPUT_TOKENS).
pub const MAX_EMBEDDING_TOKENS: i32 = 8192;
/// `topK` of a semantic query: 1..=100.
pub const MAX_TOP_K: u64 = 100;
/// Cosine distance lies in 0..=2.
pub const MAX_DISTANCE: f64 = 2.0;
/// Most source ids one derivation may cite.
pub const MAX_SOURCES: usize = 100;
/// `maxDepth` of a reasoning tree: 1..=20.
pub const MAX_TREE_DEPTH: i32 = 20;
/// Most nodes one reasoning tree returns, and its default.
pub const MAX_TREE_NODES: i32 = 10_000;
pub const DEFAULT_TREE_NODES: i32 = 2_000;

/// The conclusion columns (the entity's: everything but the embedding) for hand-written
/// SELECT/RETURNING, qualified by `alias` unless it is empty.
fn cols(alias: &str) -> String {
    columns::list::<conclusion::Entity>(alias)
}

pub use crate::entity::conclusion::Level;

/// A conclusion a client states (always EXPLICIT).
#[derive(Clone, Debug)]
pub struct NewConclusion {
    pub content: String,
    pub observer: String,
    pub observed: String,
    pub session: Option<String>,
    pub metadata: Option<Value>,
}

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

/// Which way a reasoning tree grows from its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeDirection {
    /// Towards premises: a node's neighbours are the conclusions it cites.
    Sources,
    /// Towards consequences: a node's neighbours are the conclusions citing it.
    Derived,
}

/// One citation: `from` cites `to` (`to` is among `from`'s source ids), whichever way the tree
/// was walked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Edge {
    pub from: String,
    pub to: String,
}

/// The live conclusions reachable from a root within `max_depth` steps, each once.
#[derive(Clone, Debug)]
pub struct ReasoningTree {
    /// The root first, then by depth (distance from the root), then creation time.
    pub nodes: Vec<TreeNode>,
    /// Every citation between two nodes of the tree, grouped by citing node in node order, each
    /// group in the citing node's sourceIds order.
    pub edges: Vec<Edge>,
    /// The tree is not the whole reachable graph: some node at `max_depth` has a live neighbour
    /// outside it (one more level would add nodes), or more than `max_nodes` were reachable.
    /// When false, nodes and edges are the whole reachable graph.
    pub truncated: bool,
}

#[derive(Clone, Debug)]
pub struct TreeNode {
    pub conclusion: Conclusion,
    /// Steps from the root along the shortest path (root = 0).
    pub depth: i32,
}

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

    /// One page of the live conclusions citing each of the (workspace, id) keys, oldest first, in
    /// one statement (a lateral subquery per key through the GIN index on `source_ids`): at most
    /// `first` per key, after the conclusion `after` (by creation time, then id; an `after` that
    /// is no conclusion of the workspace gives an empty page). Each row comes with the id of the
    /// key it was found for.
    #[tracing::instrument(name = "store.derived_by_source_ids", level = "debug", skip_all)]
    pub async fn derived_by_source_ids(
        &self,
        keys: &[(String, String)],
        first: u64,
        after: Option<&str>,
    ) -> StoreResult<Vec<(String, Conclusion)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let workspaces: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
        let ids: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &format!(
                    "SELECT k.source AS derived_for, {} \
                     FROM unnest($1::text[], $2::text[]) AS k(ws, source) \
                     CROSS JOIN LATERAL ( \
                       SELECT {columns} FROM conclusions \
                       WHERE workspace_name = k.ws AND source_ids && ARRAY[k.source] \
                         AND deleted_at IS NULL \
                         AND ($4::text IS NULL OR (created_at, id) > ( \
                           SELECT a.created_at, a.id FROM conclusions a \
                           WHERE a.workspace_name = k.ws AND a.id = $4)) \
                       ORDER BY created_at, id LIMIT $3) c \
                     ORDER BY c.created_at, c.id",
                    cols("c"),
                    columns = cols(""),
                ),
                [
                    workspaces.into(),
                    ids.into(),
                    (first as i64).into(),
                    after.map(str::to_owned).into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|row| {
                let source: String = row.try_get("", "derived_for")?;
                Ok((source, conclusion::Model::from_query_result(row, "")?))
            })
            .collect()
    }

    /// Stores 1 to 100 explicit conclusions in one transaction: all or nothing. Observer, observed
    /// and session (if given) must exist in the workspace (NOT_FOUND names the first missing one;
    /// Honcho does not create them here). Contents are embedded before the transaction opens.
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
    /// first (Honcho's default for conclusions); ties broken by id.
    #[tracing::instrument(name = "store.list_conclusions", level = "debug", skip_all)]
    pub async fn list_conclusions(
        &self,
        workspace: &str,
        observer: Option<&str>,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Conclusion>> {
        let filter = filter::parse(Resource::Conclusion, filters)?;
        let mut select = conclusion::Entity::find()
            .filter(conclusion::Column::WorkspaceName.eq(workspace))
            .filter(conclusion::Column::DeletedAt.is_null())
            .filter(filter.condition("conclusions"));
        if let Some(observer) = observer {
            select = select.filter(conclusion::Column::Observer.eq(observer));
        }
        page::fetch(
            self.reader(),
            select,
            order,
            &[conclusion::Column::CreatedAt, conclusion::Column::Id],
            slice,
        )
        .await
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
        super::search::check_query(query)?;
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
        let nearest = candidates
            .clone()
            .order_by(distance(), SqlOrder::Asc)
            .limit(pool);
        // Any of the query's lexemes, in the content or either peer's id (`content_tsv`).
        let any_lexeme = "replace(plainto_tsquery('english', $1)::text, ' & ', ' | ')::tsquery";
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
        let embedding = self
            .embed_texts(&[text])
            .await
            .pop()
            .flatten()
            .map(|v| vector_literal(&v));

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
                embedding.clone(),
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

    /// The live conclusions reachable from `root` in `direction` within `max_depth` (1..20)
    /// steps, at most `max_nodes` (1..10,000) of them, nearest first, with the citations between
    /// them, from ONE recursive statement.
    ///
    /// The walk is breadth-first, one row per level carrying the level's frontier and everything
    /// visited so far: a node is expanded once, at its smallest depth, however many paths
    /// (diamonds) or cycles lead to it, so the work is linear in the tree, never in the number of
    /// paths. Deleted conclusions are neither returned nor walked through. A deleted or unknown
    /// root → NOT_FOUND.
    #[tracing::instrument(name = "store.reasoning_tree", level = "debug", skip_all)]
    pub async fn reasoning_tree(
        &self,
        workspace: &str,
        root: &str,
        direction: TreeDirection,
        max_depth: i32,
        max_nodes: i32,
    ) -> StoreResult<ReasoningTree> {
        if !(1..=MAX_TREE_DEPTH).contains(&max_depth) {
            return Err(StoreError::invalid(format!(
                "maxDepth must be between 1 and {MAX_TREE_DEPTH} (got {max_depth})"
            )));
        }
        if !(1..=MAX_TREE_NODES).contains(&max_nodes) {
            return Err(StoreError::invalid(format!(
                "maxNodes must be between 1 and {MAX_TREE_NODES} (got {max_nodes})"
            )));
        }
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &tree_sql(direction),
                [
                    workspace.into(),
                    root.into(),
                    max_depth.into(),
                    max_nodes.into(),
                ],
            ))
            .await?;
        if rows.is_empty() {
            return Err(StoreError::not_found("conclusion", root));
        }
        let mut nodes = Vec::with_capacity(rows.len());
        let mut edges = Vec::new();
        let mut truncated = false;
        for row in rows {
            let conclusion = Conclusion::from_query_result(&row, "")?;
            let depth: i32 = row.try_get("", "depth")?;
            let cites: Vec<String> = row.try_get("", "cites")?;
            truncated = row.try_get("", "truncated")?;
            edges.extend(cites.into_iter().map(|to| Edge {
                from: conclusion.id.clone(),
                to,
            }));
            nodes.push(TreeNode { conclusion, depth });
        }
        Ok(ReasoningTree {
            nodes,
            edges,
            truncated,
        })
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
    embedding: Option<String>,
) -> StoreResult<Conclusion> {
    conclusion::Entity::find()
        .from_raw_sql(stmt(
            &format!(
                "INSERT INTO conclusions (id, workspace_name, observer, observed, session_name, \
                   content, level, times_derived, source_ids, embedding) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8::text[], $9::vector) \
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
                embedding.into(),
            ],
        ))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Internal("derived conclusion upsert returned no row".into()))
}

/// Content rules (Honcho's): 1..65535 characters counted before NUL bytes are stripped (as
/// Honcho), not empty after stripping, at most 8192 tokens.
pub(crate) fn conclusion_content(field: &str, content: &str) -> StoreResult<String> {
    let len = content.chars().count();
    if len == 0 || len > validate::MAX_CONCLUSION_CHARS {
        return Err(StoreError::invalid(format!(
            "{field} must be 1 to {} characters long (got {len})",
            validate::MAX_CONCLUSION_CHARS
        )));
    }
    let content = content.replace('\0', "");
    if content.is_empty() {
        return Err(StoreError::invalid(format!(
            "{field} is empty once NUL bytes are removed"
        )));
    }
    Ok(content)
}

/// Refuses a text over [`MAX_EMBEDDING_TOKENS`], naming its field (`field` with `{}` replaced by
/// the text's index). Counted off the runtime's workers ([`tokens::count_all`]).
async fn within_token_limit(field: &str, texts: Vec<String>) -> StoreResult<Vec<String>> {
    let (texts, counts) = tokens::count_all(texts).await?;
    if let Some((i, n)) = counts
        .iter()
        .enumerate()
        .find(|(_, n)| **n > MAX_EMBEDDING_TOKENS)
    {
        let field = field.replace("{}", &i.to_string());
        return Err(StoreError::invalid(format!(
            "{field} is {n} tokens long; the limit is {MAX_EMBEDDING_TOKENS}"
        )));
    }
    Ok(texts)
}

/// Checks that every peer and session named exists in the workspace (sessions: active), and
/// key-share-locks them so they cannot vanish before the transaction's inserts. The first missing
/// one is NOT_FOUND, the workspace itself when it does not exist.
async fn require_peers_and_sessions<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    peers: &[String],
    sessions: &[String],
) -> StoreResult<()> {
    let found = |table: &'static str, extra: &'static str, names: Vec<String>| async move {
        let rows = db
            .query_all_raw(stmt(
                &format!(
                    "SELECT name FROM {table} WHERE workspace_name = $1 AND name = ANY($2::text[]) \
                     {extra} ORDER BY name FOR KEY SHARE"
                ),
                [workspace.into(), names.into()],
            ))
            .await?;
        rows.into_iter()
            .map(|r| r.try_get::<String>("", "name"))
            .collect::<Result<HashSet<String>, _>>()
            .map_err(StoreError::from)
    };
    let dedup = |names: &[String]| {
        let mut seen = HashSet::new();
        names
            .iter()
            .filter(|n| seen.insert(n.as_str()))
            .cloned()
            .collect::<Vec<_>>()
    };
    let peers = dedup(peers);
    let live_peers = found("peers", "", peers.clone()).await?;
    if let Some(missing) = peers.iter().find(|p| !live_peers.contains(*p)) {
        let ws_exists = db
            .query_one_raw(stmt(
                "SELECT 1 AS one FROM workspaces WHERE name = $1",
                [workspace.into()],
            ))
            .await?
            .is_some();
        if !ws_exists {
            return Err(StoreError::not_found("workspace", workspace));
        }
        return Err(StoreError::not_found("peer", missing.clone()));
    }
    let sessions = dedup(sessions);
    if !sessions.is_empty() {
        let live = found("sessions", "AND is_active", sessions.clone()).await?;
        if let Some(missing) = sessions.iter().find(|s| !live.contains(*s)) {
            return Err(StoreError::not_found("session", missing.clone()));
        }
    }
    Ok(())
}

/// The live neighbours (`n`) of the conclusions whose ids are in the array `frontier`, as a
/// FROM clause and its conditions.
fn neighbours(direction: TreeDirection, frontier: &str) -> (String, String) {
    let live = "n.workspace_name = $1 AND n.deleted_at IS NULL";
    match direction {
        // A node's premises: unnest its source ids and look each up by primary key.
        TreeDirection::Sources => (
            format!(
                "unnest({frontier}) AS f(id) \
                 JOIN conclusions cur ON cur.id = f.id \
                 CROSS JOIN LATERAL unnest(cur.source_ids) AS s(id) \
                 JOIN conclusions n ON n.id = s.id"
            ),
            live.to_owned(),
        ),
        // A node's consequences: rows whose source ids overlap the frontier (GIN index).
        TreeDirection::Derived => (
            "conclusions n".to_owned(),
            format!("n.source_ids && {frontier} AND {live}"),
        ),
    }
}

/// The reasoning-tree statement; parameters: $1 workspace, $2 root id, $3 max depth, $4 max
/// nodes.
///
/// `bfs` has one row per level: `frontier` holds the nodes first reached at that depth and
/// `visited` every node reached so far; the next frontier is the frontier's live neighbours not
/// yet visited (a hash anti-join against `visited`), looked up through the primary key (sources)
/// or the GIN index on `source_ids` (derived). The walk stops when a level adds nothing, so
/// cycles end; when more than $4 nodes are reached, so a wide graph costs at most one level past
/// the cap; and otherwise one level past $3: that probe level is not returned, it only says
/// whether $3 cut the tree (`truncated`), and computing it like every other level keeps the plan
/// on the indexes. The first $4 nodes in the returned order are kept. Each returned node carries
/// `cites`: its source ids that are tree nodes, in sourceIds order (the edges).
fn tree_sql(direction: TreeDirection) -> String {
    let (from, cond) = neighbours(direction, "b.frontier");
    format!(
        "WITH RECURSIVE bfs(depth, frontier, visited) AS ( \
           SELECT 0, ARRAY[r.id], ARRAY[r.id] FROM conclusions r \
           WHERE r.workspace_name = $1 AND r.id = $2 AND r.deleted_at IS NULL \
         UNION ALL \
           SELECT b.depth + 1, nxt.ids, b.visited || nxt.ids \
           FROM bfs b CROSS JOIN LATERAL ( \
             SELECT array_agg(DISTINCT n.id) AS ids FROM {from} \
             LEFT JOIN unnest(b.visited) AS v(id) ON v.id = n.id \
             WHERE {cond} AND v.id IS NULL \
           ) nxt \
           WHERE b.depth <= $3 AND cardinality(b.visited) <= $4 AND nxt.ids IS NOT NULL \
         ), \
         reached AS ( \
           SELECT u.id, b.depth FROM bfs b CROSS JOIN LATERAL unnest(b.frontier) AS u(id) \
           WHERE b.depth <= $3 \
         ), \
         tree AS ( \
           SELECT r.id, r.depth FROM reached r JOIN conclusions c ON c.id = r.id \
           ORDER BY r.depth, c.created_at, c.id LIMIT $4 \
         ), \
         cites AS ( \
           SELECT c.id, array_agg(s.id ORDER BY s.ord) AS ids \
           FROM tree t JOIN conclusions c ON c.id = t.id \
           CROSS JOIN LATERAL unnest(c.source_ids) WITH ORDINALITY AS s(id, ord) \
           JOIN tree t2 ON t2.id = s.id \
           GROUP BY c.id \
         ), \
         beyond AS (SELECT EXISTS (SELECT 1 FROM bfs WHERE depth > $3) \
           OR (SELECT count(*) FROM reached) > $4 AS truncated) \
         SELECT {cols}, t.depth, COALESCE(ci.ids, '{{}}'::text[]) AS cites, beyond.truncated \
         FROM tree t JOIN conclusions c ON c.id = t.id \
         LEFT JOIN cites ci ON ci.id = t.id \
         CROSS JOIN beyond \
         ORDER BY t.depth, c.created_at, c.id",
        cols = cols("c"),
    )
}

/// Each leg keeps this many candidates per result asked for.
const POOL_PER_RESULT: u64 = 2;
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
