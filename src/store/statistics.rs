//! Planner statistics kept fresh by the server itself. Without them PostgreSQL plans a search over
//! a freshly filled table blind: measured on 10,000 messages ingested into an empty database with
//! autovacuum off, session search took 265 ms at p50 instead of 45 ms after an `ANALYZE`. Autovacuum
//! would do it, but it may be off (it is on this project's CI machines) and it wakes once a
//! minute. So the server checks its tables every `HONCHO_ANALYZE_INTERVAL_MS` and analyzes those
//! that changed by autovacuum's own default threshold (50 rows + 10% of the table) since their
//! last analyze, when autovacuum is off or the table was never analyzed. One instance at a time
//! does it (an advisory lock), so a fleet of servers does not analyze the same table at once.

use sea_orm::ConnectionTrait;

use super::{Store, StoreResult, stmt};

/// The advisory lock key of the instance that analyzes (arbitrary, fixed).
const ANALYZE_LOCK: i64 = 0x686f_6e63_686f_0001;

/// The tables whose statistics searches and lists are planned by.
const TABLES: [&str; 7] = [
    "messages",
    "conclusions",
    "sessions",
    "peers",
    "session_peers",
    "search_terms",
    "search_corpus",
];

impl Store {
    /// One round: analyzes the tables that changed enough since their last analyze (see the
    /// module documentation) and answers their names. Another instance holding the lock makes
    /// this round do nothing.
    pub async fn analyze_stale_tables(&self) -> StoreResult<Vec<String>> {
        // ANALYZE runs inside a transaction block (unlike VACUUM), so the lock's transaction
        // holds the work too.
        let Some(txn) = self.begin_exclusive(ANALYZE_LOCK).await? else {
            return Ok(Vec::new());
        };
        let names: Vec<String> = TABLES.iter().map(|t| (*t).to_owned()).collect();
        let stale = txn
            .query_all_raw(stmt(
                "SELECT s.relname::text AS name FROM pg_stat_user_tables s \
                 JOIN pg_class c ON c.oid = s.relid \
                 WHERE s.schemaname = current_schema() AND s.relname = ANY($1) \
                   AND s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0) \
                   AND (current_setting('autovacuum') = 'off' \
                        OR (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL)) \
                 ORDER BY s.relname",
                [names.into()],
            ))
            .await?
            .iter()
            .map(|r| r.try_get::<String>("", "name"))
            .collect::<Result<Vec<_>, _>>()?;
        for table in &stale {
            // The names come from TABLES, never from a client.
            txn.execute_unprepared(&format!("ANALYZE {table}")).await?;
        }
        txn.commit().await?;
        if !stale.is_empty() {
            tracing::debug!(tables = ?stale, "analyzed tables that had changed");
        }
        Ok(stale)
    }
}
