//! `make bench-replicas`: read workloads served by the primary alone and by the primary with one
//! streaming standby (scripts/standby.sh), side by side in alternating rounds, the cost of
//! read-your-writes (a read with `x-honcho-after` right after the write it names), and how long
//! an event takes from a write on one server instance to a subscriber of another.
//!
//! Every server runs in this process on the same machine as both PostgreSQL servers: on a small
//! machine this measures what routing and a standby cost, not what a replica on its own hardware
//! adds. `--database` runs beside a large corpus (`make bench-scale`'s). bench/README.md ("Read
//! replicas") has the figures and how to read them.

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use common::{Stats, stats, timed};
use honcho_graphql::graphql;
use honcho_graphql::store::events::{DEFAULT_BUFFER, EventBus};
use honcho_graphql::store::replicas::{ReadSettings, wal_position};
use honcho_graphql::store::{ReadPool, Store};
use migration::MigratorTrait;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

#[derive(Parser, Debug, Clone)]
#[command(about = "Reads on the primary alone vs the primary + one streaming standby")]
struct Args {
    /// Messages seeded (100 per session).
    #[arg(long, default_value_t = 5_000)]
    messages: usize,
    /// Timed requests per workload, server and round.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Rounds; each runs every workload on both servers, in alternating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Write-then-read pairs for the read-your-writes figures.
    #[arg(long, default_value_t = 300)]
    pairs: usize,
    /// Writes whose events are timed on a subscriber of each of two server instances.
    #[arg(long, default_value_t = 300)]
    events: usize,
    /// Keep the database.
    #[arg(long)]
    keep: bool,
    /// Run in this database of DATABASE_URL's server as it stands, beside what it holds (created
    /// when missing, always kept): `bench_scale` measures at `make bench-scale`'s size. The
    /// seeded workspace is `replicas-<pid>`, so runs do not share one.
    #[arg(long)]
    database: Option<String>,
}

const SESSION_PAGE: &str = "query($w: ID!, $s: ID!) { workspace(id: $w) { session(id: $s) { \
     messages(first: 50) { nodes { seqInSession content peer { id } } } } } }";
const SEARCH: &str = "query($w: ID!, $s: ID!, $q: String!) { workspace(id: $w) { session(id: $s) { \
     search(query: $q, limit: 10) { ... on MessageHits { results { id content } } } } } }";
const CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
     createMessages(workspaceId: $w, sessionId: $s, messages: $m) { seqInSession } }";
const COUNT: &str = "query($w: ID!, $s: ID!) { workspace(id: $w) { session(id: $s) { \
     messages(first: 1) { totalCount } } } }";
const SUBSCRIBE: &str = "subscription($w: ID!, $s: ID!) { \
     messageCreated(workspaceId: $w, sessionId: $s) { content } }";
const WORDS: &[&str] = &[
    "travel", "coffee", "garden", "music", "river", "winter", "library", "bicycle", "kitchen",
    "mountain", "letter", "market",
];

fn main() -> anyhow::Result<()> {
    // SAFETY: nothing else runs yet.
    let rt = unsafe { honcho_graphql::runtime()? };
    rt.block_on(async {
        let args = Args::parse();
        match args.database.clone() {
            Some(name) => run(args, common::named_database(&name, false).await?).await,
            None => {
                common::with_database("bench_replicas", args.keep, |url| run(args.clone(), url))
                    .await
            }
        }
    })
}

/// A standby of DATABASE_URL's cluster, removed by the script's reaper when this process exits.
fn start_standby(base: &str) -> anyhow::Result<u16> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/standby.sh");
    let out = std::process::Command::new(script)
        .args([
            "start",
            base,
            &port.to_string(),
            &std::process::id().to_string(),
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running scripts/standby.sh")?;
    if !out.status.success() {
        bail!(
            "scripts/standby.sh could not make a standby ({})",
            out.status
        );
    }
    Ok(port)
}

async fn run(args: Args, url: String) -> anyhow::Result<()> {
    let url = url.as_str();
    let db = common::connect(url, 8).await?;
    migration::Migrator::up(&db, None).await?;
    let primary = Store::new(db.clone());
    let alone = common::serve(primary.clone()).await?;
    let http = honcho_graphql::outbound::client();
    let workspace = match args.database {
        Some(_) => format!("replicas-{}", std::process::id()),
        None => "w".to_owned(),
    };
    let w = workspace.as_str();
    let sessions = seed(&http, &alone, w, args.messages).await?;
    let messages = common::count(&db, "SELECT count(*) FROM messages", vec![]).await?;
    println!(
        "workspace {w}: {} messages; the database: {messages}",
        args.messages
    );
    db.execute_unprepared("ANALYZE").await?;
    let pool = standby_pool(url).await?;
    let with_standby = common::serve(primary.clone().with_read_pool(Some(pool.clone()))).await?;

    let servers = [
        ("primary only", alone.clone()),
        ("primary + standby", with_standby.clone()),
    ];
    let rounds = alternate(&args, &http, &servers, w, sessions).await?;
    rounds.print(&args);
    println!(
        "\nstandby: {} statements served, state {}",
        pool.replicas()[0].statements(),
        pool.replicas()[0].state().as_str()
    );
    read_your_writes(&args, &http, &with_standby, w, &pool).await?;
    let metrics = honcho_graphql::graphql::metrics::encode(&pool.gather());
    for line in metrics.lines().filter(|l| {
        l.starts_with("honcho_consistency_wait_seconds_sum")
            || l.starts_with("honcho_consistency_wait_seconds_count")
            || l.starts_with("honcho_read_routes_total")
    }) {
        println!("{line}");
    }
    events(&args, &http, url, w).await?;
    Ok(())
}

/// `messages` messages through the server at `url`, 100 per session; returns the sessions.
async fn seed(
    http: &reqwest::Client,
    url: &str,
    w: &str,
    messages: usize,
) -> anyhow::Result<usize> {
    let sessions = messages.div_ceil(100);
    eprintln!("seeding {messages} messages in {sessions} sessions");
    for i in 0..sessions {
        let m: Vec<Value> = (0..100)
            .map(|j| {
                let w = WORDS[(i * 7 + j) % WORDS.len()];
                json!({"peerId": format!("p{}", j % 4), "content": format!("message {j} about {w} and {}", WORDS[j % WORDS.len()])})
            })
            .collect();
        let vars = json!({"w": w, "s": format!("s{i}"), "m": m});
        common::graphql(http, url, CREATE, &vars).await?;
    }
    Ok(sessions)
}

/// A read pool over a fresh standby of the database at `url`, once it has replayed everything
/// written so far.
async fn standby_pool(url: &str) -> anyhow::Result<std::sync::Arc<ReadPool>> {
    let (base, _) = common::server_url(url);
    let name = url.rsplit('/').next().unwrap_or_default().to_owned();
    let port = start_standby(&base)?;
    let admin = common::connect(&format!("{base}/postgres"), 1).await?;
    let standby_admin =
        common::connect(&format!("postgres://postgres@127.0.0.1:{port}/postgres"), 1).await?;
    let target = wal_position(&admin, "pg_current_wal_insert_lsn()").await?;
    while wal_position(&standby_admin, "pg_last_wal_replay_lsn()").await? < target {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let settings = ReadSettings {
        pool: 8,
        statement_timeout: None,
        max_lag: Duration::from_millis(1_000),
        token_wait: Duration::from_millis(50),
    };
    let replica = format!("postgres://postgres@127.0.0.1:{port}/{name}");
    Ok(ReadPool::connect(url, &[replica], settings).await?)
}

const WORKLOADS: [(&str, &str); 2] = [("session page", SESSION_PAGE), ("full-text search", SEARCH)];

/// Request times per workload and server, and each round's request rate per server.
struct Rounds {
    times: Vec<Vec<Vec<Duration>>>,
    rates: Vec<Vec<f64>>,
}

/// Every workload on every server, `args.rounds` times.
async fn alternate(
    args: &Args,
    http: &reqwest::Client,
    servers: &[(&str, String)],
    w: &str,
    sessions: usize,
) -> anyhow::Result<Rounds> {
    let mut times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); servers.len()]; WORKLOADS.len()];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
    for round in 0..args.rounds {
        for k in 0..servers.len() {
            // Alternate which server goes first, so neither always runs on a warmer cache.
            let s = (k + round) % servers.len();
            for (workload, (label, query)) in WORKLOADS.iter().enumerate() {
                let (http, url, query) = (http.clone(), servers[s].1.clone(), *query);
                let w = w.to_owned();
                let started = Instant::now();
                let d = timed(
                    args.clients,
                    args.requests,
                    &format!("{label}, {}", servers[s].0),
                    move |i| {
                        let (http, url) = (http.clone(), url.clone());
                        let (s, q) = (format!("s{}", i % sessions), WORDS[i % WORDS.len()]);
                        let vars = json!({"w": w, "s": s, "q": q});
                        async move { common::graphql(&http, &url, query, &vars).await.map(|_| ()) }
                    },
                )
                .await?;
                rates[s].push(args.requests as f64 / started.elapsed().as_secs_f64());
                times[workload][s].extend(d);
            }
        }
    }
    Ok(Rounds { times, rates })
}

impl Rounds {
    fn print(self, args: &Args) {
        println!(
            "\n| workload ({} clients, {} requests x {} rounds) | primary only p50 / p95 | primary + standby p50 / p95 | p50 ratio |",
            args.clients, args.requests, args.rounds
        );
        println!("|---|---:|---:|---:|");
        for (w, (label, _)) in WORKLOADS.iter().enumerate() {
            let a: Stats = stats(self.times[w][0].clone());
            let b: Stats = stats(self.times[w][1].clone());
            println!(
                "| {label} | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2}x |",
                a.p50_ms,
                a.p95_ms,
                b.p50_ms,
                b.p95_ms,
                b.p50_ms / a.p50_ms
            );
        }
        println!(
            "| requests/s (median of rounds, all workloads) | {:.0} | {:.0} | |",
            crate::common::median(self.rates[0].clone()),
            crate::common::median(self.rates[1].clone())
        );
    }
}

/// Read-your-writes: each pair writes one message, then reads the session with the write's
/// consistency token, and again without it; prints both latencies and how many reads were stale.
async fn read_your_writes(
    args: &Args,
    http: &reqwest::Client,
    url: &str,
    w: &str,
    pool: &ReadPool,
) -> anyhow::Result<()> {
    let (mut with_token, mut without) = (Vec::new(), Vec::new());
    let (mut stale, mut from_standby) = (0, 0);
    for i in 0..args.pairs {
        let session = "ryw";
        let m = json!([{"peerId": "p0", "content": format!("fresh {i}")}]);
        let resp =
            common::graphql(http, url, CREATE, &json!({"w": w, "s": session, "m": m})).await?;
        let token = resp["extensions"]["consistencyToken"]
            .as_str()
            .context("a mutation without a consistency token")?
            .to_owned();
        let count = json!({"query": COUNT, "variables": {"w": w, "s": session}});
        let served = pool.replicas()[0].statements();
        let t = Instant::now();
        let read: Value = http
            .post(url)
            .header("x-honcho-after", &token)
            .json(&count)
            .send()
            .await?
            .json()
            .await?;
        with_token.push(t.elapsed());
        if pool.replicas()[0].statements() > served {
            from_standby += 1;
        }
        if read["data"]["workspace"]["session"]["messages"]["totalCount"] != json!(i + 1) {
            stale += 1;
        }
        let t = Instant::now();
        common::graphql(http, url, COUNT, &count["variables"]).await?;
        without.push(t.elapsed());
    }
    let (a, b) = (stats(without), stats(with_token));
    println!(
        "\n| read right after a write ({} pairs) | p50 | p95 |",
        args.pairs
    );
    println!("|---|---:|---:|");
    println!(
        "| without a token (may be stale) | {:.2} ms | {:.2} ms |",
        a.p50_ms, a.p95_ms
    );
    println!(
        "| with `x-honcho-after` | {:.2} ms | {:.2} ms |",
        b.p50_ms, b.p95_ms
    );
    println!(
        "\nwith the token: {stale} stale, {from_standby} read from the standby, {} from the primary (the standby had not replayed the write within 50 ms)",
        args.pairs - from_standby
    );
    Ok(())
}

/// Two server instances as two processes of the server are: each with its own pool and its own
/// `LISTEN` connection (an event never reads from a standby). A subscriber of each watches one
/// session; each of `args.events` writes, one at a time, goes through the first instance, and
/// the time from the write's request to its event is taken on both subscribers.
async fn events(args: &Args, http: &reqwest::Client, url: &str, w: &str) -> anyhow::Result<()> {
    let session = "events";
    let (mut instances, mut buses, mut arrivals) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        let store = Store::new(common::connect(url, 8).await?);
        let bus = EventBus::start(url, DEFAULT_BUFFER).await?;
        let schema = graphql::build_schema_with_events(
            store.clone(),
            &graphql::Limits::default(),
            Some(bus.clone()),
        );
        let instance = common::serve_schema_on(schema, store, 0).await?;
        arrivals.push(subscriber(&instance, w, session).await?);
        instances.push(instance);
        buses.push(bus);
    }
    let write = async |content: &str| {
        let m = json!([{"peerId": "p0", "content": content}]);
        let vars = json!({"w": w, "s": session, "m": m});
        common::graphql(http, &instances[0], CREATE, &vars).await
    };
    // A subscription listens once the server has first polled it: write until both saw a write.
    for k in 0.. {
        anyhow::ensure!(k < 100, "no subscriber saw a write within 100 tries");
        write(&format!("warm-up {k}")).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        if arrivals.iter().all(|a| !a.is_empty()) {
            break;
        }
    }
    let (mut writes, mut same, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.events {
        let content = format!("event {i}");
        let t = Instant::now();
        write(&content).await?;
        writes.push(t.elapsed());
        same.push(arrival(&mut arrivals[0], &content).await? - t);
        other.push(arrival(&mut arrivals[1], &content).await? - t);
    }
    let row = |label: &str, d: Vec<Duration>| {
        let s: Stats = stats(d);
        println!("| {label} | {:.2} ms | {:.2} ms |", s.p50_ms, s.p95_ms);
    };
    println!(
        "\n| an event of a write through instance A ({} writes, one at a time), from the write's request | p50 | p95 |",
        args.events
    );
    println!("|---|---:|---:|");
    row("the write's response", writes);
    row("on a subscriber of instance A (the writer's)", same);
    row("on a subscriber of instance B (another LISTEN)", other);
    println!(
        "notifications received: instance A {}, instance B {}",
        buses[0].notices_received(),
        buses[1].notices_received()
    );
    Ok(())
}

/// What a subscriber received: each event's content and when it arrived, in order.
type Arrivals = tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>;

/// A graphql-transport-ws subscription to `messageCreated` of session `session` on the server at
/// `url` (`http://…/graphql`), read by a task of its own.
async fn subscriber(url: &str, w: &str, session: &str) -> anyhow::Result<Arrivals> {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

    let mut req = format!("{}/ws", url.replacen("http://", "ws://", 1)).into_client_request()?;
    req.headers_mut()
        .insert("sec-websocket-protocol", "graphql-transport-ws".parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let send = json!({"type": "connection_init"}).to_string();
    ws.send(Message::Text(send.into())).await?;
    // The protocol has a client subscribe only once the server acknowledged the connection.
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), ws.next()).await;
        let Ok(Some(msg)) = next else {
            bail!("no connection_ack from {url} within 10 s");
        };
        if let Message::Text(text) = msg?
            && serde_json::from_str::<Value>(text.as_str())?["type"] == "connection_ack"
        {
            break;
        }
    }
    let vars = json!({"w": w, "s": session});
    let subscribe = json!({"id": "1", "type": "subscribe",
                           "payload": {"query": SUBSCRIBE, "variables": vars}});
    ws.send(Message::Text(subscribe.to_string().into())).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            let at = Instant::now();
            let Message::Text(text) = msg else { continue };
            let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if v["type"] == "next" {
                let content = v["payload"]["data"]["messageCreated"]["content"].as_str();
                if tx
                    .send((content.unwrap_or_default().to_owned(), at))
                    .is_err()
                {
                    break;
                }
            }
        }
    });
    Ok(rx)
}

/// When the event with `content` arrived (earlier ones, the warm-up's, are passed over).
async fn arrival(arrivals: &mut Arrivals, content: &str) -> anyhow::Result<Instant> {
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), arrivals.recv()).await;
        match next {
            Ok(Some((c, at))) if c == content => return Ok(at),
            Ok(Some(_)) => continue,
            Ok(None) => bail!("a subscription ended before the event of {content:?}"),
            Err(_) => bail!("no event of {content:?} within 10 s"),
        }
    }
}
