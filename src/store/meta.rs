//! Facts about the database that must agree with this server: the dimension of the vector
//! columns and the model that filled them (`honcho_meta`, written by the initial migration and at
//! first start).

use sea_orm::ConnectionTrait;

use super::{Store, StoreError, StoreResult, stmt};

/// What the stored vectors were embedded from (`honcho_meta`): [`CONTEXTUAL`] (a message with
/// the turn before it and speakers, a conclusion with its peers' ids) or `plain` (vectors written
/// by an older server).
pub const EMBEDDING_TEXT: &str = "embedding_text";
pub const CONTEXTUAL: &str = "contextual";

impl Store {
    /// Whether stored vectors predate contextual embeddings: search finds less until
    /// `honcho-graphql reembed --all` recomputes them.
    #[tracing::instrument(name = "store.vectors_predate_context", level = "debug", skip_all)]
    pub async fn vectors_predate_context(&self) -> StoreResult<bool> {
        Ok(self
            .meta(EMBEDDING_TEXT)
            .await?
            .is_some_and(|v| v != CONTEXTUAL))
    }

    pub(super) async fn set_meta(&self, key: &str, value: &str) -> StoreResult<()> {
        self.db()
            .execute_raw(stmt(
                "INSERT INTO honcho_meta (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [key.into(), value.into()],
            ))
            .await?;
        Ok(())
    }

    async fn meta(&self, key: &str) -> StoreResult<Option<String>> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "SELECT value FROM honcho_meta WHERE key = $1",
                [key.into()],
            ))
            .await?;
        Ok(row.map(|r| r.try_get::<String>("", "value")).transpose()?)
    }

    /// Refuses to serve with an embedder whose vectors do not fit the database, or that is not the
    /// model that embedded what is stored (its vectors would not be comparable). The first start
    /// with an embedder records its model.
    #[tracing::instrument(name = "store.check_embedder", level = "debug", skip_all)]
    pub async fn check_embedder(&self) -> StoreResult<()> {
        let Some(embedder) = self.embedder() else {
            return Ok(());
        };
        let dims: usize = self
            .meta("embedding_dims")
            .await?
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| StoreError::Internal("honcho_meta has no embedding_dims".into()))?;
        if dims != embedder.dims() {
            return Err(StoreError::Incompatible(format!(
                "the database stores {dims}-dimensional embeddings but the embedder {} produces {}; \
                 run `honcho-graphql reembed --resize` to convert the database to this embedder, \
                 or choose an embedder of {dims} dimensions (HONCHO_EMBEDDER)",
                embedder.model_id(),
                embedder.dims()
            )));
        }
        // Record the model unless one is recorded already, and read back whichever is: of two
        // instances starting at once with different models, the second sees the first's.
        let row = self
            .db()
            .query_one_raw(stmt(
                "INSERT INTO honcho_meta (key, value) VALUES ('embedding_model', $1) \
                 ON CONFLICT (key) DO UPDATE SET value = honcho_meta.value RETURNING value",
                [embedder.model_id().into()],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("honcho_meta returned no model".into()))?;
        let model: String = row.try_get("", "value")?;
        if model == embedder.model_id() {
            return Ok(());
        }
        Err(StoreError::Incompatible(format!(
            "the stored embeddings come from {model} but the embedder is {}; run \
             `honcho-graphql reembed --all` to re-embed everything with it, or switch back to {model}",
            embedder.model_id()
        )))
    }
}
