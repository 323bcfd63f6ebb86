//! HTTP surface: `/graphql` (POST and GET), `/graphql/ws` (subscriptions over WebSocket, both
//! graphql-transport-ws and the legacy graphql-ws protocol), `/health`, `/ready`.

use std::time::Duration;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql_axum::{GraphQLProtocol, GraphQLRequest, GraphQLResponse, GraphQLWebSocket};
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::graphql::AppSchema;
use crate::graphql::subscription::{LoaderExecutor, on_connection_init};
use crate::store::Store;

#[derive(Clone)]
struct AppState {
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
}

pub fn router(schema: AppSchema, store: Store, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/graphql", get(graphql).post(graphql))
        .route("/graphql/ws", get(graphql_ws))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/", get(index))
        .with_state(AppState {
            schema,
            store,
            max_body_bytes,
        })
        .layer(RequestBodyLimitLayer::new(max_body_bytes))
        .layer(TraceLayer::new_for_http())
}

async fn graphql(State(app): State<AppState>, req: GraphQLRequest) -> GraphQLResponse {
    crate::graphql::execute(&app.schema, req.into_inner())
        .await
        .into()
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
        .on_upgrade(move |socket| {
            GraphQLWebSocket::new(socket, LoaderExecutor(app.schema), protocol)
                .on_connection_init(on_connection_init)
                .serve()
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
         <p>honcho-graphql is running. POST GraphQL requests to <code>/graphql</code>.</p>",
    )
}
