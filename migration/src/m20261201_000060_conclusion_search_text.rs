//! Conclusions get a full-text index of their content and of both peers' ids (observer and
//! observed), so that "what do we know about caroline?" finds conclusions about caroline by her
//! id as well as by meaning. A generated column (the table is rewritten once) and its GIN index.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(
            "ALTER TABLE conclusions ADD COLUMN content_tsv TSVECTOR GENERATED ALWAYS AS \
             (to_tsvector('english', content) || to_tsvector('english', observer) \
              || to_tsvector('english', observed)) STORED",
        )
        .await?;
        db.execute_unprepared(
            "CREATE INDEX ix_conclusions_content_tsv ON conclusions USING gin (content_tsv)",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE conclusions DROP COLUMN content_tsv")
            .await?;
        Ok(())
    }
}
