use serde_json::{Value, json};

use crate::harness::TestApp;

const MEMBERS: &str = "query($s: ID!) { workspace(id: \"ws\") { session(id: $s) { peers { peerId observeMe observeOthers leftAt peer { id } } } } }";

fn members(d: &Value) -> Vec<(String, Value, Value)> {
    d["workspace"]["session"]["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["peerId"].as_str().unwrap().to_owned(),
                p["observeMe"].clone(),
                p["observeOthers"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn get_or_create_session_with_peers_creates_them_and_merges_configuration() {
    let app = TestApp::new().await;
    let q = "mutation($m: JSON, $c: JSON, $p: [SessionPeerInput!]) { getOrCreateSession(workspaceId: \"ws\", id: \"s\", metadata: $m, configuration: $c, peers: $p) { id metadata configuration isActive } }";
    app.ok(
        q,
        json!({"m": {"v": 1}, "c": {"a": 1}, "p": [{"peerId": "alice", "observeOthers": true}]}),
    )
    .await;
    let d = app
        .ok(
            q,
            json!({"m": {"v": 2}, "c": {"b": 2}, "p": [{"peerId": "bob"}]}),
        )
        .await;
    assert_eq!(d["getOrCreateSession"]["metadata"], json!({"v": 2}));
    assert_eq!(
        d["getOrCreateSession"]["configuration"],
        json!({"a": 1, "b": 2})
    );
    let m = app.ok(MEMBERS, json!({"s": "s"})).await;
    let got = members(&m);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], ("alice".into(), Value::Null, json!(true)));
    assert_eq!(got[1].0, "bob");
    assert_eq!(m["workspace"]["session"]["peers"][1]["peer"]["id"], "bob");
}

#[tokio::test]
async fn removed_peers_leave_and_rejoin_with_new_config() {
    let app = TestApp::new().await;
    app.ok(
        "mutation { addPeersToSession(workspaceId: \"ws\", sessionId: \"s\", peers: [{peerId: \"alice\", observeMe: true}, {peerId: \"bob\"}]) { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { removePeersFromSession(workspaceId: \"ws\", sessionId: \"s\", peerIds: [\"alice\"]) { id } }",
        json!({}),
    )
    .await;
    let m = app.ok(MEMBERS, json!({"s": "s"})).await;
    assert_eq!(members(&m).len(), 1, "alice left");
    // An active member keeps its config when added again; one who left takes the new one.
    app.ok(
        "mutation { addPeersToSession(workspaceId: \"ws\", sessionId: \"s\", peers: [{peerId: \"alice\", observeMe: false}, {peerId: \"bob\", observeMe: false}]) { id } }",
        json!({}),
    )
    .await;
    let m = app.ok(MEMBERS, json!({"s": "s"})).await;
    let got = members(&m);
    let alice = got.iter().find(|p| p.0 == "alice").unwrap();
    let bob = got.iter().find(|p| p.0 == "bob").unwrap();
    assert_eq!(alice.1, json!(false));
    assert_eq!(bob.1, Value::Null);
}

#[tokio::test]
async fn set_session_peer_config_merges_flags_and_enforces_the_observer_limit() {
    let app = TestApp::new().await;
    let peers: Vec<Value> = (0..10)
        .map(|i| json!({"peerId": format!("p{i}"), "observeOthers": true}))
        .collect();
    app.ok(
        "mutation($p: [SessionPeerInput!]!) { addPeersToSession(workspaceId: \"ws\", sessionId: \"s\", peers: $p) { id } }",
        json!({"p": peers}),
    )
    .await;
    let q = "mutation($p: ID!, $me: Boolean, $others: Boolean) { setSessionPeerConfig(workspaceId: \"ws\", sessionId: \"s\", peerId: $p, observeMe: $me, observeOthers: $others) { peerId observeMe observeOthers } }";
    app.ok(
        "mutation { getOrCreatePeer(workspaceId: \"ws\", id: \"extra\") { id } }",
        json!({}),
    )
    .await;
    let (code, msg) = app.err(q, json!({"p": "extra", "others": true})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(msg.contains("observers"), "{msg}");
    let d = app.ok(q, json!({"p": "p0", "me": false})).await;
    assert_eq!(
        d["setSessionPeerConfig"],
        json!({"peerId": "p0", "observeMe": false, "observeOthers": true}),
        "null flags leave stored ones alone"
    );
    let (code, _) = app.err(q, json!({"p": "ghost", "me": true})).await;
    assert_eq!(code, "NOT_FOUND");
    // An 11th observer through addPeersToSession is refused too, and writes nothing.
    let (code, _) = app
        .err(
            "mutation { addPeersToSession(workspaceId: \"ws\", sessionId: \"s\", peers: [{peerId: \"p10\", observeOthers: true}]) { id } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM peers WHERE name = 'p10'")
            .await,
        0
    );
}

#[tokio::test]
async fn clone_session_keeps_seqs_token_counts_and_timestamps_up_to_the_cutoff() {
    let app = TestApp::new().await;
    let created = app
        .ok(
            "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [
                {peerId: \"alice\", content: \"Hello, how are you?\", createdAt: \"2024-01-01T00:00:00Z\"},
                {peerId: \"bob\", content: \"fine\"},
                {peerId: \"alice\", content: \"good\"}]) { id } }",
            json!({}),
        )
        .await;
    let cutoff = created["createMessages"][1]["id"].clone();
    let d = app
        .ok(
            "mutation($m: ID) { cloneSession(workspaceId: \"ws\", id: \"s\", upToMessageId: $m) { id messages { nodes { id content seqInSession tokenCount createdAt } } peers { peerId } } }",
            json!({"m": cutoff}),
        )
        .await;
    let clone = &d["cloneSession"];
    assert_eq!(clone["id"].as_str().unwrap().len(), 21);
    let msgs = clone["messages"]["nodes"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["seqInSession"], 1);
    assert_eq!(msgs[0]["tokenCount"], 6);
    assert_eq!(msgs[0]["createdAt"], "2024-01-01T00:00:00Z");
    assert_eq!(msgs[1]["seqInSession"], 2);
    assert_ne!(msgs[0]["id"], created["createMessages"][0]["id"]);
    assert_eq!(clone["peers"].as_array().unwrap().len(), 2);
    let (code, _) = app
        .err(
            "mutation { cloneSession(workspaceId: \"ws\", id: \"s\", upToMessageId: \"nope\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn clone_session_pairs_new_ids_with_messages_in_sql_without_reading_them() {
    let app = TestApp::new().await;
    crate::harness::session_of(&app, 30).await;
    app.take_sql();
    let d = app
        .ok(
            "mutation { cloneSession(workspaceId: \"ws\", id: \"s\") { id } }",
            json!({}),
        )
        .await;
    // No statement but the INSERT ... SELECT touches the messages' content: nothing of them is
    // loaded into the server (a SELECT of whole rows did, to learn their seqs).
    for sql in app.take_sql() {
        if sql.contains("content") {
            assert!(
                sql.trim_start().starts_with("INSERT INTO messages"),
                "{sql}"
            );
        }
    }
    let clone = d["cloneSession"]["id"].as_str().unwrap().to_owned();
    let d = app
        .ok(
            "query($c: ID!) { workspace(id: \"ws\") { session(id: $c) { messages(first: 100) { nodes { id seqInSession content } } } } }",
            json!({"c": clone}),
        )
        .await;
    let nodes = d["workspace"]["session"]["messages"]["nodes"]
        .as_array()
        .unwrap();
    assert_eq!(nodes.len(), 30);
    let mut ids = std::collections::HashSet::new();
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["seqInSession"], i as i64 + 1);
        assert_eq!(n["content"], format!("message {}", i + 1));
        assert!(
            ids.insert(n["id"].as_str().unwrap().to_owned()),
            "ids are distinct"
        );
    }
}

#[tokio::test]
async fn delete_session_removes_its_messages() {
    let app = TestApp::new().await;
    app.ok(
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [{peerId: \"a\", content: \"x\"}]) { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { deleteSession(workspaceId: \"ws\", id: \"s\") }",
        json!({}),
    )
    .await;
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { session(id: \"s\") { id } } }",
            json!({}),
        )
        .await;
    assert!(d["workspace"]["session"].is_null());
    let (code, _) = app
        .err(
            "mutation { deleteSession(workspaceId: \"ws\", id: \"s\") }",
            json!({}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
}
