//! Indexes that let a session's message list count its matches from the index alone. A page of
//! 50 messages answers its total too (`totalCount`, REST's `total`), and for the two filters
//! clients use most within a session, its author and a time range, that count read every matching
//! row from the heap: for 5,000 matches in a session of 10,000 it was about three quarters of the
//! request (bench/history/2026-12.md, "Reads: counts from the index"). With the session in the
//! index's key next to the filtered column, the
//! count is an index-only scan once the visibility map covers the table (the server vacuums its
//! tables when autovacuum does not; src/store/statistics.rs).
//!
//! A third index holds a session's `seq` order with the columns those filters read and the row's
//! id, so that a page of the list finds its ids by an index-only scan and reads only its own rows
//! from the table (a deferred join, src/store/page.rs). A page by time otherwise read, and threw
//! away, every older message of the session.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &[
        "CREATE INDEX IF NOT EXISTS ix_messages_session_peer \
         ON messages (workspace_name, session_name, peer_name)",
        "CREATE INDEX IF NOT EXISTS ix_messages_session_created_at \
         ON messages (workspace_name, session_name, created_at)",
        "CREATE INDEX IF NOT EXISTS ix_messages_session_seq_covering \
         ON messages (workspace_name, session_name, seq_in_session) \
         INCLUDE (id, peer_name, created_at)",
    ],
    down: &[
        "DROP INDEX IF EXISTS ix_messages_session_seq_covering",
        "DROP INDEX IF EXISTS ix_messages_session_created_at",
        "DROP INDEX IF EXISTS ix_messages_session_peer",
    ],
);
