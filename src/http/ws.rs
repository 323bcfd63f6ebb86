//! `/graphql/ws`: the upgrade (origin, subprotocol, per-address cap) and the socket's loop, with
//! its deadlines (`connection_init`, key expiry, slow readers) around async-graphql's protocol.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql::http::{WebSocketProtocols, WsMessage};
use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt, future};
use serde_json::json;
use tokio::sync::watch;

use super::transport::{self, MediaType};
use super::{AppState, Persisted, persisted};
use crate::graphql::error::Code;
use crate::graphql::subscription::{LoaderExecutor, OpenPerKey, connection_data};
use crate::graphql::{AppSchema, Limits};

const WS_READ_BUFFER: usize = 4 * 1024;

/// Upgrades to a GraphQL WebSocket; the protocol comes from `Sec-WebSocket-Protocol`
/// (`graphql-transport-ws` or `graphql-ws`; 400 without either). Messages are capped like bodies.
pub(super) async fn graphql_ws(
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
            serve_ws(ws, app.schema, protocol, app.persisted, app.open_per_key).await;
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

/// Serves one GraphQL WebSocket: async-graphql's protocol (`async_graphql::http::WebSocket`) in
/// a send loop of our own, for its deadlines (docs/architecture.md, "Dependency notes"):
/// `connection_init` must come within the configured time (pings, and operations, which are
/// refused before it, do not extend it); with auth on it must carry a valid key, or the socket
/// is closed at once with 4403 (with auth on nothing in the schema is public); and the socket is
/// closed when the key it authenticated with expires (operations and events check the expiry
/// too, so nothing is served in between). A message that cannot be sent before the deadline (a
/// client that does not read) ends the socket there too.
async fn serve_ws(
    socket: WebSocket,
    schema: AppSchema,
    protocol: WebSocketProtocols,
    persisted: Arc<Persisted>,
    per_key: OpenPerKey,
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
            let (data, expires_at) = connection_data(&init_schema, payload, &per_key);
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
