//! Public, user-writable `metadata` on conclusions with a GIN index for containment
//! filters. The index is built CONCURRENTLY so a large table keeps taking writes, which PostgreSQL
//! only allows outside a transaction block: this migration opts out of the wrapping transaction.

use sea_orm_migration::prelude::*;

use crate::run_sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(false)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_sql(
            manager,
            &[
                // NOT NULL with a constant default is a catalog-only change on PostgreSQL >= 11:
                // existing rows read '{}' without a table rewrite.
                "ALTER TABLE conclusions ADD COLUMN IF NOT EXISTS metadata JSONB NOT NULL DEFAULT '{}'::jsonb",
                // A failed concurrent build leaves an INVALID index behind; drop it so a rerun
                // rebuilds it.
                "DO $$ BEGIN
                   IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                              WHERE c.relname = 'ix_conclusions_metadata_gin' AND NOT i.indisvalid) THEN
                     DROP INDEX ix_conclusions_metadata_gin;
                   END IF;
                 END $$",
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_conclusions_metadata_gin \
                 ON conclusions USING gin (metadata)",
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_sql(
            manager,
            &[
                "DROP INDEX CONCURRENTLY IF EXISTS ix_conclusions_metadata_gin",
                "ALTER TABLE conclusions DROP COLUMN IF EXISTS metadata",
            ],
        )
        .await
    }
}
