//! The MCP server (src/mcp/): Streamable HTTP at /mcp on the server's router and stdio through
//! `honcho-graphql mcp`, driven with plain JSON-RPC as any client sends it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use chrono::{Duration, Utc};
use honcho_graphql::auth::KeySpec;
use honcho_graphql::http::{HttpOptions, Origins};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{AppServer, SECRET, TestApp, bearer, contents, get_json, get_text};

const CURRENT: &str = "2026-07-28";

/// The per-request metadata of revision 2026-07-28 (no `initialize`).
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": CURRENT,
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// An MCP client of a router served on a local port.
struct Mcp {
    http: AppServer,
}

impl Mcp {
    async fn serve(app: TestApp) -> Mcp {
        Mcp {
            http: AppServer::start(app).await,
        }
    }

    async fn serve_with(app: TestApp, options: HttpOptions) -> Mcp {
        Mcp {
            http: AppServer::with_options(app, options).await,
        }
    }

    /// POSTs one JSON-RPC message to /mcp under protocol `version` (header) with `key`.
    async fn post(
        &self,
        key: Option<&str>,
        version: Option<&str>,
        body: &Value,
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        self.post_with(key, version, body, &[]).await
    }

    /// [`Mcp::post`] with `extra` headers.
    async fn post_with(
        &self,
        key: Option<&str>,
        version: Option<&str>,
        body: &Value,
        extra: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        let mut req = self
            .http
            .client
            .post(format!("{}/mcp", self.http.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(v) = version {
            req = req.header("mcp-protocol-version", v);
        }
        if let Some(m) = body["method"].as_str() {
            req = req.header("mcp-method", m);
        }
        let params = &body["params"];
        if let Some(name) = params["name"].as_str().or(params["uri"].as_str()) {
            req = req.header("mcp-name", name);
        }
        if let Some(k) = key {
            req = req.header("authorization", k);
        }
        for (name, value) in extra {
            req = req.header(*name, *value);
        }
        let resp = req.send().await.unwrap();
        let (status, headers) = (resp.status(), resp.headers().clone());
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, headers, value)
    }

    /// Calls `tool` with `args` under the current revision; the HTTP status and the result.
    async fn call(&self, key: Option<&str>, tool: &str, args: Value) -> (StatusCode, Value) {
        let body = request(7, "tools/call", json!({"name": tool, "arguments": args}));
        let (status, _, value) = self.post(key, Some(CURRENT), &body).await;
        (status, value)
    }

    /// A call that must succeed: its structured content.
    async fn ok(&self, key: Option<&str>, tool: &str, args: Value) -> Value {
        let (status, value) = self.call(key, tool, args).await;
        let result = &value["result"];
        assert!(
            status == StatusCode::OK && result["isError"] == json!(false),
            "{tool}: {status} {value:#}"
        );
        assert!(result["content"][0]["text"].is_string(), "{tool}: no text");
        result["structuredContent"].clone()
    }

    /// A call that must fail: its code (`NOT_FOUND`, `FORBIDDEN`, ...).
    async fn refused(&self, key: Option<&str>, tool: &str, args: Value) -> String {
        let (status, value) = self.call(key, tool, args).await;
        let result = &value["result"];
        assert!(
            status == StatusCode::OK && result["isError"] == json!(true),
            "{tool}: {status} {value:#}"
        );
        result["structuredContent"]["code"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Reads the resource `uri` under the current revision; the HTTP status and the answer.
    async fn read(&self, key: Option<&str>, uri: &str) -> (StatusCode, Value) {
        let body = request(8, "resources/read", json!({"uri": uri}));
        let (status, _, value) = self.post(key, Some(CURRENT), &body).await;
        (status, value)
    }

    async fn templates(&self, key: Option<&str>) -> Vec<String> {
        let body = request(1, "resources/templates/list", json!({}));
        let (status, _, value) = self.post(key, Some(CURRENT), &body).await;
        assert_eq!(status, StatusCode::OK, "{value:#}");
        value["result"]["resourceTemplates"]
            .as_array()
            .expect("a template list")
            .iter()
            .map(|t| t["uriTemplate"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn tool_names(&self, key: Option<&str>) -> Vec<String> {
        let (status, _, value) = self
            .post(key, Some(CURRENT), &request(1, "tools/list", json!({})))
            .await;
        assert_eq!(status, StatusCode::OK, "{value:#}");
        value["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn key(workspace: &str, peer: Option<&str>, session: Option<&str>) -> String {
    bearer(KeySpec {
        workspace: Some(workspace.into()),
        peer: peer.map(Into::into),
        session: session.map(Into::into),
        ..KeySpec::default()
    })
}

fn admin() -> String {
    bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    })
}

/// The ids [`seed`] made.
struct Seeded {
    /// alice's conclusion about herself.
    conclusion: String,
    /// alice's first message in `s1`.
    message: String,
}

/// Workspace `w`: session `s1` with alice as its member and two of her messages, peer carol in
/// no session, and one conclusion of alice's about herself. Workspace `w2`.
async fn seed(app: &TestApp) -> Seeded {
    let admin = admin();
    let run = |q: &'static str, vars: Value| {
        let admin = admin.clone();
        async move {
            let resp = app.exec_as(Some(&admin), q, vars).await;
            assert!(resp.get("errors").is_none(), "{resp:#}");
            resp["data"].clone()
        }
    };
    run(
        r#"mutation { getOrCreateSession(workspaceId: "w", id: "s1", peers: [{peerId: "alice"}]) { id }
           getOrCreatePeer(workspaceId: "w", id: "carol") { id }
           getOrCreateWorkspace(id: "w2") { id } }"#,
        json!({}),
    )
    .await;
    let written = run(
        r#"mutation { createMessages(workspaceId: "w", sessionId: "s1", messages: [
             {peerId: "alice", content: "I went hiking in the Alps"},
             {peerId: "alice", content: "The weather was fine"}]) { id } }"#,
        json!({}),
    )
    .await;
    let made = run(
        r#"mutation { createConclusions(workspaceId: "w", conclusions: [
             {content: "alice hikes", observerId: "alice", observedId: "alice"}]) { id } }"#,
        json!({}),
    )
    .await;
    let id = |v: &Value| v.as_str().unwrap().to_owned();
    Seeded {
        conclusion: id(&made["createConclusions"][0]["id"]),
        message: id(&written["createMessages"][0]["id"]),
    }
}

/// "y" (the rules let it through, whatever happened next), "F" (FORBIDDEN) or "U"
/// (UNAUTHENTICATED; over HTTP, 401 before MCP reads the call).
fn mcp_outcome(status: StatusCode, value: &Value) -> String {
    if status == StatusCode::UNAUTHORIZED {
        return "U".into();
    }
    let result = &value["result"];
    match (
        result["isError"].as_bool(),
        result["structuredContent"]["code"].as_str(),
    ) {
        (Some(true), Some("FORBIDDEN")) => "F".into(),
        (Some(true), Some("UNAUTHENTICATED")) => "U".into(),
        (Some(_), _) => "y".into(),
        _ => format!("{status} {value}"),
    }
}

/// The same for a resource read, refused by a JSON-RPC error carrying GraphQL's code.
fn read_outcome(status: StatusCode, value: &Value) -> String {
    if status == StatusCode::UNAUTHORIZED {
        return "U".into();
    }
    match (&value["result"], value["error"]["data"]["code"].as_str()) {
        (_, Some("FORBIDDEN")) => "F".into(),
        (_, Some("UNAUTHENTICATED")) => "U".into(),
        (Value::Object(_), _) | (_, Some(_)) => "y".into(),
        _ => format!("{status} {value}"),
    }
}

fn graphql_outcome(resp: &Value) -> String {
    let codes: Vec<&str> = resp["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| e["extensions"]["code"].as_str())
                .collect()
        })
        .unwrap_or_default();
    if codes.contains(&"UNAUTHENTICATED") {
        "U".into()
    } else if codes.contains(&"FORBIDDEN") {
        "F".into()
    } else {
        "y".into()
    }
}

/// Each resource template's URI on the seeded data, and the GraphQL operation whose rule it
/// passes.
fn resource_equivalents(conclusion: &str) -> BTreeMap<&'static str, (String, String)> {
    BTreeMap::from([
        (
            "honcho://workspaces/{workspace_id}/peers/{peer_id}/card",
            (
                "honcho://workspaces/w/peers/alice/card".into(),
                r#"{ workspace(id: "w") { peer(id: "alice") { id } } }"#.into(),
            ),
        ),
        (
            "honcho://workspaces/{workspace_id}/sessions/{session_id}/transcript{?from_seq}",
            (
                "honcho://workspaces/w/sessions/s1/transcript?from_seq=1".into(),
                r#"{ workspace(id: "w") { session(id: "s1") { messages(first: 1) { totalCount } } } }"#
                    .into(),
            ),
        ),
        (
            "honcho://workspaces/{workspace_id}/conclusions/{conclusion_id}/tree",
            (
                format!("honcho://workspaces/w/conclusions/{conclusion}/tree"),
                format!(
                    r#"{{ workspace(id: "w") {{ conclusion(id: "{conclusion}") {{ reasoningTree {{ nodes {{ id }} }} }} }} }}"#
                ),
            ),
        ),
    ])
}

/// Each tool's arguments, and the GraphQL operation that does its work (the one whose `RULES`
/// row the tool names), on the seeded data. Destructive tools aim where they disturb no other
/// row: the session deleted does not exist, the peer removed is no member.
fn equivalents(seeded: &Seeded) -> BTreeMap<&'static str, (Value, String)> {
    let (conclusion, message) = (&seeded.conclusion, &seeded.message);
    let peer_q =
        |inner: &str| format!(r#"{{ workspace(id: "w") {{ peer(id: "alice") {{ {inner} }} }} }}"#);
    let ws_q = |inner: &str| format!(r#"{{ workspace(id: "w") {{ {inner} }} }}"#);
    let session_q = ws_q(r#"session(id: "s1") { messages(first: 1) { totalCount } }"#);
    let alice = json!({"workspace_id": "w", "peer_id": "alice"});
    let s1 = json!({"workspace_id": "w", "session_id": "s1"});
    BTreeMap::from([
        (
            "search",
            (
                json!({"workspace_id": "w", "peer_id": "alice", "query": "hiking",
                       "include_context": true}),
                peer_q(
                    r#"search(query: "hiking", includeContext: true) {
                         ... on SnippetHits { snippets { context { id } } } }"#,
                ),
            ),
        ),
        (
            "chat",
            (
                json!({"workspace_id": "w", "peer_id": "alice", "query": "who?"}),
                peer_q(r#"chat(query: "who?")"#),
            ),
        ),
        ("get_peer_card", (alice.clone(), peer_q("id"))),
        (
            "set_peer_card",
            (
                json!({"workspace_id": "w", "peer_id": "alice", "peer_card": ["hikes"]}),
                r#"mutation { updatePeer(workspaceId: "w", id: "alice", metadata: {}) { id } }"#
                    .into(),
            ),
        ),
        (
            "get_peer_context",
            (
                alice.clone(),
                peer_q("conclusions(first: 1) { totalCount }"),
            ),
        ),
        (
            "get_representation",
            (
                alice.clone(),
                peer_q("conclusions(first: 1) { totalCount }"),
            ),
        ),
        (
            "create_session",
            (
                s1.clone(),
                r#"mutation { getOrCreateSession(workspaceId: "w", id: "s1") { id } }"#.into(),
            ),
        ),
        (
            "list_sessions",
            (
                json!({"workspace_id": "w"}),
                ws_q("sessions(first: 1) { totalCount }"),
            ),
        ),
        (
            "add_peers_to_session",
            (
                json!({"workspace_id": "w", "session_id": "s1", "peers": ["alice"]}),
                r#"mutation { addPeersToSession(workspaceId: "w", sessionId: "s1",
                     peers: [{peerId: "alice"}]) { id } }"#
                    .into(),
            ),
        ),
        (
            "add_messages_to_session",
            (
                json!({"workspace_id": "w", "session_id": "s1",
                       "messages": [{"peer_id": "alice", "content": "noted"}]}),
                r#"mutation { createMessages(workspaceId: "w", sessionId: "s1",
                     messages: [{peerId: "alice", content: "noted"}]) { id } }"#
                    .into(),
            ),
        ),
        ("get_session_messages", (s1.clone(), session_q.clone())),
        ("get_session_context", (s1.clone(), session_q.clone())),
        (
            "message_range",
            (
                json!({"workspace_id": "w", "session_id": "s1", "from_seq": 1, "to_seq": 2}),
                session_q,
            ),
        ),
        (
            "list_conclusions",
            (alice.clone(), ws_q("conclusions(first: 1) { totalCount }")),
        ),
        (
            "query_conclusions",
            (
                json!({"workspace_id": "w", "peer_id": "alice", "query": "hikes"}),
                ws_q(r#"queryConclusions(query: "hikes") { id }"#),
            ),
        ),
        (
            "create_conclusions",
            (
                json!({"workspace_id": "w", "peer_id": "alice", "target_peer_id": "alice",
                       "conclusions": ["likes maps"]}),
                r#"mutation { createConclusions(workspaceId: "w", conclusions: [
                     {content: "likes maps", observerId: "alice", observedId: "alice"}]) { id } }"#
                    .into(),
            ),
        ),
        (
            "delete_conclusion",
            (
                json!({"workspace_id": "w", "conclusion_id": "no-such-conclusion"}),
                r#"mutation { deleteConclusion(workspaceId: "w", id: "no-such-conclusion") }"#
                    .into(),
            ),
        ),
        (
            "reasoning_tree",
            (
                json!({"workspace_id": "w", "conclusion_id": conclusion}),
                ws_q(&format!(
                    r#"conclusion(id: "{conclusion}") {{ reasoningTree {{ nodes {{ id }} }} }}"#
                )),
            ),
        ),
        (
            "get_queue_status",
            (
                json!({"workspace_id": "w"}),
                ws_q("deriverStatus { pending }"),
            ),
        ),
        (
            "schedule_dream",
            (
                json!({"workspace_id": "w", "peer_id": "alice"}),
                r#"mutation { scheduleDream(workspaceId: "w", observerId: "alice") }"#.into(),
            ),
        ),
        (
            "list_workspaces",
            (json!({}), "{ workspaces(first: 1) { totalCount } }".into()),
        ),
        (
            "create_workspace",
            (
                json!({"workspace_id": "w"}),
                r#"mutation { getOrCreateWorkspace(id: "w") { id } }"#.into(),
            ),
        ),
        (
            "inspect_workspace",
            (
                json!({"workspace_id": "w"}),
                ws_q(
                    "metadata configuration peers(first: 1) { totalCount } \
                      sessions(first: 1) { totalCount }",
                ),
            ),
        ),
        (
            "get_metadata",
            (s1.clone(), ws_q(r#"session(id: "s1") { metadata }"#)),
        ),
        (
            "set_metadata",
            (
                json!({"workspace_id": "w", "session_id": "s1", "metadata": {}}),
                r#"mutation { updateSession(workspaceId: "w", id: "s1", metadata: {}) { id } }"#
                    .into(),
            ),
        ),
        (
            "create_peer",
            (
                alice.clone(),
                r#"mutation { getOrCreatePeer(workspaceId: "w", id: "alice") { id } }"#.into(),
            ),
        ),
        (
            "list_peers",
            (
                json!({"workspace_id": "w"}),
                ws_q("peers(first: 1) { totalCount }"),
            ),
        ),
        (
            "delete_session",
            (
                json!({"workspace_id": "w", "session_id": "s-gone"}),
                r#"mutation { deleteSession(workspaceId: "w", id: "s-gone") }"#.into(),
            ),
        ),
        (
            "clone_session",
            (
                s1.clone(),
                r#"mutation { cloneSession(workspaceId: "w", id: "s1") { id } }"#.into(),
            ),
        ),
        (
            "remove_peers_from_session",
            (
                json!({"workspace_id": "w", "session_id": "s1", "peer_ids": ["carol"]}),
                r#"mutation { removePeersFromSession(workspaceId: "w", sessionId: "s1",
                     peerIds: ["carol"]) { id } }"#
                    .into(),
            ),
        ),
        (
            "get_session_peers",
            (
                s1.clone(),
                ws_q(r#"session(id: "s1") { peers { peer { id } } }"#),
            ),
        ),
        (
            "inspect_session",
            (
                s1.clone(),
                ws_q(
                    r#"session(id: "s1") { metadata peers { peer { id } }
                         messages(first: 1) { totalCount } summaries { short { content } } }"#,
                ),
            ),
        ),
        (
            "get_session_message",
            (
                json!({"workspace_id": "w", "session_id": "s1", "message_id": message}),
                ws_q(&format!(r#"message(id: "{message}") {{ id }}"#)),
            ),
        ),
    ])
}

/// The other holders of the tools whose rule depends on the ids given (a workspace's, a peer's
/// or a session's metadata): tool, arguments, GraphQL operation.
fn holder_equivalents() -> Vec<(&'static str, Value, String)> {
    vec![
        (
            "get_metadata",
            json!({"workspace_id": "w"}),
            r#"{ workspace(id: "w") { metadata } }"#.into(),
        ),
        (
            "get_metadata",
            json!({"workspace_id": "w", "peer_id": "alice"}),
            r#"{ workspace(id: "w") { peer(id: "alice") { metadata } } }"#.into(),
        ),
        (
            "set_metadata",
            json!({"workspace_id": "w", "metadata": {}}),
            r#"mutation { updateWorkspace(id: "w", metadata: {}) { id } }"#.into(),
        ),
        (
            "set_metadata",
            json!({"workspace_id": "w", "peer_id": "alice", "metadata": {}}),
            r#"mutation { updatePeer(workspaceId: "w", id: "alice", metadata: {}) { id } }"#.into(),
        ),
    ]
}

#[tokio::test]
async fn mcp_enforces_exactly_the_graphql_rules_for_every_tool_resource_and_key_kind() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let seeded = seed(&mcp.http.app).await;
    let conclusion = &seeded.conclusion;
    let table = equivalents(&seeded);
    let tools = mcp.tool_names(Some(&admin())).await;
    let missing: Vec<&String> = tools
        .iter()
        .filter(|t| !table.contains_key(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "tools without a GraphQL equivalent in this test: {missing:?}"
    );
    let expired = bearer(KeySpec {
        workspace: Some("w".into()),
        expires_at: Some(Utc::now() - Duration::hours(1)),
        ..KeySpec::default()
    });
    let keys: Vec<(&str, Option<String>)> = vec![
        ("admin", Some(admin())),
        ("workspace", Some(key("w", None, None))),
        ("peer member", Some(key("w", Some("alice"), None))),
        ("peer non-member", Some(key("w", Some("carol"), None))),
        ("session", Some(key("w", None, Some("s1")))),
        ("other workspace", Some(key("w2", None, None))),
        ("expired", Some(expired)),
        ("none", None),
    ];
    let mut wrong = Vec::new();
    let mut kinds = BTreeMap::new();
    let cases = tools
        .iter()
        .map(|tool| {
            let (args, query) = &table[tool.as_str()];
            (tool.as_str(), args.clone(), query.clone())
        })
        .chain(holder_equivalents());
    for (tool, args, query) in cases {
        for (kind, k) in &keys {
            let (status, value) = mcp.call(k.as_deref(), tool, args.clone()).await;
            let over_mcp = mcp_outcome(status, &value);
            let over_graphql =
                graphql_outcome(&mcp.http.app.exec_as(k.as_deref(), &query, json!({})).await);
            if over_mcp != over_graphql {
                wrong.push(format!(
                    "{tool} {args} with {kind} key: MCP {over_mcp}, GraphQL {over_graphql} ({value})"
                ));
            }
            *kinds.entry(over_mcp).or_insert(0) += 1;
        }
    }
    let resources = resource_equivalents(conclusion);
    for template in mcp.templates(Some(&admin())).await {
        let Some((uri, query)) = resources.get(template.as_str()) else {
            wrong.push(format!(
                "resource {template} has no GraphQL equivalent in this test"
            ));
            continue;
        };
        for (kind, k) in &keys {
            let (status, value) = mcp.read(k.as_deref(), uri).await;
            let over_mcp = read_outcome(status, &value);
            let over_graphql =
                graphql_outcome(&mcp.http.app.exec_as(k.as_deref(), query, json!({})).await);
            if over_mcp != over_graphql {
                wrong.push(format!(
                    "{uri} with {kind} key: MCP {over_mcp}, GraphQL {over_graphql} ({value})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The table is not vacuous: every outcome occurs.
    for outcome in ["y", "F", "U"] {
        assert!(kinds.get(outcome).is_some_and(|n| *n > 0), "{kinds:?}");
    }
}

#[tokio::test]
async fn mcp_speaks_2026_07_28_and_negotiates_back_to_2025_11_25_and_2025_06_18() {
    let mcp = Mcp::serve(TestApp::new().await).await;
    for version in ["2025-06-18", "2025-11-25"] {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "it", "version": "1"}}});
        let (status, _, value) = mcp.post(None, None, &init).await;
        assert_eq!(status, StatusCode::OK, "{value:#}");
        assert_eq!(value["result"]["protocolVersion"], json!(version));
        assert_eq!(
            value["result"]["serverInfo"]["name"],
            json!("honcho-graphql")
        );
        // Stateless: the next request needs no session, on this or any instance.
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let (status, headers, value) = mcp.post(None, Some(version), &list).await;
        assert_eq!(status, StatusCode::OK, "{value:#}");
        assert!(headers.get("mcp-session-id").is_none());
        assert!(value["result"]["tools"].as_array().unwrap().len() >= 18);
    }
    // A revision it does not speak gets one it does.
    let old = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "it", "version": "1"}}});
    let (_, _, value) = mcp.post(None, None, &old).await;
    assert_eq!(value["result"]["protocolVersion"], json!("2025-11-25"));
    // The current revision: discovery instead of initialize, metadata on every request.
    let (status, _, value) = mcp
        .post(
            None,
            Some(CURRENT),
            &request(1, "server/discover", json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{value:#}");
    assert_eq!(
        value["result"]["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"])
    );
    let tools = mcp.tool_names(None).await;
    assert!(tools.contains(&"reasoning_tree".to_owned()), "{tools:?}");

    // A call that names no workspace works in the connection's X-Honcho-Workspace-ID.
    mcp.ok(
        None,
        "create_session",
        json!({"workspace_id": "wx", "session_id": "sx"}),
    )
    .await;
    let list = request(
        5,
        "tools/call",
        json!({"name": "list_sessions", "arguments": {}}),
    );
    let header = [("x-honcho-workspace-id", "wx")];
    let (_, _, value) = mcp.post_with(None, Some(CURRENT), &list, &header).await;
    assert_eq!(
        value["result"]["structuredContent"]["sessions"][0]["id"],
        json!("sx"),
        "{value:#}"
    );
    // Without it (auth off: an admin, who has no workspace of its own) the call says so.
    let (_, _, value) = mcp.post(None, Some(CURRENT), &list).await;
    assert_eq!(
        value["result"]["structuredContent"]["code"],
        json!("BAD_USER_INPUT"),
        "{value:#}"
    );
}

#[tokio::test]
async fn mcp_without_a_valid_key_is_401_with_a_challenge_naming_the_resource_metadata() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let list = request(1, "tools/list", json!({}));
    let (status, headers, _) = mcp.post(None, Some(CURRENT), &list).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let challenge = headers["www-authenticate"].to_str().unwrap().to_owned();
    let prefix = format!(
        "Bearer realm=\"honcho-graphql\", resource_metadata=\"{}",
        mcp.http.base
    );
    assert!(challenge.starts_with(&prefix), "{challenge}");
    assert!(
        !challenge.contains("error="),
        "no credentials, no error: {challenge}"
    );
    let url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let doc = get_json(url).await;
    assert_eq!(doc["resource"], json!(format!("{}/mcp", mcp.http.base)));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    let bare = get_json(&format!(
        "{}/.well-known/oauth-protected-resource",
        mcp.http.base
    ))
    .await;
    assert_eq!(bare, doc);

    for bad in [
        "Bearer not-a-key",
        &key("w", None, None).replace("Bearer ", "Bearer x"),
    ] {
        let (status, headers, _) = mcp.post(Some(bad), Some(CURRENT), &list).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.ends_with(", error=\"invalid_token\""),
            "{challenge}"
        );
    }
    let (status, _, _) = mcp
        .post(Some(&key("w", None, None)), Some(CURRENT), &list)
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// One HTTP/1.1 response read off `stream`: its status line and body (by `Content-Length`).
async fn read_response(stream: &mut tokio::net::TcpStream) -> (String, String) {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                let status = text.lines().next().unwrap_or_default().to_owned();
                return (status, text[end + 4..end + 4 + length].to_owned());
            }
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the server closed the connection after {text:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn a_401_sent_before_the_body_arrived_leaves_the_connection_usable_for_the_next_request() {
    use tokio::io::AsyncWriteExt;
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let addr = mcp.http.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = request(1, "tools/list", json!({})).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // The head and the body apart, as a loaded client's two writes can arrive: the refusal
    // comes from the head alone.
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    stream.write_all(body.as_bytes()).await.unwrap();
    let (status, answer) = read_response(&mut stream).await;
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
    assert!(answer.contains("UNAUTHENTICATED"), "{answer}");
    // The next request on the same connection is answered, not dropped.
    stream
        .write_all(format!("{head}{body}").as_bytes())
        .await
        .unwrap();
    let (status, _) = read_response(&mut stream).await;
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
}

/// Runs `honcho-graphql mcp` on `db` with `env`, writes `requests` (one JSON-RPC message a line)
/// and returns its answers once it has answered them all.
fn run_stdio(db: &str, env: &[(&str, &str)], requests: &[Value]) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_honcho-graphql"))
        .arg("mcp")
        .env("DATABASE_URL", db)
        .env("HONCHO_EMBEDDER", "none")
        .env("HONCHO_AUTH_SECRET", SECRET)
        .env("HONCHO_DB_POOL", "2")
        .env("RUST_LOG", "error")
        .env_remove("HONCHO_API_KEY")
        .env_remove("HONCHO_WORKSPACE_ID")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start honcho-graphql mcp");
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while answers.len() < requests.len() {
        let line = lines.next().expect("an answer per request").unwrap();
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "mcp exited {status}");
    answers.sort_by_key(|a| a["id"].as_u64());
    answers
}

#[tokio::test]
async fn stdio_answers_tools_list_and_calls_with_the_key_from_the_environment() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let url = app._db.url();
    let alice = key("w", Some("alice"), None);
    let alice = alice.trim_start_matches("Bearer ").to_owned();
    let call = |id, tool: &str, args: Value| {
        request(id, "tools/call", json!({"name": tool, "arguments": args}))
    };
    let requests = [
        request(1, "tools/list", json!({})),
        // No workspace_id: the peer key's own workspace.
        call(
            2,
            "message_range",
            json!({"session_id": "s1", "from_seq": 1, "to_seq": 5}),
        ),
        call(3, "list_sessions", json!({})),
    ];
    let answers = tokio::task::spawn_blocking(move || {
        run_stdio(&url, &[("HONCHO_API_KEY", alice.as_str())], &requests)
    })
    .await
    .unwrap();
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t["name"] == "search"),
        "{:#}",
        answers[0]
    );
    let range = &answers[1]["result"];
    assert_eq!(range["isError"], json!(false), "{range:#}");
    assert_eq!(
        contents(&range["structuredContent"]["messages"]),
        ["I went hiking in the Alps", "The weather was fine"]
    );
    // A peer key may not list the workspace's sessions, over MCP as over GraphQL.
    let refused = &answers[2]["result"];
    assert_eq!(refused["isError"], json!(true));
    assert_eq!(refused["structuredContent"]["code"], json!("FORBIDDEN"));

    // Without a key, auth on: every call is refused.
    let url = app._db.url();
    let answers = tokio::task::spawn_blocking(move || {
        run_stdio(
            &url,
            &[],
            &[call(1, "list_sessions", json!({"workspace_id": "w"}))],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        answers[0]["result"]["structuredContent"]["code"],
        json!("UNAUTHENTICATED"),
        "{:#}",
        answers[0]
    );
}

#[tokio::test]
async fn search_with_context_and_reasoning_tree_return_the_stored_data() {
    let mcp = Mcp::serve(TestApp::with_embedder().await.auth_on()).await;
    let admin = admin();
    let turns: Vec<Value> = [
        ("alice", "Good morning"),
        ("bob", "Morning! Plans for the weekend?"),
        ("alice", "I am taking my kayak down the Ardèche river"),
        ("bob", "Sounds wet"),
        ("alice", "Only if I capsize"),
        ("bob", "Did you see the match yesterday?"),
        ("alice", "No, I was asleep"),
    ]
    .iter()
    .map(|(p, c)| json!({"peer_id": p, "content": c}))
    .collect();
    // Recorded through MCP too: the session and its peers are created with them.
    let added = mcp
        .ok(
            Some(&admin),
            "add_messages_to_session",
            json!({"workspace_id": "w", "session_id": "s1", "messages": turns}),
        )
        .await;
    let seqs: Vec<i64> = added["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq_in_session"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());

    let found = mcp
        .ok(
            Some(&admin),
            "search",
            json!({"workspace_id": "w", "session_id": "s1", "query": "kayak river",
                   "message_limit": 1, "include_context": true, "context_window": 1}),
        )
        .await;
    assert_eq!(
        found["messages"][0]["seq_in_session"],
        json!(3),
        "{found:#}"
    );
    let snippet = &found["snippets"][0];
    assert_eq!(snippet["matched"], json!([found["messages"][0]["id"]]));
    let window: Vec<(i64, &str)> = snippet["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["seq_in_session"].as_i64().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        window,
        [
            (2, "Morning! Plans for the weekend?"),
            (3, "I am taking my kayak down the Ardèche river"),
            (4, "Sounds wet"),
        ]
    );

    // c1 ← c2 ← c3 (each drawn from the one before).
    let made = mcp
        .ok(
            Some(&admin),
            "create_conclusions",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice",
                   "conclusions": ["alice owns a kayak"]}),
        )
        .await;
    let c1 = made["conclusions"][0]["id"].as_str().unwrap().to_owned();
    let derive = |content: &str, source: &str| {
        json!({"input": {"content": content, "observerId": "bob", "observedId": "alice",
                         "level": "DEDUCTIVE", "sourceIds": [source]}})
    };
    let record = "mutation($input: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: \"w\", input: $input) { id } }";
    let c2 = mcp
        .http
        .app
        .exec_as(Some(&admin), record, derive("alice likes rivers", &c1))
        .await["data"]["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let c3 = mcp
        .http
        .app
        .exec_as(
            Some(&admin),
            record,
            derive("alice would enjoy a canoe trip", &c2),
        )
        .await["data"]["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tree = mcp
        .ok(
            Some(&admin),
            "reasoning_tree",
            json!({"workspace_id": "w", "conclusion_id": c2}),
        )
        .await;
    let nodes: Vec<(i64, &str)> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["depth"].as_i64().unwrap(), n["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        nodes,
        [(-1, c1.as_str()), (0, c2.as_str()), (1, c3.as_str())]
    );
    assert_eq!(
        tree["edges"],
        json!([{"from": c2, "to": c1}, {"from": c3, "to": c2}])
    );
    assert_eq!(tree["truncated"], json!(false));
    let premises = mcp
        .ok(
            Some(&admin),
            "reasoning_tree",
            json!({"workspace_id": "w", "conclusion_id": c3, "direction": "premises",
                   "max_depth": 1}),
        )
        .await;
    assert_eq!(
        premises["nodes"].as_array().unwrap().len(),
        2,
        "{premises:#}"
    );
    assert_eq!(
        premises["truncated"],
        json!(true),
        "c1 lies one step further"
    );
}

#[tokio::test]
async fn resources_are_a_card_a_transcript_paged_by_seq_and_a_tree_and_the_prompt_guides_use() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let conclusion = seed(&mcp.http.app).await.conclusion;
    let admin = admin();
    let batch = |from: usize, to: usize| -> Vec<Value> {
        (from..=to)
            .map(|i| json!({"peerId": "alice", "content": format!("turn {i}")}))
            .collect()
    };
    // Seqs 3..=102 and 103..=105 after the seed's two.
    for m in [batch(3, 102), batch(103, 105)] {
        let resp = mcp
            .http.app
            .exec_as(
                Some(&admin),
                "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"w\", sessionId: \"s1\", messages: $m) { id } }",
                json!({"m": m}),
            )
            .await;
        assert!(resp.get("errors").is_none(), "{resp:#}");
    }
    let alice = key("w", Some("alice"), None);
    let text = |value: &Value| {
        value["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    mcp.ok(
        Some(&alice),
        "set_peer_card",
        json!({"peer_id": "alice", "peer_card": ["lives in Lyon", "hikes"]}),
    )
    .await;
    let (_, card) = mcp
        .read(Some(&alice), "honcho://workspaces/w/peers/alice/card")
        .await;
    assert_eq!(text(&card), "- lives in Lyon\n- hikes");

    let first = "honcho://workspaces/w/sessions/s1/transcript";
    let (_, page) = mcp.read(Some(&alice), first).await;
    let page = text(&page);
    let lines: Vec<&str> = page.lines().collect();
    assert_eq!(lines.len(), 101, "100 messages and the next page");
    assert_eq!(lines[0], "[s1 #1] alice: I went hiking in the Alps");
    assert_eq!(lines[99], "[s1 #100] alice: turn 100");
    let next = "honcho://workspaces/w/sessions/s1/transcript?from_seq=101";
    assert_eq!(lines[100], format!("(next page: {next})"));
    let (_, rest) = mcp.read(Some(&alice), next).await;
    assert_eq!(
        text(&rest),
        "[s1 #101] alice: turn 101\n[s1 #102] alice: turn 102\n[s1 #103] alice: turn 103\n\
         [s1 #104] alice: turn 104\n[s1 #105] alice: turn 105"
    );
    // carol is no member of s1: its transcript is refused her, as over GraphQL.
    let (_, refused) = mcp.read(Some(&key("w", Some("carol"), None)), first).await;
    assert_eq!(
        refused["error"]["data"]["code"],
        json!("FORBIDDEN"),
        "{refused:#}"
    );

    let tree_uri = format!("honcho://workspaces/w/conclusions/{conclusion}/tree");
    let (_, tree) = mcp.read(Some(&admin), &tree_uri).await;
    let tree: Value = serde_json::from_str(&text(&tree)).unwrap();
    assert_eq!(tree["nodes"][0]["id"], json!(conclusion));
    assert_eq!(tree["nodes"][0]["content"], json!("alice hikes"));
    let (_, missing) = mcp
        .read(Some(&admin), "honcho://workspaces/w/conclusions/nope/tree")
        .await;
    assert_eq!(
        missing["error"]["data"]["code"],
        json!("NOT_FOUND"),
        "{missing:#}"
    );
    let (_, unnamed) = mcp.read(Some(&admin), "honcho://workspaces/w/peers").await;
    // -32002 before 2026-07-28, invalid params from it on (the SDK maps it by revision).
    assert_eq!(unnamed["error"]["code"], json!(-32602), "{unnamed:#}");
    assert_eq!(unnamed["error"]["data"]["code"], json!("NOT_FOUND"));

    let (_, _, prompts) = mcp
        .post(
            Some(&alice),
            Some(CURRENT),
            &request(3, "prompts/list", json!({})),
        )
        .await;
    assert_eq!(prompts["result"]["prompts"][0]["name"], json!("use_memory"));
    let get = request(
        4,
        "prompts/get",
        json!({"name": "use_memory", "arguments": {"peer_id": "alice"}}),
    );
    let (_, _, prompt) = mcp.post(Some(&alice), Some(CURRENT), &get).await;
    let guide = prompt["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        guide.contains("get_peer_context for the peer `alice`"),
        "{guide}"
    );
    // Every tool the guide names exists.
    let tools = mcp.tool_names(Some(&alice)).await;
    for named in [
        "search",
        "message_range",
        "chat",
        "reasoning_tree",
        "create_conclusions",
    ] {
        assert!(guide.contains(named) && tools.contains(&named.to_owned()));
    }
}

#[tokio::test]
async fn mcp_sits_behind_the_same_body_limit_cors_request_ids_and_metrics_as_graphql() {
    let options = HttpOptions {
        max_body_bytes: 2048,
        origins: Origins::parse("https://app.example", true).unwrap(),
        ..HttpOptions::default()
    };
    let mcp = Mcp::serve_with(TestApp::with_auth().await, options).await;
    let workspace = key("w", None, None);
    // A body over the limit: 413 on both routes.
    let big = request(
        1,
        "tools/call",
        json!({"name": "search", "arguments": {"query": "x".repeat(4096)}}),
    );
    let (status, _, _) = mcp.post(Some(&workspace), Some(CURRENT), &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let graphql = mcp
        .http
        .client
        .post(format!("{}/graphql", mcp.http.base))
        .header("content-type", "application/json")
        .body(
            json!({"query": format!("{{ workspace(id: \"{}\") {{ id }} }}", "x".repeat(4096))})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(graphql.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // CORS: the allowed origin's preflight passes, another's does not, on both routes.
    for path in ["/mcp", "/graphql"] {
        for (origin, allowed) in [
            ("https://app.example", true),
            ("https://evil.example", false),
        ] {
            let resp = mcp
                .http
                .client
                .request(reqwest::Method::OPTIONS, format!("{}{path}", mcp.http.base))
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                )
                .send()
                .await
                .unwrap();
            let granted = resp.headers().get("access-control-allow-origin");
            assert_eq!(
                granted.and_then(|v| v.to_str().ok()) == Some(origin),
                allowed,
                "{path} from {origin}: {:?}",
                resp.headers()
            );
        }
    }
    // A request id on every answer, and each call in the operation metrics.
    let body = request(
        2,
        "tools/call",
        json!({"name": "list_sessions", "arguments": {}}),
    );
    let (status, headers, value) = mcp.post(Some(&workspace), Some(CURRENT), &body).await;
    assert_eq!(status, StatusCode::OK, "{value:#}");
    assert!(headers.get("x-request-id").is_some());
    let metrics = get_text(&format!("{}/metrics", mcp.http.base)).await;
    assert!(
        metrics.contains(
            r#"honcho_graphql_requests_total{operation="mcp.list_sessions",outcome="ok"}"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn get_representation_honours_a_search_query_and_refuses_bad_options_with_a_code() {
    let mcp = Mcp::serve(TestApp::with_embedder().await.auth_on()).await;
    let admin = admin();
    seed(&mcp.http.app).await;
    // Newer than the seeded "alice hikes", and about other things.
    let newer = json!([
        "alice drinks green tea",
        "alice lives in Lisbon",
        "alice owns a grey cat"
    ]);
    mcp.ok(
        Some(&admin),
        "create_conclusions",
        json!({"workspace_id": "w", "peer_id": "alice", "target_peer_id": "alice",
               "conclusions": newer}),
    )
    .await;
    let args = |extra: Value| {
        let mut a = json!({"workspace_id": "w", "peer_id": "alice", "max_conclusions": 3});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    let plain = mcp
        .ok(Some(&admin), "get_representation", args(json!({})))
        .await;
    let text = plain["representation"].as_str().unwrap();
    assert!(!text.contains("alice hikes"), "{text}");
    let asked = mcp
        .ok(
            Some(&admin),
            "get_representation",
            args(json!({"search_query": "Does alice go hiking in the mountains?"})),
        )
        .await;
    let text = asked["representation"].as_str().unwrap();
    let first = text.lines().find(|l| l.starts_with("1. ")).unwrap();
    assert!(first.ends_with("alice hikes"), "{text}");

    let (_, refused) = mcp
        .call(
            Some(&admin),
            "get_peer_context",
            args(json!({"search_query": "hiking", "search_top_k": 0})),
        )
        .await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused:#}");
    assert_eq!(
        refused["result"]["structuredContent"]["code"],
        json!("BAD_USER_INPUT"),
        "{refused:#}"
    );
}

#[tokio::test]
async fn clone_session_copies_the_peers_and_the_messages_up_to_the_one_named() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let seeded = seed(&mcp.http.app).await;
    let admin = admin();
    let admin = Some(admin.as_str());
    let clone = |extra: Value| {
        let mut args = json!({"workspace_id": "w", "session_id": "s1"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        mcp.ok(admin, "clone_session", args)
    };
    let whole = clone(json!({})).await;
    let partial = clone(json!({"message_id": seeded.message})).await;
    let read = |session: &Value| json!({"workspace_id": "w", "session_id": session["id"].as_str().unwrap()});
    for (copy, said) in [
        (
            &whole,
            vec!["I went hiking in the Alps", "The weather was fine"],
        ),
        (&partial, vec!["I went hiking in the Alps"]),
    ] {
        assert_ne!(copy["id"], json!("s1"), "{copy:#}");
        let messages = mcp.ok(admin, "get_session_messages", read(copy)).await;
        assert_eq!(contents(&messages["messages"]), said, "{messages:#}");
        let peers = mcp.ok(admin, "get_session_peers", read(copy)).await;
        assert_eq!(peers["peers"][0]["id"], json!("alice"), "{peers:#}");
    }
    // The original is untouched.
    let original = mcp
        .ok(admin, "inspect_session", read(&json!({"id": "s1"})))
        .await;
    assert_eq!(original["message_count"], json!(2), "{original:#}");
}

#[tokio::test]
async fn delete_session_removes_the_session_and_its_messages() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let seeded = seed(&mcp.http.app).await;
    let admin = admin();
    let admin = Some(admin.as_str());
    let s1 = json!({"workspace_id": "w", "session_id": "s1"});
    let deleted = mcp.ok(admin, "delete_session", s1.clone()).await;
    assert_eq!(deleted, json!({"session_id": "s1", "deleted": true}));
    let listed = mcp
        .ok(admin, "list_sessions", json!({"workspace_id": "w"}))
        .await;
    assert_eq!(listed["total"], json!(0), "{listed:#}");
    let message = json!({"workspace_id": "w", "session_id": "s1", "message_id": seeded.message});
    for (tool, args) in [
        ("get_session_message", message),
        ("inspect_session", s1.clone()),
        ("delete_session", s1),
    ] {
        assert_eq!(mcp.refused(admin, tool, args).await, "NOT_FOUND", "{tool}");
    }
}

#[tokio::test]
async fn set_metadata_then_get_metadata_round_trips_for_a_workspace_a_peer_and_a_session() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    seed(&mcp.http.app).await;
    let admin = admin();
    let admin = Some(admin.as_str());
    let holders = [
        json!({"workspace_id": "w"}),
        json!({"workspace_id": "w", "peer_id": "alice"}),
        json!({"workspace_id": "w", "session_id": "s1"}),
        // The session wins when both are named.
        json!({"workspace_id": "w", "peer_id": "carol", "session_id": "s1"}),
    ];
    for (i, holder) in holders.iter().enumerate() {
        let with = |metadata: Value| {
            let mut args = holder.clone();
            args["metadata"] = metadata;
            args
        };
        mcp.ok(admin, "set_metadata", with(json!({"old": true})))
            .await;
        let set = mcp
            .ok(admin, "set_metadata", with(json!({"holder": i})))
            .await;
        assert_eq!(set["metadata"], json!({"holder": i}), "replaced whole");
        let got = mcp.ok(admin, "get_metadata", holder.clone()).await;
        assert_eq!(got["metadata"], json!({"holder": i}), "{holder}");
    }
    // Each holder kept its own: carol's was never set.
    let carol = json!({"workspace_id": "w", "peer_id": "carol"});
    let got = mcp.ok(admin, "get_metadata", carol).await;
    assert_eq!(got["metadata"], json!({}));
    let workspace = mcp
        .ok(admin, "get_metadata", json!({"workspace_id": "w"}))
        .await;
    assert_eq!(workspace["metadata"], json!({"holder": 0}));
    let missing = json!({"workspace_id": "w", "peer_id": "nobody"});
    assert_eq!(
        mcp.refused(admin, "get_metadata", missing).await,
        "NOT_FOUND"
    );
}

#[tokio::test]
async fn remove_peers_from_session_ends_their_membership_and_the_reach_of_their_keys() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    seed(&mcp.http.app).await;
    let admin = admin();
    let admin = Some(admin.as_str());
    let alice = key("w", Some("alice"), None);
    let s1 = json!({"workspace_id": "w", "session_id": "s1"});
    mcp.ok(
        admin,
        "add_peers_to_session",
        json!({"workspace_id": "w", "session_id": "s1",
               "peers": [{"peer_id": "bob", "observe_me": false}]}),
    )
    .await;
    mcp.ok(Some(&alice), "get_session_messages", s1.clone())
        .await;
    let removed = mcp
        .ok(
            admin,
            "remove_peers_from_session",
            json!({"workspace_id": "w", "session_id": "s1", "peer_ids": ["alice"]}),
        )
        .await;
    assert_eq!(removed["id"], json!("s1"));
    let peers = mcp.ok(admin, "get_session_peers", s1.clone()).await;
    assert_eq!(
        peers["peers"],
        json!([{"id": "bob", "observe_me": false, "observe_others": null}])
    );
    // Her messages stay; her key no longer reads the session.
    let inspected = mcp.ok(admin, "inspect_session", s1.clone()).await;
    assert_eq!(inspected["message_count"], json!(2), "{inspected:#}");
    assert_eq!(
        mcp.refused(Some(&alice), "get_session_messages", s1).await,
        "FORBIDDEN"
    );
}

#[tokio::test]
async fn workspaces_peers_and_sessions_are_created_listed_and_inspected_as_they_are_stored() {
    let mcp = Mcp::serve(TestApp::with_auth().await).await;
    let seeded = seed(&mcp.http.app).await;
    let admin = admin();
    let admin = Some(admin.as_str());
    let w3 = |metadata: Value| json!({"workspace_id": "w3", "metadata": metadata});
    let made = mcp
        .ok(admin, "create_workspace", w3(json!({"purpose": "it"})))
        .await;
    assert_eq!(made["metadata"], json!({"purpose": "it"}));
    // Get-or-create: an existing workspace keeps its metadata.
    let again = mcp
        .ok(admin, "create_workspace", w3(json!({"purpose": "other"})))
        .await;
    assert_eq!(again["metadata"], json!({"purpose": "it"}));
    let listed = mcp.ok(admin, "list_workspaces", json!({"size": 2})).await;
    assert_eq!(
        (listed["total"].clone(), listed["pages"].clone()),
        (json!(3), json!(2))
    );
    assert_eq!(contents_ids(&listed["workspaces"]), ["w", "w2"]);
    // Only an admin key lists workspaces.
    let workspace_key = key("w", None, None);
    assert_eq!(
        mcp.refused(Some(&workspace_key), "list_workspaces", json!({}))
            .await,
        "FORBIDDEN"
    );

    let dave = json!({"workspace_id": "w", "peer_id": "dave",
                      "configuration": {"observeMe": false}});
    let peer = mcp.ok(admin, "create_peer", dave).await;
    assert_eq!(peer["configuration"], json!({"observe_me": false}));
    let peers = mcp
        .ok(admin, "list_peers", json!({"workspace_id": "w"}))
        .await;
    assert_eq!(contents_ids(&peers["peers"]), ["alice", "carol", "dave"]);

    let inspected = mcp
        .ok(admin, "inspect_workspace", json!({"workspace_id": "w"}))
        .await;
    assert_eq!(
        (&inspected["peer_count"], &inspected["session_count"]),
        (&json!(3), &json!(1))
    );
    assert_eq!(inspected["sessions"], json!([{"id": "s1"}]));
    let session = mcp
        .ok(
            admin,
            "inspect_session",
            json!({"workspace_id": "w", "session_id": "s1"}),
        )
        .await;
    assert_eq!(session["message_count"], json!(2));
    assert_eq!(contents_ids(&session["peers"]), ["alice"]);
    assert_eq!(
        session["summaries"],
        json!({"short_summary": null, "long_summary": null})
    );

    // A message is read by id in its own session, and in no other.
    let of = |session: &str| json!({"workspace_id": "w", "session_id": session, "message_id": seeded.message});
    let message = mcp.ok(admin, "get_session_message", of("s1")).await;
    assert_eq!(message["content"], json!("I went hiking in the Alps"));
    assert_eq!(message["seq_in_session"], json!(1));
    mcp.ok(
        admin,
        "create_session",
        json!({"workspace_id": "w", "session_id": "s2"}),
    )
    .await;
    assert_eq!(
        mcp.refused(admin, "get_session_message", of("s2")).await,
        "NOT_FOUND"
    );
}

/// The `id` of each object of a list.
fn contents_ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect()
}
