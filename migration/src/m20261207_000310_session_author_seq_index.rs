//! A session's messages by one author, in `seq` order, as one range of an index: a page of the
//! list filtered by author (`messages(filters: {peer_id})`) reads that author's entries only.
//!
//! Before, the planner had two indexes for it and each cost grew with the session: the session's
//! `seq` order (m20261201_000080's covering index) read every other author's entries and threw
//! them away, all of the session's for an author with no message in it; the index of the session
//! and author read every one of that author's entries and sorted them. Which it chose depended on
//! the table's statistics, so the same session's page cost more in a bigger workspace: at a
//! million messages the planner took the `seq` order, and a page of an author absent from a
//! session of 2,000 read all 2,000 entries (bench/README.md, "Scale").
//!
//! With `seq_in_session` after the author, the page is an index-only range in list order, and the
//! count of an author's messages (what the index it replaces was for) is still an index-only scan
//! of the same prefix. It replaces that index rather than joining it: one index more per
//! message would slow every insert for nothing.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &[
        "CREATE INDEX IF NOT EXISTS ix_messages_session_author_seq \
         ON messages (workspace_name, session_name, peer_name, seq_in_session) INCLUDE (id)",
        "DROP INDEX IF EXISTS ix_messages_session_peer",
    ],
    down: &[
        "CREATE INDEX IF NOT EXISTS ix_messages_session_peer \
         ON messages (workspace_name, session_name, peer_name)",
        "DROP INDEX IF EXISTS ix_messages_session_author_seq",
    ],
);
