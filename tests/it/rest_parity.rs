//! REST answers what GraphQL answers, key by key. Every route of the v3 REST API (read from its
//! OpenAPI document, so that a route without a row fails) and every option that could widen what
//! a route reads is called with seven kinds of key, and each answer is compared with the answer
//! of the GraphQL fields doing the same work, for the same key on a database seeded alike:
//! allowed, UNAUTHENTICATED (401) or FORBIDDEN (403), the same error otherwise, and the same data
//! where both return comparable data.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::Request;
use chrono::{Duration, Utc};
use futures::future::join_all;
use honcho_graphql::auth::KeySpec;
use honcho_graphql::llm::LlmArgs;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::fake_llm::{FakeLlm, Reply, with_dialectic};
use crate::harness::{TestApp, bearer};

/// The keys, in the order of the expectation strings.
const WHO: [&str; 7] = [
    "admin",
    "workspace",
    "member peer (alice, of s1)",
    "non-member peer (carol)",
    "session (s1)",
    "other workspace",
    "expired",
];

fn key_of(who: usize) -> String {
    let ws = |peer: Option<&str>, session: Option<&str>| KeySpec {
        workspace: Some("ws".into()),
        peer: peer.map(Into::into),
        session: session.map(Into::into),
        ..KeySpec::default()
    };
    bearer(match who {
        0 => KeySpec {
            admin: true,
            ..KeySpec::default()
        },
        1 => ws(None, None),
        2 => ws(Some("alice"), None),
        3 => ws(Some("carol"), None),
        4 => ws(None, Some("s1")),
        5 => KeySpec {
            workspace: Some("other".into()),
            ..KeySpec::default()
        },
        6 => KeySpec {
            expires_at: Some(Utc::now() - Duration::seconds(5)),
            ..ws(None, None)
        },
        _ => unreachable!(),
    })
}

// ---------------------------------------------------------------------------------------------
// The fixture, seeded alike into the REST side's database and the GraphQL side's.

/// (content, observer, observed, session) of the conclusions seeded.
const CONCLUSIONS: &[(&str, &str, &str, Option<&str>)] = &[
    ("bob likes tea", "alice", "bob", Some("s1")),
    ("alice plays chess", "alice", "alice", None),
    ("carol is shy", "alice", "carol", None),
    ("carol keeps a diary", "alice", "carol", Some("s2")),
    (
        "carol hides a key under the mat",
        "carol",
        "carol",
        Some("s2"),
    ),
];

/// Ids that differ between the two databases: `{m1}` alice's message in s1, `{m2}` carol's in
/// s2, `{c1}` the first conclusion.
struct Fixture {
    m1: String,
    m2: String,
    c1: String,
}

impl Fixture {
    fn fill(&self, text: &str) -> String {
        text.replace("{m1}", &self.m1)
            .replace("{m2}", &self.m2)
            .replace("{c1}", &self.c1)
    }
}

/// Workspace ws: session s1 (alice and bob wrote in it), session s2 (carol's), the conclusions
/// above, carol's card of herself and alice's card of carol; workspace other: zed in x.
async fn seed(app: &TestApp) -> Fixture {
    let admin = key_of(0);
    let run = |doc: String| {
        let admin = admin.clone();
        async move {
            let resp = app.exec_as(Some(&admin), &doc, json!({})).await;
            assert!(resp.get("errors").is_none(), "{doc}: {resp}");
            resp["data"].clone()
        }
    };
    let write = |w: &str, s: &str, messages: &[(&str, &str)]| {
        let m: Vec<String> = messages
            .iter()
            .map(|(p, c)| format!("{{peerId: \"{p}\", content: \"{c}\"}}"))
            .collect();
        format!(
            "mutation {{ createMessages(workspaceId: \"{w}\", sessionId: \"{s}\", messages: [{}]) {{ id }} }}",
            m.join(", ")
        )
    };
    let first = |d: Value, field: &str| d[field][0]["id"].as_str().unwrap().to_owned();
    let m1 = first(
        run(write(
            "ws",
            "s1",
            &[("alice", "alice in s1"), ("bob", "bob in s1")],
        ))
        .await,
        "createMessages",
    );
    let m2 = first(
        run(write("ws", "s2", &[("carol", "carol's secret in s2")])).await,
        "createMessages",
    );
    run(write("other", "x", &[("zed", "zed far away")])).await;
    let conclusions: Vec<String> = CONCLUSIONS
        .iter()
        .map(|(content, observer, observed, session)| {
            let session = session.map_or(String::new(), |s| format!(", sessionId: \"{s}\""));
            format!(
                "{{content: \"{content}\", observerId: \"{observer}\", observedId: \"{observed}\"{session}}}"
            )
        })
        .collect();
    let c1 = first(
        run(format!(
            "mutation {{ createConclusions(workspaceId: \"ws\", conclusions: [{}]) {{ id }} }}",
            conclusions.join(", ")
        ))
        .await,
        "createConclusions",
    );
    for (observer, card) in [
        ("carol", "carol's own card"),
        ("alice", "alice's card of carol"),
    ] {
        app.store
            .set_peer_card("ws", observer, "carol", vec![card.into()])
            .await
            .unwrap();
    }
    app.store
        .get_or_create_scope("ws", "sc", None)
        .await
        .unwrap();
    app.store
        .add_sessions_to_scope("ws", "sc", &["s1".to_owned()])
        .await
        .unwrap();
    Fixture { m1, m2, c1 }
}

// ---------------------------------------------------------------------------------------------
// The matrix.

/// A request's body.
#[derive(Clone, Copy)]
enum Payload {
    Nothing,
    Json(&'static str),
    /// A multipart form: `peer_id` alice and a text file, "an uploaded note".
    Upload,
}

/// What is compared when both sides succeed.
#[derive(Clone, Copy)]
enum Pick {
    /// The values at a pointer whose `*` steps into every element of an array.
    At(&'static str),
    /// The seeded conclusions whose content the text at this pointer contains (a representation
    /// is text built from conclusions).
    Mentions(&'static str),
}

struct Row {
    method: &'static str,
    /// Path and query string, with the [`Fixture`]'s ids as `{m1}`, `{m2}`, `{c1}`.
    path: &'static str,
    body: Payload,
    /// The GraphQL fields that do the route's work and read what its options read.
    graphql: &'static str,
    /// Per key of [`WHO`]: `y` allowed, `F` FORBIDDEN (403), `U` UNAUTHENTICATED (401).
    expect: &'static str,
    /// What an allowed key gets: `ok` (2xx, no GraphQL error) or an error code that both APIs
    /// answer after the rule let the key through.
    allowed: &'static str,
    /// (REST pick, GraphQL pointer under `data`) pairs whose values must be the same sets.
    same: &'static [(Pick, &'static str)],
}

const fn row(
    method: &'static str,
    path: &'static str,
    body: Payload,
    graphql: &'static str,
    expect: &'static str,
) -> Row {
    Row {
        method,
        path,
        body,
        graphql,
        expect,
        allowed: "ok",
        same: &[],
    }
}

use Payload::{Json as J, Nothing as N, Upload};
use Pick::{At, Mentions};

/// Session s1's messages, as REST's session context and GraphQL's `Session.messages` list them.
const CONTEXT_MESSAGES: (Pick, &str) = (
    At("/messages/*/content"),
    "/workspace/session/messages/nodes/*/content",
);

/// Session s1's context, as REST and GraphQL's `Session.context` give it.
const SESSION_CONTEXT: (Pick, &str) = (
    At("/messages/*/content"),
    "/workspace/session/context/messages/*/content",
);

/// The workspace's peers.
const PEER_IDS: (Pick, &str) = (At("/items/*/id"), "/workspace/peers/nodes/*/id");

/// Alice's sessions.
const PEER_SESSION_IDS: (Pick, &str) = (At("/items/*/id"), "/workspace/peer/sessions/nodes/*/id");

/// The workspace's sessions.
const SESSION_IDS: (Pick, &str) = (At("/items/*/id"), "/workspace/sessions/nodes/*/id");

/// Session s1's messages, as its message list and GraphQL's `Session.messages` list them.
const SESSION_MESSAGES: (Pick, &str) = (
    At("/items/*/content"),
    "/workspace/session/messages/nodes/*/content",
);

/// What a search in session s1 finds.
const SESSION_HITS: (Pick, &str) = (
    At("/*/content"),
    "/workspace/session/search/results/*/content",
);

/// A peer's representation: the conclusions `Peer.conclusions` reads.
const REPRESENTATION: (Pick, &str) = (
    Mentions("/representation"),
    "/workspace/peer/conclusions/nodes/*/content",
);

/// The session context's representation of another peer: the conclusions `Peer.conclusions` reads.
const PEER_REPRESENTATION: (Pick, &str) = (Mentions("/peer_representation"), REPRESENTATION.1);

/// Reads first, then writes, destructive ones last (each key runs on databases of its own).
#[rustfmt::skip]
const MATRIX: &[Row] = &[
    //                                                                     admin, ws, member, non-member, session, other ws, expired
    // Workspaces.
    Row { same: &[(At("/id"), "/getOrCreateWorkspace/id")],
        ..row("POST", "/v3/workspaces", J(r#"{"id": "ws", "metadata": {"a": 1}, "configuration": {}}"#),
        r#"mutation { getOrCreateWorkspace(id: "ws", metadata: {a: 1}, configuration: {}) { id } }"#,                  "yyyyyFU") },
    Row { same: &[(At("/items/*/id"), "/workspaces/nodes/*/id")],
        ..row("POST", "/v3/workspaces/list?page=1&size=10&reverse=true", J(r#"{"filters": {"id": "ws"}}"#),
        r#"{ workspaces(filters: {id: "ws"}, order: DESC) { nodes { id } } }"#,   "yFFFFFU") },
    Row { same: &[(At("/*/content"), "/workspace/search/results/*/content")],
        ..row("POST", "/v3/workspaces/ws/search", J(r#"{"query": "secret", "filters": {"session_id": "s2"}, "limit": 5}"#),
        r#"{ workspace(id: "ws") { search(query: "secret", filters: {session_id: "s2"}, limit: 5) { ... on MessageHits { results { content } } } } }"#, "yyFFFFU") },
    Row { same: &[(At("/*/content"), "/workspace/search/results/*/content")],
        ..row("POST", "/v3/workspaces/ws/search", J(r#"{"query": "secret", "scope": "sc"}"#),
        r#"{ workspace(id: "ws") { search(query: "secret", scope: "sc") { ... on MessageHits { results { content } } } } }"#, "yyFFFFU") },
    // Scopes (docs/scopes.md): workspace keys manage and read them.
    Row { same: &[(At("/items/*/id"), "/workspace/scopes/*/id")],
        ..row("POST", "/v3/workspaces/ws/scopes/list?page=1&size=10&reverse=true", N,
        r#"{ workspace(id: "ws") { scopes(order: DESC) { id } } }"#,              "yyFFFFU") },
    Row { same: &[(At("/id"), "/workspace/scope/id")],
        ..row("GET", "/v3/workspaces/ws/scopes/sc", N,
        r#"{ workspace(id: "ws") { scope(id: "sc") { id } } }"#,                  "yyFFFFU") },
    Row { same: &[(At("/items/*/id"), "/workspace/scope/sessions/*/id")],
        ..row("POST", "/v3/workspaces/ws/scopes/sc/sessions/list?page=1&size=10&reverse=true", N,
        r#"{ workspace(id: "ws") { scope(id: "sc") { sessions(order: DESC) { id } } } }"#, "yyFFFFU") },
    Row { same: &[(At("/session_count"), "/workspace/scope/status/sessionCount")],
        ..row("GET", "/v3/workspaces/ws/scopes/sc/status", N,
        r#"{ workspace(id: "ws") { scope(id: "sc") { status { sessionCount } } } }"#, "yyFFFFU") },
    // Peers. A filter narrows inside the route's scope; it never reaches past it.
    Row { same: &[PEER_IDS],
        ..row("POST", "/v3/workspaces/ws/peers/list?reverse=true", J(r#"{"filters": {"workspace_id": "other"}}"#),
        r#"{ workspace(id: "ws") { peers(filters: {workspace_id: "other"}) { nodes { id } } } }"#, "yyFFFFU") },
    Row { same: &[PEER_IDS],
        ..row("POST", "/v3/workspaces/ws/peers/list", N,
        r#"{ workspace(id: "ws") { peers { nodes { id } } } }"#,                   "yyFFFFU") },
    Row { same: &[PEER_SESSION_IDS],
        ..row("POST", "/v3/workspaces/ws/peers/alice/sessions?reverse=true", J(r#"{"filters": {"id": "s2"}}"#),
        r#"{ workspace(id: "ws") { peer(id: "alice") { sessions(filters: {id: "s2"}) { nodes { id } } } } }"#, "yyyFFFU") },
    Row { same: &[PEER_SESSION_IDS],
        ..row("POST", "/v3/workspaces/ws/peers/alice/sessions", N,
        r#"{ workspace(id: "ws") { peer(id: "alice") { sessions { nodes { id } } } } }"#, "yyyFFFU") },
    Row { same: &[(At("/*/content"), "/workspace/peer/search/results/*/content")],
        ..row("POST", "/v3/workspaces/ws/peers/alice/search", J(r#"{"query": "secret", "filters": {"session_id": "s2"}, "limit": 5}"#),
        r#"{ workspace(id: "ws") { peer(id: "alice") { search(query: "secret", filters: {session_id: "s2"}, limit: 5) { ... on MessageHits { results { content } } } } } }"#, "yyyFFFU") },
    Row { same: &[(At("/content"), "/workspace/peer/chat")],
        ..row("POST", "/v3/workspaces/ws/peers/alice/chat",
        J(r#"{"query": "What does carol hide?", "target": "carol", "session_id": "s2", "filters": {"session_id": "s2"}}"#),
        r#"{ workspace(id: "ws") { peer(id: "alice") { chat(query: "What does carol hide?", target: "carol", sessionId: "s2") } } }"#, "yyFFFFU") },
    Row { same: &[REPRESENTATION],
        ..row("POST", "/v3/workspaces/ws/peers/alice/representation",
        J(r#"{"target": "carol", "session_id": "s2", "max_conclusions": 10}"#),
        r#"{ workspace(id: "ws") { peer(id: "alice") { conclusions(filters: {observed_id: "carol", session_id: "s2"}) { nodes { content } } } } }"#, "yyFFFFU") },
    Row { same: &[REPRESENTATION],
        ..row("POST", "/v3/workspaces/ws/peers/alice/representation", N,
        r#"{ workspace(id: "ws") { peer(id: "alice") { conclusions(filters: {observed_id: "alice"}) { nodes { content } } } } }"#, "yyFFFFU") },
    // A card lives in its observer's row: `target` picks one of the path peer's own cards.
    row("GET", "/v3/workspaces/ws/peers/alice/card?target=carol", N,
        r#"{ workspace(id: "ws") { peer(id: "alice") { id } } }"#,                 "yyyFFFU"),
    Row { same: &[REPRESENTATION],
        ..row("GET", "/v3/workspaces/ws/peers/alice/context?target=carol&max_conclusions=10", N,
        r#"{ workspace(id: "ws") { peer(id: "alice") { id conclusions(filters: {observed_id: "carol"}) { nodes { content } } } } }"#, "yyFFFFU") },
    // Sessions.
    Row { same: &[SESSION_IDS],
        ..row("POST", "/v3/workspaces/ws/sessions/list?reverse=true", J(r#"{"filters": {"workspace_id": "other"}}"#),
        r#"{ workspace(id: "ws") { sessions(filters: {workspace_id: "other"}) { nodes { id } } } }"#, "yyFFFFU") },
    Row { same: &[SESSION_IDS],
        ..row("POST", "/v3/workspaces/ws/sessions/list", N,
        r#"{ workspace(id: "ws") { sessions { nodes { id } } } }"#,                "yyFFFFU") },
    Row { same: &[(At("/items/*/id"), "/workspace/session/peers/*/peer/id")],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/peers?page=1&size=10&reverse=true", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { peers { peer { id } } } } }"#, "yyyFyFU") },
    row("GET", "/v3/workspaces/ws/sessions/s1/peers/alice/config", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { peers { peerId observeMe } } } }"#, "yyyFyFU"),
    Row { same: &[SESSION_HITS],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/search", J(r#"{"query": "secret", "filters": {"session_id": "s2"}, "limit": 5}"#),
        r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "secret", filters: {session_id: "s2"}, limit: 5) { ... on MessageHits { results { content } } } } } }"#, "yyyFyFU") },
    Row { same: &[SESSION_HITS],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/search", J(r#"{"query": "in s1"}"#),
        r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "in s1") { ... on MessageHits { results { content } } } } } }"#, "yyyFyFU") },
    Row { same: &[CONTEXT_MESSAGES],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/context", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content } } } } }"#, "yyyFyFU") },
    // Another peer's representation and card: carol's conclusions, read as carol's
    // `Peer.conclusions` would be.
    Row { same: &[CONTEXT_MESSAGES, PEER_REPRESENTATION],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/context?tokens=100000&peer_target=carol&max_conclusions=10", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content } } } peer(id: "carol") { id conclusions(filters: {observed_id: "carol"}) { nodes { content } } } } }"#, "yyFFFFU") },
    Row { same: &[CONTEXT_MESSAGES, PEER_REPRESENTATION],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/context?peer_target=carol&peer_perspective=alice", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content } } } peer(id: "alice") { id conclusions(filters: {observed_id: "carol"}) { nodes { content } } } } }"#, "yyFFFFU") },
    // Bob's view of carol, asked with a key of s1 or a member's: the session context once gave
    // it to those keys, which GraphQL's `Peer.conclusions` refuses.
    Row { same: &[CONTEXT_MESSAGES, PEER_REPRESENTATION],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/context?peer_target=carol&peer_perspective=bob", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content } } } peer(id: "bob") { id conclusions(filters: {observed_id: "carol"}) { nodes { content } } } } }"#, "yyFFFFU") },
    Row { same: &[SESSION_CONTEXT],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/context?tokens=1000&summary=false", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { context(tokens: 1000, summary: false) { messages { content } } } } }"#, "yyyFyFU") },
    row("GET", "/v3/workspaces/ws/sessions/s1/summaries", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { summaries { short { content } } } } }"#, "yyyFyFU"),
    // Messages.
    Row { same: &[SESSION_MESSAGES],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/messages/list?reverse=true", J(r#"{"filters": {"session_id": "s2"}}"#),
        r#"{ workspace(id: "ws") { session(id: "s1") { messages(filters: {session_id: "s2"}, order: DESC) { nodes { content } } } } }"#, "yyyFyFU") },
    Row { same: &[SESSION_MESSAGES],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/messages/list", N,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content } } } } }"#, "yyyFyFU") },
    Row { same: &[(At("/content"), "/workspace/message/content")],
        ..row("GET", "/v3/workspaces/ws/sessions/s1/messages/{m1}", N,
        r#"{ workspace(id: "ws") { message(id: "{m1}") { content } } }"#,          "yyyFyFU") },
    // Conclusions and the queue.
    Row { same: &[(At("/items/*/content"), "/workspace/conclusions/nodes/*/content")],
        ..row("POST", "/v3/workspaces/ws/conclusions/list?reverse=true", J(r#"{"filters": {"observer_id": "carol"}}"#),
        r#"{ workspace(id: "ws") { conclusions(filters: {observer_id: "carol"}, order: ASC) { nodes { content } } } }"#, "yyFFFFU") },
    Row { same: &[(At("/*/content"), "/workspace/queryConclusions/*/content")],
        ..row("POST", "/v3/workspaces/ws/conclusions/query",
        J(r#"{"query": "diary", "top_k": 5, "distance": 1.0, "filters": {"observer_id": "alice"}}"#),
        r#"{ workspace(id: "ws") { queryConclusions(query: "diary", topK: 5, maxDistance: 1.0, filters: {observer_id: "alice"}) { content } } }"#, "yyFFFFU") },
    row("GET", "/v3/workspaces/ws/queue/status", N,
        r#"{ workspace(id: "ws") { deriverStatus { pending } } }"#,               "yyFFFFU"),
    // Writes.
    row("PUT", "/v3/workspaces/ws", J(r#"{"metadata": {"a": 1}, "configuration": {"b": 2}}"#),
        r#"mutation { updateWorkspace(id: "ws", metadata: {a: 1}, configuration: {b: 2}) { id } }"#, "yyFFFFU"),
    row("POST", "/v3/workspaces/ws/peers", J(r#"{"id": "alice"}"#),
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "alice") { id } }"#,  "yyyFFFU"),
    row("POST", "/v3/workspaces/ws/peers", J(r#"{"id": "newbie", "metadata": {"a": 1}, "configuration": {}}"#),
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "newbie", metadata: {a: 1}, configuration: {}) { id } }"#, "yyFFyFU"),
    row("PUT", "/v3/workspaces/ws/peers/alice", J(r#"{"metadata": {"a": 1}, "configuration": {}}"#),
        r#"mutation { updatePeer(workspaceId: "ws", id: "alice", metadata: {a: 1}, configuration: {}) { id } }"#, "yyyFFFU"),
    row("PUT", "/v3/workspaces/ws/peers/alice/card?target=carol", J(r#"{"peer_card": ["alice's new card of carol"]}"#),
        r#"mutation { updatePeer(workspaceId: "ws", id: "alice") { id } }"#,       "yyyFFFU"),
    row("POST", "/v3/workspaces/ws/sessions", J(r#"{"id": "s1"}"#),
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1") { id } }"#,  "yyyFyFU"),
    row("POST", "/v3/workspaces/ws/sessions", J(r#"{"id": "s1", "metadata": {"a": 1}, "configuration": {}, "peers": {"erin": {}}}"#),
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", metadata: {a: 1}, configuration: {}, peers: [{peerId: "erin"}]) { id } }"#, "yyFFyFU"),
    row("POST", "/v3/workspaces/ws/sessions", J(r#"{"id": "fresh"}"#),
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "fresh") { id } }"#, "yyyyFFU"),
    row("PUT", "/v3/workspaces/ws/sessions/s1", J(r#"{"metadata": {"a": 1}, "configuration": {}}"#),
        r#"mutation { updateSession(workspaceId: "ws", id: "s1", metadata: {a: 1}, configuration: {}) { id } }"#, "yyFFyFU"),
    row("POST", "/v3/workspaces/ws/sessions/s1/peers", J(r#"{"erin": {}}"#),
        r#"mutation { addPeersToSession(workspaceId: "ws", sessionId: "s1", peers: [{peerId: "erin"}]) { id } }"#, "yyFFyFU"),
    row("PUT", "/v3/workspaces/ws/sessions/s1/peers", J(r#"{"alice": {}, "bob": {}, "erin": {}}"#),
        r#"mutation { addPeersToSession(workspaceId: "ws", sessionId: "s1", peers: [{peerId: "alice"}, {peerId: "bob"}, {peerId: "erin"}]) { id } }"#, "yyFFyFU"),
    row("DELETE", "/v3/workspaces/ws/sessions/s1/peers", J(r#"["erin"]"#),
        r#"mutation { removePeersFromSession(workspaceId: "ws", sessionId: "s1", peerIds: ["erin"]) { id } }"#, "yyFFyFU"),
    row("PUT", "/v3/workspaces/ws/sessions/s1/peers/alice/config", J(r#"{"observe_me": false, "observe_others": true}"#),
        r#"mutation { setSessionPeerConfig(workspaceId: "ws", sessionId: "s1", peerId: "alice", observeMe: false, observeOthers: true) { peerId } }"#, "yyFFyFU"),
    Row { same: &[(At("/*/content"), "/createMessages/*/content")],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/messages", J(r#"{"messages": [{"peer_id": "alice", "content": "more from alice"}]}"#),
        r#"mutation { createMessages(workspaceId: "ws", sessionId: "s1", messages: [{peerId: "alice", content: "more from alice"}]) { content } }"#, "yyFFyFU") },
    Row { same: &[(At("/*/content"), "/createMessages/*/content")],
        ..row("POST", "/v3/workspaces/ws/sessions/s1/messages/upload", Upload,
        r#"mutation { createMessages(workspaceId: "ws", sessionId: "s1", messages: [{peerId: "alice", content: "an uploaded note"}]) { content } }"#, "yyFFyFU") },
    row("PUT", "/v3/workspaces/ws/sessions/s1/messages/{m1}", J(r#"{"metadata": {"a": 1}}"#),
        r#"mutation { updateMessage(workspaceId: "ws", id: "{m1}", metadata: {a: 1}) { id } }"#, "yyFFyFU"),
    // A message of another session is not found from this one.
    Row { allowed: "NOT_FOUND",
        ..row("POST", "/v3/workspaces/ws/sessions/s1/clone?message_id={m2}", N,
        r#"mutation { cloneSession(workspaceId: "ws", id: "s1", upToMessageId: "{m2}") { id } }"#, "yyFFyFU") },
    row("POST", "/v3/workspaces/ws/sessions/s1/clone?message_id={m1}", N,
        r#"mutation { cloneSession(workspaceId: "ws", id: "s1", upToMessageId: "{m1}") { id } }"#, "yyFFyFU"),
    Row { same: &[(At("/*/content"), "/createConclusions/*/content")],
        ..row("POST", "/v3/workspaces/ws/conclusions",
        J(r#"{"conclusions": [{"content": "bob is calm", "observer_id": "alice", "observed_id": "bob", "session_id": "s1"}]}"#),
        r#"mutation { createConclusions(workspaceId: "ws", conclusions: [{content: "bob is calm", observerId: "alice", observedId: "bob", sessionId: "s1"}]) { content } }"#, "yyFFFFU") },
    row("POST", "/v3/keys?workspace_id=ws&peer_id=alice&expires_at=2030-01-01T00:00:00Z", N,
        r#"mutation { createKey(workspaceId: "ws", peerId: "alice", expiresAt: "2030-01-01T00:00:00Z") }"#, "yFFFFFU"),
    row("POST", "/v3/keys?workspace_id=ws&session_id=s1", N,
        r#"mutation { createKey(workspaceId: "ws", sessionId: "s1") }"#,           "yFFFFFU"),
    row("DELETE", "/v3/workspaces/ws/conclusions/{c1}", N,
        r#"mutation { deleteConclusion(workspaceId: "ws", id: "{c1}") }"#,         "yyFFFFU"),
    row("DELETE", "/v3/workspaces/ws/sessions/s1", N,
        r#"mutation { deleteSession(workspaceId: "ws", id: "s1") }"#,              "yyFFyFU"),
    Row { same: &[(At("/id"), "/getOrCreateScope/id")],
        ..row("POST", "/v3/workspaces/ws/scopes", J(r#"{"id": "sc2", "metadata": {"a": 1}}"#),
        r#"mutation { getOrCreateScope(workspaceId: "ws", id: "sc2", metadata: {a: 1}) { id } }"#, "yyFFFFU") },
    row("POST", "/v3/workspaces/ws/scopes/sc/sessions", J(r#"{"session_ids": ["s2"]}"#),
        r#"mutation { addSessionsToScope(workspaceId: "ws", scopeId: "sc", sessionIds: ["s2"]) { id } }"#, "yyFFFFU"),
    // s1 is deleted above: the session just added is removed.
    row("DELETE", "/v3/workspaces/ws/scopes/sc/sessions/s2", N,
        r#"mutation { removeSessionFromScope(workspaceId: "ws", scopeId: "sc", sessionId: "s2") { id } }"#, "yyFFFFU"),
    // Webhooks: admin and workspace keys only. A public URL: no private targets here.
    Row { same: &[(At("/items/*/url"), "/workspace/webhooks/*/url")],
        ..row("GET", "/v3/workspaces/ws/webhooks?page=1&size=10&reverse=true", N,
        r#"{ workspace(id: "ws") { webhooks { url } } }"#,                        "yyFFFFU") },
    Row { same: &[(At("/url"), "/createWebhook/url")],
        ..row("POST", "/v3/workspaces/ws/webhooks", J(r#"{"url": "https://hooks.example.com/x"}"#),
        r#"mutation { createWebhook(workspaceId: "ws", url: "https://hooks.example.com/x") { url } }"#, "yyFFFFU") },
    row("GET", "/v3/workspaces/ws/webhooks/test", N,
        r#"mutation { testWebhook(workspaceId: "ws") }"#,                          "yyFFFFU"),
    Row { allowed: "NOT_FOUND",
        ..row("DELETE", "/v3/workspaces/ws/webhooks/nope", N,
        r#"mutation { deleteWebhook(workspaceId: "ws", id: "nope") }"#,            "yyFFFFU") },
    // Dreams: workspace keys only. This app has no deriver, so an allowed key is told dreams
    // are off, after the rule let it through.
    Row { allowed: "BAD_USER_INPUT",
        ..row("POST", "/v3/workspaces/ws/schedule_dream",
        J(r#"{"observer": "alice", "observed": "carol", "dream_type": "omni", "session_id": "s2", "rebuild": false}"#),
        r#"mutation { scheduleDream(workspaceId: "ws", observerId: "alice", observedId: "carol") }"#, "yyFFFFU") },
    // s2 and the others are still active: CONFLICT, after the rule let the key through.
    Row { allowed: "CONFLICT",
        ..row("DELETE", "/v3/workspaces/ws", N,
        r#"mutation { deleteWorkspace(id: "ws") }"#,                               "yyFFFFU") },
];

/// Routes the matrix leaves out, and why.
const EXEMPT: &[(&str, &str, &str)] = &[
    // `/v3/openapi.json` and `/docs` (documentation, no key) are not in the document.
];

/// Options no row needs to set: they choose how much, or in which order, of what the route's
/// rule already allows, or what is written; none names another resource to read.
const NOT_WIDENING: &[(&str, &str)] = &[
    ("page", "paging"),
    ("size", "paging"),
    (
        "max_conclusions",
        "how many of the conclusions the rule allows (the card routes ignore it)",
    ),
    ("stream", "how the answer is sent"),
    (
        "search_query",
        "which of the conclusions the rule allows the representation shows first",
    ),
    ("search_top_k", "how many of them the search picks"),
    ("search_max_distance", "how near a search hit must be"),
    (
        "include_most_frequent",
        "whether the most derived of them get a share",
    ),
    ("reasoning_level", "the answer's token budget"),
    ("response_format", "the answer's shape"),
    (
        "scope",
        "narrows recall to a scope's sessions, never past the route's rule (tests/it/scopes.rs)",
    ),
    ("scope_id", "limits the key minted (an admin's call)"),
];

// ---------------------------------------------------------------------------------------------
// Running it.

/// An app with auth on, the embedder (`queryConclusions` needs one) and chats answered by `llm`.
async fn app(llm: &LlmArgs) -> TestApp {
    with_dialectic(TestApp::with_embedder().await, llm)
}

const BOUNDARY: &str = "rest-parity-boundary";

fn request(row: &Row, fx: &Fixture, key: &str) -> Request<Body> {
    let req = Request::builder()
        .method(row.method)
        .uri(fx.fill(row.path))
        .header("authorization", key);
    match row.body {
        Payload::Nothing => req.body(Body::empty()),
        Payload::Json(body) => req
            .header("content-type", "application/json")
            .body(Body::from(body)),
        Payload::Upload => {
            let part = |head: &str, value: &str| {
                format!("--{BOUNDARY}\r\nContent-Disposition: form-data; {head}\r\n\r\n{value}\r\n")
            };
            let form = part("name=\"peer_id\"", "alice")
                + &part(
                    "name=\"file\"; filename=\"note.txt\"\r\nContent-Type: text/plain",
                    "an uploaded note",
                )
                + &format!("--{BOUNDARY}--\r\n");
            req.header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(Body::from(form))
        }
    }
    .unwrap()
}

/// The status and JSON body (Null when empty or not JSON) of one REST call.
async fn call(router: &axum::Router, req: Request<Body>) -> (u16, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A REST status as the GraphQL code it stands for (`ok` for success).
fn rest_outcome(status: u16) -> String {
    let code = match status {
        200..=299 => "ok",
        401 => "UNAUTHENTICATED",
        403 => "FORBIDDEN",
        404 => "NOT_FOUND",
        409 => "CONFLICT",
        413 => "PAYLOAD_TOO_LARGE",
        422 => "BAD_USER_INPUT",
        503 => "SERVICE_UNAVAILABLE",
        other => return format!("HTTP {other}"),
    };
    code.to_owned()
}

/// `ok`, or the code of the error that decides: a refusal before anything else (REST checks every
/// rule before it reads), then the first error.
fn graphql_outcome(resp: &Value) -> String {
    let codes: Vec<&str> = resp["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["extensions"]["code"].as_str().unwrap_or("(no code)"))
        .collect();
    ["UNAUTHENTICATED", "FORBIDDEN"]
        .into_iter()
        .find(|c| codes.contains(c))
        .or(codes.first().copied())
        .unwrap_or("ok")
        .to_owned()
}

/// The values at `pointer`, `*` stepping into every element of an array; sorted.
fn at(value: &Value, pointer: &str) -> Vec<String> {
    let mut found = vec![value];
    for step in pointer.split('/').filter(|s| !s.is_empty()) {
        found = found
            .into_iter()
            .flat_map(|v| match (step, v) {
                ("*", Value::Array(items)) => items.iter().collect::<Vec<_>>(),
                ("*", _) => vec![],
                (key, v) => v.get(key).into_iter().collect(),
            })
            .collect();
    }
    let mut out: Vec<String> = found
        .into_iter()
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .collect();
    out.sort();
    out
}

fn pick(value: &Value, pick: Pick) -> Vec<String> {
    match pick {
        Pick::At(pointer) => at(value, pointer),
        Pick::Mentions(pointer) => {
            let text = at(value, pointer).join("\n");
            let mut out: Vec<String> = CONCLUSIONS
                .iter()
                .filter(|c| text.contains(c.0))
                .map(|c| c.0.to_owned())
                .collect();
            out.sort();
            out
        }
    }
}

/// Runs the whole matrix as one key, REST and GraphQL each on a database of its own seeded
/// alike; returns the mismatches.
async fn run_for(who: usize, llm: &LlmArgs) -> Vec<String> {
    let (rest, gql) = futures::join!(app(llm), app(llm));
    let (rest_fx, gql_fx) = (seed(&rest).await, seed(&gql).await);
    let router =
        honcho_graphql::rest::router(honcho_graphql::http::rest_state(&rest.schema, &rest.store));
    let key = key_of(who);
    let mut wrong = Vec::new();
    for row in MATRIX {
        let what = format!("{} {} as {}", row.method, row.path, WHO[who]);
        let (status, body) = call(&router, request(row, &rest_fx, &key)).await;
        let resp = gql
            .exec_as(Some(&key), &gql_fx.fill(row.graphql), json!({}))
            .await;
        let (got, graphql) = (rest_outcome(status), graphql_outcome(&resp));
        let want = match row.expect.as_bytes()[who] {
            b'U' => "UNAUTHENTICATED",
            b'F' => "FORBIDDEN",
            _ => row.allowed,
        };
        if got != want || graphql != want {
            wrong.push(format!(
                "{what}: want {want}; REST {status} {body}; GraphQL {resp}"
            ));
            continue;
        }
        if got != "ok" {
            continue;
        }
        for (rest_pick, pointer) in row.same {
            let (a, b) = (pick(&body, *rest_pick), at(&resp["data"], pointer));
            if a != b {
                wrong.push(format!("{what}: REST has {a:?}, GraphQL {b:?}"));
            }
        }
    }
    wrong
}

#[tokio::test]
async fn rest_answers_every_key_what_graphql_answers_it() {
    let llm = FakeLlm::start(|_, _| Reply::Content("the model's answer".into())).await;
    let cfg = llm.config();
    let results = join_all((0..WHO.len()).map(|who| run_for(who, &cfg))).await;
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Completeness: the matrix against the router's own OpenAPI document.

/// (method, path template) of every operation, with its options: query parameters and the
/// top-level fields of its JSON body.
fn routes() -> BTreeMap<(String, String), BTreeSet<String>> {
    let doc = serde_json::to_value(honcho_graphql::rest::openapi()).unwrap();
    let resolve = |schema: &Value| -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let mut todo = vec![schema.clone()];
        while let Some(s) = todo.pop() {
            if let Some(r) = s["$ref"].as_str() {
                let name = r.rsplit('/').next().unwrap();
                todo.push(doc["components"]["schemas"][name].clone());
            }
            for combinator in ["oneOf", "anyOf", "allOf"] {
                todo.extend(s[combinator].as_array().into_iter().flatten().cloned());
            }
            names.extend(
                s["properties"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone()),
            );
        }
        names
    };
    let mut out = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let mut options: BTreeSet<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            options.extend(resolve(
                &op["requestBody"]["content"]["application/json"]["schema"],
            ));
            out.insert((method.clone(), path.clone()), options);
        }
    }
    out
}

/// The route a row calls: the template its path fits with the most literal segments.
fn route_of<'a>(
    routes: &'a BTreeMap<(String, String), BTreeSet<String>>,
    row: &Row,
) -> Option<&'a (String, String)> {
    let path = row.path.split('?').next().unwrap();
    let segments: Vec<&str> = path.split('/').collect();
    routes
        .keys()
        .filter(|(method, template)| {
            let t: Vec<&str> = template.split('/').collect();
            method.eq_ignore_ascii_case(row.method)
                && t.len() == segments.len()
                && t.iter()
                    .zip(&segments)
                    .all(|(t, s)| t.starts_with('{') || t == s)
        })
        .max_by_key(|(_, template)| template.split('/').filter(|t| !t.starts_with('{')).count())
}

/// The options a row sets: its query parameters and its JSON body's top-level fields.
fn options_of(row: &Row) -> BTreeSet<String> {
    let query = row.path.split_once('?').map_or("", |(_, q)| q);
    let mut out: BTreeSet<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split('=').next().unwrap().to_owned())
        .collect();
    if let Payload::Json(body) = row.body
        && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(body)
    {
        out.extend(fields.keys().cloned());
    }
    out
}

#[test]
fn the_matrix_has_a_row_for_every_route_and_option() {
    let routes = routes();
    let mut wrong = Vec::new();
    let mut exercised: BTreeMap<&(String, String), BTreeSet<String>> = BTreeMap::new();
    for row in MATRIX {
        assert_eq!(row.expect.len(), WHO.len(), "{} {}", row.method, row.path);
        match route_of(&routes, row) {
            Some(route) => exercised.entry(route).or_default().extend(options_of(row)),
            None => wrong.push(format!("{} {}: no such route", row.method, row.path)),
        }
    }
    let exempt: BTreeSet<(String, String)> = EXEMPT
        .iter()
        .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    for route in &exempt {
        if !routes.contains_key(route) {
            wrong.push(format!("{route:?} is exempt but no longer served"));
        }
    }
    let not_widening: BTreeSet<&str> = NOT_WIDENING.iter().map(|(o, _)| *o).collect();
    for option in &not_widening {
        if !routes.values().any(|o| o.contains(*option)) {
            wrong.push(format!(
                "{option:?} is listed as not widening but no route takes it"
            ));
        }
    }
    for (route, options) in &routes {
        if exempt.contains(route) {
            continue;
        }
        let Some(used) = exercised.get(route) else {
            wrong.push(format!("{route:?} has no row in MATRIX"));
            continue;
        };
        for option in options {
            if !used.contains(option) && !not_widening.contains(option.as_str()) {
                wrong.push(format!("{route:?}: no row sets the option {option:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
