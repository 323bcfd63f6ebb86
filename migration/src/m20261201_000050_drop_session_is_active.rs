//! `sessions.is_active` goes: nothing ever set it false (a deleted session is deleted, with its
//! messages, in one transaction), so every query filtering on it filtered nothing. The API's
//! `Session.isActive` stays, always true for a session that exists.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE sessions DROP COLUMN is_active")
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "ALTER TABLE sessions ADD COLUMN is_active BOOLEAN NOT NULL DEFAULT true",
            )
            .await?;
        Ok(())
    }
}
