//! The summed vectors of each block of [`MESSAGE_BLOCK_TURNS`] consecutive turns of a session
//! (`message_blocks`), so a search can find the stretches of conversation nearest a question
//! without the messages' HNSW graph. In a large workspace that graph reaches some conversations
//! badly: one whose speakers are in no other message is a small cluster of vectors unlike the
//! rest, and the graph's links into it depend on how its build went. A block's sum points where
//! its turns' mean points, and an exact scan of the sums reads one row per block.
//!
//! Statement-level triggers on `messages` keep the sums for every write path (createMessages, the
//! embeddings written after the insert, reembed, deletes and the cascades from sessions and
//! workspaces). A sum is added to or subtracted from, never recomputed from the block's rows, so
//! two writers only meet on a block's row, and they lock rows in key order. No foreign key: the
//! cascade that deletes a session's messages empties its blocks through the same triggers, in
//! whatever order PostgreSQL runs the two cascades.

use sea_orm_migration::prelude::*;

use crate::m20261201_000070_binary_quantized_message_index::current_dims;
use crate::{MESSAGE_BLOCK_TURNS, run_sql};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Adds the vectors of `rows` (a transition table, or the messages) to their blocks.
fn add(rows: &str) -> String {
    format!(
        "INSERT INTO message_blocks AS b (workspace_name, session_name, block, vectors, vector_sum)
           SELECT workspace_name, session_name, seq_in_session / {MESSAGE_BLOCK_TURNS}, count(*), sum(embedding)
           FROM {rows} WHERE embedding IS NOT NULL
           GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
         ON CONFLICT (workspace_name, session_name, block) DO UPDATE
           SET vectors = b.vectors + EXCLUDED.vectors, vector_sum = b.vector_sum + EXCLUDED.vector_sum;"
    )
}

/// Subtracts the vectors of `rows` from their blocks and drops the blocks left empty.
pub(crate) fn subtract(rows: &str) -> String {
    let keys = format!(
        "SELECT DISTINCT workspace_name, session_name, seq_in_session / {MESSAGE_BLOCK_TURNS}
         FROM {rows} WHERE embedding IS NOT NULL"
    );
    format!(
        "PERFORM 1 FROM message_blocks b
           WHERE (b.workspace_name, b.session_name, b.block) IN ({keys})
           ORDER BY b.workspace_name, b.session_name, b.block FOR UPDATE;
         UPDATE message_blocks b
           SET vectors = b.vectors - g.vectors, vector_sum = b.vector_sum - g.vector_sum
           FROM (SELECT workspace_name, session_name, seq_in_session / {MESSAGE_BLOCK_TURNS} AS block,
                        count(*) AS vectors, sum(embedding) AS vector_sum
                 FROM {rows} WHERE embedding IS NOT NULL GROUP BY 1, 2, 3) g
           WHERE b.workspace_name = g.workspace_name AND b.session_name = g.session_name AND b.block = g.block;
         DELETE FROM message_blocks b
           WHERE b.vectors <= 0 AND (b.workspace_name, b.session_name, b.block) IN ({keys});"
    )
}

/// The `side` (`o`: old, `n`: new) of the rows an update changed in what a block sums: its
/// vector or its place.
pub(crate) fn changed(side: &str) -> String {
    format!(
        "(SELECT {side}.* FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE o.embedding IS DISTINCT FROM n.embedding OR o.workspace_name <> n.workspace_name
             OR o.session_name <> n.session_name OR o.seq_in_session <> n.seq_in_session) AS {side}_changed"
    )
}

/// `message_blocks_update()`: it adds the changed rows' new vectors, then runs `subtraction`
/// (this migration: `subtract(&changed("o"))`; m20261207_000290 guards it, skipped when no old
/// row had a vector).
pub(crate) fn update_function(subtraction: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION message_blocks_update() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN {} {subtraction} RETURN NULL; END $$",
        add(&changed("n"))
    )
}

fn up_sql(dims: u32) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE message_blocks (
               workspace_name TEXT NOT NULL,
               session_name TEXT NOT NULL,
               block BIGINT NOT NULL,
               vectors INT NOT NULL,
               vector_sum VECTOR({dims}) NOT NULL,
               PRIMARY KEY (workspace_name, session_name, block)
             )"
        ),
        format!(
            "CREATE FUNCTION message_blocks_insert() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN {} RETURN NULL; END $$",
            add("new_rows")
        ),
        format!(
            "CREATE FUNCTION message_blocks_delete() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN {} RETURN NULL; END $$",
            subtract("old_rows")
        ),
        update_function(&subtract(&changed("o"))),
        "CREATE TRIGGER messages_blocks_insert AFTER INSERT ON messages
           REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION message_blocks_insert()"
            .into(),
        "CREATE TRIGGER messages_blocks_delete AFTER DELETE ON messages
           REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION message_blocks_delete()"
            .into(),
        "CREATE TRIGGER messages_blocks_update AFTER UPDATE ON messages
           REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
           FOR EACH STATEMENT EXECUTE FUNCTION message_blocks_update()"
            .into(),
        add("messages"),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let dims = current_dims(manager).await?;
        run_sql(manager, &up_sql(dims)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_sql(
            manager,
            &["DROP TRIGGER IF EXISTS messages_blocks_insert ON messages;
               DROP TRIGGER IF EXISTS messages_blocks_delete ON messages;
               DROP TRIGGER IF EXISTS messages_blocks_update ON messages;
               DROP FUNCTION IF EXISTS message_blocks_insert(), message_blocks_delete(), message_blocks_update();
               DROP TABLE IF EXISTS message_blocks"],
        )
        .await
    }
}
