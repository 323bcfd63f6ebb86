//! Webhooks: endpoints over GraphQL and REST, the outbox written with the change it reports,
//! signed deliveries to a local receiver, retries then the dead letter, refused targets, and
//! the keys that may manage them.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use honcho_graphql::auth::KeySpec;
use honcho_graphql::graphql::{self, Limits};
use honcho_graphql::store::webhook::WebhookPolicy;
use honcho_graphql::webhook::{Outcome, WebhookArgs, Webhooks, sign};
use reqwest::Method;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::{AppServer, Served, TestApp, bearer};

const SECRET: &str = "whsec-test";

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: String,
}

/// A local webhook receiver on 127.0.0.1 answering `status` to every POST.
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    server: Served,
}

impl Receiver {
    async fn start(status: u16) -> Receiver {
        type Shared = (Arc<Mutex<Vec<Received>>>, Arc<AtomicU16>);
        async fn hook(
            State((got, status)): State<Shared>,
            headers: HeaderMap,
            body: Bytes,
        ) -> StatusCode {
            got.lock().unwrap().push(Received {
                headers,
                body: String::from_utf8(body.to_vec()).unwrap(),
            });
            StatusCode::from_u16(status.load(Ordering::SeqCst)).unwrap()
        }
        let got = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(AtomicU16::new(status));
        let router = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state((got.clone(), status.clone()));
        Receiver {
            got,
            status,
            server: Served::start(router).await,
        }
    }

    fn url(&self) -> String {
        self.server.url("/hook")
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

/// An app whose store accepts loopback targets (HONCHO_WEBHOOK_ALLOW_PRIVATE=true), with auth on.
async fn app_allowing_private() -> TestApp {
    allowing_private(TestApp::new().await, false)
}

/// `app` with loopback targets accepted, auth on, and messages queued for the deriver when
/// `derive`.
fn allowing_private(mut app: TestApp, derive: bool) -> TestApp {
    app.store = app
        .store
        .clone()
        .with_derivation(derive)
        .with_webhook_policy(WebhookPolicy {
            allow_private: true,
            ..WebhookPolicy::default()
        });
    app.schema = graphql::build_schema_with_auth(
        app.store.clone(),
        &Limits::default(),
        crate::harness::auth(),
    );
    app
}

fn args(max_attempts: u32) -> WebhookArgs {
    WebhookArgs {
        secret: Some(SECRET.into()),
        allow_private: true,
        max_attempts,
        backoff_ms: 1,
        max_backoff_ms: 5,
        timeout_ms: 2_000,
        ..WebhookArgs::default()
    }
}

fn admin() -> String {
    bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    })
}

async fn ok_as(app: &TestApp, key: &str, query: &str, vars: Value) -> Value {
    let resp = app.exec_as(Some(key), query, vars).await;
    assert!(resp.get("errors").is_none(), "unexpected errors: {resp}");
    resp["data"].clone()
}

/// (extensions.code) of the first error.
async fn code_as(app: &TestApp, key: &str, query: &str, vars: Value) -> String {
    let resp = app.exec_as(Some(key), query, vars).await;
    resp["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {resp}"))
        .to_owned()
}

const CREATE: &str = "mutation($w: ID!, $u: String!) { createWebhook(workspaceId: $w, url: $u) { id workspaceId url createdAt } }";
const LIST: &str = "query($w: ID!) { workspace(id: $w) { webhooks { id url } } }";
const DELIVERIES: &str = "query($w: ID!, $s: WebhookDeliveryStatus) { workspace(id: $w) { webhookDeliveries(status: $s) { id eventType status attempts lastStatus lastError payload deliveredAt } } }";

async fn workspace_with_session(app: &TestApp, key: &str) {
    ok_as(
        app,
        key,
        r#"mutation { getOrCreateSession(workspaceId: "w", id: "s") { id } }"#,
        json!({}),
    )
    .await;
}

async fn say(app: &TestApp, key: &str, content: &str) -> Value {
    ok_as(
        app,
        key,
        r#"mutation($c: String!) { createMessages(workspaceId: "w", sessionId: "s", messages: [{peerId: "alice", content: $c}]) { id seqInSession } }"#,
        json!({"c": content}),
    )
    .await["createMessages"][0]
        .clone()
}

/// Session s of workspace w, and a receiver answering `status` registered for w's events.
async fn registered(status: u16) -> (TestApp, String, Receiver) {
    registered_on(app_allowing_private().await, status).await
}

async fn registered_on(app: TestApp, status: u16) -> (TestApp, String, Receiver) {
    let key = admin();
    let receiver = Receiver::start(status).await;
    workspace_with_session(&app, &key).await;
    ok_as(&app, &key, CREATE, json!({"w": "w", "u": receiver.url()})).await;
    (app, key, receiver)
}

/// Runs the worker until a round finds nothing due.
async fn deliver_all(hooks: &Webhooks) -> Vec<Outcome> {
    let mut all = Vec::new();
    for _ in 0..100 {
        let round = hooks.run_once("test").await.unwrap();
        if round.is_empty() {
            // Retries may be due a few ms later.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let again = hooks.run_once("test").await.unwrap();
            if again.is_empty() {
                return all;
            }
            all.extend(again);
        } else {
            all.extend(round);
        }
    }
    panic!("deliveries never settled: {all:?}");
}

#[tokio::test]
async fn webhooks_are_created_listed_and_deleted_over_graphql_and_rest() {
    let app = app_allowing_private().await;
    let key = admin();
    workspace_with_session(&app, &key).await;
    let first = ok_as(
        &app,
        &key,
        CREATE,
        json!({"w": "w", "u": "http://127.0.0.1:9/a"}),
    )
    .await;
    let again = ok_as(
        &app,
        &key,
        CREATE,
        json!({"w": "w", "u": "http://127.0.0.1:9/a"}),
    )
    .await;
    assert_eq!(first, again, "get-or-create by URL");
    assert_eq!(first["createWebhook"]["workspaceId"], "w");
    let id = first["createWebhook"]["id"].as_str().unwrap().to_owned();

    let http = AppServer::start(app).await;
    let call = |method: Method, path: &str, body: Option<Value>| {
        let req = http
            .client
            .request(method, format!("{}{path}", http.base))
            .header("authorization", &key);
        let req = match body {
            Some(b) => req.json(&b),
            None => req,
        };
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        }
    };
    let (status, created) = call(
        Method::POST,
        "/v3/workspaces/w/webhooks",
        Some(json!({"url": "http://127.0.0.1:9/b"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["workspace_id"], "w");
    assert_eq!(created["url"], "http://127.0.0.1:9/b");
    let (status, same) = call(
        Method::POST,
        "/v3/workspaces/w/webhooks",
        Some(json!({"url": "http://127.0.0.1:9/b"})),
    )
    .await;
    assert_eq!((status, &same["id"]), (200, &created["id"]));
    let (status, page) = call(Method::GET, "/v3/workspaces/w/webhooks?size=1&page=2", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        (page["total"].as_u64(), page["pages"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(page["items"][0]["url"], "http://127.0.0.1:9/b");
    let (status, _) = call(Method::GET, "/v3/workspaces/nope/webhooks/test", None).await;
    assert_eq!(status, 404);
    let (status, _) = call(Method::GET, "/v3/workspaces/w/webhooks/test", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        http.app
            .sql_i64("SELECT count(*) FROM webhook_deliveries WHERE event_type = 'test.event'")
            .await,
        2,
        "one test.event per endpoint"
    );
    let path = format!(
        "/v3/workspaces/w/webhooks/{}",
        created["id"].as_str().unwrap()
    );
    // Deleted, then gone.
    for want in [204, 404] {
        assert_eq!(call(Method::DELETE, &path, None).await.0, want);
    }
    let (status, body) = call(
        Method::POST,
        "/v3/workspaces/w/webhooks",
        Some(json!({"url": "ftp://x/"})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let (status, _) = call(
        Method::POST,
        "/v3/workspaces/missing/webhooks",
        Some(json!({"url": "http://127.0.0.1:9/"})),
    )
    .await;
    assert_eq!(status, 404);

    let app = &http.app;
    let listed = ok_as(app, &key, LIST, json!({"w": "w"})).await;
    assert_eq!(
        listed["workspace"]["webhooks"],
        json!([{"id": id, "url": "http://127.0.0.1:9/a"}])
    );
    let deleted = ok_as(
        app,
        &key,
        "mutation($w: ID!, $id: ID!) { deleteWebhook(workspaceId: $w, id: $id) }",
        json!({"w": "w", "id": id}),
    )
    .await;
    assert_eq!(deleted["deleteWebhook"], true);
    assert_eq!(
        ok_as(app, &key, LIST, json!({"w": "w"})).await["workspace"]["webhooks"],
        json!([])
    );
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_deliveries").await,
        0,
        "an endpoint's deliveries go with it"
    );
    let code = code_as(
        app,
        &key,
        "mutation($w: ID!, $id: ID!) { deleteWebhook(workspaceId: $w, id: $id) }",
        json!({"w": "w", "id": id}),
    )
    .await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn message_created_is_delivered_once_signed_with_its_delivery_id() {
    let (app, key, receiver) = registered(204).await;
    let message = say(&app, &key, "hello hooks").await;

    let hooks = Webhooks::new(app.store.clone(), args(3)).unwrap();
    assert_eq!(deliver_all(&hooks).await, vec![Outcome::Delivered]);
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let Received { headers, body } = &got[0];
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    // What a receiver checks (docs/webhooks.md): the HMAC of the raw body, and of
    // `<timestamp>.<body>`.
    assert_eq!(
        header("x-honcho-signature"),
        sign::hmac_hex(SECRET.as_bytes(), &[body.as_bytes()])
    );
    let ts = header("x-honcho-timestamp");
    assert!((chrono::Utc::now().timestamp() - ts.parse::<i64>().unwrap()).abs() < 60);
    assert_eq!(
        header("x-honcho-signature-256"),
        format!(
            "v1={}",
            sign::hmac_hex(SECRET.as_bytes(), &[ts.as_bytes(), b".", body.as_bytes()])
        )
    );
    assert_ne!(
        header("x-honcho-signature"),
        sign::hmac_hex(b"another secret", &[body.as_bytes()])
    );
    let event: Value = serde_json::from_str(body).unwrap();
    assert_eq!(event["type"], "message.created");
    assert_eq!(header("x-honcho-event"), "message.created");
    assert_eq!(
        event["id"].as_str().unwrap(),
        header("x-honcho-delivery-id")
    );
    assert_eq!(event["data"]["message_id"], message["id"]);
    assert_eq!(event["data"]["content"], "hello hooks");
    assert_eq!(event["data"]["session_id"], "s");
    assert_eq!(event["data"]["peer_id"], "alice");
    assert!(event["timestamp"].as_str().unwrap().ends_with('Z'));

    let shown = ok_as(&app, &key, DELIVERIES, json!({"w": "w", "s": "DELIVERED"})).await;
    let d = &shown["workspace"]["webhookDeliveries"][0];
    assert_eq!(d["id"].as_str().unwrap(), header("x-honcho-delivery-id"));
    assert_eq!(
        (d["attempts"].as_i64(), d["lastStatus"].as_i64()),
        (Some(1), Some(204))
    );
    assert_eq!(d["payload"], event);
    // Nothing left: a delivered event is not sent again.
    assert!(hooks.run_once("test").await.unwrap().is_empty());
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_failing_receiver_gets_retries_then_the_delivery_is_dead_lettered() {
    let (app, key, receiver) = registered(500).await;
    say(&app, &key, "will fail").await;

    let hooks = Webhooks::new(app.store.clone(), args(3)).unwrap();
    let outcomes = deliver_all(&hooks).await;
    assert_eq!(
        outcomes,
        vec![Outcome::Retry, Outcome::Retry, Outcome::Dead]
    );
    let got = receiver.received();
    assert_eq!(got.len(), 3, "max_attempts = 3");
    let ids: Vec<_> = got
        .iter()
        .map(|r| r.headers["x-honcho-delivery-id"].clone())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one delivery id across retries"
    );
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the same bytes on every attempt"
    );

    let dead = ok_as(&app, &key, DELIVERIES, json!({"w": "w", "s": "DEAD"})).await;
    let d = &dead["workspace"]["webhookDeliveries"][0];
    assert_eq!(d["status"], "DEAD");
    assert_eq!(
        (d["attempts"].as_i64(), d["lastStatus"].as_i64()),
        (Some(3), Some(500))
    );
    assert!(d["lastError"].as_str().unwrap().contains("HTTP 500"), "{d}");
    let pending = ok_as(&app, &key, DELIVERIES, json!({"w": "w", "s": "PENDING"})).await;
    assert_eq!(pending["workspace"]["webhookDeliveries"], json!([]));
    // A dead letter is never attempted again, even once the receiver recovers.
    receiver.status.store(200, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(hooks.run_once("test").await.unwrap().is_empty());

    let metrics = honcho_graphql::metrics::encode(&honcho_graphql::webhook::metrics::gather());
    assert!(
        metrics.contains("honcho_webhook_attempts_total{outcome=\"dead\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_backoff_doubles_from_the_first_wait_up_to_the_cap() {
    let store = TestApp::new().await.store;
    let hooks = Webhooks::new(
        store,
        WebhookArgs {
            secret: Some(SECRET.into()),
            backoff_ms: 1000,
            max_backoff_ms: 5000,
            ..WebhookArgs::default()
        },
    )
    .unwrap();
    for (attempts, base) in [(1, 1000), (2, 2000), (3, 4000), (4, 5000), (30, 5000)] {
        let wait = hooks.backoff(attempts).as_millis() as u64;
        assert!(
            (base..=base + base / 10).contains(&wait),
            "after {attempts}: {wait} ms"
        );
    }
}

#[tokio::test]
async fn private_urls_are_refused_without_the_flag() {
    let app = TestApp::with_auth().await;
    let key = admin();
    workspace_with_session(&app, &key).await;
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://10.0.0.7/hook",
        "http://[::1]/hook",
        "http://[fd00::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost/hook",
        "gopher://example.com/",
    ] {
        let code = code_as(&app, &key, CREATE, json!({"w": "w", "u": url})).await;
        assert_eq!(code, "BAD_USER_INPUT", "{url}");
    }
    ok_as(
        &app,
        &key,
        CREATE,
        json!({"w": "w", "u": "https://hooks.example.com/x"}),
    )
    .await;
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_endpoints").await,
        1
    );
    let http = AppServer::start(app).await;
    let resp = http
        .client
        .post(format!("{}/v3/workspaces/w/webhooks", http.base))
        .header("authorization", &key)
        .json(&json!({"url": "http://192.168.1.10/hook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
}

#[tokio::test]
async fn a_loopback_target_registered_while_allowed_is_not_called_once_disallowed() {
    let (app, key, receiver) = registered(200).await;
    say(&app, &key, "to a private address").await;
    let strict = WebhookArgs {
        allow_private: false,
        ..args(1)
    };
    let hooks = Webhooks::new(app.store.clone(), strict).unwrap();
    assert_eq!(deliver_all(&hooks).await, vec![Outcome::Dead]);
    assert!(receiver.received().is_empty());
    let dead = ok_as(&app, &key, DELIVERIES, json!({"w": "w", "s": "DEAD"})).await;
    let error = dead["workspace"]["webhookDeliveries"][0]["lastError"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("HONCHO_WEBHOOK_ALLOW_PRIVATE"), "{error}");
}

#[tokio::test]
async fn the_outbox_row_commits_with_the_message_or_not_at_all() {
    let (app, key, _receiver) = registered(200).await;
    // The deriver's queue is written after the outbox in the same transaction: make it fail.
    let app = allowing_private(app, true);
    app.store
        .db()
        .execute_unprepared(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON deriver_items \
             FOR EACH STATEMENT EXECUTE FUNCTION refuse()",
        )
        .await
        .unwrap();
    let resp = app
        .exec_as(
            Some(&key),
            r#"mutation { createMessages(workspaceId: "w", sessionId: "s", messages: [{peerId: "alice", content: "rolled back"}]) { id } }"#,
            json!({}),
        )
        .await;
    assert!(resp.get("errors").is_some(), "{resp}");
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_deliveries").await,
        0,
        "no event without its message"
    );

    app.store
        .db()
        .execute_unprepared("DROP TRIGGER refuse ON deriver_items")
        .await
        .unwrap();
    say(&app, &key, "committed").await;
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 1);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_deliveries WHERE event_type = 'message.created'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_delivery_whose_worker_died_is_sent_again_with_the_same_id() {
    let (app, key, receiver) = registered(200).await;
    say(&app, &key, "survives a crash").await;
    // A worker claims the delivery and dies before recording anything.
    let lost = app
        .store
        .claim_deliveries("dead-worker", 10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(lost.len(), 1);
    let hooks = Webhooks::new(app.store.clone(), args(3)).unwrap();
    assert!(hooks.run_once("test").await.unwrap().is_empty(), "leased");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(deliver_all(&hooks).await, vec![Outcome::Delivered]);
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].headers["x-honcho-delivery-id"].to_str().unwrap(),
        lost[0].id
    );
    assert_eq!(got[0].body, lost[0].body);
    // The dead worker's late answer changes nothing.
    assert!(!app.store.delivery_succeeded(&lost[0], 200).await.unwrap());
    let shown = ok_as(&app, &key, DELIVERIES, json!({"w": "w", "s": null})).await;
    assert_eq!(shown["workspace"]["webhookDeliveries"][0]["attempts"], 2);
}

#[tokio::test]
async fn only_admin_and_workspace_keys_manage_webhooks() {
    let app = app_allowing_private().await;
    let key = admin();
    workspace_with_session(&app, &key).await;
    ok_as(
        &app,
        &key,
        r#"mutation { getOrCreatePeer(workspaceId: "w", id: "alice") { id } }"#,
        json!({}),
    )
    .await;
    let workspace = bearer(KeySpec {
        workspace: Some("w".into()),
        ..KeySpec::default()
    });
    let peer = bearer(KeySpec {
        workspace: Some("w".into()),
        peer: Some("alice".into()),
        ..KeySpec::default()
    });
    let session = bearer(KeySpec {
        workspace: Some("w".into()),
        session: Some("s".into()),
        ..KeySpec::default()
    });
    let other = bearer(KeySpec {
        workspace: Some("other".into()),
        ..KeySpec::default()
    });
    let url = json!({"w": "w", "u": "http://127.0.0.1:9/hook"});
    let created = ok_as(&app, &workspace, CREATE, url.clone()).await;
    let id = created["createWebhook"]["id"].clone();
    for refused in [&peer, &session, &other] {
        assert_eq!(
            code_as(&app, refused, CREATE, url.clone()).await,
            "FORBIDDEN"
        );
        assert_eq!(
            code_as(
                &app,
                refused,
                "mutation($w: ID!, $id: ID!) { deleteWebhook(workspaceId: $w, id: $id) }",
                json!({"w": "w", "id": id}),
            )
            .await,
            "FORBIDDEN"
        );
        assert_eq!(
            code_as(
                &app,
                refused,
                "mutation { testWebhook(workspaceId: \"w\") }",
                json!({})
            )
            .await,
            "FORBIDDEN"
        );
    }
    for refused in [&peer, &session] {
        let resp = app.exec_as(Some(refused), LIST, json!({"w": "w"})).await;
        assert_eq!(
            resp["errors"][0]["extensions"]["code"], "FORBIDDEN",
            "{resp}"
        );
    }
    let tested = ok_as(
        &app,
        &workspace,
        "mutation { testWebhook(workspaceId: \"w\") }",
        json!({}),
    )
    .await;
    assert_eq!(tested["testWebhook"], 1);

    let http = AppServer::start(app).await;
    for (k, want) in [(&peer, 403), (&session, 403), (&workspace, 200)] {
        let resp = http
            .client
            .get(format!("{}/v3/workspaces/w/webhooks", http.base))
            .header("authorization", k)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), want);
    }
}

#[tokio::test]
async fn the_deriver_emits_conclusion_created_and_queue_empty_when_a_unit_drains() {
    use crate::fake_llm::{FakeLlm, Reply, prompts};
    use honcho_graphql::deriver::{BatchReport, Deriver, DeriverArgs};

    let fake = FakeLlm::start(|_, body| {
        let (system, _) = prompts(body);
        if system.contains("NEW messages") {
            Reply::json(
                json!({"facts": [{"content": "Alice likes green tea", "source_seqs": [1]}]}),
            )
        } else {
            Reply::json(json!({"conclusions": []}))
        }
    })
    .await;
    let app = allowing_private(TestApp::with_embedder().await, true);
    let (app, key, receiver) = registered_on(app, 200).await;
    say(&app, &key, "I drink green tea every morning.").await;

    let llm = honcho_graphql::llm::build(&fake.config()).unwrap().unwrap();
    let deriver = Deriver::new(
        app.store.clone(),
        llm,
        DeriverArgs {
            batch_secs: 0.0,
            ..DeriverArgs::default()
        },
    );
    let report = deriver.run_once("test").await.unwrap();
    assert!(
        matches!(report, Some(BatchReport::Done { .. })),
        "{report:?}"
    );

    let hooks = Webhooks::new(app.store.clone(), args(3)).unwrap();
    deliver_all(&hooks).await;
    let events: Vec<Value> = receiver
        .received()
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    let of = |t: &str| {
        events
            .iter()
            .filter(|e| e["type"] == t)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(of("message.created").len(), 1);
    let created = of("conclusion.created");
    assert_eq!(created.len(), 1, "{events:?}");
    assert_eq!(created[0]["data"]["content"], "Alice likes green tea");
    assert_eq!(created[0]["data"]["observer_id"], "alice");
    let empty = of("queue.empty");
    assert_eq!(empty.len(), 1, "{events:?}");
    assert_eq!(
        empty[0]["data"],
        json!({"workspace_id": "w", "queue_type": "representation", "session_id": "s",
               "observer": "alice", "observed": "alice"})
    );
}

#[tokio::test]
async fn an_event_survives_kill_9_of_the_server_and_is_delivered_after_the_restart() {
    let app = app_allowing_private().await;
    let (app, key, receiver) = registered_on(app, 500).await;
    let env = [
        ("HONCHO_WEBHOOK_SECRET", SECRET),
        ("HONCHO_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("HONCHO_WEBHOOK_POLL_MS", "20"),
        ("HONCHO_WEBHOOK_BACKOFF_MS", "100"),
        ("HONCHO_WEBHOOK_TIMEOUT_MS", "500"),
    ];
    let server = crate::harness::ServerProcess::start(&app._db, &env).await;
    let create = json!({"query": r#"mutation { createMessages(workspaceId: "w", sessionId: "s", messages: [{peerId: "alice", content: "before the crash"}]) { id } }"#});
    let (status, resp) = server.post(create.to_string(), Some(&key)).await;
    assert_eq!(status, 200, "{resp}");
    // The receiver fails the first attempts; then the server is killed mid-retry.
    let started = std::time::Instant::now();
    while receiver.received().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no attempt reached the receiver"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = server.pid().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    drop(server);

    receiver.status.store(200, Ordering::SeqCst);
    let _restarted = crate::harness::ServerProcess::start(&app._db, &env).await;
    let delivered = "SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'";
    let started = std::time::Instant::now();
    while app.sql_i64(delivered).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never delivered after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = receiver.received();
    let ids: std::collections::BTreeSet<_> = got
        .iter()
        .map(|r| {
            r.headers["x-honcho-delivery-id"]
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "one event, one delivery id across the crash: {ids:?}"
    );
    assert!(got.iter().all(|r| r.body == got[0].body));
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_deliveries").await,
        1
    );
}
