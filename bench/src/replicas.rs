//! `make bench-replicas`: read workloads served by the primary alone and by the primary with one
//! streaming standby (scripts/standby.sh), side by side in alternating rounds, and the cost of
//! read-your-writes (a read with `x-honcho-after` right after the write it names).
//!
//! Both servers run in this process on the same machine as both PostgreSQL servers: on a small
//! machine this measures what routing and a standby cost, not what a replica on its own hardware
//! adds. bench/README.md ("Read replicas") has the figures and how to read them.

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use common::{Stats, stats, timed};
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
    /// Keep the database.
    #[arg(long)]
    keep: bool,
}

const SESSION_PAGE: &str = "query($s: ID!) { workspace(id: \"w\") { session(id: $s) { \
     messages(first: 50) { nodes { seqInSession content peer { id } } } } } }";
const SEARCH: &str = "query($s: ID!, $q: String!) { workspace(id: \"w\") { session(id: $s) { \
     search(query: $q, limit: 10) { ... on MessageHits { results { id content } } } } } }";
const CREATE: &str = "mutation($s: ID!, $m: [MessageInput!]!) { \
     createMessages(workspaceId: \"w\", sessionId: $s, messages: $m) { seqInSession } }";
const WORDS: &[&str] = &[
    "travel", "coffee", "garden", "music", "river", "winter", "library", "bicycle", "kitchen",
    "mountain", "letter", "market",
];

fn main() -> anyhow::Result<()> {
    // SAFETY: nothing else runs yet.
    let rt = unsafe { honcho_graphql::runtime()? };
    rt.block_on(async {
        let args = Args::parse();
        common::with_database("bench_replicas", args.keep, |url| run(args.clone(), url)).await
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
    let sessions = seed(&http, &alone, args.messages).await?;
    db.execute_unprepared("ANALYZE").await?;
    let pool = standby_pool(url).await?;
    let with_standby = common::serve(primary.clone().with_read_pool(Some(pool.clone()))).await?;

    let servers = [
        ("primary only", alone.clone()),
        ("primary + standby", with_standby.clone()),
    ];
    let rounds = alternate(&args, &http, &servers, sessions).await?;
    rounds.print(&args);
    println!(
        "\nstandby: {} statements served, state {}",
        pool.replicas()[0].statements(),
        pool.replicas()[0].state().as_str()
    );
    read_your_writes(&args, &http, &with_standby, &pool).await?;
    let metrics = honcho_graphql::graphql::metrics::encode(&pool.gather());
    for line in metrics.lines().filter(|l| {
        l.starts_with("honcho_consistency_wait_seconds_sum")
            || l.starts_with("honcho_consistency_wait_seconds_count")
            || l.starts_with("honcho_read_routes_total")
    }) {
        println!("{line}");
    }
    Ok(())
}

/// `messages` messages through the server at `url`, 100 per session; returns the sessions.
async fn seed(http: &reqwest::Client, url: &str, messages: usize) -> anyhow::Result<usize> {
    let sessions = messages.div_ceil(100);
    eprintln!("seeding {messages} messages in {sessions} sessions");
    for i in 0..sessions {
        let m: Vec<Value> = (0..100)
            .map(|j| {
                let w = WORDS[(i * 7 + j) % WORDS.len()];
                json!({"peerId": format!("p{}", j % 4), "content": format!("message {j} about {w} and {}", WORDS[j % WORDS.len()])})
            })
            .collect();
        common::graphql(http, url, CREATE, &json!({"s": format!("s{i}"), "m": m})).await?;
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
    sessions: usize,
) -> anyhow::Result<Rounds> {
    let mut times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); servers.len()]; WORKLOADS.len()];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
    for round in 0..args.rounds {
        for k in 0..servers.len() {
            // Alternate which server goes first, so neither always runs on a warmer cache.
            let s = (k + round) % servers.len();
            for (w, (label, query)) in WORKLOADS.iter().enumerate() {
                let (http, url, query) = (http.clone(), servers[s].1.clone(), *query);
                let started = Instant::now();
                let d = timed(
                    args.clients,
                    args.requests,
                    &format!("{label}, {}", servers[s].0),
                    move |i| {
                        let (http, url) = (http.clone(), url.clone());
                        let vars =
                            json!({"s": format!("s{}", i % sessions), "q": WORDS[i % WORDS.len()]});
                        async move { common::graphql(&http, &url, query, &vars).await.map(|_| ()) }
                    },
                )
                .await?;
                rates[s].push(args.requests as f64 / started.elapsed().as_secs_f64());
                times[w][s].extend(d);
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
    pool: &ReadPool,
) -> anyhow::Result<()> {
    let (mut with_token, mut without) = (Vec::new(), Vec::new());
    let (mut stale, mut from_standby) = (0, 0);
    for i in 0..args.pairs {
        let session = "ryw";
        let m = json!([{"peerId": "p0", "content": format!("fresh {i}")}]);
        let resp = common::graphql(http, url, CREATE, &json!({"s": session, "m": m})).await?;
        let token = resp["extensions"]["consistencyToken"]
            .as_str()
            .context("a mutation without a consistency token")?
            .to_owned();
        let count = format!(
            "{{ workspace(id: \"w\") {{ session(id: \"{session}\") {{ messages(first: 1) {{ totalCount }} }} }} }}"
        );
        let served = pool.replicas()[0].statements();
        let t = Instant::now();
        let read: Value = http
            .post(url)
            .header("x-honcho-after", &token)
            .json(&json!({"query": count}))
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
        common::graphql(http, url, &count, &json!({})).await?;
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
