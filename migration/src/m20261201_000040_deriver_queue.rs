//! The deriver's queue and provenance.
//!
//! - `deriver_units`: one row per work unit (session, observer, observed), holding what the
//!   claim needs (pending tokens, oldest pending time) and the lease of the worker that holds it.
//! - `deriver_items`: one row per message waiting for a unit, in `seq_in_session` order.
//! - `conclusion_messages`: the messages an explicit conclusion was drawn from.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE deriver_units (
       id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       workspace_name TEXT NOT NULL,
       session_name TEXT NOT NULL,
       observer TEXT NOT NULL,
       observed TEXT NOT NULL,
       pending_tokens BIGINT NOT NULL DEFAULT 0,
       oldest_at TIMESTAMPTZ,
       lease_owner TEXT,
       lease_until TIMESTAMPTZ,
       failed_at TIMESTAMPTZ,
       last_error TEXT,
       last_error_at TIMESTAMPTZ,
       CONSTRAINT uq_deriver_units_key UNIQUE (workspace_name, session_name, observer, observed),
       FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name) ON DELETE CASCADE,
       FOREIGN KEY (observer, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE,
       FOREIGN KEY (observed, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE
     )",
    // What a claim scans: units with work and no failure, oldest first.
    "CREATE INDEX ix_deriver_units_ready ON deriver_units (oldest_at) \
     WHERE pending_tokens > 0 AND failed_at IS NULL",
    "CREATE INDEX ix_deriver_units_workspace ON deriver_units (workspace_name)",
    "CREATE TABLE deriver_items (
       id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       unit_id BIGINT NOT NULL REFERENCES deriver_units (id) ON DELETE CASCADE,
       message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
       seq_in_session BIGINT NOT NULL,
       token_count INTEGER NOT NULL,
       claimed BOOLEAN NOT NULL DEFAULT false,
       enqueued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       CONSTRAINT uq_deriver_items_unit_message UNIQUE (unit_id, message_id)
     )",
    "CREATE INDEX ix_deriver_items_unit_seq ON deriver_items (unit_id, seq_in_session)",
    "CREATE INDEX ix_deriver_items_message ON deriver_items (message_id)",
    "CREATE TABLE conclusion_messages (
       conclusion_id TEXT NOT NULL REFERENCES conclusions (id) ON DELETE CASCADE,
       message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
       PRIMARY KEY (conclusion_id, message_id)
     )",
    "CREATE INDEX ix_conclusion_messages_message ON conclusion_messages (message_id)",
];

sql_migration!(
    up: UP,
    down: &["DROP TABLE IF EXISTS conclusion_messages, deriver_items, deriver_units"],
);
