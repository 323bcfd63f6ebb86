//! The store's transaction helper: retries on deadlocks, gives up with a retryable code, and the
//! database's own errors reach clients coded, never as INTERNAL.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use honcho_graphql::graphql::error::ApiError;
use honcho_graphql::store::{StoreError, TxOptions};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::harness::TestApp;

fn code(err: StoreError) -> String {
    let api: ApiError = err.into();
    api.0.extensions.unwrap().get("code").unwrap().to_string()
}

/// Two transactions lock two rows in opposite orders: PostgreSQL aborts one with 40P01, and the
/// helper runs that one again, so both commit.
#[tokio::test]
async fn a_deadlocked_transaction_is_retried_and_both_commit() {
    let app = TestApp::new().await;
    for w in ["a", "b"] {
        app.ok(
            &format!("mutation {{ getOrCreateWorkspace(id: \"{w}\") {{ id }} }}"),
            json!({}),
        )
        .await;
    }
    let attempts = Arc::new(AtomicUsize::new(0));
    let both_hold_one = Arc::new(Barrier::new(2));
    let run = |first: &'static str, second: &'static str| {
        let (store, attempts, barrier) =
            (app.store.clone(), attempts.clone(), both_hold_one.clone());
        async move {
            store
                .transaction(TxOptions::default(), |txn| {
                    let (attempts, barrier) = (attempts.clone(), barrier.clone());
                    async move {
                        let attempt = attempts.fetch_add(1, Ordering::SeqCst);
                        let lock = |w: &str| {
                            format!("UPDATE workspaces SET metadata = '{{\"by\": \"{first}\"}}' WHERE name = '{w}'")
                        };
                        txn.execute_unprepared(&lock(first)).await?;
                        // Only the first two attempts meet; a retry runs alone.
                        if attempt < 2 {
                            barrier.wait().await;
                        }
                        txn.execute_unprepared(&lock(second)).await?;
                        Ok(())
                    }
                })
                .await
        }
    };
    let (x, y) = tokio::join!(run("a", "b"), run("b", "a"));
    x.expect("first transaction");
    y.expect("second transaction");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        3,
        "one of the two was retried once"
    );
}

/// A body that always deadlocks is tried 5 times, then answers SERVICE_UNAVAILABLE.
#[tokio::test]
async fn a_transaction_that_keeps_deadlocking_gives_up_with_service_unavailable() {
    let app = TestApp::new().await;
    let attempts = AtomicUsize::new(0);
    let err = app
        .store
        .transaction(TxOptions::default(), |txn| {
            attempts.fetch_add(1, Ordering::SeqCst);
            async move {
                txn.execute_unprepared(
                    "DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$",
                )
                .await?;
                Ok(())
            }
        })
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 5);
    assert_eq!(code(err), "\"SERVICE_UNAVAILABLE\"");
}

#[tokio::test]
async fn database_errors_a_client_can_cause_get_codes() {
    let app = TestApp::new().await;
    let cases = [
        (
            "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40001'; END $$",
            "SERVICE_UNAVAILABLE",
        ),
        (
            "INSERT INTO sessions (id, name, workspace_name) VALUES ('xxxxxxxxxxxxxxxxxxxxx', 'x', 'nows')",
            "CONFLICT",
        ),
        ("SELECT 1 OFFSET -1", "BAD_USER_INPUT"),
        ("SELECT 1 LIMIT -1", "BAD_USER_INPUT"),
    ];
    for (sql, want) in cases {
        let err = app
            .store
            .transaction(TxOptions::default(), |txn| async move {
                txn.execute_unprepared(sql).await?;
                Ok(())
            })
            .await
            .unwrap_err();
        assert_eq!(code(err), format!("\"{want}\""), "{sql}");
    }
}

/// Writers of messages and deleters of the same session, at once, many rounds: every answer is a
/// success or a coded, expected error, and what remains is a session whose seqs are 1..N.
#[tokio::test]
async fn create_messages_racing_delete_session_never_answers_internal() {
    let app = Arc::new(TestApp::new().await);
    let create = "mutation($s: String!, $p: String!) { createMessages(workspaceId: \"w\", sessionId: $s, \
        messages: [{peerId: $p, content: \"one\"}, {peerId: \"shared\", content: \"two\"}]) { seqInSession } }";
    let delete = "mutation($s: ID!) { deleteSession(workspaceId: \"w\", id: $s) }";
    let mut tasks = Vec::new();
    for round in 0..12 {
        let s = format!("s{}", round % 3);
        for writer in 0..4 {
            let (app, s) = (app.clone(), s.clone());
            tasks.push(tokio::spawn(async move {
                app.exec(create, json!({"s": s, "p": format!("p{writer}")}))
                    .await
            }));
        }
        for _ in 0..2 {
            let (app, s) = (app.clone(), s.clone());
            tasks.push(tokio::spawn(async move {
                app.exec(delete, json!({"s": s})).await
            }));
        }
    }
    let mut codes: Vec<String> = Vec::new();
    for t in tasks {
        let resp: Value = t.await.unwrap();
        for e in resp["errors"].as_array().into_iter().flatten() {
            codes.push(
                e["extensions"]["code"]
                    .as_str()
                    .unwrap_or("none")
                    .to_owned(),
            );
        }
    }
    // deleteSession of a session already deleted is NOT_FOUND; nothing else may fail.
    assert!(
        codes.iter().all(|c| c == "NOT_FOUND"),
        "unexpected codes: {codes:?}"
    );
    for s in ["s0", "s1", "s2"] {
        let q = format!(
            "SELECT count(*) - COALESCE(MAX(seq_in_session), 0) FROM messages \
             WHERE workspace_name = 'w' AND session_name = '{s}'"
        );
        assert_eq!(app.sql_i64(&q).await, 0, "seqs of {s} are 1..N");
    }
}
