//! Who spoke is searchable: the full-text index of a message holds its author's peer id after
//! its content, so "What did Caroline say about pottery?" matches Caroline's turns by both. The
//! generated column cannot change its expression in place (PostgreSQL 15), so it is dropped and
//! added again (rewriting the table), with its GIN index, and the term statistics recomputed.

use sea_orm_migration::prelude::*;

use crate::run_sql;

use crate::m20261201_000010_search_term_stats::BACKFILL;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn with_text(expression: &str) -> Vec<String> {
    let mut sql = vec![
        "ALTER TABLE messages DROP COLUMN content_tsv".to_owned(),
        format!(
            "ALTER TABLE messages ADD COLUMN content_tsv TSVECTOR GENERATED ALWAYS AS ({expression}) STORED"
        ),
        "CREATE INDEX ix_messages_content_tsv ON messages USING gin (content_tsv)".to_owned(),
    ];
    sql.extend(BACKFILL.iter().map(|s| (*s).to_owned()));
    sql
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let text = "to_tsvector('english', content) || to_tsvector('english', peer_name)";
        run_sql(manager, &with_text(text)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_sql(manager, &with_text("to_tsvector('english', content)")).await
    }
}
