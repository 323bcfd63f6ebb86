//! Conclusions: public metadata, read-only provenance, semantic query,
//! reasoning graph. Tests whose names start with `filter_` need the real filter DSL.

use std::collections::HashSet;

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::TestApp;

const FIELDS: &str =
    "id content observerId observedId sessionId metadata level timesDerived sourceIds createdAt";

/// A new app holding what `setup` makes.
async fn seeded() -> TestApp {
    let app = TestApp::new().await;
    setup(&app).await;
    app
}

/// Workspace `ws` with peers alice, bob, carol and session `s`.
async fn setup(app: &TestApp) {
    for p in ["alice", "bob", "carol"] {
        app.ok(
            "mutation($p: ID!) { getOrCreatePeer(workspaceId: \"ws\", id: $p) { id } }",
            json!({"p": p}),
        )
        .await;
    }
    app.ok(
        "mutation { getOrCreateSession(workspaceId: \"ws\", id: \"s\") { id } }",
        json!({}),
    )
    .await;
}

fn item(content: &str) -> Value {
    json!({"content": content, "observerId": "alice", "observedId": "bob"})
}

async fn create(app: &TestApp, items: Value) -> Vec<Value> {
    let d = app
        .ok(
            &format!(
                "mutation($c: [ConclusionInput!]!) {{ createConclusions(workspaceId: \"ws\", conclusions: $c) {{ {FIELDS} }} }}"
            ),
            json!({"c": items}),
        )
        .await;
    d["createConclusions"].as_array().unwrap().clone()
}

async fn create_one(app: &TestApp, content: &str) -> String {
    create(app, json!([item(content)])).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

const DERIVE: &str = "mutation($i: DerivedConclusionInput!) {
  recordDerivedConclusion(workspaceId: \"ws\", input: $i) {
    id content observerId observedId sessionId metadata level timesDerived sourceIds } }";

fn derived_input(content: &str, level: &str, sources: &[&str]) -> Value {
    json!({"content": content, "observerId": "alice", "observedId": "bob", "level": level,
           "sourceIds": sources})
}

async fn derive(app: &TestApp, content: &str, sources: &[&str]) -> Value {
    app.ok(
        DERIVE,
        json!({"i": derived_input(content, "DEDUCTIVE", sources)}),
    )
    .await["recordDerivedConclusion"]
        .clone()
}

async fn derive_id(app: &TestApp, content: &str, sources: &[&str]) -> String {
    derive(app, content, sources).await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Ids of a list of nodes.
fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

fn edges(tree: &Value) -> HashSet<(String, String)> {
    tree["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_owned(),
                e["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn edge(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

async fn tree(app: &TestApp, root: &str, direction: &str, max_depth: i32) -> Value {
    app.ok(
        "query($id: ID!, $d: TreeDirection!, $m: Int!) { workspace(id: \"ws\") { conclusion(id: $id) {
           reasoningTree(direction: $d, maxDepth: $m) { nodes { id } edges { from to } truncated } } } }",
        json!({"id": root, "d": direction, "m": max_depth}),
    )
    .await["workspace"]["conclusion"]["reasoningTree"]
        .clone()
}

async fn list(app: &TestApp, filters: Value) -> Vec<String> {
    let d = app
        .ok(
            "query($f: JSON) { workspace(id: \"ws\") { conclusions(filters: $f, first: 100) { nodes { id } } } }",
            json!({"f": filters}),
        )
        .await;
    ids(&d["workspace"]["conclusions"]["nodes"])
}

// ---------------------------------------------------------------------------------------------
// Create, update, read-only fields, list.

#[tokio::test]
async fn create_with_metadata_is_explicit_derived_once_without_sources() {
    let app = seeded().await;
    let created = create(
        &app,
        json!([
            {"content": "User likes cats", "observerId": "alice", "observedId": "bob",
             "sessionId": "s", "metadata": {"category": "preference", "confidence": 0.9}},
            {"content": "no\u{0}metadata", "observerId": "bob", "observedId": "bob"}
        ]),
    )
    .await;
    let c = &created[0];
    assert_eq!(c["id"].as_str().unwrap().len(), 21);
    assert_eq!(c["content"], "User likes cats");
    assert_eq!(c["observerId"], "alice");
    assert_eq!(c["observedId"], "bob");
    assert_eq!(c["sessionId"], "s");
    assert_eq!(
        c["metadata"],
        json!({"category": "preference", "confidence": 0.9})
    );
    assert_eq!(c["level"], "EXPLICIT");
    assert_eq!(c["timesDerived"], 1);
    assert!(c["sourceIds"].is_null());
    let d = &created[1];
    assert_eq!(d["metadata"], json!({}), "metadata defaults to {{}}");
    assert_eq!(d["content"], "nometadata", "NUL bytes are stripped");
    assert!(d["sessionId"].is_null());

    // Read back, with the related objects.
    let r = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") { conclusion(id: $id) {
               id metadata level timesDerived sourceIds sources { id } derived { id }
               observer { id } observed { id } session { id } } } }",
            json!({"id": c["id"]}),
        )
        .await;
    let r = &r["workspace"]["conclusion"];
    assert_eq!(r["metadata"], c["metadata"]);
    assert_eq!(r["level"], "EXPLICIT");
    assert_eq!(r["sources"], json!([]));
    assert_eq!(r["derived"], json!([]));
    assert_eq!(r["observer"]["id"], "alice");
    assert_eq!(r["observed"]["id"], "bob");
    assert_eq!(r["session"]["id"], "s");
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE level = 'explicit' AND times_derived = 1 AND source_ids IS NULL")
            .await,
        2
    );
}

#[tokio::test]
async fn update_conclusion_replaces_metadata_and_null_keeps_it() {
    let app = seeded().await;
    let created = create(
        &app,
        json!([{"content": "c", "observerId": "alice", "observedId": "bob",
                "metadata": {"category": "preference", "keep": false}}]),
    )
    .await;
    let id = created[0]["id"].clone();
    const UPDATE: &str = "mutation($id: ID!, $m: JSON) { updateConclusion(workspaceId: \"ws\", id: $id, metadata: $m) {
      id content metadata level timesDerived sourceIds } }";
    let u = app
        .ok(UPDATE, json!({"id": id, "m": {"category": "updated"}}))
        .await;
    assert_eq!(
        u["updateConclusion"]["metadata"],
        json!({"category": "updated"}),
        "replaced, not merged"
    );
    assert_eq!(u["updateConclusion"]["content"], "c");
    assert_eq!(u["updateConclusion"]["level"], "EXPLICIT");
    let kept = app.ok(UPDATE, json!({"id": id, "m": null})).await;
    assert_eq!(
        kept["updateConclusion"]["metadata"],
        json!({"category": "updated"})
    );
    let omitted = app
        .ok(
            "mutation($id: ID!) { updateConclusion(workspaceId: \"ws\", id: $id) { metadata } }",
            json!({"id": id}),
        )
        .await;
    assert_eq!(
        omitted["updateConclusion"]["metadata"],
        json!({"category": "updated"})
    );
    let cleared = app.ok(UPDATE, json!({"id": id, "m": {}})).await;
    assert_eq!(cleared["updateConclusion"]["metadata"], json!({}));
    let (code, _) = app.err(UPDATE, json!({"id": id, "m": [1]})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    let (code, _) = app
        .err(
            UPDATE,
            json!({"id": id, "m": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
}

#[tokio::test]
async fn deleted_or_unknown_conclusions_are_not_found() {
    let app = seeded().await;
    let id = create_one(&app, "soon gone").await;
    const DELETE: &str = "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }";
    const UPDATE: &str = "mutation($id: ID!) { updateConclusion(workspaceId: \"ws\", id: $id, metadata: {a: 1}) { id } }";
    assert_eq!(
        app.ok(DELETE, json!({"id": id})).await["deleteConclusion"],
        true
    );
    let r = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") { conclusion(id: $id) { id } } }",
            json!({"id": id}),
        )
        .await;
    assert!(r["workspace"]["conclusion"].is_null());
    assert!(list(&app, Value::Null).await.is_empty());
    for (q, target) in [
        (DELETE, id.as_str()),
        (UPDATE, id.as_str()),
        (DELETE, "AAAAAAAAAAAAAAAAAAAAA"),
        (UPDATE, "AAAAAAAAAAAAAAAAAAAAA"),
    ] {
        let (code, msg) = app.err(q, json!({"id": target})).await;
        assert_eq!(code, "NOT_FOUND", "{msg}");
        assert!(msg.contains("conclusion"), "{msg}");
    }
    // Another workspace's conclusion is unknown here.
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"other\") { id } }",
        json!({}),
    )
    .await;
    let live = create_one(&app, "live").await;
    let (code, _) = app
        .err(
            "mutation($id: ID!) { deleteConclusion(workspaceId: \"other\", id: $id) }",
            json!({"id": live}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
    // The row stays (soft delete).
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE deleted_at IS NOT NULL")
            .await,
        1
    );
}

#[tokio::test]
async fn read_only_fields_cannot_be_set() {
    let app = seeded().await;
    // In a variable and as a literal: an unknown input field is a GraphQL validation error.
    for (field, value) in [
        ("level", json!("INDUCTIVE")),
        ("timesDerived", json!(99)),
        ("sourceIds", json!(["x"])),
    ] {
        let mut bad = item("test");
        bad[field] = value.clone();
        let resp = app
            .exec(
                "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
                json!({"c": [bad]}),
            )
            .await;
        let msg = resp["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("unknown field") && msg.contains(field),
            "{field}: {resp}"
        );
        assert!(resp["data"].is_null(), "{resp}");
    }
    let resp = app
        .exec(
            "mutation { createConclusions(workspaceId: \"ws\", conclusions: [
               {content: \"t\", observerId: \"alice\", observedId: \"bob\", level: INDUCTIVE, timesDerived: 99}]) { id } }",
            json!({}),
        )
        .await;
    let msg = resp["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("unknown field"), "{resp}");
    // updateConclusion takes metadata only.
    let resp = app
        .exec(
            "mutation { updateConclusion(workspaceId: \"ws\", id: \"x\", level: DEDUCTIVE) { id } }",
            json!({}),
        )
        .await;
    let msg = resp["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("level"), "{resp}");
    assert_eq!(app.sql_i64("SELECT count(*) FROM conclusions").await, 0);
}

#[tokio::test]
async fn list_includes_the_new_fields() {
    let app = seeded().await;
    let a = create(
        &app,
        json!([{"content": "a", "observerId": "alice", "observedId": "bob", "metadata": {"k": "v"}}]),
    )
    .await;
    let a = a[0]["id"].as_str().unwrap().to_owned();
    let b = derive_id(&app, "b", &[&a]).await;
    let d = app
        .ok(
            &format!(
                "{{ workspace(id: \"ws\") {{ conclusions {{ totalCount nodes {{ {FIELDS} }} edges {{ cursor }} }} }} }}"
            ),
            json!({}),
        )
        .await;
    let conn = &d["workspace"]["conclusions"];
    assert_eq!(conn["totalCount"], 2);
    let nodes = conn["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["id"], b.as_str(), "newest first");
    assert_eq!(nodes[0]["level"], "DEDUCTIVE");
    assert_eq!(nodes[0]["timesDerived"], 1);
    assert_eq!(nodes[0]["sourceIds"], json!([a]));
    assert_eq!(nodes[0]["metadata"], json!({}));
    assert_eq!(nodes[1]["metadata"], json!({"k": "v"}));
    assert_eq!(nodes[1]["level"], "EXPLICIT");
    assert!(nodes[1]["sourceIds"].is_null());
    for n in nodes {
        for f in FIELDS.split(' ') {
            assert!(n.get(f).is_some(), "{f} missing in {n}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Creation errors.

#[tokio::test]
async fn create_with_unknown_peer_or_session_is_not_found_and_writes_nothing() {
    let app = seeded().await;
    for (bad, names) in [
        (
            json!({"content": "x", "observerId": "nobody", "observedId": "bob"}),
            "peer nobody",
        ),
        (
            json!({"content": "x", "observerId": "alice", "observedId": "ghost"}),
            "peer ghost",
        ),
        (
            json!({"content": "x", "observerId": "alice", "observedId": "bob", "sessionId": "nope"}),
            "session nope",
        ),
    ] {
        let (code, msg) = app
            .err(
                "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
                json!({"c": [item("fine"), bad]}),
            )
            .await;
        assert_eq!(code, "NOT_FOUND", "{msg}");
        assert!(msg.contains(names), "names which: {msg}");
    }
    let (code, msg) = app
        .err(
            "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"nows\", conclusions: $c) { id } }",
            json!({"c": [item("x")]}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
    assert!(msg.contains("workspace nows"), "{msg}");
    assert_eq!(app.sql_i64("SELECT count(*) FROM conclusions").await, 0);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM peers").await,
        3,
        "no peer was created"
    );
    assert_eq!(app.sql_i64("SELECT count(*) FROM sessions").await, 1);
    assert_eq!(app.sql_i64("SELECT count(*) FROM workspaces").await, 1);
}

#[tokio::test]
async fn empty_batches_and_bad_content_are_bad_user_input() {
    let app = seeded().await;
    for bad in [
        json!([]),
        Value::Array((0..101).map(|i| item(&i.to_string())).collect()),
        json!([item("")]),
        json!([item(&"a".repeat(65_536))]),
        json!([item(&format!("{}\u{0}", "a".repeat(65_535)))]),
        json!([item("\u{0}")]),
        json!([{"content": "x", "observerId": "alice", "observedId": "bob", "metadata": 5}]),
    ] {
        let (code, msg) = app
            .err(
                "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
                json!({"c": bad}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    }
    assert_eq!(app.sql_i64("SELECT count(*) FROM conclusions").await, 0);
    // 100 is fine, returned in request order.
    let created = create(
        &app,
        Value::Array((0..100).map(|i| item(&i.to_string())).collect()),
    )
    .await;
    assert_eq!(created.len(), 100);
    assert_eq!(created[99]["content"], "99");
    assert_eq!(app.sql_i64("SELECT count(*) FROM conclusions").await, 100);
}

// ---------------------------------------------------------------------------------------------
// Lists and order.

#[tokio::test]
async fn conclusions_are_newest_first_by_default_and_oldest_first_with_asc() {
    let app = seeded().await;
    let c1 = create_one(&app, "one").await;
    let c2 = create_one(&app, "two").await;
    // A batch keeps its input order in time.
    let batch = create(&app, json!([item("three"), item("four")])).await;
    let (c3, c4) = (
        batch[0]["id"].as_str().unwrap().to_owned(),
        batch[1]["id"].as_str().unwrap().to_owned(),
    );
    let carol = create(
        &app,
        json!([{"content": "five", "observerId": "carol", "observedId": "alice"}]),
    )
    .await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        list(&app, Value::Null).await,
        vec![
            carol.as_str(),
            c4.as_str(),
            c3.as_str(),
            c2.as_str(),
            c1.as_str()
        ]
    );
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { conclusions(order: ASC) { nodes { id } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        ids(&d["workspace"]["conclusions"]["nodes"]),
        vec![
            c1.as_str(),
            c2.as_str(),
            c3.as_str(),
            c4.as_str(),
            carol.as_str()
        ]
    );
    // Paging: newest two, then the next two after the cursor.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { conclusions(first: 2) { nodes { id } pageInfo { endCursor hasNextPage } } } }",
            json!({}),
        )
        .await;
    let page = &d["workspace"]["conclusions"];
    assert_eq!(ids(&page["nodes"]), vec![carol.as_str(), c4.as_str()]);
    assert_eq!(page["pageInfo"]["hasNextPage"], true);
    let d = app
        .ok(
            "query($a: String) { workspace(id: \"ws\") { conclusions(first: 2, after: $a) { nodes { id } } } }",
            json!({"a": page["pageInfo"]["endCursor"]}),
        )
        .await;
    assert_eq!(
        ids(&d["workspace"]["conclusions"]["nodes"]),
        vec![c3.as_str(), c2.as_str()]
    );
    // A peer's conclusions are those it holds as observer.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { alice: peer(id: \"alice\") { conclusions { nodes { id observer { id } } } }
               carol: peer(id: \"carol\") { conclusions(order: ASC) { totalCount nodes { id } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        ids(&d["workspace"]["alice"]["conclusions"]["nodes"]),
        vec![c4.as_str(), c3.as_str(), c2.as_str(), c1.as_str()]
    );
    assert_eq!(
        d["workspace"]["alice"]["conclusions"]["nodes"][0]["observer"]["id"],
        "alice"
    );
    assert_eq!(d["workspace"]["carol"]["conclusions"]["totalCount"], 1);
    assert_eq!(
        ids(&d["workspace"]["carol"]["conclusions"]["nodes"]),
        vec![carol.as_str()]
    );
}

// ---------------------------------------------------------------------------------------------
// Semantic query.

const QUERY: &str = "query($q: String!, $k: Int! = 10, $d: Float, $f: JSON) { workspace(id: \"ws\") {
  queryConclusions(query: $q, topK: $k, maxDistance: $d, filters: $f) { id content observer { id } } } }";

#[tokio::test]
async fn query_conclusions_finds_the_semantically_closest_conclusion() {
    let app = TestApp::with_embedder().await;
    setup(&app).await;
    let created = create(
        &app,
        json!([
            item("The user works night shifts as a plumber"),
            item("My favorite color is blue"),
            item("Bob has two cats named Miso and Tofu"),
        ]),
    )
    .await;
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE embedding IS NOT NULL")
            .await,
        3,
        "created conclusions are embedded"
    );
    let blue = created[1]["id"].as_str().unwrap();
    let d = app
        .ok(QUERY, json!({"q": "What colors do you like?", "k": 1}))
        .await;
    let found = &d["workspace"]["queryConclusions"];
    assert_eq!(ids(found), vec![blue]);
    assert_eq!(found[0]["observer"]["id"], "alice");
    // Default topK 10 returns everything, nearest first.
    let d = app
        .ok(QUERY, json!({"q": "What colors do you like?"}))
        .await;
    let all = ids(&d["workspace"]["queryConclusions"]);
    assert_eq!(all.len(), 3);
    assert_eq!(all[0], blue);
    // maxDistance keeps only close ones (the unrelated ones are near distance 1).
    let d = app
        .ok(QUERY, json!({"q": "What colors do you like?", "d": 0.6}))
        .await;
    assert_eq!(ids(&d["workspace"]["queryConclusions"]), vec![blue]);
    // Deleted conclusions are not found; a blank query finds nothing.
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": blue}),
    )
    .await;
    let d = app
        .ok(QUERY, json!({"q": "What colors do you like?", "k": 1}))
        .await;
    assert_ne!(ids(&d["workspace"]["queryConclusions"]), vec![blue]);
    let d = app.ok(QUERY, json!({"q": "   "})).await;
    assert_eq!(d["workspace"]["queryConclusions"], json!([]));
    for bad in [
        json!({"q": "x", "k": 0}),
        json!({"q": "x", "k": 101}),
        json!({"q": "x", "k": -1}),
        json!({"q": "x", "d": -0.1}),
        json!({"q": "x", "d": 2.5}),
    ] {
        let (code, msg) = app.err(QUERY, bad).await;
        assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    }
}

#[tokio::test]
async fn query_conclusions_finds_conclusions_about_a_peer_by_its_id() {
    let app = TestApp::with_embedder().await;
    setup(&app).await;
    let created = create(
        &app,
        json!([
            {"content": "Goes to a pottery class on Thursdays", "observerId": "alice", "observedId": "carol"},
            {"content": "Paints landscapes in watercolour", "observerId": "alice", "observedId": "bob"},
            {"content": "Has two children", "observerId": "alice", "observedId": "bob"},
            {"content": "Likes green tea", "observerId": "alice", "observedId": "alice"},
        ]),
    )
    .await;
    let id = |i: usize| created[i]["id"].as_str().unwrap();
    // No content mentions a peer: the ids are what match, in both legs.
    let d = app.ok(QUERY, json!({"q": "carol", "k": 1})).await;
    assert_eq!(ids(&d["workspace"]["queryConclusions"]), vec![id(0)]);
    let d = app
        .ok(QUERY, json!({"q": "What do we know about bob?", "k": 2}))
        .await;
    let mut found = ids(&d["workspace"]["queryConclusions"]);
    found.sort();
    let mut bobs = vec![id(1), id(2)];
    bobs.sort();
    assert_eq!(found, bobs);
    // The observer's id too: every conclusion here is alice's.
    let d = app.ok(QUERY, json!({"q": "alice", "k": 10})).await;
    assert_eq!(ids(&d["workspace"]["queryConclusions"]).len(), 4);
}

#[tokio::test]
async fn query_conclusions_without_an_embedder_is_bad_user_input() {
    let app = seeded().await;
    create_one(&app, "My favorite color is blue").await;
    let (code, msg) = app.err(QUERY, json!({"q": "colors"})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(msg.contains("embedder"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Derivation.

#[tokio::test]
async fn record_derived_conclusion_validates_level_and_sources() {
    let app = seeded().await;
    let a = create_one(&app, "a").await;
    let d = app
        .ok(
            DERIVE,
            json!({"i": {"content": "b", "observerId": "alice", "observedId": "bob", "sessionId": "s",
                         "level": "INDUCTIVE", "sourceIds": [a, a]}}),
        )
        .await;
    let b = &d["recordDerivedConclusion"];
    assert_eq!(b["level"], "INDUCTIVE");
    assert_eq!(b["timesDerived"], 1);
    assert_eq!(b["sourceIds"], json!([a]), "duplicates are dropped");
    assert_eq!(b["sessionId"], "s");
    assert_eq!(b["metadata"], json!({}));

    let other_ws = {
        app.ok(
            "mutation { getOrCreatePeer(workspaceId: \"w2\", id: \"alice\") { id } }",
            json!({}),
        )
        .await;
        app.ok(
            "mutation { createConclusions(workspaceId: \"w2\", conclusions: [{content: \"elsewhere\", observerId: \"alice\", observedId: \"alice\"}]) { id } }",
            json!({}),
        )
        .await["createConclusions"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let gone = create_one(&app, "gone").await;
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": gone}),
    )
    .await;
    for (input, want) in [
        (derived_input("x", "EXPLICIT", &[&a]), "BAD_USER_INPUT"),
        (derived_input("x", "DEDUCTIVE", &[]), "BAD_USER_INPUT"),
        (derived_input("", "DEDUCTIVE", &[&a]), "BAD_USER_INPUT"),
        (
            derived_input("x", "DEDUCTIVE", &[&a, "AAAAAAAAAAAAAAAAAAAAA"]),
            "NOT_FOUND",
        ),
        (derived_input("x", "DEDUCTIVE", &[&other_ws]), "NOT_FOUND"),
        (derived_input("x", "DEDUCTIVE", &[&gone]), "NOT_FOUND"),
        (
            json!({"content": "x", "observerId": "nobody", "observedId": "bob", "level": "DEDUCTIVE", "sourceIds": [a]}),
            "NOT_FOUND",
        ),
    ] {
        let (code, msg) = app.err(DERIVE, json!({"i": input})).await;
        assert_eq!(code, want, "{msg}");
    }
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE level <> 'explicit'")
            .await,
        1
    );
}

#[tokio::test]
async fn deriving_again_reinforces_unless_the_earlier_row_is_deleted_or_about_someone_else() {
    let app = seeded().await;
    let a = create_one(&app, "a").await;
    let b = create_one(&app, "b").await;
    let first = derive(&app, "x", &[&a]).await;
    let again = app
        .ok(
            DERIVE,
            json!({"i": derived_input("x", "INDUCTIVE", &[&b, &a])}),
        )
        .await["recordDerivedConclusion"]
        .clone();
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["timesDerived"], 2);
    assert_eq!(again["sourceIds"], json!([a, b]), "old first, then new");
    assert_eq!(again["level"], "DEDUCTIVE", "the first level stays");
    // Citing itself while reinforcing is the shortest cycle: refused, as the deriver refuses it.
    let own = first["id"].as_str().unwrap();
    let (code, msg) = app
        .err(
            DERIVE,
            json!({"i": derived_input("x", "DEDUCTIVE", &[own])}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    // Same content about another observed peer: a new row.
    let other = app
        .ok(
            DERIVE,
            json!({"i": {"content": "x", "observerId": "alice", "observedId": "carol", "level": "DEDUCTIVE", "sourceIds": [a]}}),
        )
        .await["recordDerivedConclusion"]
        .clone();
    assert_ne!(other["id"], first["id"]);
    assert_eq!(other["timesDerived"], 1);
    // An explicit conclusion with that content is not reinforced either.
    let explicit_x = create_one(&app, "x").await;
    assert_ne!(explicit_x.as_str(), own);
    // After a delete, deriving starts over.
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": own}),
    )
    .await;
    let fresh = derive(&app, "x", &[&a]).await;
    assert_ne!(fresh["id"], first["id"]);
    assert_eq!(fresh["timesDerived"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_derivations_reinforce_one_row() {
    let app = seeded().await;
    let sources: Vec<String> = create(
        &app,
        Value::Array((0..17).map(|i| item(&format!("premise {i}"))).collect()),
    )
    .await
    .iter()
    .map(|c| c["id"].as_str().unwrap().to_owned())
    .collect();
    let first = derive(&app, "bob is a night owl", &[&sources[0]]).await;
    let mut tasks = Vec::new();
    for s in sources.iter().skip(1) {
        let schema = app.schema.clone();
        let vars =
            json!({"i": derived_input("bob is a night owl", "DEDUCTIVE", &[&sources[0], s])});
        tasks.push(tokio::spawn(async move {
            let req = async_graphql::Request::new(DERIVE)
                .variables(async_graphql::Variables::from_json(vars));
            let resp = honcho_graphql::graphql::execute(&schema, req).await;
            assert!(resp.errors.is_empty(), "{:?}", resp.errors);
            resp.data.into_json().unwrap()["recordDerivedConclusion"]["timesDerived"]
                .as_i64()
                .unwrap()
        }));
    }
    let mut counts = Vec::new();
    for t in tasks {
        counts.push(t.await.unwrap());
    }
    counts.sort();
    assert_eq!(
        counts,
        (2..=17).collect::<Vec<i64>>(),
        "each saw its own increment"
    );
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE content = 'bob is a night owl'")
            .await,
        1,
        "exactly one row"
    );
    let d = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") { conclusion(id: $id) { timesDerived sourceIds sources { id } } } }",
            json!({"id": first["id"]}),
        )
        .await;
    let c = &d["workspace"]["conclusion"];
    assert_eq!(c["timesDerived"], 17);
    let got: Vec<String> = c["sourceIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got[0], sources[0], "the first source stays first");
    assert_eq!(
        got.iter().collect::<HashSet<_>>(),
        sources.iter().collect::<HashSet<_>>(),
        "sources unioned, each once"
    );
    assert_eq!(got.len(), 17);
    assert_eq!(ids(&c["sources"]), got, "sources in sourceIds order");
}

// ---------------------------------------------------------------------------------------------
// The reasoning graph.

/// A ← B, A ← C, B ← D, C ← D (D cites B and C, both cite A).
async fn diamond(app: &TestApp) -> [String; 4] {
    let a = create_one(app, "A: bob wakes at 5am").await;
    let b = derive_id(app, "B: bob is an early riser", &[&a]).await;
    let c = derive_id(app, "C: bob likes quiet mornings", &[&a]).await;
    let d = derive_id(app, "D: bob is a morning person", &[&b, &c]).await;
    [a, b, c, d]
}

#[tokio::test]
async fn a_diamond_gives_each_node_once_with_every_edge() {
    let app = seeded().await;
    let [a, b, c, d] = diamond(&app).await;

    let t = tree(&app, &d, "SOURCES", 5).await;
    assert_eq!(
        ids(&t["nodes"]),
        vec![d.as_str(), b.as_str(), c.as_str(), a.as_str()],
        "root, then by depth"
    );
    assert_eq!(
        edges(&t),
        HashSet::from([edge(&d, &b), edge(&d, &c), edge(&b, &a), edge(&c, &a)])
    );
    assert_eq!(
        t["edges"].as_array().unwrap().len(),
        4,
        "no duplicate edges"
    );
    assert_eq!(t["truncated"], false);

    let t = tree(&app, &a, "DERIVED", 5).await;
    assert_eq!(
        ids(&t["nodes"]),
        vec![a.as_str(), b.as_str(), c.as_str(), d.as_str()]
    );
    assert_eq!(
        edges(&t),
        HashSet::from([edge(&d, &b), edge(&d, &c), edge(&b, &a), edge(&c, &a)]),
        "edges point from the citing conclusion to its source in both directions"
    );
    assert_eq!(t["truncated"], false);

    // From the middle: B's sources are A; B's consequences are D.
    let t = tree(&app, &b, "SOURCES", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![b.as_str(), a.as_str()]);
    let t = tree(&app, &b, "DERIVED", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![b.as_str(), d.as_str()]);
    assert_eq!(edges(&t), HashSet::from([edge(&d, &b)]));

    // sources in sourceIds order, derived oldest first.
    let r = app
        .ok(
            "query($a: ID!, $d: ID!) { workspace(id: \"ws\") {
               d: conclusion(id: $d) { sources { id } derived { id } }
               a: conclusion(id: $a) { derived { id derived { id } } } } }",
            json!({"a": a, "d": d}),
        )
        .await;
    assert_eq!(
        ids(&r["workspace"]["d"]["sources"]),
        vec![b.as_str(), c.as_str()]
    );
    assert_eq!(r["workspace"]["d"]["derived"], json!([]));
    assert_eq!(
        ids(&r["workspace"]["a"]["derived"]),
        vec![b.as_str(), c.as_str()]
    );
    assert_eq!(
        ids(&r["workspace"]["a"]["derived"][0]["derived"]),
        vec![d.as_str()]
    );
}

#[tokio::test]
async fn deriving_a_conclusion_from_its_own_consequence_is_refused() {
    let app = seeded().await;
    let a = create_one(&app, "a").await;
    let b = derive_id(&app, "b", &[&a]).await;
    let c = derive_id(&app, "c", &[&b]).await;
    let d = derive_id(&app, "d", &[&c]).await;
    // Reinforcing B from C (derived from B), or from D (two steps down), would close a cycle.
    for source in [&c, &d] {
        let (code, msg) = app
            .err(
                DERIVE,
                json!({"i": derived_input("b", "DEDUCTIVE", &[source.as_str()])}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{msg}");
        assert!(msg.contains("cycle"), "{msg}");
    }
    let t = tree(&app, &b, "SOURCES", 20).await;
    assert_eq!(
        ids(&t["nodes"]),
        vec![b.as_str(), a.as_str()],
        "B unchanged"
    );
    // Reinforcing from an unrelated premise still works, and new content from C is no cycle.
    let e = create_one(&app, "e").await;
    let again = derive(&app, "b", &[&e]).await;
    assert_eq!(again["id"], b.as_str());
    assert_eq!(again["timesDerived"], 2);
    assert_eq!(again["sourceIds"], json!([a, e]));
    derive_id(&app, "b follows from c", &[&c]).await;
}

#[tokio::test]
async fn trees_terminate_on_cycles() {
    let app = seeded().await;
    // The API refuses cycles, but rows written before it did, or by hand, may hold one:
    // B cites A and C, while C cites B.
    let a = create_one(&app, "a").await;
    let b = derive_id(&app, "b", &[&a]).await;
    let c = derive_id(&app, "c", &[&b]).await;
    app.store
        .db()
        .execute_unprepared(&format!(
            "UPDATE conclusions SET source_ids = ARRAY['{a}', '{c}'] WHERE id = '{b}'"
        ))
        .await
        .unwrap();

    let t = tree(&app, &b, "SOURCES", 20).await;
    assert_eq!(ids(&t["nodes"]).len(), 3);
    assert_eq!(
        ids(&t["nodes"]).iter().collect::<HashSet<_>>(),
        HashSet::from([&a, &b, &c])
    );
    assert_eq!(
        edges(&t),
        HashSet::from([edge(&b, &a), edge(&b, &c), edge(&c, &b)])
    );
    assert_eq!(t["truncated"], false);
    let t = tree(&app, &c, "DERIVED", 20).await;
    assert_eq!(ids(&t["nodes"]), vec![c.as_str(), b.as_str()]);
    assert_eq!(edges(&t), HashSet::from([edge(&b, &c), edge(&c, &b)]));

    // A longer cycle made in SQL: x → y → z → x (each citing the next), plus z → a.
    let x = derive_id(&app, "x", &[&a]).await;
    let y = derive_id(&app, "y", &[&x]).await;
    let z = derive_id(&app, "z", &[&y]).await;
    app.store
        .db()
        .execute_unprepared(&format!(
            "UPDATE conclusions SET source_ids = ARRAY['{y}'] WHERE id = '{x}';
             UPDATE conclusions SET source_ids = ARRAY['{z}'] WHERE id = '{y}';
             UPDATE conclusions SET source_ids = ARRAY['{x}', '{a}'] WHERE id = '{z}';"
        ))
        .await
        .unwrap();
    let t = tree(&app, &x, "SOURCES", 20).await;
    assert_eq!(
        ids(&t["nodes"]),
        vec![x.as_str(), y.as_str(), z.as_str(), a.as_str()]
    );
    assert_eq!(
        edges(&t),
        HashSet::from([edge(&x, &y), edge(&y, &z), edge(&z, &x), edge(&z, &a)])
    );
    assert_eq!(t["truncated"], false);
    let t = tree(&app, &x, "DERIVED", 20).await;
    assert_eq!(ids(&t["nodes"]), vec![x.as_str(), z.as_str(), y.as_str()]);
    assert_eq!(t["truncated"], false);
    // Cut inside the cycle: y at depth 1 still has an unvisited neighbour (z).
    let t = tree(&app, &x, "SOURCES", 1).await;
    assert_eq!(ids(&t["nodes"]), vec![x.as_str(), y.as_str()]);
    assert_eq!(t["truncated"], true);
    // Cut where the cycle closes: z's neighbours (x, a)... a is new, so truncated.
    let t = tree(&app, &x, "SOURCES", 2).await;
    assert_eq!(ids(&t["nodes"]), vec![x.as_str(), y.as_str(), z.as_str()]);
    assert_eq!(t["truncated"], true);
    assert_eq!(
        edges(&t),
        HashSet::from([edge(&x, &y), edge(&y, &z), edge(&z, &x)]),
        "edges between nodes, the closing one included"
    );
}

#[tokio::test]
async fn truncated_is_true_only_when_max_depth_cuts() {
    let app = seeded().await;
    // A ← B ← C ← D
    let a = create_one(&app, "a").await;
    let b = derive_id(&app, "b", &[&a]).await;
    let c = derive_id(&app, "c", &[&b]).await;
    let d = derive_id(&app, "d", &[&c]).await;
    let t = tree(&app, &d, "SOURCES", 2).await;
    assert_eq!(ids(&t["nodes"]), vec![d.as_str(), c.as_str(), b.as_str()]);
    assert_eq!(edges(&t), HashSet::from([edge(&d, &c), edge(&c, &b)]));
    assert_eq!(t["truncated"], true);
    let t = tree(&app, &d, "SOURCES", 3).await;
    assert_eq!(
        ids(&t["nodes"]),
        vec![d.as_str(), c.as_str(), b.as_str(), a.as_str()]
    );
    assert_eq!(t["truncated"], false, "depth 3 reaches the end exactly");
    let t = tree(&app, &a, "DERIVED", 1).await;
    assert_eq!(ids(&t["nodes"]), vec![a.as_str(), b.as_str()]);
    assert_eq!(t["truncated"], true);
    // A lone conclusion is a tree of one.
    let t = tree(&app, &a, "SOURCES", 1).await;
    assert_eq!(ids(&t["nodes"]), vec![a.as_str()]);
    assert_eq!(t["edges"], json!([]));
    assert_eq!(t["truncated"], false);
    // Defaults: SOURCES, depth 5.
    let r = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") { conclusion(id: $id) { reasoningTree { nodes { id } truncated } } } }",
            json!({"id": d}),
        )
        .await;
    assert_eq!(
        ids(&r["workspace"]["conclusion"]["reasoningTree"]["nodes"]).len(),
        4
    );
    for bad in [0, 21] {
        let (code, msg) = app
            .err(
                "query($id: ID!, $m: Int!) { workspace(id: \"ws\") { conclusion(id: $id) { reasoningTree(maxDepth: $m) { truncated } } } }",
                json!({"id": d, "m": bad}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    }
}

#[tokio::test]
async fn max_nodes_keeps_the_nearest_nodes_and_sets_truncated() {
    let app = seeded().await;
    // A is cited by B1..B4; each Bi by one Ci: 9 nodes in all.
    let a = create_one(&app, "a").await;
    let mut bs = Vec::new();
    for i in 0..4 {
        let b = derive_id(&app, &format!("b{i}"), &[&a]).await;
        derive_id(&app, &format!("c{i}"), &[&b]).await;
        bs.push(b);
    }
    let q = "query($id: ID!, $n: Int!) { workspace(id: \"ws\") { conclusion(id: $id) {
               reasoningTree(direction: DERIVED, maxDepth: 5, maxNodes: $n) { nodes { id } edges { from to } truncated } } } }";
    let cut = |d: &Value| d["workspace"]["conclusion"]["reasoningTree"].clone();
    let t = cut(&app.ok(q, json!({"id": a, "n": 9})).await);
    assert_eq!(ids(&t["nodes"]).len(), 9);
    assert_eq!(t["truncated"], false, "exactly the whole graph");
    let t = cut(&app.ok(q, json!({"id": a, "n": 5})).await);
    let mut want = vec![a.clone()];
    want.extend(bs.iter().cloned());
    assert_eq!(
        ids(&t["nodes"]),
        want,
        "the root, then the nearest level in creation order"
    );
    assert_eq!(t["truncated"], true);
    // Edges only between returned nodes.
    assert_eq!(t["edges"].as_array().unwrap().len(), 4);
    let t = cut(&app.ok(q, json!({"id": a, "n": 1})).await);
    assert_eq!(ids(&t["nodes"]), vec![a.clone()]);
    assert_eq!(t["truncated"], true);
    for bad in [0, 10_001] {
        let (code, msg) = app.err(q, json!({"id": a, "n": bad})).await;
        assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    }
}

#[tokio::test]
async fn soft_deleted_conclusions_are_absent_from_trees_sources_and_derived() {
    let app = seeded().await;
    let [a, b, c, d] = diamond(&app).await;
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": b}),
    )
    .await;
    let t = tree(&app, &d, "SOURCES", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![d.as_str(), c.as_str(), a.as_str()]);
    assert_eq!(edges(&t), HashSet::from([edge(&d, &c), edge(&c, &a)]));
    let t = tree(&app, &a, "DERIVED", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![a.as_str(), c.as_str(), d.as_str()]);
    let r = app
        .ok(
            "query($a: ID!, $d: ID!) { workspace(id: \"ws\") {
               d: conclusion(id: $d) { sourceIds sources { id } }
               a: conclusion(id: $a) { derived { id } } } }",
            json!({"a": a, "d": d}),
        )
        .await;
    assert_eq!(
        r["workspace"]["d"]["sourceIds"],
        json!([b, c]),
        "provenance is kept as recorded"
    );
    assert_eq!(ids(&r["workspace"]["d"]["sources"]), vec![c.as_str()]);
    assert_eq!(ids(&r["workspace"]["a"]["derived"]), vec![c.as_str()]);

    // Deleting C too cuts D off from A: deleted nodes are not walked through.
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": c}),
    )
    .await;
    let t = tree(&app, &d, "SOURCES", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![d.as_str()]);
    assert_eq!(t["truncated"], false);
    let t = tree(&app, &a, "DERIVED", 5).await;
    assert_eq!(ids(&t["nodes"]), vec![a.as_str()]);
    // A deleted root has no tree: the conclusion itself is gone.
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": d}),
    )
    .await;
    let r = app
        .ok(
            "query($id: ID!) { workspace(id: \"ws\") { conclusion(id: $id) { reasoningTree { truncated } } } }",
            json!({"id": d}),
        )
        .await;
    assert!(r["workspace"]["conclusion"].is_null());
}

// ---------------------------------------------------------------------------------------------
// Batching.

#[tokio::test]
async fn derived_comes_a_page_at_a_time_oldest_first() {
    let app = seeded().await;
    let premise = create_one(&app, "the premise").await;
    let mut derived = Vec::new();
    for k in 0..25 {
        derived.push(derive_id(&app, &format!("derived {k}"), &[&premise]).await);
    }
    let page = |first: Option<i64>, after: Option<&str>| {
        let app = &app;
        let premise = premise.clone();
        let after = after.map(str::to_owned);
        async move {
            app.exec(
                "query($p: ID!, $f: Int, $a: ID) { workspace(id: \"ws\") {
                   conclusion(id: $p) { derived(first: $f, after: $a) { id } } } }",
                json!({"p": premise, "f": first, "a": after}),
            )
            .await
        }
    };
    // Without arguments: the first 20 (it was every one of them, however many).
    let d = page(None, None).await;
    assert_eq!(
        ids(&d["data"]["workspace"]["conclusion"]["derived"]),
        derived[..20]
    );
    let d = page(Some(10), Some(&derived[9])).await;
    assert_eq!(
        ids(&d["data"]["workspace"]["conclusion"]["derived"]),
        derived[10..20]
    );
    let d = page(Some(10), Some(&derived[19])).await;
    assert_eq!(
        ids(&d["data"]["workspace"]["conclusion"]["derived"]),
        derived[20..]
    );
    // The same pages in a list go through the batch (prefetch) path.
    let d = app
        .ok(
            "query($a: ID) { workspace(id: \"ws\") { conclusions(first: 1, filters: {level: \"explicit\"}) {
               nodes { first: derived(first: 3) { id } next: derived(first: 3, after: $a) { id } } } } }",
            json!({"a": derived[2]}),
        )
        .await;
    let node = &d["workspace"]["conclusions"]["nodes"][0];
    assert_eq!(ids(&node["first"]), derived[..3]);
    assert_eq!(ids(&node["next"]), derived[3..6]);
    for bad in [0, 101] {
        let d = page(Some(bad), None).await;
        assert_eq!(
            d["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
            "{d}"
        );
    }
}

#[tokio::test]
async fn derived_on_fifty_conclusions_is_one_statement() {
    let app = seeded().await;
    // 50 explicit conclusions held by alice; 10 derived ones held by bob, each citing 5 of them.
    let premises: Vec<String> = create(
        &app,
        Value::Array((0..50).map(|i| item(&format!("premise {i}"))).collect()),
    )
    .await
    .iter()
    .map(|c| c["id"].as_str().unwrap().to_owned())
    .collect();
    for k in 0..10 {
        let cited: Vec<&str> = premises[k * 5..k * 5 + 5]
            .iter()
            .map(String::as_str)
            .collect();
        app.ok(
            DERIVE,
            json!({"i": {"content": format!("derived {k}"), "observerId": "bob", "observedId": "alice",
                         "level": "INDUCTIVE", "sourceIds": cited}}),
        )
        .await;
    }
    app.take_statements();
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { peer(id: \"alice\") { conclusions(first: 50) { nodes { id derived { id } } } } } }",
            json!({}),
        )
        .await;
    let nodes = d["workspace"]["peer"]["conclusions"]["nodes"]
        .as_array()
        .unwrap();
    assert_eq!(nodes.len(), 50);
    assert!(
        nodes
            .iter()
            .all(|n| n["derived"].as_array().unwrap().len() == 1)
    );
    let statements = app.take_statements();
    assert_eq!(
        statements, 3,
        "workspace with its peer (one statement), the list, and ONE statement for derived of all 50"
    );

    // Deeper: each level of nesting is one statement per kind, whatever the list length.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { conclusions(first: 60) { nodes { id observer { id }
                 derived { id observed { id } sources { id } derived { id } } sources { id } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["workspace"]["conclusions"]["nodes"]
            .as_array()
            .unwrap()
            .len(),
        60
    );
    let statements = app.take_statements();
    // workspace, list, then one batch each for observer peers, derived and sources. The level
    // under `derived` asks for alice (observed), the premises (sources) and the derived lists of
    // derived conclusions: all already loaded by the level above, so no statement.
    assert_eq!(
        statements, 5,
        "nested derived/sources on 60 conclusions: one statement per kind"
    );
}

// ---------------------------------------------------------------------------------------------
// Filters (need the real filter DSL; the placeholder accepts only an empty filter).

/// alice: explicit "cats" {category: preference}, explicit "dogs" {category: fact, importance:
/// high}; bob: a deductive (times 3) and an inductive conclusion, the deductive one tagged
/// {importance: high}. Returns [cats, dogs, deductive, inductive].
async fn filter_fixture(app: &TestApp) -> [String; 4] {
    setup(app).await;
    let created = create(
        app,
        json!([
            {"content": "likes cats", "observerId": "alice", "observedId": "bob",
             "metadata": {"category": "preference"}},
            {"content": "has dogs", "observerId": "alice", "observedId": "bob",
             "metadata": {"category": "fact", "importance": "high"}}
        ]),
    )
    .await;
    let cats = created[0]["id"].as_str().unwrap().to_owned();
    let dogs = created[1]["id"].as_str().unwrap().to_owned();
    let ded = derive_id(app, "likes animals", &[&cats]).await;
    derive(app, "likes animals", &[&dogs]).await;
    derive(app, "likes animals", &[&cats]).await;
    app.ok(
        "mutation($id: ID!) { updateConclusion(workspaceId: \"ws\", id: $id, metadata: {importance: \"high\"}) { id } }",
        json!({"id": ded}),
    )
    .await;
    let ind = app
        .ok(
            DERIVE,
            json!({"i": derived_input("will adopt a pet", "INDUCTIVE", &[&cats, &dogs])}),
        )
        .await["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    [cats, dogs, ded, ind]
}

fn set(v: Vec<String>) -> HashSet<String> {
    v.into_iter().collect()
}

fn set_of(v: &[&String]) -> HashSet<String> {
    v.iter().map(|s| (*s).clone()).collect()
}

#[tokio::test]
async fn filter_conclusions_by_metadata() {
    let app = TestApp::new().await;
    let [cats, dogs, ded, _] = filter_fixture(&app).await;
    assert_eq!(
        list(&app, json!({"metadata": {"category": "preference"}})).await,
        vec![cats.clone()]
    );
    assert_eq!(
        set(list(&app, json!({"metadata": {"importance": "high"}})).await),
        set_of(&[&dogs, &ded])
    );
    assert!(
        list(&app, json!({"metadata": {"category": "nope"}}))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn filter_conclusions_by_level() {
    let app = TestApp::new().await;
    let [cats, dogs, ded, ind] = filter_fixture(&app).await;
    assert_eq!(
        list(&app, json!({"level": "deductive"})).await,
        vec![ded.clone()]
    );
    assert_eq!(
        list(&app, json!({"level": "DEDUCTIVE"})).await,
        vec![ded.clone()],
        "the enum spelling works too"
    );
    assert_eq!(
        set(list(&app, json!({"level": {"in": ["deductive", "inductive"]}})).await),
        set_of(&[&ded, &ind])
    );
    assert_eq!(
        set(list(&app, json!({"level": "explicit"})).await),
        set_of(&[&cats, &dogs])
    );
    let (code, _) = app
        .err(
            "{ workspace(id: \"ws\") { conclusions(filters: {level: \"speculative\"}) { nodes { id } } } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
}

#[tokio::test]
async fn filter_conclusions_by_times_derived() {
    let app = TestApp::new().await;
    let [_, _, ded, _] = filter_fixture(&app).await;
    assert_eq!(
        list(&app, json!({"times_derived": {"gte": 3}})).await,
        vec![ded.clone()]
    );
    assert_eq!(
        list(&app, json!({"timesDerived": 3})).await,
        vec![ded.clone()]
    );
    assert_eq!(
        list(&app, json!({"timesDerived": {"lt": 3}})).await.len(),
        3
    );
}

#[tokio::test]
async fn filter_conclusions_by_created_at() {
    let app = TestApp::new().await;
    let [cats, dogs, ded, ind] = filter_fixture(&app).await;
    app.store
        .db()
        .execute_unprepared(&format!(
            "UPDATE conclusions SET created_at = '2020-06-01T00:00:00Z' WHERE id = '{cats}'"
        ))
        .await
        .unwrap();
    assert_eq!(
        list(&app, json!({"created_at": {"lt": "2021-01-01"}})).await,
        vec![cats.clone()]
    );
    assert_eq!(
        set(list(&app, json!({"createdAt": {"gte": "2021-01-01T00:00:00Z"}})).await),
        set_of(&[&dogs, &ded, &ind])
    );
}

#[tokio::test]
async fn filter_conclusions_with_a_compound_and() {
    let app = TestApp::new().await;
    let [_, _, ded, _] = filter_fixture(&app).await;
    // The example of Honcho v3.0.12's documentation: observer, level in a set, and a metadata tag.
    let f = json!({"AND": [
        {"observer_id": "alice"},
        {"level": {"in": ["deductive", "inductive"]}},
        {"metadata": {"importance": "high"}}
    ]});
    assert_eq!(list(&app, f).await, vec![ded.clone()]);
    let f = json!({"AND": [{"observerId": "bob"}, {"level": "deductive"}]});
    assert!(list(&app, f).await.is_empty());
    // The same DSL narrows a peer's list.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { peer(id: \"alice\") { conclusions(filters: {level: \"inductive\"}) { nodes { id } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        ids(&d["workspace"]["peer"]["conclusions"]["nodes"]).len(),
        1
    );
}

#[tokio::test]
async fn filter_query_conclusions_applies_filters_before_ranking() {
    let app = TestApp::with_embedder().await;
    setup(&app).await;
    let created = create(
        &app,
        json!([
            {"content": "My favorite color is blue", "observerId": "alice", "observedId": "bob",
             "metadata": {"topic": "colors"}},
            {"content": "Bob has two cats", "observerId": "alice", "observedId": "bob",
             "metadata": {"topic": "pets"}}
        ]),
    )
    .await;
    let d = app
        .ok(
            QUERY,
            json!({"q": "What colors do you like?", "k": 1, "f": {"metadata": {"topic": "pets"}}}),
        )
        .await;
    assert_eq!(
        ids(&d["workspace"]["queryConclusions"]),
        vec![created[1]["id"].as_str().unwrap()]
    );
}
