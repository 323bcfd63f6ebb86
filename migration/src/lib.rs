//! The only way the database schema changes. Every migration has a working `down()`.

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_initial;
mod m20261130_000002_conclusion_public_metadata;
mod m20261201_000010_search_term_stats;
mod m20261201_000011_author_in_search_text;
mod m20261201_000040_deriver_queue;
mod m20261201_000050_drop_session_is_active;
mod m20261201_000060_conclusion_search_text;
mod m20261201_000061_embedding_text_marker;
mod m20261201_000070_binary_quantized_message_index;
mod m20261201_000080_session_list_indexes;

use std::sync::atomic::{AtomicU32, Ordering};

/// Dimension of the `vector` columns created by the initial migration. The server sets it from its
/// embedder before migrating; the migration records it in `honcho_meta` so later starts can check it.
static EMBEDDING_DIMS: AtomicU32 = AtomicU32::new(DEFAULT_EMBEDDING_DIMS);

/// all-MiniLM-L6-v2, the default embedder.
pub const DEFAULT_EMBEDDING_DIMS: u32 = 384;

pub fn set_embedding_dims(dims: u32) {
    EMBEDDING_DIMS.store(dims, Ordering::SeqCst);
}

pub(crate) fn embedding_dims() -> u32 {
    EMBEDDING_DIMS.load(Ordering::SeqCst)
}

/// The HNSW index over a table's full-precision vectors (cosine), as conclusions have it.
pub fn full_precision_vector_index(table: &str) -> String {
    format!(
        "CREATE INDEX ix_{table}_embedding_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) \
         WITH (m = 16, ef_construction = 64)"
    )
}

/// The messages' vector index: HNSW over the embeddings' sign bits (Hamming distance). A query
/// must order by the same expression, `binary_quantize(embedding)::bit(dims)`, to use it.
pub fn message_vector_index(dims: u32) -> String {
    format!(
        "CREATE INDEX ix_messages_embedding_hnsw ON messages \
         USING hnsw ((binary_quantize(embedding)::bit({dims})) bit_hamming_ops) \
         WITH (m = 16, ef_construction = 64)"
    )
}

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_initial::Migration),
            Box::new(m20261130_000002_conclusion_public_metadata::Migration),
            Box::new(m20261201_000040_deriver_queue::Migration),
            Box::new(m20261201_000010_search_term_stats::Migration),
            Box::new(m20261201_000011_author_in_search_text::Migration),
            Box::new(m20261201_000050_drop_session_is_active::Migration),
            Box::new(m20261201_000060_conclusion_search_text::Migration),
            Box::new(m20261201_000061_embedding_text_marker::Migration),
            Box::new(m20261201_000070_binary_quantized_message_index::Migration),
            Box::new(m20261201_000080_session_list_indexes::Migration),
        ]
    }
}
