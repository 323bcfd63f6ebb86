//! HTTP surface: Honcho's REST API under `/v3` ([`crate::rest`]), `/graphql` (POST and GET),
//! `/graphql/ws` (subscriptions over WebSocket, both graphql-transport-ws and the legacy
//! graphql-ws protocol), `/health`, `/ready`, `/metrics`, and
//! the playground at `/`. Every request gets an `x-request-id` (kept when the client sends one)
//! that its log lines carry; a panic in a handler becomes a 500 instead of a dropped connection.
//!
//! `/graphql` reads the caller's key from `Authorization: Bearer <key>` into the request's data,
//! `/graphql/ws` from the `connection_init` payload (`{"Authorization": "Bearer <key>"}`) into the
//! connection's data; the guards decide per field (a missing or bad key with auth on makes every
//! guarded field answer UNAUTHENTICATED). `/health`, `/ready`, `/metrics` and the playground are
//! open.

mod connections;
mod hosts;
pub mod listener;
mod origins;
pub mod persisted;
mod playground;
mod sockets;
pub mod transport;

use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql::http::{WebSocketProtocols, WsMessage};
use async_graphql::parser::types::OperationType;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt, future};
use serde_json::{Value, json};
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::graphql::error::Code;
use crate::graphql::subscription::{LoaderExecutor, connection_data};
use crate::graphql::{AppSchema, Limits};
use crate::store::replicas::ReadAfter;
use crate::store::{Lsn, Store};
pub use connections::{ConnectionTimeouts, serve};
pub use hosts::{Hosts, HostsError};
pub use origins::{Origins, OriginsError};
pub use persisted::Persisted;
pub use playground::Playground;
pub use sockets::DEFAULT_MAX_PER_ADDRESS as DEFAULT_MAX_WEBSOCKETS_PER_ADDRESS;
use sockets::Sockets;
use transport::{HttpError, MediaType, Params};

/// What the HTTP layer needs besides the schema and the store.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Largest request body (413 above).
    pub max_body_bytes: usize,
    /// A request running longer is answered 503 (None: no limit).
    pub request_timeout: Option<Duration>,
    /// Browser origins allowed besides the server's own (CORS, WebSocket upgrades, POSTs).
    pub origins: Origins,
    /// `Host` names answered besides IP literals and `localhost`.
    pub hosts: Hosts,
    /// Most WebSockets open at once from one client address (0: no cap).
    pub max_websockets_per_address: usize,
    /// What `/` serves.
    pub playground: Playground,
    /// Persisted documents (APQ) and, in strict mode, the trusted ones.
    pub persisted: Arc<Persisted>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_body_bytes: 16 * 1024 * 1024,
            request_timeout: None,
            origins: Origins::None,
            hosts: Hosts::default(),
            max_websockets_per_address: DEFAULT_MAX_WEBSOCKETS_PER_ADDRESS,
            playground: Playground::Missing,
            persisted: Arc::default(),
        }
    }
}

#[derive(Clone)]
struct AppState {
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
    origins: Origins,
    persisted: Arc<Persisted>,
    sockets: Arc<Sockets>,
}

pub fn router(schema: AppSchema, store: Store, max_body_bytes: usize) -> Router {
    router_with(
        schema,
        store,
        HttpOptions {
            max_body_bytes,
            ..HttpOptions::default()
        },
    )
}

/// As [`router`], and with a built playground directory, `/` serves it: its files, and its
/// index.html for any other GET path (client-side routes). Without one, `/` says how to build it.
pub fn router_with_playground(
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
    playground: Option<&Path>,
) -> Router {
    router_with(
        schema,
        store,
        HttpOptions {
            max_body_bytes,
            playground: match playground {
                Some(dir) => Playground::Dir(dir.to_path_buf()),
                None => Playground::Missing,
            },
            ..HttpOptions::default()
        },
    )
}

pub fn router_with(schema: AppSchema, store: Store, options: HttpOptions) -> Router {
    let api = Router::new()
        .route("/graphql", get(graphql).post(graphql))
        .route("/graphql/ws", get(graphql_ws))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics));
    let app = options.playground.route(api);
    let services = rest_state(&schema, &store);
    let rest = crate::rest::router(services.clone())
        .merge(crate::mcp::router(services, options.max_body_bytes));
    let app = app.with_state(AppState {
        schema,
        store,
        max_body_bytes: options.max_body_bytes,
        origins: options.origins.clone(),
        persisted: options.persisted.clone(),
        sockets: Sockets::new(options.max_websockets_per_address),
    });
    layers(app.merge(rest), &options)
}

/// REST's and MCP's services from what the GraphQL schema was built with: the same sealed store,
/// keys and dialectic, so the three APIs serve one store under one rule table.
pub fn rest_state(schema: &AppSchema, store: &Store) -> crate::access::Services {
    crate::access::Services::new(
        schema
            .data::<crate::access::Sealed<Store>>()
            .cloned()
            .unwrap_or_else(|| crate::access::Sealed::new(store.clone())),
        schema.data::<crate::access::Auth>().cloned(),
        schema.data::<crate::dialectic::Dialectic>().cloned(),
    )
}

/// The layers around every route, innermost first: body limit, panics caught, request timeout,
/// error bodies, CORS, the `Host` and cross-site checks ([`edge_checks`]), request ids and
/// tracing.
fn layers(app: Router, options: &HttpOptions) -> Router {
    let mut app = app
        .layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .layer(CatchPanicLayer::new());
    // A request that outlives this is answered 503; its statements are cut by statement_timeout.
    // (A WebSocket upgrade is answered at once; the socket then lives on its own task.)
    if let Some(timeout) = options.request_timeout {
        app = app.layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ));
    }
    let limits = ErrorLimits {
        max_body_bytes: options.max_body_bytes,
        timeout: options.request_timeout,
    };
    app = app.layer(axum::middleware::from_fn(move |req, next| {
        error_bodies(limits, req, next)
    }));
    // Outside the error bodies, so that a page on an allowed origin can read its errors too.
    if let Some(cors) = options.origins.cors() {
        app = app.layer(cors);
    }
    let edge = Arc::new((options.hosts.clone(), options.origins.clone()));
    app = app.layer(axum::middleware::from_fn(move |req, next| {
        edge_checks(edge.clone(), req, next)
    }));
    app.layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                let uri = req.uri().to_string();
                tracing::info_span!(
                    "request",
                    method = %req.method(),
                    uri = crate::telemetry::clip(&uri),
                    request_id = crate::telemetry::clip(id),
                )
            }),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// Prometheus text format.
async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    let replicas = app
        .store
        .read_pool()
        .map(|pool| crate::graphql::metrics::encode(&pool.gather()))
        .unwrap_or_default();
    (
        [("content-type", "text/plain; version=0.0.4")],
        format!(
            "{}{}{}{replicas}",
            crate::graphql::metrics::render(),
            crate::graphql::metrics::encode(&crate::deriver::metrics::gather()),
            listener::render(),
        ),
    )
}

/// GraphQL over HTTP ([`transport`]). A document refused before parsing
/// ([`crate::graphql::limits`]) is answered 400 with a GraphQL body under either media type, so a
/// client sees the same coded error it would over the WebSocket.
async fn graphql(State(app): State<AppState>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let media = match MediaType::negotiate(&parts.headers) {
        Ok(media) => media,
        Err(refused) => return refused.respond(MediaType::Json),
    };
    let params = match parts.method.clone() {
        Method::GET => Params::from_query(parts.uri.query()),
        Method::POST => match transport::require_json(&parts.headers) {
            Ok(()) => match read_body(body, app.max_body_bytes).await {
                Ok(bytes) => Params::from_body(&bytes),
                Err(refused) => Err(refused),
            },
            Err(refused) => Err(refused),
        },
        other => Err(HttpError::MethodNotAllowed(other)),
    };
    let mut params = match params {
        Ok(params) => params,
        Err(refused) => return refused.respond(media),
    };
    // A header that is not visible ASCII is as good as a bad key (the guards say UNAUTHENTICATED).
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    let caller = crate::graphql::authenticate(&app.schema, authorization);
    let sender = persisted::Sender::of(Some(&caller));
    let query = match app
        .persisted
        .resolve(params.query.take(), params.extensions.as_ref(), sender)
    {
        Ok(Some(query)) => query,
        Ok(None) => {
            return HttpError::BadParameters(
                "the request has no `query` (the GraphQL document, a string)".into(),
            )
            .respond(media);
        }
        Err(refused) => {
            // An unknown hash is a request error like any other: the client's APQ link reads it
            // and sends the document.
            let not_found = refused == persisted::PersistedError::NotFound;
            let mut resp = transport::graphql_response(refused.into_response(), media);
            if !not_found {
                *resp.status_mut() = StatusCode::BAD_REQUEST;
            }
            return resp;
        }
    };
    let mut request = params.into_request(query).data(caller);
    if let Some(id) = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        request = request.data(crate::graphql::RequestId(id.to_owned()));
    }
    match read_after(&parts.headers) {
        Ok(Some(after)) => request = request.data(after),
        Ok(None) => {}
        Err(refused) => return refused.respond(media),
    }
    match crate::graphql::admit(&app.schema, request) {
        Ok(admitted) => {
            // GET is for reads: a link or an <img> must never write.
            if parts.method == Method::GET {
                match admitted.operation_type() {
                    Some(OperationType::Mutation) => {
                        return HttpError::NotAQuery("mutation").respond(media);
                    }
                    Some(OperationType::Subscription) => {
                        return HttpError::NotAQuery("subscription").respond(media);
                    }
                    _ => {}
                }
            }
            let response = crate::graphql::execute_admitted(&app.schema, admitted).await;
            transport::graphql_response(response, media)
        }
        Err(exceeded) => {
            let mut resp = transport::graphql_response(crate::graphql::refusal(exceeded), media);
            *resp.status_mut() = StatusCode::BAD_REQUEST;
            resp
        }
    }
}

/// The header by which a client asks to read its own writes: the `consistencyToken` of a
/// mutation's `extensions`.
pub const READ_AFTER_HEADER: &str = "x-honcho-after";

/// The request's consistency token, if it sent one (400 when it is not one).
fn read_after(headers: &HeaderMap) -> Result<Option<ReadAfter>, HttpError> {
    let Some(value) = headers.get(READ_AFTER_HEADER) else {
        return Ok(None);
    };
    let refused = |why: String| {
        HttpError::BadParameters(format!(
            "{READ_AFTER_HEADER} must be the consistencyToken of a mutation's extensions: {why}"
        ))
    };
    let text = value
        .to_str()
        .map_err(|_| refused("it is not visible ASCII".into()))?;
    text.parse::<Lsn>()
        .map(|lsn| Some(ReadAfter(lsn)))
        .map_err(|e| refused(e.to_string()))
}

/// The whole body, or 413 when it is longer than the limit (the body limit layer cuts the stream;
/// this reads that as 413, not as a broken request).
async fn read_body(body: Body, max: usize) -> Result<Bytes, HttpError> {
    axum::body::to_bytes(body, max).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<http_body_util::LengthLimitError>() {
                return HttpError::PayloadTooLarge(max);
            }
            source = err.source();
        }
        HttpError::BadParameters(format!("the request body could not be read: {e}"))
    })
}

/// What a page on another site, or one that DNS rebinding made look like this server's own, can
/// send: refused before any route runs, with auth on or off.
/// - A `Host` that is not one of this server's names ([`hosts`]): 403.
/// - A method other than GET, HEAD and OPTIONS (the methods that never write here) with an
///   `Origin` that is neither this server's nor an allowed one ([`Origins::admits`]): 403.
///   Browsers send `Origin` with every such request, including the forms and `no-cors` fetches
///   that need no preflight, whatever their body or content type; clients that are not
///   browsers send none.
async fn edge_checks(edge: Arc<(Hosts, Origins)>, request: Request<Body>, next: Next) -> Response {
    let (hosts, origins) = &*edge;
    let host = match request.headers().get(header::HOST) {
        Some(value) => Some(value.to_str().unwrap_or_default()),
        None => request.uri().authority().map(|a| a.as_str()),
    };
    let refused = if !hosts.allows(host) {
        Some(format!(
            "the host `{}` is not one this server answers (HONCHO_ALLOWED_HOSTS)",
            host.unwrap_or_default()
        ))
    } else if !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) && !origins.admits(request.headers())
    {
        let origin = request.headers().get(header::ORIGIN);
        Some(format!(
            "a {} from the origin `{}` is not allowed (HONCHO_CORS_ORIGINS)",
            request.method(),
            origin
                .map(|o| String::from_utf8_lossy(o.as_bytes()))
                .unwrap_or_default()
        ))
    } else {
        None
    };
    match refused {
        Some(message) => {
            let mut resp = refusal(&request, StatusCode::FORBIDDEN, Code::Forbidden, &message);
            resp.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("origin"));
            resp
        }
        None => next.run(request).await,
    }
}

/// Whether `path` is Honcho's REST API, whose errors are `{"detail": ...}`.
fn is_rest(path: &str) -> bool {
    path == "/v3" || path.starts_with("/v3/")
}

/// An error response in the shape of the API `request` went to: `{"detail": ...}` under `/v3`,
/// a GraphQL error body with the code and the request id elsewhere.
fn refusal(request: &Request<Body>, status: StatusCode, code: Code, message: &str) -> Response {
    if is_rest(request.uri().path()) {
        return crate::rest::RestError::new(status, message).into_response();
    }
    let media = MediaType::negotiate(request.headers()).unwrap_or(MediaType::Json);
    let mut body = transport::error_body(message, code);
    if let Some(id) = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        body["errors"][0]["extensions"]["requestId"] = Value::String(id.to_owned());
    }
    transport::json_response(status, media, &body)
}

#[derive(Clone, Copy)]
struct ErrorLimits {
    max_body_bytes: usize,
    timeout: Option<Duration>,
}

/// Every error response is a GraphQL error body with a code and the request id, including those
/// answered by layers that know nothing of GraphQL: the body limit (413), the request timeout
/// (503), a caught panic (500), a method the route does not serve (405), a refused WebSocket
/// upgrade. Error bodies that are GraphQL already get the request id added to each error.
/// Under `/v3` every error is `{"detail": ...}` instead, those of axum's extractors included (a
/// query string or a path that does not fit is 422 there, as FastAPI answers).
async fn error_bodies(limits: ErrorLimits, request: Request<Body>, next: Next) -> Response {
    let request_id = request.headers().get("x-request-id").cloned();
    let rest = is_rest(request.uri().path());
    let media = MediaType::negotiate(request.headers()).unwrap_or(MediaType::Json);
    let resp = next.run(request).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let id = request_id
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with(transport::JSON) || t.starts_with(transport::GRAPHQL_RESPONSE_JSON)
        });
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (status, "error body too large").into_response();
    };
    if rest {
        if is_json {
            // A RestError's body already.
            return Response::from_parts(parts, Body::from(bytes));
        }
        let (_, detail) = plain_error(status, &bytes, limits, &id);
        parts.status = match status {
            StatusCode::BAD_REQUEST => StatusCode::UNPROCESSABLE_ENTITY,
            s => s,
        };
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Response::from_parts(parts, Body::from(json!({ "detail": detail }).to_string()));
    }
    let mut value = if is_json {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.get("errors").is_some_and(Value::is_array) => v,
            // JSON that is not a GraphQL body (`/ready`'s status) stays as it is.
            _ => return Response::from_parts(parts, Body::from(bytes)),
        }
    } else {
        let (code, message) = plain_error(status, &bytes, limits, &id);
        parts
            .headers
            .insert(header::CONTENT_TYPE, media.content_type());
        transport::error_body(&message, code)
    };
    if let Some(errors) = value.get_mut("errors").and_then(Value::as_array_mut) {
        for error in errors {
            if let Some(error) = error.as_object_mut() {
                let extensions = error.entry("extensions").or_insert_with(|| json!({}));
                if let Some(extensions) = extensions.as_object_mut() {
                    extensions.insert("requestId".into(), Value::String(id.clone()));
                }
            }
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(value.to_string()))
}

/// The code and message of an error response whose body is not JSON (a layer's, or an
/// extractor's plain-text rejection).
fn plain_error(status: StatusCode, body: &[u8], limits: ErrorLimits, id: &str) -> (Code, String) {
    let text = String::from_utf8_lossy(body).trim().to_owned();
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            Code::PayloadTooLarge,
            HttpError::PayloadTooLarge(limits.max_body_bytes).to_string(),
        ),
        StatusCode::SERVICE_UNAVAILABLE => (
            Code::Unavailable,
            match limits.timeout {
                Some(t) => format!(
                    "the request took longer than {} ms (HONCHO_REQUEST_TIMEOUT_MS); it may be retried",
                    t.as_millis()
                ),
                None => "the service is unavailable; the request may be retried".into(),
            },
        ),
        StatusCode::METHOD_NOT_ALLOWED => (
            Code::MethodNotAllowed,
            "this path does not serve that method".into(),
        ),
        StatusCode::NOT_FOUND => (Code::NotFound, "no such path".into()),
        s if s.is_server_error() => {
            tracing::error!(request_id = %id, status = %s, "internal error answered");
            (
                Code::Internal,
                format!("internal server error (request {id})"),
            )
        }
        _ if !text.is_empty() => (Code::BadRequest, text),
        s => (
            Code::BadRequest,
            s.canonical_reason().unwrap_or("bad request").to_owned(),
        ),
    }
}

const WS_READ_BUFFER: usize = 4 * 1024;

/// Upgrades to a GraphQL WebSocket; the protocol comes from `Sec-WebSocket-Protocol`
/// (`graphql-transport-ws` or `graphql-ws`; 400 without either). Messages are capped like bodies.
async fn graphql_ws(
    State(app): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Browsers do not preflight WebSockets: without this any page could subscribe and query here.
    if !app.origins.admits(&headers) {
        let origin = headers
            .get(header::ORIGIN)
            .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned())
            .unwrap_or_default();
        let mut resp = transport::json_response(
            StatusCode::FORBIDDEN,
            MediaType::Json,
            &transport::error_body(
                &format!(
                    "a WebSocket from the origin `{origin}` is not allowed (HONCHO_CORS_ORIGINS)"
                ),
                Code::Forbidden,
            ),
        );
        resp.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("origin"));
        return resp;
    }
    let protocol = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(',')
                .find_map(|p| WebSocketProtocols::from_str(p.trim()).ok())
        });
    let Some(protocol) = protocol else {
        return transport::json_response(
            StatusCode::BAD_REQUEST,
            MediaType::Json,
            &transport::error_body(
                "Sec-WebSocket-Protocol must name graphql-transport-ws or graphql-ws",
                Code::BadUserInput,
            ),
        );
    };
    // Known wherever the server runs its own accept loop (`serve`); a router served without the
    // peer's address has no cap.
    let socket = match peer.map(|Extension(ConnectInfo(addr))| app.sockets.open(addr.ip())) {
        Some(None) => return too_many_websockets(app.sockets.max()),
        Some(Some(socket)) => Some(socket),
        None => None,
    };
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(app.max_body_bytes)
        // Clients send little (init, subscribe, pings); tungstenite's 128 KiB default read buffer
        // was most of an idle subscriber's memory. Larger messages still grow it as needed.
        .read_buffer_size(WS_READ_BUFFER)
        .on_upgrade(move |ws| async move {
            serve_ws(ws, app.schema, protocol, app.persisted).await;
            drop(socket);
        })
}

/// 429 for a client address at `HONCHO_MAX_WEBSOCKETS_PER_ADDRESS`, coded as the other limits.
fn too_many_websockets(max: usize) -> Response {
    let mut body = transport::error_body(
        &format!(
            "this address already has {max} WebSockets open, the most allowed \
             (HONCHO_MAX_WEBSOCKETS_PER_ADDRESS); close one first"
        ),
        Code::BadUserInput,
    );
    body["errors"][0]["extensions"]["limit"] = json!("HONCHO_MAX_WEBSOCKETS_PER_ADDRESS");
    body["errors"][0]["extensions"]["max"] = json!(max);
    transport::json_response(StatusCode::TOO_MANY_REQUESTS, MediaType::Json, &body)
}

/// Close code for a connection whose `connection_init` did not come in time (graphql-ws's).
const CLOSE_INIT_TIMEOUT: u16 = 4408;
/// Close code for a connection whose key expired (graphql-ws's "Unauthorized").
const CLOSE_KEY_EXPIRED: u16 = 4401;
/// Close code for a `connection_init` refused (graphql-ws's "Forbidden", what its servers answer
/// when they reject the init payload): with auth on, a missing, invalid or expired key.
const CLOSE_REFUSED: u16 = 4403;
/// How long a close frame may take to leave before the socket is dropped without it.
const CLOSE_SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Where a socket's `connection_init` stands.
#[derive(Clone, Debug)]
enum Init {
    Pending,
    /// Acknowledged; the key's expiry, if it has one.
    Accepted(Option<DateTime<Utc>>),
    /// Refused, and why.
    Refused(String),
}

/// Serves one GraphQL WebSocket, as async-graphql-axum's `GraphQLWebSocket::serve` does, with
/// deadlines of its own: `connection_init` must come within the configured time (pings, and
/// operations, which are refused before it, do not extend it); with auth on it must carry a
/// valid key, or the socket is closed at once with 4403 (with auth on nothing in the schema is
/// public); and the socket is closed when the key it authenticated with expires (operations and
/// events check the expiry too, so nothing is served in between). A message that cannot be sent
/// before the deadline (a client that does not read) ends the socket there too.
async fn serve_ws(
    socket: WebSocket,
    schema: AppSchema,
    protocol: WebSocketProtocols,
    persisted: Arc<Persisted>,
) {
    let init_timeout = schema.data::<Limits>().map_or_else(
        || Limits::default().connection_init_timeout,
        |l| l.connection_init_timeout,
    );
    let key_required = schema
        .data::<crate::auth::Auth>()
        .is_some_and(crate::auth::Auth::enabled);
    let (mut sink, stream) = socket.split();
    let input = stream
        .take_while(|res| future::ready(res.is_ok()))
        .filter_map(|msg| {
            future::ready(match msg {
                Ok(m @ (Message::Text(_) | Message::Binary(_))) => Some(m.into_data()),
                _ => None,
            })
        });
    let (initialised, mut state) = watch::channel(Init::Pending);
    let init_schema = schema.clone();
    let executor = TrustedOnly {
        inner: LoaderExecutor(schema),
        persisted,
    };
    let output = async_graphql::http::WebSocket::new(executor, input, protocol).on_connection_init(
        move |payload| async move {
            let (data, expires_at) = connection_data(&init_schema, payload);
            let refused = caller_of(&data)
                .map(crate::auth::Caller::principal)
                .and_then(Result::err)
                .filter(|_| key_required);
            match refused {
                Some(why) => {
                    let why = format!("connection_init refused: {why}");
                    initialised.send_replace(Init::Refused(why.clone()));
                    Err(async_graphql::Error::new(why))
                }
                None => {
                    initialised.send_replace(Init::Accepted(expires_at));
                    Ok(data)
                }
            }
        },
    );
    futures::pin_mut!(output);
    let opened = tokio::time::Instant::now();
    loop {
        let now = tokio::time::Instant::now();
        let deadline = match &*state.borrow_and_update() {
            Init::Pending => Some((
                opened + init_timeout,
                CLOSE_INIT_TIMEOUT,
                "connection_init timeout".to_owned(),
            )),
            Init::Accepted(Some(at)) => {
                // `exp` is the last second the key works.
                let left = (*at - Utc::now() + chrono::Duration::seconds(1))
                    .to_std()
                    .unwrap_or_default();
                Some((now + left, CLOSE_KEY_EXPIRED, "key expired".to_owned()))
            }
            Init::Accepted(None) => None,
            Init::Refused(why) => Some((now, CLOSE_REFUSED, why.clone())),
        };
        let until = deadline.as_ref().map(|(at, ..)| *at);
        tokio::select! {
            out = output.next() => match out {
                Some(WsMessage::Text(text)) => {
                    if !send_by(&mut sink, Message::Text(text.into()), until).await {
                        break;
                    }
                }
                Some(WsMessage::Close(code, reason)) => {
                    let frame = refused(&state).unwrap_or_else(|| close(code, reason));
                    send_close(&mut sink, frame).await;
                    break;
                }
                None => {
                    if let Some(frame) = refused(&state) {
                        send_close(&mut sink, frame).await;
                    }
                    break;
                }
            },
            // Re-reads the deadline; after connection_init the sender is gone and this branch
            // is never taken again.
            Ok(()) = state.changed() => {}
            () = sleep_until_or_never(until) => {
                if let Some((_, code, reason)) = deadline {
                    tracing::info!(code, reason, "closing WebSocket");
                    send_close(&mut sink, close(code, reason)).await;
                }
                break;
            }
        }
    }
}

/// The connection's caller, from its connection data.
fn caller_of(data: &async_graphql::Data) -> Option<&crate::auth::Caller> {
    data.get(&std::any::TypeId::of::<crate::auth::Caller>())
        .and_then(|c| c.downcast_ref::<crate::auth::Caller>())
}

/// The close frame of a refused `connection_init`: async-graphql ends one its own way (1002, or
/// the legacy protocol's `connection_error` and no close frame); the client is told 4403 either
/// way.
fn refused(state: &watch::Receiver<Init>) -> Option<Message> {
    match &*state.borrow() {
        Init::Refused(why) => Some(close(CLOSE_REFUSED, why.clone())),
        _ => None,
    }
}

/// Sends `message`; false when the socket is gone, or the client did not take it before `until`.
async fn send_by<S: futures::Sink<Message> + Unpin>(
    sink: &mut S,
    message: Message,
    until: Option<tokio::time::Instant>,
) -> bool {
    let send = sink.send(message);
    match until {
        Some(at) => matches!(tokio::time::timeout_at(at, send).await, Ok(Ok(()))),
        None => send.await.is_ok(),
    }
}

/// Sends a close frame, unless the client has not read for [`CLOSE_SEND_TIMEOUT`].
async fn send_close<S: futures::Sink<Message> + Unpin>(sink: &mut S, frame: Message) {
    let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, sink.send(frame)).await;
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

/// The WebSocket's executor: in strict mode each operation's document must be trusted, as over
/// HTTP (the connection's key decides the admin exemption).
#[derive(Clone)]
struct TrustedOnly {
    inner: LoaderExecutor,
    persisted: Arc<Persisted>,
}

impl TrustedOnly {
    fn check(
        &self,
        mut request: async_graphql::Request,
        session_data: Option<&async_graphql::Data>,
    ) -> Result<async_graphql::Request, persisted::PersistedError> {
        if !self.persisted.strict() {
            return Ok(request);
        }
        let sender = persisted::Sender::of(session_data.and_then(caller_of));
        let extensions = serde_json::to_value(&request.extensions).unwrap_or_default();
        let query = std::mem::take(&mut request.query);
        let query = (!query.is_empty()).then_some(query);
        match self
            .persisted
            .resolve(query, extensions.as_object(), sender)
        {
            Ok(Some(query)) => {
                request.query = query;
                Ok(request)
            }
            Ok(None) => Err(persisted::PersistedError::NotTrusted),
            Err(refused) => Err(refused),
        }
    }
}

impl async_graphql::Executor for TrustedOnly {
    async fn execute(&self, request: async_graphql::Request) -> async_graphql::Response {
        match self.check(request, None) {
            Ok(request) => self.inner.execute(request).await,
            Err(refused) => refused.into_response(),
        }
    }

    fn execute_stream(
        &self,
        request: async_graphql::Request,
        session_data: Option<Arc<async_graphql::Data>>,
    ) -> futures::stream::BoxStream<'static, async_graphql::Response> {
        use futures::StreamExt;
        match self.check(request, session_data.as_deref()) {
            Ok(request) => self.inner.execute_stream(request, session_data),
            Err(refused) => futures::stream::once(async move { refused.into_response() }).boxed(),
        }
    }
}

/// The process is up.
async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// The database answers and the listener has file descriptors to spare; load balancers should
/// route here only when this is 200. The body shows the listener's health either way, and the
/// state of each read replica (a replica that is down does not make the server unready).
async fn ready(State(app): State<AppState>) -> impl IntoResponse {
    let database = tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await;
    let listener = listener::Health::now();
    let (status, text) = match database {
        Ok(Ok(())) if listener.fds_ok() => (StatusCode::OK, "ready"),
        Ok(Ok(())) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "file descriptors running out",
        ),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable"),
    };
    let mut body = json!({"status": text, "listener": listener});
    // Vectors of an older server: search works, and finds less until they are recomputed.
    if status == StatusCode::OK && app.store.vectors_predate_context().await.unwrap_or(false) {
        body["vectors"] = json!({
            "predate_contextual_embeddings": true,
            "fix": "honcho-graphql reembed --all",
        });
    }
    // Replicas inform, they do not decide: without them reads go to the primary.
    if let Some(pool) = app.store.read_pool() {
        body["replicas"] = json!(pool.status());
    }
    (status, Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layers around a route that panics and one that outlives the request timeout.
    async fn serve_failing_routes() -> String {
        async fn panics() -> &'static str {
            panic!("a handler bug")
        }
        async fn sleeps() -> &'static str {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "too late"
        }
        let app = Router::new()
            .route("/panic", get(panics))
            .route("/slow", get(sleeps));
        let options = HttpOptions {
            request_timeout: Some(Duration::from_millis(100)),
            ..HttpOptions::default()
        };
        let app = layers(app, &options);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    async fn get_error(url: String) -> (u16, String, Value) {
        let resp = crate::outbound::client()
            .get(url)
            .header("x-request-id", "req-42")
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let content_type = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        (status, content_type, resp.json().await.unwrap())
    }

    #[tokio::test]
    async fn a_caught_panic_and_a_timeout_answer_graphql_error_bodies() {
        let base = serve_failing_routes().await;
        let (status, content_type, body) = get_error(format!("{base}/panic")).await;
        assert_eq!(status, 500);
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        assert_eq!(
            body["errors"][0]["extensions"]["code"],
            "INTERNAL_SERVER_ERROR"
        );
        assert_eq!(body["errors"][0]["extensions"]["requestId"], "req-42");
        assert!(
            !body.to_string().contains("a handler bug"),
            "the panic message stays in the log: {body}"
        );

        let (status, _, body) = get_error(format!("{base}/slow")).await;
        assert_eq!(status, 503);
        assert_eq!(
            body["errors"][0]["extensions"]["code"],
            "SERVICE_UNAVAILABLE"
        );
        assert_eq!(body["errors"][0]["extensions"]["requestId"], "req-42");
        assert!(
            body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("HONCHO_REQUEST_TIMEOUT_MS"),
            "{body}"
        );
    }
}
