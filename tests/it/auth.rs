//! Scoped auth: every field that needs a rule has one (read from the schema), a matrix of keys ×
//! every query and mutation field, bad keys, nested leaks, createKey, the CLI, and HTTP.

use std::collections::{BTreeMap, BTreeSet};

use async_graphql::parser::parse_schema;
use async_graphql::parser::types::{BaseType, Type, TypeKind, TypeSystemDefinition};
use chrono::{Duration, Utc};
use futures::future::join_all;
use honcho_graphql::access::{RULES, Rule};
use honcho_graphql::auth::{Auth, KeySpec};
use honcho_graphql::graphql::guard::is_relay_container;
use honcho_graphql::graphql::{self, Limits};
use serde_json::{Value, json};

use crate::harness::{SECRET, Served, TestApp, bearer};

// ---------------------------------------------------------------------------------------------
// (1) Completeness: the schema's fields against the rule table.

type FieldSet = BTreeSet<(String, String)>;

/// (type, field) of every field that needs a rule, read from the SDL (the module docs of
/// `graphql::guard` say which), and of the root fields of Query and Mutation.
fn schema_fields() -> (FieldSet, FieldSet) {
    let doc = parse_schema(graphql::sdl()).expect("the SDL parses");
    let mut roots = Vec::new();
    let mut kinds: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut objects = Vec::new();
    for def in &doc.definitions {
        match def {
            TypeSystemDefinition::Schema(s) => {
                let s = &s.node;
                for (root, name) in [
                    ("query", &s.query),
                    ("mutation", &s.mutation),
                    ("subscription", &s.subscription),
                ] {
                    if let Some(n) = name {
                        roots.push((root, n.node.to_string()));
                    }
                }
            }
            TypeSystemDefinition::Type(t) => {
                let t = &t.node;
                let kind = match &t.kind {
                    TypeKind::Object(o) => {
                        objects.push((t.name.node.to_string(), o.fields.clone()));
                        "composite"
                    }
                    TypeKind::Interface(i) => {
                        objects.push((t.name.node.to_string(), i.fields.clone()));
                        "composite"
                    }
                    TypeKind::Union(_) => "composite",
                    _ => "leaf",
                };
                kinds.insert(t.name.node.to_string(), kind);
            }
            TypeSystemDefinition::Directive(_) => {}
        }
    }
    fn base(t: &Type) -> String {
        match &t.base {
            BaseType::Named(n) => n.to_string(),
            BaseType::List(inner) => base(inner),
        }
    }
    let mut needing = BTreeSet::new();
    let mut operations = BTreeSet::new();
    for (ty, fields) in &objects {
        let names: Vec<String> = fields
            .iter()
            .map(|f| f.node.name.node.to_string())
            .collect();
        if is_relay_container(names.iter().map(String::as_str)) {
            assert!(
                ty.ends_with("Connection") || ty.ends_with("Edge"),
                "{ty} looks like a Relay container but is not named like one"
            );
            continue;
        }
        let root = roots.iter().find(|(_, name)| name == ty).map(|(r, _)| *r);
        for f in fields {
            let f = &f.node;
            let name = f.name.node.to_string();
            let composite = kinds.get(&base(&f.ty.node)) == Some(&"composite");
            if root.is_some() || !f.arguments.is_empty() || composite {
                needing.insert((ty.clone(), name.clone()));
            }
            if matches!(root, Some("query" | "mutation")) {
                operations.insert((ty.clone(), name));
            }
        }
    }
    (needing, operations)
}

fn table() -> BTreeMap<(String, String), Rule> {
    let mut out = BTreeMap::new();
    for f in RULES {
        let dup = out.insert((f.ty.to_owned(), f.name.to_owned()), f.rule);
        assert!(dup.is_none(), "{}.{} has two rows in RULES", f.ty, f.name);
    }
    out
}

#[test]
fn every_field_that_needs_a_rule_has_one() {
    let (needing, _) = schema_fields();
    let table = table();
    let missing: Vec<String> = needing
        .iter()
        .filter(|k| !table.contains_key(*k))
        .map(|(t, f)| format!("{t}.{f}"))
        .collect();
    assert!(
        missing.is_empty(),
        "fields without an authorization rule (add a row to access::RULES and call \
         guard::require in the resolver): {missing:?}"
    );
    let stale: Vec<String> = table
        .keys()
        .filter(|k| !needing.contains(*k))
        .map(|(t, f)| format!("{t}.{f}"))
        .collect();
    assert!(
        stale.is_empty(),
        "RULES rows for fields the schema does not have (or that need none): {stale:?}"
    );
    // Sanity of the reading itself.
    assert!(needing.contains(&("QueryRoot".into(), "workspace".into())));
    assert!(needing.contains(&("Message".into(), "context".into())));
    assert!(!needing.contains(&("Message".into(), "content".into())));
    assert!(!needing.contains(&("MessageConnection".into(), "nodes".into())));
}

// ---------------------------------------------------------------------------------------------
// The fixture: workspace "ws" with session s1 (alice, bob, dave; alice wrote m1) and s2 (carol
// wrote m2); workspace "other" with session x (zed wrote mx).

struct Fixture {
    m1: String,
    m2: String,
    mx: String,
    /// alice's conclusion about bob.
    c1: String,
}

fn admin() -> String {
    bearer(KeySpec {
        admin: true,
        ..Default::default()
    })
}

fn ws_key(w: &str) -> String {
    bearer(KeySpec {
        workspace: Some(w.into()),
        ..Default::default()
    })
}

fn peer_key(p: &str) -> String {
    bearer(KeySpec {
        workspace: Some("ws".into()),
        peer: Some(p.into()),
        ..Default::default()
    })
}

fn session_key(s: &str) -> String {
    bearer(KeySpec {
        workspace: Some("ws".into()),
        session: Some(s.into()),
        ..Default::default()
    })
}

async fn ok_as(app: &TestApp, key: &str, query: &str) -> Value {
    let resp = app.exec_as(Some(key), query, json!({})).await;
    assert!(resp.get("errors").is_none(), "{query}: {resp}");
    resp["data"].clone()
}

async fn seed(app: &TestApp) -> Fixture {
    let admin = admin();
    let write = |w: &str, s: &str, p: &str, c: &str| {
        format!(
            "mutation {{ createMessages(workspaceId: \"{w}\", sessionId: \"{s}\", messages: \
             [{{peerId: \"{p}\", content: \"{c}\"}}]) {{ id }} }}"
        )
    };
    let id = |d: Value| d["createMessages"][0]["id"].as_str().unwrap().to_owned();
    let m1 = id(ok_as(app, &admin, &write("ws", "s1", "alice", "alice in s1")).await);
    ok_as(app, &admin, &write("ws", "s1", "bob", "bob in s1")).await;
    ok_as(
        app,
        &admin,
        r#"mutation { addPeersToSession(workspaceId: "ws", sessionId: "s1", peers: [{peerId: "dave"}]) { id } }"#,
    )
    .await;
    let m2 = id(ok_as(app, &admin, &write("ws", "s2", "carol", "carol's secret")).await);
    let mx = id(ok_as(app, &admin, &write("other", "x", "zed", "zed far away")).await);
    let d = ok_as(
        app,
        &admin,
        r#"mutation { createConclusions(workspaceId: "ws", conclusions: [{content: "bob likes tea", observerId: "alice", observedId: "bob", sessionId: "s1"}]) { id } }"#,
    )
    .await;
    let c1 = d["createConclusions"][0]["id"].as_str().unwrap().to_owned();
    Fixture { m1, m2, mx, c1 }
}

// ---------------------------------------------------------------------------------------------
// (2) The matrix.

/// Keys of the matrix, in the order of the expectation strings.
const WHO: [&str; 7] = [
    "admin",
    "workspace",
    "own peer (alice)",
    "member peer (bob)",
    "non-member peer (carol)",
    "session (s1)",
    "foreign workspace",
];

fn key_of(who: usize) -> String {
    match who {
        0 => admin(),
        1 => ws_key("ws"),
        2 => peer_key("alice"),
        3 => peer_key("bob"),
        4 => peer_key("carol"),
        5 => session_key("s1"),
        6 => ws_key("other"),
        _ => unreachable!(),
    }
}

/// One operation per field: the field it exercises, the document (`{m1}` is alice's message in
/// s1), and per key of [`WHO`] `y` (allowed: no error but `tolerate`d ones) or `F` (FORBIDDEN).
struct Row {
    field: &'static str,
    doc: &'static str,
    expect: &'static str,
    tolerate: &'static [&'static str],
}

const fn row(field: &'static str, doc: &'static str, expect: &'static str) -> Row {
    Row {
        field,
        doc,
        expect,
        tolerate: &[],
    }
}

/// In execution order: reads first, destructive mutations last. Target: workspace ws, peer
/// alice, session s1, message m1.
#[rustfmt::skip]
const MATRIX: &[Row] = &[
    //                                                                                                 admin, ws, own, member, non-member, session, foreign
    row("QueryRoot.workspace",   r#"{ workspace(id: "ws") { id } }"#,                                   "yyyyyyF"),
    row("QueryRoot.workspaces",  r#"{ workspaces { totalCount } }"#,                                    "yFFFFFF"),
    row("Workspace.peer",        r#"{ workspace(id: "ws") { peer(id: "alice") { id } } }"#,             "yyyFFFF"),
    row("Workspace.session",     r#"{ workspace(id: "ws") { session(id: "s1") { id } } }"#,             "yyyyFyF"),
    row("Workspace.message",     r#"{ workspace(id: "ws") { message(id: "{m1}") { id } } }"#,           "yyyyFyF"),
    row("Workspace.peers",       r#"{ workspace(id: "ws") { peers { totalCount } } }"#,                 "yyFFFFF"),
    row("Workspace.sessions",    r#"{ workspace(id: "ws") { sessions { totalCount } } }"#,              "yyFFFFF"),
    row("Workspace.messages",    r#"{ workspace(id: "ws") { messages { totalCount } } }"#,              "yyFFFFF"),
    // alice reached through her message: the message is readable to members, her lists are not.
    row("Peer.sessions",         r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { sessions { totalCount } } } } }"#, "yyyFFFF"),
    row("Peer.messages",         r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { messages { totalCount } } } } }"#, "yyyFFFF"),
    row("Session.peers",         r#"{ workspace(id: "ws") { session(id: "s1") { peers { peerId } } } }"#,                   "yyyyFyF"),
    row("Session.messages",      r#"{ workspace(id: "ws") { session(id: "s1") { messages { totalCount } } } }"#,            "yyyyFyF"),
    row("Session.summaries",     r#"{ workspace(id: "ws") { session(id: "s1") { summaries { short { content } } } } }"#,    "yyyyFyF"),
    row("Session.context",       r#"{ workspace(id: "ws") { session(id: "s1") { context(tokens: 100) { messages { id } } } } }"#, "yyyyFyF"),
    row("Peer.card",             r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { card { content } } } } }"#,        "yyyFFFF"),
    row("SessionPeer.peer",      r#"{ workspace(id: "ws") { session(id: "s1") { peers { peer { id } } } } }"#,              "yyyyFyF"),
    row("Message.peer",          r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { id } } } }"#,                      "yyyyFyF"),
    row("Message.session",       r#"{ workspace(id: "ws") { message(id: "{m1}") { session { id } } } }"#,                   "yyyyFyF"),
    row("Message.context",       r#"{ workspace(id: "ws") { message(id: "{m1}") { context { id } } } }"#,                   "yyyyFyF"),
    row("Workspace.search",      r#"{ workspace(id: "ws") { search(query: "alice") { __typename } } }"#,                    "yyFFFFF"),
    row("Peer.search",           r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { search(query: "alice") { __typename } } } } }"#, "yyyFFFF"),
    row("Session.search",        r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "alice") { __typename } } } }"#, "yyyyFyF"),
    row("MessageSnippet.context", r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "alice", includeContext: true) { ... on SnippetHits { snippets { context { id } } } } } } }"#, "yyyyFyF"),
    // Conclusions are workspace-key data (Honcho v3.0.12: peer and session keys are refused), also
    // a peer's own.
    row("Workspace.conclusion",  r#"{ workspace(id: "ws") { conclusion(id: "{c1}") { id sources { id } observer { id } } } }"#, "yyFFFFF"),
    row("Workspace.conclusions", r#"{ workspace(id: "ws") { conclusions { totalCount } } }"#,                           "yyFFFFF"),
    row("Workspace.queryConclusions", r#"{ workspace(id: "ws") { queryConclusions(query: "tea") { id } } }"#,           "yyFFFFF"),
    row("Peer.conclusions",      r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { conclusions { totalCount } } } } }"#, "yyFFFFF"),
    row("Peer.representation",   r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { representation(searchQuery: "tea") } } } }"#, "yyFFFFF"),
    // The dialectic reads conclusions too (no LLM here: the keys allowed hear so).
    Row { tolerate: &["SERVICE_UNAVAILABLE"], ..row("Peer.chat", r#"{ workspace(id: "ws") { message(id: "{m1}") { peer { chat(query: "tea?") } } } }"#, "yyFFFFF") },
    row("Workspace.deriverStatus", r#"{ workspace(id: "ws") { deriverStatus { pending lastError { message } } } }"#,   "yyFFFFF"),
    // Webhooks: admin and workspace keys only (Honcho v3.0.12). A public URL: the store here refuses private ones.
    row("Workspace.webhooks",    r#"{ workspace(id: "ws") { webhooks { url } } }"#,                     "yyFFFFF"),
    row("Workspace.webhookDeliveries", r#"{ workspace(id: "ws") { webhookDeliveries { id } } }"#,       "yyFFFFF"),
    // Scopes (docs/scopes.md): workspace keys manage them; no key of the matrix is a scope key
    // (tests/it/scopes.rs covers those).
    row("MutationRoot.getOrCreateScope",     r#"mutation { getOrCreateScope(workspaceId: "ws", id: "sc") { id } }"#,        "yyFFFFF"),
    row("Workspace.scopes",      r#"{ workspace(id: "ws") { scopes { id } } }"#,                       "yyFFFFF"),
    row("Workspace.scope",       r#"{ workspace(id: "ws") { scope(id: "sc") { id } } }"#,              "yyFFFFF"),
    row("Scope.sessions",        r#"{ workspace(id: "ws") { scope(id: "sc") { sessions { id } } } }"#, "yyFFFFF"),
    row("Scope.status",          r#"{ workspace(id: "ws") { scope(id: "sc") { status { sessionCount } } } }"#, "yyFFFFF"),
    row("MutationRoot.addSessionsToScope",   r#"mutation { addSessionsToScope(workspaceId: "ws", scopeId: "sc", sessionIds: ["s1"]) { id } }"#, "yyFFFFF"),
    row("MutationRoot.removeSessionFromScope", r#"mutation { removeSessionFromScope(workspaceId: "ws", scopeId: "sc", sessionId: "s1") { id } }"#, "yyFFFFF"),
    row("MutationRoot.createWebhook", r#"mutation { createWebhook(workspaceId: "ws", url: "https://hooks.example.com/a") { id } }"#, "yyFFFFF"),
    row("MutationRoot.testWebhook",   r#"mutation { testWebhook(workspaceId: "ws") }"#,                 "yyFFFFF"),
    Row { tolerate: &["NOT_FOUND"], ..row("MutationRoot.deleteWebhook", r#"mutation { deleteWebhook(workspaceId: "ws", id: "nope") }"#, "yyFFFFF") },
    // Dreams: workspace keys (Honcho v3.0.12); no LLM here, so the keys allowed hear dreams are off.
    Row { tolerate: &["BAD_USER_INPUT"], ..row("MutationRoot.scheduleDream", r#"mutation { scheduleDream(workspaceId: "ws", observerId: "alice") }"#, "yyFFFFF") },
    row("MutationRoot.getOrCreateWorkspace", r#"mutation { getOrCreateWorkspace(id: "ws") { id } }"#,                       "yyyyyyF"),
    row("MutationRoot.updateWorkspace",      r#"mutation { updateWorkspace(id: "ws", metadata: {a: 1}) { id } }"#,          "yyFFFFF"),
    // An existing peer: W or its own key; a session key may not read or change it.
    row("MutationRoot.getOrCreatePeer",      r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "alice") { id } }"#,      "yyyFFFF"),
    // A new peer: W, or a session key of the workspace; a peer key only itself.
    row("MutationRoot.getOrCreatePeer",      r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "newbie") { id } }"#,     "yyFFFyF"),
    row("MutationRoot.updatePeer",           r#"mutation { updatePeer(workspaceId: "ws", id: "alice", metadata: {a: 1}) { id } }"#, "yyyFFFF"),
    // An existing session: members may get it, others may not (they would join themselves).
    row("MutationRoot.getOrCreateSession",   r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1") { id } }"#,      "yyyyFyF"),
    // A new session: any peer key of the workspace may create one; a session key only its own.
    row("MutationRoot.getOrCreateSession",   r#"mutation { getOrCreateSession(workspaceId: "ws", id: "fresh") { id } }"#,   "yyyyyFF"),
    row("MutationRoot.updateSession",        r#"mutation { updateSession(workspaceId: "ws", id: "s1", metadata: {a: 1}) { id } }"#, "yyFFFyF"),
    row("MutationRoot.addPeersToSession",    r#"mutation { addPeersToSession(workspaceId: "ws", sessionId: "s1", peers: [{peerId: "erin"}]) { id } }"#, "yyFFFyF"),
    row("MutationRoot.setSessionPeerConfig", r#"mutation { setSessionPeerConfig(workspaceId: "ws", sessionId: "s1", peerId: "alice", observeMe: false) { peerId } }"#, "yyFFFyF"),
    row("MutationRoot.createMessages",       r#"mutation { createMessages(workspaceId: "ws", sessionId: "s1", messages: [{peerId: "alice", content: "more"}]) { id } }"#, "yyFFFyF"),
    row("MutationRoot.updateMessage",        r#"mutation { updateMessage(workspaceId: "ws", id: "{m1}", metadata: {a: 1}) { id } }"#, "yyFFFyF"),
    row("MutationRoot.cloneSession",         r#"mutation { cloneSession(workspaceId: "ws", id: "s1") { id } }"#,            "yyFFFyF"),
    row("MutationRoot.removePeersFromSession", r#"mutation { removePeersFromSession(workspaceId: "ws", sessionId: "s1", peerIds: ["dave"]) { id } }"#, "yyFFFyF"),
    row("MutationRoot.createKey",            r#"mutation { createKey(workspaceId: "ws") }"#,                                "yFFFFFF"),
    row("MutationRoot.createConclusions",    r#"mutation { createConclusions(workspaceId: "ws", conclusions: [{content: "alice is kind", observerId: "bob", observedId: "alice"}]) { id } }"#, "yyFFFFF"),
    row("MutationRoot.updateConclusion",     r#"mutation { updateConclusion(workspaceId: "ws", id: "{c1}", metadata: {a: 1}) { id } }"#, "yyFFFFF"),
    row("MutationRoot.recordDerivedConclusion", r#"mutation { recordDerivedConclusion(workspaceId: "ws", input: {content: "bob is calm", observerId: "alice", observedId: "bob", level: DEDUCTIVE, sourceIds: ["{c1}"]}) { id } }"#, "yFFFFFF"),
    row("MutationRoot.retryFailedDerivations", r#"mutation { retryFailedDerivations(workspaceId: "ws") }"#,           "yFFFFFF"),
    row("MutationRoot.deleteConclusion",     r#"mutation { deleteConclusion(workspaceId: "ws", id: "{c1}") }"#,             "yyFFFFF"),
    // Erasure: workspace keys only, never a peer's or a session's (docs/erasure.md).
    row("Workspace.erasureJob",  r#"{ workspace(id: "ws") { erasureJob(id: "nosuchjob") { id } } }"#,                 "yyFFFFF"),
    row("Workspace.export",      r#"{ workspace(id: "ws") { export { format } } }"#,                             "yyFFFFF"),
    row("MutationRoot.deleteMessage",        r#"mutation { deleteMessage(workspaceId: "ws", id: "{m1}") { messages } }"#, "yyFFFFF"),
    row("MutationRoot.deleteSession",        r#"mutation { deleteSession(workspaceId: "ws", id: "s1") }"#,                  "yyFFFyF"),
    // s2 and the clone are still active: CONFLICT, after the guard let it through.
    Row { tolerate: &["CONFLICT"], ..row("MutationRoot.deleteWorkspace", r#"mutation { deleteWorkspace(id: "ws") }"#,       "yyFFFFF") },
    row("MutationRoot.erasePeer",            r#"mutation { erasePeer(workspaceId: "ws", peerId: "alice") { id } }"#,        "yyFFFFF"),
];

fn first_error_code(resp: &Value) -> Option<String> {
    resp.get("errors").and_then(|e| e.get(0)).map(|e| {
        e["extensions"]["code"]
            .as_str()
            .unwrap_or("(no code)")
            .to_owned()
    })
}

fn doc(row: &Row, fx: &Fixture) -> String {
    row.doc.replace("{m1}", &fx.m1).replace("{c1}", &fx.c1)
}

#[test]
fn the_matrix_covers_every_query_mutation_and_guarded_field() {
    let (_, operations) = schema_fields();
    let covered: BTreeSet<&str> = MATRIX.iter().map(|r| r.field).collect();
    let mut wanted: BTreeSet<String> = operations.iter().map(|(t, f)| format!("{t}.{f}")).collect();
    // Subscription fields do not run through `execute`: their auth cases belong with the
    // subscription tests (over the WebSocket, with a connection_init key).
    wanted.extend(
        RULES
            .iter()
            .filter(|f| f.rule != Rule::Inherit && f.ty != "SubscriptionRoot")
            .map(|f| format!("{}.{}", f.ty, f.name)),
    );
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|f| !covered.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "add a row to MATRIX in tests/it/auth.rs for {missing:?}"
    );
    for r in MATRIX {
        assert_eq!(r.expect.len(), WHO.len(), "{}", r.field);
    }
}

/// Runs the whole matrix for one key on a fresh database; returns the mismatches.
async fn run_matrix_for(who: usize) -> Vec<String> {
    // With the embedder: queryConclusions needs one.
    let app = TestApp::with_embedder().await.auth_on();
    let fx = seed(&app).await;
    let key = key_of(who);
    let mut wrong = Vec::new();
    for r in MATRIX {
        let resp = app.exec_as(Some(&key), &doc(r, &fx), json!({})).await;
        let got = first_error_code(&resp);
        let expected = r.expect.as_bytes()[who];
        let fine = match (expected, got.as_deref()) {
            (b'y', None) => true,
            (b'y', Some(code)) => r.tolerate.contains(&code),
            (b'F', Some("FORBIDDEN")) => true,
            _ => false,
        };
        if !fine {
            wrong.push(format!(
                "{} as {}: expected {}, got {}",
                r.field,
                WHO[who],
                if expected == b'y' {
                    "allowed"
                } else {
                    "FORBIDDEN"
                },
                resp
            ));
        }
    }
    wrong
}

#[tokio::test]
async fn matrix_of_keys_by_fields() {
    let results = join_all((0..WHO.len()).map(run_matrix_for)).await;
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// (3) No key, bad keys: every row of the matrix answers UNAUTHENTICATED.

fn sign(secret: &str, claims: Value) -> String {
    // Hand-signed tokens, as a client of Honcho might hold.
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap();
    format!(
        "Bearer {}",
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    )
}

#[tokio::test]
async fn missing_expired_tampered_and_unscoped_keys_are_unauthenticated() {
    let app = TestApp::with_auth().await;
    let fx = seed(&app).await;
    let expired = bearer(KeySpec {
        workspace: Some("ws".into()),
        expires_at: Some(Utc::now() - Duration::seconds(5)),
        ..Default::default()
    });
    let tampered = {
        let good = admin();
        let (head, sig) = good.rsplit_once('.').unwrap();
        let flipped: String = sig
            .chars()
            .enumerate()
            .map(|(i, c)| match (i, c) {
                (0, 'A') => 'B',
                (0, _) => 'A',
                _ => c,
            })
            .collect();
        format!("{head}.{flipped}")
    };
    // A workspace key whose payload was edited to say admin, keeping the signature.
    let forged = {
        use base64::Engine;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let good = ws_key("ws");
        let token = good.strip_prefix("Bearer ").unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let payload = engine.encode(br#"{"ad":true}"#);
        format!("Bearer {}.{}.{}", parts[0], payload, parts[2])
    };
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("no header", None, "no access token"),
        ("expired", Some(expired), "expired"),
        ("tampered signature", Some(tampered), "invalid"),
        ("forged payload", Some(forged), "invalid"),
        (
            "other secret",
            Some(sign("not-the-secret", json!({"ad": true}))),
            "invalid",
        ),
        ("no scope", Some(sign(SECRET, json!({"t": ""}))), "no scope"),
        (
            "peer without workspace",
            Some(sign(SECRET, json!({"p": "alice"}))),
            "without a workspace",
        ),
        (
            "ISO exp (Honcho v3.0.12's)",
            Some(sign(
                SECRET,
                json!({"w": "ws", "exp": "2099-01-01T00:00:00Z"}),
            )),
            "invalid",
        ),
        (
            "not Bearer",
            Some(format!("Token {}", &admin()[7..])),
            "Bearer",
        ),
        ("garbage", Some("Bearer abc.def.ghi".into()), "invalid"),
    ];
    let mut wrong = Vec::new();
    for (what, header, message) in &cases {
        for r in MATRIX {
            let resp = app
                .exec_as(header.as_deref(), &doc(r, &fx), json!({}))
                .await;
            let err = &resp["errors"][0];
            let fine = err["extensions"]["code"] == "UNAUTHENTICATED"
                && err["message"]
                    .as_str()
                    .unwrap_or("")
                    .to_lowercase()
                    .contains(&message.to_lowercase());
            if !fine {
                wrong.push(format!("{} with {what}: {resp}", r.field));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Without a key, nothing was written.
    let d = ok_as(&app, &admin(), r#"{ workspace(id: "ws") { id metadata } }"#).await;
    assert_eq!(d["workspace"]["metadata"], json!({}));
    // Introspection and __typename need no key.
    let resp = app
        .exec_as(
            None,
            "{ __typename __schema { queryType { name } } }",
            json!({}),
        )
        .await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

// ---------------------------------------------------------------------------------------------
// (4) Nested leaks.

async fn forbidden_at(app: &TestApp, key: &str, query: &str, path: &[&str]) -> Value {
    let resp = app.exec_as(Some(key), query, json!({})).await;
    let err = &resp["errors"][0];
    assert_eq!(err["extensions"]["code"], "FORBIDDEN", "{query}: {resp}");
    let got: Vec<String> = err["path"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|s| match s {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(got, path, "{query}: {resp}");
    resp
}

#[tokio::test]
async fn a_peer_key_reaches_neither_other_sessions_nor_other_peers_nor_other_workspaces() {
    let app = TestApp::with_auth().await;
    let fx = seed(&app).await;
    let bob = peer_key("bob");
    let secret = |resp: &Value| resp.to_string().contains("carol's secret");

    // s2 (carol's) through session(id) and message(id).
    let q = r#"{ workspace(id: "ws") { session(id: "s2") { messages { nodes { content } } } } }"#;
    let r = forbidden_at(&app, &bob, q, &["workspace", "session"]).await;
    assert!(!secret(&r));
    let q = format!(
        r#"{{ workspace(id: "ws") {{ message(id: "{}") {{ content }} }} }}"#,
        fx.m2
    );
    let r = forbidden_at(&app, &bob, &q, &["workspace", "message"]).await;
    assert!(!secret(&r));
    // alice's lists through her message in the session bob shares: the message yes, her lists no.
    let q = format!(
        r#"{{ workspace(id: "ws") {{ message(id: "{}") {{ content peer {{ id messages {{ nodes {{ content }} }} }} }} }} }}"#,
        fx.m1
    );
    let r = forbidden_at(
        &app,
        &bob,
        &q,
        &["workspace", "message", "peer", "messages"],
    )
    .await;
    assert_eq!(r["data"]["workspace"]["message"]["content"], "alice in s1");
    // carol's lists through a co-member listing... carol is no co-member; through bob's own
    // sessions, s2 is not among them; a session listing of the workspace is refused.
    forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { sessions { nodes { id } } } }"#,
        &["workspace", "sessions"],
    )
    .await;
    forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "carol") { messages { nodes { content } } } } }"#,
        &["workspace", "peer"],
    )
    .await;
    // Another workspace: neither directly nor by a message id of it.
    forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "other") { id } }"#,
        &["workspace"],
    )
    .await;
    let q = format!(
        r#"{{ workspace(id: "ws") {{ message(id: "{}") {{ content }} }} }}"#,
        fx.mx
    );
    let d = ok_as(&app, &bob, &q).await;
    assert_eq!(d["workspace"]["message"], Value::Null);
    // bob's own: his messages, his session, and its members.
    let d = ok_as(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "bob") { messages { nodes { content session { id peers { peerId } messages { totalCount } } } } } } }"#,
    )
    .await;
    let mine = &d["workspace"]["peer"]["messages"]["nodes"][0];
    assert_eq!(mine["content"], "bob in s1");
    assert_eq!(mine["session"]["messages"]["totalCount"], 2);

    // A peer key may not join a session by get-or-create, nor write into its own session.
    forbidden_at(
        &app,
        &bob,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s2", peers: [{peerId: "bob"}]) { id } }"#,
        &["getOrCreateSession"],
    )
    .await;
    forbidden_at(
        &app,
        &bob,
        r#"mutation { createMessages(workspaceId: "ws", sessionId: "s1", messages: [{peerId: "bob", content: "x"}]) { id } }"#,
        &["createMessages"],
    )
    .await;
    let d = ok_as(
        &app,
        &admin(),
        r#"{ workspace(id: "ws") { session(id: "s2") { peers { peerId } } } }"#,
    )
    .await;
    assert_eq!(
        d["workspace"]["session"]["peers"],
        json!([{"peerId": "carol"}])
    );

    // Member read is for *active* members: once bob left s1, s1 and the context of his own
    // message there are closed to him (his own messages stay readable).
    ok_as(
        &app,
        &admin(),
        r#"mutation { removePeersFromSession(workspaceId: "ws", sessionId: "s1", peerIds: ["bob"]) { id } }"#,
    )
    .await;
    forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { session(id: "s1") { id } } }"#,
        &["workspace", "session"],
    )
    .await;
    let r = forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "bob") { messages { nodes { content context { content } } } } } }"#,
        &["workspace", "peer", "messages", "nodes", "0", "context"],
    )
    .await;
    assert!(!r.to_string().contains("alice in s1"), "{r}");
    // Nor through the snippets of a search of his own messages.
    let r = forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "bob") { search(query: "bob", includeContext: true) { ... on SnippetHits { snippets { context { content } } } } } } }"#,
        &["workspace", "peer", "search", "snippets", "0", "context"],
    )
    .await;
    assert!(!r.to_string().contains("alice in s1"), "{r}");
    let d = ok_as(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "bob") { search(query: "bob") { ... on MessageHits { results { content } } } } } }"#,
    )
    .await;
    assert_eq!(
        d["workspace"]["peer"]["search"]["results"],
        json!([{"content": "bob in s1"}])
    );
    // Conclusions, even its own, are for workspace keys.
    forbidden_at(
        &app,
        &bob,
        r#"{ workspace(id: "ws") { peer(id: "bob") { conclusions { totalCount } } } }"#,
        &["workspace", "peer", "conclusions"],
    )
    .await;
}

#[tokio::test]
async fn a_session_key_stays_in_its_session() {
    let app = TestApp::with_auth().await;
    let fx = seed(&app).await;
    let s1 = session_key("s1");
    forbidden_at(
        &app,
        &s1,
        r#"{ workspace(id: "ws") { session(id: "s2") { id } } }"#,
        &["workspace", "session"],
    )
    .await;
    let q = format!(
        r#"{{ workspace(id: "ws") {{ message(id: "{}") {{ content }} }} }}"#,
        fx.m2
    );
    forbidden_at(&app, &s1, &q, &["workspace", "message"]).await;
    let q = format!(
        r#"mutation {{ updateMessage(workspaceId: "ws", id: "{}", metadata: {{x: 1}}) {{ id }} }}"#,
        fx.m2
    );
    forbidden_at(&app, &s1, &q, &["updateMessage"]).await;
    // Its messages, members, and their peers yes; a member's own lists no.
    let d = ok_as(
        &app,
        &s1,
        r#"{ workspace(id: "ws") { session(id: "s1") { messages { nodes { content context { content } } } peers { peer { id } } } } }"#,
    )
    .await;
    assert_eq!(
        d["workspace"]["session"]["messages"]["nodes"][0]["content"],
        "alice in s1"
    );
    forbidden_at(
        &app,
        &s1,
        r#"{ workspace(id: "ws") { session(id: "s1") { peers { peer { sessions { totalCount } } } } } }"#,
        &["workspace", "session", "peers", "0", "peer", "sessions"],
    )
    .await;
    // A missing message is NOT_FOUND for the session key (nothing to hide), like for W.
    let (code, _) = {
        let resp = app
            .exec_as(
                Some(&s1),
                r#"mutation { updateMessage(workspaceId: "ws", id: "nope", metadata: {x: 1}) { id } }"#,
                json!({}),
            )
            .await;
        (first_error_code(&resp), resp)
    };
    assert_eq!(code.as_deref(), Some("NOT_FOUND"));
}

// ---------------------------------------------------------------------------------------------
// (4b) Writes stay within the key's scope: what get-or-create may do to a row that exists.

async fn code_as(app: &TestApp, key: &str, query: &str) -> Option<String> {
    first_error_code(&app.exec_as(Some(key), query, json!({})).await)
}

#[tokio::test]
async fn a_peer_key_gets_a_session_it_is_a_member_of_but_changes_nothing_in_it() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let bob = peer_key("bob");
    let admin = admin();
    ok_as(
        &app,
        &admin,
        r#"mutation { updateSession(workspaceId: "ws", id: "s1", metadata: {v: 1}) { id } }"#,
    )
    .await;
    let refused = [
        // Replace the metadata, merge configuration, add another (existing or new) peer.
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", metadata: {v: 2}) { id } }"#,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", configuration: {x: 1}) { id } }"#,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", peers: [{peerId: "carol"}]) { id } }"#,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", peers: [{peerId: "mallory"}]) { id } }"#,
        // Nor, creating a session, make another peer a member or create one.
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "bobs", peers: [{peerId: "mallory"}]) { id } }"#,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "bobs", peers: [{peerId: "carol"}]) { id } }"#,
    ];
    for q in refused {
        assert_eq!(
            code_as(&app, &bob, q).await.as_deref(),
            Some("FORBIDDEN"),
            "{q}"
        );
    }
    // Nothing of it was written: s1 as before, no session bobs, no peer mallory, and carol's key
    // still does not read s1.
    let d = ok_as(
        &app,
        &admin,
        r#"{ workspace(id: "ws") { session(id: "s1") { metadata configuration peers { peerId } }
             bobs: session(id: "bobs") { id } peer(id: "mallory") { id } } }"#,
    )
    .await;
    let w = &d["workspace"];
    assert_eq!(w["session"]["metadata"], json!({"v": 1}));
    assert_eq!(w["session"]["configuration"], json!({}));
    assert_eq!(
        w["session"]["peers"],
        json!([{"peerId": "alice"}, {"peerId": "bob"}, {"peerId": "dave"}])
    );
    assert_eq!(w["bobs"], Value::Null);
    assert_eq!(w["peer"], Value::Null);
    assert_eq!(
        code_as(
            &app,
            &peer_key("carol"),
            r#"{ workspace(id: "ws") { session(id: "s1") { id } } }"#
        )
        .await
        .as_deref(),
        Some("FORBIDDEN")
    );
    // What is allowed: get s1 unchanged, naming itself or nobody; create a session with metadata
    // and configuration, itself as member.
    let d = ok_as(
        &app,
        &bob,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s1", peers: [{peerId: "bob"}]) { metadata } }"#,
    )
    .await;
    assert_eq!(d["getOrCreateSession"]["metadata"], json!({"v": 1}));
    let d = ok_as(
        &app,
        &bob,
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "bobs", metadata: {mine: true}, configuration: {c: 1}, peers: [{peerId: "bob"}]) { metadata configuration } }"#,
    )
    .await;
    assert_eq!(d["getOrCreateSession"]["metadata"], json!({"mine": true}));
    // Once it exists, bob's own session is like any other he is a member of.
    assert_eq!(
        code_as(
            &app,
            &bob,
            r#"mutation { getOrCreateSession(workspaceId: "ws", id: "bobs", metadata: {mine: false}) { id } }"#
        )
        .await
        .as_deref(),
        Some("FORBIDDEN")
    );
}

#[tokio::test]
async fn a_session_key_creates_peers_but_neither_reads_nor_replaces_existing_ones() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let s1 = session_key("s1");
    ok_as(
        &app,
        &admin(),
        r#"mutation { updatePeer(workspaceId: "ws", id: "carol", metadata: {secret: "x"}) { id } }"#,
    )
    .await;
    // carol is in no session of s1's; alice is a member of s1: neither may be read or replaced.
    for q in [
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "carol") { metadata } }"#,
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "carol", metadata: {secret: "y"}) { id } }"#,
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "alice", configuration: {a: 1}) { id } }"#,
    ] {
        let resp = app.exec_as(Some(&s1), q, json!({})).await;
        assert_eq!(first_error_code(&resp).as_deref(), Some("FORBIDDEN"), "{q}");
        assert!(!resp.to_string().contains("secret"), "{resp}");
    }
    let d = ok_as(
        &app,
        &admin(),
        r#"{ workspace(id: "ws") { carol: peer(id: "carol") { metadata } alice: peer(id: "alice") { configuration } } }"#,
    )
    .await;
    assert_eq!(d["workspace"]["carol"]["metadata"], json!({"secret": "x"}));
    assert_eq!(d["workspace"]["alice"]["configuration"], json!({}));
    // A new peer it may create, with metadata; once created, it is an existing peer.
    let d = ok_as(
        &app,
        &s1,
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "newbie", metadata: {n: 1}) { metadata } }"#,
    )
    .await;
    assert_eq!(d["getOrCreatePeer"]["metadata"], json!({"n": 1}));
    assert_eq!(
        code_as(
            &app,
            &s1,
            r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "newbie") { id } }"#
        )
        .await
        .as_deref(),
        Some("FORBIDDEN")
    );
}

/// Twelve peers asking at once to observe others, in each of four sessions at the same time: the
/// session's lock lets exactly 10 through in each.
#[tokio::test]
async fn concurrent_observers_stop_at_the_limit() {
    let app = std::sync::Arc::new(TestApp::new().await);
    let sessions = ["s0", "s1", "s2", "s3"];
    let peers: Vec<String> = (0..12).map(|i| format!("{{peerId: \"p{i}\"}}")).collect();
    for s in sessions {
        app.ok(
            &format!(
                "mutation {{ addPeersToSession(workspaceId: \"ws\", sessionId: \"{s}\", peers: [{}]) {{ id }} }}",
                peers.join(", ")
            ),
            json!({}),
        )
        .await;
    }
    let q = "mutation($s: ID!, $p: ID!) { setSessionPeerConfig(workspaceId: \"ws\", sessionId: $s, peerId: $p, observeOthers: true) { peerId } }";
    let calls = sessions
        .iter()
        .flat_map(|s| (0..12).map(move |i| (*s, format!("p{i}"))));
    let answers = join_all(calls.map(|(s, p)| {
        let app = app.clone();
        async move { first_error_code(&app.exec(q, json!({"s": s, "p": p})).await) }
    }))
    .await;
    let ok = answers.iter().filter(|a| a.is_none()).count();
    let refused = answers
        .iter()
        .filter(|a| a.as_deref() == Some("BAD_USER_INPUT"))
        .count();
    assert_eq!((ok, refused), (40, 8), "{answers:?}");
    for s in sessions {
        let observers = app
            .sql_i64(&format!(
                "SELECT count(*) FROM session_peers WHERE session_name = '{s}' \
                 AND configuration->'observe_others' = 'true'::jsonb"
            ))
            .await;
        assert_eq!(observers, 10, "{s}");
    }
}

// ---------------------------------------------------------------------------------------------
// (5) createKey and the CLI.

#[tokio::test]
async fn create_key_mints_keys_that_work() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let admin = admin();
    let mint = |args: &str| format!("mutation {{ createKey({args}) }}");
    let later = (Utc::now() + Duration::hours(1)).to_rfc3339();

    let w = ok_as(
        &app,
        &admin,
        &mint(&format!(r#"workspaceId: "ws", expiresAt: "{later}""#)),
    )
    .await["createKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let w = format!("Bearer {w}");
    let d = ok_as(
        &app,
        &w,
        r#"{ workspace(id: "ws") { peers { totalCount } } }"#,
    )
    .await;
    assert_eq!(d["workspace"]["peers"]["totalCount"], 4);
    forbidden_at(
        &app,
        &w,
        r#"{ workspaces { totalCount } }"#,
        &["workspaces"],
    )
    .await;
    forbidden_at(&app, &w, &mint(r#"workspaceId: "ws""#), &["createKey"]).await;

    let p = ok_as(&app, &admin, &mint(r#"workspaceId: "ws", peerId: "alice""#)).await["createKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let p = format!("Bearer {p}");
    let d = ok_as(
        &app,
        &p,
        r#"{ workspace(id: "ws") { peer(id: "alice") { messages { totalCount } } } }"#,
    )
    .await;
    assert_eq!(d["workspace"]["peer"]["messages"]["totalCount"], 1);
    forbidden_at(
        &app,
        &p,
        r#"{ workspace(id: "ws") { peer(id: "bob") { id } } }"#,
        &["workspace", "peer"],
    )
    .await;

    let s = ok_as(&app, &admin, &mint(r#"workspaceId: "ws", sessionId: "s2""#)).await["createKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = format!("Bearer {s}");
    let d = ok_as(
        &app,
        &s,
        r#"{ workspace(id: "ws") { session(id: "s2") { messages { nodes { content } } } } }"#,
    )
    .await;
    assert_eq!(
        d["workspace"]["session"]["messages"]["nodes"][0]["content"],
        "carol's secret"
    );

    // Expiry: a key minted already expired is refused as expired.
    let past = (Utc::now() - Duration::seconds(2)).to_rfc3339();
    let old = ok_as(
        &app,
        &admin,
        &mint(&format!(r#"workspaceId: "ws", expiresAt: "{past}""#)),
    )
    .await["createKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let resp = app
        .exec_as(
            Some(&format!("Bearer {old}")),
            r#"{ workspace(id: "ws") { id } }"#,
            json!({}),
        )
        .await;
    assert_eq!(resp["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");
    assert!(
        resp["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );

    // Refusals.
    for args in [
        r#"expiresAt: "2099-01-01T00:00:00Z""#,
        r#"peerId: "alice""#,
        r#"sessionId: "s1""#,
    ] {
        let resp = app.exec_as(Some(&admin), &mint(args), json!({})).await;
        assert_eq!(
            first_error_code(&resp).as_deref(),
            Some("BAD_USER_INPUT"),
            "{args}: {resp}"
        );
    }
    // Auth off: every request is an admin, but there is no secret to sign with.
    let open = TestApp::new().await;
    let (code, msg) = open.err(&mint(r#"workspaceId: "ws""#), json!({})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(msg.contains("auth is disabled"), "{msg}");
}

#[tokio::test]
async fn the_key_command_prints_keys_that_work() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let exe = env!("CARGO_BIN_EXE_honcho-graphql");
    let key = |args: &[&str], secret: Option<&str>| {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("key").args(args).env_remove("HONCHO_AUTH_SECRET");
        if let Some(s) = secret {
            cmd.env("HONCHO_AUTH_SECRET", s);
        }
        cmd.output().unwrap()
    };
    let out = key(
        &["--workspace", "ws", "--peer", "alice", "--expires-in", "1h"],
        Some(SECRET),
    );
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let claims = Auth::with_secret(SECRET).unwrap().verify(&token).unwrap();
    assert_eq!(
        claims,
        honcho_graphql::auth::Principal::Peer {
            workspace: "ws".into(),
            peer: "alice".into()
        }
    );
    let d = ok_as(
        &app,
        &format!("Bearer {token}"),
        r#"{ workspace(id: "ws") { peer(id: "alice") { messages { totalCount } } } }"#,
    )
    .await;
    assert_eq!(d["workspace"]["peer"]["messages"]["totalCount"], 1);

    let out = key(&["--admin"], Some(SECRET));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    ok_as(
        &app,
        &format!("Bearer {token}"),
        "{ workspaces { totalCount } }",
    )
    .await;

    // No secret, no scope, a peer without workspace, admin with a scope, a bad duration.
    assert!(!key(&["--workspace", "ws"], None).status.success());
    assert!(!key(&[], Some(SECRET)).status.success());
    assert!(!key(&["--peer", "alice"], Some(SECRET)).status.success());
    assert!(
        !key(&["--admin", "--workspace", "ws"], Some(SECRET))
            .status
            .success()
    );
    assert!(
        !key(&["--workspace", "ws", "--expires-in", "soon"], Some(SECRET))
            .status
            .success()
    );
}

// ---------------------------------------------------------------------------------------------
// Over HTTP: the header is read by the handler; /health and /ready stay open.

#[tokio::test]
async fn bearer_keys_over_http() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let schema = graphql::build_schema_with_auth(
        app.store.clone(),
        &Limits::default(),
        Auth::with_secret(SECRET).unwrap(),
    );
    let router = honcho_graphql::http::router(schema, app.store.clone(), 1024 * 1024);
    let server = Served::start(router).await;
    let client = honcho_graphql::outbound::client();

    for path in ["/health", "/ready"] {
        let status = client.get(server.url(path)).send().await.unwrap().status();
        assert_eq!(status, 200, "{path}");
    }
    let post = |auth: Option<String>| {
        let mut req = client
            .post(server.url("/graphql"))
            .json(&json!({"query": "{ workspace(id: \"ws\") { peers { totalCount } } }"}));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Value>().await.unwrap()
        }
    };
    let code = |v: &Value| {
        v["errors"][0]["extensions"]["code"]
            .as_str()
            .map(str::to_owned)
    };

    let d = post(Some(ws_key("ws"))).await;
    assert_eq!(d["data"]["workspace"]["peers"]["totalCount"], 4, "{d}");
    let lower = ws_key("ws").replacen("Bearer", "bearer", 1);
    assert_eq!(
        post(Some(lower)).await["data"]["workspace"]["peers"]["totalCount"],
        4
    );
    assert_eq!(code(&post(None).await).as_deref(), Some("UNAUTHENTICATED"));
    let basic = ws_key("ws").replacen("Bearer", "Basic", 1);
    assert_eq!(
        code(&post(Some(basic)).await).as_deref(),
        Some("UNAUTHENTICATED")
    );
    assert_eq!(
        code(&post(Some(peer_key("bob"))).await).as_deref(),
        Some("FORBIDDEN")
    );
    assert_eq!(
        code(&post(Some(ws_key("other"))).await).as_deref(),
        Some("FORBIDDEN")
    );
}

// ---------------------------------------------------------------------------------------------
// Member-read checks batch and cache: a peer key's page of messages with their context and
// session members costs the same number of statements for 10 items as for 60.

#[tokio::test]
async fn member_read_checks_cost_no_statement_per_item() {
    let app = TestApp::with_auth().await;
    seed(&app).await;
    let batch: Vec<Value> = (0..60)
        .map(|i| json!({"peerId": if i % 2 == 0 { "alice" } else { "bob" }, "content": format!("m{i}")}))
        .collect();
    let resp = app
        .exec_as(
            Some(&admin()),
            "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s1\", messages: $m) { id } }",
            json!({"m": batch}),
        )
        .await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let bob = peer_key("bob");
    let mut counts = Vec::new();
    for n in [10, 60] {
        app.take_statements();
        let q = format!(
            "{{ workspace(id: \"ws\") {{ session(id: \"s1\") {{ messages(first: {n}) {{ nodes {{ id context {{ id }} session {{ id peers {{ peerId }} }} }} }} }} }} }}"
        );
        let d = ok_as(&app, &bob, &q).await;
        let nodes = d["workspace"]["session"]["messages"]["nodes"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(nodes, n);
        counts.push(app.take_statements());
    }
    assert_eq!(
        counts[0], counts[1],
        "statements for 10 and 60 items: {counts:?}"
    );
}
