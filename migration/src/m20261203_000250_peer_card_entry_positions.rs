//! A deriver card entry is known by its place: (workspace, observer, observed, position) is
//! unique, so an import can tell an entry it already wrote from a new one (docs/export.md).
//!
//! The deriver already writes a pair's entries at distinct positions (it replaces them all at
//! once); a pair with two rows at one position anyway has its rows renumbered in their reading
//! order (position, id) first, so its card reads as before. The index replaces the pair's
//! plain one, whose columns it has in the same order.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "UPDATE peer_card_entries e SET position = r.n
     FROM (SELECT id, (row_number() OVER (PARTITION BY workspace_name, observer, observed
                                           ORDER BY position, id) - 1)::int AS n
           FROM peer_card_entries) r
     WHERE e.id = r.id AND e.position <> r.n
       AND (e.workspace_name, e.observer, e.observed) IN (
         SELECT workspace_name, observer, observed FROM peer_card_entries
         GROUP BY workspace_name, observer, observed, position HAVING count(*) > 1)",
    "CREATE UNIQUE INDEX uq_peer_card_entries_place ON peer_card_entries \
     (workspace_name, observer, observed, position)",
    "DROP INDEX IF EXISTS ix_peer_card_entries_pair",
];

sql_migration!(
    up: UP,
    down: &[
        "CREATE INDEX IF NOT EXISTS ix_peer_card_entries_pair ON peer_card_entries \
         (workspace_name, observer, observed, position)",
        "DROP INDEX IF EXISTS uq_peer_card_entries_place",
    ],
);
