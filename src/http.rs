//! HTTP surface: `/graphql` (POST and GET), `/graphql/ws` (subscriptions over WebSocket, both
//! graphql-transport-ws and the legacy graphql-ws protocol), `/health`, `/ready`, `/metrics`, and
//! the playground at `/`. Every request gets an `x-request-id` (kept when the client sends one)
//! that its log lines carry; a panic in a handler becomes a 500 instead of a dropped connection.
//!
//! `/graphql` reads the caller's key from `Authorization: Bearer <key>` into the request's data,
//! `/graphql/ws` from the `connection_init` payload (`{"Authorization": "Bearer <key>"}`) into the
//! connection's data; the guards decide per field (a missing or bad key with auth on makes every
//! guarded field answer UNAUTHENTICATED). `/health`, `/ready`, `/metrics` and the playground are
//! open.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql_axum::{GraphQLProtocol, GraphQLRequest, GraphQLResponse, GraphQLWebSocket};
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;

use crate::graphql::subscription::{LoaderExecutor, on_connection_init};
use crate::graphql::{AppSchema, Limits};
use crate::store::Store;

#[derive(Clone)]
struct AppState {
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
}

pub fn router(schema: AppSchema, store: Store, max_body_bytes: usize) -> Router {
    router_with_playground(schema, store, max_body_bytes, None)
}

/// As [`router`], and with a built playground directory, `/` serves it: its files, and its
/// index.html for any other GET path (client-side routes). Without one, `/` says how to build it.
pub fn router_with_playground(
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
    playground: Option<&Path>,
) -> Router {
    let api = Router::new()
        .route("/graphql", get(graphql).post(graphql))
        .route("/graphql/ws", get(graphql_ws))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics));
    let app = match playground {
        Some(dir) => api
            .fallback_service(ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html")))),
        None => api.route("/", get(index)),
    };
    app.with_state(AppState {
        schema,
        store,
        max_body_bytes,
    })
        .layer(RequestBodyLimitLayer::new(max_body_bytes))
        .layer(CatchPanicLayer::new())
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %req.method(), uri = %req.uri(), request_id = %id)
            }),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// Prometheus text format.
async fn metrics() -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        crate::graphql::metrics::render(),
    )
}

/// A document refused before parsing ([`crate::graphql::limits`]) is answered 400 with a GraphQL
/// body, so a client sees the same coded error it would over the WebSocket.
async fn graphql(State(app): State<AppState>, headers: HeaderMap, req: GraphQLRequest) -> Response {
    // A header that is not visible ASCII is as good as a bad key (the guards say UNAUTHENTICATED).
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    let caller = crate::graphql::authenticate(&app.schema, authorization);
    match crate::graphql::admit(&app.schema, req.into_inner().data(caller)) {
        Ok(admitted) => {
            GraphQLResponse::from(crate::graphql::execute_admitted(&app.schema, admitted).await)
                .into_response()
        }
        Err(exceeded) => (
            StatusCode::BAD_REQUEST,
            GraphQLResponse::from(crate::graphql::refusal(exceeded)),
        )
            .into_response(),
    }
}

const WS_READ_BUFFER: usize = 4 * 1024;

/// Upgrades to a GraphQL WebSocket; the protocol comes from `Sec-WebSocket-Protocol`
/// (`graphql-transport-ws` or `graphql-ws`; 400 without either). Messages are capped like bodies.
async fn graphql_ws(
    State(app): State<AppState>,
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(app.max_body_bytes)
        // Clients send little (init, subscribe, pings); tungstenite's 128 KiB default read buffer
        // was most of an idle subscriber's memory. Larger messages still grow it as needed.
        .read_buffer_size(WS_READ_BUFFER)
        .on_upgrade(move |socket| async move {
            let schema = app.schema.clone();
            let init_timeout = schema
                .data::<Limits>()
                .map(|l| l.ws_init_timeout)
                .unwrap_or_else(|| Limits::default().ws_init_timeout);
            let initialised = Arc::new(AtomicBool::new(false));
            let flag = initialised.clone();
            let serve = GraphQLWebSocket::new(socket, LoaderExecutor(app.schema), protocol)
                .on_connection_init(move |payload| {
                    flag.store(true, Ordering::SeqCst);
                    on_connection_init(schema, payload)
                })
                .serve();
            tokio::pin!(serve);
            tokio::select! {
                () = &mut serve => return,
                () = tokio::time::sleep(init_timeout) => {}
            }
            // A socket that never sent connection_init is dropped (and with it the connection):
            // otherwise it holds a descriptor and a task for as long as the client likes.
            if initialised.load(Ordering::SeqCst) {
                serve.await;
            }
        })
}

/// The process is up.
async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// The database answers; load balancers should route here only when this is 200.
async fn ready(State(app): State<AppState>) -> impl IntoResponse {
    match tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "database unavailable"})),
        ),
    }
}

async fn index() -> Html<&'static str> {
    Html(
        "<!doctype html><title>honcho-graphql</title>\
         <p>honcho-graphql is running. POST GraphQL requests to <code>/graphql</code>.</p>\
         <p>The playground (GraphiQL, reasoning trees, search) is not built: run \
         <code>make playground</code> and reload, or set <code>HONCHO_PLAYGROUND_DIR</code>.</p>",
    )
}
