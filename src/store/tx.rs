//! The one way the store runs a transaction: begin, the `SET LOCAL`s the work needs, the work,
//! commit; and when PostgreSQL aborts it for a deadlock (40P01) or a serialization failure
//! (40001), the whole body again after a short jittered wait. A body can therefore run more than
//! once: it must not have effects outside the database (events published with `pg_notify` are
//! fine, they are discarded with a rolled-back attempt). When every attempt failed, the caller
//! gets [`StoreError::Contention`], answered as `SERVICE_UNAVAILABLE` (safe to retry).

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use backon::Retryable;
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, TransactionTrait};

use super::{Store, StoreError, StoreResult, stmt};

/// Attempts after the first one, and the waits between them (doubling, each jittered).
const RETRIES: usize = 4;
const FIRST_WAIT: Duration = Duration::from_millis(5);
const LONGEST_WAIT: Duration = Duration::from_millis(200);

/// How pgvector's HNSW scan treats a filter that rejects candidates (pgvector ≥ 0.8). Without
/// iterative scanning the index stops after `ef_search` candidates, and a selective filter then
/// returns fewer rows than asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IterativeScan {
    /// Rows come out exactly in distance order: for `ORDER BY distance LIMIT k` answers.
    Strict,
    /// Rows may come out slightly out of order, faster: for candidates that are re-ranked after.
    Relaxed,
}

/// The HNSW scan's beam (`hnsw.ef_search`) for a scan that will read `candidates` rows, within
/// pgvector's bounds (1-1000; its default, 40, is the floor here). A beam as wide as the rows
/// wanted finds them in the first pass, nearer than iterative scanning's later passes do, at
/// about the same cost (bench/history/2026-12.md, "Ingest: a lighter graph").
fn ef_search_for(candidates: u64) -> u32 {
    candidates.clamp(40, 1000) as u32
}

/// The `SET LOCAL`s of one transaction. `Default` sets nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct TxOptions {
    lock_timeout: Option<Duration>,
    iterative_scan: Option<IterativeScan>,
    ef_search: Option<u32>,
}

impl TxOptions {
    /// Gives up waiting for a lock after `t` (`lock_timeout`; the caller gets SERVICE_UNAVAILABLE).
    pub fn lock_timeout(mut self, t: Duration) -> Self {
        self.lock_timeout = Some(t);
        self
    }

    pub fn iterative_scan(mut self, mode: IterativeScan) -> Self {
        self.iterative_scan = Some(mode);
        self
    }

    /// `hnsw.ef_search` for a scan that will read `candidates` rows ([`ef_search_for`]).
    pub fn ef_search_for(mut self, candidates: u64) -> Self {
        self.ef_search = Some(ef_search_for(candidates));
        self
    }

    /// One statement for all settings (`set_config(…, true)` is `SET LOCAL`), none when unset.
    async fn apply(&self, txn: &DatabaseTransaction) -> StoreResult<()> {
        let mut names: Vec<String> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        if let Some(t) = self.lock_timeout {
            names.push("lock_timeout".into());
            values.push(format!("{}ms", t.as_millis()));
        }
        if let Some(mode) = self.iterative_scan {
            names.push("hnsw.iterative_scan".into());
            values.push(
                match mode {
                    IterativeScan::Strict => "strict_order",
                    IterativeScan::Relaxed => "relaxed_order",
                }
                .into(),
            );
        }
        if let Some(ef) = self.ef_search {
            names.push("hnsw.ef_search".into());
            values.push(ef.to_string());
        }
        if names.is_empty() {
            return Ok(());
        }
        txn.execute_raw(stmt(
            "SELECT set_config(n, v, true) FROM unnest($1::text[], $2::text[]) AS s(n, v)",
            [names.into(), values.into()],
        ))
        .await?;
        Ok(())
    }
}

/// The open transaction, handed to a transaction's body. Derefs to sea-orm's transaction, so
/// `&*tx` goes wherever a connection does. The body must drop every clone before it returns.
#[derive(Clone)]
pub struct Tx(Arc<DatabaseTransaction>);

impl Deref for Tx {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.0
    }
}

impl Store {
    /// A transaction holding the advisory lock `key`, or None when another session holds it: for
    /// background work that one instance of a fleet does at a time. The lock ends with the
    /// transaction, so it needs no unlock and dies with a lost connection.
    pub(crate) async fn begin_exclusive(
        &self,
        key: i64,
    ) -> StoreResult<Option<DatabaseTransaction>> {
        let txn = self.db().begin().await?;
        let locked: bool = txn
            .query_one_raw(stmt(
                "SELECT pg_try_advisory_xact_lock($1) AS locked",
                [key.into()],
            ))
            .await?
            .map(|r| r.try_get("", "locked"))
            .transpose()?
            .unwrap_or(false);
        Ok(locked.then_some(txn))
    }

    /// A read-only REPEATABLE READ transaction the caller holds across many statements (and
    /// awaits in between): every statement sees the database as of the first one, whatever is
    /// written meanwhile. For long reads that must be consistent (an export); nothing is retried,
    /// and the caller ends it by dropping it (there is nothing to commit).
    pub(crate) async fn snapshot(&self) -> StoreResult<DatabaseTransaction> {
        Ok(self
            .db()
            .begin_with_config(
                Some(sea_orm::IsolationLevel::RepeatableRead),
                Some(sea_orm::AccessMode::ReadOnly),
            )
            .await?)
    }

    /// Runs `body` in a transaction with `options`, committing when it returns `Ok` and rolling
    /// back when it returns `Err`; retried whole on deadlocks and serialization failures.
    pub async fn transaction<T, F, Fut>(&self, options: TxOptions, body: F) -> StoreResult<T>
    where
        F: Fn(Tx) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        let backoff = crate::retry::backoff(FIRST_WAIT, LONGEST_WAIT).with_max_times(RETRIES);
        (|| attempt(self.db(), options, &body))
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(StoreError::is_retryable)
            .notify(|err, wait| {
                tracing::info!(error = %err, ?wait, "transaction aborted by the database; retrying");
            })
            .await
    }

    /// A read-only `body` in a transaction on this handle's reader ([`Store::reader`]): a
    /// replica when the request was routed to one, else the primary. When the replica fails it
    /// (it went away, or cancelled a statement to replay WAL), the body runs again on the primary
    /// with [`Store::transaction`].
    pub async fn read_transaction<T, F, Fut>(&self, options: TxOptions, body: F) -> StoreResult<T>
    where
        F: Fn(Tx) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        if let Some(replica) = self.reader().replica() {
            match attempt(replica.db(), options, &body).await {
                Err(err) if err.db_err().is_some_and(|e| replica.falls_back(e)) => {}
                done => {
                    replica.served();
                    return done;
                }
            }
        }
        self.transaction(options, body).await
    }
}

async fn attempt<T, F, Fut>(db: &DatabaseConnection, options: TxOptions, body: &F) -> StoreResult<T>
where
    F: Fn(Tx) -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let txn = db.begin().await?;
    options.apply(&txn).await?;
    let shared = Arc::new(txn);
    let outcome = body(Tx(shared.clone())).await;
    let txn = Arc::into_inner(shared)
        .ok_or_else(|| StoreError::Internal("a transaction's handle outlived its body".into()))?;
    match outcome {
        Ok(value) => {
            txn.commit().await?;
            Ok(value)
        }
        Err(err) => {
            // The body's error is the one worth reporting; a failed rollback means the
            // connection is gone, and the pool discards it.
            if let Err(rollback) = txn.rollback().await {
                tracing::debug!(error = %rollback, "rollback failed");
            }
            Err(err)
        }
    }
}
