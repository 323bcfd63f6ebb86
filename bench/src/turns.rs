//! Workload 13: chat turns, ingested as a chat client sends them. Each sitting is one fresh
//! session of 20-30 turns of 15-40 words between two people, sent as one `createMessages` through
//! the MiniLM server, one sitting after another; then the embedder alone on the very texts the
//! server embeds for them (each turn after the one before it, `embed::message_text`), batch by
//! batch. Workload 1's batches of 100 short messages are the other shape of ingest; chat turns
//! are longer, and each is embedded with the turn before it, so they cost the model several times
//! more per message.

use std::sync::Arc;
use std::time::{Duration, Instant};

use honcho_graphql::embed::{CONTEXT_TURNS, Embedder, message_text};
use serde::Serialize;
use serde_json::{Value, json};

use crate::seed::{self, Rng};
use crate::{Bench, Req, Stats, ThroughputResult, bar, stats};

const WORKSPACE: &str = "turns";
const PEERS: [&str; 2] = ["caroline", "melanie"];

/// Batch by batch: messages per second (each batch's own rate) and time per batch.
#[derive(Serialize, Clone, Debug)]
pub struct TurnsResult {
    pub what: String,
    pub batches: usize,
    pub messages: usize,
    /// Median over the batches of (turns in the batch / its time).
    pub median_msg_per_s: f64,
    pub batch: Stats,
}

/// One sitting's turns as (peer, content).
type Sitting = Vec<(&'static str, String)>;

/// Sittings of 20-30 turns of 15-40 words, `turns` turns in all (the last sitting may be shorter).
fn sittings(rng: &mut Rng, turns: usize) -> Vec<Sitting> {
    let mut out = Vec::new();
    let mut left = turns;
    while left > 0 {
        let n = rng.range(20, 30).min(left);
        left -= n;
        let mut speaker = rng.range(0, 1);
        let sitting = (0..n)
            .map(|_| {
                // Mostly turn-taking, sometimes two turns in a row.
                if rng.range(0, 4) != 0 {
                    speaker = 1 - speaker;
                }
                let words = rng.range(15, 40);
                (PEERS[speaker], seed::sentence_of(rng, words))
            })
            .collect();
        out.push(sitting);
    }
    out
}

fn result(what: &str, batches: &[(usize, Duration)]) -> TurnsResult {
    let rates = batches
        .iter()
        .map(|(n, d)| *n as f64 / d.as_secs_f64())
        .collect();
    TurnsResult {
        what: what.to_owned(),
        batches: batches.len(),
        messages: batches.iter().map(|(n, _)| n).sum(),
        median_msg_per_s: crate::common::median(rates),
        batch: stats(batches.iter().map(|(_, d)| *d).collect()),
    }
}

fn throughput(r: &TurnsResult) -> ThroughputResult {
    let seconds = r.batch.mean_ms * r.batches as f64 / 1e3;
    ThroughputResult {
        workload: "13 chat turns".into(),
        detail: r.what.clone(),
        messages: r.messages,
        seconds,
        messages_per_s: r.messages as f64 / seconds,
    }
}

/// `turns` turns through `createMessages` (a session per sitting), then MiniLM alone on the same
/// texts, a sitting per call.
pub async fn run(
    b: &Bench,
    rng: &mut Rng,
    minilm: &Arc<dyn Embedder>,
    turns: usize,
) -> anyhow::Result<(Vec<TurnsResult>, Vec<ThroughputResult>)> {
    let sittings = sittings(rng, turns);
    let mut graphql = Vec::new();
    let pb = bar(turns as u64, "13 chat turns, createMessages, MiniLM");
    for (i, sitting) in sittings.iter().enumerate() {
        let msgs: Vec<Value> = sitting
            .iter()
            .map(|(peer, content)| json!({"peerId": peer, "content": content}))
            .collect();
        let req = Req {
            query: crate::M_CREATE,
            vars: json!({"w": WORKSPACE, "s": format!("sitting-{i}"), "m": msgs}),
        };
        let t = Instant::now();
        b.post(&b.url, &req).await?;
        graphql.push((sitting.len(), t.elapsed()));
        pb.inc(sitting.len() as u64);
    }
    pb.finish();

    let mut alone = Vec::new();
    let pb = bar(turns as u64, "13 chat turns, MiniLM alone");
    for sitting in &sittings {
        let texts: Vec<String> = (0..sitting.len())
            .map(|at| {
                let before: Vec<(&str, &str)> = sitting[at.saturating_sub(CONTEXT_TURNS)..at]
                    .iter()
                    .map(|(p, c)| (*p, c.as_str()))
                    .collect();
                let (peer, content) = &sitting[at];
                message_text(&before, peer, content)
            })
            .collect();
        let t = Instant::now();
        minilm.embed(&texts).await?;
        alone.push((texts.len(), t.elapsed()));
        pb.inc(sitting.len() as u64);
    }
    pb.finish();

    let results = vec![
        result("createMessages of 20-30 turns, MiniLM", &graphql),
        result("MiniLM alone, the same texts and batches", &alone),
    ];
    let tp = results.iter().map(throughput).collect();
    Ok((results, tp))
}
