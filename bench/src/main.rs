//! honcho-bench: every workload through the real HTTP GraphQL endpoint, and the same SQL run directly
//! against PostgreSQL (the floor) in the same run. See bench/README.md.

mod admission;
mod common;
mod export;
mod mcp;
mod mixed;
mod plot;
mod rest;
mod seed;
mod sitting;
mod turns;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use honcho_graphql::embed::{Embedder, EmbedderKind};
use honcho_graphql::store::Store;
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde::Serialize;
use serde_json::{Value, json};

use common::{Stats, bar, connect, embedder, serve, stats, timed};
use seed::{Rng, SeedOptions, Workspace};

#[derive(Parser, Debug, Clone)]
#[command(about = "honcho-graphql end to end vs the SQL it runs (see bench/README.md)")]
struct Args {
    /// Messages in the big workspace (the small one has a tenth, at least 1,000).
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Conclusions for the reasoning-tree workload.
    #[arg(long, default_value_t = 100_000)]
    conclusions: usize,
    /// Distinct sentences embedded once and reused for every seeded message.
    #[arg(long, default_value_t = 2_000)]
    pool: usize,
    /// Sessions of the big workspace (workspace search spans them).
    #[arg(long, default_value_t = 50)]
    sessions: usize,
    /// Timed requests per read workload (and as many SQL replays).
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Concurrent clients for the read workloads.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Messages of the sitting (workload 8): one session from empty, as in the side-by-side
    /// comparison with Honcho. Workload 9's mixed load reads the same session.
    #[arg(long, default_value_t = 10_000)]
    sitting_messages: usize,
    /// Chat turns of workload 13 (sittings of 20-30 turns, one `createMessages` each).
    #[arg(long, default_value_t = 1_000)]
    chat_turns: usize,
    /// Requests per concurrency level of the mixed load (workload 9).
    #[arg(long, default_value_t = 3_000)]
    mixed_requests: usize,
    /// Small sizes for a smoke run: 5,000 messages, 5,000 conclusions, 300 pool, 60 requests,
    /// a sitting of 1,000 messages and 300 mixed requests per level.
    #[arg(long)]
    quick: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print the statements of each read workload's first request (first 160 characters each).
    #[arg(long)]
    show_sql: bool,
    /// Keep the benchmark database instead of dropping it.
    #[arg(long)]
    keep: bool,
    /// Run only these workloads (numbers, e.g. `--only 5,2`); for profiling one workload. The
    /// random choices of the others are skipped, so the requests differ from a full run's.
    #[arg(long, value_delimiter = ',')]
    only: Vec<u8>,
    /// A `perf record --control fifo:PATH` control FIFO: the timed end-to-end phase of each read
    /// workload is bracketed by `enable` and `disable`, so a profile holds only the server's work
    /// (start perf with `-D -1`; see bench/README.md).
    #[arg(long)]
    perf_ctl: Option<std::path::PathBuf>,
}

impl Args {
    fn runs(&self, workload: u8) -> bool {
        self.only.is_empty() || self.only.contains(&workload)
    }

    fn perf(&self, command: &str) -> anyhow::Result<()> {
        if let Some(fifo) = &self.perf_ctl {
            std::fs::write(fifo, format!("{command}\n"))
                .with_context(|| format!("writing to perf's control FIFO {}", fifo.display()))?;
        }
        Ok(())
    }
}

/// Statements the server ran while capture is on.
#[derive(Clone, Default)]
struct Capture {
    on: Arc<AtomicBool>,
    stmts: Arc<Mutex<Vec<Statement>>>,
}

impl Capture {
    fn start(&self) {
        self.stmts.lock().unwrap().clear();
        self.on.store(true, Ordering::SeqCst);
    }
    fn stop(&self) -> Vec<Statement> {
        self.on.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.stmts.lock().unwrap())
    }
}

#[derive(Serialize, Clone, Debug)]
struct ReadResult {
    workload: String,
    scale: String,
    clients: usize,
    statements_min: usize,
    statements_max: usize,
    e2e: Stats,
    sql: Stats,
    ratio_p50: f64,
    ratio_p95: f64,
}

#[derive(Serialize, Clone, Debug)]
struct ThroughputResult {
    workload: String,
    detail: String,
    messages: usize,
    seconds: f64,
    messages_per_s: f64,
}

struct Bench {
    http: reqwest::Client,
    url: String,
    url_plain: String,
    capture: Capture,
    floor: DatabaseConnection,
    args: Args,
}

/// One GraphQL request: query and variables.
#[derive(Clone)]
struct Req {
    query: &'static str,
    vars: Value,
}

impl Bench {
    async fn post(&self, url: &str, req: &Req) -> anyhow::Result<Value> {
        common::graphql(&self.http, url, req.query, &req.vars).await
    }

    /// Replays one request's statements on the floor connection, in a transaction when the server
    /// ran them in one (it did when they contain `SET LOCAL`).
    async fn replay(floor: &DatabaseConnection, stmts: &[Statement]) -> anyhow::Result<()> {
        let txn = stmts
            .iter()
            .any(|s| s.sql.trim_start().starts_with("SET LOCAL"));
        if txn {
            floor.execute_unprepared("BEGIN").await?;
        }
        for s in stmts {
            floor.query_all_raw(s.clone()).await?;
        }
        if txn {
            floor.execute_unprepared("COMMIT").await?;
        }
        Ok(())
    }

    /// Captures each request's SQL (one at a time), then times `requests` requests end to end with
    /// `clients` concurrent clients, then replays the captured SQL with as many concurrent clients.
    async fn read(
        &self,
        workload: &str,
        scale: &str,
        reqs: Vec<Req>,
    ) -> anyhow::Result<ReadResult> {
        self.read_at(&self.url, workload, scale, reqs).await
    }

    /// [`Bench::read`] against the server at `url`.
    async fn read_at(
        &self,
        url: &str,
        workload: &str,
        scale: &str,
        reqs: Vec<Req>,
    ) -> anyhow::Result<ReadResult> {
        self.read_with(url, workload, scale, reqs, self.args.clients)
            .await
    }

    /// [`Bench::read_at`] with `clients` concurrent clients.
    async fn read_with(
        &self,
        url: &str,
        workload: &str,
        scale: &str,
        reqs: Vec<Req>,
        clients: usize,
    ) -> anyhow::Result<ReadResult> {
        let mut captured = Vec::with_capacity(reqs.len());
        for r in &reqs {
            self.capture.start();
            let res = self.post(url, r).await;
            let stmts = self.capture.stop();
            res.with_context(|| format!("{workload}: {}", r.vars))?;
            captured.push(stmts);
        }
        let counts: Vec<usize> = captured.iter().map(Vec::len).collect();
        if self.args.show_sql {
            eprintln!("-- {workload} {scale}: {} statements", counts[0]);
            for st in &captured[0] {
                let sql: String = st.sql.split_whitespace().collect::<Vec<_>>().join(" ");
                eprintln!("   {}", sql.chars().take(160).collect::<String>());
            }
        }
        let total = self.args.requests;
        let label = format!("{workload} {scale}");

        self.args.perf("enable")?;
        let (http, url, reqs) = (self.http.clone(), url.to_owned(), Arc::new(reqs));
        let e2e = timed(clients, total, &format!("{label} http"), move |i| {
            let (http, url, reqs) = (http.clone(), url.clone(), reqs.clone());
            async move {
                let r = &reqs[i % reqs.len()];
                let resp = http
                    .post(&url)
                    .json(&json!({"query": r.query, "variables": r.vars}))
                    .send()
                    .await?
                    .error_for_status()?
                    .bytes()
                    .await?;
                anyhow::ensure!(!resp.is_empty());
                Ok(())
            }
        })
        .await?;
        self.args.perf("disable")?;

        let (floor, captured) = (self.floor.clone(), Arc::new(captured));
        let sql = timed(clients, total, &format!("{label} sql"), move |i| {
            let (floor, captured) = (floor.clone(), captured.clone());
            async move { Bench::replay(&floor, &captured[i % captured.len()]).await }
        })
        .await?;
        let (e2e, sql) = (stats(e2e), stats(sql));
        Ok(ReadResult {
            workload: workload.to_owned(),
            scale: scale.to_owned(),
            clients,
            statements_min: counts.iter().copied().min().unwrap_or(0),
            statements_max: counts.iter().copied().max().unwrap_or(0),
            ratio_p50: e2e.p50_ms / sql.p50_ms.max(1e-9),
            ratio_p95: e2e.p95_ms / sql.p95_ms.max(1e-9),
            e2e,
            sql,
        })
    }
}

const Q_CONTEXT: &str = "query($w: ID!, $s: ID!, $f: JSON) { workspace(id: $w) { session(id: $s) { \
  messages(filters: $f, first: 100) { nodes { id content seqInSession peer { id } session { id } \
  context(before: 2, after: 2) { id content seqInSession } } } } } }";

const Q_SLICE: &str = "query($w: ID!, $s: ID!, $f: JSON) { workspace(id: $w) { session(id: $s) { \
  messages(filters: $f, first: 50) { nodes { id content seqInSession peerId createdAt } } } } }";

const Q_SESSION_SEARCH: &str = "query($w: ID!, $s: ID!, $q: String!, $ic: Boolean!) { workspace(id: $w) { \
  session(id: $s) { search(query: $q, limit: 10, includeContext: $ic, contextWindow: 2) { \
  ... on MessageHits { results { id content seqInSession } } \
  ... on SnippetHits { results { id content seqInSession } snippets { sessionId matched { id } context { id content seqInSession } } } } } } }";

const Q_WS_SEARCH: &str = "query($w: ID!, $q: String!) { workspace(id: $w) { \
  search(query: $q, limit: 50, includeContext: true, contextWindow: 2) { \
  ... on SnippetHits { results { id content sessionId } snippets { sessionId matched { id } context { id content seqInSession } } } } } }";

const Q_TREE: &str = "query($w: ID!, $c: ID!) { workspace(id: $w) { conclusion(id: $c) { \
  reasoningTree(direction: SOURCES, maxDepth: 10, maxNodes: 5000) { nodes { id content level } edges { from to } truncated } } } }";

const M_CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
  createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id seqInSession } }";

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main: no other thread exists yet.
    let rt = unsafe { honcho_graphql::runtime() }?;
    // Workload 14's exporting child (this binary again): its memory is the export's alone.
    if let Ok(workspace) = std::env::var(export::CHILD) {
        return rt.block_on(export::child(&workspace));
    }
    rt.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.quick {
        args.messages = args.messages.min(5_000);
        args.conclusions = args.conclusions.min(5_000);
        args.pool = args.pool.min(300);
        args.requests = args.requests.min(60);
        args.sitting_messages = args.sitting_messages.min(1_000);
        args.mixed_requests = args.mixed_requests.min(300);
        args.chat_turns = args.chat_turns.min(200);
    }
    // (11) The admission checks' own cost: CPU only, so it needs no database.
    if args.runs(11) {
        let results = admission::run()?;
        println!("\n{}", admission::table(&results));
        if args.only == [11] {
            return Ok(());
        }
    }
    let keep = args.keep;
    common::with_database(
        "bench",
        keep,
        |db_url| async move { run(&args, &db_url).await },
    )
    .await
}

async fn run(args: &Args, db_url: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let minilm = embedder(EmbedderKind::MiniLm)?.context("MiniLM is an embedder")?;
    migration::set_embedding_dims(minilm.dims() as u32);
    let mut rng = Rng::new(args.seed);
    let seeded = seed_all(args, db_url, &minilm, &mut rng).await?;
    let took = started.elapsed();
    eprintln!("seeded in {:.0}s", took.as_secs_f64());
    let b = start(args, db_url, &minilm).await?;

    // The workloads in this order, each drawing its random choices from `rng` in turn.
    let mut reads = message_reads(&b, &mut rng, &seeded.big).await?;
    reads.extend(session_searches(&b, &mut rng, &seeded).await?);
    let query_embedding = query_embedding_cost(&minilm, &mut rng).await?;
    reads.extend(deep_reads(&b, &mut rng, &seeded).await?);
    let mut throughput = writes(&b, &mut rng, &seeded.big, &minilm).await?;
    let mut extra = sitting_and_mixed(&b, &mut rng, db_url, &mut reads, &mut throughput).await?;
    if args.runs(13) {
        let (turns, tp) = turns::run(&b, &mut rng, &minilm, args.chat_turns).await?;
        extra.turns = turns;
        throughput.extend(tp);
    }
    if args.runs(10) {
        rest::run(&b.http, &b.url, args.requests / 3).await?;
    }
    if args.runs(12) {
        mcp::run(&b.http, &b.url_plain, args.requests).await?;
    }
    // Last: its import adds a copy of the big workspace to the database.
    if args.runs(14) {
        let (tp, _) = export::run(db_url, &minilm, &["small", "big"]).await?;
        throughput.extend(tp);
    }

    let total = started.elapsed();
    report(
        &reads,
        &throughput,
        &query_embedding,
        &extra,
        took,
        total,
        args,
    )?;
    Ok(())
}

/// The seeded workspaces, and the conclusions of the big one.
struct Seeded {
    small: Workspace,
    big: Workspace,
    conclusions: Vec<String>,
}

/// Migrates and seeds: the sentence pool, a small and a big workspace, conclusions; indexes that
/// would slow the seeding are built after it.
async fn seed_all(
    args: &Args,
    db_url: &str,
    minilm: &Arc<dyn Embedder>,
    rng: &mut Rng,
) -> anyhow::Result<Seeded> {
    let seed_db = connect(db_url, 4).await?;
    Migrator::up(&seed_db, None).await.context("migrating")?;
    seed::pool(&seed_db, minilm, rng, args.pool).await?;
    let deferred = seed::drop_deferred_indexes(&seed_db).await?;
    let opts = SeedOptions {
        pool: args.pool,
        peers: 8,
    };
    let small_n = (args.messages / 10).max(1_000);
    let small_sessions = 10;
    let small = seed::workspace(
        &seed_db,
        rng,
        "small",
        small_sessions,
        small_n / small_sessions,
        &opts,
    )
    .await?;
    let big = seed::workspace(
        &seed_db,
        rng,
        "big",
        args.sessions,
        args.messages / args.sessions,
        &opts,
    )
    .await?;
    let conclusions = seed::conclusions(&seed_db, rng, &big, args.conclusions).await?;
    seed::build_deferred_indexes(&seed_db, &deferred).await?;
    Ok(Seeded {
        small,
        big,
        conclusions,
    })
}

/// Two servers on the seeded database (with MiniLM, and without an embedder), their statements
/// captured through the metric callback, and a connection of its own for the SQL floor.
async fn start(args: &Args, db_url: &str, minilm: &Arc<dyn Embedder>) -> anyhow::Result<Bench> {
    let capture = Capture::default();
    let mut conn = connect(db_url, 8).await?;
    {
        let capture = capture.clone();
        conn.set_metric_callback(move |info| {
            if capture.on.load(Ordering::Relaxed) {
                capture.stmts.lock().unwrap().push(info.statement.clone());
            }
        });
    }
    let store = Store::new(conn.clone()).with_embedder(Some(minilm.clone()));
    let url = serve(store).await?;
    let url_plain = serve(Store::new(conn.clone())).await?;
    let floor = connect(db_url, 8).await?;
    Ok(Bench {
        http: honcho_graphql::outbound::client(),
        url,
        url_plain,
        capture,
        floor,
        args: args.clone(),
    })
}

/// How a workspace's size is labelled in the tables.
fn scale(ws: &Workspace) -> String {
    format!(
        "{}k msgs",
        ws.sessions.len() * ws.messages_per_session / 1000
    )
}

/// Workloads 5 (100 messages with peer, session and context ±2) and 4 (50-message slices by
/// seqInSession).
async fn message_reads(
    b: &Bench,
    rng: &mut Rng,
    big: &Workspace,
) -> anyhow::Result<Vec<ReadResult>> {
    let mut reads = Vec::new();
    if b.args.runs(5) {
        let reqs = slices(rng, big, 100, |ws, s, lo, _| Req {
            query: Q_CONTEXT,
            vars: json!({"w": ws, "s": s, "f": {"seqInSession": {"gte": lo}}}),
        });
        reads.push(
            b.read("5 100 msgs+peer+session+context", &scale(big), reqs)
                .await?,
        );
    }
    if b.args.runs(4) {
        let reqs = slices(rng, big, 50, |ws, s, lo, hi| Req {
            query: Q_SLICE,
            vars: json!({"w": ws, "s": s, "f": {"seqInSession": {"gte": lo, "lte": hi}}}),
        });
        reads.push(b.read("4 seqInSession 50-slice", &scale(big), reqs).await?);
    }
    Ok(reads)
}

/// Workload 2: session search, 10k and 100k, with and without context; then the same at 100k
/// without an embedder (HONCHO_EMBEDDER=none): full-text search alone, so the floor is the same
/// work as the request, with no query embedding outside it.
async fn session_searches(
    b: &Bench,
    rng: &mut Rng,
    seeded: &Seeded,
) -> anyhow::Result<Vec<ReadResult>> {
    let mut reads = Vec::new();
    if !b.args.runs(2) {
        return Ok(reads);
    }
    for (ws, url, variant) in [
        (&seeded.small, &b.url, ""),
        (&seeded.big, &b.url, ""),
        (&seeded.big, &b.url_plain, ", no embedder"),
    ] {
        for ic in [false, true] {
            let reqs: Vec<Req> = (0..20)
                .map(|_| Req {
                    query: Q_SESSION_SEARCH,
                    vars: json!({"w": ws.name, "s": rng.pick(&ws.sessions), "q": seed::query(rng), "ic": ic}),
                })
                .collect();
            let context = if ic { " +context(2)" } else { "" };
            let name = format!("2 session search{context}{variant}");
            reads.push(b.read_at(url, &name, &scale(ws), reqs).await?);
        }
    }
    Ok(reads)
}

/// What a search request spends embedding its query, with no database at all.
async fn query_embedding_cost(minilm: &Arc<dyn Embedder>, rng: &mut Rng) -> anyhow::Result<Stats> {
    let mut embeds = Vec::new();
    for _ in 0..50 {
        let q = vec![seed::query(rng)];
        let t = Instant::now();
        minilm.embed(&q).await?;
        embeds.push(t.elapsed());
    }
    Ok(stats(embeds))
}

/// Workloads 3 (workspace search with context across the sessions) and 6 (reasoning tree,
/// depth 10).
async fn deep_reads(b: &Bench, rng: &mut Rng, seeded: &Seeded) -> anyhow::Result<Vec<ReadResult>> {
    let (big, conclusions) = (&seeded.big, &seeded.conclusions);
    let mut reads = Vec::new();
    if b.args.runs(3) {
        let reqs: Vec<Req> = (0..20)
            .map(|_| Req {
                query: Q_WS_SEARCH,
                vars: json!({"w": big.name, "q": seed::query(rng)}),
            })
            .collect();
        let name = format!(
            "3 workspace search +context, {} sessions",
            big.sessions.len()
        );
        reads.push(b.read(&name, &scale(big), reqs).await?);
    }
    if b.args.runs(6) {
        let reqs: Vec<Req> = (0..20)
            .map(|_| {
                let i = rng.range(conclusions.len() / 2, conclusions.len() - 1);
                Req {
                    query: Q_TREE,
                    vars: json!({"w": big.name, "c": conclusions[i]}),
                }
            })
            .collect();
        let scale = format!("{}k concl", conclusions.len() / 1000);
        reads.push(b.read("6 reasoningTree depth 10", &scale, reqs).await?);
    }
    Ok(reads)
}

/// Workloads 7 (64 concurrent writers into one session vs one writer, without an embedder: this
/// measures the seq assignment, not MiniLM) and 1 (ingest batches of 100, with MiniLM and
/// without; the embedder alone on the same texts).
async fn writes(
    b: &Bench,
    rng: &mut Rng,
    big: &Workspace,
    minilm: &Arc<dyn Embedder>,
) -> anyhow::Result<Vec<ThroughputResult>> {
    let mut throughput = Vec::new();
    if b.args.runs(7) {
        let per_writer = if b.args.quick { 4 } else { 15 };
        throughput.push(writers(b, big, rng, 1, 64 * per_writer, "w1").await?);
        throughput.push(writers(b, big, rng, 64, per_writer, "w64").await?);
    }
    if b.args.runs(1) {
        let batches = if b.args.quick { 2 } else { 10 };
        throughput.extend(ingest(b, big, rng, minilm, batches).await?);
    }
    Ok(throughput)
}

/// Workload 8, the sitting's shape (one session from empty, batch times, single-client reads),
/// and 9, the mixed load over it at 8/64/256 clients.
async fn sitting_and_mixed(
    b: &Bench,
    rng: &mut Rng,
    db_url: &str,
    reads: &mut Vec<ReadResult>,
    throughput: &mut Vec<ThroughputResult>,
) -> anyhow::Result<Extra> {
    let mut extra = Extra {
        curve: None,
        mixed: Vec::new(),
        turns: Vec::new(),
    };
    let args = &b.args;
    if !(args.runs(8) || args.runs(9)) {
        return Ok(extra);
    }
    let (sit, tp, curve) = sitting::ingest(b, rng, args.sitting_messages).await?;
    // As the Honcho sitting does after ingest (this cluster runs without autovacuum).
    b.floor.execute_unprepared("ANALYZE").await?;
    // And what the server's maintenance does every second (HONCHO_GIN_FLUSH_INTERVAL_MS), which
    // the in-process server here does not run: without it every full-text search reads the
    // 10,000 pending entries whole and the planner falls back to a sequential scan.
    Store::new(connect(db_url, 1).await?)
        .flush_gin_pending_lists()
        .await?;
    throughput.push(tp);
    extra.curve = Some(curve);
    if args.runs(8) {
        reads.extend(sitting::reads(b, rng, &sit).await?);
    }
    if args.runs(9) {
        // The production default pool, not the 8 connections of the other workloads' server.
        let url = serve(Store::new(connect(db_url, 20).await?)).await?;
        extra.mixed = mixed::run(b, &url, rng, args.sitting_messages, args.mixed_requests).await?;
    }
    Ok(extra)
}

/// 20 random windows of `len` messages in random sessions of `ws`.
fn slices(
    rng: &mut Rng,
    ws: &Workspace,
    len: usize,
    f: impl Fn(&str, &str, usize, usize) -> Req,
) -> Vec<Req> {
    (0..20)
        .map(|_| {
            let s = rng.pick(&ws.sessions).clone();
            let lo = rng.range(1, ws.messages_per_session.saturating_sub(len).max(1));
            f(&ws.name, &s, lo, lo + len - 1)
        })
        .collect()
}

async fn create_session(b: &Bench, ws: &Workspace, name: &str) -> anyhow::Result<()> {
    b.post(
        &b.url_plain,
        &Req {
            query: "mutation($w: ID!, $s: ID!) { getOrCreateSession(workspaceId: $w, id: $s) { id } }",
            vars: json!({"w": ws.name, "s": name}),
        },
    )
    .await?;
    Ok(())
}

async fn writers(
    b: &Bench,
    ws: &Workspace,
    rng: &mut Rng,
    writers: usize,
    per_writer: usize,
    session: &str,
) -> anyhow::Result<ThroughputResult> {
    create_session(b, ws, session).await?;
    let n = writers * per_writer;
    let texts: Vec<String> = (0..n).map(|_| seed::sentence(rng)).collect();
    let texts = Arc::new(texts);
    let pb = bar(n as u64, &format!("7 {writers} writer(s)"));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (http, url, texts, pb) = (
            b.http.clone(),
            b.url_plain.clone(),
            texts.clone(),
            pb.clone(),
        );
        let (wsn, s, peer) = (
            ws.name.clone(),
            session.to_owned(),
            ws.peers[w % ws.peers.len()].clone(),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let vars = json!({"w": wsn, "s": s,
                    "m": [{"peerId": peer, "content": texts[w * per_writer + i]}]});
                common::graphql(&http, &url, M_CREATE, &vars).await?;
                pb.inc(1);
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish();
    // Seqs are exactly 1..N.
    let row = b
        .floor
        .query_one_raw(seed::stmt(
            "SELECT count(*) AS n, count(DISTINCT seq_in_session) AS d, min(seq_in_session) AS lo, \
             max(seq_in_session) AS hi FROM messages WHERE workspace_name = $1 AND session_name = $2",
            vec![ws.name.clone().into(), session.into()],
        ))
        .await?
        .context("count")?;
    let (cnt, d, lo, hi): (i64, i64, i64, i64) = (
        row.try_get("", "n")?,
        row.try_get("", "d")?,
        row.try_get("", "lo")?,
        row.try_get("", "hi")?,
    );
    let ok = cnt == n as i64 && d == n as i64 && lo == 1 && hi == n as i64;
    if !ok {
        bail!("seqs are not 1..{n}: count {cnt}, distinct {d}, min {lo}, max {hi}");
    }
    Ok(ThroughputResult {
        workload: "7 concurrent writers, one session".into(),
        detail: format!("{writers} writer(s), 1 msg/request, seqs 1..{n} checked"),
        messages: n,
        seconds: secs,
        messages_per_s: n as f64 / secs,
    })
}

async fn ingest(
    b: &Bench,
    ws: &Workspace,
    rng: &mut Rng,
    minilm: &Arc<dyn Embedder>,
    batches: usize,
) -> anyhow::Result<Vec<ThroughputResult>> {
    let texts: Vec<String> = (0..batches * 100).map(|_| seed::sentence(rng)).collect();
    let n = texts.len();
    let mut out = Vec::new();

    let pb = bar(n as u64, "1 embedder alone");
    let t = Instant::now();
    for chunk in texts.chunks(100) {
        minilm.embed(chunk).await?;
        pb.inc(chunk.len() as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish();
    out.push(ThroughputResult {
        workload: "1 ingest".into(),
        detail: "MiniLM alone, batches of 100".into(),
        messages: n,
        seconds: secs,
        messages_per_s: n as f64 / secs,
    });

    for (url, label, session) in [
        (&b.url, "createMessages x100, MiniLM", "ingest-minilm"),
        (
            &b.url_plain,
            "createMessages x100, HONCHO_EMBEDDER=none",
            "ingest-none",
        ),
    ] {
        create_session(b, ws, session).await?;
        let pb = bar(n as u64, &format!("1 {label}"));
        let t = Instant::now();
        for chunk in texts.chunks(100) {
            let msgs: Vec<Value> = chunk
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"peerId": ws.peers[i % 3], "content": c}))
                .collect();
            b.post(
                url,
                &Req {
                    query: M_CREATE,
                    vars: json!({"w": ws.name, "s": session, "m": msgs}),
                },
            )
            .await?;
            pb.inc(chunk.len() as u64);
        }
        let secs = t.elapsed().as_secs_f64();
        pb.finish();
        out.push(ThroughputResult {
            workload: "1 ingest".into(),
            detail: label.into(),
            messages: n,
            seconds: secs,
            messages_per_s: n as f64 / secs,
        });
    }
    Ok(out)
}

/// The figures of workloads 8 and 9 that are neither reads nor plain throughput.
struct Extra {
    curve: Option<sitting::BatchCurve>,
    mixed: Vec<mixed::MixedResult>,
    turns: Vec<turns::TurnsResult>,
}

fn report(
    reads: &[ReadResult],
    tp: &[ThroughputResult],
    query_embedding: &Stats,
    extra: &Extra,
    seeded: Duration,
    total: Duration,
    args: &Args,
) -> anyhow::Result<()> {
    println!();
    println!(
        "| workload | scale | stmts/req | e2e p50 | e2e p95 | e2e p99 | SQL p50 | SQL p95 | SQL p99 | e2e/SQL p50 | e2e/SQL p95 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reads {
        let stmts = if r.statements_min == r.statements_max {
            r.statements_min.to_string()
        } else {
            format!("{}-{}", r.statements_min, r.statements_max)
        };
        println!(
            "| {} | {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2}x | {:.2}x |",
            r.workload,
            r.scale,
            stmts,
            r.e2e.p50_ms,
            r.e2e.p95_ms,
            r.e2e.p99_ms,
            r.sql.p50_ms,
            r.sql.p95_ms,
            r.sql.p99_ms,
            r.ratio_p50,
            r.ratio_p95
        );
    }
    println!();
    println!("| workload | detail | messages | seconds | messages/s |");
    println!("|---|---|---|---|---|");
    for t in tp {
        println!(
            "| {} | {} | {} | {:.2} | {:.0} |",
            t.workload, t.detail, t.messages, t.seconds, t.messages_per_s
        );
    }
    if let Some(c) = &extra.curve {
        println!();
        println!(
            "8 sitting: {} batches of 100; first {:.0} ms, median of the first 10 {:.0} ms, of the last 10 {:.0} ms: growth {:.2}x",
            c.batches, c.first_ms, c.first10_p50_ms, c.last10_p50_ms, c.growth
        );
    }
    for t in &extra.turns {
        println!(
            "13 chat turns, {}: {} batches, {} messages; median {:.1} msg/s per batch, batch p50 {:.0} ms, p95 {:.0} ms",
            t.what, t.batches, t.messages, t.median_msg_per_s, t.batch.p50_ms, t.batch.p95_ms
        );
    }
    if !extra.mixed.is_empty() {
        println!();
        println!(
            "| 9 mixed load (70% pages of 50, 30% workspace search +context, full text) | requests | errors | requests/s | p50 | p95 | p99 | RSS |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for m in &extra.mixed {
            println!(
                "| {} clients | {} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} MB |",
                m.clients,
                m.requests,
                m.errors,
                m.requests_per_s,
                m.latency.p50_ms,
                m.latency.p95_ms,
                m.latency.p99_ms,
                m.rss_mb
            );
        }
    }
    println!();
    println!(
        "MiniLM embedding one search query alone (no database): p50 {:.2} ms, p95 {:.2} ms",
        query_embedding.p50_ms, query_embedding.p95_ms
    );
    println!(
        "{} clients, {} requests per workload; seeded in {:.0}s, total {:.0}s",
        args.clients,
        args.requests,
        seeded.as_secs_f64(),
        total.as_secs_f64()
    );

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    let json = json!({
        "args": {"messages": args.messages, "conclusions": args.conclusions, "pool": args.pool,
                 "sessions": args.sessions, "requests": args.requests, "clients": args.clients,
                 "quick": args.quick, "seed": args.seed, "sitting_messages": args.sitting_messages,
                 "mixed_requests": args.mixed_requests, "chat_turns": args.chat_turns},
        "seed_seconds": seeded.as_secs_f64(),
        "total_seconds": total.as_secs_f64(),
        "reads": reads,
        "query_embedding": query_embedding,
        "throughput": tp,
        "sitting_batches": extra.curve,
        "mixed": extra.mixed,
        "chat_turns": extra.turns,
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    let series: Vec<plot::Series> = reads
        .iter()
        .map(|r| plot::Series {
            label: format!("{} ({})", r.workload, r.scale),
            e2e: r.e2e.sorted_ms.clone(),
            sql: r.sql.sorted_ms.clone(),
            ratio_p50: r.ratio_p50,
            ratio_p95: r.ratio_p95,
        })
        .collect();
    std::fs::write(dir.join("latency.svg"), plot::latency(&series))?;
    std::fs::write(dir.join("ratios.svg"), plot::ratios(&series))?;
    std::fs::write(
        dir.join("throughput.svg"),
        plot::throughput(
            tp.iter()
                .map(|t| {
                    // "7 concurrent writers, one session" + "64 writer(s), 1 msg/request, seqs
                    // 1..960 checked" -> "7: 64 writer(s), 1 msg/request".
                    let number = t.workload.split(' ').next().unwrap_or_default();
                    let detail = t.detail.split(", seqs").next().unwrap_or_default();
                    (format!("{number}: {detail}"), t.messages_per_s)
                })
                .collect(),
        ),
    )?;
    eprintln!(
        "wrote {}/{{results.json,latency.svg,ratios.svg,throughput.svg}}",
        dir.display()
    );
    Ok(())
}
