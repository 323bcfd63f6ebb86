//! The initial schema (docs/architecture.md, "Data model"): Honcho's tables and columns, with conclusions in a table
//! named for what it holds (Honcho's `documents`) and WITHOUT public metadata, which arrives in the
//! next migration, as it would on an existing deployment.

use sea_orm_migration::prelude::*;

use crate::run_sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Names: 1..512 chars of `[A-Za-z0-9_-]` (Honcho v3.0.12 checks the charset at its API edge only;
/// we also let the database refuse what the API would).
const NAME_CHECK: &str = "CHECK (length(name) BETWEEN 1 AND 512 AND name ~ '^[A-Za-z0-9_-]+$')";
/// Public ids: 21-char nanoids.
const NANOID_CHECK: &str = "CHECK (length(id) = 21 AND id ~ '^[A-Za-z0-9_-]+$')";

/// A table of things named within a workspace (peers, sessions): the columns they share, with
/// `extra` after the workspace's, and the index a workspace's list of them reads.
fn named_in_workspace(table: &str, extra: &str) -> [String; 2] {
    [
        format!(
            "CREATE TABLE {table} (
               id TEXT PRIMARY KEY {NANOID_CHECK},
               name TEXT NOT NULL {NAME_CHECK},
               workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,{extra}
               metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               internal_metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               configuration JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
               CONSTRAINT uq_{table}_name_workspace UNIQUE (name, workspace_name)
             )"
        ),
        format!("CREATE INDEX ix_{table}_workspace_created ON {table} (workspace_name, created_at, id)"),
    ]
}

fn schema_sql(dims: u32) -> Vec<String> {
    [
        "CREATE EXTENSION IF NOT EXISTS vector".into(),
        "CREATE EXTENSION IF NOT EXISTS pg_trgm".into(),
        // Facts the server checks at start-up: the embedding dimension and the model that filled
        // the vector columns.
        "CREATE TABLE honcho_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)".into(),
        format!("INSERT INTO honcho_meta (key, value) VALUES ('embedding_dims', '{dims}')"),
        format!(
            "CREATE TABLE workspaces (
               id TEXT PRIMARY KEY {NANOID_CHECK},
               name TEXT NOT NULL UNIQUE {NAME_CHECK},
               metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               internal_metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               configuration JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               created_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )"
        ),
        "CREATE INDEX ix_workspaces_created_at ON workspaces (created_at, id)".into(),
    ]
    .into_iter()
    .chain(named_in_workspace("peers", ""))
    .chain(named_in_workspace(
        "sessions",
        "\n               is_active BOOLEAN NOT NULL DEFAULT true,",
    ))
    .chain([
        "CREATE TABLE session_peers (
           workspace_name TEXT NOT NULL,
           session_name TEXT NOT NULL,
           peer_name TEXT NOT NULL,
           configuration JSONB NOT NULL DEFAULT '{}'::jsonb,
           internal_metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
           joined_at TIMESTAMPTZ NOT NULL DEFAULT now(),
           left_at TIMESTAMPTZ,
           PRIMARY KEY (workspace_name, session_name, peer_name),
           FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name) ON DELETE CASCADE,
           FOREIGN KEY (peer_name, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE
         )"
        .into(),
        "CREATE INDEX ix_session_peers_peer ON session_peers (workspace_name, peer_name)".into(),
        format!(
            "CREATE TABLE messages (
               id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               public_id TEXT NOT NULL UNIQUE CHECK (length(public_id) = 21 AND public_id ~ '^[A-Za-z0-9_-]+$'),
               workspace_name TEXT NOT NULL,
               session_name TEXT NOT NULL,
               peer_name TEXT NOT NULL,
               seq_in_session BIGINT NOT NULL CHECK (seq_in_session >= 1),
               content TEXT NOT NULL CHECK (length(content) <= 65535),
               metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               internal_metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               token_count INTEGER NOT NULL DEFAULT 0,
               created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
               content_tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
               embedding VECTOR({dims}),
               CONSTRAINT uq_messages_session_seq UNIQUE (workspace_name, session_name, seq_in_session),
               FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name) ON DELETE CASCADE,
               FOREIGN KEY (peer_name, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE
             )"
        ),
        "CREATE INDEX ix_messages_peer ON messages (workspace_name, peer_name)".into(),
        "CREATE INDEX ix_messages_created_at ON messages (workspace_name, created_at)".into(),
        "CREATE INDEX ix_messages_content_tsv ON messages USING gin (content_tsv)".into(),
        // Honcho v3.0.12 ORs a case-insensitive substring match into full-text search; trigrams
        // serve it.
        "CREATE INDEX ix_messages_content_trgm ON messages USING gin (content gin_trgm_ops)".into(),
        // Up to 2000 dimensions over the vectors themselves, as this migration always built it;
        // wider vectors, on which it used to fail, over their half-precision casts.
        crate::vector_index("messages", dims),
        format!(
            "CREATE TABLE conclusions (
               id TEXT PRIMARY KEY {NANOID_CHECK},
               workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
               observer TEXT NOT NULL,
               observed TEXT NOT NULL,
               session_name TEXT,
               content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 65535),
               level TEXT NOT NULL DEFAULT 'explicit'
                 CHECK (level IN ('explicit', 'deductive', 'inductive', 'contradiction')),
               times_derived INTEGER NOT NULL DEFAULT 1 CHECK (times_derived >= 1),
               source_ids TEXT[],
               internal_metadata JSONB NOT NULL DEFAULT '{{}}'::jsonb,
               embedding VECTOR({dims}),
               created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
               deleted_at TIMESTAMPTZ,
               FOREIGN KEY (observer, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE,
               FOREIGN KEY (observed, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE,
               FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name)
                 ON DELETE SET NULL (session_name)
             )"
        ),
        "CREATE INDEX ix_conclusions_workspace_created ON conclusions (workspace_name, created_at, id) \
         WHERE deleted_at IS NULL"
            .into(),
        "CREATE INDEX ix_conclusions_observer_observed ON conclusions (workspace_name, observer, observed)".into(),
        "CREATE INDEX ix_conclusions_source_ids_gin ON conclusions USING gin (source_ids)".into(),
        "CREATE INDEX ix_conclusions_deleted_at ON conclusions (deleted_at) WHERE deleted_at IS NOT NULL".into(),
        crate::vector_index("conclusions", dims),
        // One live derived conclusion per (observer, observed, content): deriving it again reinforces
        // the existing row (times_derived + 1) through ON CONFLICT, race-free.
        "CREATE UNIQUE INDEX uq_conclusions_derived_content ON conclusions \
         (workspace_name, observer, observed, md5(content)) \
         WHERE deleted_at IS NULL AND level <> 'explicit'"
            .into(),
    ])
    .collect()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let dims = crate::embedding_dims();
        crate::check_embedding_dims(dims).map_err(DbErr::Custom)?;
        run_sql(manager, &schema_sql(dims)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Extensions stay: other databases' objects or a later `up` may use them.
        run_sql(manager, &["DROP TABLE IF EXISTS conclusions, messages, session_peers, sessions, peers, workspaces, honcho_meta",]).await
    }
}
