//! Fan-out to many idle subscribers of one server process (a measurement, run by hand).

use super::*;

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
        // Every subscriber comes from 127.0.0.1.
        .env("HONCHO_MAX_WEBSOCKETS_PER_ADDRESS", "0")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = server.id().unwrap();
    let http = honcho_graphql::outbound::client();
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
    let write = |content: String| async move {
        let m: Vec<Value> = (0..batch)
            .map(|i| json!({"peerId": "speaker", "content": format!("{content}.{i}")}))
            .collect();
        let request = json!({"query": CREATE, "variables": {"w": "ws", "s": "room", "m": m}});
        let resp = post_json(&format!("http://{addr}/graphql"), &request).await;
        assert!(resp.get("errors").is_none(), "{resp}");
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
