//! `message_blocks_update()` subtracts only when an old row had a vector. The commonest update of
//! messages is the one that writes the vectors of rows just inserted without them
//! (createMessages embeds after its insert): nothing is subtracted then, yet the subtraction read
//! the join of the old and new rows three times. For the vectors of 100 new turns of a session,
//! on a corpus of a million messages, the trigger took 3.6 ms before and 2.2 ms after (medians
//! of 15, the two functions alternating; bench/results/scale/block-update-guard-2026-12-06.txt).

use sea_orm_migration::prelude::*;

use crate::m20261206_000280_message_blocks::{add, blocks, changed, subtract, update_function};
use crate::run_sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let guarded = guarded(&subtract(&blocks(), &changed("o")));
        run_sql(
            manager,
            &[update_function(&add(&blocks(), &changed("n")), &guarded)],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_sql(
            manager,
            &[update_function(
                &add(&blocks(), &changed("n")),
                &subtract(&blocks(), &changed("o")),
            )],
        )
        .await
    }
}

/// `subtraction`, run only when an old row had a vector.
pub(crate) fn guarded(subtraction: &str) -> String {
    format!(
        "IF EXISTS (SELECT 1 FROM old_rows WHERE embedding IS NOT NULL) THEN {subtraction} END IF;"
    )
}
