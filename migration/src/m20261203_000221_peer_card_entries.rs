//! The entries the deriver writes on peer cards, each citing the conclusions it came from.
//!
//! A card written by a client stays in the observer's `internal_metadata.peer_cards` as it
//! was; the deriver's entries are rows here, one per entry, with their sources in
//! `peer_card_sources`. A source conclusion that is deleted for good takes its link with it;
//! an entry left without a live source is not shown and is dropped at the card's next update.

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
];

sql_migration!(
    up: UP,
    down: &["DROP TABLE IF EXISTS peer_card_sources, peer_card_entries"],
);
