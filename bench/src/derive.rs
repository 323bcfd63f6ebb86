//! Derivation throughput: messages through the deriver's queue and storage with a fake LLM that
//! answers at once, so what is measured is the queue's and the writes' own cost (and, with
//! `--embedder minilm`, embedding the conclusions). Also the cost of queueing on `createMessages`
//! (the same batches with and without derivation). See bench/README.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Json;
use axum::routing::post;
use clap::Parser;
use honcho_graphql::deriver::{BatchReport, Deriver, DeriverArgs};
use honcho_graphql::embed::EmbedConfig;
use honcho_graphql::llm::{LlmArgs, LlmKind};
use honcho_graphql::store::Store;
use honcho_graphql::store::message::NewMessage;
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "deriver throughput with an instant fake LLM (see bench/README.md)")]
struct Args {
    /// Sessions, each with two speakers (two work units: each speaker observes itself).
    #[arg(long, default_value_t = 40)]
    sessions: usize,
    /// Messages per session, sent in createMessages batches of 10.
    #[arg(long, default_value_t = 50)]
    messages: usize,
    /// Deriver workers.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Most message tokens per batch (each message is ~12 tokens: ~10 messages per batch).
    #[arg(long, default_value_t = 120)]
    batch_tokens: i64,
    /// `none` (queue and storage alone) or `minilm` (conclusions embedded, dedup by cosine).
    #[arg(long, default_value = "none")]
    embedder: String,
}

/// The fake LLM: one fact per batch (named after its first NEW message, so facts stay distinct)
/// and one deductive conclusion citing it.
async fn fake_llm(calls: Arc<AtomicU64>) -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::Relaxed);
                let user = body["messages"][1]["content"].as_str().unwrap_or("");
                let answer = match user.split_once("NEW messages:\n") {
                    Some((_, new)) => {
                        let first = new.lines().next().unwrap_or("");
                        let said = first.split_once(": ").map_or(first, |x| x.1);
                        json!({"facts": [{"content": format!("The speaker said {said}"),
                                          "source_seqs": []}]})
                    }
                    None => json!({"conclusions": [{"level": "deductive",
                        "content": format!("The speaker talks {}", user.len()),
                        "source_ids": ["n1"]}]}),
                };
                Json(json!({"choices": [{"message": {"role": "assistant",
                                                     "content": answer.to_string()}}]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}/v1"))
}

/// The server's allocator (see src/main.rs), so the server measured in process is the one shipped.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main: no other thread exists yet.
    unsafe { honcho_graphql::runtime() }?.block_on(run(Args::parse()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let base = url
        .rsplit_once('/')
        .map_or(url.as_str(), |x| x.0)
        .to_owned();
    let admin = Database::connect(format!("{base}/postgres")).await?;
    let name = format!("honcho_bench_derive_{}", std::process::id());
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await?;
    let result = measure(&args, &format!("{base}/{name}")).await;
    admin
        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await?;
    result
}

async fn measure(args: &Args, url: &str) -> anyhow::Result<()> {
    let mut cfg = EmbedConfig::from_env()?;
    cfg.kind = args.embedder.parse()?;
    let embedder = honcho_graphql::embed::build(&cfg)?;
    if let Some(e) = &embedder {
        migration::set_embedding_dims(e.dims() as u32);
    }
    let store = Store::connect(url, 8, None)
        .await?
        .with_embedder(embedder.clone());
    Migrator::up(store.db(), None).await.context("migrating")?;

    // createMessages with and without queueing, alternating session by session.
    let plain = store.clone().with_derivation(false);
    let queued = store.clone().with_derivation(true);
    let batch = |s: usize, from: usize| -> Vec<NewMessage> {
        (from..from + 10)
            .map(|i| NewMessage {
                peer: if i % 2 == 0 { "alice" } else { "bob" }.into(),
                content: format!(
                    "In session {s} message {i} I talk about topic {}",
                    i * 7 + s
                ),
                metadata: None,
                created_at: None,
                configuration: None,
            })
            .collect()
    };
    let (mut t_plain, mut t_queued) = (Duration::ZERO, Duration::ZERO);
    for s in 0..args.sessions {
        for from in (0..args.messages).step_by(10) {
            let t = Instant::now();
            plain
                .create_messages("w", &format!("plain{s}"), batch(s, from))
                .await?;
            t_plain += t.elapsed();
            let t = Instant::now();
            queued
                .create_messages("w", &format!("s{s}"), batch(s, from))
                .await?;
            t_queued += t.elapsed();
        }
    }
    let n = (args.sessions * args.messages) as f64;
    let batches = n / 10.0;
    println!(
        "createMessages (batches of 10, embedder {}): {:.2} ms/batch without queueing, \
         {:.2} ms/batch with ({:+.1}%)",
        args.embedder,
        t_plain.as_secs_f64() * 1e3 / batches,
        t_queued.as_secs_f64() * 1e3 / batches,
        (t_queued.as_secs_f64() / t_plain.as_secs_f64() - 1.0) * 100.0
    );

    let calls = Arc::new(AtomicU64::new(0));
    let llm_cfg = LlmArgs {
        kind: LlmKind::Openai,
        base_url: fake_llm(calls.clone()).await?,
        model: "fake".into(),
        api_key: None,
        timeout_secs: 30.0,
        max_retries: 0,
        concurrency: 64,
    };
    let llm = honcho_graphql::llm::build(&llm_cfg)?.context("an LLM")?;
    let deriver = Arc::new(Deriver::new(
        queued.clone(),
        llm,
        DeriverArgs {
            batch_secs: 0.0,
            max_input_tokens: args.batch_tokens,
            ..DeriverArgs::default()
        },
    ));
    let started = Instant::now();
    let workers: Vec<_> = (0..args.workers)
        .map(|i| {
            let d = deriver.clone();
            tokio::spawn(async move {
                let (mut batches, mut items) = (0u64, 0u64);
                while let Some(r) = d.run_once(&format!("bench{i}")).await? {
                    match r {
                        BatchReport::Done { messages, .. } => {
                            batches += 1;
                            items += messages as u64;
                        }
                        BatchReport::Summarized { .. } => {}
                        other => anyhow::bail!("batch did not complete: {other:?}"),
                    }
                }
                Ok((batches, items))
            })
        })
        .collect();
    let (mut batches, mut items) = (0, 0);
    for w in workers {
        let (b, i) = w.await??;
        batches += b;
        items += i;
    }
    let elapsed = started.elapsed();
    let conclusions: i64 = store
        .db()
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT count(*) AS n FROM conclusions",
        ))
        .await?
        .context("a count")?
        .try_get("", "n")?;
    println!(
        "deriver ({} workers, embedder {}): {items} queued messages in {batches} batches \
         ({:.1} per batch), {} LLM calls, {conclusions} conclusions, in {:.2} s: \
         {:.0} messages/s, {:.2} ms per message, {:.1} ms per batch",
        args.workers,
        args.embedder,
        items as f64 / batches.max(1) as f64,
        calls.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
        items as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / items.max(1) as f64,
        elapsed.as_secs_f64() * 1e3 / batches.max(1) as f64,
    );
    Ok(())
}
