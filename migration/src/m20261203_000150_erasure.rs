//! Erasure (docs/erasure.md): the durable job that erases a peer in batches and resumes after a
//! crash, and term statistics that forget a lexeme once no message holds it.
//!
//! `search_stats_remove` used to leave a lexeme's row at `docs = 0` when its last message went,
//! so the word an erased message held stayed readable in `search_terms`. It now deletes such rows
//! (found through a partial index that holds only them, so the delete reads nothing else), and
//! the rows left at zero by earlier deletes go now.

use sea_orm_migration::prelude::*;

use crate::m20261201_000010_search_term_stats::REMOVE;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// [`REMOVE`] replacing the function it created.
fn remove_function() -> String {
    REMOVE.replacen("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
}

/// [`remove_function`] that also deletes the rows it brought to zero.
fn remove_function_forgetting_zeros() -> String {
    remove_function().replacen(
        "RETURN NULL;",
        "DELETE FROM search_terms
       WHERE docs <= 0 AND workspace_name IN (SELECT DISTINCT workspace_name FROM old_rows);
       RETURN NULL;",
        1,
    )
}

const JOBS: &str = "CREATE TABLE erasure_jobs (
   id TEXT PRIMARY KEY CHECK (length(id) = 21 AND id ~ '^[A-Za-z0-9_-]+$'),
   workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
   peer_name TEXT NOT NULL,
   keep_observed BOOLEAN NOT NULL,
   phase TEXT NOT NULL DEFAULT 'queue'
     CHECK (phase IN ('queue', 'messages', 'conclusions', 'peer', 'done')),
   messages_total BIGINT NOT NULL,
   messages_erased BIGINT NOT NULL DEFAULT 0,
   conclusions_erased BIGINT NOT NULL DEFAULT 0,
   created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
   updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
   finished_at TIMESTAMPTZ
 )";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let up = [
            JOBS.to_owned(),
            // One unfinished job per peer: starting again resumes it.
            "CREATE UNIQUE INDEX uq_erasure_jobs_running ON erasure_jobs (workspace_name, peer_name) \
             WHERE phase <> 'done'"
                .to_owned(),
            "CREATE INDEX ix_search_terms_gone ON search_terms (workspace_name) WHERE docs <= 0"
                .to_owned(),
            remove_function_forgetting_zeros(),
            "DELETE FROM search_terms WHERE docs <= 0".to_owned(),
        ];
        crate::run_sql(manager, &up).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let down = [
            remove_function(),
            "DROP INDEX IF EXISTS ix_search_terms_gone".to_owned(),
            "DROP TABLE IF EXISTS erasure_jobs".to_owned(),
        ];
        crate::run_sql(manager, &down).await
    }
}
