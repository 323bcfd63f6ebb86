//! Scopes: named groups of a workspace's sessions that bound recall. Their REST routes (Honcho
//! main's paths and shapes), the `scope` option of search, representation, context and chat over
//! GraphQL, REST and MCP, and keys limited to a scope.

use std::sync::Arc;

use honcho_graphql::auth::KeySpec;
use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply, with_dialectic};
use crate::harness::{AppServer, TestApp, bearer};

fn admin() -> String {
    bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    })
}

fn scope_key(workspace: &str, scope: &str) -> String {
    bearer(KeySpec {
        workspace: Some(workspace.into()),
        scope: Some(scope.into()),
        ..KeySpec::default()
    })
}

/// A server with auth on, the real embedder and chats answered by a fake LLM that records what
/// it was shown; workspace `w` holds:
/// - session `work` (in scope `job`): alice writes Rust for the billing team;
/// - session `home` (in no scope): alice trains for the Chicago marathon;
/// - bob's conclusions about alice from each session, and one from no session ("medal");
/// - bob's card of alice, which no session bounds ("marathoner").
///
/// Workspace `w2` has session `far`. Nothing about the marathon may come back from recall
/// inside `job`.
struct World {
    http: AppServer,
    fake: Arc<FakeLlm>,
}

impl World {
    async fn new() -> World {
        let fake = FakeLlm::start(|_, _| Reply::Content("an answer".into())).await;
        let app = with_dialectic(TestApp::with_embedder().await, &fake.config());
        let world = World {
            http: AppServer::start(app).await,
            fake,
        };
        world.seed().await;
        world
    }

    async fn seed(&self) {
        let key = admin();
        let gql = |doc: &'static str| {
            let key = key.clone();
            async move { self.gql_ok(&key, doc).await }
        };
        gql(
            r#"mutation { createMessages(workspaceId: "w", sessionId: "work", messages: [
              {peerId: "alice", content: "I write Rust services for the billing team"},
              {peerId: "bob", content: "Nice, which crates?"}]) { id } }"#,
        )
        .await;
        gql(
            r#"mutation { createMessages(workspaceId: "w", sessionId: "home", messages: [
              {peerId: "alice", content: "I am training for the Chicago marathon"},
              {peerId: "bob", content: "Good luck with the marathon"}]) { id } }"#,
        )
        .await;
        gql(
            r#"mutation { createMessages(workspaceId: "w2", sessionId: "far", messages: [
              {peerId: "zed", content: "zed is far away"}]) { id } }"#,
        )
        .await;
        gql(r#"mutation { createConclusions(workspaceId: "w", conclusions: [
              {content: "alice writes Rust for billing", observerId: "bob", observedId: "alice", sessionId: "work"},
              {content: "alice trains for a marathon", observerId: "bob", observedId: "alice", sessionId: "home"},
              {content: "alice owns a marathon medal", observerId: "bob", observedId: "alice"}]) { id } }"#)
        .await;
        let (status, _) = self
            .rest(
                &key,
                Method::PUT,
                "/v3/workspaces/w/peers/bob/card?target=alice",
                Some(json!({"peer_card": ["alice is a marathoner"]})),
            )
            .await;
        assert_eq!(status, 200);
        let (status, _) = self
            .rest(
                &key,
                Method::POST,
                "/v3/workspaces/w/scopes",
                Some(json!({"id": "job"})),
            )
            .await;
        assert_eq!(status, 201);
        let (status, body) = self
            .rest(
                &key,
                Method::POST,
                "/v3/workspaces/w/scopes/job/sessions",
                Some(json!({"session_ids": ["work"]})),
            )
            .await;
        assert_eq!(status, 204, "{body}");
    }

    async fn gql(&self, key: &str, doc: &str) -> Value {
        self.http.app.exec_as(Some(key), doc, json!({})).await
    }

    async fn gql_ok(&self, key: &str, doc: &str) -> Value {
        let resp = self.gql(key, doc).await;
        assert!(resp.get("errors").is_none(), "{doc}: {resp}");
        resp["data"].clone()
    }

    /// The code of the first error of a request that must fail.
    async fn gql_code(&self, key: &str, doc: &str) -> String {
        let resp = self.gql(key, doc).await;
        resp["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{doc}: no error code in {resp}"))
            .to_owned()
    }

    async fn rest(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .client
            .request(method, format!("{}{path}", self.http.base))
            .header("authorization", key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// Calls an MCP tool over Streamable HTTP: (isError, structured content).
    async fn mcp(&self, key: &str, tool: &str, args: Value) -> (bool, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }}});
        let resp = self
            .http
            .client
            .post(format!("{}/mcp", self.http.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .header("authorization", key)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        let result = &value["result"];
        assert!(result.is_object(), "{tool}: {value:#}");
        (
            result["isError"].as_bool().unwrap_or(false),
            result["structuredContent"].clone(),
        )
    }

    /// What the LLM was sent from request `from` on, as one text.
    fn shown_since(&self, from: usize) -> String {
        self.fake.requests()[from..]
            .iter()
            .map(Value::to_string)
            .collect()
    }
}

/// The ids of a REST page's items.
fn item_ids(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

fn contains_marathon(v: &Value) -> bool {
    v.to_string().to_lowercase().contains("marathon")
}

#[tokio::test]
async fn scopes_round_trip_over_rest_at_honchos_paths() {
    let world = World::new().await;
    let key = admin();
    let call = |method: Method, path: &'static str, body: Option<Value>| {
        let key = key.clone();
        let world = &world;
        async move { world.rest(&key, method, path, body).await }
    };
    let (status, created) = call(
        Method::POST,
        "/v3/workspaces/w/scopes",
        Some(json!({"id": "team", "metadata": {"kind": "team"}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "team");
    assert_eq!(created["metadata"], json!({"kind": "team"}));
    // Get-or-create answers 200 for an existing scope; given metadata replaces its metadata.
    let (status, again) = call(
        Method::POST,
        "/v3/workspaces/w/scopes",
        Some(json!({"id": "team", "metadata": {"kind": "crew"}})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(again["metadata"], json!({"kind": "crew"}));
    assert_eq!(again["created_at"], created["created_at"]);

    let (status, page) = call(Method::POST, "/v3/workspaces/w/scopes/list", None).await;
    assert_eq!(status, 200);
    assert_eq!(item_ids(&page), ["job", "team"]);
    assert_eq!(page["total"], 2);
    let (_, page) = call(
        Method::POST,
        "/v3/workspaces/w/scopes/list?reverse=true&size=1",
        None,
    )
    .await;
    assert_eq!(page["items"][0]["id"], "team");
    assert_eq!(page["pages"], 2);

    let (status, one) = call(Method::GET, "/v3/workspaces/w/scopes/team", None).await;
    assert_eq!(
        (status, one["metadata"]["kind"].as_str()),
        (200, Some("crew"))
    );

    let add = "/v3/workspaces/w/scopes/team/sessions";
    let list = "/v3/workspaces/w/scopes/team/sessions/list";
    let home = "/v3/workspaces/w/scopes/team/sessions/home";
    let members = json!({"session_ids": ["home", "work", "home"]});
    let (status, _) = call(Method::POST, add, Some(members)).await;
    assert_eq!(status, 204);
    let (status, sessions) = call(Method::POST, list, None).await;
    assert_eq!(status, 200);
    assert_eq!(sessions["total"], 2);
    assert_eq!(sessions["items"][0]["workspace_id"], "w");

    let (status, report) = call(Method::GET, "/v3/workspaces/w/scopes/team/status", None).await;
    assert_eq!(status, 200);
    assert_eq!(report["backfill_status"], json!({}));
    assert_eq!(report["session_count"], 2);
    assert_eq!(report["message_count"], 4);
    assert_eq!(report["conclusion_count"], 2);

    let (status, _) = call(Method::DELETE, home, None).await;
    assert_eq!(status, 204);
    let (_, sessions) = call(Method::POST, list, None).await;
    assert_eq!(item_ids(&sessions), ["work"]);
    // Removing a session that is not a member changes nothing.
    let (status, _) = call(Method::DELETE, home, None).await;
    assert_eq!(status, 204);

    // GraphQL sees the same scopes.
    let data = world
        .gql_ok(
            &admin(),
            r#"{ workspace(id: "w") { scopes { id } scope(id: "team") { metadata
                 sessions { id } status { sessionCount messageCount } } nope: scope(id: "nope") { id } } }"#,
        )
        .await;
    assert_eq!(
        data["workspace"]["scopes"],
        json!([{"id": "job"}, {"id": "team"}])
    );
    assert_eq!(
        data["workspace"]["scope"]["sessions"],
        json!([{"id": "work"}])
    );
    assert_eq!(data["workspace"]["scope"]["status"]["messageCount"], 2);
    assert_eq!(data["workspace"]["nope"], Value::Null);
}

#[tokio::test]
async fn graphql_scope_mutations_add_and_remove_sessions() {
    let world = World::new().await;
    let key = admin();
    let data = world
        .gql_ok(
            &key,
            r#"mutation { a: getOrCreateScope(workspaceId: "w", id: "both", metadata: {x: 1}) { id metadata }
                 b: addSessionsToScope(workspaceId: "w", scopeId: "both", sessionIds: ["work", "home"]) {
                   sessions { id } }
                 c: removeSessionFromScope(workspaceId: "w", scopeId: "both", sessionId: "work") {
                   sessions { id } } }"#,
        )
        .await;
    assert_eq!(data["a"], json!({"id": "both", "metadata": {"x": 1}}));
    assert_eq!(data["b"]["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(data["c"]["sessions"], json!([{"id": "home"}]));
}

#[tokio::test]
async fn bad_scope_input_gets_a_coded_error_and_writes_nothing() {
    let world = World::new().await;
    let key = admin();
    let members = || async {
        world
            .http
            .app
            .sql_i64("SELECT count(*) FROM scope_sessions")
            .await
    };
    let scopes = || async { world.http.app.sql_i64("SELECT count(*) FROM scopes").await };
    assert_eq!((members().await, scopes().await), (1, 1));

    // An unknown scope.
    let cases: &[(Method, &str, Option<Value>, u16)] = &[
        (
            Method::POST,
            "/v3/workspaces/w/scopes/nope/sessions",
            Some(json!({"session_ids": ["home"]})),
            404,
        ),
        (
            Method::DELETE,
            "/v3/workspaces/w/scopes/nope/sessions/home",
            None,
            404,
        ),
        (Method::GET, "/v3/workspaces/w/scopes/nope", None, 404),
        (
            Method::GET,
            "/v3/workspaces/w/scopes/nope/status",
            None,
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes/nope/sessions/list",
            None,
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/search",
            Some(json!({"query": "rust", "scope": "nope"})),
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/peers/bob/representation",
            Some(json!({"target": "alice", "scope": "nope"})),
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/peers/bob/chat",
            Some(json!({"query": "hi", "scope": "nope"})),
            404,
        ),
        (
            Method::GET,
            "/v3/workspaces/w/sessions/work/context?scope=nope",
            None,
            404,
        ),
        // A session of another workspace, one missing, or one among good ones: all or nothing.
        (
            Method::POST,
            "/v3/workspaces/w/scopes/job/sessions",
            Some(json!({"session_ids": ["far"]})),
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes/job/sessions",
            Some(json!({"session_ids": ["home", "ghost"]})),
            404,
        ),
        (
            Method::DELETE,
            "/v3/workspaces/w/scopes/job/sessions/far",
            None,
            404,
        ),
        // Malformed: an empty list, a bad id, too many sessions, a list of scopes.
        (
            Method::POST,
            "/v3/workspaces/w/scopes/job/sessions",
            Some(json!({"session_ids": []})),
            422,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes/job/sessions",
            Some(json!({"session_ids": ["a b"]})),
            422,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes",
            Some(json!({"id": "has space"})),
            422,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes",
            Some(json!({"id": ""})),
            422,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/scopes",
            Some(json!({"id": "x", "metadata": [1]})),
            422,
        ),
        (
            Method::POST,
            "/v3/workspaces/nowhere/scopes",
            Some(json!({"id": "x"})),
            404,
        ),
        (
            Method::POST,
            "/v3/workspaces/w/peers/bob/chat",
            Some(json!({"query": "hi", "scope": ["job", "other"]})),
            422,
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, body, want) in cases {
        let (got, answer) = world.rest(&key, method.clone(), path, body.clone()).await;
        if got != *want || answer["detail"].as_str().is_none_or(str::is_empty) {
            wrong.push(format!("{method} {path}: want {want}, got {got} {answer}"));
        }
    }
    let too_many: Vec<String> = (0..101).map(|i| format!("s{i}")).collect();
    let (got, _) = world
        .rest(
            &key,
            Method::POST,
            "/v3/workspaces/w/scopes/job/sessions",
            Some(json!({"session_ids": too_many})),
        )
        .await;
    if got != 422 {
        wrong.push(format!("101 sessions: want 422, got {got}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // GraphQL says the same with codes.
    for (doc, code) in [
        (
            r#"mutation { addSessionsToScope(workspaceId: "w", scopeId: "nope", sessionIds: ["home"]) { id } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { addSessionsToScope(workspaceId: "w", scopeId: "job", sessionIds: ["home", "far"]) { id } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { getOrCreateScope(workspaceId: "w", id: "no/slash") { id } }"#,
            "BAD_USER_INPUT",
        ),
        (
            r#"{ workspace(id: "w") { search(query: "rust", scope: "nope") { __typename } } }"#,
            "NOT_FOUND",
        ),
        (
            r#"{ workspace(id: "w") { peer(id: "bob") { representation(scope: "nope") } } }"#,
            "NOT_FOUND",
        ),
        (
            r#"{ workspace(id: "w") { peer(id: "bob") { chat(query: "hi", scope: "nope") } } }"#,
            "NOT_FOUND",
        ),
        (
            r#"{ workspace(id: "w") { scopes(first: 0) { id } } }"#,
            "BAD_USER_INPUT",
        ),
    ] {
        assert_eq!(world.gql_code(&key, doc).await, code, "{doc}");
    }
    let (is_error, content) = world
        .mcp(
            &key,
            "search",
            json!({"workspace_id": "w", "query": "rust", "scope": "nope"}),
        )
        .await;
    assert!(is_error);
    assert_eq!(content["code"], "NOT_FOUND");

    // Nothing was written by any of them.
    assert_eq!((members().await, scopes().await), (1, 1));
    let sessions: Vec<String> = world
        .http
        .app
        .store
        .scope_session_names("w", "job")
        .await
        .unwrap();
    assert_eq!(sessions, ["work"]);
    assert_eq!(world.fake.requests().len(), 0, "no chat reached the model");
}

#[tokio::test]
async fn recall_inside_a_scope_returns_nothing_from_outside_it_over_every_api() {
    let world = World::new().await;
    let key = admin();

    // GraphQL: search, representation and chat with the scope, each against a control without.
    let search = |scope: &str| {
        format!(
            r#"{{ workspace(id: "w") {{ search(query: "marathon"{scope}) {{
                 ... on MessageHits {{ results {{ content }} }} }} }} }}"#
        )
    };
    let all = world.gql_ok(&key, &search("")).await;
    assert!(contains_marathon(&all), "control: {all}");
    let inside = world.gql_ok(&key, &search(r#", scope: "job""#)).await;
    assert!(!contains_marathon(&inside), "{inside}");
    let rust = world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { search(query: "Rust billing", scope: "job", includeContext: true) {
                 ... on SnippetHits { results { content } snippets { context { content } } } } } }"#,
        )
        .await;
    assert!(rust.to_string().contains("Rust"), "{rust}");
    assert!(!contains_marathon(&rust), "{rust}");

    let rep = |scope: &str| {
        format!(
            r#"{{ workspace(id: "w") {{ peer(id: "bob") {{ representation(target: "alice"{scope}) }} }} }}"#
        )
    };
    let all = world.gql_ok(&key, &rep("")).await;
    assert!(contains_marathon(&all), "control: {all}");
    let inside = world.gql_ok(&key, &rep(r#", scope: "job""#)).await;
    assert!(inside.to_string().contains("Rust"), "{inside}");
    assert!(!contains_marathon(&inside), "{inside}");
    // The semantic options search the conclusions inside the scope too, however well an
    // outside one would answer the query.
    let searched = world
        .gql_ok(
            &key,
            &rep(r#", scope: "job", searchQuery: "marathon", searchTopK: 25"#),
        )
        .await;
    assert!(!contains_marathon(&searched), "{searched}");

    let from = world.fake.requests().len();
    world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { peer(id: "bob") { chat(query: "What does alice do for fun, like a marathon?", target: "alice") } } }"#,
        )
        .await;
    let shown = world.shown_since(from);
    assert!(shown.contains("trains for a marathon"), "control: {shown}");
    let from = world.fake.requests().len();
    world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { peer(id: "bob") { chat(query: "What does alice do for fun, like a marathon?", target: "alice", scope: "job") } } }"#,
        )
        .await;
    let shown = world.shown_since(from);
    assert!(shown.contains("Rust"), "{shown}");
    for outside in ["trains for a marathon", "medal", "marathoner", "Chicago"] {
        assert!(
            !shown.contains(outside),
            "{outside} reached the model: {shown}"
        );
    }

    // REST: search, representation, peer and session context, chat.
    let rest = |method: Method, path: &'static str, body: Option<Value>| {
        let key = key.clone();
        let world = &world;
        async move {
            let (status, value) = world.rest(&key, method, path, body).await;
            assert_eq!(status, 200, "{path}: {value}");
            value
        }
    };
    let all = rest(
        Method::POST,
        "/v3/workspaces/w/search",
        Some(json!({"query": "marathon"})),
    )
    .await;
    assert!(contains_marathon(&all), "control: {all}");
    let inside = rest(
        Method::POST,
        "/v3/workspaces/w/search",
        Some(json!({"query": "marathon", "scope": "job"})),
    )
    .await;
    // Semantic search ranks the scope's messages anyway; none is from outside it.
    assert!(!inside.as_array().unwrap().is_empty(), "{inside}");
    assert!(!contains_marathon(&inside), "{inside}");
    let inside = rest(
        Method::POST,
        "/v3/workspaces/w/peers/bob/representation",
        Some(json!({"target": "alice", "scope": "job"})),
    )
    .await;
    assert!(
        inside["representation"].as_str().unwrap().contains("Rust"),
        "{inside}"
    );
    assert!(!contains_marathon(&inside), "{inside}");
    let inside = rest(
        Method::POST,
        "/v3/workspaces/w/peers/bob/representation",
        Some(json!({"target": "alice", "scope": ["job"]})),
    )
    .await;
    assert!(!contains_marathon(&inside), "{inside}");
    let inside = rest(
        Method::POST,
        "/v3/workspaces/w/peers/bob/representation",
        Some(json!({"target": "alice", "scope": "job", "search_query": "marathon"})),
    )
    .await;
    assert!(!contains_marathon(&inside), "{inside}");
    let all = rest(
        Method::GET,
        "/v3/workspaces/w/peers/bob/context?target=alice",
        None,
    )
    .await;
    assert!(contains_marathon(&all), "control: {all}");
    let inside = rest(
        Method::GET,
        "/v3/workspaces/w/peers/bob/context?target=alice&scope=job",
        None,
    )
    .await;
    assert!(!contains_marathon(&inside), "{inside}");
    assert_eq!(inside["peer_card"], Value::Null);
    let inside = rest(
        Method::GET,
        "/v3/workspaces/w/sessions/work/context?peer_target=alice&peer_perspective=bob&scope=job",
        None,
    )
    .await;
    assert_eq!(inside["messages"].as_array().unwrap().len(), 2);
    assert!(!contains_marathon(&inside), "{inside}");
    let outside = rest(
        Method::GET,
        "/v3/workspaces/w/sessions/home/context?scope=job",
        None,
    )
    .await;
    assert_eq!(outside["messages"], json!([]));
    let from = world.fake.requests().len();
    rest(
        Method::POST,
        "/v3/workspaces/w/peers/bob/chat",
        Some(json!({"query": "Does alice run a marathon?", "target": "alice", "scope": "job"})),
    )
    .await;
    let shown = world.shown_since(from);
    assert!(shown.contains("Rust"), "{shown}");
    assert!(
        !shown.to_lowercase().contains("trains for a marathon"),
        "{shown}"
    );
    assert!(
        !shown.contains("marathoner") && !shown.contains("medal"),
        "{shown}"
    );

    // MCP: search, representation, context, chat.
    let (is_error, all) = world
        .mcp(
            &key,
            "search",
            json!({"workspace_id": "w", "query": "marathon"}),
        )
        .await;
    assert!(!is_error && contains_marathon(&all), "control: {all}");
    let (is_error, inside) = world
        .mcp(
            &key,
            "search",
            json!({"workspace_id": "w", "query": "marathon", "scope": "job"}),
        )
        .await;
    assert!(!is_error, "{inside}");
    assert!(!contains_marathon(&inside["messages"]), "{inside}");
    let (is_error, inside) = world
        .mcp(
            &key,
            "get_representation",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice", "scope": "job"}),
        )
        .await;
    assert!(!is_error && inside.to_string().contains("Rust"), "{inside}");
    assert!(!contains_marathon(&inside), "{inside}");
    let (is_error, inside) = world
        .mcp(
            &key,
            "get_peer_context",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice", "scope": "job"}),
        )
        .await;
    assert!(!is_error && !contains_marathon(&inside), "{inside}");
    let (is_error, outside) = world
        .mcp(
            &key,
            "get_session_context",
            json!({"workspace_id": "w", "session_id": "home", "scope": "job"}),
        )
        .await;
    assert!(!is_error, "{outside}");
    assert_eq!(outside["messages"], json!([]));
    let from = world.fake.requests().len();
    let (is_error, answer) = world
        .mcp(
            &key,
            "chat",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice",
                   "query": "Does alice run a marathon?", "scope": "job"}),
        )
        .await;
    assert!(!is_error, "{answer}");
    let shown = world.shown_since(from);
    assert!(shown.contains("Rust"), "{shown}");
    assert!(
        !shown.contains("trains for a marathon") && !shown.contains("marathoner"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_scope_key_cannot_read_a_session_outside_its_scope_over_any_api() {
    let world = World::new().await;
    let key = scope_key("w", "job");

    // GraphQL: the scope's session and its messages, not another.
    let data = world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { session(id: "work") { messages { nodes { content } } } } }"#,
        )
        .await;
    assert!(data.to_string().contains("Rust"), "{data}");
    for doc in [
        r#"{ workspace(id: "w") { session(id: "home") { id } } }"#,
        r#"{ workspace(id: "w") { sessions { nodes { id } } } }"#,
        r#"{ workspace(id: "w") { messages { nodes { content } } } }"#,
        r#"{ workspace(id: "w") { peer(id: "alice") { messages { nodes { content } } } } }"#,
        r#"{ workspace(id: "w") { peer(id: "bob") { conclusions { nodes { content } } } } }"#,
        r#"{ workspace(id: "w") { conclusions { nodes { content } } } }"#,
        r#"{ workspace(id: "w") { search(query: "marathon", scope: "other") { __typename } } }"#,
        r#"{ workspace(id: "w") { scope(id: "other") { id } } }"#,
        r#"{ workspace(id: "w") { scopes { id } } }"#,
        r#"{ workspace(id: "w2") { session(id: "far") { id } } }"#,
        r#"mutation { createMessages(workspaceId: "w", sessionId: "work", messages: [{peerId: "alice", content: "x"}]) { id } }"#,
        r#"mutation { addSessionsToScope(workspaceId: "w", scopeId: "job", sessionIds: ["home"]) { id } }"#,
    ] {
        assert_eq!(world.gql_code(&key, doc).await, "FORBIDDEN", "{doc}");
    }
    // Recall without naming the scope is confined to it all the same.
    let found = world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { search(query: "marathon") { ... on MessageHits { results { content } } } }
                 own: workspace(id: "w") { scope(id: "job") { sessions { id } } } }"#,
        )
        .await;
    assert!(!contains_marathon(&found["workspace"]), "{found}");
    assert_eq!(found["own"]["scope"]["sessions"], json!([{"id": "work"}]));
    let rep = world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { peer(id: "bob") { representation(target: "alice") } } }"#,
        )
        .await;
    assert!(
        rep.to_string().contains("Rust") && !contains_marathon(&rep),
        "{rep}"
    );
    let from = world.fake.requests().len();
    world
        .gql_ok(
            &key,
            r#"{ workspace(id: "w") { peer(id: "bob") { chat(query: "Does alice run a marathon?", target: "alice") } } }"#,
        )
        .await;
    let shown = world.shown_since(from);
    assert!(
        !shown.contains("trains for a marathon") && !shown.contains("marathoner"),
        "{shown}"
    );

    // REST.
    let (status, body) = world
        .rest(
            &key,
            Method::POST,
            "/v3/workspaces/w/sessions/work/messages/list",
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for (method, path, body) in [
        (
            Method::POST,
            "/v3/workspaces/w/sessions/home/messages/list",
            None,
        ),
        (Method::GET, "/v3/workspaces/w/sessions/home/context", None),
        (
            Method::POST,
            "/v3/workspaces/w/sessions/home/search",
            Some(json!({"query": "marathon"})),
        ),
        (Method::POST, "/v3/workspaces/w/sessions/list", None),
        (
            Method::POST,
            "/v3/workspaces/w/search",
            Some(json!({"query": "marathon", "scope": "other"})),
        ),
        (
            Method::GET,
            "/v3/workspaces/w/peers/bob/card?target=alice",
            None,
        ),
        (Method::GET, "/v3/workspaces/w/scopes/other", None),
        (
            Method::POST,
            "/v3/workspaces/w/scopes",
            Some(json!({"id": "mine"})),
        ),
        (
            Method::POST,
            "/v3/workspaces/w/sessions/work/messages",
            Some(json!({"messages": [{"peer_id": "alice", "content": "x"}]})),
        ),
    ] {
        let (status, answer) = world.rest(&key, method.clone(), path, body).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
    }
    let (status, found) = world
        .rest(
            &key,
            Method::POST,
            "/v3/workspaces/w/search",
            Some(json!({"query": "marathon"})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(!contains_marathon(&found), "{found}");
    let (status, context) = world
        .rest(
            &key,
            Method::GET,
            "/v3/workspaces/w/sessions/work/context?peer_target=alice&peer_perspective=bob",
            None,
        )
        .await;
    assert_eq!(status, 200, "{context}");
    assert!(!contains_marathon(&context), "{context}");
    assert_eq!(context["peer_card"], Value::Null);

    // MCP.
    let (is_error, messages) = world
        .mcp(
            &key,
            "get_session_messages",
            json!({"workspace_id": "w", "session_id": "work"}),
        )
        .await;
    assert!(
        !is_error && messages.to_string().contains("Rust"),
        "{messages}"
    );
    for (tool, args) in [
        ("get_session_messages", json!({"session_id": "home"})),
        ("get_session_context", json!({"session_id": "home"})),
        ("search", json!({"query": "marathon", "session_id": "home"})),
        ("search", json!({"query": "marathon", "scope": "other"})),
        ("list_sessions", json!({})),
        (
            "get_peer_card",
            json!({"peer_id": "bob", "target_peer_id": "alice"}),
        ),
    ] {
        let (is_error, content) = world.mcp(&key, tool, args.clone()).await;
        assert!(is_error, "{tool} {args}: {content}");
        assert_eq!(content["code"], "FORBIDDEN", "{tool} {args}");
    }
    // The key's own workspace is the default one.
    let (is_error, found) = world
        .mcp(&key, "search", json!({"query": "marathon"}))
        .await;
    assert!(!is_error, "{found}");
    assert!(!contains_marathon(&found["messages"]), "{found}");
    let (is_error, context) = world
        .mcp(
            &key,
            "get_peer_context",
            json!({"peer_id": "bob", "target_peer_id": "alice"}),
        )
        .await;
    assert!(!is_error && !contains_marathon(&context), "{context}");
}

#[tokio::test]
async fn a_session_removed_from_a_scope_leaves_its_recall_at_once() {
    let world = World::new().await;
    let key = scope_key("w", "job");
    let doc = r#"{ workspace(id: "w") { session(id: "work") { id } } }"#;
    world.gql_ok(&key, doc).await;
    let (status, _) = world
        .rest(
            &admin(),
            Method::DELETE,
            "/v3/workspaces/w/scopes/job/sessions/work",
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(world.gql_code(&key, doc).await, "FORBIDDEN");
    let (status, found) = world
        .rest(
            &key,
            Method::POST,
            "/v3/workspaces/w/search",
            Some(json!({"query": "Rust"})),
        )
        .await;
    assert_eq!((status, found), (200, json!([])));
}
