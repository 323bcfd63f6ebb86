//! Writing and refreshing the vector columns of messages and conclusions.

use sea_orm::{ConnectionTrait, QueryResult};

use super::meta::{CONTEXTUAL, EMBEDDING_TEXT};
use super::vectors::{FlatVectors, nth_vector};
use super::{Store, StoreError, StoreResult, TxOptions, stmt};
use crate::embed::{CONTEXT_TURNS, Embedder, conclusion_text, embed_non_blank, message_text};

/// What [`Store::reembed`] reports as it goes; the command line draws a progress bar from it.
/// `()` reports nothing.
pub trait ReembedProgress {
    /// A table's pass begins, with this many rows to embed.
    fn table(&self, _name: &str, _rows: u64) {}
    /// This many more rows of the table are embedded.
    fn advanced(&self, _rows: u64) {}
    /// The table's pass is over.
    fn table_done(&self) {}
}

impl ReembedProgress for () {}

/// One table's share of a [`Store::reembed`] run.
struct Pass {
    table: &'static str,
    id_type: &'static str,
    /// Every row, or only those without an embedding.
    every_row: bool,
    /// Only this workspace's rows (`$2` of the batch's query).
    workspace: Option<String>,
}

impl Pass {
    /// The rows to embed: not blank, missing an embedding unless every row is asked for, and
    /// for conclusions not deleted.
    fn rows(&self) -> String {
        let only_missing = if self.every_row {
            ""
        } else {
            "AND embedding IS NULL"
        };
        let soft_delete = if self.table == "conclusions" {
            "AND deleted_at IS NULL"
        } else {
            ""
        };
        format!("btrim(content) <> '' {only_missing} {soft_delete}")
    }

    /// Below every id of the table.
    fn first_key(&self) -> &'static str {
        if self.id_type == "bigint" { "0" } else { "" }
    }

    /// The next 64 rows after the id `$1`, with what their text is made of.
    fn batch_sql(&self) -> String {
        // A message is embedded with the turns before it (`embed::message_text`), read here
        // newest first; a conclusion with its peers' ids (`embed::conclusion_text`).
        let context = if self.table == "messages" {
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
            ", observer, observed".to_owned()
        };
        let workspace = if self.workspace.is_some() {
            "AND t.workspace_name = $2"
        } else {
            ""
        };
        format!(
            "SELECT id::text AS id, content {context} FROM {table} t \
             WHERE {rows} {workspace} AND id > $1::{id_type} ORDER BY id LIMIT 64",
            table = self.table,
            rows = self.rows(),
            id_type = self.id_type,
        )
    }

    /// The ids of a batch's rows and the text each is embedded from.
    fn texts(&self, rows: &[QueryResult]) -> StoreResult<(Vec<String>, Vec<String>)> {
        let mut ids = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        for r in rows {
            ids.push(r.try_get::<String>("", "id")?);
            let content = r.try_get::<String>("", "content")?;
            texts.push(if self.table == "messages" {
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
                let observer = r.try_get::<String>("", "observer")?;
                conclusion_text(&observer, &r.try_get::<String>("", "observed")?, &content)
            });
        }
        Ok((ids, texts))
    }
}

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

    /// Embeds rows that have none (`all`: every row) in batches, telling `progress` as it goes.
    /// `resize` first converts the vector columns to the embedder's dimension.
    #[tracing::instrument(name = "store.reembed", level = "debug", skip_all)]
    pub async fn reembed(
        &self,
        all: bool,
        resize: bool,
        progress: &dyn ReembedProgress,
    ) -> StoreResult<u64> {
        let embedder = self
            .embedder()
            .ok_or_else(|| StoreError::invalid("HONCHO_EMBEDDER=none: nothing to embed with"))?
            .clone();
        if resize {
            self.resize_vectors(embedder.dims()).await?;
        }
        let mut done = 0;
        for (table, id_type) in TABLES {
            // Resized columns are empty: every row is missing its embedding.
            let pass = Pass {
                table,
                id_type,
                every_row: all && !resize,
                workspace: None,
            };
            progress.table(table, self.rows_to_embed(&pass).await?);
            done += self.embed_table(&pass, embedder.as_ref(), progress).await?;
            progress.table_done();
        }
        self.set_meta("embedding_model", embedder.model_id())
            .await?;
        if all || resize {
            // Every vector is now of the current text (the warning at start-up stops).
            self.set_meta(EMBEDDING_TEXT, CONTEXTUAL).await?;
        }
        Ok(done)
    }

    /// Embeds the rows of `workspace` that have no embedding (an import's, whose vectors came
    /// from another model); the number embedded.
    pub(crate) async fn embed_missing_in(&self, workspace: &str) -> StoreResult<u64> {
        let embedder = self
            .embedder()
            .ok_or_else(|| StoreError::invalid("HONCHO_EMBEDDER=none: nothing to embed with"))?
            .clone();
        let mut done = 0;
        for (table, id_type) in TABLES {
            let pass = Pass {
                table,
                id_type,
                every_row: false,
                workspace: Some(workspace.to_owned()),
            };
            done += self.embed_table(&pass, embedder.as_ref(), &()).await?;
        }
        Ok(done)
    }

    async fn rows_to_embed(&self, pass: &Pass) -> StoreResult<u64> {
        let n: i64 = self
            .db()
            .query_one_raw(stmt(
                &format!(
                    "SELECT count(*) AS n FROM {} t WHERE {}",
                    pass.table,
                    pass.rows()
                ),
                [],
            ))
            .await?
            .map(|r| r.try_get("", "n"))
            .transpose()?
            .unwrap_or(0);
        Ok(n as u64)
    }

    /// Embeds one table's rows of `pass`, 64 at a time, keyset over the id so that rows embedded
    /// by a concurrent writer are not visited twice.
    async fn embed_table(
        &self,
        pass: &Pass,
        embedder: &dyn Embedder,
        progress: &dyn ReembedProgress,
    ) -> StoreResult<u64> {
        let mut done = 0;
        let mut after = pass.first_key().to_owned();
        loop {
            let mut values = vec![after.clone().into()];
            values.extend(pass.workspace.clone().map(Into::into));
            let rows = self
                .db()
                .query_all_raw(stmt(&pass.batch_sql(), values))
                .await?;
            if rows.is_empty() {
                return Ok(done);
            }
            let (mut ids, texts) = pass.texts(&rows)?;
            let vectors = embedder
                .embed(&texts)
                .await
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            let vectors: Vec<Option<Vec<f32>>> = vectors.into_iter().map(Some).collect();
            set_embeddings(self.db(), pass.table, &ids, &vectors).await?;
            done += ids.len() as u64;
            progress.advanced(ids.len() as u64);
            after = ids.pop().unwrap_or_default();
        }
    }

    /// Rebuilds the vector columns (and their HNSW indexes) with `dims` dimensions, emptied. A
    /// dimension that cannot be indexed changes nothing.
    async fn resize_vectors(&self, dims: usize) -> StoreResult<()> {
        let indexed = u32::try_from(dims).unwrap_or(u32::MAX);
        migration::check_embedding_dims(indexed).map_err(StoreError::Incompatible)?;
        self.transaction(TxOptions::default(), |txn| async move {
            for (table, _) in TABLES {
                let index = match table {
                    "messages" => migration::message_vector_index(indexed),
                    _ => migration::vector_index(table, indexed),
                };
                txn.execute_unprepared(&format!(
                    "DROP INDEX IF EXISTS ix_{table}_embedding_hnsw;
                     ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dims}) USING NULL;
                     {index};"
                ))
                .await?;
            }
            // The blocks' and sessions' sums are of the vectors just emptied; reembed's writes
            // add them again.
            for sums in ["message_blocks", "message_session_sums"] {
                txn.execute_unprepared(&format!(
                    "DELETE FROM {sums};
                     ALTER TABLE {sums} ALTER COLUMN vector_sum TYPE vector({dims}) USING NULL;"
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
