//! Everything that reads or writes the database, one module per resource. Knows nothing of GraphQL.

pub mod conclusion;
pub mod embedding;
pub mod error;
pub mod events;
pub mod filter;
pub mod message;
pub mod meta;
pub mod page;
pub mod path;
pub mod peer;
pub mod queue;
pub mod search;
pub mod session;
pub mod tokens;
pub mod tx;
pub mod validate;
pub mod workspace;

use sea_orm::{ConnectOptions, DatabaseConnection, DbBackend, Statement, Value};
use std::sync::Arc;
use std::time::Duration;

use crate::embed::Embedder;

pub use error::{StoreError, StoreResult};
pub use tx::{IterativeScan, Tx, TxOptions};

/// Handle to the database and the embedder; cheap to clone (both are shared).
#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
    embedder: Option<Arc<dyn Embedder>>,
    /// `createMessages` queues work for the deriver (only when an LLM is configured: without
    /// one the queue would only grow).
    derive: bool,
}

impl Store {
    pub fn new(db: DatabaseConnection) -> Self {
        Store {
            db,
            embedder: None,
            derive: false,
        }
    }

    /// Messages written through this store are queued for the deriver.
    pub fn with_derivation(mut self, on: bool) -> Self {
        self.derive = on;
        self
    }

    pub fn derives(&self) -> bool {
        self.derive
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
            .min_connections(1)
            .connect_timeout(Duration::from_secs(2))
            .acquire_timeout(Duration::from_secs(3))
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

/// pgvector's text form, `[x,y,…]`, for binding a vector as a text parameter cast to `vector`.
pub(crate) fn vector_literal(v: &[f32]) -> String {
    let mut out = String::with_capacity(v.len() * 12 + 2);
    out.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&x.to_string());
    }
    out.push(']');
    out
}

pub(crate) fn new_id() -> String {
    nanoid::nanoid!()
}
