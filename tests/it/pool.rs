//! The server's connection pool keeps connections open before any request needs them: a request
//! that has to wait for a new connection waits for a new PostgreSQL backend.

use std::time::{Duration, Instant};

use honcho_graphql::store::{Store, WARM_CONNECTIONS};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::harness::blank_database;

#[tokio::test]
async fn the_pool_opens_its_warm_connections_before_any_request() {
    let guard = blank_database().await;
    let store = Store::connect(&guard.url(), 20, None).await.unwrap();
    let watcher = Database::connect(guard.url()).await.unwrap();
    let started = Instant::now();
    let mut open = 0;
    while started.elapsed() < Duration::from_secs(10) {
        let row = watcher
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT count(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            ))
            .await
            .unwrap()
            .unwrap();
        open = row.try_get::<i64>("", "n").unwrap();
        if open >= i64::from(WARM_CONNECTIONS) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open, i64::from(WARM_CONNECTIONS));
    store.ping().await.unwrap();
}
