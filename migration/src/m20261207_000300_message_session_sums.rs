//! The summed vectors of each session's messages (`message_session_sums`), so a search of a
//! workspace scans the blocks of its nearest sessions only instead of every block
//! (`message_blocks`, m20261206_000280): at a million messages the exact scan of 31,521 block
//! sums was a quarter of a workspace search, and a workspace has a few hundred or thousand
//! sessions where it has tens of thousands of blocks.
//!
//! The same statement-level trigger functions as the blocks keep them, one more grouped upsert
//! (or subtraction) each, so every write path that moves a block's sum moves its session's.

use sea_orm_migration::prelude::*;

use crate::m20261201_000070_binary_quantized_message_index::current_dims;
use crate::m20261206_000280_message_blocks::{
    Grain, add, blocks, changed, delete_function, insert_function, subtract, update_function,
};
use crate::m20261207_000290_block_update_skips_first_vectors::guarded;
use crate::run_sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn sessions() -> Grain {
    Grain {
        table: "message_session_sums",
        keys: &["workspace_name", "session_name"],
        of_row: vec!["workspace_name".into(), "session_name".into()],
    }
}

/// The three trigger functions over `grains`, each grain's statements in turn.
fn functions(grains: &[Grain]) -> [String; 3] {
    let each = |f: &dyn Fn(&Grain) -> String| grains.iter().map(f).collect::<Vec<_>>().join(" ");
    [
        insert_function(&each(&|g| add(g, "new_rows"))),
        delete_function(&each(&|g| subtract(g, "old_rows"))),
        update_function(
            &each(&|g| add(g, &changed("n"))),
            &guarded(&each(&|g| subtract(g, &changed("o")))),
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let dims = current_dims(manager).await?;
        let mut sql = vec![
            format!(
                "CREATE TABLE message_session_sums (
                   workspace_name TEXT NOT NULL,
                   session_name TEXT NOT NULL,
                   vectors INT NOT NULL,
                   vector_sum VECTOR({dims}) NOT NULL,
                   PRIMARY KEY (workspace_name, session_name)
                 )"
            ),
            // From the blocks, which already sum every vector: one row per block, not per message.
            "INSERT INTO message_session_sums (workspace_name, session_name, vectors, vector_sum)
               SELECT workspace_name, session_name, sum(vectors), sum(vector_sum)
               FROM message_blocks GROUP BY 1, 2"
                .to_owned(),
        ];
        sql.extend(functions(&[blocks(), sessions()]));
        run_sql(manager, &sql).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut sql = functions(&[blocks()]).to_vec();
        sql.push("DROP TABLE IF EXISTS message_session_sums".to_owned());
        run_sql(manager, &sql).await
    }
}
