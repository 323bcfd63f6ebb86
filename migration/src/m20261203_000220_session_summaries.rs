//! Session summaries and their queue.
//!
//! - `session_summaries`: one row per session and kind (`short`, `long`): the newest summary of
//!   that kind, the seq of the last message it covers and its token count. A new summary of a
//!   kind replaces the row.
//! - `summary_units`: the deriver's work for one session and kind. `due_seq` is the last
//!   threshold crossed (a multiple of the kind's message count when it was crossed), `done_seq`
//!   the last message the stored summary covers; the unit has work while `due_seq > done_seq`.
//!   Leases and failures as `deriver_units` have them.
//!
//! A deleted message takes every summary that covered it (a summary holds what it said): the
//! summaries of its session from its seq on are deleted and their units start again from the
//! beginning, so the next summaries are written without it.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE session_summaries (
       workspace_name TEXT NOT NULL,
       session_name TEXT NOT NULL,
       kind TEXT NOT NULL CHECK (kind IN ('short', 'long')),
       content TEXT NOT NULL,
       message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
       seq_in_session BIGINT NOT NULL,
       token_count INTEGER NOT NULL,
       created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       PRIMARY KEY (workspace_name, session_name, kind),
       FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name) ON DELETE CASCADE
     )",
    "CREATE TABLE summary_units (
       id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       workspace_name TEXT NOT NULL,
       session_name TEXT NOT NULL,
       kind TEXT NOT NULL CHECK (kind IN ('short', 'long')),
       every INTEGER NOT NULL CHECK (every > 0),
       due_seq BIGINT NOT NULL,
       done_seq BIGINT NOT NULL DEFAULT 0,
       due_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       lease_owner TEXT,
       lease_until TIMESTAMPTZ,
       failed_at TIMESTAMPTZ,
       last_error TEXT,
       last_error_at TIMESTAMPTZ,
       CONSTRAINT uq_summary_units_key UNIQUE (workspace_name, session_name, kind),
       FOREIGN KEY (session_name, workspace_name) REFERENCES sessions (name, workspace_name) ON DELETE CASCADE
     )",
    // What a claim scans: units with work and no failure, longest waiting first.
    "CREATE INDEX ix_summary_units_ready ON summary_units (due_at) \
     WHERE due_seq > done_seq AND failed_at IS NULL",
    "CREATE INDEX ix_summary_units_workspace ON summary_units (workspace_name)",
    "CREATE FUNCTION session_summaries_forget_messages() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       WITH gone AS (
         SELECT workspace_name, session_name, min(seq_in_session) AS seq
         FROM old_rows GROUP BY workspace_name, session_name),
       dropped AS (
         DELETE FROM session_summaries s USING gone g
         WHERE s.workspace_name = g.workspace_name AND s.session_name = g.session_name
           AND s.seq_in_session >= g.seq
         RETURNING s.workspace_name, s.session_name, s.kind)
       UPDATE summary_units u SET done_seq = 0, due_at = now()
       FROM dropped d
       WHERE u.workspace_name = d.workspace_name AND u.session_name = d.session_name
         AND u.kind = d.kind;
       RETURN NULL;
     END $$",
    "CREATE TRIGGER messages_session_summaries_forget AFTER DELETE ON messages
       REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
       EXECUTE FUNCTION session_summaries_forget_messages()",
];

sql_migration!(
    up: UP,
    down: &[
        "DROP TRIGGER IF EXISTS messages_session_summaries_forget ON messages;
         DROP FUNCTION IF EXISTS session_summaries_forget_messages();
         DROP TABLE IF EXISTS summary_units, session_summaries",
    ],
);
