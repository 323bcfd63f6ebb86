//! Rebuilt the messages' bit index with the construction beam widened from 24 to 64, keeping 12
//! links per element. It was applied by the server of 2026-12-05 and stays in the list so that
//! databases which recorded it still migrate; m20261206_000270 undoes it (the figures are there).
//!
//! A beam of 24 kept ingest flat (m20261202_000090) but was thought to give each insertion too
//! few candidates to choose its links from: at a million messages recall@10 on the planted
//! evaluation was about 0.41 at a scan beam of 1,000, against 0.63 for an exact scan.

use sea_orm_migration::prelude::*;

use crate::m20261202_000090_lighter_message_graph::{EF_CONSTRUCTION, M, rebuild};

/// The construction beam this migration built the graph with.
pub(crate) const WIDER_EF_CONSTRUCTION: u32 = 64;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, M, WIDER_EF_CONSTRUCTION).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        rebuild(manager, M, EF_CONSTRUCTION).await
    }
}
