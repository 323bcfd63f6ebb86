//! Scopes (Honcho main after v3.0.12): named groups of a workspace's sessions that bound what
//! recall may see.
//!
//! - `scopes`: one row per (workspace, name), with its metadata.
//! - `scope_sessions`: membership. A session deleted, or a scope deleted, takes its rows with it;
//!   the index on the session side answers "which scopes hold this session" (what a scope key's
//!   check asks) without scanning every scope.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE scopes (
       id TEXT PRIMARY KEY,
       name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 512),
       workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
       metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
       created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       CONSTRAINT uq_scopes_name UNIQUE (workspace_name, name)
     )",
    "CREATE TABLE scope_sessions (
       workspace_name TEXT NOT NULL,
       scope_name TEXT NOT NULL,
       session_name TEXT NOT NULL,
       added_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       PRIMARY KEY (workspace_name, scope_name, session_name),
       FOREIGN KEY (workspace_name, scope_name) REFERENCES scopes (workspace_name, name)
         ON DELETE CASCADE ON UPDATE CASCADE,
       FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name)
         ON DELETE CASCADE
     )",
    "CREATE INDEX ix_scope_sessions_session ON scope_sessions (workspace_name, session_name)",
    "CREATE INDEX ix_scopes_created ON scopes (workspace_name, created_at, id)",
];

sql_migration!(
    up: UP,
    down: &["DROP TABLE IF EXISTS scope_sessions, scopes"],
);
