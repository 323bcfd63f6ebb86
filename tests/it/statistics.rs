//! The server refreshes planner statistics and visibility maps that autovacuum has not
//! (store::statistics).

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

/// A session `s` of `ws` holding 3,001 messages of alice: one through the API (which creates the
/// workspace, session and peer), the rest inserted directly; the counters flushed at once.
/// `then` runs after the insert, on the same connection.
async fn fill_session(app: &TestApp, then: &str) {
    app.ok(
        CREATE,
        json!({"m": [{"peerId": "alice", "content": "hello"}]}),
    )
    .await;
    // Written and counted on one connection: the statistics of a backend reach the shared
    // counters when it flushes them, which pg_stat_force_next_flush makes immediate.
    app.store
        .db()
        .execute_unprepared(&format!(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', 'alice', g, 'filler ' || g FROM generate_series(2, 3001) g;
             {then}
             SELECT pg_stat_force_next_flush();"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_freshly_filled_table_is_analyzed_once_and_then_left_alone() {
    let app = TestApp::new().await;
    fill_session(&app, "").await;
    let first = app.store.analyze_stale_tables().await.unwrap();
    assert!(analyzed(&app, "messages").await, "analyzed: {first:?}");
    let second = app.store.analyze_stale_tables().await.unwrap();
    assert!(
        !second.contains(&"messages".to_owned()),
        "analyzed again with nothing changed: {second:?}"
    );
}

/// The plan of counting one author's messages in the session `s`, with the planner held to an
/// index (at 3,000 rows it might rather read the table), run for real.
async fn count_plan(app: &TestApp) -> serde_json::Value {
    use sea_orm::TransactionTrait;
    let txn = app.store.db().begin().await.unwrap();
    txn.execute_unprepared("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
        .await
        .unwrap();
    let row = txn
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM messages \
             WHERE workspace_name = 'ws' AND session_name = 's' AND peer_name = 'alice'",
        ))
        .await
        .unwrap()
        .unwrap();
    txn.rollback().await.unwrap();
    row.try_get_by_index::<serde_json::Value>(0).unwrap()
}

/// The scan node under the plan's aggregate.
fn scan(plan: &serde_json::Value) -> &serde_json::Value {
    &plan[0]["Plan"]["Plans"][0]
}

/// How many times `table` was vacuumed by hand (by the server's round, here).
async fn vacuums(app: &TestApp, table: &str) -> i64 {
    app.sql_i64(&format!(
        "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = '{table}'"
    ))
    .await
}

#[tokio::test]
async fn a_grown_table_is_vacuumed_once_and_a_sessions_count_by_author_is_an_index_only_scan() {
    let app = TestApp::new().await;
    // Bob writes in `s` too, and alice in `s2`: an index of the session alone, or of the author
    // alone, would read 20,000 more entries than alice's in `s`.
    for peer in ["alice", "bob"] {
        app.ok(
            "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s2\", messages: $m) { id } }",
            json!({"m": [{"peerId": peer, "content": "hello"}]}),
        )
        .await;
    }
    fill_session(
        &app,
        "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
         SELECT lpad(g::text, 21, 'y'), 'ws', 's', 'bob', g, 'filler' FROM generate_series(3002, 23001) g;
         INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
         SELECT lpad(g::text, 21, 'z'), 'ws', 's2', 'alice', g, 'filler' FROM generate_series(3, 20002) g;
         ANALYZE messages;",
    )
    .await;
    let before = count_plan(&app).await;
    assert_eq!(scan(&before)["Node Type"], "Index Only Scan", "{before}");
    let cond = scan(&before)["Index Cond"].as_str().unwrap_or_default();
    assert!(
        cond.contains("session_name") && cond.contains("peer_name"),
        "{before}"
    );
    assert_eq!(scan(&before)["Heap Fetches"], 3001, "{before}");

    let first = app.store.vacuum_stale_tables().await.unwrap();
    assert!(
        first.contains(&"messages".to_owned()),
        "vacuumed: {first:?}"
    );
    assert_eq!(vacuums(&app, "messages").await, 1);
    // Whether that vacuum could mark the new rows' pages all-visible (and so spare the count
    // every heap fetch) depends on the oldest snapshot the cluster holds, which other tests and
    // the replicas tests' standby share: measured in bench/README.md, not asserted here.
    let after = count_plan(&app).await;
    assert_eq!(scan(&after)["Node Type"], "Index Only Scan", "{after}");
    assert_eq!(scan(&after)["Actual Rows"], 3001, "{after}");

    let second = app.store.vacuum_stale_tables().await.unwrap();
    assert!(
        !second.contains(&"messages".to_owned()),
        "vacuumed again with nothing inserted: {second:?}"
    );
    assert_eq!(vacuums(&app, "messages").await, 1);
}
