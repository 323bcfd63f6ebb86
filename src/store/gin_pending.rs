//! GIN pending lists kept short by the server itself. A GIN index (the messages' full text and
//! trigrams, the conclusions' full text) takes new entries into an unsorted pending list, which
//! every index scan reads whole, and which PostgreSQL merges into the index only when it passes
//! `gin_pending_list_limit` (4 MB: about 10,000 messages), when a vacuum runs, or on request.
//! Measured on 10,000 messages ingested with autovacuum off, all of them sat in the pending lists:
//! the planner then preferred a sequential scan, and the full-text leg cost 39 ms of CPU per search
//! against 10 ms with the lists merged. Autovacuum's insert-triggered vacuum merges them, but
//! once a minute at best, and it may be off. So the server merges them every
//! `HONCHO_GIN_FLUSH_INTERVAL_MS`, off the request path: the work is the one an insert that
//! overflows the list would do anyway, done in small pieces, and inserts never wait for it
//! (PostgreSQL lets an insert skip a merge already under way). One instance at a time does it
//! (an advisory lock).

use sea_orm::ConnectionTrait;

use super::{Store, StoreResult, stmt};

/// The advisory lock key of the instance that merges (arbitrary, fixed; not the analyzer's).
const FLUSH_LOCK: i64 = 0x686f_6e63_686f_0002;

/// The tables whose GIN indexes serve searches.
const TABLES: [&str; 2] = ["messages", "conclusions"];

impl Store {
    /// One round: merges the pending lists of the GIN indexes of the searched tables into their
    /// indexes and answers how many pending pages that removed (0 when they were empty, which
    /// costs a read of each index's metapage). Another instance holding the lock makes this
    /// round do nothing.
    pub async fn flush_gin_pending_lists(&self) -> StoreResult<i64> {
        let Some(txn) = self.begin_exclusive(FLUSH_LOCK).await? else {
            return Ok(0);
        };
        let names: Vec<String> = TABLES.iter().map(|t| (*t).to_owned()).collect();
        let pages: i64 = txn
            .query_one_raw(stmt(
                "SELECT COALESCE(sum(gin_clean_pending_list(i.indexrelid)), 0)::int8 AS pages \
                 FROM pg_index i \
                 JOIN pg_class ix ON ix.oid = i.indexrelid \
                 JOIN pg_am am ON am.oid = ix.relam \
                 JOIN pg_class t ON t.oid = i.indrelid \
                 WHERE am.amname = 'gin' AND t.relnamespace = current_schema()::regnamespace \
                   AND t.relname = ANY($1)",
                [names.into()],
            ))
            .await?
            .map(|r| r.try_get("", "pages"))
            .transpose()?
            .unwrap_or(0);
        txn.commit().await?;
        if pages > 0 {
            tracing::debug!(pages, "merged GIN pending lists into their indexes");
        }
        Ok(pages)
    }
}
