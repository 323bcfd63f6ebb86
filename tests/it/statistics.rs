//! The server refreshes planner statistics that autovacuum has not (store::statistics).

use sea_orm::ConnectionTrait;
use serde_json::json;

use crate::harness::TestApp;

const CREATE: &str = "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }";

/// Whether PostgreSQL holds statistics for `table` from any analyze, ours or autovacuum's.
async fn analyzed(app: &TestApp, table: &str) -> bool {
    app.sql_one(&format!(
        "SELECT (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL) FROM pg_stat_user_tables \
         WHERE relname = '{table}'"
    ))
    .await
}

#[tokio::test]
async fn a_freshly_filled_table_is_analyzed_once_and_then_left_alone() {
    let app = TestApp::new().await;
    app.ok(
        CREATE,
        json!({"m": [{"peerId": "alice", "content": "hello"}]}),
    )
    .await;
    // Written and counted on one connection: the statistics of a backend reach the shared
    // counters when it flushes them, which pg_stat_force_next_flush makes immediate.
    app.store
        .db()
        .execute_unprepared(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', 'alice', g, 'filler ' || g FROM generate_series(2, 3001) g;
             SELECT pg_stat_force_next_flush();",
        )
        .await
        .unwrap();
    let first = app.store.analyze_stale_tables().await.unwrap();
    assert!(analyzed(&app, "messages").await, "analyzed: {first:?}");
    let second = app.store.analyze_stale_tables().await.unwrap();
    assert!(
        !second.contains(&"messages".to_owned()),
        "analyzed again with nothing changed: {second:?}"
    );
}
