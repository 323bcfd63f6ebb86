//! Planner statistics and visibility maps kept fresh by the server itself.
//!
//! Without statistics PostgreSQL plans a search over a freshly filled table blind: measured on
//! 10,000 messages ingested into an empty database with autovacuum off, session search took 265 ms
//! at p50 instead of 45 ms after an `ANALYZE`. Without a visibility map no count is answered from
//! an index alone: the total of a page of 5,000 matching messages read each of them from the
//! heap, 6 ms of a 7 ms request (bench/history/2026-12.md, "Reads: counts from the index").
//! Autovacuum would do both, but it may be off (it is on this project's CI machines) and it wakes
//! once a minute. So the server checks its tables every `HONCHO_ANALYZE_INTERVAL_MS`, when
//! autovacuum is off or has never done it:
//! - it analyzes those that changed by autovacuum's own default threshold (50 rows + 10% of the
//!   table) since their last analyze, one instance at a time (an advisory lock), so a fleet of
//!   servers does not analyze the same table at once;
//! - it vacuums those that gained as many rows since their last vacuum. Vacuuming rows that were
//!   only inserted reads just the pages not yet marked all-visible, so the same threshold costs
//!   little; `SKIP_LOCKED` passes over a table another instance is vacuuming.

use sea_orm::ConnectionTrait;

use super::{Store, StoreResult, stmt};

/// The advisory lock key of the instance that analyzes (arbitrary, fixed).
const ANALYZE_LOCK: i64 = 0x686f_6e63_686f_0001;

/// The tables whose statistics searches and lists are planned by.
///
/// `workspaces`, `peers` and `sessions` are also what each inserted message's foreign keys look
/// up: a connection that planned those lookups while a table was small keeps a sequential scan
/// of it until its statistics change (a fill of 10,000 workspaces ran at 50 a minute so, and at
/// 600-740 after an `ANALYZE`). The blocks' and sessions' sums are what a search scans first.
const TABLES: [&str; 10] = [
    "messages",
    "conclusions",
    "workspaces",
    "sessions",
    "peers",
    "session_peers",
    "search_terms",
    "search_corpus",
    "message_blocks",
    "message_session_sums",
];

/// What a round looks after: the counter of rows changed since it was last done, and the two
/// columns of `pg_stat_user_tables` that say when it was last done, by hand and by autovacuum.
struct Upkeep {
    changed: &'static str,
    last: &'static str,
    last_auto: &'static str,
}

const ANALYZE: Upkeep = Upkeep {
    changed: "n_mod_since_analyze",
    last: "last_analyze",
    last_auto: "last_autoanalyze",
};

const VACUUM: Upkeep = Upkeep {
    changed: "n_ins_since_vacuum",
    last: "last_vacuum",
    last_auto: "last_autovacuum",
};

/// The names among [`TABLES`] that changed by 50 rows + 10% since `upkeep` was last done, when
/// autovacuum is off or never did it.
async fn stale_tables(db: &impl ConnectionTrait, upkeep: &Upkeep) -> StoreResult<Vec<String>> {
    let Upkeep {
        changed,
        last,
        last_auto,
    } = upkeep;
    let names: Vec<String> = TABLES.iter().map(|t| (*t).to_owned()).collect();
    Ok(db
        .query_all_raw(stmt(
            &format!(
                "SELECT s.relname::text AS name FROM pg_stat_user_tables s \
                 JOIN pg_class c ON c.oid = s.relid \
                 WHERE s.schemaname = current_schema() AND s.relname = ANY($1) \
                   AND s.{changed} > 50 + 0.1 * greatest(c.reltuples, 0) \
                   AND (current_setting('autovacuum') = 'off' \
                        OR (s.{last} IS NULL AND s.{last_auto} IS NULL)) \
                 ORDER BY s.relname"
            ),
            [names.into()],
        ))
        .await?
        .iter()
        .map(|r| r.try_get::<String>("", "name"))
        .collect::<Result<Vec<_>, _>>()?)
}

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
        let stale = stale_tables(&txn, &ANALYZE).await?;
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

    /// One round: vacuums the tables that gained enough rows since their last vacuum (see the
    /// module documentation) and answers their names.
    pub async fn vacuum_stale_tables(&self) -> StoreResult<Vec<String>> {
        let stale = stale_tables(self.db(), &VACUUM).await?;
        for table in &stale {
            // VACUUM cannot run inside a transaction block: it goes alone on a pooled connection.
            // The names come from TABLES, never from a client.
            self.db()
                .execute_unprepared(&format!("VACUUM (SKIP_LOCKED) {table}"))
                .await?;
        }
        if !stale.is_empty() {
            tracing::debug!(tables = ?stale, "vacuumed tables that had grown");
        }
        Ok(stale)
    }
}
