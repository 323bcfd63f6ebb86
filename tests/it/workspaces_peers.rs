use serde_json::json;

use crate::harness::TestApp;

const GOC_WS: &str = "mutation($id: ID!, $m: JSON, $c: JSON) {
  getOrCreateWorkspace(id: $id, metadata: $m, configuration: $c) { id metadata configuration createdAt } }";

#[tokio::test]
async fn get_or_create_workspace_returns_existing_unchanged() {
    let app = TestApp::new().await;
    let a = app.ok(GOC_WS, json!({"id": "ws1", "m": {"a": 1}})).await;
    assert_eq!(a["getOrCreateWorkspace"]["metadata"], json!({"a": 1}));
    let b = app.ok(GOC_WS, json!({"id": "ws1", "m": {"b": 2}})).await;
    assert_eq!(b["getOrCreateWorkspace"]["metadata"], json!({"a": 1}));
    assert_eq!(
        a["getOrCreateWorkspace"]["createdAt"],
        b["getOrCreateWorkspace"]["createdAt"]
    );
    let q = app
        .ok(
            "{ workspace(id: \"ws1\") { id } missing: workspace(id: \"nope\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(q["workspace"]["id"], "ws1");
    assert!(q["missing"].is_null());
}

#[tokio::test]
async fn update_workspace_replaces_metadata_and_merges_configuration() {
    let app = TestApp::new().await;
    app.ok(
        GOC_WS,
        json!({"id": "ws", "m": {"x": 1}, "c": {"a": 1, "b": 1}}),
    )
    .await;
    let d = app
        .ok(
            "mutation { updateWorkspace(id: \"ws\", metadata: {y: 2}, configuration: {b: 2, c: 3}) { metadata configuration } }",
            json!({}),
        )
        .await;
    assert_eq!(d["updateWorkspace"]["metadata"], json!({"y": 2}));
    assert_eq!(
        d["updateWorkspace"]["configuration"],
        json!({"a": 1, "b": 2, "c": 3})
    );
    let (code, _) = app
        .err(
            "mutation { updateWorkspace(id: \"nope\", metadata: {}) { id } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn invalid_names_and_metadata_are_bad_user_input() {
    let app = TestApp::new().await;
    let (code, msg) = app.err(GOC_WS, json!({"id": "has space"})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(msg.contains("workspace id"), "{msg}");
    let (code, _) = app.err(GOC_WS, json!({"id": "x".repeat(513)})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    let (code, _) = app.err(GOC_WS, json!({"id": "ok", "m": [1, 2]})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    let deep = json!({"a":{"b":{"c":{"d":{"e":{"f":1}}}}}});
    let (code, msg) = app.err(GOC_WS, json!({"id": "ok", "m": deep})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(msg.contains("5 levels"), "{msg}");
    assert_eq!(app.sql_i64("SELECT count(*) FROM workspaces").await, 0);
}

#[tokio::test]
async fn delete_workspace_refuses_while_sessions_exist() {
    let app = TestApp::new().await;
    app.ok(
        "mutation { getOrCreateSession(workspaceId: \"ws\", id: \"s1\") { id } }",
        json!({}),
    )
    .await;
    let (code, msg) = app
        .err("mutation { deleteWorkspace(id: \"ws\") }", json!({}))
        .await;
    assert_eq!(code, "CONFLICT");
    assert!(msg.contains("active sessions"));
    app.ok(
        "mutation { deleteSession(workspaceId: \"ws\", id: \"s1\") }",
        json!({}),
    )
    .await;
    let d = app
        .ok("mutation { deleteWorkspace(id: \"ws\") }", json!({}))
        .await;
    assert_eq!(d["deleteWorkspace"], true);
    let (code, _) = app
        .err("mutation { deleteWorkspace(id: \"ws\") }", json!({}))
        .await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn get_or_create_peer_replaces_given_fields_and_lists_in_creation_order() {
    let app = TestApp::new().await;
    let q = "mutation($id: ID!, $m: JSON, $c: JSON) { getOrCreatePeer(workspaceId: \"ws\", id: $id, metadata: $m, configuration: $c) { id workspaceId metadata configuration } }";
    app.ok(
        q,
        json!({"id": "alice", "m": {"v": 1}, "c": {"observe_me": false}}),
    )
    .await;
    let again = app.ok(q, json!({"id": "alice", "m": {"v": 2}})).await;
    assert_eq!(again["getOrCreatePeer"]["metadata"], json!({"v": 2}));
    assert_eq!(
        again["getOrCreatePeer"]["configuration"],
        json!({"observe_me": false}),
        "configuration not given: kept"
    );
    app.ok(q, json!({"id": "bob"})).await;
    let list = app
        .ok(
            "{ workspace(id: \"ws\") { peers { totalCount nodes { id } } desc: peers(order: DESC, first: 1) { nodes { id } pageInfo { hasNextPage } } } }",
            json!({}),
        )
        .await;
    assert_eq!(list["workspace"]["peers"]["totalCount"], 2);
    assert_eq!(
        list["workspace"]["peers"]["nodes"],
        json!([{"id": "alice"}, {"id": "bob"}])
    );
    assert_eq!(list["workspace"]["desc"]["nodes"], json!([{"id": "bob"}]));
    assert_eq!(list["workspace"]["desc"]["pageInfo"]["hasNextPage"], true);
    let (code, _) = app
        .err(
            "mutation { updatePeer(workspaceId: \"ws\", id: \"carol\", metadata: {}) { id } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn relay_pagination_walks_forward_and_backward() {
    let app = TestApp::new().await;
    for i in 0..7 {
        app.ok(
            "mutation($id: ID!) { getOrCreatePeer(workspaceId: \"ws\", id: $id) { id } }",
            json!({"id": format!("p{i}")}),
        )
        .await;
    }
    let page = "query($f: Int, $a: String, $l: Int, $b: String) { workspace(id: \"ws\") { peers(first: $f, after: $a, last: $l, before: $b) {
        edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }";
    let ids = |d: &serde_json::Value| -> Vec<String> {
        d["workspace"]["peers"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let p1 = app.ok(page, json!({"f": 3})).await;
    assert_eq!(ids(&p1), ["p0", "p1", "p2"]);
    assert_eq!(p1["workspace"]["peers"]["pageInfo"]["hasNextPage"], true);
    let end = p1["workspace"]["peers"]["pageInfo"]["endCursor"].clone();
    let p2 = app.ok(page, json!({"f": 3, "a": end})).await;
    assert_eq!(ids(&p2), ["p3", "p4", "p5"]);
    let end = p2["workspace"]["peers"]["pageInfo"]["endCursor"].clone();
    let p3 = app.ok(page, json!({"f": 3, "a": end})).await;
    assert_eq!(ids(&p3), ["p6"]);
    assert_eq!(p3["workspace"]["peers"]["pageInfo"]["hasNextPage"], false);
    let tail = app.ok(page, json!({"l": 2})).await;
    assert_eq!(ids(&tail), ["p5", "p6"]);
    let start = tail["workspace"]["peers"]["pageInfo"]["startCursor"].clone();
    let before = app.ok(page, json!({"l": 2, "b": start})).await;
    assert_eq!(ids(&before), ["p3", "p4"]);
    assert_eq!(
        before["workspace"]["peers"]["pageInfo"]["hasPreviousPage"],
        true
    );
    for bad in [
        json!({"f": 0}),
        json!({"f": 101}),
        json!({"l": -1}),
        json!({"f": 1, "a": "garbage"}),
    ] {
        let (code, _) = app.err(page, bad).await;
        assert_eq!(code, "BAD_USER_INPUT");
    }
}
