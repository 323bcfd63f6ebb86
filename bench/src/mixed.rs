//! Workload 9: a mixed load at rising concurrency. 70% pages of 50 messages, 30% workspace
//! searches with context (full text only, so the embedder is not what is measured), against a
//! server with the production default pool (`HONCHO_DB_POOL`, 20), over the sitting's session.
//! What counts is that throughput holds as clients are added and that p99 is bounded by queueing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use crate::seed::{self, Rng};
use crate::sitting::{SESSION, WORKSPACE};
use crate::{Bench, Req, Stats, stats, timed};

pub const LEVELS: [usize; 3] = [8, 64, 256];

const Q_PAGE: &str = "query($w: ID!, $s: ID!, $f: JSON) { workspace(id: $w) { session(id: $s) { \
  messages(first: 50, filters: $f) { nodes { id content seqInSession peerId createdAt } } } } }";

const Q_SEARCH: &str = "query($w: ID!, $q: String!) { workspace(id: $w) { \
  search(query: $q, limit: 10, includeContext: true, contextWindow: 2) { \
  ... on SnippetHits { results { id content sessionId } snippets { sessionId matched { id } context { id content seqInSession } } } } } }";

#[derive(Serialize, Clone, Debug)]
pub struct MixedResult {
    pub clients: usize,
    pub requests: usize,
    pub errors: usize,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub latency: Stats,
    /// Resident memory of the benchmark process (server and clients) after the level.
    pub rss_mb: f64,
}

/// Resident set size of this process, from /proc (0 where there is none).
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `requests` requests at each level of [`LEVELS`] against `url`, over `messages` messages.
pub async fn run(
    b: &Bench,
    url: &str,
    rng: &mut Rng,
    messages: usize,
    requests: usize,
) -> anyhow::Result<Vec<MixedResult>> {
    // 100 distinct requests, 7 pages for every 3 searches, cycled.
    let reqs: Vec<Req> = (0..100)
        .map(|i| {
            if i % 10 < 7 {
                let lo = rng.range(1, messages.saturating_sub(50).max(1));
                Req {
                    query: Q_PAGE,
                    vars: json!({"w": WORKSPACE, "s": SESSION, "f": {"seqInSession": {"gte": lo}}}),
                }
            } else {
                Req {
                    query: Q_SEARCH,
                    vars: json!({"w": WORKSPACE, "q": seed::query(rng)}),
                }
            }
        })
        .collect();
    for r in &reqs {
        b.post(url, r).await?;
    }
    let reqs = Arc::new(reqs);
    let mut out = Vec::new();
    for clients in LEVELS {
        let errors = Arc::new(AtomicUsize::new(0));
        let (http, u, rs, errs) = (b.http.clone(), url.to_owned(), reqs.clone(), errors.clone());
        let t = Instant::now();
        let lat = timed(
            clients,
            requests,
            &format!("9 mixed, {clients} clients"),
            move |i| {
                let (http, u, rs, errs) = (http.clone(), u.clone(), rs.clone(), errs.clone());
                async move {
                    let r = &rs[i % rs.len()];
                    let ok = match http
                        .post(&u)
                        .json(&json!({"query": r.query, "variables": r.vars}))
                        .send()
                        .await
                    {
                        Ok(resp) if resp.status().is_success() => {
                            let body = resp.bytes().await?;
                            !body.is_empty() && !body.windows(9).any(|w| w == b"\"errors\":")
                        }
                        _ => false,
                    };
                    if !ok {
                        errs.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                }
            },
        )
        .await?;
        let seconds = t.elapsed().as_secs_f64();
        out.push(MixedResult {
            clients,
            requests,
            errors: errors.load(Ordering::Relaxed),
            seconds,
            requests_per_s: requests as f64 / seconds,
            latency: stats(lat),
            rss_mb: rss_mb(),
        });
    }
    Ok(out)
}
