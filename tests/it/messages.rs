use serde_json::{Value, json};

use crate::harness::TestApp;

const CREATE: &str = "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: $s, messages: $m) {
  id content peerId sessionId workspaceId metadata createdAt tokenCount seqInSession } }";

fn msg(peer: &str, content: &str) -> Value {
    json!({"peerId": peer, "content": content})
}

#[tokio::test]
async fn create_messages_numbers_from_one_counts_tokens_and_joins_authors() {
    let app = TestApp::new().await;
    let d = app
        .ok(
            CREATE,
            json!({"s": "chat", "m": [msg("alice", "Hello, how are you?"), msg("bob", "fine\u{0}!")]}),
        )
        .await;
    let created = d["createMessages"].as_array().unwrap();
    assert_eq!(created[0]["seqInSession"], 1);
    assert_eq!(created[0]["tokenCount"], 6);
    assert_eq!(created[0]["id"].as_str().unwrap().len(), 21);
    assert_eq!(created[0]["sessionId"], "chat");
    assert_eq!(created[0]["workspaceId"], "ws");
    assert_eq!(created[1]["seqInSession"], 2);
    assert_eq!(created[1]["content"], "fine!", "NUL bytes are stripped");
    assert_eq!(
        created[0]["createdAt"], created[1]["createdAt"],
        "one timestamp per batch"
    );
    let d = app
        .ok(CREATE, json!({"s": "chat", "m": [msg("carol", "hi")]}))
        .await;
    assert_eq!(d["createMessages"][0]["seqInSession"], 3);
    let other = app
        .ok(CREATE, json!({"s": "other", "m": [msg("alice", "x")]}))
        .await;
    assert_eq!(other["createMessages"][0]["seqInSession"], 1, "per session");
    let m = app
        .ok(
            "{ workspace(id: \"ws\") { session(id: \"chat\") { peers { peerId } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        m["workspace"]["session"]["peers"].as_array().unwrap().len(),
        3
    );
}

#[tokio::test]
async fn explicit_created_at_is_kept_and_rendered_in_utc() {
    let app = TestApp::new().await;
    let d = app
        .ok(
            CREATE,
            json!({"s": "s", "m": [{"peerId": "a", "content": "x", "createdAt": "2023-01-01T14:00:00+02:00"}]}),
        )
        .await;
    assert_eq!(d["createMessages"][0]["createdAt"], "2023-01-01T12:00:00Z");
}

#[tokio::test]
async fn a_batch_with_one_bad_message_writes_nothing() {
    let app = TestApp::new().await;
    let long = "a".repeat(25_001);
    for bad in [
        json!([msg("alice", "ok"), msg("bob", &long)]),
        json!([msg("alice", "ok"), msg("not a name", "x")]),
        json!([msg("alice", "ok"), {"peerId": "bob", "content": "x", "metadata": 5}]),
        json!([]),
        Value::Array((0..101).map(|i| msg("a", &i.to_string())).collect()),
    ] {
        let (code, _) = app.err(CREATE, json!({"s": "s", "m": bad})).await;
        assert_eq!(code, "BAD_USER_INPUT");
    }
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
    assert_eq!(app.sql_i64("SELECT count(*) FROM peers").await, 0);
    assert_eq!(app.sql_i64("SELECT count(*) FROM sessions").await, 0);
    let hundred: Vec<Value> = (0..100).map(|i| msg("a", &i.to_string())).collect();
    let d = app.ok(CREATE, json!({"s": "s", "m": hundred})).await;
    let created = d["createMessages"].as_array().unwrap();
    assert_eq!(created.len(), 100);
    assert_eq!(
        created[99]["content"], "99",
        "response order = request order"
    );
    assert_eq!(created[99]["seqInSession"], 100);
}

#[tokio::test]
async fn concurrent_writers_to_one_session_get_gapless_unique_seqs() {
    let app = TestApp::new().await;
    let writers = 32;
    let per_batch = 3;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let schema = app.schema.clone();
        tasks.push(tokio::spawn(async move {
            let batch: Vec<Value> = (0..per_batch)
                .map(|i| msg(&format!("peer{}", w % 5), &format!("w{w} m{i}")))
                .collect();
            let req = async_graphql::Request::new(CREATE).variables(
                async_graphql::Variables::from_json(json!({"s": "busy", "m": batch})),
            );
            let resp = honcho_graphql::graphql::execute(&schema, req).await;
            assert!(resp.errors.is_empty(), "{:?}", resp.errors);
            let data = resp.data.into_json().unwrap();
            data["createMessages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["seqInSession"].as_i64().unwrap())
                .collect::<Vec<i64>>()
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let seqs = t.await.unwrap();
        // A batch is contiguous: nobody interleaves inside it.
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        all.extend(seqs);
    }
    all.sort();
    let n = (writers * per_batch) as i64;
    assert_eq!(all, (1..=n).collect::<Vec<_>>());
    assert_eq!(
        app.sql_i64(
            "SELECT count(DISTINCT seq_in_session) FROM messages WHERE session_name = 'busy'"
        )
        .await,
        n
    );
}

#[tokio::test]
async fn update_message_replaces_metadata_and_null_keeps_it() {
    let app = TestApp::new().await;
    let d = app
        .ok(
            CREATE,
            json!({"s": "s", "m": [{"peerId": "a", "content": "x", "metadata": {"k": 1}}]}),
        )
        .await;
    let id = d["createMessages"][0]["id"].clone();
    let q = "mutation($id: ID!, $m: JSON) { updateMessage(workspaceId: \"ws\", id: $id, metadata: $m) { metadata } }";
    let kept = app.ok(q, json!({"id": id, "m": null})).await;
    assert_eq!(kept["updateMessage"]["metadata"], json!({"k": 1}));
    let replaced = app.ok(q, json!({"id": id, "m": {"j": 2}})).await;
    assert_eq!(replaced["updateMessage"]["metadata"], json!({"j": 2}));
    let cleared = app.ok(q, json!({"id": id, "m": {}})).await;
    assert_eq!(cleared["updateMessage"]["metadata"], json!({}));
    let (code, _) = app.err(q, json!({"id": "nope", "m": {}})).await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn session_messages_are_in_seq_order_and_message_lookup_works() {
    let app = TestApp::new().await;
    let batch: Vec<Value> = (1..=5).map(|i| msg("a", &format!("m{i}"))).collect();
    let d = app.ok(CREATE, json!({"s": "s", "m": batch})).await;
    let third = d["createMessages"][2]["id"].clone();
    let q = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") {
                session(id: \"s\") { messages(last: 2) { nodes { seqInSession } } desc: messages(order: DESC, first: 1) { nodes { content } } }
                message(id: $id) { content seqInSession context(before: 1, after: 5) { seqInSession } }
                messages { totalCount } } }",
            json!({"id": third}),
        )
        .await;
    let ws = &q["workspace"];
    assert_eq!(
        ws["session"]["messages"]["nodes"],
        json!([{"seqInSession": 4}, {"seqInSession": 5}])
    );
    assert_eq!(ws["session"]["desc"]["nodes"][0]["content"], "m5");
    assert_eq!(ws["message"]["seqInSession"], 3);
    let ctx: Vec<i64> = ws["message"]["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect();
    assert_eq!(ctx, [2, 3, 4, 5]);
    assert_eq!(ws["messages"]["totalCount"], 5);
}
