//! Rebuilds the messages' bit index with the construction beam widened from 24 back to
//! `MESSAGE_GRAPH_EF_CONSTRUCTION` (64), keeping `MESSAGE_GRAPH_M` links per element.
//!
//! A beam of 24 kept ingest flat (m20261202_000090) but gave each insertion too few candidates
//! to choose its links from. At a million messages the graph it built no longer reached a
//! query's neighbours: recall@10 on the planted evaluation was about 0.39 at a scan beam of 100
//! and 0.41 even at 1,000, against 0.63 for an exact scan of the same vectors (bench-scale,
//! `--search-only`). A wider construction beam picks better links; it makes each insertion's
//! neighbour search longer, but not its relinking, which is what grew with the graph and
//! what the lighter `m` still bounds. bench/README, "Scale", has the figures on both sides.

use sea_orm_migration::prelude::*;

use crate::m20261202_000090_lighter_message_graph::{EF_CONSTRUCTION, M, rebuild};
use crate::{MESSAGE_GRAPH_EF_CONSTRUCTION, MESSAGE_GRAPH_M};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, MESSAGE_GRAPH_M, MESSAGE_GRAPH_EF_CONSTRUCTION).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, M, EF_CONSTRUCTION).await
    }
}
