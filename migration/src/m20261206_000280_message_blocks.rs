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

/// A table of summed vectors: its name and what it sums by, as the columns of its key and the
/// expressions that give a message row's key (`message_blocks`: a block of a session;
/// m20261207_000300's `message_session_sums`: a session).
pub(crate) struct Grain {
    pub table: &'static str,
    pub keys: &'static [&'static str],
    pub of_row: Vec<String>,
}

/// `message_blocks`: the blocks of [`MESSAGE_BLOCK_TURNS`] turns.
pub(crate) fn blocks() -> Grain {
    Grain {
        table: "message_blocks",
        keys: &["workspace_name", "session_name", "block"],
        of_row: vec![
            "workspace_name".into(),
            "session_name".into(),
            format!("seq_in_session / {MESSAGE_BLOCK_TURNS}"),
        ],
    }
}

impl Grain {
    fn keys(&self) -> String {
        self.keys.join(", ")
    }

    /// `b.k1, b.k2, …`
    fn qualified(&self, alias: &str) -> String {
        self.keys
            .iter()
            .map(|k| format!("{alias}.{k}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `1, 2, …`: the key's positions in a select list that starts with it.
    fn positions(&self) -> String {
        (1..=self.keys.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The key of a message row, each expression named after its column.
    fn of_row_as_keys(&self) -> String {
        self.of_row
            .iter()
            .zip(self.keys)
            .map(|(e, k)| {
                if e == k {
                    e.clone()
                } else {
                    format!("{e} AS {k}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Adds the vectors of `rows` (a transition table, or the messages) to their sums in `grain`.
pub(crate) fn add(grain: &Grain, rows: &str) -> String {
    format!(
        "INSERT INTO {table} AS b ({keys}, vectors, vector_sum)
           SELECT {of_row}, count(*), sum(embedding)
           FROM {rows} WHERE embedding IS NOT NULL
           GROUP BY {positions} ORDER BY {positions}
         ON CONFLICT ({keys}) DO UPDATE
           SET vectors = b.vectors + EXCLUDED.vectors, vector_sum = b.vector_sum + EXCLUDED.vector_sum;",
        table = grain.table,
        keys = grain.keys(),
        of_row = grain.of_row.join(", "),
        positions = grain.positions(),
    )
}

/// Subtracts the vectors of `rows` from their sums in `grain` and drops the sums left empty.
pub(crate) fn subtract(grain: &Grain, rows: &str) -> String {
    let table = grain.table;
    let positions = grain.positions();
    let key_of_b = grain.qualified("b");
    let keys = format!(
        "SELECT DISTINCT {} FROM {rows} WHERE embedding IS NOT NULL",
        grain.of_row.join(", ")
    );
    let same_key = grain
        .keys
        .iter()
        .map(|k| format!("b.{k} = g.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    format!(
        "PERFORM 1 FROM {table} b
           WHERE ({key_of_b}) IN ({keys})
           ORDER BY {key_of_b} FOR UPDATE;
         UPDATE {table} b
           SET vectors = b.vectors - g.vectors, vector_sum = b.vector_sum - g.vector_sum
           FROM (SELECT {of_row}, count(*) AS vectors, sum(embedding) AS vector_sum
                 FROM {rows} WHERE embedding IS NOT NULL GROUP BY {positions}) g
           WHERE {same_key};
         DELETE FROM {table} b
           WHERE b.vectors <= 0 AND ({key_of_b}) IN ({keys});",
        of_row = grain.of_row_as_keys(),
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

/// `message_blocks_update()`: it runs `addition` (the changed rows' new vectors added), then
/// `subtraction` (this migration: `subtract(&blocks(), &changed("o"))`; m20261207_000290 guards
/// it, skipped when no old row had a vector; m20261207_000300 keeps the sessions' sums too).
pub(crate) fn update_function(addition: &str, subtraction: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION message_blocks_update() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN {addition} {subtraction} RETURN NULL; END $$"
    )
}

/// `message_blocks_insert()` and `message_blocks_delete()`, each running `body`.
pub(crate) fn insert_function(body: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION message_blocks_insert() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN {body} RETURN NULL; END $$"
    )
}

pub(crate) fn delete_function(body: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION message_blocks_delete() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN {body} RETURN NULL; END $$"
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
        insert_function(&add(&blocks(), "new_rows")),
        delete_function(&subtract(&blocks(), "old_rows")),
        update_function(
            &add(&blocks(), &changed("n")),
            &subtract(&blocks(), &changed("o")),
        ),
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
        add(&blocks(), "messages"),
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
