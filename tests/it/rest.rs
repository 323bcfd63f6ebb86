//! Honcho's v3 REST API: each route's status, JSON shape and auth, over HTTP against a real
//! server router.

use honcho_graphql::auth::KeySpec;
use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_llm::{Chunk, FakeLlm, Reply, prompts};
use crate::harness::{AppServer, TestApp, bearer, contents};

/// A REST client of a router served on a local port.
struct Rest {
    http: AppServer,
    key: Option<String>,
}

impl Rest {
    async fn serve(app: TestApp) -> Rest {
        Self::serve_with_limit(app, 1 << 20).await
    }

    /// As [`Rest::serve`], with this body limit (`HONCHO_MAX_BODY_BYTES`).
    async fn serve_with_limit(app: TestApp, max_body_bytes: usize) -> Rest {
        Rest {
            http: AppServer::with_body_limit(app, max_body_bytes).await,
            key: None,
        }
    }

    async fn new() -> Rest {
        Self::serve(TestApp::new().await).await
    }

    fn as_key(&mut self, key: Option<String>) -> &mut Self {
        self.key = key;
        self
    }

    /// Status and JSON body (Null when empty).
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.http.base);
        let mut req = self.http.client.request(method, url);
        if let Some(k) = &self.key {
            req = req.header("authorization", k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
        };
        (status, value)
    }

    /// Each (method, path, body) answers its status; all mismatches are reported at once.
    async fn expect(&self, cases: &[(&str, &str, Value, u16)]) {
        let mut wrong = Vec::new();
        for (method, path, body, want) in cases {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let (got, answer) = self.call(method.clone(), path, Some(body.clone())).await;
            if got != *want {
                wrong.push(format!("{method} {path}: want {want}, got {got} {answer}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.call(Method::DELETE, path, None).await
    }

    /// Session `s` of workspace `w`, with alice and bob as members.
    async fn session_s_of_alice_and_bob(&self) {
        let session = json!({"id": "s", "peers": {"alice": {}, "bob": {}}});
        self.post("/v3/workspaces/w/sessions", session).await;
    }

    /// POSTs `conclusions` (a list) to workspace `w`.
    async fn conclude(&self, conclusions: Value) -> (u16, Value) {
        let body = json!({"conclusions": conclusions});
        self.post("/v3/workspaces/w/conclusions", body).await
    }
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

#[tokio::test]
async fn rest_workspace_get_or_create_answers_201_then_200_in_honchos_shape() {
    let api = Rest::new().await;
    let (status, ws) = api
        .post("/v3/workspaces", json!({"id": "w", "metadata": {"a": 1}}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(keys(&ws), ["configuration", "created_at", "id", "metadata"]);
    assert_eq!(ws["id"], "w");
    assert_eq!(ws["metadata"], json!({"a": 1}));
    assert!(ws["created_at"].as_str().unwrap().ends_with('Z'));
    // Existing: unchanged, 200.
    let (status, again) = api
        .post("/v3/workspaces", json!({"id": "w", "metadata": {"b": 2}}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(again["metadata"], json!({"a": 1}));
    // PUT replaces metadata and merges configuration; upserts.
    let (status, put) = api
        .put(
            "/v3/workspaces/w",
            json!({"metadata": {"c": 3}, "configuration": {"x": 1}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(put["metadata"], json!({"c": 3}));
    assert_eq!(put["configuration"], json!({"x": 1}));
    let (status, _) = api.put("/v3/workspaces/fresh", json!({})).await;
    assert_eq!(status, 200);
    // List: Honcho's page shape.
    let (status, page) = api
        .post("/v3/workspaces/list?size=1&page=2", json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(keys(&page), ["items", "page", "pages", "size", "total"]);
    assert_eq!(
        (page["total"].as_u64(), page["pages"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(page["items"][0]["id"], "fresh");
    let (_, filtered) = api
        .post("/v3/workspaces/list", json!({"filters": {"id": "w"}}))
        .await;
    assert_eq!(filtered["total"], 1);
    // Bad input is 422 with a detail.
    let (status, err) = api.post("/v3/workspaces", json!({"metadata": {}})).await;
    assert_eq!(status, 422);
    assert!(err["detail"].is_string());
    let (status, _) = api.post("/v3/workspaces/list?size=101", json!({})).await;
    assert_eq!(status, 422);
    let (status, _) = api
        .post("/v3/workspaces/list", json!({"filters": {"nope": 1}}))
        .await;
    assert_eq!(status, 422);
    // Delete: 409 while a session is active, 202 after, 404 when gone.
    api.post("/v3/workspaces/w/sessions", json!({"id": "s"}))
        .await;
    let (status, err) = api.delete("/v3/workspaces/w").await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(api.delete("/v3/workspaces/w/sessions/s").await.0, 202);
    let (status, body) = api.delete("/v3/workspaces/w").await;
    assert_eq!(
        (status, &body["message"]),
        (202, &json!("Workspace deletion accepted"))
    );
    assert_eq!(api.delete("/v3/workspaces/w").await.0, 404);
}

#[tokio::test]
async fn rest_peers_sessions_and_messages_round_trip() {
    let api = Rest::new().await;
    let (status, peer) = api
        .post(
            "/v3/workspaces/w/peers",
            json!({"id": "alice", "metadata": {"k": "v"}}),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        keys(&peer),
        [
            "configuration",
            "created_at",
            "id",
            "metadata",
            "workspace_id"
        ]
    );
    assert_eq!(
        api.post("/v3/workspaces/w/peers", json!({"id": "alice"}))
            .await
            .0,
        200
    );
    let (_, put) = api
        .put(
            "/v3/workspaces/w/peers/alice",
            json!({"configuration": {"observe_me": false}}),
        )
        .await;
    assert_eq!(put["configuration"], json!({"observe_me": false}));
    assert_eq!(put["metadata"], json!({"k": "v"}));
    let (status, session) = api
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s", "peers": {"alice": {}, "bob": {"observe_others": true}}}),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        keys(&session),
        [
            "configuration",
            "created_at",
            "id",
            "is_active",
            "metadata",
            "workspace_id"
        ]
    );
    let (_, members) = api.get("/v3/workspaces/w/sessions/s/peers").await;
    assert_eq!(members["total"], 2);
    let (_, config) = api
        .get("/v3/workspaces/w/sessions/s/peers/bob/config")
        .await;
    assert_eq!(config, json!({"observe_me": null, "observe_others": true}));
    assert_eq!(
        api.put(
            "/v3/workspaces/w/sessions/s/peers/bob/config",
            json!({"observe_me": false})
        )
        .await
        .0,
        204
    );
    let (_, config) = api
        .get("/v3/workspaces/w/sessions/s/peers/bob/config")
        .await;
    assert_eq!(config, json!({"observe_me": false, "observe_others": true}));
    // Messages: a batch, in order, 201.
    let batch: Vec<Value> = (0..5)
        .map(|i| json!({"peer_id": if i % 2 == 0 {"alice"} else {"bob"}, "content": format!("hello number {i}"), "metadata": {"i": i}}))
        .collect();
    let (status, created) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": batch}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created.as_array().unwrap().len(), 5);
    assert_eq!(
        keys(&created[0]),
        [
            "content",
            "created_at",
            "id",
            "metadata",
            "peer_id",
            "session_id",
            "token_count",
            "workspace_id"
        ]
    );
    let (_, page) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages/list?size=2",
            json!({}),
        )
        .await;
    assert_eq!(
        (page["total"].as_u64(), page["pages"].as_u64()),
        (Some(5), Some(3))
    );
    assert_eq!(page["items"][0]["content"], "hello number 0");
    let (_, rev) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages/list?reverse=true",
            json!({}),
        )
        .await;
    assert_eq!(rev["items"][0]["content"], "hello number 4");
    let (_, bobs) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages/list",
            json!({"filters": {"peer_id": "bob"}}),
        )
        .await;
    assert_eq!(bobs["total"], 2);
    // An empty body is no filter.
    let (status, all) = api
        .call(
            Method::POST,
            "/v3/workspaces/w/sessions/s/messages/list",
            None,
        )
        .await;
    assert_eq!((status, all["total"].as_u64()), (200, Some(5)));
    let id = created[1]["id"].as_str().unwrap();
    let (status, one) = api
        .get(&format!("/v3/workspaces/w/sessions/s/messages/{id}"))
        .await;
    assert_eq!((status, &one["content"]), (200, &json!("hello number 1")));
    let (_, updated) = api
        .put(
            &format!("/v3/workspaces/w/sessions/s/messages/{id}"),
            json!({"metadata": {"edited": true}}),
        )
        .await;
    assert_eq!(updated["metadata"], json!({"edited": true}));
    let (status, err) = api.get("/v3/workspaces/w/sessions/s/messages/nope").await;
    assert_eq!(status, 404);
    assert!(err["detail"].as_str().unwrap().contains("nope"));
    // Search: session, peer and workspace scopes.
    let (status, hits) = api
        .post(
            "/v3/workspaces/w/sessions/s/search",
            json!({"query": "number 3"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(hits[0]["content"], "hello number 3");
    let (_, by_alice) = api
        .post(
            "/v3/workspaces/w/peers/alice/search",
            json!({"query": "hello", "limit": 10}),
        )
        .await;
    assert!(
        by_alice
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["peer_id"] == "alice")
    );
    assert_eq!(by_alice.as_array().unwrap().len(), 3);
    let (_, ws_hits) = api
        .post(
            "/v3/workspaces/w/search",
            json!({"query": "hello", "limit": 2}),
        )
        .await;
    assert_eq!(ws_hits.as_array().unwrap().len(), 2);
    // Membership: set, remove; the peer's sessions; clone.
    let (status, _) = api
        .put("/v3/workspaces/w/sessions/s/peers", json!({"carol": {}}))
        .await;
    assert_eq!(status, 200);
    let (_, members) = api.get("/v3/workspaces/w/sessions/s/peers").await;
    assert_eq!(members["items"][0]["id"], "carol");
    assert_eq!(members["total"], 1);
    let (_, _) = api
        .call(
            Method::DELETE,
            "/v3/workspaces/w/sessions/s/peers",
            Some(json!(["carol"])),
        )
        .await;
    let (_, members) = api.get("/v3/workspaces/w/sessions/s/peers").await;
    assert_eq!(members["total"], 0);
    let (_, sessions) = api
        .post("/v3/workspaces/w/peers/alice/sessions", json!({}))
        .await;
    assert_eq!(sessions["items"][0]["id"], "s");
    let (status, copy) = api
        .call(
            Method::POST,
            &format!("/v3/workspaces/w/sessions/s/clone?message_id={id}"),
            None,
        )
        .await;
    assert_eq!(status, 201);
    let copy_id = copy["id"].as_str().unwrap();
    let (_, copied) = api
        .post(
            &format!("/v3/workspaces/w/sessions/{copy_id}/messages/list"),
            json!({}),
        )
        .await;
    assert_eq!(copied["total"], 2);
    let (_, list) = api.post("/v3/workspaces/w/sessions/list", json!({})).await;
    assert_eq!(list["total"], 2);
    let (_, peers) = api.post("/v3/workspaces/w/peers/list", json!({})).await;
    assert_eq!(peers["total"], 3);
}

#[tokio::test]
async fn rest_conclusions_create_list_query_delete() {
    let api = Rest::serve(TestApp::with_embedder().await).await;
    api.session_s_of_alice_and_bob().await;
    let (status, created) = api
        .conclude(json!([
            {"content": "alice loves hiking in the mountains", "observer_id": "bob", "observed_id": "alice", "session_id": "s"},
            {"content": "alice works as a nurse", "observer_id": "bob", "observed_id": "alice"}
        ]))
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        keys(&created[0]),
        [
            "content",
            "created_at",
            "id",
            "level",
            "observed_id",
            "observer_id",
            "session_id"
        ]
    );
    assert_eq!(created[0]["level"], "explicit");
    assert_eq!(created[1]["session_id"], Value::Null);
    // Newest first by default, oldest first with reverse.
    let (_, page) = api
        .post("/v3/workspaces/w/conclusions/list", json!({}))
        .await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["items"][0]["content"], "alice works as a nurse");
    let (_, rev) = api
        .post("/v3/workspaces/w/conclusions/list?reverse=true", json!({}))
        .await;
    assert_eq!(
        rev["items"][0]["content"],
        "alice loves hiking in the mountains"
    );
    let (status, hits) = api
        .post(
            "/v3/workspaces/w/conclusions/query",
            json!({"query": "outdoor activities", "top_k": 1,
                   "filters": {"observer_id": "bob", "observed_id": "alice"}}),
        )
        .await;
    assert_eq!(status, 200, "{hits}");
    assert_eq!(hits[0]["content"], "alice loves hiking in the mountains");
    let id = created[0]["id"].as_str().unwrap();
    assert_eq!(
        api.delete(&format!("/v3/workspaces/w/conclusions/{id}"))
            .await
            .0,
        204
    );
    assert_eq!(
        api.delete(&format!("/v3/workspaces/w/conclusions/{id}"))
            .await
            .0,
        404
    );
    // Unknown peers are refused, nothing written.
    let (status, _) = api
        .conclude(json!([{"content": "x", "observer_id": "zed", "observed_id": "alice"}]))
        .await;
    assert!(status == 404 || status == 422, "{status}");
    let (_, page) = api
        .post("/v3/workspaces/w/conclusions/list", json!({}))
        .await;
    assert_eq!(page["total"], 1);
}

#[tokio::test]
async fn rest_routes_answer_to_the_graphql_rule_table() {
    let mut api = Rest::serve(TestApp::with_auth().await).await;
    let admin = bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    });
    let ws_key = bearer(KeySpec {
        workspace: Some("w".into()),
        ..KeySpec::default()
    });
    let alice = bearer(KeySpec {
        workspace: Some("w".into()),
        peer: Some("alice".into()),
        ..KeySpec::default()
    });
    let s_key = bearer(KeySpec {
        workspace: Some("w".into()),
        session: Some("s".into()),
        ..KeySpec::default()
    });
    // No key: 401 with a detail.
    let (status, err) = api.post("/v3/workspaces", json!({"id": "w"})).await;
    assert_eq!(status, 401);
    assert!(err["detail"].as_str().unwrap().contains("Bearer"));
    api.as_key(Some(ws_key.clone()));
    assert_eq!(api.post("/v3/workspaces", json!({"id": "w"})).await.0, 201);
    assert_eq!(
        api.post("/v3/workspaces", json!({"id": "other"})).await.0,
        403
    );
    assert_eq!(api.post("/v3/workspaces/list", json!({})).await.0, 403);
    let (status, _) = api
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s", "peers": {"alice": {}}}),
        )
        .await;
    assert_eq!(status, 201);
    api.post("/v3/workspaces/w/sessions", json!({"id": "t"}))
        .await;
    api.post(
        "/v3/workspaces/w/sessions/s/messages",
        json!({"messages": [{"peer_id": "alice", "content": "hi"}]}),
    )
    .await;
    // Both keys below read the messages of session s (alice's, the session key's own), not t's.
    let reads_s_only = [
        (
            "POST",
            "/v3/workspaces/w/sessions/s/messages/list",
            json!({}),
            200,
        ),
        (
            "POST",
            "/v3/workspaces/w/sessions/t/messages/list",
            json!({}),
            403,
        ),
    ];
    // A peer key: its own peer, and member reads of sessions it is in.
    api.as_key(Some(alice));
    let peer_cases = [
        ("PUT", "/v3/workspaces/w/peers/alice", json!({}), 200),
        ("PUT", "/v3/workspaces/w/peers/bob", json!({}), 403),
        (
            "POST",
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": []}),
            403,
        ),
        ("POST", "/v3/workspaces/w/conclusions/list", json!({}), 403),
    ];
    api.expect(&[&reads_s_only[..], &peer_cases].concat()).await;
    // A session key: its session only.
    api.as_key(Some(s_key));
    let session_cases = [("POST", "/v3/workspaces/w/peers/list", json!({}), 403)];
    api.expect(&[&reads_s_only[..], &session_cases].concat())
        .await;
    // Keys: admin only; a minted key works.
    assert_eq!(
        api.call(Method::POST, "/v3/keys?workspace_id=w", None)
            .await
            .0,
        403
    );
    api.as_key(Some(admin));
    let (status, key) = api
        .call(Method::POST, "/v3/keys?workspace_id=w", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(api.call(Method::POST, "/v3/keys", None).await.0, 422);
    api.as_key(Some(format!("Bearer {}", key["key"].as_str().unwrap())));
    assert_eq!(
        api.post("/v3/workspaces/w/peers/list", json!({})).await.0,
        200
    );
}

#[tokio::test]
async fn rest_serves_its_openapi_document_and_says_what_it_does_not_serve() {
    let api = Rest::new().await;
    let (status, doc) = api.get("/v3/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/v3/workspaces",
        "/v3/workspaces/{workspace_id}/peers/list",
        "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages",
        "/v3/workspaces/{workspace_id}/conclusions/query",
        "/v3/keys",
    ] {
        assert!(
            paths.contains_key(p),
            "{p} missing from the OpenAPI document"
        );
    }
    // Scopes are served (tests/it/scopes.rs): a body without an id is refused, not 501.
    let (status, err) = api.post("/v3/workspaces/w/scopes", json!({})).await;
    assert_eq!(status, 422);
    assert!(err["detail"].as_str().unwrap().contains("id"));
    // Without an LLM, chat says what to configure.
    let (status, err) = api
        .post("/v3/workspaces/w/peers/p/chat", json!({"query": "hi"}))
        .await;
    assert_eq!(status, 503);
    assert!(
        err["detail"].as_str().unwrap().contains("HONCHO_LLM"),
        "{err}"
    );
    // Keys need auth on: Honcho v3.0.12 answers 405 without it.
    assert_eq!(
        api.call(Method::POST, "/v3/keys?workspace_id=w", None)
            .await
            .0,
        405
    );
}

#[tokio::test]
async fn rest_memory_reads_come_from_stored_conclusions_cards_and_messages() {
    let api = Rest::serve(TestApp::with_embedder().await).await;
    api.session_s_of_alice_and_bob().await;
    let (_, made) = api
        .conclude(json!([
            {"content": "alice keeps bees", "observer_id": "alice", "observed_id": "alice"},
            {"content": "bob thinks alice is shy", "observer_id": "bob", "observed_id": "alice", "session_id": "s"}
        ]))
        .await;
    assert_eq!(made.as_array().unwrap().len(), 2);
    let (status, rep) = api
        .post("/v3/workspaces/w/peers/alice/representation", json!({}))
        .await;
    assert_eq!(status, 200);
    let text = rep["representation"].as_str().unwrap();
    assert!(text.starts_with("EXPLICIT:\n\n1. ["), "{text}");
    assert!(
        text.contains("] alice keeps bees") && !text.contains("shy"),
        "{text}"
    );
    let (_, of_alice) = api
        .post(
            "/v3/workspaces/w/peers/bob/representation",
            json!({"target": "alice", "session_id": "s"}),
        )
        .await;
    assert!(of_alice["representation"].as_str().unwrap().contains("shy"));
    // Cards: null until set, per target.
    let (_, card) = api
        .get("/v3/workspaces/w/peers/bob/card?target=alice")
        .await;
    assert_eq!(card, json!({"peer_card": null}));
    let (status, set) = api
        .put(
            "/v3/workspaces/w/peers/bob/card?target=alice",
            json!({"peer_card": ["Name: Alice", "Keeps bees"]}),
        )
        .await;
    assert_eq!((status, &set["peer_card"][1]), (200, &json!("Keeps bees")));
    let (_, own) = api.get("/v3/workspaces/w/peers/bob/card").await;
    assert_eq!(own["peer_card"], Value::Null);
    let (_, ctx) = api
        .get("/v3/workspaces/w/peers/bob/context?target=alice")
        .await;
    assert_eq!(ctx["target_id"], "alice");
    assert_eq!(ctx["peer_card"], json!(["Name: Alice", "Keeps bees"]));
    assert!(ctx["representation"].as_str().unwrap().contains("shy"));
    // Session context: the newest messages within the token budget, oldest first.
    let batch: Vec<Value> = (0..4)
        .map(|i| json!({"peer_id": "alice", "content": format!("message {i} about the bees")}))
        .collect();
    let (_, created) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": batch}),
        )
        .await;
    let per = created[0]["token_count"].as_i64().unwrap();
    assert!(per > 0);
    let (status, sctx) = api
        .get(&format!(
            "/v3/workspaces/w/sessions/s/context?tokens={}&peer_target=alice&peer_perspective=bob",
            per * 2
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        contents(&sctx["messages"]),
        ["message 2 about the bees", "message 3 about the bees"]
    );
    assert_eq!(sctx["peer_card"], json!(["Name: Alice", "Keeps bees"]));
    assert_eq!(sctx["summary"], Value::Null);
    let (_, sums) = api.get("/v3/workspaces/w/sessions/s/summaries").await;
    assert_eq!(
        sums,
        json!({"id": "s", "short_summary": null, "long_summary": null})
    );
    let (status, queue) = api.get("/v3/workspaces/w/queue/status").await;
    assert_eq!((status, &queue["pending_work_units"]), (200, &json!(0)));
}

#[tokio::test]
async fn rest_upload_adds_a_text_file_as_messages_and_refuses_other_kinds() {
    let api = Rest::new().await;
    let form = |kind: &str, text: &str| {
        let b = "XBOUNDARYX";
        let body = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"peer_id\"\r\n\r\nalice\r\n\
             --{b}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{{\"src\": \"f\"}}\r\n\
             --{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\
             Content-Type: {kind}\r\n\r\n{text}\r\n--{b}--\r\n"
        );
        api.http
            .client
            .post(format!(
                "{}/v3/workspaces/w/sessions/s/messages/upload",
                api.http.base
            ))
            .header("content-type", format!("multipart/form-data; boundary={b}"))
            .body(body)
    };
    let long = "y".repeat(25_010);
    let resp = form("text/plain", &long).send().await.unwrap();
    assert_eq!(resp.status(), 201);
    let made: Value = resp.json().await.unwrap();
    let made = made.as_array().unwrap();
    assert_eq!(made.len(), 2);
    assert_eq!(made[1]["content"], "y".repeat(10));
    assert_eq!(made[0]["peer_id"], "alice");
    assert_eq!(made[0]["metadata"], json!({"src": "f"}));
    let resp = form("image/png", "x").send().await.unwrap();
    assert_eq!(resp.status(), 415);
    let (_, page) = api
        .post("/v3/workspaces/w/sessions/s/messages/list", json!({}))
        .await;
    assert_eq!(page["total"], 2);
}

#[tokio::test]
async fn rest_bodies_up_to_what_the_routes_document_are_taken() {
    let api = Rest::serve_with_limit(TestApp::new().await, 16 << 20).await;
    let url = format!("{}/v3/workspaces/w/sessions/s/messages", api.http.base);
    // 100 messages of 25,000 characters: 2.5 MB of JSON, over axum's default 2 MB.
    let content = "z".repeat(25_000);
    let batch: Vec<Value> = (0..100)
        .map(|_| json!({"peer_id": "alice", "content": content}))
        .collect();
    let (status, made) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": batch}),
        )
        .await;
    assert_eq!(status, 201, "{made:.200}");
    assert_eq!(made.as_array().unwrap().len(), 100);

    // A file of 100 chunks of 25,000 characters, 4 bytes each: 10 MB.
    let upload = |text: String| {
        let (content_type, body) = crate::harness::upload_form(&text);
        api.http
            .client
            .post(format!("{url}/upload"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let resp = upload("\u{1F41D}".repeat(2_500_000)).await.unwrap();
    assert_eq!(resp.status(), 201);
    let made: Value = resp.json().await.unwrap();
    assert_eq!(made.as_array().unwrap().len(), 100);
    assert_eq!(
        made[99]["content"].as_str().unwrap().chars().count(),
        25_000
    );

    // More than the route documents: refused while it is read, and not written.
    let resp = upload("y".repeat(honcho_graphql::rest::messages::UPLOAD_MAX_BYTES + 1))
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("100 messages"),
        "{body}"
    );
    // Within the bytes, but more than 100 chunks.
    let resp = upload("y".repeat(2_500_001)).await.unwrap();
    assert_eq!(resp.status(), 413);
    let (_, page) = api
        .post(
            "/v3/workspaces/w/sessions/s/messages/list?size=1",
            json!({}),
        )
        .await;
    assert_eq!(page["total"], 200);
}

#[tokio::test]
async fn rest_errors_are_detail_bodies_whatever_refused_the_request() {
    let api = Rest::new().await;
    api.post("/v3/workspaces", json!({"id": "w"})).await;
    let send = |request: reqwest::RequestBuilder| async move {
        let resp = request.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
        )
    };
    let url = |path: &str| format!("{}{path}", api.http.base);
    let cases = [
        (
            "a body that is not multipart",
            api.http
                .client
                .post(url("/v3/workspaces/w/sessions/s/messages/upload"))
                .header("content-type", "text/plain")
                .body("hello"),
            415,
        ),
        (
            "a broken multipart body",
            api.http
                .client
                .post(url("/v3/workspaces/w/sessions/s/messages/upload"))
                .header("content-type", "multipart/form-data; boundary=X")
                .body("--X\r\nnot a part"),
            422,
        ),
        (
            "a bad query string",
            api.http
                .client
                .post(url("/v3/workspaces/w/peers/list?page=abc"))
                .json(&json!({})),
            422,
        ),
        (
            "a bad query string on a GET",
            api.http
                .client
                .get(url("/v3/workspaces/w/peers/p/card?target=a&target=b")),
            422,
        ),
        (
            "an unknown path",
            api.http.client.get(url("/v3/workspaces/w/nothing-here")),
            404,
        ),
        (
            "a method the route does not serve",
            api.http.client.patch(url("/v3/workspaces/w")),
            405,
        ),
        (
            "a body over the limit",
            api.http
                .client
                .post(url("/v3/workspaces"))
                .json(&json!({"id": "x".repeat(2 << 20)})),
            413,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, request, want) in cases {
        let (status, body) = send(request).await;
        let detail = body.get("detail").and_then(Value::as_str);
        if status != want || detail.is_none_or(str::is_empty) || body.get("errors").is_some() {
            wrong.push(format!(
                "{what}: want {want} with a detail, got {status} {body}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Honcho's README quick-start with the Python SDK (honcho-ai, from PyPI) against the server
/// binary: peers, a session, messages, search, conclusions.
#[tokio::test]
async fn rest_python_quickstart_runs_against_the_server() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");
    let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-honcho-py.sh");
    let python = format!("{dir}/.venv/bin/python");
    let installed = std::process::Command::new(setup)
        .status()
        .is_ok_and(|s| s.success());
    if !installed || !std::path::Path::new(&python).exists() {
        crate::harness::skip(&format!(
            "could not install honcho-ai from PyPI (run {setup})"
        ));
        return;
    }
    let db = crate::harness::blank_database().await;
    let server = crate::harness::ServerProcess::start(&db, &[("HONCHO_AUTH_SECRET", "")]).await;
    let out = tokio::process::Command::new(&python)
        .arg(format!("{dir}/quickstart.py"))
        .env("HONCHO_URL", server.url(""))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A REST server whose chats are answered by `fake`.
async fn with_llm(fake: &FakeLlm) -> Rest {
    with_llm_config(&fake.config()).await
}

/// A REST server whose chats are answered by the LLM of `cfg`.
async fn with_llm_config(cfg: &honcho_graphql::llm::LlmArgs) -> Rest {
    Rest::serve(TestApp::with_embedder().await.with_llm(cfg)).await
}

#[tokio::test]
async fn rest_chat_asks_the_llm_with_the_peers_conclusions_and_returns_its_answer() {
    let fake = FakeLlm::start(|_, body| {
        if body["response_format"].is_object() || prompts(body).0.contains("JSON") {
            Reply::json(json!({"summary": "alice hikes"}))
        } else {
            Reply::Content(" Alice loves hiking in the mountains. ".into())
        }
    })
    .await;
    let api = with_llm(&fake).await;
    api.session_s_of_alice_and_bob().await;
    api.post(
        "/v3/workspaces/w/sessions/s/messages",
        json!({"messages": [
            {"peer_id": "alice", "content": "I spent the weekend hiking near Chamonix"},
            {"peer_id": "bob", "content": "Sounds cold"}
        ]}),
    )
    .await;
    let (status, _) = api
        .conclude(json!([
            {"content": "alice goes hiking in the Alps most weekends", "observer_id": "alice", "observed_id": "alice"},
            {"content": "alice is afraid of the cold", "observer_id": "bob", "observed_id": "alice"}
        ]))
        .await;
    assert_eq!(status, 201);

    let (status, answer) = api
        .post(
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "What does alice do at weekends?"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"content": "Alice loves hiking in the mountains."})
    );
    let (system, user) = prompts(&fake.requests()[0]);
    assert!(system.contains("\"alice\""), "{system}");
    assert!(
        user.contains("alice goes hiking in the Alps most weekends"),
        "{user}"
    );
    assert!(user.contains("hiking near Chamonix"), "{user}");
    assert!(
        !user.contains("afraid of the cold"),
        "bob's view is not alice's: {user}"
    );
    assert!(
        user.ends_with("Question: What does alice do at weekends?"),
        "{user}"
    );

    // From bob's point of view, about alice: bob's conclusions, and the session's latest turns.
    let (status, _) = api
        .post(
            "/v3/workspaces/w/peers/bob/chat",
            json!({"query": "Would alice like skiing?", "target": "alice", "session_id": "s",
                   "reasoning_level": "high"}),
        )
        .await;
    assert_eq!(status, 200);
    let request = &fake.requests()[1];
    let (system, user) = prompts(request);
    assert!(
        system.contains("\"bob\"") && system.contains("\"alice\""),
        "{system}"
    );
    assert!(user.contains("afraid of the cold"), "{user}");
    assert!(!user.contains("in the Alps most weekends"), "{user}");
    assert!(user.contains("bob: Sounds cold"), "{user}");
    assert_eq!(request["max_tokens"], 4096);

    // Streamed in Honcho's shape: the answer, then done.
    let resp = api
        .http
        .client
        .post(format!(
            "{}/v3/workspaces/w/peers/alice/chat",
            api.http.base
        ))
        .json(&json!({"query": "What does alice do?", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events: Vec<Value> = resp
        .text()
        .await
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(
        events,
        [
            json!({"delta": {"content": "Alice loves hiking in the mountains."}, "done": false}),
            json!({"done": true})
        ]
    );

    // A response format: the answer is JSON text of that shape.
    let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}});
    let (status, answer) = api
        .post(
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "Sum alice up", "response_format": schema}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let content: Value = serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"summary": "alice hikes"}));

    // The same through GraphQL.
    let (status, d) = api
        .post(
            "/graphql",
            json!({"query": "{ workspace(id: \"w\") { peer(id: \"alice\") { chat(query: \"What does alice do?\", reasoningLevel: MINIMAL) } } }"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        d["data"]["workspace"]["peer"]["chat"], "Alice loves hiking in the mountains.",
        "{d}"
    );
    assert_eq!(fake.requests().last().unwrap()["max_tokens"], 512);
}

#[tokio::test]
async fn rest_chat_refuses_bad_questions_before_asking_and_reports_llm_failures() {
    let fake = FakeLlm::start(|_, _| Reply::Status(500, "the model crashed")).await;
    let api = with_llm(&fake).await;
    api.post("/v3/workspaces/w/peers", json!({"id": "alice"}))
        .await;
    api.expect(&[
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": ""}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "x".repeat(10_001)}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "reasoning_level": "extreme"}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "response_format": {"type": "string"}}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "filters": {"peer_id": "alice"}}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "session_id": "s", "filters": {"session_id": ["t"]}}),
            422,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "target": "nobody"}),
            404,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "hi", "session_id": "nowhere"}),
            404,
        ),
        (
            "POST",
            "/v3/workspaces/w/peers/nobody/chat",
            json!({"query": "hi"}),
            404,
        ),
    ])
    .await;
    assert_eq!(fake.hits(), 0, "no bad question reached the model");
    // Streamed or not: a model failing before the first piece is a status and a body.
    for stream in [false, true] {
        let (status, err) = api
            .post(
                "/v3/workspaces/w/peers/alice/chat",
                json!({"query": "hi", "stream": stream}),
            )
            .await;
        assert_eq!(status, 503, "{err}");
        assert!(
            err["detail"]
                .as_str()
                .unwrap()
                .contains("the model crashed"),
            "{err}"
        );
    }
}

/// A streamed chat's events, read as they arrive.
struct ChatEvents(futures::stream::BoxStream<'static, Value>);

impl ChatEvents {
    /// Asks `peer` `body` with `stream: true`; the answer must be 200 and an event stream.
    async fn open(api: &Rest, peer: &str, mut body: Value) -> ChatEvents {
        use eventsource_stream::Eventsource;
        use futures::StreamExt;
        body["stream"] = json!(true);
        let resp = api
            .http
            .client
            .post(format!(
                "{}/v3/workspaces/w/peers/{peer}/chat",
                api.http.base
            ))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let events = resp
            .bytes_stream()
            .eventsource()
            .map(|e| serde_json::from_str(&e.unwrap().data).unwrap());
        ChatEvents(events.boxed())
    }

    /// The next event, failing the test if none comes within 10 s.
    async fn next(&mut self) -> Option<Value> {
        use futures::StreamExt;
        tokio::time::timeout(std::time::Duration::from_secs(10), self.0.next())
            .await
            .expect("no event within 10 s")
    }
}

fn delta(content: &str) -> Value {
    json!({"delta": {"content": content}, "done": false})
}

#[tokio::test]
async fn rest_chat_stream_forwards_each_piece_before_the_model_finishes() {
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = gate.clone();
    let fake = FakeLlm::start(move |_, body| {
        if body["response_format"].is_object() {
            return Reply::json(json!({"summary": "alice hikes"}));
        }
        Reply::Stream(vec![
            Chunk::Content("\n Alice "),
            Chunk::Content(" loves"),
            Chunk::Wait(held.clone()),
            Chunk::Content(" hiking."),
            Chunk::Content(" \n"),
        ])
    })
    .await;
    let api = with_llm(&fake).await;
    api.post("/v3/workspaces/w/peers", json!({"id": "alice"}))
        .await;
    let mut events = ChatEvents::open(&api, "alice", json!({"query": "What does alice do?"})).await;
    // The model still holds the end of its answer: these came through as it wrote them.
    assert_eq!(events.next().await.unwrap(), delta("Alice"));
    assert_eq!(events.next().await.unwrap(), delta("  loves"));
    gate.notify_one();
    assert_eq!(events.next().await.unwrap(), delta(" hiking."));
    assert_eq!(events.next().await.unwrap(), json!({"done": true}));
    assert!(events.next().await.is_none());
    assert_eq!(fake.requests()[0]["stream"], true);

    // A response format is answered whole, in one piece, checked against its schema.
    let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}});
    let mut events = ChatEvents::open(
        &api,
        "alice",
        json!({"query": "Sum alice up", "response_format": schema}),
    )
    .await;
    let first = events.next().await.unwrap();
    let content: Value = serde_json::from_str(first["delta"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"summary": "alice hikes"}));
    assert_eq!(events.next().await.unwrap(), json!({"done": true}));
    assert!(fake.requests()[1].get("stream").is_none());
}

#[tokio::test]
async fn rest_chat_stream_failing_midway_ends_with_an_error_event() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(std::time::Duration::from_millis(100)),
            Chunk::Break,
        ]),
        _ => Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(std::time::Duration::from_secs(60)),
        ]),
    })
    .await;
    let mut cfg = fake.config();
    cfg.timeout_secs = 1.0;
    let api = with_llm_config(&cfg).await;
    api.post("/v3/workspaces/w/peers", json!({"id": "alice"}))
        .await;
    let mut events = ChatEvents::open(&api, "alice", json!({"query": "hi"})).await;
    assert_eq!(events.next().await.unwrap(), delta("Alice"));
    let last = events.next().await.unwrap();
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["error"]["status"], 503, "{last}");
    assert!(
        last["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("broke off"),
        "{last}"
    );
    assert!(events.next().await.is_none());

    // A model that stalls midway: the LLM timeout ends the stream.
    let mut events = ChatEvents::open(&api, "alice", json!({"query": "hi"})).await;
    assert_eq!(events.next().await.unwrap(), delta("Alice"));
    let last = events.next().await.unwrap();
    assert_eq!(last["error"]["status"], 503, "{last}");
    assert!(
        last["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{last}"
    );
    assert!(events.next().await.is_none());
}

#[tokio::test]
async fn rest_chat_stream_client_going_away_stops_the_model_request() {
    let fake = FakeLlm::start(|_, _| {
        Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(std::time::Duration::from_secs(60)),
        ])
    })
    .await;
    let api = with_llm(&fake).await;
    api.post("/v3/workspaces/w/peers", json!({"id": "alice"}))
        .await;
    let mut events = ChatEvents::open(&api, "alice", json!({"query": "hi"})).await;
    assert_eq!(events.next().await.unwrap(), delta("Alice"));
    drop(events);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while fake.abandoned() == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(fake.abandoned(), 1, "the model's request was dropped");
}
