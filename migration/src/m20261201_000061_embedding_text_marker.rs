//! Records what the stored vectors were embedded from (`honcho_meta.embedding_text`): `plain`
//! when vectors written by an older server exist (a message alone, a conclusion without its
//! peers' ids), `contextual` otherwise. Nothing tells an old vector from a new one, so any vector
//! present when this runs counts as old. `serve` warns while it is `plain`;
//! `honcho-graphql reembed --all` recomputes every vector and records `contextual`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "INSERT INTO honcho_meta (key, value)
                 SELECT 'embedding_text',
                        CASE WHEN EXISTS (SELECT 1 FROM messages WHERE embedding IS NOT NULL)
                               OR EXISTS (SELECT 1 FROM conclusions WHERE embedding IS NOT NULL)
                             THEN 'plain' ELSE 'contextual' END
                 ON CONFLICT (key) DO NOTHING",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DELETE FROM honcho_meta WHERE key = 'embedding_text'")
            .await?;
        Ok(())
    }
}
