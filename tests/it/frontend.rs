//! What a frontend app meets over HTTP: the GraphQL-over-HTTP specification (checked by the npm
//! `graphql-http` audit), coded error bodies for every refusal, CSRF-safe defaults and CORS.

use honcho_graphql::graphql::{Limits, build_schema};
use honcho_graphql::http::{Hosts, HttpOptions, Origins, router_with};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::{ServerProcess, TestApp, post_text};

/// tests/node-ws with its npm packages installed (scripts/setup-node-ws.sh, which `make test`
/// runs first); panics when Node or the packages are missing, so the test cannot pass unrun.
pub fn node_clients() -> &'static str {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node-ws");
    let installed = || {
        std::path::Path::new(dir)
            .join("node_modules/graphql-http")
            .exists()
    };
    if !installed() {
        let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-node-ws.sh");
        let _ = std::process::Command::new(setup).status();
    }
    assert!(
        installed(),
        "the npm clients are not installed: run scripts/setup-node-ws.sh (needs node and npm)"
    );
    dir
}

/// The router of `app` with these options on a free port; the base URL.
async fn serve(app: &TestApp, options: HttpOptions) -> String {
    let schema = build_schema(app.store.clone(), &Limits::default());
    let router = router_with(schema, app.store.clone(), options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// The router of `app` with `origin` allowed (CORS) on a free port; the base URL.
async fn serve_allowing(app: &TestApp, origin: &str) -> String {
    let options = HttpOptions {
        origins: Origins::parse(origin, false).unwrap(),
        ..HttpOptions::default()
    };
    serve(app, options).await
}

#[tokio::test]
async fn the_graphql_over_http_audit_passes_without_warnings_or_notices() {
    let dir = node_clients();
    let app = TestApp::new().await;
    let server = ServerProcess::start(&app._db, &[]).await;
    let out = tokio::process::Command::new("node")
        .current_dir(dir)
        .args(["audit.mjs", &server.url("/graphql")])
        .output()
        .await
        .expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the audit failed to run: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    eprintln!("graphql-http audit: {}", report["counts"]);
    assert_eq!(report["problems"], json!([]), "{report:#}");
    assert!(report["counts"]["ok"].as_u64().unwrap() >= 61, "{report}");
}

/// Status, headers and JSON body of a response.
async fn parts(resp: reqwest::Response) -> (u16, HeaderMap, Value) {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"));
    (status, headers, body)
}

/// The body is one GraphQL error with this code and the response's request id.
fn assert_coded(what: &str, headers: &HeaderMap, body: &Value, code: &str) {
    let error = &body["errors"][0];
    assert_eq!(error["extensions"]["code"], code, "{what}: {body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    assert_eq!(
        error["extensions"]["requestId"].as_str(),
        headers["x-request-id"].to_str().ok(),
        "{what}: {body}"
    );
    assert!(body.get("data").is_none(), "{what}: {body}");
}

#[tokio::test]
async fn every_http_refusal_is_a_graphql_error_with_a_code_and_the_request_id() {
    let app = TestApp::new().await;
    let base = serve(
        &app,
        HttpOptions {
            max_body_bytes: 64 * 1024,
            ..HttpOptions::default()
        },
    )
    .await;
    let url = format!("{base}/graphql");
    let http = honcho_graphql::outbound::client();
    let json_post = |body: String| {
        http.post(&url)
            .header("content-type", "application/json")
            .body(body)
    };

    // The README's first curl once sent a newline inside a JSON string: a Rust debug string came
    // back. Now it is a coded GraphQL error.
    let (status, headers, body) = parts(
        json_post("{\"query\": \"{\n __typename }\"}".into())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert_coded("invalid JSON", &headers, &body, "BAD_REQUEST");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );

    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        ("empty body", json_post(String::new()), 400, "BAD_REQUEST"),
        (
            "no query",
            json_post(r#"{"qeury": "{ __typename }"}"#.into()),
            400,
            "BAD_REQUEST",
        ),
        (
            "a batch",
            json_post(r#"[{"query": "{ __typename }"}]"#.into()),
            400,
            "BAD_REQUEST",
        ),
        (
            "numeric query",
            json_post(r#"{"query": 1}"#.into()),
            400,
            "BAD_REQUEST",
        ),
        (
            "no content type",
            http.post(&url).body(r#"{"query": "{ __typename }"}"#),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            "text/plain",
            http.post(&url)
                .header("content-type", "text/plain")
                .body("{}"),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            "a mutation by GET",
            http.get(&url)
                .query(&[("query", "mutation { deleteWorkspace(id: \"w\") }")]),
            405,
            "METHOD_NOT_ALLOWED",
        ),
        ("PUT", http.put(&url).body("{}"), 405, "METHOD_NOT_ALLOWED"),
        (
            "Accept: text/html",
            json_post(r#"{"query": "{ __typename }"}"#.into()).header("accept", "text/html"),
            406,
            "NOT_ACCEPTABLE",
        ),
        (
            "a body above the limit",
            json_post(format!(r#"{{"query": "{}"}}"#, " ".repeat(100 * 1024))),
            413,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            "nesting above the limit",
            json_post(json!({"query": format!("{{ a{} }}", "(x: [".repeat(80))}).to_string()),
            400,
            "BAD_USER_INPUT",
        ),
    ];
    for (what, request, expected, code) in cases {
        let (status, headers, body) = parts(request.send().await.unwrap()).await;
        assert_eq!(status, expected, "{what}: {body}");
        assert_coded(what, &headers, &body, code);
        if what == "a mutation by GET" {
            assert_eq!(headers["allow"], "POST");
        }
    }

    // A document that does not parse or validate: 400 under graphql-response+json, 200 under
    // application/json, never a `data` entry.
    for (accept, expected, content_type) in [
        (
            "application/graphql-response+json",
            400,
            "application/graphql-response+json",
        ),
        ("application/json", 200, "application/json"),
    ] {
        for doc in ["{", "{ nope }"] {
            let (status, headers, body) = parts(
                json_post(json!({"query": doc}).to_string())
                    .header("accept", accept)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, expected, "{accept} {doc}: {body}");
            assert!(
                headers["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with(content_type)
            );
            assert!(body.get("data").is_none(), "{body}");
            assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
        }
    }
}

#[tokio::test]
async fn cross_site_request_shapes_neither_write_nor_read() {
    // Auth off: every caller is an admin, so only the request's shape keeps a web page out.
    let app = TestApp::new().await;
    let base = serve(&app, HttpOptions::default()).await;
    let url = format!("{base}/graphql");
    let http = honcho_graphql::outbound::client();
    let write = "mutation { getOrCreateWorkspace(id: \"csrf\") { id } }";
    let read = "{ workspaces { nodes { id } } }";
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"secret\") { id } }",
        json!({}),
    )
    .await;

    // What an HTML form or a no-preflight fetch() can send from any page.
    let multipart = format!(
        "--X\r\ncontent-disposition: form-data; name=\"operations\"\r\n\r\n{}\r\n--X--\r\n",
        json!({"query": write})
    );
    let shapes = vec![
        (
            "form POST",
            http.post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("query={}", urlencode(write))),
        ),
        (
            "text/plain POST",
            http.post(&url)
                .header("content-type", "text/plain;charset=UTF-8")
                .body(json!({"query": write}).to_string()),
        ),
        (
            "multipart POST",
            http.post(&url)
                .header("content-type", "multipart/form-data; boundary=X")
                .body(multipart),
        ),
        ("GET mutation", http.get(&url).query(&[("query", write)])),
        (
            "text/plain read",
            http.post(&url)
                .header("content-type", "text/plain")
                .body(json!({"query": read}).to_string()),
        ),
    ];
    for (what, request) in shapes {
        let resp = request
            .header("origin", "https://evil.example")
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_client_error(), "{what}: {}", resp.status());
        assert!(resp.headers().get("access-control-allow-origin").is_none());
        let body = resp.text().await.unwrap();
        assert!(
            !body.contains("secret") && !body.contains("\"data\""),
            "{what}: {body}"
        );
    }
    let data = app
        .ok("{ workspace(id: \"csrf\") { id } }", json!({}))
        .await;
    assert_eq!(data["workspace"], Value::Null, "a cross-site shape wrote");

    // A WebSocket from a foreign page is refused at the upgrade; the same origin and non-browser
    // clients (no Origin) are not.
    let ws_url = format!("{}/graphql/ws", base.replace("http://", "ws://"));
    let upgrade = |origin: Option<&str>| {
        let mut req = ws_url.as_str().into_client_request().unwrap();
        req.headers_mut().insert(
            "sec-websocket-protocol",
            "graphql-transport-ws".parse().unwrap(),
        );
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().unwrap());
        }
        tokio_tungstenite::connect_async(req)
    };
    let err = upgrade(Some("https://evil.example")).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    upgrade(Some(&base)).await.expect("same origin");
    upgrade(None).await.expect("no Origin: not a browser");
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("", s)]).unwrap()[1..].to_owned()
}

#[tokio::test]
async fn cors_answers_listed_origins_only_with_credentials_and_the_request_id() {
    let app = TestApp::new().await;
    let allowed = "http://app.localhost:5173";
    let base = serve_allowing(&app, allowed).await;
    let url = format!("{base}/graphql");
    let http = honcho_graphql::outbound::client();
    let preflight = |origin: &str| {
        http.request(reqwest::Method::OPTIONS, &url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .send()
    };
    let ok = preflight(allowed).await.unwrap();
    assert!(ok.status().is_success(), "{}", ok.status());
    let h = ok.headers();
    assert_eq!(h["access-control-allow-origin"], allowed);
    assert_eq!(h["access-control-allow-credentials"], "true");
    let allowed_headers = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(allowed_headers.contains("authorization") && allowed_headers.contains("content-type"));
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );

    let foreign = preflight("https://evil.example").await.unwrap();
    assert!(
        foreign
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    // The actual request: the page may read the body and x-request-id, errors included.
    for query in ["{ __typename }", "{ nope }"] {
        let resp = http
            .post(&url)
            .header("origin", allowed)
            .json(&json!({"query": query}))
            .send()
            .await
            .unwrap();
        let h = resp.headers();
        assert_eq!(h["access-control-allow-origin"], allowed);
        assert!(
            h["access-control-expose-headers"]
                .to_str()
                .unwrap()
                .contains("x-request-id"),
            "{h:?}"
        );
    }
}

#[tokio::test]
async fn result_fields_keep_the_order_the_query_asked_for() {
    let app = TestApp::new().await;
    let base = serve(&app, HttpOptions::default()).await;
    let query = json!({"query": "{ zz: __typename aa: __typename mm: __typename }"});
    let text = post_text(&format!("{base}/graphql"), &query).await;
    assert_eq!(
        text,
        r#"{"data":{"zz":"QueryRoot","aa":"QueryRoot","mm":"QueryRoot"}}"#
    );
}

/// Runs `queries` through urql's persisted-queries exchange (tests/node-ws/persisted.mjs).
async fn urql(server: &ServerProcess, queries: &[&str]) -> Value {
    let dir = node_clients();
    let out = tokio::process::Command::new("node")
        .current_dir(dir)
        .arg("persisted.mjs")
        .arg(server.url("/graphql"))
        .args(queries)
        .output()
        .await
        .expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "urql failed: {stderr}");
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[tokio::test]
async fn urql_registers_a_persisted_query_once_then_sends_only_its_hash() {
    let app = TestApp::new().await;
    // Auth off: every caller may register (with auth on, key holders only: tests/it/persisted.rs).
    let server = ServerProcess::start(&app._db, &[("HONCHO_AUTH_SECRET", "")]).await;
    let q = "query Hello { __typename }";
    let report = urql(&server, &[q, q]).await;
    let hello = json!({"data": {"__typename": "QueryRoot"}});
    assert_eq!(report["results"], json!([hello, hello]), "{report}");
    // The hash alone (unknown: 400 PERSISTED_QUERY_NOT_FOUND), then with the document; the
    // second time the hash alone is enough. All by GET: a query's hash is a cacheable URL.
    assert_eq!(
        report["requests"],
        json!([
            {"method": "GET", "withDocument": false, "status": 400},
            {"method": "GET", "withDocument": true, "status": 200},
            {"method": "GET", "withDocument": false, "status": 200},
        ]),
        "{report}"
    );
    // A document that does not match its hash is refused, and not registered.
    let http = honcho_graphql::outbound::client();
    let forged = json!({"query": "{ workspaces { totalCount } }",
        "extensions": {"persistedQuery": {"version": 1, "sha256Hash": sha256(q)}}});
    let resp = http
        .post(server.url("/graphql"))
        .json(&forged)
        .send()
        .await
        .unwrap();
    let (status, headers, body) = parts(resp).await;
    assert_eq!(status, 400);
    assert_coded("hash mismatch", &headers, &body, "BAD_REQUEST");
    assert_eq!(urql(&server, &[q]).await["results"][0], hello);
}

fn sha256(doc: &str) -> String {
    honcho_graphql::http::persisted::sha256_hex(doc)
}

#[tokio::test]
async fn strict_mode_runs_the_manifest_documents_only() {
    let app = TestApp::new().await;
    let trusted = "query Trusted { __typename }";
    let manifest = std::env::temp_dir().join(format!("honcho-trusted-{}.json", nanoid::nanoid!()));
    // The manifest as a client's build writes it: the documents exactly as urql sends them.
    let out = std::process::Command::new("node")
        .current_dir(node_clients())
        .args(["persisted.mjs", "--manifest", trusted])
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&manifest, &out.stdout).unwrap();
    let server = ServerProcess::start(
        &app._db,
        &[
            ("HONCHO_TRUSTED_DOCUMENTS", manifest.to_str().unwrap()),
            ("HONCHO_TRUSTED_DOCUMENTS_ADMIN", "true"),
        ],
    )
    .await;
    let untrusted = "query Untrusted { __typename }";
    let report = urql(&server, &[trusted, untrusted]).await;
    assert_eq!(
        report["results"],
        json!([
            {"data": {"__typename": "QueryRoot"}},
            {"errors": ["DOCUMENT_NOT_TRUSTED"], "network": null},
        ]),
        "{report}"
    );
    // The trusted document runs from its hash at once: no registration round trip.
    assert_eq!(
        report["requests"][0],
        json!({"method": "GET", "withDocument": false, "status": 200})
    );

    // A full document outside the manifest: refused for other keys, run for an admin key (the
    // exemption is on here).
    let http = honcho_graphql::outbound::client();
    let send = |authorization: Option<String>| {
        let mut req = http
            .post(server.url("/graphql"))
            .json(&json!({"query": untrusted}));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        req.send()
    };
    let workspace_key = crate::harness::bearer(honcho_graphql::auth::KeySpec {
        admin: false,
        workspace: Some("w".into()),
        peer: None,
        session: None,
        scope: None,
        expires_at: None,
    });
    for authorization in [None, Some(workspace_key)] {
        let (status, headers, body) = parts(send(authorization).await.unwrap()).await;
        assert_eq!(status, 400, "{body}");
        assert_coded("untrusted", &headers, &body, "DOCUMENT_NOT_TRUSTED");
    }
    let admin_key = crate::harness::bearer(honcho_graphql::auth::KeySpec {
        admin: true,
        ..honcho_graphql::auth::KeySpec::default()
    });
    let (status, _, body) = parts(send(Some(admin_key)).await.unwrap()).await;
    assert_eq!(
        (status, &body["data"]["__typename"]),
        (200, &json!("QueryRoot"))
    );

    // The WebSocket runs the same documents only.
    let trusted_doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let trusted_doc = trusted_doc
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let mut req = format!("ws://{}/graphql/ws", server.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let text = |v: Value| tokio_tungstenite::tungstenite::Message::Text(v.to_string().into());
    use futures::{SinkExt, StreamExt};
    // Auth is on: a socket needs a key (one that is not an admin's, which would be exempt).
    let key = crate::harness::bearer(honcho_graphql::auth::KeySpec {
        workspace: Some("w".into()),
        ..Default::default()
    });
    ws.send(text(
        json!({"type": "connection_init", "payload": {"Authorization": key}}),
    ))
    .await
    .unwrap();
    let mut replies = Vec::new();
    while replies.len() < 4 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("open")
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "connection_ack" {
                for (id, query) in [("1", json!(untrusted)), ("2", trusted_doc.clone())] {
                    let subscribe =
                        json!({"type": "subscribe", "id": id, "payload": {"query": query}});
                    ws.send(text(subscribe)).await.unwrap();
                }
            } else if v["type"] != "ping" && v["type"] != "pong" {
                replies.push(v);
            }
        }
    }
    let of = |id: &str| {
        replies
            .iter()
            .filter(|r| r["id"] == id && r["type"] != "complete")
            .map(Value::to_string)
            .collect::<String>()
    };
    assert!(of("1").contains("DOCUMENT_NOT_TRUSTED"), "{replies:?}");
    assert!(
        of("2").contains(r#""__typename":"QueryRoot""#),
        "{replies:?}"
    );
    std::fs::remove_file(&manifest).unwrap();
}

/// `request` with the multipart upload of `text`.
fn with_upload(request: reqwest::RequestBuilder, text: &str) -> reqwest::RequestBuilder {
    let (content_type, body) = crate::harness::upload_form(text);
    request.header("content-type", content_type).body(body)
}

/// How many messages and conclusions workspace `w` holds, and whether session `s2` exists.
async fn written(app: &TestApp) -> (i64, i64, bool) {
    let messages = app
        .sql_i64("select count(*) from messages where workspace_name = 'w'")
        .await;
    let conclusions = app
        .sql_i64("select count(*) from conclusions where workspace_name = 'w'")
        .await;
    let cloned = app
        .ok(
            "{ workspace(id: \"w\") { sessions { totalCount } } }",
            json!({}),
        )
        .await["workspace"]["sessions"]["totalCount"]
        .as_i64()
        != Some(1);
    (messages, conclusions, cloned)
}

#[tokio::test]
async fn rest_refuses_what_a_cross_site_page_can_send_with_auth_off() {
    // Auth off: every caller is an admin, so only the request's shape and origin keep a page out.
    let app = TestApp::new().await;
    let allowed = "http://app.localhost:5173";
    let base = serve_allowing(&app, allowed).await;
    let http = honcho_graphql::outbound::client();
    let url = |path: &str| format!("{base}/v3/workspaces/w{path}");
    app.ok(
        "mutation { getOrCreateSession(workspaceId: \"w\", id: \"s1\", peers: [{peerId: \"alice\"}]) { id } }",
        json!({}),
    )
    .await;
    let batch = json!({"messages": [{"peer_id": "alice", "content": "planted"}]}).to_string();
    let conclusion =
        json!({"conclusions": [{"content": "planted", "observer_id": "alice", "observed_id": "alice"}]})
            .to_string();
    let evil = "https://evil.example";
    // What an HTML form, or fetch() without a preflight, can send from any page.
    let shapes = vec![
        (
            "text/plain messages",
            http.post(url("/sessions/s1/messages"))
                .header("content-type", "text/plain;charset=UTF-8")
                .body(batch.clone()),
        ),
        (
            "form messages",
            http.post(url("/sessions/s1/messages"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(batch.clone()),
        ),
        (
            "a Blob body without a type",
            http.post(url("/sessions/s1/messages")).body(batch.clone()),
        ),
        (
            "multipart upload",
            with_upload(http.post(url("/sessions/s1/messages/upload")), "planted"),
        ),
        (
            "text/plain conclusion",
            http.post(url("/conclusions"))
                .header("content-type", "text/plain")
                .body(conclusion.clone()),
        ),
        (
            "a bodiless no-cors POST",
            http.post(url("/sessions/s1/clone")),
        ),
    ];
    for (what, request) in shapes {
        let resp = request.header("origin", evil).send().await.unwrap();
        let (status, headers, body) = parts(resp).await;
        assert_eq!(status, 403, "{what}: {body}");
        assert!(body["detail"].as_str().is_some(), "{what}: {body}");
        assert!(headers.get("access-control-allow-origin").is_none());
    }
    assert_eq!(
        written(&app).await,
        (0, 0, false),
        "a cross-site shape wrote"
    );

    // Without an Origin (curl, scripts) a JSON route still takes JSON only.
    for (what, request) in [
        (
            "text/plain",
            http.post(url("/sessions/s1/messages"))
                .header("content-type", "text/plain")
                .body(batch.clone()),
        ),
        (
            "no content type",
            http.post(url("/conclusions")).body(conclusion.clone()),
        ),
        (
            "multipart to a JSON route",
            with_upload(http.post(url("/sessions/s1/messages")), "planted"),
        ),
    ] {
        let (status, _, body) = parts(request.send().await.unwrap()).await;
        assert_eq!(status, 415, "{what}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("application/json"),
            "{what}: {body}"
        );
    }
    assert_eq!(
        written(&app).await,
        (0, 0, false),
        "a non-JSON body was read"
    );

    // The server's own pages, an allowed origin, and clients without an Origin write as before.
    let own = http
        .post(url("/sessions/s1/messages"))
        .header("origin", &base)
        .header("content-type", "application/json")
        .body(batch.clone());
    assert_eq!(own.send().await.unwrap().status(), 201);
    let upload = with_upload(
        http.post(url("/sessions/s1/messages/upload")),
        "from the app",
    )
    .header("origin", allowed);
    let resp = upload.send().await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["access-control-allow-origin"], allowed);
    let bodiless = http
        .post(url("/sessions/s1/messages/list"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        bodiless.status(),
        200,
        "an empty body needs no content type"
    );
    assert_eq!(written(&app).await.0, 2);
}

#[tokio::test]
async fn only_the_servers_own_host_names_are_answered() {
    // A page on rebind.evil.example, whose name now resolves to 127.0.0.1, is same-origin with
    // the server to the browser: only its Host header tells it apart.
    let app = TestApp::new().await;
    let base = serve(&app, HttpOptions::default()).await;
    let port = base.rsplit(':').next().unwrap().to_owned();
    let http = honcho_graphql::outbound::client();
    let rebound = format!("rebind.evil.example:{port}");
    let requests = |host: &str| {
        let origin = format!("http://{host}");
        vec![
            (
                "JSON POST",
                http.post(format!("{base}/graphql"))
                    .header("host", host)
                    .header("origin", &origin)
                    .json(&json!({"query": "{ workspaces { nodes { id } } }"})),
            ),
            (
                "REST read",
                http.get(format!("{base}/v3/workspaces/w/queue/status"))
                    .header("host", host),
            ),
            (
                "REST write",
                http.post(format!("{base}/v3/workspaces"))
                    .header("host", host)
                    .header("origin", &origin)
                    .json(&json!({"id": "rebound"})),
            ),
            (
                "health",
                http.get(format!("{base}/health")).header("host", host),
            ),
        ]
    };
    for (what, request) in requests(&rebound) {
        let (status, _, body) = parts(request.send().await.unwrap()).await;
        assert_eq!(status, 403, "{what}: {body}");
        let message = body["detail"]
            .as_str()
            .or(body["errors"][0]["message"].as_str())
            .unwrap();
        assert!(message.contains("HONCHO_ALLOWED_HOSTS"), "{what}: {body}");
    }
    let ws = |host: &str| {
        let mut req = format!("{}/graphql/ws", base.replace("http://", "ws://"))
            .into_client_request()
            .unwrap();
        let h = req.headers_mut();
        h.insert("host", host.parse().unwrap());
        h.insert("origin", format!("http://{host}").parse().unwrap());
        h.insert(
            "sec-websocket-protocol",
            "graphql-transport-ws".parse().unwrap(),
        );
        tokio_tungstenite::connect_async(req)
    };
    let err = ws(&rebound).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    let data = app
        .ok("{ workspace(id: \"rebound\") { id } }", json!({}))
        .await;
    assert_eq!(data["workspace"], Value::Null, "a rebound page wrote");

    // The loopback names and IP literals, with or without a port, are answered.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".into(),
        format!("[::1]:{port}"),
    ] {
        for (what, request) in requests(&host) {
            let status = request.send().await.unwrap().status();
            assert!(status.is_success(), "{what} as {host}: {status}");
        }
        ws(&host)
            .await
            .expect("a WebSocket from the server's own page");
    }

    // A name the operator lists is answered too.
    let listed = serve(
        &app,
        HttpOptions {
            hosts: Hosts::parse("rebind.evil.example", false).unwrap(),
            ..HttpOptions::default()
        },
    )
    .await;
    let resp = http
        .get(format!("{listed}/health"))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn cors_preflights_pass_for_the_honcho_sdks_methods_and_headers() {
    let app = TestApp::new().await;
    let allowed = "http://app.localhost:5173";
    let base = serve_allowing(&app, allowed).await;
    let http = honcho_graphql::outbound::client();
    // What the Stainless-generated clients (honcho-core, @honcho-ai/core) ask to send.
    let sdk_headers = "authorization, content-type, accept, x-stainless-lang, \
        x-stainless-package-version, x-stainless-os, x-stainless-arch, x-stainless-runtime, \
        x-stainless-runtime-version, x-stainless-retry-count, x-stainless-timeout";
    for (method, path) in [
        ("PUT", "/v3/workspaces/w"),
        ("DELETE", "/v3/workspaces/w/sessions/s"),
        ("POST", "/v3/workspaces/w/peers/list"),
    ] {
        let resp = http
            .request(reqwest::Method::OPTIONS, format!("{base}{path}"))
            .header("origin", allowed)
            .header("access-control-request-method", method)
            .header("access-control-request-headers", sdk_headers)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{method}: {}", resp.status());
        let h = resp.headers();
        assert_eq!(h["access-control-allow-origin"], allowed, "{method}");
        let methods = h["access-control-allow-methods"].to_str().unwrap();
        assert!(methods.contains(method), "{method}: {methods}");
        let headers = h["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .to_lowercase();
        for wanted in sdk_headers.split(',').map(str::trim) {
            assert!(headers.contains(wanted), "{wanted} not in {headers}");
        }
    }
    // The actual PUT, from the allowed origin, goes through.
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"w\") { id } }",
        json!({}),
    )
    .await;
    let resp = http
        .put(format!("{base}/v3/workspaces/w"))
        .header("origin", allowed)
        .header("x-stainless-lang", "js")
        .json(&json!({"metadata": {"from": "browser"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], allowed);
}
