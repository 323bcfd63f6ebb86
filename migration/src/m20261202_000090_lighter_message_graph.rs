//! Rebuilds the messages' bit index (HNSW over the vectors' sign bits) with a lighter graph:
//! 12 links per element and a beam of 24, where it had pgvector's defaults (16 and 64).
//! Inserting a message joins it to its nearest elements and
//! prunes each of their link lists again, which costs about `m²` distances per neighbour, after
//! searching the graph with the construction beam. With the defaults that work grew with the
//! graph until it was most of a `createMessages` batch: a batch of 100 into a session of 10,000
//! took about twice as long as one into an empty one (bench/history/2026-12.md, "Ingest: a lighter
//! graph"). The looser graph finds a query's true neighbours a little less often; a search makes
//! up for it with a scan beam as wide as the candidates it reads (`hnsw.ef_search`,
//! src/store/tx.rs), and ranks those candidates by exact cosine anyway.
//!
//! The shape is frozen here as it was built: m20261205_000260 later widened the construction
//! beam to 64 again, and m20261206_000270 brought it back to 24 when 64 proved to halve ingest
//! at a million messages without reaching more neighbours.
//!
//! The new graph is built beside the old one and takes its name at the end, so reads go on
//! while it builds; writes to `messages` wait for it (`CREATE INDEX` without `CONCURRENTLY`,
//! which a migration's transaction cannot run).

use sea_orm_migration::prelude::*;

use crate::m20261201_000070_binary_quantized_message_index::current_dims;
use crate::message_vector_index_shaped;

/// The links per element this migration built the graph with.
pub(crate) const M: u32 = 12;
/// The construction beam this migration built the graph with.
pub(crate) const EF_CONSTRUCTION: u32 = 24;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Builds the messages' bit graph anew with `m` links and a beam of `ef_construction`, beside the
/// old one, and gives it the old one's name.
pub(crate) async fn rebuild(
    manager: &SchemaManager<'_>,
    m: u32,
    ef_construction: u32,
) -> Result<(), DbErr> {
    let dims = current_dims(manager).await?;
    let db = manager.get_connection();
    db.execute_unprepared(&message_vector_index_shaped(
        "ix_messages_embedding_hnsw_next",
        dims,
        m,
        ef_construction,
    ))
    .await?;
    db.execute_unprepared(
        "DROP INDEX IF EXISTS ix_messages_embedding_hnsw;
         ALTER INDEX ix_messages_embedding_hnsw_next RENAME TO ix_messages_embedding_hnsw",
    )
    .await?;
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, M, EF_CONSTRUCTION).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, 16, 64).await
    }
}
