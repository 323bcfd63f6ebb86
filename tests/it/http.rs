use honcho_graphql::graphql::{Limits, build_schema};
use serde_json::{Value, json};

use crate::harness::TestApp;

#[tokio::test]
async fn serves_graphql_health_and_ready_over_http() {
    let app = TestApp::new().await;
    let schema = build_schema(app.store.clone(), &Limits::default());
    let router = honcho_graphql::http::router(schema, app.store.clone(), 1024 * 1024);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let client = reqwest::Client::new();
    let base = format!("http://{addr}");

    let health: Value = client
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health, json!({"status": "ok"}));
    let ready = client.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    let resp: Value = client
        .post(format!("{base}/graphql"))
        .json(&json!({"query": "mutation { getOrCreateWorkspace(id: \"w\") { id } }"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["data"]["getOrCreateWorkspace"]["id"], "w");

    let too_big = "x".repeat(2 * 1024 * 1024);
    let status = client
        .post(format!("{base}/graphql"))
        .header("content-type", "application/json")
        .body(too_big)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 413);
    server.abort();
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
}
