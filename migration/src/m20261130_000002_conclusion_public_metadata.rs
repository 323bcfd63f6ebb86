//! Public, user-writable `metadata` on conclusions with a GIN index for containment
//! filters. The index is built CONCURRENTLY so a large table keeps taking writes, which PostgreSQL
//! only allows outside a transaction block: this migration opts out of the wrapping transaction.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(false)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // NOT NULL with a constant default is a catalog-only change on PostgreSQL >= 11: existing
        // rows read '{}' without a table rewrite.
        db.execute_unprepared(
            "ALTER TABLE conclusions ADD COLUMN IF NOT EXISTS metadata JSONB NOT NULL DEFAULT '{}'::jsonb",
        )
        .await?;
        // A failed concurrent build leaves an INVALID index behind; drop it so a rerun rebuilds it.
        db.execute_unprepared(
            "DO $$ BEGIN
               IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                          WHERE c.relname = 'ix_conclusions_metadata_gin' AND NOT i.indisvalid) THEN
                 DROP INDEX ix_conclusions_metadata_gin;
               END IF;
             END $$",
        )
        .await?;
        db.execute_unprepared(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_conclusions_metadata_gin \
             ON conclusions USING gin (metadata)",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("DROP INDEX CONCURRENTLY IF EXISTS ix_conclusions_metadata_gin")
            .await?;
        db.execute_unprepared("ALTER TABLE conclusions DROP COLUMN IF EXISTS metadata")
            .await?;
        Ok(())
    }
}
