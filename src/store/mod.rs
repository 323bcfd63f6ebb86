//! Everything that reads or writes the database, one module per resource. Knows nothing of GraphQL.

pub mod columns;
pub mod conclusion;
pub mod configuration;
pub mod dream;
pub mod embedding;
pub mod erasure;
pub mod error;
pub mod events;
pub mod export;
pub mod filter;
pub mod gin_pending;
mod keys;
mod lease;
pub mod message;
pub mod meta;
pub mod page;
pub mod path;
pub mod peer;
pub mod peer_card;
pub mod queue;
pub mod replicas;
pub mod scope;
pub mod search;
pub mod search_keys;
pub mod session;
pub mod statistics;
pub mod summary;
pub mod tokens;
pub mod tx;
pub mod validate;
pub(crate) mod vectors;
pub mod webhook;
pub mod workspace;

use sea_orm::{ConnectOptions, DatabaseConnection, DbBackend, Statement, Value};
use std::sync::Arc;
use std::time::Duration;

use crate::embed::Embedder;

/// A pooled connection idle this long is pinged before it is handed out; a busier one is not.
/// sqlx pings on every checkout by default, which is a round trip to PostgreSQL before each
/// statement. What a ping catches is a connection that a restart, a proxy or a firewall dropped
/// while it sat idle; one in use seconds ago that fails anyway fails its statement, like any other
/// error.
pub(crate) const PING_IF_IDLE_FOR: Duration = Duration::from_secs(30);

/// Connections the pool opens at start and keeps open however idle. A request that finds no
/// idle connection waits for a new one, and opening one (TCP, TLS where the server offers it,
/// a new backend with cold caches) took about 95 ms here, 50 times a page of messages. With one
/// connection kept, a run of pages at one client grew the pool to 5 in its first seconds, as its
/// requests (a page and its total at once) met the maintenance rounds' connections, and each
/// growth was one request of ~100 ms: the lone outlier of a benchmark run. Bursts still grow the
/// pool beyond these, up to its size, and it shrinks back after sqlx's idle timeout.
pub const WARM_CONNECTIONS: u32 = 5;

pub use error::{StoreError, StoreResult};
pub use replicas::{Lsn, ReadPool, Reader};
pub use tx::{IterativeScan, Tx, TxOptions};

/// Handle to the database and the embedder; cheap to clone (both are shared).
///
/// Writes and everything inside transactions use the primary ([`Store::db`]). Reads that may be
/// served by a replica use [`Store::reader`]: the primary, unless this handle was made for one
/// request by [`Store::routed`], which picks a replica of the read pool ([`replicas`]).
#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
    reader: Reader,
    replicas: Option<Arc<ReadPool>>,
    embedder: Option<Arc<dyn Embedder>>,
    /// `createMessages` queues work for the deriver (only when an LLM is configured: without
    /// one the queue would only grow).
    derive: bool,
    /// Dreams may be asked for (HONCHO_DREAM_ENABLED; they also need `derive`).
    dreams: bool,
    /// Conclusions act as search keys of the messages they cite (docs/search.md).
    conclusion_keys: bool,
    /// The vector leg's narrowest HNSW scan beam (HONCHO_SEARCH_BEAM).
    search_beam: u16,
    /// How a search reads the peers its query names (`search::NameRule`: the constants, or
    /// another rule for `make eval`'s comparisons).
    names: search::NameRule,
    webhooks: webhook::WebhookPolicy,
    /// The server's settings under every workspace's configuration.
    defaults: configuration::Defaults,
}

impl Store {
    pub fn new(db: DatabaseConnection) -> Self {
        Store {
            reader: Reader::new(db.clone(), None),
            db,
            replicas: None,
            embedder: None,
            derive: false,
            dreams: true,
            conclusion_keys: true,
            search_beam: search::DEFAULT_SEARCH_BEAM,
            names: search::NameRule::default(),
            webhooks: webhook::WebhookPolicy::default(),
            defaults: configuration::Defaults::default(),
        }
    }

    /// Reads of requests routed with [`Store::routed`] may go to these replicas.
    pub fn with_read_pool(mut self, pool: Option<Arc<ReadPool>>) -> Self {
        self.replicas = pool;
        self
    }

    pub fn read_pool(&self) -> Option<&Arc<ReadPool>> {
        self.replicas.as_ref()
    }

    /// This store for one read-only request: its reads go to a replica the pool picks (one that
    /// has replayed `after`, when given), or to the primary. Without a read pool, itself.
    pub async fn routed(&self, after: Option<Lsn>) -> Store {
        let Some(pool) = &self.replicas else {
            return self.clone();
        };
        let replica = pool.route(after).await;
        Store {
            reader: Reader::new(self.db.clone(), replica),
            ..self.clone()
        }
    }

    /// Where this handle's reads go: a replica (falling back to the primary), or the primary.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The primary's WAL position now: after a commit, a position every replica that has
    /// replayed it shows that commit at. None without a read pool (every read is the primary's).
    pub async fn consistency_token(&self) -> StoreResult<Option<Lsn>> {
        if self.replicas.is_none() {
            return Ok(None);
        }
        // The insert position, not the write position: it covers the commit even when the
        // server runs with synchronous_commit = off and has not written the commit yet.
        Ok(Some(
            replicas::wal_position(&self.db, "pg_current_wal_insert_lsn()").await?,
        ))
    }

    /// Messages written through this store are queued for the deriver.
    pub fn with_derivation(mut self, on: bool) -> Self {
        self.derive = on;
        self
    }

    pub fn derives(&self) -> bool {
        self.derive
    }

    /// The server's settings for reasoning, peer cards, summaries and dreams, which workspaces,
    /// sessions and messages override ([`configuration`]).
    pub fn with_configuration_defaults(mut self, defaults: configuration::Defaults) -> Self {
        self.defaults = defaults;
        self
    }

    pub fn configuration_defaults(&self) -> configuration::Defaults {
        self.defaults
    }

    /// Whether dreams may be asked for (on by default; they also need derivation).
    pub fn with_dreams(mut self, on: bool) -> Self {
        self.dreams = on;
        self
    }

    pub fn dreams(&self) -> bool {
        self.dreams && self.derive
    }

    /// Whether live explicit conclusions raise the messages they cite in message search, for
    /// callers who may read them (HONCHO_SEARCH_CONCLUSION_KEYS; on unless turned off).
    pub fn with_conclusion_keys(mut self, on: bool) -> Self {
        self.conclusion_keys = on;
        self
    }

    pub fn conclusion_keys(&self) -> bool {
        self.conclusion_keys
    }

    /// The narrowest HNSW scan beam a search's vector leg uses (HONCHO_SEARCH_BEAM;
    /// docs/search.md). The transaction that sets it keeps it within pgvector's 40-1000.
    pub fn with_search_beam(mut self, beam: u16) -> Self {
        self.search_beam = beam;
        self
    }

    pub fn search_beam(&self) -> u16 {
        self.search_beam
    }

    /// Read the peers a query names by `rule` instead of the server's (the constants). For
    /// `make eval`'s comparisons and the tests that pin what each constant does.
    pub fn with_names(mut self, rule: search::NameRule) -> Self {
        self.names = rule;
        self
    }

    pub fn names(&self) -> search::NameRule {
        self.names
    }

    /// What registering a webhook endpoint checks (which targets, how many per workspace).
    pub fn with_webhook_policy(mut self, policy: webhook::WebhookPolicy) -> Self {
        self.webhooks = policy;
        self
    }

    pub fn webhook_policy(&self) -> webhook::WebhookPolicy {
        self.webhooks
    }

    /// Messages and conclusions written through this store get embeddings; search gets a vector
    /// leg. Without one, full-text search answers alone.
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// `statement_timeout` (None = unlimited) is applied by PostgreSQL to every statement of
    /// every pooled connection. While the database is unreachable, acquiring a connection gives up
    /// after a couple of seconds, so requests fail fast instead of queueing.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        statement_timeout: Option<Duration>,
    ) -> StoreResult<Self> {
        let mut opts = ConnectOptions::new(url.to_owned());
        opts.max_connections(max_connections)
            .min_connections(WARM_CONNECTIONS.min(max_connections))
            .connect_timeout(Duration::from_secs(2))
            .acquire_timeout(Duration::from_secs(3))
            .test_before_acquire_if_idle_for(PING_IF_IDLE_FOR)
            .sqlx_logging(false);
        if let Some(t) = statement_timeout {
            opts.statement_timeout(t);
        }
        Ok(Store::new(sea_orm::Database::connect(opts).await?))
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// `SELECT 1`: the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        self.db.ping().await?;
        Ok(())
    }
}

pub(crate) fn stmt<I>(sql: &str, values: I) -> Statement
where
    I: IntoIterator<Item = Value>,
{
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

pub(crate) fn new_id() -> String {
    nanoid::nanoid!()
}
