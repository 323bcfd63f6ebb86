//! Writing and refreshing the vector columns of messages and conclusions.

use indicatif::{ProgressBar, ProgressStyle};
use sea_orm::ConnectionTrait;

use super::vectors::{FlatVectors, nth_vector};
use super::{Store, StoreError, StoreResult, TxOptions, stmt};
use crate::embed::{CONTEXT_TURNS, embed_non_blank, message_text};

/// Tables with an `embedding` column, and the type of their `id`.
const TABLES: [(&str, &str); 2] = [("messages", "bigint"), ("conclusions", "text")];

impl Store {
    /// Embeddings for `texts` (None for blank ones). A failing embedder is logged and yields no
    /// embeddings: the rows are still written and full-text search still finds them;
    /// `honcho-graphql reembed` fills them in later.
    pub(crate) async fn embed_texts(&self, texts: &[String]) -> Vec<Option<Vec<f32>>> {
        let Some(embedder) = self.embedder() else {
            return vec![None; texts.len()];
        };
        match embed_non_blank(embedder.as_ref(), texts).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "embedding failed; storing without embeddings");
                vec![None; texts.len()]
            }
        }
    }

    /// Embeds rows that have none (`all`: every row) in batches, with a progress bar.
    /// `resize` first converts the vector columns to the embedder's dimension.
    pub async fn reembed(&self, all: bool, resize: bool, show_progress: bool) -> StoreResult<u64> {
        let embedder = self
            .embedder()
            .ok_or_else(|| StoreError::invalid("HONCHO_EMBEDDER=none: nothing to embed with"))?
            .clone();
        if resize {
            self.resize_vectors(embedder.dims()).await?;
        }
        let mut done = 0;
        for (table, id_type) in TABLES {
            let only_missing = if all && !resize {
                ""
            } else {
                "AND embedding IS NULL"
            };
            let soft_delete = if table == "conclusions" {
                "AND deleted_at IS NULL"
            } else {
                ""
            };
            let total: i64 = self
                .db()
                .query_one_raw(stmt(
                    &format!(
                        "SELECT count(*) AS n FROM {table} WHERE btrim(content) <> '' {only_missing} {soft_delete}"
                    ),
                    [],
                ))
                .await?
                .map(|r| r.try_get("", "n"))
                .transpose()?
                .unwrap_or(0);
            let bar = if show_progress {
                let bar = ProgressBar::new(total as u64).with_message(table);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar
            } else {
                ProgressBar::hidden()
            };
            // Keyset over the id, so rows embedded by a concurrent writer are not visited twice.
            let mut after = if id_type == "bigint" {
                "0".to_owned()
            } else {
                String::new()
            };
            // A message is embedded with the turns before it (`embed::message_text`), read here
            // newest first.
            let context = if table == "messages" {
                format!(
                    ", peer_name, \
                     ARRAY(SELECT p.peer_name FROM messages p WHERE p.workspace_name = t.workspace_name \
                       AND p.session_name = t.session_name AND p.seq_in_session < t.seq_in_session \
                       ORDER BY p.seq_in_session DESC LIMIT {CONTEXT_TURNS}) AS before_peers, \
                     ARRAY(SELECT p.content FROM messages p WHERE p.workspace_name = t.workspace_name \
                       AND p.session_name = t.session_name AND p.seq_in_session < t.seq_in_session \
                       ORDER BY p.seq_in_session DESC LIMIT {CONTEXT_TURNS}) AS before_contents"
                )
            } else {
                String::new()
            };
            loop {
                let rows = self
                    .db()
                    .query_all_raw(stmt(
                        &format!(
                            "SELECT id::text AS id, content {context} FROM {table} t \
                             WHERE btrim(content) <> '' {only_missing} {soft_delete} AND id > $1::{id_type} \
                             ORDER BY id LIMIT 64"
                        ),
                        [after.clone().into()],
                    ))
                    .await?;
                if rows.is_empty() {
                    break;
                }
                let mut ids = Vec::with_capacity(rows.len());
                let mut texts = Vec::with_capacity(rows.len());
                for r in &rows {
                    ids.push(r.try_get::<String>("", "id")?);
                    let content = r.try_get::<String>("", "content")?;
                    texts.push(if table == "messages" {
                        let peers: Vec<String> = r.try_get("", "before_peers")?;
                        let contents: Vec<String> = r.try_get("", "before_contents")?;
                        let before: Vec<(&str, &str)> = peers
                            .iter()
                            .zip(&contents)
                            .rev()
                            .map(|(p, c)| (p.as_str(), c.as_str()))
                            .collect();
                        message_text(&before, &r.try_get::<String>("", "peer_name")?, &content)
                    } else {
                        content
                    });
                }
                let vectors = embedder
                    .embed(&texts)
                    .await
                    .map_err(|e| StoreError::Internal(e.to_string()))?;
                let vectors: Vec<Option<Vec<f32>>> = vectors.into_iter().map(Some).collect();
                set_embeddings(self.db(), table, &ids, &vectors).await?;
                done += ids.len() as u64;
                bar.inc(ids.len() as u64);
                after = ids.pop().unwrap_or_default();
            }
            bar.finish();
        }
        self.db()
            .execute_raw(stmt(
                "INSERT INTO honcho_meta (key, value) VALUES ('embedding_model', $1) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [embedder.model_id().into()],
            ))
            .await?;
        Ok(done)
    }

    /// Rebuilds the vector columns (and their HNSW indexes) with `dims` dimensions, emptied.
    async fn resize_vectors(&self, dims: usize) -> StoreResult<()> {
        self.transaction(TxOptions::default(), |txn| async move {
            for (table, _) in TABLES {
                let index = match table {
                    "messages" => migration::message_vector_index(dims as u32),
                    _ => migration::full_precision_vector_index(table),
                };
                txn.execute_unprepared(&format!(
                    "DROP INDEX IF EXISTS ix_{table}_embedding_hnsw;
                     ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dims}) USING NULL;
                     {index};"
                ))
                .await?;
            }
            txn.execute_raw(stmt(
                "UPDATE honcho_meta SET value = $1 WHERE key = 'embedding_dims'",
                [dims.to_string().into()],
            ))
            .await?;
            Ok(())
        })
        .await
    }
}

/// Writes embeddings for freshly inserted rows (same order as `ids`); rows with `None` keep NULL.
pub(crate) async fn set_embeddings<C: ConnectionTrait, I: ToString>(
    db: &C,
    table: &str,
    ids: &[I],
    embeddings: &[Option<Vec<f32>>],
) -> StoreResult<()> {
    let (ids, vectors): (Vec<String>, Vec<&[f32]>) = ids
        .iter()
        .zip(embeddings)
        .filter_map(|(id, e)| e.as_deref().map(|v| (id.to_string(), v)))
        .unzip();
    if ids.is_empty() {
        return Ok(());
    }
    let (vectors, _) = FlatVectors::new(vectors.into_iter().map(Some))?;
    let id_type = TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map_or("text", |(_, ty)| ty);
    db.execute_raw(stmt(
        &format!(
            "UPDATE {table} t SET embedding = {} \
             FROM unnest($1::text[]) WITH ORDINALITY AS v(id, ord) WHERE t.id = v.id::{id_type}",
            nth_vector("$2::real[]", "$3::int", "v.ord")
        ),
        [ids.into(), vectors.values.into(), vectors.dims.into()],
    ))
    .await?;
    Ok(())
}
