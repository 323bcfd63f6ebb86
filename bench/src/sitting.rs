//! Workload 8: the shape of the side-by-side sitting with Honcho, so the comparison needs no
//! Python on our side. One fresh workspace and session, two peers, `--sitting-messages` messages
//! ingested in batches of 100 with MiniLM (every batch timed, so a table that slows as it fills
//! shows), then the four reads the sittings' Python client times, one client at a time: session search
//! (limit 10), 50 messages by peer, 50 by `created_at >=`, one message by id.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;
use serde_json::{Value, json};

use crate::seed::{self, Rng};
use crate::{Bench, ReadResult, Req, Stats, ThroughputResult, bar, stats};

pub const WORKSPACE: &str = "sitting";
pub const SESSION: &str = "sitting-session";
const PEERS: [&str; 2] = ["alice", "bob"];
const BATCH: usize = 100;

const Q_SEARCH: &str = "query($w: ID!, $s: ID!, $q: String!) { workspace(id: $w) { session(id: $s) { \
  search(query: $q, limit: 10) { ... on MessageHits { results { id content } } } } } }";

const Q_LIST: &str = "query($w: ID!, $s: ID!, $f: JSON) { workspace(id: $w) { session(id: $s) { \
  messages(first: 50, filters: $f) { totalCount nodes { id content peerId createdAt } } } } }";

const Q_GET: &str = "query($w: ID!, $id: ID!) { workspace(id: $w) { message(id: $id) { \
  id content peerId createdAt } } }";

/// How the time of one batch of 100 moves as the session fills.
#[derive(Serialize, Clone, Debug)]
pub struct BatchCurve {
    pub batches: usize,
    pub first_ms: f64,
    /// Medians of the first and the last ten batches.
    pub first10_p50_ms: f64,
    pub last10_p50_ms: f64,
    /// last10 / first10: 1.0 is flat.
    pub growth: f64,
    pub all: Stats,
}

/// The ingested session: ids and creation times, for the reads.
pub struct Sitting {
    ids: Vec<String>,
    created: Vec<String>,
}

/// Ingests `n` messages into a fresh session through the MiniLM server.
pub async fn ingest(
    b: &Bench,
    rng: &mut Rng,
    n: usize,
) -> anyhow::Result<(Sitting, ThroughputResult, BatchCurve)> {
    b.post(
        &b.url,
        &Req {
            query: "mutation($w: ID!, $s: ID!) { getOrCreateSession(workspaceId: $w, id: $s) { id } }",
            vars: json!({"w": WORKSPACE, "s": SESSION}),
        },
    )
    .await?;
    let texts: Vec<String> = (0..n).map(|_| seed::sentence(rng)).collect();
    let mut sitting = Sitting {
        ids: Vec::with_capacity(n),
        created: Vec::with_capacity(n),
    };
    let mut lat = Vec::new();
    let pb = bar(n as u64, "8 sitting ingest, MiniLM");
    let t = Instant::now();
    for (c, chunk) in texts.chunks(BATCH).enumerate() {
        let msgs: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, x)| json!({"peerId": PEERS[(c * BATCH + i) % 2], "content": x}))
            .collect();
        let one = Instant::now();
        let resp = b
            .post(
                &b.url,
                &Req {
                    query: "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
                      createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id createdAt } }",
                    vars: json!({"w": WORKSPACE, "s": SESSION, "m": msgs}),
                },
            )
            .await?;
        lat.push(one.elapsed());
        for m in resp["data"]["createMessages"]
            .as_array()
            .context("createMessages")?
        {
            sitting.ids.push(m["id"].as_str().context("id")?.to_owned());
            sitting
                .created
                .push(m["createdAt"].as_str().context("createdAt")?.to_owned());
        }
        pb.inc(chunk.len() as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish();
    let curve = curve(&lat);
    let tp = ThroughputResult {
        workload: "8 sitting ingest".into(),
        detail: format!("one session from empty, batches of {BATCH}, MiniLM"),
        messages: n,
        seconds: secs,
        messages_per_s: n as f64 / secs,
    };
    Ok((sitting, tp, curve))
}

/// The median in milliseconds.
fn median(d: &[Duration]) -> f64 {
    crate::common::median(d.iter().map(|x| x.as_secs_f64() * 1e3).collect())
}

fn curve(lat: &[Duration]) -> BatchCurve {
    let k = lat.len().min(10);
    let first10 = median(&lat[..k]);
    let last10 = median(&lat[lat.len() - k..]);
    BatchCurve {
        batches: lat.len(),
        first_ms: lat.first().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        first10_p50_ms: first10,
        last10_p50_ms: last10,
        growth: last10 / first10.max(1e-9),
        all: stats(lat.to_vec()),
    }
}

/// The four reads, one client, `--requests` each, each with its SQL floor.
pub async fn reads(b: &Bench, rng: &mut Rng, sitting: &Sitting) -> anyhow::Result<Vec<ReadResult>> {
    anyhow::ensure!(!sitting.ids.is_empty(), "the sitting ingested nothing");
    let scale = format!("{}k msgs, 1 session", sitting.ids.len() / 1000);
    let gte = &sitting.created[sitting.created.len() / 2];
    let search: Vec<Req> = (0..20)
        .map(|_| Req {
            query: Q_SEARCH,
            vars: json!({"w": WORKSPACE, "s": SESSION, "q": seed::query(rng)}),
        })
        .collect();
    let by_peer: Vec<Req> = PEERS
        .iter()
        .map(|p| Req {
            query: Q_LIST,
            vars: json!({"w": WORKSPACE, "s": SESSION, "f": {"peer_id": p}}),
        })
        .collect();
    let by_time = vec![Req {
        query: Q_LIST,
        vars: json!({"w": WORKSPACE, "s": SESSION, "f": {"created_at": {"gte": gte}}}),
    }];
    let get: Vec<Req> = (0..20)
        .map(|_| Req {
            query: Q_GET,
            vars: json!({"w": WORKSPACE, "id": rng.pick(&sitting.ids)}),
        })
        .collect();
    let mut out = Vec::new();
    for (name, reqs) in [
        ("8 sitting: session search, limit 10", search),
        ("8 sitting: 50 by peer", by_peer),
        ("8 sitting: 50 by created_at >=", by_time),
        ("8 sitting: get one message", get),
    ] {
        out.push(b.read_with(&b.url, name, &scale, reqs, 1).await?);
    }
    Ok(out)
}
