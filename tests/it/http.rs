use honcho_graphql::graphql::{Limits, build_schema};
use serde_json::{Value, json};

use crate::harness::{Served, TestApp, get_json, post_json};

#[tokio::test]
async fn serves_graphql_health_and_ready_over_http() {
    let app = TestApp::new().await;
    let schema = build_schema(app.store.clone(), &Limits::default());
    let router = honcho_graphql::http::router(schema, app.store.clone(), 1024 * 1024);
    let server = Served::start(router).await;
    let client = honcho_graphql::outbound::client();

    let health = get_json(&server.url("/health")).await;
    assert_eq!(health, json!({"status": "ok"}));
    let ready = client.get(server.url("/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    let create = json!({"query": "mutation { getOrCreateWorkspace(id: \"w\") { id } }"});
    let resp = post_json(&server.url("/graphql"), &create).await;
    assert_eq!(resp["data"]["getOrCreateWorkspace"]["id"], "w");

    let too_big = "x".repeat(2 * 1024 * 1024);
    let status = client
        .post(server.url("/graphql"))
        .header("content-type", "application/json")
        .body(too_big)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 413);
}

#[tokio::test]
async fn errors_never_leak_sql() {
    let app = TestApp::new().await;
    // A conclusion-free workspace id of 600 chars passes GraphQL but the store refuses it; the
    // message is ours, not PostgreSQL's.
    let (code, msg) = app
        .err(
            "mutation($id: ID!) { getOrCreateWorkspace(id: $id) { id } }",
            json!({"id": "y".repeat(600)}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        !msg.to_lowercase().contains("select") && !msg.contains("violates"),
        "{msg}"
    );

    // Real database errors, on a read and on a write: a column the queries need is gone, and a
    // trigger refuses inserts with a message full of SQL. The client sees a code and an id only.
    use sea_orm::ConnectionTrait;
    app.ok(
        "mutation { getOrCreatePeer(workspaceId: \"w\", id: \"p\") { id } }",
        json!({}),
    )
    .await;
    app.store
        .db()
        .execute_unprepared(
            "ALTER TABLE peers RENAME COLUMN metadata TO metadata_gone;
             CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'SELECT secret FROM messages WHERE x violates y'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await
        .unwrap();
    for query in [
        "{ workspace(id: \"w\") { peers { nodes { id metadata } } } }",
        "mutation { createMessages(workspaceId: \"w\", sessionId: \"s\", messages: [{peerId: \"p\", content: \"hi\"}]) { id } }",
    ] {
        let (code, msg) = app.err(query, json!({})).await;
        assert_eq!(code, "INTERNAL_SERVER_ERROR", "{query}: {msg}");
        assert!(msg.starts_with("internal server error (id "), "{msg}");
        let lower = msg.to_lowercase();
        for leak in [
            "select", "secret", "metadata", "column", "peers", "violates",
        ] {
            assert!(!lower.contains(leak), "{leak} in {msg}");
        }
    }
}

#[tokio::test]
async fn serves_the_playground_with_an_index_fallback() {
    let app = TestApp::new().await;
    let dir = std::env::temp_dir().join(format!("honcho-playground-{}", nanoid::nanoid!()));
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("index.html"), "<!doctype html><p>playground</p>").unwrap();
    std::fs::write(dir.join("assets/app.js"), "console.log(1)").unwrap();
    let schema = build_schema(app.store.clone(), &Limits::default());
    let router = honcho_graphql::http::router_with_playground(
        schema,
        app.store.clone(),
        1024 * 1024,
        Some(&dir),
    );
    let server = Served::start(router).await;
    let client = honcho_graphql::outbound::client();
    let get = |path: &str| client.get(server.url(path)).send();

    for path in ["/", "/index.html", "/tree"] {
        let resp = get(path).await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert!(resp.text().await.unwrap().contains("playground"), "{path}");
    }
    let js = get("/assets/app.js").await.unwrap();
    assert_eq!(js.status(), 200);
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
    // The API routes win over the playground's fallback.
    let health: Value = get("/health").await.unwrap().json().await.unwrap();
    assert_eq!(health, json!({"status": "ok"}));
    let query = json!({"query": "{ workspace(id: \"nope\") { id } }"});
    let resp = post_json(&server.url("/graphql"), &query).await;
    assert_eq!(resp["data"]["workspace"], Value::Null);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();

    // Without a playground, `/` says how to build one.
    let schema = build_schema(app.store.clone(), &Limits::default());
    let router = honcho_graphql::http::router(schema, app.store.clone(), 1024 * 1024);
    let server = Served::start(router).await;
    let note = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(note.status(), 200);
    assert!(note.text().await.unwrap().contains("make playground"));
}

#[tokio::test]
async fn serve_from_any_directory_serves_the_built_in_playground() {
    let app = TestApp::new().await;
    let elsewhere = std::env::temp_dir();
    let server = crate::harness::ServerProcess::start_in(&app._db, &[], &elsewhere).await;
    let index = honcho_graphql::outbound::client()
        .get(server.url("/tree"))
        .send()
        .await
        .unwrap();
    assert_eq!(index.status(), 200);
    let page = index.text().await.unwrap();
    // Debug builds read the source tree's playground/dist (release builds carry it inside).
    let dist = concat!(env!("CARGO_MANIFEST_DIR"), "/playground/dist/index.html");
    match std::fs::read_to_string(dist) {
        Ok(built) => assert_eq!(page, built),
        Err(_) => assert!(page.contains("make playground"), "{page}"),
    }
}
