//! Read replicas: PostgreSQL streaming standbys that answer the reads of queries, with
//! read-your-writes on request. docs/scale-out.md has the topology and the failure behaviour.
//!
//! - Each request that only reads gets a [`Reader`] chosen by [`ReadPool::route`]: a replica that
//!   answers, is in recovery and is within the lag limit (round-robin), else the primary.
//! - Writes, the event listener, the deriver and subscriptions never come here: they use the
//!   store's primary connection.
//! - A mutation's response carries the primary's WAL position after its commit (a [`Lsn`], the
//!   consistency token). A read that sends it back is served by a replica that has replayed that
//!   position, waiting for one up to a bound, else by the primary: the client sees its own writes.
//! - A health check every [`CHECK_EVERY`] reads each replica's state and replay position, and the
//!   primary's WAL position, from which each replica's lag follows ([`lag`]).

mod args;
mod lag;
mod lsn;
mod metrics;
mod reader;

use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sea_orm::{ConnectOptions, ConnectionTrait, DatabaseConnection, DbErr};

pub use args::ReadArgs;
pub use lsn::{BadLsn, Lsn};
pub use reader::Reader;

use super::error::{is_unavailable, sqlstate};
use super::{StoreResult, stmt};

/// How often each replica (and the primary's WAL position) is checked.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// A check that takes longer counts as a failed one.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// A request waiting for a replica to replay its token polls the replica this often at first,
/// doubling up to [`LONGEST_POLL`].
const FIRST_POLL: Duration = Duration::from_micros(500);
const LONGEST_POLL: Duration = Duration::from_millis(10);

/// A request's consistency token (`x-honcho-after`), in the request's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAfter(pub Lsn);

/// How the pool connects and decides.
#[derive(Clone, Debug)]
pub struct ReadSettings {
    /// Connections per replica.
    pub pool: u32,
    pub statement_timeout: Option<Duration>,
    /// A replica further behind takes no reads.
    pub max_lag: Duration,
    /// Longest a request with a token waits for a replica to replay it before reading from the
    /// primary.
    pub token_wait: Duration,
}

/// What the last check (or a failed read since) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReplicaState {
    /// Not checked yet.
    Starting = 0,
    /// Takes reads.
    Up = 1,
    /// Answers, but further behind than the lag limit.
    Lagging = 2,
    /// Does not answer (or a read failed on it since the last check).
    Down = 3,
    /// Answers but is not in recovery (a promoted standby, or a primary): its data may not be
    /// the primary's, so it takes no reads.
    NotStandby = 4,
}

impl ReplicaState {
    fn from_u8(v: u8) -> ReplicaState {
        match v {
            1 => ReplicaState::Up,
            2 => ReplicaState::Lagging,
            3 => ReplicaState::Down,
            4 => ReplicaState::NotStandby,
            _ => ReplicaState::Starting,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaState::Starting => "starting",
            ReplicaState::Up => "up",
            ReplicaState::Lagging => "lagging",
            ReplicaState::Down => "down",
            ReplicaState::NotStandby => "not_standby",
        }
    }
}

/// One replica: its connections and what is known of it.
pub struct Replica {
    name: String,
    db: DatabaseConnection,
    state: AtomicU8,
    /// The newest replay position seen (0 before the first check).
    replayed: AtomicU64,
    /// Lag in milliseconds at the last check (`u64::MAX`: unknown).
    lag_ms: AtomicU64,
    statements: AtomicU64,
    series: metrics::ReplicaSeries,
}

impl Replica {
    /// `host:port/database` of the replica (no credentials).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn state(&self) -> ReplicaState {
        ReplicaState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// The newest WAL position it was seen to have replayed.
    pub fn replayed(&self) -> Lsn {
        Lsn(self.replayed.load(Ordering::Acquire))
    }

    /// Its lag at the last check (None: unknown, e.g. down).
    pub fn lag(&self) -> Option<Duration> {
        match self.lag_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Statements of requests it answered.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    pub(crate) fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    fn usable(&self) -> bool {
        self.state() == ReplicaState::Up
    }

    fn set_state(&self, state: ReplicaState, why: &str) {
        let was = ReplicaState::from_u8(self.state.swap(state as u8, Ordering::AcqRel));
        self.series.up.set(i64::from(state == ReplicaState::Up));
        if was != state {
            match state {
                ReplicaState::Up => {
                    tracing::info!(replica = %self.name, was = was.as_str(), "replica takes reads")
                }
                _ => {
                    tracing::warn!(replica = %self.name, state = state.as_str(), why, "replica takes no reads")
                }
            }
        }
    }

    fn note_replayed(&self, lsn: Lsn) {
        self.replayed.fetch_max(lsn.0, Ordering::AcqRel);
    }

    fn note_lag(&self, lag: Option<Duration>) {
        let ms = lag.map_or(u64::MAX, |d| d.as_millis().min(u64::MAX as u128 - 1) as u64);
        self.lag_ms.store(ms, Ordering::Release);
        if let Some(d) = lag {
            self.series.lag.set(d.as_secs_f64());
        }
    }

    pub(crate) fn served(&self) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        self.series.statements.inc();
    }

    /// Whether a statement that failed here with `err` should run on the primary instead: when
    /// the failure is the replica's (it went away, has not got the database yet, or cancelled
    /// the statement to replay WAL), not the statement's. A replica that went away takes no
    /// more reads until a check finds it back.
    pub(crate) fn falls_back(&self, err: &DbErr) -> bool {
        let code = sqlstate(err);
        // invalid_catalog_name, database_dropped, too_many_connections
        let gone =
            is_unavailable(err) || matches!(code.as_deref(), Some("3D000" | "57P04" | "53300"));
        // serialization_failure: on a standby, a query cancelled by a recovery conflict
        let conflict = code.as_deref() == Some("40001");
        if gone {
            self.set_state(ReplicaState::Down, "a read failed on it");
        }
        if gone || conflict {
            tracing::info!(replica = %self.name, error = %err, "read failed on the replica; running it on the primary");
            self.series.fallbacks.inc();
        }
        gone || conflict
    }

    /// In recovery, and the position it has replayed (None: not a standby).
    async fn replay_position(&self) -> Result<Option<Lsn>, DbErr> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replayed",
                [],
            ))
            .await?
            .ok_or_else(|| DbErr::RecordNotFound("no row".into()))?;
        let standby: bool = row.try_get("", "standby")?;
        let replayed: Option<String> = row.try_get("", "replayed")?;
        Ok(match (standby, replayed) {
            (true, Some(text)) => text.parse::<Lsn>().ok(),
            _ => None,
        })
    }
}

/// What `/ready` says of one replica.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// `host:port/database`.
    pub replica: String,
    /// `up` (takes reads), `lagging`, `down`, `not_standby` or `starting`.
    pub state: &'static str,
    /// Milliseconds behind the primary at the last check (null: unknown).
    pub lag_ms: Option<u64>,
    /// The newest WAL position it was seen to have replayed.
    pub replayed: String,
}

/// The replicas of one primary, their health and the routing of reads among them.
pub struct ReadPool {
    replicas: Vec<Arc<Replica>>,
    settings: ReadSettings,
    /// The primary, on a connection of the checks' own (so that a busy pool does not delay them).
    primary: DatabaseConnection,
    samples: Mutex<lag::Samples>,
    next: AtomicUsize,
    metrics: metrics::Metrics,
}

impl ReadPool {
    /// Connects (lazily: a replica that is down at start is only marked so) to each replica URL,
    /// checks them once, and starts the periodic check, which ends with the pool.
    pub async fn connect(
        primary_url: &str,
        replica_urls: &[String],
        settings: ReadSettings,
    ) -> StoreResult<Arc<ReadPool>> {
        let metrics = metrics::Metrics::new();
        let mut replicas = Vec::with_capacity(replica_urls.len());
        for url in replica_urls {
            let name = display_name(url);
            let mut opts = lazy_options(url, settings.pool.max(1));
            if let Some(t) = settings.statement_timeout {
                opts.statement_timeout(t);
            }
            replicas.push(Arc::new(Replica {
                db: sea_orm::Database::connect(opts).await?,
                state: AtomicU8::new(ReplicaState::Starting as u8),
                replayed: AtomicU64::new(0),
                lag_ms: AtomicU64::new(u64::MAX),
                statements: AtomicU64::new(0),
                series: metrics.replica(&name),
                name,
            }));
        }
        let pool = Arc::new(ReadPool {
            replicas,
            settings,
            primary: sea_orm::Database::connect(lazy_options(primary_url, 1)).await?,
            samples: Mutex::default(),
            next: AtomicUsize::new(0),
            metrics,
        });
        pool.check().await;
        tokio::spawn(check_forever(Arc::downgrade(&pool)));
        Ok(pool)
    }

    pub fn replicas(&self) -> &[Arc<Replica>] {
        &self.replicas
    }

    pub fn settings(&self) -> &ReadSettings {
        &self.settings
    }

    /// Each replica as the last check (or a failed read since) left it, for `/ready`.
    pub fn status(&self) -> Vec<ReplicaStatus> {
        self.replicas
            .iter()
            .map(|r| ReplicaStatus {
                replica: r.name.clone(),
                state: r.state().as_str(),
                lag_ms: r.lag().map(|d| d.as_millis() as u64),
                replayed: r.replayed().to_string(),
            })
            .collect()
    }

    /// The pool's metrics, for `/metrics`.
    pub fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.metrics.registry.gather()
    }

    /// One round of checks: the primary's WAL position, then every replica at once.
    pub async fn check(&self) {
        let sampled = tokio::time::timeout(
            CHECK_TIMEOUT,
            wal_position(&self.primary, "pg_current_wal_lsn()"),
        )
        .await;
        if let Ok(Ok(lsn)) = sampled {
            let keep = self.settings.max_lag + 4 * CHECK_EVERY;
            self.samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(Instant::now(), lsn, keep);
        }
        futures::future::join_all(self.replicas.iter().map(|r| self.check_replica(r))).await;
    }

    async fn check_replica(&self, replica: &Replica) {
        match tokio::time::timeout(CHECK_TIMEOUT, replica.replay_position()).await {
            Ok(Ok(Some(replayed))) => {
                replica.note_replayed(replayed);
                let lag = self
                    .samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .lag(replica.replayed(), Instant::now());
                replica.note_lag(lag);
                // Without a sample of the primary (it is down) the replica's lag is unknown; it
                // keeps taking reads, the last copy there is.
                match lag {
                    Some(lag) if lag > self.settings.max_lag => {
                        replica.set_state(ReplicaState::Lagging, "behind the lag limit")
                    }
                    _ => replica.set_state(ReplicaState::Up, "checked"),
                }
            }
            Ok(Ok(None)) => {
                replica.note_lag(None);
                replica.set_state(ReplicaState::NotStandby, "not in recovery")
            }
            Ok(Err(err)) => {
                replica.note_lag(None);
                replica.set_state(ReplicaState::Down, &err.to_string())
            }
            Err(_) => {
                replica.note_lag(None);
                replica.set_state(ReplicaState::Down, "the check timed out")
            }
        }
    }

    /// The replica a request's reads go to (None: the primary). Without a token, any replica
    /// that takes reads, in turn. With one, a replica seen to have replayed it; else the most
    /// advanced one is asked again, with growing pauses, until it has or the wait is over.
    pub async fn route(&self, after: Option<Lsn>) -> Option<Arc<Replica>> {
        let usable: Vec<&Arc<Replica>> = self.replicas.iter().filter(|r| r.usable()).collect();
        if usable.is_empty() {
            self.count_route("primary", "none_usable");
            return None;
        }
        let Some(after) = after else {
            self.count_route("replica", "any");
            return Some(self.in_turn(&usable).clone());
        };
        let started = Instant::now();
        let current: Vec<&Arc<Replica>> = usable
            .iter()
            .copied()
            .filter(|r| r.replayed() >= after)
            .collect();
        if !current.is_empty() {
            self.metrics.token_wait.observe(0.0);
            self.count_route("replica", "token");
            return Some(self.in_turn(&current).clone());
        }
        let best = usable.iter().copied().max_by_key(|r| r.replayed())?;
        let deadline = started + self.settings.token_wait;
        let mut pause = FIRST_POLL;
        loop {
            match best.replay_position().await {
                Ok(Some(replayed)) => {
                    best.note_replayed(replayed);
                    if replayed >= after {
                        self.metrics
                            .token_wait
                            .observe(started.elapsed().as_secs_f64());
                        self.count_route("replica", "token");
                        return Some(best.clone());
                    }
                }
                // The next check decides about the replica; this request reads the primary.
                _ => break,
            }
            // The last pause is cut to the deadline and followed by one more check, so a read
            // gives the standby the whole bound before it goes to the primary.
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(LONGEST_POLL);
        }
        self.metrics
            .token_wait
            .observe(started.elapsed().as_secs_f64());
        self.count_route("primary", "token_timeout");
        None
    }

    fn in_turn<'a>(&self, among: &[&'a Arc<Replica>]) -> &'a Arc<Replica> {
        among[self.next.fetch_add(1, Ordering::Relaxed) % among.len()]
    }

    fn count_route(&self, target: &str, reason: &str) {
        self.metrics
            .routes
            .with_label_values(&[target, reason])
            .inc();
    }
}

/// A WAL position `function` (e.g. `pg_current_wal_lsn()`) gives on `db`.
pub async fn wal_position(db: &DatabaseConnection, function: &str) -> Result<Lsn, DbErr> {
    let row = db
        .query_one_raw(stmt(&format!("SELECT {function}::text AS lsn"), []))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(format!("{function} gave no row")))?;
    let text: String = row.try_get("", "lsn")?;
    text.parse::<Lsn>()
        .map_err(|e| DbErr::Custom(e.to_string()))
}

async fn check_forever(pool: Weak<ReadPool>) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        pool.check().await;
    }
}

/// How the pool connects to a replica, or to the primary for the checks: lazily (a server that
/// is down at start is only marked so), with short timeouts so that a check or a read fails fast,
/// at most `max` connections.
fn lazy_options(url: &str, max: u32) -> ConnectOptions {
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.max_connections(max)
        .min_connections(0)
        .connect_lazy(true)
        .connect_timeout(Duration::from_secs(1))
        .acquire_timeout(Duration::from_secs(2))
        .test_before_acquire_if_idle_for(super::PING_IF_IDLE_FOR)
        .sqlx_logging(false);
    opts
}

/// `host:port/database` of a connection URL: no user, no password, no parameters.
fn display_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('?').next().unwrap_or(rest).to_owned()
}

#[cfg(test)]
mod tests {
    use super::display_name;

    #[test]
    fn replicas_are_named_without_credentials() {
        assert_eq!(
            display_name("postgres://app:s3cret@db-replica-1:5432/honcho?sslmode=require"),
            "db-replica-1:5432/honcho"
        );
        assert_eq!(
            display_name("postgres://127.0.0.1:5433/x"),
            "127.0.0.1:5433/x"
        );
    }
}
