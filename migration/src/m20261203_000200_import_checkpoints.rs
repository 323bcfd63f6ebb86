//! Where an `import-honcho` run got to (src/store/export/checkpoint.rs): one row per source
//! server and workspace, so that a run stopped midway goes on from its last page instead of
//! reading everything again. The row holds a position in the source's listings, no content.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &["CREATE TABLE import_checkpoints (
             source TEXT NOT NULL,
             workspace_name TEXT NOT NULL,
             position JSONB NOT NULL,
             updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
             PRIMARY KEY (source, workspace_name)
           )"],
    down: &["DROP TABLE IF EXISTS import_checkpoints"],
);
