//! Everything that reads or writes the database, one module per resource. Knows nothing of GraphQL.

pub mod error;
pub mod filter;
pub mod message;
pub mod page;
pub mod peer;
pub mod session;
pub mod tokens;
pub mod validate;
pub mod workspace;

use sea_orm::{ConnectOptions, DatabaseConnection, DbBackend, Statement, Value};
use std::time::Duration;

pub use error::{StoreError, StoreResult};

/// Handle to the database; cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
}

impl Store {
    pub fn new(db: DatabaseConnection) -> Self {
        Store { db }
    }

    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let mut opts = ConnectOptions::new(url.to_owned());
        opts.max_connections(max_connections)
            .min_connections(1)
            .connect_timeout(Duration::from_secs(5))
            .acquire_timeout(Duration::from_secs(5))
            .sqlx_logging(false);
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
