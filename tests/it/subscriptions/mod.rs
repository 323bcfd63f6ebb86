//! Subscriptions (`messageCreated`, `conclusionCreated`), each server instance with its own
//! LISTEN connection on the test's database; one module per way in: through the schema
//! (`execute_stream`), over real WebSockets (graphql-transport-ws and legacy graphql-ws), the npm
//! `graphql-ws` client under Node, through PgBouncer, and a fan-out measurement. What they share
//! (server instances, stream and WebSocket helpers) is here.

mod in_process;
mod measurement;
mod node;
mod pgbouncer;
mod websocket;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use async_graphql::futures_util::stream::BoxStream;
use async_graphql::{Request, Response, Variables};
use futures::{SinkExt, StreamExt};
use honcho_graphql::auth::{Auth, KeySpec};
use honcho_graphql::graphql::{self, AppSchema, Limits};
use honcho_graphql::store::Store;
use honcho_graphql::store::events::{EventBus, LISTENER_APPLICATION_NAME};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMsg;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::harness::{Served, TestApp, post_json};

const CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) {
  createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id seqInSession } }";

const SUB: &str = "subscription($w: ID!, $s: ID, $p: ID) {
  messageCreated(workspaceId: $w, sessionId: $s, peerId: $p) {
    id content seqInSession sessionId peerId
    peer { id }
    session { id peers { peerId } }
    context(before: 1, after: 0) { seqInSession }
  } }";

fn msgs(peer: &str, contents: &[&str]) -> Value {
    Value::Array(
        contents
            .iter()
            .map(|c| json!({"peerId": peer, "content": c}))
            .collect(),
    )
}

/// `writers` concurrent `createMessages` through `schema`, writer `w` writing `messages(w)` to
/// session `chat` of workspace `ws`; returns when all are done.
async fn create_concurrently(
    schema: &AppSchema,
    writers: usize,
    messages: impl Fn(usize) -> Value,
) {
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let schema = schema.clone();
            let vars = json!({"w": "ws", "s": "chat", "m": messages(w)});
            tokio::spawn(async move {
                let req = Request::new(CREATE).variables(Variables::from_json(vars));
                let resp = graphql::execute(&schema, req).await;
                assert!(resp.errors.is_empty(), "{:?}", resp.errors);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

async fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One server instance: its own pool, its own listener, its own HTTP port.
struct Instance {
    addr: SocketAddr,
    bus: EventBus,
    schema: AppSchema,
    store: Store,
    /// None for an instance reached through its schema only.
    _server: Option<Served>,
}

impl Instance {
    async fn start(app: &TestApp, buffer: usize) -> Instance {
        let store = Store::connect(&app._db.url(), 5, None).await.unwrap();
        Self::with_store(app, store, buffer).await
    }

    /// An instance on the test app's own store, whose statements the app counts.
    async fn counted(app: &TestApp) -> Instance {
        Self::with_store(app, app.store.clone(), 1024).await
    }

    async fn with_store(app: &TestApp, store: Store, buffer: usize) -> Instance {
        Self::with_store_and_auth(app, store, buffer, Auth::disabled()).await
    }

    /// An instance with auth on (keys signed with the harness's secret).
    async fn with_auth(app: &TestApp) -> Instance {
        let store = Store::connect(&app._db.url(), 5, None).await.unwrap();
        Self::with_store_and_auth(app, store, 1024, crate::harness::auth()).await
    }

    async fn with_store_and_auth(
        app: &TestApp,
        store: Store,
        buffer: usize,
        auth: Auth,
    ) -> Instance {
        Self::with_limits(app, store, buffer, auth, &Limits::default()).await
    }

    async fn with_limits(
        app: &TestApp,
        store: Store,
        buffer: usize,
        auth: Auth,
        limits: &Limits,
    ) -> Instance {
        let url = app._db.url();
        let bus = EventBus::start(&url, buffer).await.unwrap();
        let schema =
            graphql::build_schema_with(store.clone(), limits, auth, Some(bus.clone()), None);
        Self::serve(schema, store, bus).await
    }

    /// An instance with auth on and `limits`, on a store of its own.
    async fn with_auth_and_limits(app: &TestApp, limits: &Limits) -> Instance {
        let store = Store::connect(&app._db.url(), 5, None).await.unwrap();
        Self::with_limits(app, store, 1024, crate::harness::auth(), limits).await
    }

    /// Another server on this instance's schema (its bus, its limits, its keys), with a router of
    /// its own, as a process serving two routers has.
    async fn second_router(&self) -> Instance {
        Self::serve(self.schema.clone(), self.store.clone(), self.bus.clone()).await
    }

    async fn serve(schema: AppSchema, store: Store, bus: EventBus) -> Instance {
        let router = honcho_graphql::http::router(schema.clone(), store.clone(), 1 << 20);
        let server = Served::start(router).await;
        Instance {
            addr: server.addr,
            bus,
            schema,
            store,
            _server: Some(server),
        }
    }

    /// Runs a mutation through this instance's HTTP endpoint.
    async fn post(&self, query: &str, vars: Value) -> Value {
        let request = json!({"query": query, "variables": vars});
        post_json(&format!("http://{}/graphql", self.addr), &request).await
    }

    async fn create(&self, session: &str, m: Value) -> Value {
        let resp = self
            .post(CREATE, json!({"w": "ws", "s": session, "m": m}))
            .await;
        assert!(resp.get("errors").is_none(), "{resp}");
        resp
    }

    /// Subscribes through the schema (no network) and returns once the subscription listens.
    async fn subscribe(&self, query: &str, vars: Value) -> BoxStream<'static, Response> {
        let before = self.bus.subscribers();
        let req = Request::new(query).variables(Variables::from_json(vars));
        let mut stream = graphql::execute_stream(&self.schema, req, None);
        // Poll until the resolver has subscribed to the bus (it then waits for events).
        let start = Instant::now();
        while self.bus.subscribers() == before {
            if let Ok(Some(resp)) =
                tokio::time::timeout(Duration::from_millis(5), stream.next()).await
            {
                panic!("subscription answered before any event: {resp:?}");
            }
            assert!(start.elapsed() < Duration::from_secs(5), "never subscribed");
        }
        stream
    }
}

/// The next `n` results of a stream as JSON, each within `limit`.
async fn take(stream: &mut BoxStream<'static, Response>, n: usize, limit: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..n {
        let resp = tokio::time::timeout(limit, stream.next())
            .await
            .unwrap_or_else(|_| panic!("result {i} of {n} did not arrive; got {out:?}"))
            .unwrap_or_else(|| panic!("stream ended after {i} of {n} results: {out:?}"));
        out.push(serde_json::to_value(resp).unwrap());
    }
    out
}

async fn assert_quiet(stream: &mut BoxStream<'static, Response>, wait: Duration) {
    if let Ok(item) = tokio::time::timeout(wait, stream.next()).await {
        panic!("expected nothing, got {item:?}");
    }
}

fn created(results: &[Value]) -> Vec<&Value> {
    results
        .iter()
        .map(|r| {
            assert!(r.get("errors").is_none(), "{r}");
            &r["data"]["messageCreated"]
        })
        .collect()
}

fn seqs(results: &[Value]) -> Vec<i64> {
    created(results)
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect()
}

pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects with `protocol`, sends connection_init with `payload`, expects the ack.
/// A WebSocket to `/graphql/ws` over graphql-transport-ws, before `connection_init`.
pub(crate) async fn ws_upgrade(addr: SocketAddr) -> WsUpgrade {
    ws_upgrade_with(addr, "graphql-transport-ws").await
}

pub(crate) type WsUpgrade = Result<
    (
        Ws,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    tokio_tungstenite::tungstenite::Error,
>;

/// A WebSocket to `/graphql/ws` over `protocol`, before `connection_init`.
pub(crate) async fn ws_upgrade_with(addr: SocketAddr, protocol: &str) -> WsUpgrade {
    let mut req = format!("ws://{addr}/graphql/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", protocol.parse().unwrap());
    tokio_tungstenite::connect_async(req).await
}

pub(crate) async fn ws_connect(addr: SocketAddr, protocol: &str, payload: Value) -> Ws {
    let (mut ws, resp) = ws_upgrade_with(addr, protocol).await.unwrap();
    assert_eq!(resp.headers()["sec-websocket-protocol"], protocol);
    ws_send(
        &mut ws,
        json!({"type": "connection_init", "payload": payload}),
    )
    .await;
    assert_eq!(ws_next(&mut ws).await, json!({"type": "connection_ack"}));
    ws
}

/// A graphql-transport-ws socket whose `connection_init` carries `authorization` (`Bearer
/// <key>`), acknowledged.
async fn ws_connect_as(addr: SocketAddr, authorization: &str) -> Ws {
    let payload = json!({"Authorization": authorization});
    ws_connect(addr, "graphql-transport-ws", payload).await
}

/// The `subscribe` message of [`SUB`] on session `session` of workspace `ws`.
fn subscribe_to(id: &str, session: &str) -> Value {
    let variables = json!({"w": "ws", "s": session});
    json!({"id": id, "type": "subscribe", "payload": {"query": SUB, "variables": variables}})
}

/// The next message on `ws` is the server's `complete` of subscription `id`.
async fn assert_completed(ws: &mut Ws, id: &str) {
    assert_eq!(ws_next(ws).await, json!({"type": "complete", "id": id}));
}

pub(crate) async fn ws_send(ws: &mut Ws, v: Value) {
    ws.send(WsMsg::Text(v.to_string().into())).await.unwrap();
}

/// The next JSON message (pings and pongs skipped), within 10 s.
pub(crate) async fn ws_next(ws: &mut Ws) -> Value {
    loop {
        let v = ws_next_raw(ws).await;
        if v["type"] != "ping" && v["type"] != "pong" && v["type"] != "ka" {
            return v;
        }
    }
}

/// The first result of subscription `id` on `ws`: an event's data, or the error code.
pub(crate) async fn ws_result(ws: &mut Ws, id: &str) -> Result<Value, String> {
    let m = ws_next(ws).await;
    assert_eq!(m["id"], id, "{m}");
    let errors = match m["type"].as_str() {
        Some("next") => &m["payload"]["errors"],
        Some("error") => &m["payload"],
        _ => panic!("unexpected {m}"),
    };
    match errors.get(0) {
        Some(e) => Err(e["extensions"]["code"].as_str().unwrap_or("").to_owned()),
        None => Ok(m["payload"]["data"].clone()),
    }
}

/// One message written straight through the store (no key needed), in workspace `ws`.
async fn write_one(store: &Store, session: &str, peer: &str, content: &str) {
    store
        .create_messages(
            "ws",
            session,
            vec![honcho_graphql::store::message::NewMessage {
                peer: peer.into(),
                content: content.into(),
                metadata: None,
                created_at: None,
                configuration: None,
            }],
        )
        .await
        .unwrap();
}

/// The code of the close frame the server sends next (other messages skipped), within `limit`.
async fn ws_close_code(ws: &mut Ws, limit: Duration) -> u16 {
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .expect("closed within the limit")
            .expect("a close frame before the end of the stream")
            .unwrap();
        if let WsMsg::Close(frame) = msg {
            return frame.map(|f| u16::from(f.code)).unwrap_or(0);
        }
    }
}

/// The next JSON message, pings and pongs included.
async fn ws_next_raw(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("the socket is open")
            .unwrap();
        match msg {
            WsMsg::Text(t) => return serde_json::from_str(&t).unwrap(),
            WsMsg::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}
