//! The server merges GIN pending lists into their indexes (store::gin_pending).

use serde_json::json;

use crate::harness::TestApp;

const CREATE: &str = "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }";

#[tokio::test]
async fn a_round_merges_what_writes_left_pending_and_the_next_finds_nothing() {
    let app = TestApp::new().await;
    let m: Vec<_> = (0..100)
        .map(|i| json!({"peerId": "alice", "content": format!("message number {i} about gardens")}))
        .collect();
    app.ok(CREATE, json!({"m": m})).await;
    let merged = app.store.flush_gin_pending_lists().await.unwrap();
    assert!(merged > 0, "100 messages left nothing pending");
    assert_eq!(app.store.flush_gin_pending_lists().await.unwrap(), 0);
    // The merged entries are in the index: the search still finds them.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { session(id: \"s\") { search(query: \"gardens\", limit: 100) { ... on MessageHits { results { id } } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["workspace"]["session"]["search"]["results"]
            .as_array()
            .unwrap()
            .len(),
        100
    );
}
