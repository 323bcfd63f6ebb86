//! `sessions.is_active` goes: nothing ever set it false (a deleted session is deleted, with its
//! messages, in one transaction), so every query filtering on it filtered nothing. The API's
//! `Session.isActive` stays, always true for a session that exists.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &["ALTER TABLE sessions DROP COLUMN is_active"],
    down: &["ALTER TABLE sessions ADD COLUMN is_active BOOLEAN NOT NULL DEFAULT true"],
);
