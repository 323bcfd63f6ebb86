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

/// The ports of `url`'s server that this process holds TCP connections to, each with whether it
/// sends without Nagle's algorithm (`TCP_NODELAY`).
fn nodelay_of_connections_to(url: &str) -> Vec<bool> {
    let port = reqwest::Url::parse(url).unwrap().port().unwrap_or(5432);
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: the descriptor is only read through, for the two calls below; if another
        // test closed it meanwhile, they fail (or read another socket of this process) and the
        // peer's port filters it out.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let Some(peer) = socket.peer_addr().ok().and_then(|a| a.as_socket()) else {
            continue;
        };
        if peer.port() == port
            && let Ok(nodelay) = socket.tcp_nodelay()
        {
            found.push(nodelay);
        }
    }
    found
}

/// Nagle's algorithm holds back the tail of a message written in two parts (a TLS record
/// boundary, a large bind such as a query vector) until PostgreSQL's delayed ACK, 40 ms on
/// Linux: sqlx 0.9.0 stopped setting `TCP_NODELAY`, and a session search with a 1536-dimension
/// vector waited that long on every call. sqlx 0.9.1 sets it again.
#[tokio::test]
async fn every_connection_to_postgresql_sends_without_nagles_delay() {
    let guard = blank_database().await;
    let store = Store::connect(&guard.url(), 4, None).await.unwrap();
    store.db().execute_unprepared("SELECT 1").await.unwrap();
    let found = nodelay_of_connections_to(&guard.url());
    assert!(!found.is_empty(), "no TCP connection to PostgreSQL found");
    assert!(found.iter().all(|&n| n), "{found:?}");
}
