//! OpenTelemetry traces: the real server binary, pointed at a collector stub on loopback by
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, exports the spans of a GraphQL operation, of the store calls
//! it makes and of their SQL statements over OTLP/HTTP (protobuf), linked parent to child.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use crate::harness::{ServerProcess, TestApp};
use crate::subscriptions::{ws_connect, ws_result, ws_send};

/// An exported span with the attributes of its resource (the service).
type ResourceSpan = (Vec<KeyValue>, Span);

/// What the stub received.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<ResourceSpan>>>);

async fn collect(State(received): State<Received>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf trace export");
    let mut spans = received.0.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| r.attributes)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            spans.extend(scope.spans.into_iter().map(|s| (resource.clone(), s)));
        }
    }
    ""
}

/// A collector that accepts `/v1/traces` posts on a loopback port; its address and what it got.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .and_then(|v| match v {
            any_value::Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        })
}

async fn graphql(server: &ServerProcess, request_id: &str, query: &str) -> Value {
    let resp = honcho_graphql::outbound::client()
        .post(server.url("/graphql"))
        .header("x-request-id", request_id)
        .json(&json!({ "query": query }))
        .send()
        .await
        .expect("the server answers");
    let body: Value = resp.json().await.unwrap();
    assert!(body.get("errors").is_none(), "{body}");
    body
}

#[tokio::test]
async fn an_operation_its_store_calls_and_their_statements_are_exported_as_linked_spans() {
    let app = TestApp::new().await;
    let (endpoint, received) = collector().await;
    let server = ServerProcess::start(
        &app._db,
        &[
            ("HONCHO_AUTH_SECRET", ""),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", ""),
            // Export every 100 ms instead of every 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    graphql(
        &server,
        "trace-write",
        r#"mutation Seed { createMessages(workspaceId: "W1", sessionId: "s",
             messages: [{peerId: "alice", content: "hello"}, {peerId: "bob", content: "hi"}]) { id } }"#,
    )
    .await;
    graphql(
        &server,
        "trace-read",
        r#"query Read { workspace(id: "W1") { session(id: "s") {
             messages(first: 10) { nodes { content peer { id } } } } } }"#,
    )
    .await;

    // A client's operation name is clipped in the span (a 1 MB name must not sit in the export
    // queue 2,048 times over).
    let long_name = "N".repeat(1_000);
    graphql(
        &server,
        "trace-long",
        &format!("query {long_name} {{ __typename }}"),
    )
    .await;

    let started = Instant::now();
    let spans = loop {
        let spans = received.0.lock().unwrap().clone();
        let done = spans.iter().any(|(_, s)| s.name == "query Read")
            && spans.iter().any(|(_, s)| s.name == "mutation Seed")
            && spans.iter().any(|(_, s)| s.name.starts_with("query NNN"));
        if done {
            break spans;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no operation spans after 20 s; got {:?}",
            spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let long = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name.starts_with("query NNN"))
        .unwrap();
    assert_eq!(long.name, format!("query {}", &long_name[..256]));
    assert_eq!(
        attribute(&long.attributes, "graphql.operation.name").map(str::len),
        Some(256)
    );
    let by_id: HashMap<&[u8], &Span> = spans
        .iter()
        .map(|(_, s)| (s.span_id.as_slice(), s))
        .collect();
    let parent = |s: &Span| by_id.get(s.parent_span_id.as_slice()).copied();

    for (name, request_id) in [
        ("query Read", "trace-read"),
        ("mutation Seed", "trace-write"),
    ] {
        let (resource, operation) = spans.iter().find(|(_, s)| s.name == name).unwrap();
        assert_eq!(
            attribute(resource, "service.name"),
            Some("honcho-graphql"),
            "{resource:?}"
        );
        assert_eq!(
            attribute(&operation.attributes, "request_id"),
            Some(request_id)
        );
        // Under the HTTP request's span, which carries the same request id.
        let request = parent(operation).expect("the operation's parent span was exported");
        assert_eq!(request.name, "request");
        assert_eq!(
            attribute(&request.attributes, "request_id"),
            Some(request_id)
        );

        // Store calls below the operation (a dataloader's batch task included), statements
        // below the store calls, all in the operation's trace.
        let store_calls: Vec<&Span> = spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with("store.") && parent(s) == Some(operation))
            .collect();
        assert!(!store_calls.is_empty(), "{name}: no store call under it");
        let statements: Vec<&Span> = spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| {
                s.name.starts_with("sea_orm.")
                    && parent(s).is_some_and(|p| store_calls.contains(&p))
            })
            .collect();
        assert!(
            !statements.is_empty(),
            "{name}: no statement under its store calls"
        );
        assert!(
            statements.iter().all(|s| s.trace_id == operation.trace_id
                && s.start_time_unix_nano >= operation.start_time_unix_nano),
            "{name}"
        );
        assert!(
            statements
                .iter()
                .filter_map(|s| attribute(&s.attributes, "db.statement"))
                .any(|sql| sql.contains("messages")),
            "{name}: no statement text names the messages table"
        );
    }
    let read = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "query Read")
        .unwrap();
    let read_calls: Vec<&str> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| parent(s) == Some(read))
        .map(|s| s.name.as_str())
        .collect();
    // `peer` goes through the request's dataloader, whose batches run on tasks of their own.
    assert!(
        read_calls.contains(&"store.peers_by_keys"),
        "store calls of the read: {read_calls:?}"
    );

    // A query over the WebSocket is an operation span too, with its store calls under it.
    let mut ws = ws_connect(server.addr, "graphql-transport-ws", json!({})).await;
    ws_send(
        &mut ws,
        json!({"id": "1", "type": "subscribe",
               "payload": {"query": "query OverWs { workspace(id: \"W1\") { id } }"}}),
    )
    .await;
    assert_eq!(
        ws_result(&mut ws, "1").await,
        Ok(json!({"workspace": {"id": "W1"}}))
    );
    let started = Instant::now();
    loop {
        let spans = received.0.lock().unwrap().clone();
        let operation = spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == "query OverWs");
        if let Some(operation) = operation {
            assert!(
                spans
                    .iter()
                    .any(|(_, s)| s.name.starts_with("store.")
                        && s.parent_span_id == operation.span_id),
                "no store call under the WebSocket operation"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no span of the WebSocket operation after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(server.alive());
}
