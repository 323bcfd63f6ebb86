//! Subscriptions: `messageCreated` through the schema (`execute_stream`) and over real WebSockets
//! (graphql-transport-ws and legacy graphql-ws, our client and the npm `graphql-ws` client), each
//! server with its own LISTEN connection on the test's database.

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

use crate::harness::TestApp;

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
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.task.abort();
    }
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
        let router = honcho_graphql::http::router(schema.clone(), store.clone(), 1 << 20);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Instance {
            addr,
            bus,
            schema,
            store,
            task,
        }
    }

    /// Runs a mutation through this instance's HTTP endpoint.
    async fn post(&self, query: &str, vars: Value) -> Value {
        reqwest::Client::new()
            .post(format!("http://{}/graphql", self.addr))
            .json(&json!({"query": query, "variables": vars}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
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

#[tokio::test]
async fn a_subscriber_sees_exactly_the_new_messages_of_its_session_in_order() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    a.create("chat", msgs("alice", &["before"])).await;
    // Let the earlier notice pass before subscribing.
    wait_until("the first notice", Duration::from_secs(5), || {
        a.bus.notices_received() == 1
    })
    .await;
    let mut sub = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;

    a.create("chat", msgs("alice", &["one", "two", "three"]))
        .await;
    a.create("other", msgs("bob", &["elsewhere"])).await;
    // Concurrent writers to the subscribed session: seqs must still arrive in order.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let schema = a.schema.clone();
            tokio::spawn(async move {
                let m = msgs(&format!("p{w}"), &["x", "y"]);
                let req = Request::new(CREATE).variables(Variables::from_json(
                    json!({"w": "ws", "s": "chat", "m": m}),
                ));
                let resp = graphql::execute(&schema, req).await;
                assert!(resp.errors.is_empty(), "{:?}", resp.errors);
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    a.create("chat", msgs("bob", &["last"])).await;

    let results = take(&mut sub, 20, Duration::from_secs(10)).await;
    assert_eq!(seqs(&results), (2..=21).collect::<Vec<_>>());
    let ms = created(&results);
    assert_eq!(ms[0]["content"], "one");
    assert_eq!(ms[19]["content"], "last");
    assert!(ms.iter().all(|m| m["sessionId"] == "chat"));
    // Nested fields resolve as in queries.
    assert_eq!(ms[0]["peer"], json!({"id": "alice"}));
    assert_eq!(ms[19]["peer"], json!({"id": "bob"}));
    assert_eq!(ms[0]["session"]["id"], "chat");
    assert_eq!(
        ms[19]["session"]["peers"].as_array().unwrap().len(),
        10,
        "alice, bob and 8 writers are members"
    );
    assert_eq!(
        ms[0]["context"],
        json!([{"seqInSession": 1}, {"seqInSession": 2}])
    );
    assert_quiet(&mut sub, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_peer_filter_spans_the_workspace_and_nothing_else() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let mut sub = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", peerId: \"alice\") { content sessionId } }",
            json!({}),
        )
        .await;
    a.create(
        "s1",
        json!([{"peerId": "alice", "content": "a1"}, {"peerId": "bob", "content": "b1"}]),
    )
    .await;
    a.create("s2", msgs("bob", &["b2"])).await;
    a.create("s2", msgs("alice", &["a2"])).await;
    let other = a
        .post(
            CREATE,
            json!({"w": "elsewhere", "s": "s1", "m": msgs("alice", &["not this workspace"])}),
        )
        .await;
    assert!(other.get("errors").is_none());
    let got = take(&mut sub, 2, Duration::from_secs(10)).await;
    let got: Vec<(&str, &str)> = created(&got)
        .iter()
        .map(|m| {
            (
                m["content"].as_str().unwrap(),
                m["sessionId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("a1", "s1"), ("a2", "s2")]);
    assert_quiet(&mut sub, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn nested_fields_cost_one_statement_per_kind_per_batch_for_all_subscribers() {
    let app = TestApp::new().await;
    let reader = Instance::counted(&app).await;
    let writer = Instance::start(&app, 1024).await;
    let query = "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") {
        seqInSession peer { id } session { id } } }";
    let mut subs = Vec::new();
    for _ in 0..5 {
        subs.push(reader.subscribe(query, json!({})).await);
    }
    app.take_statements();
    writer
        .create(
            "chat",
            json!([{"peerId": "alice", "content": "a"}, {"peerId": "bob", "content": "b"}]),
        )
        .await;
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut sub| {
            tokio::spawn(async move { take(&mut sub, 2, Duration::from_secs(10)).await })
        })
        .collect();
    for r in readers {
        let got = r.await.unwrap();
        let ms = created(&got);
        assert_eq!(ms[0]["peer"], json!({"id": "alice"}));
        assert_eq!(ms[1]["peer"], json!({"id": "bob"}));
        assert_eq!(ms[1]["session"], json!({"id": "chat"}));
    }
    assert_eq!(
        app.take_statements(),
        3,
        "rows, peers and sessions of the batch, once for five subscribers"
    );
}

#[tokio::test]
async fn a_rolled_back_batch_emits_nothing() {
    let app = TestApp::new().await;
    // Rejects a message at COMMIT, after createMessages has run pg_notify in its transaction.
    app.store
        .db()
        .execute_unprepared(
            "CREATE FUNCTION reject_marked() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.content = 'reject at commit' THEN RAISE EXCEPTION 'rejected'; END IF;
             RETURN NULL; END $$;
             CREATE CONSTRAINT TRIGGER reject_marked AFTER INSERT ON messages
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION reject_marked();",
        )
        .await
        .unwrap();
    let a = Instance::start(&app, 1024).await;
    let mut sub = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;

    // One invalid message in the batch: refused before anything is written.
    let too_long = "x".repeat(25_001);
    let resp = a
        .post(
            CREATE,
            json!({"w": "ws", "s": "chat", "m": [{"peerId": "a", "content": "ok"}, {"peerId": "a", "content": too_long}]}),
        )
        .await;
    assert_eq!(resp["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    // One message the database rejects at commit: the transaction had notified, then rolled back.
    let resp = a
        .post(
            CREATE,
            json!({"w": "ws", "s": "chat", "m": msgs("a", &["fine", "reject at commit"])}),
        )
        .await;
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "INTERNAL_SERVER_ERROR",
        "{resp}"
    );
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
    assert_quiet(&mut sub, Duration::from_millis(500)).await;
    assert_eq!(a.bus.notices_received(), 0, "no notification was delivered");

    a.create("chat", msgs("a", &["kept"])).await;
    let got = take(&mut sub, 1, Duration::from_secs(10)).await;
    assert_eq!(
        seqs(&got),
        [1],
        "the rolled-back batches left no seqs behind"
    );
    assert_eq!(a.bus.notices_received(), 1);
}

#[tokio::test]
async fn a_lagging_subscriber_ends_with_events_missed_and_slows_nobody() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 4).await;
    let mut slow = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    let mut fast = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") { seqInSession } }",
            json!({}),
        )
        .await;
    // The fast one is read as events come; the writer waits for it (a buffer of 4 leaves no room
    // for a busy test machine), never for the slow one, which is not polled at all.
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let fast_reader = tokio::spawn(async move {
        for _ in 0..10 {
            let got = take(&mut fast, 1, Duration::from_secs(10)).await;
            seen_tx.send(seqs(&got)[0]).unwrap();
        }
    });
    let mut fast_seqs = Vec::new();
    for i in 0..10 {
        a.create("chat", msgs("a", &[&format!("m{i}")])).await;
        fast_seqs.push(
            tokio::time::timeout(Duration::from_secs(10), seen.recv())
                .await
                .expect("the fast subscriber keeps up")
                .unwrap(),
        );
    }
    fast_reader.await.unwrap();
    assert_eq!(fast_seqs, (1..=10).collect::<Vec<_>>());
    wait_until("ten notices", Duration::from_secs(5), || {
        a.bus.notices_received() == 10
    })
    .await;

    let got = take(&mut slow, 1, Duration::from_secs(5)).await;
    let err = &got[0]["errors"][0];
    assert_eq!(err["extensions"]["code"], "EVENTS_MISSED", "{got:?}");
    assert_eq!(err["extensions"]["reason"], "lagged");
    assert_eq!(
        err["extensions"]["dropped"], 6,
        "a buffer of 4 kept the last 4 of 10"
    );
    assert!(err["message"].as_str().unwrap().contains("resubscribe"));
    let end = tokio::time::timeout(Duration::from_secs(5), slow.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the subscription ends after the error");
}

#[tokio::test]
async fn the_listener_reconnects_and_open_subscriptions_learn_of_the_gap() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let mut before = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    let killed = app
        .sql_i64(&format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{LISTENER_APPLICATION_NAME}' AND datname = current_database()"
        ))
        .await;
    assert_eq!(killed, 1, "one listener connection per instance");

    let got = take(&mut before, 1, Duration::from_secs(15)).await;
    let err = &got[0]["errors"][0];
    assert_eq!(err["extensions"]["code"], "EVENTS_MISSED", "{got:?}");
    assert_eq!(err["extensions"]["reason"], "listener_reconnected");
    assert!(a.bus.reconnects() >= 1 && a.bus.is_listening());

    let mut after = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    a.create("chat", msgs("a", &["after the gap"])).await;
    let got = take(&mut after, 1, Duration::from_secs(10)).await;
    assert_eq!(created(&got)[0]["content"], "after the gap");
}

#[tokio::test]
async fn a_subscription_with_an_out_of_range_context_is_refused_before_it_starts() {
    let app = TestApp::new().await;
    let inst = Instance::start(&app, 1024).await;
    let req = Request::new(
        "subscription { messageCreated(workspaceId: \"ws\") { id context(after: 2147483647) { id } } }",
    );
    let mut stream = graphql::execute_stream(&inst.schema, req, None);
    let resp = serde_json::to_value(stream.next().await.unwrap()).unwrap();
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{resp}"
    );
    assert_eq!(inst.bus.subscribers(), 0, "it never listened");
}

#[tokio::test]
async fn without_an_event_bus_subscriptions_say_so() {
    let app = TestApp::new().await;
    let req = Request::new("subscription { messageCreated(workspaceId: \"ws\") { id } }");
    let mut stream = graphql::execute_stream(&app.schema, req, None);
    let resp = serde_json::to_value(stream.next().await.unwrap()).unwrap();
    assert_eq!(
        resp["errors"][0]["extensions"]["code"],
        "INTERNAL_SERVER_ERROR"
    );
    assert!(
        resp["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not enabled"),
        "{resp}"
    );
}

#[tokio::test]
async fn conclusion_created_sees_new_conclusions_of_its_observer_across_instances() {
    let app = TestApp::new().await;
    let a = Instance::counted(&app).await;
    let b = Instance::start(&app, 1024).await;
    for p in ["alice", "bob", "carol"] {
        let r = b
            .post(
                "mutation($p: ID!) { getOrCreatePeer(workspaceId: \"ws\", id: $p) { id } }",
                json!({"p": p}),
            )
            .await;
        assert!(r.get("errors").is_none(), "{r}");
    }
    let query = "subscription { conclusionCreated(workspaceId: \"ws\", observerId: \"alice\") {
        content level timesDerived observer { id } observed { id } sources { content } } }";
    let mut subs = vec![
        a.subscribe(query, json!({})).await,
        a.subscribe(query, json!({})).await,
    ];
    app.take_statements();
    const CREATE_C: &str = "mutation($c: [ConclusionInput!]!) {
        createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }";
    let created = b
        .post(
            CREATE_C,
            json!({"c": [
                {"content": "likes tea", "observerId": "alice", "observedId": "bob"},
                {"content": "not alice's", "observerId": "carol", "observedId": "bob"},
                {"content": "likes cake", "observerId": "alice", "observedId": "carol"}]}),
        )
        .await;
    assert!(created.get("errors").is_none(), "{created}");
    let tea = created["data"]["createConclusions"][0]["id"].clone();
    for sub in &mut subs {
        let got = take(sub, 2, Duration::from_secs(10)).await;
        let c: Vec<&Value> = got
            .iter()
            .map(|r| {
                assert!(r.get("errors").is_none(), "{r}");
                &r["data"]["conclusionCreated"]
            })
            .collect();
        assert_eq!(c[0]["content"], "likes tea");
        assert_eq!(c[0]["observer"], json!({"id": "alice"}));
        assert_eq!(c[0]["observed"], json!({"id": "bob"}));
        assert_eq!(c[1]["content"], "likes cake", "in creation order");
        assert_eq!(c[1]["observed"], json!({"id": "carol"}));
    }
    assert_eq!(
        app.take_statements(),
        2,
        "rows and peers of the batch, once for both subscribers"
    );

    // A derived conclusion is an event when first recorded, not when reinforced.
    const DERIVE: &str = "mutation($i: DerivedConclusionInput!) {
        recordDerivedConclusion(workspaceId: \"ws\", input: $i) { timesDerived } }";
    let input = json!({"i": {"content": "enjoys warm drinks", "observerId": "alice",
        "observedId": "bob", "level": "DEDUCTIVE", "sourceIds": [tea]}});
    for times in [1, 2] {
        let r = b.post(DERIVE, input.clone()).await;
        assert_eq!(
            r["data"]["recordDerivedConclusion"]["timesDerived"], times,
            "{r}"
        );
    }
    let got = take(&mut subs[0], 1, Duration::from_secs(10)).await;
    let c = &got[0]["data"]["conclusionCreated"];
    assert_eq!(c["content"], "enjoys warm drinks");
    assert_eq!(c["level"], "DEDUCTIVE");
    assert_eq!(c["sources"], json!([{"content": "likes tea"}]));
    assert_quiet(&mut subs[0], Duration::from_millis(300)).await;
}

// ---- over WebSockets -------------------------------------------------------------------------

pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects with `protocol`, sends connection_init with `payload`, expects the ack.
pub(crate) async fn ws_connect(addr: SocketAddr, protocol: &str, payload: Value) -> Ws {
    let mut req = format!("ws://{addr}/graphql/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", protocol.parse().unwrap());
    let (mut ws, resp) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(resp.headers()["sec-websocket-protocol"], protocol);
    ws_send(
        &mut ws,
        json!({"type": "connection_init", "payload": payload}),
    )
    .await;
    assert_eq!(ws_next(&mut ws).await, json!({"type": "connection_ack"}));
    ws
}

pub(crate) async fn ws_send(ws: &mut Ws, v: Value) {
    ws.send(WsMsg::Text(v.to_string().into())).await.unwrap();
}

/// The next JSON message (pings and pongs skipped), within 10 s.
pub(crate) async fn ws_next(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("the socket is open")
            .unwrap();
        match msg {
            WsMsg::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] != "ping" && v["type"] != "pong" && v["type"] != "ka" {
                    return v;
                }
            }
            WsMsg::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

#[tokio::test]
async fn two_instances_on_one_database_deliver_every_write_to_every_subscriber() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let b = Instance::start(&app, 1024).await;

    let mut on_a = ws_connect(a.addr, "graphql-transport-ws", json!({"apiKey": "later"})).await;
    ws_send(
        &mut on_a,
        json!({"id": "1", "type": "subscribe", "payload": {"query": SUB, "variables": {"w": "ws", "s": "chat"}}}),
    )
    .await;
    let mut on_b = ws_connect(b.addr, "graphql-transport-ws", Value::Null).await;
    ws_send(
        &mut on_b,
        json!({"id": "s", "type": "subscribe", "payload": {"query": "subscription { messageCreated(workspaceId: \"ws\") { content } }"}}),
    )
    .await;
    wait_until("both subscriptions", Duration::from_secs(5), || {
        a.bus.subscribers() == 1 && b.bus.subscribers() == 1
    })
    .await;

    // Written through B only.
    b.create("chat", msgs("alice", &["one", "two"])).await;
    b.create("other", msgs("bob", &["elsewhere"])).await;
    b.create("chat", msgs("bob", &["three"])).await;

    let mut got = Vec::new();
    for _ in 0..3 {
        let m = ws_next(&mut on_a).await;
        assert_eq!(m["type"], "next", "{m}");
        assert_eq!(m["id"], "1");
        assert!(m["payload"].get("errors").is_none(), "{m}");
        got.push(m["payload"]["data"]["messageCreated"].clone());
    }
    let contents: Vec<&str> = got.iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["one", "two", "three"]);
    let s: Vec<i64> = got
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect();
    assert_eq!(s, [1, 2, 3]);
    assert_eq!(got[2]["peer"], json!({"id": "bob"}));

    let mut on_b_got = Vec::new();
    for _ in 0..4 {
        let m = ws_next(&mut on_b).await;
        on_b_got.push(m["payload"]["data"]["messageCreated"]["content"].clone());
    }
    assert_eq!(on_b_got, ["one", "two", "elsewhere", "three"]);

    // A query over the socket works too, nested fields included, then completes.
    ws_send(
        &mut on_b,
        json!({"id": "q", "type": "subscribe", "payload": {"query":
            "{ workspace(id: \"ws\") { session(id: \"chat\") { messages { nodes { peer { id } } } } } }"}}),
    )
    .await;
    let m = ws_next(&mut on_b).await;
    assert_eq!(m["id"], "q", "{m}");
    let nodes = &m["payload"]["data"]["workspace"]["session"]["messages"]["nodes"];
    assert_eq!(nodes[2]["peer"], json!({"id": "bob"}), "{m}");
    assert_eq!(
        ws_next(&mut on_b).await,
        json!({"type": "complete", "id": "q"})
    );

    // complete stops the subscription on the server.
    ws_send(&mut on_a, json!({"id": "1", "type": "complete"})).await;
    wait_until("the subscription to end", Duration::from_secs(5), || {
        a.bus.subscribers() == 0
    })
    .await;
    drop(on_b);
    wait_until(
        "the closed socket to drop its subscription",
        Duration::from_secs(5),
        || b.bus.subscribers() == 0,
    )
    .await;
    // The two instances did not share a pool: B's store was the writer.
    assert!(b.store.ping().await.is_ok());
}

#[tokio::test]
async fn the_legacy_graphql_ws_protocol_works_too() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let mut ws = ws_connect(
        a.addr,
        "graphql-ws",
        json!({"authorization": "Bearer later"}),
    )
    .await;
    ws_send(
        &mut ws,
        json!({"id": "7", "type": "start", "payload": {"query": SUB, "variables": {"w": "ws", "s": "chat"}}}),
    )
    .await;
    wait_until("the subscription", Duration::from_secs(5), || {
        a.bus.subscribers() == 1
    })
    .await;
    a.create("chat", msgs("carol", &["legacy"])).await;
    let m = ws_next(&mut ws).await;
    assert_eq!(m["type"], "data", "{m}");
    assert_eq!(m["id"], "7");
    assert_eq!(m["payload"]["data"]["messageCreated"]["content"], "legacy");
    assert_eq!(
        m["payload"]["data"]["messageCreated"]["peer"],
        json!({"id": "carol"})
    );
    ws_send(&mut ws, json!({"id": "7", "type": "stop"})).await;
    assert_eq!(
        ws_next(&mut ws).await,
        json!({"type": "complete", "id": "7"})
    );
}

#[tokio::test]
async fn a_websocket_without_a_graphql_protocol_is_refused() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 16).await;
    let req = format!("ws://{}/graphql/ws", a.addr)
        .into_client_request()
        .unwrap();
    let err = tokio_tungstenite::connect_async(req).await.unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");
}

#[tokio::test]
async fn a_client_that_stops_reading_slows_no_writer_and_no_other_client() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 4).await;
    // A tiny receive window: the server's socket buffer fills after a few MB.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(a.addr).await.unwrap();
    let mut req = format!("ws://{}/graphql/ws", a.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    let (mut slow, _) = tokio_tungstenite::client_async(req, MaybeTlsStream::Plain(stream))
        .await
        .unwrap();
    ws_send(&mut slow, json!({"type": "connection_init"})).await;
    assert_eq!(ws_next(&mut slow).await, json!({"type": "connection_ack"}));
    let sub = json!({"id": "1", "type": "subscribe", "payload": {"query":
        "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"big\") { seqInSession content } }"}});
    ws_send(&mut slow, sub.clone()).await;
    let mut fast = ws_connect(a.addr, "graphql-transport-ws", Value::Null).await;
    ws_send(&mut fast, sub).await;
    wait_until("both subscriptions", Duration::from_secs(5), || {
        a.bus.subscribers() == 2
    })
    .await;
    // Enough to fill the server's socket send buffer (at most tcp_wmem's max; 4 MiB on Linux by
    // default: 2 MiB of messages fitted there in practice) and then the bus buffer of 4 events.
    let per_batch = 20;
    let batch_bytes = per_batch * 10_000;
    let wmem_max: usize = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
        .unwrap_or(4 << 20);
    let batches = wmem_max / batch_bytes + 10;
    // The reading client is waited for after each batch (its bus buffer is 4 events too, and a
    // busy test machine must not make it lag); the stuck one never is.
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let fast_reader = tokio::spawn(async move {
        let mut last = 0;
        for _ in 0..batches * per_batch {
            let m = ws_next(&mut fast).await;
            assert_eq!(m["type"], "next", "{m}");
            let seq = m["payload"]["data"]["messageCreated"]["seqInSession"]
                .as_i64()
                .unwrap();
            assert_eq!(seq, last + 1);
            last = seq;
            seen_tx.send(seq).unwrap();
        }
        last
    });
    let big = "x".repeat(10_000);
    for b in 0..batches {
        let m: Vec<Value> = (0..per_batch)
            .map(|_| json!({"peerId": "p", "content": big}))
            .collect();
        a.create("big", Value::Array(m)).await;
        let want = ((b + 1) * per_batch) as i64;
        loop {
            let seq = tokio::time::timeout(Duration::from_secs(10), seen.recv())
                .await
                .expect("the reading client keeps up")
                .unwrap();
            if seq == want {
                break;
            }
        }
    }
    assert_eq!(
        fast_reader.await.unwrap(),
        (batches * per_batch) as i64,
        "the reading client got every message"
    );
    // The stuck client reads again: what fitted in the sockets, then the end of its subscription.
    let mut got = 0;
    loop {
        let m = ws_next(&mut slow).await;
        match m["type"].as_str().unwrap() {
            "next" if m["payload"].get("errors").is_none() => got += 1,
            "next" => {
                assert_eq!(
                    m["payload"]["errors"][0]["extensions"]["code"], "EVENTS_MISSED",
                    "{m}"
                );
                assert_eq!(m["payload"]["errors"][0]["extensions"]["reason"], "lagged");
                break;
            }
            other => panic!("unexpected {other}: {m}"),
        }
    }
    assert!(
        got < batches * per_batch,
        "it lagged, so it got fewer ({got})"
    );
    assert_eq!(
        ws_next(&mut slow).await,
        json!({"type": "complete", "id": "1"})
    );
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

#[tokio::test]
async fn subscriptions_are_capped_per_connection_and_per_key_and_freed_when_stopped() {
    let app = TestApp::new().await;
    let limits = Limits {
        max_subscriptions_per_connection: 3,
        max_subscriptions_per_key: 4,
        ..Limits::default()
    };
    let store = Store::connect(&app._db.url(), 5, None).await.unwrap();
    let a = Instance::with_limits(&app, store, 1024, crate::harness::auth(), &limits).await;
    let admin = json!({"Authorization": crate::harness::bearer(KeySpec {
        admin: true,
        ..Default::default()
    })});
    let sub = |id: &str| {
        json!({"id": id, "type": "subscribe", "payload": {"query": SUB,
            "variables": {"w": "ws", "s": "s1"}}})
    };
    let limit_of = |m: &Value| {
        let e = if m["type"] == "error" {
            &m["payload"][0]
        } else {
            &m["payload"]["errors"][0]
        };
        (
            e["extensions"]["code"].clone(),
            e["extensions"]["limit"].clone(),
        )
    };
    let mut one = ws_connect(a.addr, "graphql-transport-ws", admin.clone()).await;
    for id in ["1", "2", "3"] {
        ws_send(&mut one, sub(id)).await;
    }
    ws_send(&mut one, sub("4")).await;
    let m = ws_next(&mut one).await;
    assert_eq!(m["id"], "4", "{m}");
    assert_eq!(
        limit_of(&m),
        (
            json!("BAD_USER_INPUT"),
            json!("HONCHO_MAX_SUBSCRIPTIONS_PER_CONNECTION")
        ),
        "{m}"
    );
    // Stopping one frees its place on the connection.
    ws_send(&mut one, json!({"id": "1", "type": "complete"})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    ws_send(&mut one, sub("5")).await;
    // The key has 3 open; a second socket with the same key gets one more, then the key's cap.
    let mut two = ws_connect(a.addr, "graphql-transport-ws", admin.clone()).await;
    ws_send(&mut two, sub("6")).await;
    ws_send(&mut two, sub("7")).await;
    let m = ws_next(&mut two).await;
    assert_eq!(m["id"], "7", "{m}");
    assert_eq!(
        limit_of(&m),
        (
            json!("BAD_USER_INPUT"),
            json!("HONCHO_MAX_SUBSCRIPTIONS_PER_KEY")
        ),
        "{m}"
    );
    // Closing the first socket frees its three.
    drop(one);
    tokio::time::sleep(Duration::from_millis(300)).await;
    ws_send(&mut two, sub("8")).await;
    ws_send(&mut two, sub("9")).await;
    // Subscribing is asynchronous: write only once 6, 8 and 9 listen (and the first socket's are
    // gone), or the event can pass before a subscription exists.
    wait_until(
        "three subscribers on the bus",
        Duration::from_secs(10),
        || a.bus.subscribers() == 3,
    )
    .await;
    write_one(&app.store, "s1", "alice", "hello").await;
    let mut seen = HashSet::new();
    while seen.len() < 3 {
        let m = ws_next(&mut two).await;
        if m["type"] == "complete" {
            continue; // the end of the refused one
        }
        assert_eq!(m["type"], "next", "{m}");
        assert!(m["payload"].get("errors").is_none(), "{m}");
        seen.insert(m["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen, HashSet::from(["6".into(), "8".into(), "9".into()]));
}

#[tokio::test]
async fn keys_from_connection_init_scope_subscriptions_as_queries() {
    let app = TestApp::new().await;
    let a = Instance::with_auth(&app).await;
    let key = |peer: &str| {
        crate::harness::bearer(KeySpec {
            workspace: Some("ws".into()),
            peer: Some(peer.into()),
            ..Default::default()
        })
    };
    let write = |session: &'static str, peer: &'static str| {
        let store = app.store.clone();
        async move { write_one(&store, session, peer, &format!("{peer} in {session}")).await }
    };
    write("s1", "alice").await;
    write("s1", "bob").await;
    write("s2", "carol").await;
    wait_until("the seed's notices", Duration::from_secs(5), || {
        a.bus.notices_received() == 3
    })
    .await;
    let sub = |id: &str, session: &str| {
        json!({"id": id, "type": "subscribe", "payload": {"query": SUB,
            "variables": {"w": "ws", "s": session}}})
    };

    // No key, and a peer key for a session its peer is not in: refused when subscribing.
    let mut anonymous = ws_connect(a.addr, "graphql-transport-ws", json!({})).await;
    ws_send(&mut anonymous, sub("1", "s1")).await;
    assert_eq!(
        ws_result(&mut anonymous, "1").await,
        Err("UNAUTHENTICATED".into())
    );
    assert_eq!(
        ws_next(&mut anonymous).await,
        json!({"type": "complete", "id": "1"})
    );
    let mut carol = ws_connect(
        a.addr,
        "graphql-transport-ws",
        json!({"Authorization": key("carol")}),
    )
    .await;
    ws_send(&mut carol, sub("1", "s1")).await;
    assert_eq!(ws_result(&mut carol, "1").await, Err("FORBIDDEN".into()));
    assert_eq!(
        ws_next(&mut carol).await,
        json!({"type": "complete", "id": "1"})
    );
    // Her own session is fine.
    ws_send(&mut carol, sub("2", "s2")).await;

    // A member's key: events of its session, until its peer leaves the session.
    let mut alice = ws_connect(
        a.addr,
        "graphql-transport-ws",
        json!({"Authorization": key("alice")}),
    )
    .await;
    ws_send(&mut alice, sub("1", "s1")).await;
    wait_until("two subscriptions", Duration::from_secs(5), || {
        a.bus.subscribers() == 2
    })
    .await;
    write("s1", "bob").await;
    write("s2", "carol").await;
    let got = ws_result(&mut alice, "1").await.unwrap();
    assert_eq!(got["messageCreated"]["content"], "bob in s1");
    let got = ws_result(&mut carol, "2").await.unwrap();
    assert_eq!(got["messageCreated"]["content"], "carol in s2");

    app.store
        .remove_peers_from_session("ws", "s1", &["alice".to_owned()])
        .await
        .unwrap();
    write("s1", "bob").await;
    assert_eq!(
        ws_result(&mut alice, "1").await,
        Err("FORBIDDEN".into()),
        "checked again for each event"
    );
    assert_eq!(
        ws_next(&mut alice).await,
        json!({"type": "complete", "id": "1"})
    );
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

/// A key that expires while its WebSocket is open: events stop and the server closes the socket
/// with 4401 once `exp` has passed.
#[tokio::test]
async fn an_expired_key_closes_its_websocket() {
    let app = TestApp::new().await;
    let a = Instance::with_auth(&app).await;
    let expires = chrono::Utc::now() + chrono::Duration::seconds(2);
    let key = crate::harness::bearer(KeySpec {
        workspace: Some("ws".into()),
        expires_at: Some(expires),
        ..Default::default()
    });
    let mut ws = ws_connect(
        a.addr,
        "graphql-transport-ws",
        json!({"Authorization": key}),
    )
    .await;
    let sub = json!({"id": "1", "type": "subscribe", "payload": {"query": SUB,
        "variables": {"w": "ws", "s": "s1"}}});
    ws_send(&mut ws, sub).await;
    wait_until("the subscription", Duration::from_secs(5), || {
        a.bus.subscribers() == 1
    })
    .await;
    write_one(&app.store, "s1", "alice", "before expiry").await;
    let got = ws_result(&mut ws, "1").await.unwrap();
    assert_eq!(got["messageCreated"]["content"], "before expiry");
    assert_eq!(ws_close_code(&mut ws, Duration::from_secs(5)).await, 4401);
    assert!(
        chrono::Utc::now().timestamp() > expires.timestamp(),
        "closed only after exp"
    );
}

/// A WebSocket that never sends `connection_init` is closed with 4408 after the configured time.
#[tokio::test]
async fn a_websocket_without_connection_init_is_closed() {
    let app = TestApp::new().await;
    let limits = Limits {
        connection_init_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let schema = graphql::build_schema(app.store.clone(), &limits);
    let router = honcho_graphql::http::router(schema, app.store.clone(), 1 << 20);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let mut req = format!("ws://{addr}/graphql/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    let (mut silent, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let started = Instant::now();
    assert_eq!(
        ws_close_code(&mut silent, Duration::from_secs(5)).await,
        4408
    );
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    // One that does send it in time stays open past the timeout.
    let mut polite = ws_connect(addr, "graphql-transport-ws", json!({})).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    ws_send(&mut polite, json!({"type": "ping"})).await;
    assert_eq!(ws_next_raw(&mut polite).await["type"], "pong");
    server.abort();
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

/// The npm `graphql-ws` client under Node: a client we did not write.
#[tokio::test]
async fn the_npm_graphql_ws_client_receives_events() {
    let node_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node-ws");
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::harness::skip("node is not installed");
        return;
    }
    if !std::path::Path::new(node_dir)
        .join("node_modules/graphql-ws")
        .exists()
    {
        let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-node-ws.sh");
        let ok = std::process::Command::new(setup)
            .status()
            .is_ok_and(|s| s.success());
        if !ok
            || !std::path::Path::new(node_dir)
                .join("node_modules/graphql-ws")
                .exists()
        {
            crate::harness::skip(&format!(
                "could not install the npm graphql-ws client (run {setup})"
            ));
            return;
        }
    }
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let child = tokio::process::Command::new("node")
        .current_dir(node_dir)
        .args([
            "subscribe.mjs",
            &format!("ws://{}/graphql/ws", a.addr),
            "ws",
            "chat",
            "3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until("node to subscribe", Duration::from_secs(20), || {
        a.bus.subscribers() == 1
    })
    .await;
    a.create("chat", msgs("alice", &["from rust", "to node"]))
        .await;
    a.create("elsewhere", msgs("alice", &["not for node"]))
        .await;
    a.create("chat", msgs("bob", &["third"])).await;
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("node finishes")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(String, i64, String)> = lines
        .iter()
        .map(|r| {
            let m = &r["data"]["messageCreated"];
            (
                m["content"].as_str().unwrap().to_owned(),
                m["seqInSession"].as_i64().unwrap(),
                m["peer"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("from rust".to_owned(), 1, "alice".to_owned()),
            ("to node".to_owned(), 2, "alice".to_owned()),
            ("third".to_owned(), 3, "bob".to_owned()),
        ]
    );
}

// ---- PgBouncer in transaction mode (run by hand) ---------------------------------------------

/// Writes through PgBouncer in transaction mode, events on a direct connection; and shows that a
/// listener behind the bouncer hears nothing. HONCHO_PGBOUNCER_URL = the bouncer without a
/// database (e.g. `postgres://postgres@127.0.0.1:6439`), forwarding every database to the test
/// server (`* = host=... port=...`), `pool_mode = transaction`, and `max_prepared_statements > 0`
/// (PgBouncer >= 1.21): sqlx names every prepared statement, which older bouncers (Debian 12 has
/// 1.18) mix up between clients ("prepared statement sqlx_s_N already exists"); sqlx's
/// `statement-cache-capacity=0` does not help, it still names them. HONCHO_PGBOUNCER_PARAMS is
/// appended to the bouncer URL (e.g. `?sslmode=disable`).
#[tokio::test]
#[ignore = "needs a PgBouncer (HONCHO_PGBOUNCER_URL)"]
async fn through_pgbouncer_in_transaction_mode() {
    let Ok(bouncer) = std::env::var("HONCHO_PGBOUNCER_URL") else {
        crate::harness::skip("HONCHO_PGBOUNCER_URL is not set");
        return;
    };
    let suffix = std::env::var("HONCHO_PGBOUNCER_PARAMS").unwrap_or_default();
    let app = TestApp::new().await;
    let via_bouncer = format!("{bouncer}/{}{suffix}", app._db.name);
    let store = Store::connect(&via_bouncer, 10, None).await.unwrap();
    let bus = EventBus::start(&app._db.url(), 1024).await.unwrap();
    let schema = graphql::build_schema_with_events(store, &Limits::default(), Some(bus.clone()));
    let a = Instance {
        addr: "127.0.0.1:9".parse().unwrap(),
        bus,
        schema,
        store: app.store.clone(),
        task: tokio::spawn(async {}),
    };
    let mut sub = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") { seqInSession peer { id } } }",
            json!({}),
        )
        .await;
    // 16 concurrent writers, 3 messages each, through the bouncer: the per-session advisory lock
    // is transaction-scoped, so transaction pooling keeps seqs gapless.
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let schema = a.schema.clone();
            tokio::spawn(async move {
                let m = msgs(&format!("p{}", w % 4), &["x", "y", "z"]);
                let req = Request::new(CREATE).variables(Variables::from_json(
                    json!({"w": "ws", "s": "chat", "m": m}),
                ));
                let resp = graphql::execute(&schema, req).await;
                assert!(resp.errors.is_empty(), "{:?}", resp.errors);
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let got = take(&mut sub, 48, Duration::from_secs(20)).await;
    assert_eq!(seqs(&got), (1..=48).collect::<Vec<_>>());
    // A listener behind the bouncer: its LISTEN ran on a pooled server connection that went back
    // to the pool. (Its notifications then make PgBouncer close that server connection, under
    // whichever client holds it: never point HONCHO_EVENTS_DATABASE_URL at transaction pooling.)
    let deaf = EventBus::start(&format!("{bouncer}/{}{suffix}", app._db.name), 16)
        .await
        .unwrap();
    write_one(&a.store, "chat", "direct", "written past the bouncer").await;
    assert_eq!(take(&mut sub, 1, Duration::from_secs(10)).await.len(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        deaf.notices_received(),
        0,
        "LISTEN through transaction pooling hears nothing: the listener needs a session"
    );
}

// ---- fan-out measurement (run by hand) --------------------------------------------------------

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Idle subscribers on one server process (the real binary, started as a child so its RSS is its
/// own), all on one session, then events written through HTTP as fast as one writer can.
/// Prints figures; asserts only that every subscriber got every event.
///
/// `cargo test --test it fan_out -- --ignored --nocapture`; FANOUT_SUBSCRIBERS (1000),
/// FANOUT_EVENTS (200), FANOUT_BATCH (messages per createMessages, 1), FANOUT_NESTED (0|1: select
/// `peer { id }` too), FANOUT_SERVER_BIN (the server binary; default: this build's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn fan_out_to_idle_subscribers() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let subscribers = env_usize("FANOUT_SUBSCRIBERS", 1000);
    let events = env_usize("FANOUT_EVENTS", 200);
    let batch = env_usize("FANOUT_BATCH", 1);
    let nested = env_usize("FANOUT_NESTED", 0) == 1;
    let app = TestApp::new().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // FANOUT_SERVER_BIN: a copy of the binary (a shared target dir may hold another branch's).
    let bin = std::env::var("FANOUT_SERVER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_honcho-graphql").to_owned());
    let mut server = tokio::process::Command::new(bin)
        .arg("serve")
        .env("DATABASE_URL", app._db.url())
        .env("HONCHO_LISTEN", addr.to_string())
        .env("HONCHO_EMBEDDER", "none")
        .env("HONCHO_DB_POOL", "20")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = server.id().unwrap();
    let http = reqwest::Client::new();
    let start = Instant::now();
    loop {
        let ready = http.get(format!("http://{addr}/ready")).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let write = |content: String| {
        let http = http.clone();
        async move {
            let m: Vec<Value> = (0..batch)
                .map(|i| json!({"peerId": "speaker", "content": format!("{content}.{i}")}))
                .collect();
            let resp: Value = http
                .post(format!("http://{addr}/graphql"))
                .json(&json!({"query": CREATE, "variables": {"w": "ws", "s": "room", "m": m}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert!(resp.get("errors").is_none(), "{resp}");
        }
    };
    // Warm up: one subscriber, one event.
    {
        let mut ws = ws_connect(addr, "graphql-transport-ws", Value::Null).await;
        ws_send(&mut ws, json!({"id": "w", "type": "subscribe", "payload": {"query": "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"room\") { id } }"}})).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        write("warm-up".into()).await;
        ws_next(&mut ws).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = rss_kib(pid);

    let selection = if nested {
        "id seqInSession content peer { id }"
    } else {
        "id seqInSession content"
    };
    let query = format!(
        "subscription {{ messageCreated(workspaceId: \"ws\", sessionId: \"room\") {{ {selection} }} }}"
    );
    let received: Arc<Vec<AtomicUsize>> =
        Arc::new((0..subscribers).map(|_| AtomicUsize::new(0)).collect());
    let connect_start = Instant::now();
    let mut clients = Vec::new();
    for chunk in (0..subscribers).collect::<Vec<_>>().chunks(50) {
        let opened = futures::future::join_all(chunk.iter().map(|&i| {
            let query = query.clone();
            async move {
                let mut ws = ws_connect(addr, "graphql-transport-ws", Value::Null).await;
                ws_send(
                    &mut ws,
                    json!({"id": i.to_string(), "type": "subscribe", "payload": {"query": query}}),
                )
                .await;
                (i, ws)
            }
        }))
        .await;
        for (i, mut ws) in opened {
            let received = received.clone();
            clients.push(tokio::spawn(async move {
                while let Some(Ok(msg)) = ws.next().await {
                    if let WsMsg::Text(t) = msg
                        && t.contains("\"next\"")
                    {
                        received[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    let connect_secs = connect_start.elapsed().as_secs_f64();
    // There is no subscribe ack: probe until every subscriber has seen an event.
    let mut probes = 0;
    while received.iter().any(|r| r.load(Ordering::Relaxed) == 0) {
        write(format!("probe {probes}")).await;
        probes += 1;
        assert!(probes < 100, "subscribers never all listened");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let base: Vec<usize> = received.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle = rss_kib(pid);

    let per_client = events * batch;
    let t0 = Instant::now();
    for e in 0..events {
        write(format!("event {e}")).await;
    }
    let write_secs = t0.elapsed().as_secs_f64();
    let done = |r: &Vec<AtomicUsize>| {
        r.iter()
            .zip(&base)
            .all(|(r, b)| r.load(Ordering::Relaxed) - b >= per_client)
    };
    while !done(&received) {
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "not all deliveries arrived within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total_secs = t0.elapsed().as_secs_f64();
    let rss_busy = rss_kib(pid);
    let deliveries = subscribers * per_client;
    println!(
        "fan-out: {subscribers} WebSocket subscribers on one session (selection: {selection}), \
         debug build of the server, 2 shared cores, client in the same machine\n\
         connect+subscribe: {connect_secs:.2} s for {subscribers} ({:.0}/s)\n\
         server RSS: {rss_before} KiB before, {rss_idle} KiB with {subscribers} idle subscribers \
         => {:.1} KiB per subscriber; {rss_busy} KiB after the run\n\
         {events} createMessages of {batch} message(s) written in {write_secs:.2} s ({:.2} writes/s, \
         one writer); all {deliveries} deliveries done after {total_secs:.2} s\n\
         => {:.2} events/s to every subscriber, {:.0} messages delivered/s in total",
        subscribers as f64 / connect_secs,
        (rss_idle as f64 - rss_before as f64) / subscribers as f64,
        events as f64 / write_secs,
        events as f64 / total_secs,
        deliveries as f64 / total_secs,
    );
    for c in clients {
        c.abort();
    }
    server.kill().await.unwrap();
}
