//! Messages' vectors are indexed by their sign bits (pgvector's `binary_quantize`, Hamming
//! distance) instead of the full vectors. Inserting into an HNSW graph costs one distance per
//! visited neighbour, and at 1536 dimensions those distances were ~90% of a `createMessages`
//! batch; on bits they are a few machine words each. The search reads more candidates from the
//! bit index and ranks them by exact cosine over the stored vectors (src/store/search.rs), so the
//! stored vectors and what a search returns keep full precision. Conclusions keep the
//! full-precision index: the deriver writes them off any client's path.

use sea_orm_migration::prelude::*;

use sea_orm_migration::sea_orm::{ConnectionTrait, Statement};

use crate::{message_vector_index_shaped, run_sql, vector_index};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The dimension the vector columns have now (recorded by the initial migration, kept by the
/// server when the embedder changes).
pub(crate) async fn current_dims(manager: &SchemaManager<'_>) -> Result<u32, DbErr> {
    let db = manager.get_connection();
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT value FROM honcho_meta WHERE key = 'embedding_dims'",
        ))
        .await?
        .ok_or_else(|| DbErr::Custom("honcho_meta has no embedding_dims".into()))?;
    let value: String = row.try_get("", "value")?;
    value
        .parse()
        .map_err(|e| DbErr::Custom(format!("embedding_dims {value:?}: {e}")))
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let dims = current_dims(manager).await?;
        let index = message_vector_index_shaped("ix_messages_embedding_hnsw", dims, 16, 64);
        run_sql(manager, &[DROP_INDEX.to_owned(), index]).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let index = vector_index("messages", current_dims(manager).await?);
        run_sql(manager, &[DROP_INDEX.to_owned(), index]).await
    }
}

const DROP_INDEX: &str = "DROP INDEX IF EXISTS ix_messages_embedding_hnsw";
