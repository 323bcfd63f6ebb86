//! Rebuilds the messages' bit index with `MESSAGE_GRAPH_M` links and the construction beam of
//! `MESSAGE_GRAPH_EF_CONSTRUCTION` (24) again, undoing m20261205_000260's 64.
//!
//! Measured on one million-message corpus in one sitting (bench/history/2026-12.md, "Scale: the
//! `--quick` sitting"), the graph built at 64 halved ingest at that size (468 against 228-263
//! messages/s) and its recall@10 was 0.411-0.450 against 0.483-0.578 for the graph built at 24.
//! What a million messages lose was later traced to how the graph links into the planted
//! conversations, small clusters unlike the rest (bench/history/2026-12.md, "Scale: islands, not
//! age"), not to its construction beam.

use sea_orm_migration::prelude::*;

use crate::m20261202_000090_lighter_message_graph::rebuild;
use crate::m20261205_000260_wider_message_graph_beam::WIDER_EF_CONSTRUCTION;
use crate::{MESSAGE_GRAPH_EF_CONSTRUCTION, MESSAGE_GRAPH_M};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, MESSAGE_GRAPH_M, MESSAGE_GRAPH_EF_CONSTRUCTION).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, MESSAGE_GRAPH_M, WIDER_EF_CONSTRUCTION).await
    }
}
