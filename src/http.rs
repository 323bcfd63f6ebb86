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
use std::str::FromStr;
use std::time::Duration;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql::http::{WebSocketProtocols, WsMessage};
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt, future};
use serde_json::json;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;

use crate::graphql::subscription::{LoaderExecutor, connection_data};
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
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let protocol = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(',')
                .find_map(|p| WebSocketProtocols::from_str(p.trim()).ok())
        });
    let Some(protocol) = protocol else {
        return (StatusCode::BAD_REQUEST, "no GraphQL WebSocket protocol").into_response();
    };
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(app.max_body_bytes)
        // Clients send little (init, subscribe, pings); tungstenite's 128 KiB default read buffer
        // was most of an idle subscriber's memory. Larger messages still grow it as needed.
        .read_buffer_size(WS_READ_BUFFER)
        .on_upgrade(move |socket| serve_ws(socket, app.schema, protocol))
}

/// Close code for a connection whose `connection_init` did not come in time (graphql-ws's).
const CLOSE_INIT_TIMEOUT: u16 = 4408;
/// Close code for a connection whose key expired (graphql-ws's "Unauthorized").
const CLOSE_KEY_EXPIRED: u16 = 4401;

/// Serves one GraphQL WebSocket, as async-graphql-axum's `GraphQLWebSocket::serve` does, with two
/// deadlines of its own: `connection_init` must come within the configured time, and the socket
/// is closed when the key it authenticated with expires (operations and events check the expiry
/// too, so nothing is served in between).
async fn serve_ws(socket: WebSocket, schema: AppSchema, protocol: WebSocketProtocols) {
    let init_timeout = schema.data::<Limits>().map_or_else(
        || Limits::default().connection_init_timeout,
        |l| l.connection_init_timeout,
    );
    let (mut sink, stream) = socket.split();
    let input = stream
        .take_while(|res| future::ready(res.is_ok()))
        .filter_map(|msg| {
            future::ready(match msg {
                Ok(m @ (Message::Text(_) | Message::Binary(_))) => Some(m.into_data()),
                _ => None,
            })
        });
    // None until connection_init has been handled; then the key's expiry, if it has one.
    let (initialised, mut expiry) = watch::channel::<Option<Option<DateTime<Utc>>>>(None);
    let init_schema = schema.clone();
    let output = async_graphql::http::WebSocket::new(LoaderExecutor(schema), input, protocol)
        .on_connection_init(move |payload| async move {
            let (data, expires_at) = connection_data(&init_schema, payload);
            initialised.send_replace(Some(expires_at));
            Ok(data)
        });
    futures::pin_mut!(output);
    let opened = tokio::time::Instant::now();
    loop {
        let deadline = match *expiry.borrow_and_update() {
            None => Some((
                opened + init_timeout,
                CLOSE_INIT_TIMEOUT,
                "connection_init timeout",
            )),
            Some(Some(at)) => {
                // `exp` is the last second the key works.
                let left = (at - Utc::now() + chrono::Duration::seconds(1))
                    .to_std()
                    .unwrap_or_default();
                Some((
                    tokio::time::Instant::now() + left,
                    CLOSE_KEY_EXPIRED,
                    "key expired",
                ))
            }
            Some(None) => None,
        };
        let (until, code, reason) = match deadline {
            Some((at, code, reason)) => (Some(at), code, reason),
            None => (None, 0, ""),
        };
        tokio::select! {
            out = output.next() => match out {
                Some(WsMessage::Text(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(WsMessage::Close(code, reason)) => {
                    let _ = sink.send(close(code, reason)).await;
                    break;
                }
                None => break,
            },
            // Re-reads the deadline; after connection_init the sender is gone and this branch
            // is never taken again.
            Ok(()) = expiry.changed() => {}
            () = sleep_until_or_never(until) => {
                tracing::info!(code, reason, "closing WebSocket");
                let _ = sink.send(close(code, reason.to_owned())).await;
                break;
            }
        }
    }
}

fn close(code: u16, reason: String) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

async fn sleep_until_or_never(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => future::pending().await,
    }
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
