//! Rebuilds the messages' bit index (HNSW over the vectors' sign bits) with a lighter graph:
//! `MESSAGE_GRAPH_M` links per element and a beam of `MESSAGE_GRAPH_EF_CONSTRUCTION`, where it
//! had pgvector's defaults (16 and 64). Inserting a message joins it to its nearest elements and
//! prunes each of their link lists again, which costs about `m²` distances per neighbour, after
//! searching the graph with the construction beam. With the defaults that work grew with the
//! graph until it was most of a `createMessages` batch: a batch of 100 into a session of 10,000
//! took about twice as long as one into an empty one (bench/history/2026-12.md, "Ingest: a lighter
//! graph"). The looser graph finds a query's true neighbours a little less often; a search makes
//! up for it with a scan beam as wide as the candidates it reads (`hnsw.ef_search`,
//! src/store/tx.rs), and ranks those candidates by exact cosine anyway.
//!
//! The new graph is built beside the old one and takes its name at the end, so reads go on
//! while it builds; writes to `messages` wait for it (`CREATE INDEX` without `CONCURRENTLY`,
//! which a migration's transaction cannot run).

use sea_orm_migration::prelude::*;

use crate::m20261201_000070_binary_quantized_message_index::current_dims;
use crate::{MESSAGE_GRAPH_EF_CONSTRUCTION, MESSAGE_GRAPH_M, message_vector_index_shaped};

#[derive(DeriveMigrationName)]
pub struct Migration;

async fn rebuild(manager: &SchemaManager<'_>, m: u32, ef_construction: u32) -> Result<(), DbErr> {
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
        rebuild(manager, MESSAGE_GRAPH_M, MESSAGE_GRAPH_EF_CONSTRUCTION).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, 16, 64).await
    }
}
