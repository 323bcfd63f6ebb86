use serde_json::{Value, json};

use crate::harness::TestApp;

/// Seeds `n` messages spread over 4 sessions and 5 peers.
async fn seed(app: &TestApp, n: usize) {
    for s in 0..4 {
        let batch: Vec<Value> = (0..n / 4)
            .map(|i| json!({"peerId": format!("peer{}", i % 5), "content": format!("s{s} m{i}")}))
            .collect();
        app.ok(
            "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: $s, messages: $m) { id } }",
            json!({"s": format!("s{s}"), "m": batch}),
        )
        .await;
    }
}

#[tokio::test]
async fn hundred_messages_with_peer_session_and_members_take_constant_statements() {
    let app = TestApp::new().await;
    seed(&app, 100).await;
    app.take_statements();
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { messages(first: 100) { nodes { id peer { id metadata } session { id peers { peerId peer { id } } } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["workspace"]["messages"]["nodes"]
            .as_array()
            .unwrap()
            .len(),
        100
    );
    let statements = app.take_statements();
    // workspace, messages, peers, sessions, members (+ peers of members, merged into the
    // peer batch when they arrive together, or one more batch when they don't).
    assert!(
        statements <= 5,
        "100 messages with peer, session and members ran {statements} statements"
    );
}

#[tokio::test]
async fn context_on_a_list_of_messages_is_one_batched_query() {
    let app = TestApp::new().await;
    seed(&app, 100).await;
    app.take_statements();
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { messages(first: 100) { nodes { seqInSession context(before: 2, after: 2) { id } } } } }",
            json!({}),
        )
        .await;
    let nodes = d["workspace"]["messages"]["nodes"].as_array().unwrap();
    let first = &nodes[0];
    assert_eq!(first["seqInSession"], 1);
    assert_eq!(
        first["context"].as_array().unwrap().len(),
        3,
        "seq 1: itself and 2 after"
    );
    assert_eq!(nodes[10]["context"].as_array().unwrap().len(), 5);
    let statements = app.take_statements();
    assert_eq!(
        statements, 3,
        "context on 100 messages: workspace, messages, one range query"
    );
}
