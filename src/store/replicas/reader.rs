//! The connection a request reads through: a replica chosen for it, or the primary. A statement
//! that fails on the replica because of the replica (it went away, does not have the database yet,
//! or cancelled the statement to replay WAL) runs again on the primary, so a replica going down
//! costs a request time, never an error.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, ExecResult, QueryResult, Statement,
};

use super::Replica;

/// Reads go to `replica` when there is one, else (and when it fails) to `primary`.
#[derive(Clone)]
pub struct Reader {
    primary: DatabaseConnection,
    replica: Option<Arc<Replica>>,
}

impl Reader {
    pub(crate) fn new(primary: DatabaseConnection, replica: Option<Arc<Replica>>) -> Self {
        Reader { primary, replica }
    }

    /// The replica this reader uses (None: the primary).
    pub fn replica(&self) -> Option<&Arc<Replica>> {
        self.replica.as_ref()
    }

    async fn run<'a, T>(
        &'a self,
        op: impl Fn(&'a DatabaseConnection) -> BoxFuture<'a, Result<T, DbErr>>,
    ) -> Result<T, DbErr> {
        if let Some(replica) = &self.replica {
            match op(replica.db()).await {
                Err(err) if replica.falls_back(&err) => {}
                done => {
                    replica.served();
                    return done;
                }
            }
        }
        op(&self.primary).await
    }
}

#[async_trait]
impl ConnectionTrait for Reader {
    fn get_database_backend(&self) -> DbBackend {
        self.primary.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.run(|db| db.execute_raw(stmt.clone())).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.run(|db| db.execute_unprepared(sql)).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.run(|db| db.query_one_raw(stmt.clone())).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.run(|db| db.query_all_raw(stmt.clone())).await
    }
}
