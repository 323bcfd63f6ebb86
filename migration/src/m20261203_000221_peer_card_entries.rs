//! The entries the deriver writes on peer cards, each citing the conclusions it came from.
//!
//! A card written by a client stays in the observer's `internal_metadata.peer_cards` as it
//! was; the deriver's entries are rows here, one per entry, with their sources in
//! `peer_card_sources`. A source conclusion that is deleted for good (erasure) takes its link
//! with it, and an entry left with no link is deleted with it, so no line outlives all that it
//! came from; an entry whose sources are only soft-deleted is not shown.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE peer_card_entries (
       id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       workspace_name TEXT NOT NULL,
       observer TEXT NOT NULL,
       observed TEXT NOT NULL,
       position INTEGER NOT NULL,
       content TEXT NOT NULL,
       created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       FOREIGN KEY (observer, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE,
       FOREIGN KEY (observed, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE
     )",
    "CREATE INDEX ix_peer_card_entries_pair ON peer_card_entries \
     (workspace_name, observer, observed, position)",
    "CREATE TABLE peer_card_sources (
       entry_id BIGINT NOT NULL REFERENCES peer_card_entries (id) ON DELETE CASCADE,
       conclusion_id TEXT NOT NULL REFERENCES conclusions (id) ON DELETE CASCADE,
       PRIMARY KEY (entry_id, conclusion_id)
     )",
    "CREATE INDEX ix_peer_card_sources_conclusion ON peer_card_sources (conclusion_id)",
    "CREATE FUNCTION peer_card_entries_forget_unsourced() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       DELETE FROM peer_card_entries e
       WHERE e.id IN (SELECT DISTINCT entry_id FROM old_rows)
         AND NOT EXISTS (SELECT 1 FROM peer_card_sources s WHERE s.entry_id = e.id);
       RETURN NULL;
     END $$",
    "CREATE TRIGGER peer_card_sources_forget AFTER DELETE ON peer_card_sources
       REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
       EXECUTE FUNCTION peer_card_entries_forget_unsourced()",
];

sql_migration!(
    up: UP,
    down: &[
        "DROP TABLE IF EXISTS peer_card_sources, peer_card_entries;
         DROP FUNCTION IF EXISTS peer_card_entries_forget_unsourced()",
    ],
);
