//! Subscriptions over real WebSockets: both protocols, slow clients, caps, keys in
//! `connection_init`, expiry and the init timeout.

use super::*;

#[tokio::test]
async fn two_instances_on_one_database_deliver_every_write_to_every_subscriber() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let b = Instance::start(&app, 1024).await;

    let mut on_a = ws_connect(a.addr, "graphql-transport-ws", json!({"apiKey": "later"})).await;
    ws_send(&mut on_a, subscribe_to("1", "chat")).await;
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
    assert_completed(&mut on_b, "q").await;

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
    assert_completed(&mut ws, "7").await;
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
    assert_completed(&mut slow, "1").await;
}

#[tokio::test]
async fn subscriptions_are_capped_per_connection_and_per_key_and_freed_when_stopped() {
    let app = TestApp::new().await;
    let limits = Limits {
        max_subscriptions_per_connection: 3,
        max_subscriptions_per_key: 4,
        ..Limits::default()
    };
    let a = Instance::with_auth_and_limits(&app, &limits).await;
    // One key for both sockets: the cap per key counts them together.
    let admin = crate::harness::bearer(KeySpec {
        admin: true,
        ..Default::default()
    });
    let sub = |id: &str| subscribe_to(id, "s1");
    let limit_of = |m: &Value| {
        let e = if m["type"] == "error" {
            &m["payload"][0]
        } else {
            &m["payload"]["errors"][0]
        };
        // A refusal is about the connection, not a place in the document: no location (it
        // was once `line 0, column 0`).
        assert!(e.get("locations").is_none(), "{m}");
        (
            e["extensions"]["code"].clone(),
            e["extensions"]["limit"].clone(),
        )
    };
    let mut one = ws_connect_as(a.addr, &admin).await;
    for id in ["1", "2", "3"] {
        ws_send(&mut one, subscribe_to(id, "s1")).await;
    }
    ws_send(&mut one, subscribe_to("4", "s1")).await;
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
    ws_send(&mut one, subscribe_to("5", "s1")).await;
    // The key has 3 open; a second socket with the same key gets one more, then the key's cap.
    let mut two = ws_connect_as(a.addr, &admin).await;
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
    ws_send(&mut two, subscribe_to("8", "s1")).await;
    ws_send(&mut two, subscribe_to("9", "s1")).await;
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
async fn two_routers_in_one_process_count_a_keys_subscriptions_each_on_its_own() {
    let app = TestApp::new().await;
    let limits = Limits {
        max_subscriptions_per_key: 1,
        ..Limits::default()
    };
    let a = Instance::with_auth_and_limits(&app, &limits).await;
    let b = a.second_router().await;
    let key = crate::harness::bearer(KeySpec {
        admin: true,
        ..Default::default()
    });
    // The key's one place on the first router is taken by "a"; the second router has its own.
    let mut sockets = Vec::new();
    for (addr, id) in [(a.addr, "a"), (b.addr, "b")] {
        let mut ws = ws_connect_as(addr, &key).await;
        ws_send(&mut ws, subscribe_to(id, "s1")).await;
        let listening = sockets.len() + 1;
        wait_until(
            &format!("the router of {id} to admit the key's subscription"),
            Duration::from_secs(10),
            || a.bus.subscribers() == listening,
        )
        .await;
        sockets.push((ws, id));
    }
    // Each router still holds the key to its cap.
    let on_a = &mut sockets[0].0;
    ws_send(on_a, subscribe_to("a2", "s1")).await;
    assert_eq!(ws_result(on_a, "a2").await, Err("BAD_USER_INPUT".into()));
    assert_eq!(ws_next(on_a).await, json!({"type": "complete", "id": "a2"}));

    write_one(&app.store, "s1", "alice", "hello").await;
    for (ws, id) in &mut sockets {
        let data = ws_result(ws, id)
            .await
            .unwrap_or_else(|code| panic!("subscription {id}: {code}"));
        assert_eq!(data["messageCreated"]["content"], "hello");
    }
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

    // A peer key for a session its peer is not in: refused when subscribing.
    let mut carol = ws_connect_as(a.addr, &key("carol")).await;
    ws_send(&mut carol, subscribe_to("1", "s1")).await;
    assert_eq!(ws_result(&mut carol, "1").await, Err("FORBIDDEN".into()));
    assert_completed(&mut carol, "1").await;
    // Her own session is fine.
    ws_send(&mut carol, subscribe_to("2", "s2")).await;

    // A member's key: events of its session, until its peer leaves the session.
    let mut alice = ws_connect_as(a.addr, &key("alice")).await;
    ws_send(&mut alice, subscribe_to("1", "s1")).await;
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
    assert_completed(&mut alice, "1").await;
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
    let mut ws = ws_connect_as(a.addr, &key).await;
    ws_send(&mut ws, subscribe_to("1", "s1")).await;
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
    let server = Served::start(router).await;
    let addr = server.addr;
    let (mut silent, _) = ws_upgrade(addr).await.unwrap();
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
    // Nor does a socket that keeps pinging: pongs do not extend the deadline.
    let (mut pinger, _) = ws_upgrade(addr).await.unwrap();
    let started = Instant::now();
    let code = loop {
        ws_send(&mut pinger, json!({"type": "ping"})).await;
        match tokio::time::timeout(Duration::from_secs(5), pinger.next()).await {
            Ok(Some(Ok(WsMsg::Close(frame)))) => break frame.map(|f| u16::from(f.code)),
            Ok(Some(Ok(_))) => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(code, Some(4408));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // One that does send it in time stays open past the timeout.
    let mut polite = ws_connect(addr, "graphql-transport-ws", json!({})).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    ws_send(&mut polite, json!({"type": "ping"})).await;
    assert_eq!(ws_next_raw(&mut polite).await["type"], "pong");
}

/// Opens a socket and sends `connection_init` with `payload`, without waiting for the answer.
async fn ws_open(addr: SocketAddr, protocol: &str, payload: Value) -> Ws {
    let (mut ws, _) = ws_upgrade_with(addr, protocol).await.unwrap();
    ws_send(
        &mut ws,
        json!({"type": "connection_init", "payload": payload}),
    )
    .await;
    ws
}

/// With auth on nothing in the schema answers without a key, so a socket whose
/// `connection_init` has none, or one that does not verify, is closed at once with 4403 (it was
/// acknowledged, ran `{__typename}`, and stayed open for ever).
#[tokio::test]
async fn a_connection_init_without_a_valid_key_is_closed_with_4403_when_auth_is_on() {
    let app = TestApp::new().await;
    let a = Instance::with_auth(&app).await;
    let expired = crate::harness::bearer(KeySpec {
        workspace: Some("ws".into()),
        expires_at: Some(chrono::Utc::now() - chrono::Duration::seconds(5)),
        ..Default::default()
    });
    for protocol in ["graphql-transport-ws", "graphql-ws"] {
        for payload in [
            json!({"Authorization": "Bearer garbage"}),
            json!({}),
            Value::Null,
            json!({"Authorization": expired}),
        ] {
            let mut ws = ws_open(a.addr, protocol, payload.clone()).await;
            ws_send(
                &mut ws,
                json!({"id": "1", "type": "subscribe", "payload": {"query": "{ __typename }"}}),
            )
            .await;
            let started = Instant::now();
            assert_eq!(
                ws_close_code(&mut ws, Duration::from_secs(5)).await,
                4403,
                "{protocol} {payload}"
            );
            assert!(started.elapsed() < Duration::from_secs(2));
        }
    }
    // A valid key is acknowledged as before.
    let key = crate::harness::bearer(KeySpec {
        workspace: Some("ws".into()),
        ..Default::default()
    });
    let mut ws = ws_connect_as(a.addr, &key).await;
    ws_send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(ws_next_raw(&mut ws).await["type"], "pong");
}

/// Each client address may hold `HONCHO_MAX_WEBSOCKETS_PER_ADDRESS` sockets; the next upgrade is
/// 429 with the limit named, and a closed socket frees its place (the real binary: its accept
/// loop knows each peer's address).
#[tokio::test]
async fn websockets_per_client_address_are_capped() {
    let db = crate::harness::blank_database().await;
    let server =
        crate::harness::ServerProcess::start(&db, &[("HONCHO_MAX_WEBSOCKETS_PER_ADDRESS", "3")])
            .await;
    let key = crate::harness::bearer(KeySpec {
        admin: true,
        ..Default::default()
    });
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(ws_connect_as(server.addr, &key).await);
    }
    let upgrade = || ws_upgrade(server.addr);
    match upgrade().await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status(), 429);
            let body: Value = serde_json::from_slice(resp.body().as_deref().unwrap()).unwrap();
            assert_eq!(
                body["errors"][0]["extensions"]["limit"], "HONCHO_MAX_WEBSOCKETS_PER_ADDRESS",
                "{body}"
            );
            assert_eq!(body["errors"][0]["extensions"]["max"], 3);
        }
        other => panic!("a fourth socket: {:?}", other.map(|_| ())),
    }
    assert!(server.healthy().await, "HTTP is not capped");
    open.pop().unwrap().close(None).await.unwrap();
    let started = Instant::now();
    loop {
        match upgrade().await {
            Ok(_) => break,
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(5),
                "a closed socket did not free its place: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
