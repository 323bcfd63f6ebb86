//! honcho-bench-scale (`make bench-scale`): how the server's costs grow with its data. One
//! workspace grows through the sizes (10k, 100k, 1M messages by default), then 10,000 small
//! workspaces bring the server to 10M; at each size the reads, the ingest, the server's memory and
//! search recall are measured through the HTTP GraphQL endpoint. See bench/README.md ("Scale").
//!
//! - **Filler** (not timed): sessions of `--session-size` messages, inserted with SQL directly
//!   (as `make bench` seeds), the text and vector indexes dropped during the insert and rebuilt
//!   after it. A message is two turns of a pool of `--pool` turns of generated conversations
//!   (other people and facts than the planted ones) embedded once by MiniLM, its vector the
//!   normalized sum of theirs: a pool of 2,000 gives 4M distinct messages, where one turn each
//!   would repeat every vector 500 times at 1M.
//!   The database is kept (`--database`) and a run resumes what it finds: filler sessions are
//!   written whole, one transaction each, and the definitions of dropped indexes are kept in
//!   `bench_scale_state` until they are rebuilt.
//! - **Timed writes** go through the API: `--batches` batches of 100 through `createMessages`
//!   into a fresh session with the stub embedder.
//! - **Recall**: the labelled conversations of `make eval` are planted in the big workspace
//!   before any filler (through the API, MiniLM) and their questions asked of the whole workspace
//!   at every size.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "eval/corpus.rs"]
mod corpus;
#[allow(dead_code)]
mod seed;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use honcho_graphql::embed::{EmbedError, Embedder, EmbedderKind};
use honcho_graphql::store::Store;
use migration::{Migrator, MigratorTrait};
use plotters::prelude::*;
use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};
use serde::Serialize;
use serde_json::{Value, json};

use common::{Stats, bar, connect, count, embedder, serve_on, stats};
use seed::{Rng, stmt};

#[derive(Parser, Debug, Clone)]
#[command(about = "the server's costs against its size, 10k to 10M messages (see bench/README.md)")]
struct Args {
    /// The database on DATABASE_URL's server that holds the corpus; created when missing and kept,
    /// so the next run resumes it.
    #[arg(long, default_value = "bench_scale")]
    database: String,
    /// Drop the database first and build the corpus from nothing.
    #[arg(long)]
    fresh: bool,
    /// Sizes of the big workspace, in messages, in increasing order.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000, 1_000_000])]
    sizes: Vec<usize>,
    /// The last column: this many workspaces of `--tenant-messages` messages (0: none).
    #[arg(long, default_value_t = 10_000)]
    tenants: usize,
    #[arg(long, default_value_t = 1_000)]
    tenant_messages: usize,
    /// Stop at 1M messages in one workspace (no tenants).
    #[arg(long)]
    quick: bool,
    /// Messages per filler session of the big workspace (session search reads one of them).
    #[arg(long, default_value_t = 2_000)]
    session_size: usize,
    /// Turns of generated conversations embedded once by MiniLM; a filler message pairs two, no
    /// two messages the same two. 0: the smallest pool of at least 2,000 with a pair for every
    /// filler message of the run (2,000 for `--quick`, 4,693 with the 10M tenants).
    #[arg(long, default_value_t = 0)]
    pool: usize,
    /// Timed requests per read.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Timed `createMessages` batches of 100 at each size.
    #[arg(long, default_value_t = 50)]
    batches: usize,
    /// Conversations of the generated eval planted in the big workspace (16 sittings and 60
    /// questions each).
    #[arg(long, default_value_t = 3)]
    eval_conversations: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A label for the run's conditions, written with the results.
    #[arg(long, default_value = "")]
    note: String,
    #[arg(long, default_value = "bench/results/scale")]
    out: std::path::PathBuf,
    /// The three in-process servers (no embedder, stub, MiniLM) listen on this port and the two
    /// after it (0: any free ports).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The servers' narrowest HNSW scan beam (HONCHO_SEARCH_BEAM).
    #[arg(long, default_value_t = honcho_graphql::store::search::DEFAULT_SEARCH_BEAM)]
    search_beam: u16,
    /// Fill nothing and time nothing else: ask the planted questions of the corpus as it is
    /// (twice, the first to warm the caches) and print recall and latency. For comparing search
    /// settings on one corpus.
    #[arg(long)]
    search_only: bool,
    /// The results `--search-only` asks for and counts recall in (recall@N): the timed workspace
    /// searches ask for 50, the recall row for 10.
    #[arg(long, default_value_t = TOP, requires = "search_only")]
    search_limit: usize,
    /// Fill nothing: measure the corpus as it stands (the reads, a timed ingest into a session
    /// `ingest-LABEL`, recall) and print the column labelled LABEL. For comparing settings or
    /// index shapes on one corpus.
    #[arg(long, value_name = "LABEL")]
    as_is: Option<String>,
    /// The workspace `--as-is` measures: the big one, or a tenant's (`t00000`..), which is
    /// measured without recall (the eval is planted in the big workspace only).
    #[arg(long, default_value = WS, requires = "as_is")]
    as_is_workspace: String,
}

const WS: &str = "big";
const PEERS: usize = 8;
const BATCH: usize = 100;
const EVAL_SEED: u64 = 7;
const TOP: usize = 10;

const M_CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
  createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id seqInSession } }";
const Q_SESSION_SEARCH: &str = "query($w: ID!, $s: ID!, $q: String!) { workspace(id: $w) { \
  session(id: $s) { search(query: $q, limit: 10) { ... on MessageHits { results { id content } } } } } }";
const Q_WS_SEARCH: &str = "query($w: ID!, $q: String!, $limit: Int!) { workspace(id: $w) { \
  search(query: $q, limit: $limit, includeContext: true, contextWindow: 2) { \
  ... on SnippetHits { results { id } snippets { context { id } } } } } }";
const Q_PAGE: &str = "query($w: ID!, $s: ID!, $f: JSON) { workspace(id: $w) { session(id: $s) { \
  messages(first: 50, filters: $f) { nodes { id content peerId createdAt } } } } }";
const Q_GET: &str = "query($w: ID!, $id: ID!) { workspace(id: $w) { message(id: $id) { \
  id content peerId createdAt } } }";
const Q_TREE: &str = "query($w: ID!, $c: ID!) { workspace(id: $w) { conclusion(id: $c) { \
  reasoningTree(direction: SOURCES, maxDepth: 5, maxNodes: 5000) { nodes { id } edges { from to } } } } }";

/// A 384-dimension embedder with no model: each text hashes to a fixed unit vector. It stands
/// for an embedder whose cost is not what is measured.
struct Stub;

#[async_trait::async_trait]
impl Embedder for Stub {
    fn dims(&self) -> usize {
        384
    }
    fn model_id(&self) -> &str {
        "bench:stub"
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut h = 0xcbf2_9ce4_8422_2325u64;
                for b in t.bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
                }
                let mut rng = Rng::new(h);
                let v: Vec<f32> = (0..384)
                    .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                    .collect();
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.into_iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

/// One column of the table: every figure at one size.
#[derive(Serialize, Clone, Debug, Default)]
struct Column {
    label: String,
    /// Messages of the workspace read (the big one, or one tenant's).
    workspace_messages: i64,
    /// Messages on the server.
    server_messages: i64,
    workspaces: i64,
    session_messages: i64,
    session_search_none: Stats,
    session_search_stub: Stats,
    session_search_minilm: Stats,
    workspace_search: Option<Stats>,
    page50: Stats,
    get: Stats,
    tree_depth5: Stats,
    tree_nodes_p50: f64,
    ingest_msgs_per_s: f64,
    /// Median batch time of the first and the last 10% of the timed batches.
    ingest_first10_ms: f64,
    ingest_last10_ms: f64,
    /// The benchmark process (server and its clients) after the reads.
    rss_mib: f64,
    peak_rss_mib: f64,
    recall_at10: Option<f64>,
    recall_context: Option<f64>,
    /// Seconds the filler took to write and index at this size (0 when resumed complete).
    fill_seconds: f64,
    index_seconds: f64,
}

struct Servers {
    http: reqwest::Client,
    none: String,
    stub: String,
    minilm: String,
}

impl Servers {
    async fn post(&self, url: &str, query: &str, vars: Value) -> anyhow::Result<Value> {
        common::graphql_data(&self.http, url, query, vars).await
    }

    /// `reqs` one at a time against `url`, after a few untimed warm-up calls.
    async fn time(
        &self,
        url: &str,
        label: &str,
        query: &str,
        reqs: &[Value],
        mut check: impl FnMut(&Value),
    ) -> anyhow::Result<Stats> {
        for v in reqs.iter().take(5) {
            self.post(url, query, v.clone()).await?;
        }
        let pb = bar(reqs.len() as u64, label);
        let mut d = Vec::with_capacity(reqs.len());
        for v in reqs {
            let t = Instant::now();
            let r = self.post(url, query, v.clone()).await?;
            d.push(t.elapsed());
            check(&r);
            pb.inc(1);
        }
        pb.finish();
        Ok(stats(d))
    }
}

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main: no other thread exists yet.
    unsafe { honcho_graphql::runtime() }?.block_on(async {
        let mut args = Args::parse();
        if args.quick {
            args.sizes.retain(|&s| s <= 1_000_000);
            args.tenants = 0;
        }
        let filler = big_span(&args) + (args.tenants * args.tenant_messages) as u64;
        if args.pool == 0 {
            args.pool = pool_for(filler);
        }
        let pairs = PoolPairs::new(args.pool).count;
        anyhow::ensure!(
            filler <= pairs,
            "--pool {} gives {pairs} pairs for up to {filler} filler messages: raise it",
            args.pool
        );
        run(&args).await
    })
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let db_url = common::named_database(&args.database, args.fresh).await?;
    let minilm = embedder(EmbedderKind::MiniLm)?.context("MiniLM is an embedder")?;
    migration::set_embedding_dims(minilm.dims() as u32);
    let db = connect(&db_url, 4).await?;
    Migrator::up(&db, None).await.context("migrating")?;
    db.execute_unprepared(
        "CREATE TABLE IF NOT EXISTS bench_scale_state (key TEXT PRIMARY KEY, value TEXT NOT NULL); \
         CREATE TABLE IF NOT EXISTS bench_scale_eval (conversation INT, session INT, turn INT, \
           public_id TEXT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (conversation, session, turn))",
    )
    .await?;
    // An interrupted fill left indexes dropped: build them before anything reads.
    rebuild_indexes(&db).await?;
    // Only a fill reads the pool: a run that fills nothing leaves it as the corpus was built
    // (without `--quick` the default pool is the 10M run's, and building it embeds every turn).
    if !args.search_only && args.as_is.is_none() {
        ensure_pool(&db, &minilm, args).await?;
    }

    let stub: Arc<dyn Embedder> = Arc::new(Stub);
    let port = |i: u16| if args.port == 0 { 0 } else { args.port + i };
    let store = async || -> anyhow::Result<Store> {
        Ok(Store::new(connect(&db_url, 8).await?).with_search_beam(args.search_beam))
    };
    let servers = Servers {
        http: honcho_graphql::outbound::client(),
        none: serve_on(store().await?, port(0)).await?,
        stub: serve_on(store().await?.with_embedder(Some(stub)), port(1)).await?,
        minilm: serve_on(store().await?.with_embedder(Some(minilm.clone())), port(2)).await?,
    };
    let eval = plant_eval(&db, &servers, args).await?;
    if args.search_only {
        return search_only(&db, &servers, &eval, args).await;
    }

    let mut columns: Vec<Column> = Vec::new();
    let mut rng = Rng::new(args.seed);
    if let Some(label) = &args.as_is {
        db.execute_unprepared("ANALYZE").await?;
        let mut col = Column {
            label: label.clone(),
            ..Column::default()
        };
        let session = format!("ingest-{label}");
        let workspace = args.as_is_workspace.as_str();
        measure(&db, &servers, args, &mut rng, workspace, &session, &mut col).await?;
        if workspace == WS {
            (col.recall_at10, col.recall_context) = recall(&servers, &eval, TOP)
                .await
                .map(|(r, c, _)| (Some(r), Some(c)))?;
        }
        print_column(&col);
        return Ok(());
    }
    for &size in &args.sizes {
        let mut col = Column {
            label: human(size),
            ..Column::default()
        };
        let reserved = (args.batches * BATCH) as i64;
        let (fill_s, index_s) =
            fill_big(&db, args, &mut rng, size as i64 - reserved, &mut col).await?;
        col.fill_seconds = fill_s;
        col.index_seconds = index_s;
        measure(
            &db,
            &servers,
            args,
            &mut rng,
            WS,
            &format!("ingest-{}", col.label),
            &mut col,
        )
        .await?;
        let (r10, rc, _) = recall(&servers, &eval, TOP).await?;
        col.recall_at10 = Some(r10);
        col.recall_context = Some(rc);
        print_column(&col);
        columns.push(col);
        write_results(args, &columns, started.elapsed())?;
    }
    if args.tenants > 0 {
        let mut col = Column {
            label: format!(
                "{} over {} workspaces",
                human(args.tenants * args.tenant_messages),
                human(args.tenants)
            ),
            ..Column::default()
        };
        let (fill_s, index_s) = fill_tenants(&db, args, &mut rng).await?;
        col.fill_seconds = fill_s;
        col.index_seconds = index_s;
        let tenant = format!("t{:05}", args.tenants / 2);
        measure(
            &db,
            &servers,
            args,
            &mut rng,
            &tenant,
            "ingest-tenants",
            &mut col,
        )
        .await?;
        print_column(&col);
        columns.push(col);
    }
    write_results(args, &columns, started.elapsed())?;
    Ok(())
}

fn human(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// What `bench_pool` holds, in `bench_scale_state`: a pool of another kind (the sentences of
/// earlier runs) is built again.
const POOL_KIND: &str = "distinct conversation turns";
/// The generated conversations the filler's turns come from: not the planted ones.
const FILLER_SEED: u64 = 1_000_003;

/// The filler's pool, built once: `--pool` turns of generated conversations (as `make eval`
/// writes them, other people and facts than the planted ones), each embedded by MiniLM as the
/// server embeds a message, with the turn before it and the speakers. Filler drawn from the same
/// kind of text as the planted conversations makes them needles among their own kind; a pool of
/// random sentences made them an island of their own, which a graph index reaches or misses as
/// a whole depending on how its build went.
async fn ensure_pool(
    db: &DatabaseConnection,
    minilm: &Arc<dyn Embedder>,
    args: &Args,
) -> anyhow::Result<()> {
    let have = count(
        db,
        "SELECT count(*) FROM pg_tables WHERE tablename = 'bench_pool'",
        vec![],
    )
    .await?;
    let kind = count(
        db,
        "SELECT count(*) FROM bench_scale_state WHERE key = 'pool' AND value = $1",
        vec![POOL_KIND.into()],
    )
    .await?;
    if have == 1
        && kind == 1
        && count(db, "SELECT count(*) FROM bench_pool", vec![]).await? == args.pool as i64
    {
        return Ok(());
    }
    db.execute_unprepared(
        "DROP TABLE IF EXISTS bench_pool; \
         CREATE TABLE bench_pool (idx INT PRIMARY KEY, content TEXT NOT NULL, \
           token_count INT NOT NULL, embedding vector(384) NOT NULL)",
    )
    .await?;
    seed::fill_pool(db, minilm, &filler_turns(args.pool)).await?;
    db.execute_raw(stmt(
        "INSERT INTO bench_scale_state (key, value) VALUES ('pool', $1) \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        vec![POOL_KIND.into()],
    ))
    .await?;
    Ok(())
}

/// `n` turns of generated conversations as (content, the text the server would embed).
fn filler_turns(n: usize) -> Vec<(String, String)> {
    // The generator repeats its small talk, and a turn whose embedded text is already in the
    // pool would give the filler messages with equal vectors: kept once.
    let shape = corpus::Shape {
        conversations: n / 100 + 1,
        sessions: 16,
        questions: 60,
        inferences: 0,
        second_hand: 0,
    };
    let (conversations, _) = corpus::generate(FILLER_SEED, &shape);
    let mut out = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    for c in &conversations {
        for session in &c.sessions {
            let mut before: Option<(String, &str)> = None;
            for turn in &session.turns {
                let peer = c.peer_id(turn.speaker);
                let context: Vec<(&str, &str)> =
                    before.iter().map(|(p, t)| (p.as_str(), *t)).collect();
                let text = honcho_graphql::embed::message_text(&context, &peer, &turn.text);
                if !text.is_empty() && seen.insert(text.clone()) {
                    out.push((turn.text.clone(), text));
                }
                before = Some((peer, &turn.text));
            }
        }
    }
    assert!(
        out.len() >= n,
        "{} generated turns for a pool of {n}",
        out.len()
    );
    out.truncate(n);
    out
}

/// Drops the indexes a bulk insert is slow with, keeping their definitions until they are built.
async fn drop_indexes(db: &DatabaseConnection) -> anyhow::Result<()> {
    let kept = count(
        db,
        "SELECT count(*) FROM bench_scale_state WHERE key LIKE 'index:%'",
        vec![],
    )
    .await?;
    if kept > 0 {
        return Ok(());
    }
    let txn = db.begin().await?;
    for name in [
        "ix_messages_embedding_hnsw",
        "ix_messages_content_trgm",
        "ix_messages_content_tsv",
    ] {
        let row = txn
            .query_one_raw(stmt(
                "SELECT indexdef FROM pg_indexes WHERE indexname = $1",
                vec![name.into()],
            ))
            .await?
            .with_context(|| format!("index {name} does not exist"))?;
        let def: String = row.try_get("", "indexdef")?;
        txn.execute_raw(stmt(
            "INSERT INTO bench_scale_state (key, value) VALUES ($1, $2)",
            vec![format!("index:{name}").into(), def.into()],
        ))
        .await?;
        txn.execute_unprepared(&format!("DROP INDEX {name}"))
            .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Builds every index [`drop_indexes`] dropped, then analyzes; returns the seconds it took.
async fn rebuild_indexes(db: &DatabaseConnection) -> anyhow::Result<f64> {
    let rows = db
        .query_all_raw(stmt(
            "SELECT key, value FROM bench_scale_state WHERE key LIKE 'index:%' ORDER BY key",
            vec![],
        ))
        .await?;
    if rows.is_empty() {
        return Ok(0.0);
    }
    let t = Instant::now();
    let pb = bar(rows.len() as u64, "indexes");
    for r in rows {
        let key: String = r.try_get("", "key")?;
        let def: String = r.try_get("", "value")?;
        // One connection, so the session settings hold for the build. pgvector builds an HNSW
        // graph in maintenance_work_mem and goes on on disk once it outgrows it, ten times slower:
        // the bit graph filled 4 GB at 7.2M of the 11M messages of the full run (about 600 bytes
        // an element), so the budget leaves it room (the VM has 24 GiB).
        let txn = db.begin().await?;
        txn.execute_unprepared("SET LOCAL maintenance_work_mem = '8GB'")
            .await?;
        txn.execute_unprepared(&def).await?;
        txn.execute_raw(stmt(
            "DELETE FROM bench_scale_state WHERE key = $1",
            vec![key.into()],
        ))
        .await?;
        txn.commit().await?;
        pb.inc(1);
    }
    pb.finish();
    db.execute_unprepared("VACUUM ANALYZE messages").await?;
    db.execute_unprepared("ANALYZE").await?;
    Ok(t.elapsed().as_secs_f64())
}

/// A public id (21 nanoid characters, as the schema checks) that depends on `key` alone, so a
/// resumed run names rows as the first one did.
fn public_id(key: &str) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    Rng::new(h).nanoid()
}

/// The workspace and its peers, once.
async fn ensure_workspace<C: ConnectionTrait>(db: &C, name: &str) -> anyhow::Result<()> {
    db.execute_raw(stmt(
        "INSERT INTO workspaces (id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        vec![public_id(&format!("workspace {name}")).into(), name.into()],
    ))
    .await?;
    for p in 0..PEERS {
        db.execute_raw(stmt(
            "INSERT INTO peers (id, name, workspace_name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            vec![
                public_id(&format!("peer {name} {p}")).into(),
                format!("peer-{p}").into(),
                name.into(),
            ],
        ))
        .await?;
    }
    Ok(())
}

/// The filler's pairs of pool turns, each message its own: the `k`-th filler message of a run
/// (its place in the big workspace's sessions, then the tenants') gets the `k`-th pair of a fixed
/// shuffle of all pairs of distinct turns. Pairs drawn at random repeat: a million draws from
/// the two million pairs of 2,000 turns gave a quarter of the messages another's exact vector,
/// and HNSW graphs lose their way among equal vectors (docs/search.md, "Vector recall at a
/// million messages").
#[derive(Clone, Copy, Debug)]
struct PoolPairs {
    pool: u64,
    /// `pool · (pool − 1) / 2`.
    count: u64,
    /// Coprime with `count`, so that `k · step mod count` visits every pair once.
    step: u64,
}

impl PoolPairs {
    fn new(pool: usize) -> Self {
        let pool = pool as u64;
        let count = pool * (pool - 1) / 2;
        let mut step = 2_654_435_761 % count;
        while gcd(step, count) != 1 {
            step += 1;
        }
        Self { pool, count, step }
    }

    /// The two pool indexes of filler message `k` (`k < count`; `run` checks the run fits).
    fn pair(&self, k: u64) -> (u64, u64) {
        assert!(
            k < self.count,
            "filler message {k} past the pool's {} pairs",
            self.count
        );
        // Pairs (i, j), i < j, numbered j(j − 1)/2 + i.
        let r = (u128::from(k) * u128::from(self.step) % u128::from(self.count)) as u64;
        let mut j = ((1.0 + (1.0 + 8.0 * r as f64).sqrt()) / 2.0) as u64;
        while j * (j - 1) / 2 > r {
            j -= 1;
        }
        while (j + 1) * j / 2 <= r {
            j += 1;
        }
        let i = r - j * (j - 1) / 2;
        debug_assert!(i < j && j < self.pool);
        (i, j)
    }
}

/// The smallest pool of at least 2,000 turns with `filler` pairs.
fn pool_for(filler: u64) -> usize {
    let mut pool = 2_000u64;
    while pool * (pool - 1) / 2 < filler {
        pool += 1;
    }
    pool as usize
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The filler messages the big workspace's sessions may number: its largest size and a session
/// more per size (the last session of a size is cut short, and the next size goes on from a new
/// one).
fn big_span(args: &Args) -> u64 {
    let largest = args.sizes.last().copied().unwrap_or(0);
    let sessions = largest.div_ceil(args.session_size) + args.sizes.len();
    (sessions * args.session_size) as u64
}

/// One filler session of `n` messages between 2-4 of the workspace's peers, in one transaction
/// (so an interrupted run leaves whole sessions only), and `conclusions` conclusions.
async fn fill_session<C: ConnectionTrait>(
    db: &C,
    rng: &mut Rng,
    workspace: &str,
    session: &str,
    n: usize,
    pairs: PoolPairs,
    first: u64,
) -> anyhow::Result<()> {
    db.execute_raw(stmt(
        "INSERT INTO sessions (id, name, workspace_name) VALUES ($1, $2, $3)",
        vec![
            public_id(&format!("session {workspace} {session}")).into(),
            session.into(),
            workspace.into(),
        ],
    ))
    .await?;
    let k = rng.range(2, 4);
    let mut members: Vec<String> = Vec::new();
    while members.len() < k {
        let p = format!("peer-{}", rng.range(0, PEERS - 1));
        if !members.contains(&p) {
            members.push(p);
        }
    }
    for m in &members {
        db.execute_raw(stmt(
            "INSERT INTO session_peers (workspace_name, session_name, peer_name) VALUES ($1, $2, $3)",
            vec![workspace.into(), session.into(), m.clone().into()],
        ))
        .await?;
    }
    let mut rows = seed::MessageRows::default();
    let mut seconds = Vec::with_capacity(n);
    let mut speaker = 0;
    let mut clock = 0i64;
    for i in 0..n {
        let id = rng.nanoid();
        seed::next_speaker(rng, &mut speaker, members.len());
        let (idx, second) = pairs.pair(first + i as u64);
        seconds.push(second as i32);
        clock += rng.range(5, 120) as i64;
        rows.push(id, &members[speaker], (i + 1) as i64, idx as i32, clock);
    }
    db.execute_raw(stmt(
        "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, \
           content, token_count, created_at, embedding) \
         SELECT u.pid, $6, $7, u.peer, u.seq, p.content || ' ' || q.content, \
           p.token_count + q.token_count, \
           timestamptz '2026-01-01 00:00:00+00' + u.at * interval '1 second', \
           l2_normalize(p.embedding + q.embedding) \
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::bigint[], $8::int[]) \
           AS u(pid, peer, seq, idx, at, idx2) \
         JOIN bench_pool p ON p.idx = u.idx JOIN bench_pool q ON q.idx = u.idx2",
        rows.values([workspace.into(), session.into(), seconds.into()]),
    ))
    .await?;
    Ok(())
}

/// `n` more conclusions of peer-0 about peer-1 in `workspace`, each after the first three citing
/// 1-3 of the 30 before it.
async fn add_conclusions<C: ConnectionTrait>(
    db: &C,
    rng: &mut Rng,
    workspace: &str,
    n: usize,
) -> anyhow::Result<()> {
    let rows = db
        .query_all_raw(stmt(
            "SELECT id FROM conclusions WHERE workspace_name = $1 ORDER BY created_at DESC, id DESC LIMIT 30",
            vec![workspace.into()],
        ))
        .await?;
    let mut recent: Vec<String> = rows
        .iter()
        .rev()
        .map(|r| r.try_get::<String>("", "id"))
        .collect::<Result<_, _>>()?;
    let before = count(
        db,
        "SELECT count(*) FROM conclusions WHERE workspace_name = $1",
        vec![workspace.into()],
    )
    .await?;
    let mut start = 0;
    while start < n {
        let m = (n - start).min(5_000);
        let mut rows = seed::ConclusionRows::default();
        for j in 0..m {
            let i = before as usize + start + j;
            let src = if recent.len() < 3 {
                String::new()
            } else {
                let k = rng.range(1, 3);
                let lo = recent.len().saturating_sub(30);
                let mut picked: Vec<String> = Vec::new();
                while picked.len() < k {
                    let c = recent[rng.range(lo, recent.len() - 1)].clone();
                    if !picked.contains(&c) {
                        picked.push(c);
                    }
                }
                picked.join(",")
            };
            let level = if src.is_empty() {
                "explicit"
            } else {
                "deductive"
            };
            let content = format!("{} (#{i})", seed::sentence(rng));
            let id = rng.nanoid();
            rows.push(id.clone(), content, level, src, i as i64);
            recent.push(id);
            if recent.len() > 60 {
                recent.drain(..30);
            }
        }
        rows.insert(db, workspace, "peer-0", "peer-1").await?;
        start += m;
    }
    Ok(())
}

/// Fills the big workspace with whole sessions until it holds about `target` messages, and its
/// conclusions to a tenth of that; returns the seconds spent writing and indexing.
async fn fill_big(
    db: &DatabaseConnection,
    args: &Args,
    rng: &mut Rng,
    target: i64,
    col: &mut Column,
) -> anyhow::Result<(f64, f64)> {
    ensure_workspace(db, WS).await?;
    let have = count(
        db,
        "SELECT count(*) FROM messages WHERE workspace_name = $1",
        vec![WS.into()],
    )
    .await?;
    let sessions = count(
        db,
        "SELECT count(*) FROM sessions WHERE workspace_name = $1 AND name LIKE 'f-%'",
        vec![WS.into()],
    )
    .await? as usize;
    let size = args.session_size as i64;
    let pairs = PoolPairs::new(args.pool);
    // Whole sessions of `size`, the last one shorter so that the workspace reaches `target`.
    let to_write = (target - have).max(0) as usize;
    let missing = to_write.div_ceil(args.session_size);
    let t = Instant::now();
    if missing > 0 {
        drop_indexes(db).await?;
        let pb = bar(
            to_write as u64,
            &format!("fill {WS} to {}", human(target.max(0) as usize)),
        );
        let mut left = to_write;
        for k in sessions..sessions + missing {
            let n = left.min(args.session_size);
            // Each session's draws from its own seed: a resumed run writes what a whole one would.
            let mut srng = Rng::new(args.seed ^ (k as u64).wrapping_mul(0x9E37_79B9));
            let txn = db.begin().await?;
            let first = (k * args.session_size) as u64;
            let session = format!("f-{k}");
            fill_session(&txn, &mut srng, WS, &session, n, pairs, first).await?;
            txn.commit().await?;
            left -= n;
            pb.inc(n as u64);
        }
        pb.finish();
    }
    let conclusions = count(
        db,
        "SELECT count(*) FROM conclusions WHERE workspace_name = $1",
        vec![WS.into()],
    )
    .await?;
    let want = (target.max(0) + (args.batches * BATCH) as i64) / 10;
    if want > conclusions {
        add_conclusions(db, rng, WS, (want - conclusions) as usize).await?;
    }
    let fill = t.elapsed().as_secs_f64();
    let index = rebuild_indexes(db).await?;
    col.session_messages = size;
    Ok((fill, index))
}

/// Tenants filled between two rounds of the server's own analysis of stale tables
/// (`Store::analyze_stale_tables`): the fill writes past the server, whose loop would otherwise
/// keep the foreign keys' lookups planned for tables of a few rows.
const TENANTS_PER_ANALYZE: usize = 500;

/// Fills `--tenants` workspaces of one session of `--tenant-messages` messages and a hundred
/// conclusions each, ten workspaces per transaction.
async fn fill_tenants(
    db: &DatabaseConnection,
    args: &Args,
    _rng: &mut Rng,
) -> anyhow::Result<(f64, f64)> {
    let have = count(
        db,
        "SELECT count(*) FROM workspaces WHERE name LIKE 't_____'",
        vec![],
    )
    .await? as usize;
    let pairs = PoolPairs::new(args.pool);
    let t = Instant::now();
    if have < args.tenants {
        drop_indexes(db).await?;
        let pb = bar((args.tenants - have) as u64, "fill tenants");
        let store = Store::new(db.clone());
        let mut i = have;
        while i < args.tenants {
            let txn = db.begin().await?;
            for w in i..(i + 10).min(args.tenants) {
                let name = format!("t{w:05}");
                ensure_workspace(&txn, &name).await?;
                let mut wrng = Rng::new(args.seed ^ (w as u64 + 1).wrapping_mul(0xA24B_AED4));
                let first = big_span(args) + (w * args.tenant_messages) as u64;
                let n = args.tenant_messages;
                fill_session(&txn, &mut wrng, &name, "s-0", n, pairs, first).await?;
                add_conclusions(&txn, &mut wrng, &name, 100).await?;
                pb.inc(1);
            }
            txn.commit().await?;
            i = (i + 10).min(args.tenants);
            if i.is_multiple_of(TENANTS_PER_ANALYZE) {
                store.analyze_stale_tables().await?;
            }
        }
        pb.finish();
    }
    let fill = t.elapsed().as_secs_f64();
    let index = rebuild_indexes(db).await?;
    Ok((fill, index))
}

/// Ingest, then every read, then memory, on `workspace`.
async fn measure(
    db: &DatabaseConnection,
    servers: &Servers,
    args: &Args,
    rng: &mut Rng,
    workspace: &str,
    ingest_session: &str,
    col: &mut Column,
) -> anyhow::Result<()> {
    // Timed writes through the API, unless a resumed run already wrote this session.
    let done = count(
        db,
        "SELECT count(*) FROM messages WHERE workspace_name = $1 AND session_name = $2",
        vec![workspace.into(), ingest_session.into()],
    )
    .await?;
    if done == 0 {
        let mut lat = Vec::with_capacity(args.batches);
        let pb = bar((args.batches * BATCH) as u64, "ingest, stub");
        let t = Instant::now();
        for b in 0..args.batches {
            let msgs: Vec<Value> = (0..BATCH)
                .map(|i| json!({"peerId": format!("peer-{}", (b + i) % 2), "content": seed::sentence(rng)}))
                .collect();
            let one = Instant::now();
            servers
                .post(
                    &servers.stub,
                    M_CREATE,
                    json!({"w": workspace, "s": ingest_session, "m": msgs}),
                )
                .await?;
            lat.push(one.elapsed());
            pb.inc(BATCH as u64);
        }
        pb.finish();
        col.ingest_msgs_per_s = (args.batches * BATCH) as f64 / t.elapsed().as_secs_f64();
        let k = (args.batches / 10).max(1);
        let ms = |d: &[Duration]| common::median(d.iter().map(|x| x.as_secs_f64() * 1e3).collect());
        col.ingest_first10_ms = ms(&lat[..k]);
        col.ingest_last10_ms = ms(&lat[lat.len() - k..]);
    }
    db.execute_unprepared("ANALYZE messages").await?;
    col.workspace_messages = count(
        db,
        "SELECT count(*) FROM messages WHERE workspace_name = $1",
        vec![workspace.into()],
    )
    .await?;
    col.server_messages = count(db, "SELECT count(*) FROM messages", vec![]).await?;
    col.workspaces = count(db, "SELECT count(*) FROM workspaces", vec![]).await?;

    // The session read: the workspace's largest filler session (the newest of those), so that
    // every size reads a session of `--session-size` once the workspace holds one.
    let row = db
        .query_one_raw(stmt(
            "SELECT session_name, count(*) AS n FROM messages WHERE workspace_name = $1 \
               AND session_name NOT LIKE 'ingest-%' AND session_name NOT LIKE 'eval-%' \
             GROUP BY session_name ORDER BY count(*) DESC, max(id) DESC LIMIT 1",
            vec![workspace.into()],
        ))
        .await?
        .context("the workspace has a filler session")?;
    let session: String = row.try_get("", "session_name")?;
    col.session_messages = row.try_get::<i64>("", "n")?;
    let n = args.requests;
    let search: Vec<Value> = (0..n)
        .map(|_| json!({"w": workspace, "s": session, "q": seed::query(rng)}))
        .collect();
    col.session_search_none = servers
        .time(
            &servers.none,
            "session search, none",
            Q_SESSION_SEARCH,
            &search,
            |_| {},
        )
        .await?;
    col.session_search_stub = servers
        .time(
            &servers.stub,
            "session search, stub",
            Q_SESSION_SEARCH,
            &search,
            |_| {},
        )
        .await?;
    col.session_search_minilm = servers
        .time(
            &servers.minilm,
            "session search, MiniLM",
            Q_SESSION_SEARCH,
            &search,
            |_| {},
        )
        .await?;
    if workspace == WS {
        let ws_search: Vec<Value> = (0..n)
            .map(|_| json!({"w": workspace, "q": seed::query(rng), "limit": 50}))
            .collect();
        col.workspace_search = Some(
            servers
                .time(
                    &servers.minilm,
                    "workspace search",
                    Q_WS_SEARCH,
                    &ws_search,
                    |_| {},
                )
                .await?,
        );
    }
    let pages: Vec<Value> = (0..n)
        .map(|_| json!({"w": workspace, "s": session, "f": {"peer_id": format!("peer-{}", rng.range(0, PEERS - 1))}}))
        .collect();
    col.page50 = servers
        .time(&servers.none, "page of 50 by peer", Q_PAGE, &pages, |_| {})
        .await?;
    let ids = sample_ids(db, workspace, n, rng).await?;
    let gets: Vec<Value> = ids
        .iter()
        .map(|id| json!({"w": workspace, "id": id}))
        .collect();
    col.get = servers
        .time(&servers.none, "get one message", Q_GET, &gets, |_| {})
        .await?;
    let recent: Vec<String> = db
        .query_all_raw(stmt(
            "SELECT id FROM conclusions WHERE workspace_name = $1 ORDER BY created_at DESC LIMIT 1000",
            vec![workspace.into()],
        ))
        .await?
        .iter()
        .filter_map(|r| r.try_get::<String>("", "id").ok())
        .collect();
    anyhow::ensure!(!recent.is_empty(), "{workspace} has no conclusions");
    let trees: Vec<Value> = (0..n)
        .map(|_| json!({"w": workspace, "c": rng.pick(&recent)}))
        .collect();
    let mut nodes = Vec::new();
    col.tree_depth5 = servers
        .time(
            &servers.none,
            "reasoningTree depth 5",
            Q_TREE,
            &trees,
            |r| {
                let k = r["workspace"]["conclusion"]["reasoningTree"]["nodes"]
                    .as_array()
                    .map_or(0, Vec::len);
                nodes.push(k as f64);
            },
        )
        .await?;
    col.tree_nodes_p50 = common::median(nodes);
    let (rss, peak) = rss_mib();
    col.rss_mib = rss;
    col.peak_rss_mib = peak;
    Ok(())
}

/// `n` message ids of the workspace spread over it, from its id range.
async fn sample_ids(
    db: &DatabaseConnection,
    workspace: &str,
    n: usize,
    rng: &mut Rng,
) -> anyhow::Result<Vec<String>> {
    let row = db
        .query_one_raw(stmt(
            "SELECT min(id) AS lo, max(id) AS hi FROM messages WHERE workspace_name = $1",
            vec![workspace.into()],
        ))
        .await?
        .context("min/max")?;
    let (lo, hi): (i64, i64) = (row.try_get("", "lo")?, row.try_get("", "hi")?);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let at = lo + (rng.next_u64() % (hi - lo + 1) as u64) as i64;
        if let Some(r) = db
            .query_one_raw(stmt(
                "SELECT public_id FROM messages WHERE workspace_name = $1 AND id >= $2 ORDER BY id LIMIT 1",
                vec![workspace.into(), at.into()],
            ))
            .await?
        {
            out.push(r.try_get::<String>("", "public_id")?);
        }
    }
    Ok(out)
}

/// Resident and peak resident memory of this process (the server and its clients), in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The eval's questions and where their evidence was stored.
struct Eval {
    questions: Vec<corpus::Question>,
    /// (conversation, session, turn) → public id.
    ids: HashMap<(usize, usize, usize), String>,
    /// public id → (conversation, session, seq).
    places: HashMap<String, (usize, usize, i64)>,
}

/// Plants the eval's conversations in the big workspace through the API (MiniLM), once: each
/// sitting becomes a session `eval-<conversation>-<sitting>`.
async fn plant_eval(
    db: &DatabaseConnection,
    servers: &Servers,
    args: &Args,
) -> anyhow::Result<Eval> {
    let shape = corpus::Shape {
        conversations: args.eval_conversations,
        sessions: 16,
        questions: 60,
        inferences: 0,
        second_hand: 0,
    };
    let (conversations, questions) = corpus::generate(EVAL_SEED, &shape);
    let planted = count(db, "SELECT count(*) FROM bench_scale_eval", vec![]).await?;
    if planted == 0 {
        let total: usize = conversations
            .iter()
            .flat_map(|c| c.sessions.iter().map(|s| s.turns.len()))
            .sum();
        let pb = bar(total as u64, "plant eval, MiniLM");
        let start = chrono::DateTime::parse_from_rfc3339("2023-01-02T10:00:00Z")?.to_utc();
        for (ci, c) in conversations.iter().enumerate() {
            for (si, s) in c.sessions.iter().enumerate() {
                let day = start + chrono::Duration::days(i64::from(s.day));
                for (chunk_no, chunk) in s.turns.chunks(BATCH).enumerate() {
                    let m: Vec<Value> = chunk
                        .iter()
                        .enumerate()
                        .map(|(i, turn)| {
                            let at = day + chrono::Duration::minutes((chunk_no * BATCH + i) as i64);
                            json!({"peerId": c.peer_id(turn.speaker), "content": turn.text,
                                   "createdAt": at.to_rfc3339()})
                        })
                        .collect();
                    let d = servers
                        .post(
                            &servers.minilm,
                            M_CREATE,
                            json!({"w": WS, "s": format!("eval-{ci}-{si}"), "m": m}),
                        )
                        .await?;
                    let made = d["createMessages"].as_array().context("createMessages")?;
                    let (mut cs, mut ss, mut ts, mut pids, mut seqs) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    for (i, row) in made.iter().enumerate() {
                        cs.push(ci as i32);
                        ss.push(si as i32);
                        ts.push((chunk_no * BATCH + i) as i32);
                        pids.push(row["id"].as_str().context("id")?.to_owned());
                        seqs.push(row["seqInSession"].as_i64().context("seq")?);
                    }
                    db.execute_raw(stmt(
                        "INSERT INTO bench_scale_eval SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::bigint[])",
                        vec![cs.into(), ss.into(), ts.into(), pids.into(), seqs.into()],
                    ))
                    .await?;
                    pb.inc(chunk.len() as u64);
                }
            }
        }
        pb.finish();
    }
    let mut ids = HashMap::new();
    let mut places = HashMap::new();
    for r in db
        .query_all_raw(stmt("SELECT * FROM bench_scale_eval", vec![]))
        .await?
    {
        let (c, s, t): (i32, i32, i32) = (
            r.try_get("", "conversation")?,
            r.try_get("", "session")?,
            r.try_get("", "turn")?,
        );
        let id: String = r.try_get("", "public_id")?;
        let seq: i64 = r.try_get("", "seq")?;
        ids.insert((c as usize, s as usize, t as usize), id.clone());
        places.insert(id, (c as usize, s as usize, seq));
    }
    Ok(Eval {
        questions,
        ids,
        places,
    })
}

/// Every eval question as a search of the whole big workspace (MiniLM, the top `limit` with a
/// context of ±2 turns): the share whose evidence (any of it) is among the results, and within
/// a result's context.
async fn recall(
    servers: &Servers,
    eval: &Eval,
    limit: usize,
) -> anyhow::Result<(f64, f64, Vec<Duration>)> {
    let (mut hit, mut ctx) = (0usize, 0usize);
    let mut took = Vec::with_capacity(eval.questions.len());
    let pb = bar(eval.questions.len() as u64, "recall");
    for q in &eval.questions {
        let t = Instant::now();
        let d = servers
            .post(
                &servers.minilm,
                Q_WS_SEARCH,
                json!({"w": WS, "q": q.text, "limit": limit}),
            )
            .await?;
        took.push(t.elapsed());
        let (results, context) = common::search_ids(&d["workspace"]["search"]);
        let evidence: Vec<&String> = q
            .evidence
            .iter()
            .filter_map(|&(s, t)| eval.ids.get(&(q.conversation, s, t)))
            .collect();
        if evidence
            .iter()
            .any(|e| results.iter().take(limit).any(|r| r == *e))
        {
            hit += 1;
        }
        let near = |id: &String| {
            let Some(&(c, s, seq)) = eval.places.get(id) else {
                return false;
            };
            evidence.iter().any(|e| {
                eval.places
                    .get(*e)
                    .is_some_and(|&(ec, es, eseq)| ec == c && es == s && eseq == seq)
            })
        };
        if context.iter().any(near) {
            ctx += 1;
        }
        pb.inc(1);
    }
    pb.finish();
    let n = eval.questions.len().max(1) as f64;
    Ok((hit as f64 / n, ctx as f64 / n, took))
}

/// Candidates of the bit index a planted turn must be among, asked with its own vector, to count
/// as reached.
const REACH_CANDIDATES: i64 = 100;

/// Each planted turn of the big workspace asked of the bit index with its own vector (MiniLM's
/// 384 dimensions): planted and reached per conversation (`eval-<conversation>-<sitting>`). A
/// planted conversation is reached or missed as a whole, as the graph's build went
/// (bench/history/2026-12.md, "Scale: islands, not age").
const REACH_SQL: &str = r#"
SELECT split_part(p.session_name, '-', 2) AS conversation, count(*) AS planted,
       count(*) FILTER (WHERE p.id IN (
         SELECT m.id FROM messages m WHERE m.workspace_name = $1 AND m.embedding IS NOT NULL
         ORDER BY binary_quantize(m.embedding)::bit(384) <~> binary_quantize(p.embedding)::bit(384)
         LIMIT $2)) AS reached
FROM messages p
WHERE p.workspace_name = $1 AND p.session_name LIKE 'eval-%' AND p.embedding IS NOT NULL
GROUP BY 1 ORDER BY 1"#;

/// How many planted turns the bit index reaches at the scan beam `beam`: (conversation, planted,
/// reached) for each conversation.
async fn reach(db: &DatabaseConnection, beam: u16) -> anyhow::Result<Vec<(String, i64, i64)>> {
    let txn = db.begin().await?;
    txn.execute_unprepared(&format!("SET LOCAL hnsw.ef_search = {beam}"))
        .await?;
    let rows = txn
        .query_all_raw(stmt(REACH_SQL, vec![WS.into(), REACH_CANDIDATES.into()]))
        .await?;
    txn.commit().await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get::<String>("", "conversation")?,
                r.try_get::<i64>("", "planted")?,
                r.try_get::<i64>("", "reached")?,
            ))
        })
        .collect()
}

/// `--search-only`: recall and latency of the planted questions on the corpus as it stands, and
/// how many planted turns the bit index reaches.
async fn search_only(
    db: &DatabaseConnection,
    servers: &Servers,
    eval: &Eval,
    args: &Args,
) -> anyhow::Result<()> {
    let (beam, limit) = (args.search_beam, args.search_limit);
    db.execute_unprepared("ANALYZE").await?;
    let messages = db
        .query_one_raw(stmt("SELECT count(*) AS n FROM messages", vec![]))
        .await?
        .context("a count has a row")?
        .try_get::<i64>("", "n")?;
    recall(servers, eval, limit).await?;
    let (r, rc, took) = recall(servers, eval, limit).await?;
    let s = stats(took);
    println!(
        "{messages} messages, beam floor {beam}: recall@{limit} {r:.3}, within context {rc:.3}, \
         search p50 {:.1} ms, p95 {:.1} ms ({} questions)",
        s.p50_ms, s.p95_ms, s.n
    );
    let by = reach(db, beam).await?;
    let (planted, reached) = by
        .iter()
        .fold((0, 0), |(p, r), (_, cp, cr)| (p + cp, r + cr));
    let each: Vec<String> = by
        .iter()
        .map(|(c, cp, cr)| format!("{c}: {cr}/{cp}"))
        .collect();
    println!(
        "planted turns the bit index reaches with their own vector (first {REACH_CANDIDATES} \
         candidates, beam {beam}): {reached} of {planted} (by conversation {})",
        each.join(", ")
    );
    Ok(())
}

fn print_column(c: &Column) {
    eprintln!(
        "\n{}: {} msgs in the workspace, {} on the server; session search p50 none/stub/MiniLM \
         {:.1}/{:.1}/{:.1} ms; workspace search {}; page of 50 {:.1} ms; get {:.1} ms; tree depth 5 \
         {:.1} ms ({} nodes); ingest {:.0} msg/s (batch {:.0} → {:.0} ms); RSS {:.0} MiB; recall@10 {}",
        c.label,
        c.workspace_messages,
        c.server_messages,
        c.session_search_none.p50_ms,
        c.session_search_stub.p50_ms,
        c.session_search_minilm.p50_ms,
        c.workspace_search
            .as_ref()
            .map_or("—".into(), |s| format!("{:.1} ms", s.p50_ms)),
        c.page50.p50_ms,
        c.get.p50_ms,
        c.tree_depth5.p50_ms,
        c.tree_nodes_p50,
        c.ingest_msgs_per_s,
        c.ingest_first10_ms,
        c.ingest_last10_ms,
        c.rss_mib,
        c.recall_at10.map_or("—".into(), |r| format!("{r:.3}")),
    );
}

/// The figures of one chart: (series name, value of each column or None).
type Figure = (
    &'static str,
    &'static str,
    Vec<(&'static str, Vec<Option<f64>>)>,
);

fn figures(cols: &[Column]) -> Vec<Figure> {
    let f = |get: &dyn Fn(&Column) -> Option<f64>| cols.iter().map(get).collect::<Vec<_>>();
    vec![
        (
            "session_search",
            "session search p50 (ms)",
            vec![
                ("no embedder", f(&|c| Some(c.session_search_none.p50_ms))),
                ("stub", f(&|c| Some(c.session_search_stub.p50_ms))),
                ("MiniLM", f(&|c| Some(c.session_search_minilm.p50_ms))),
            ],
        ),
        (
            "workspace_search",
            "workspace search p50 (ms)",
            vec![(
                "MiniLM, limit 50",
                f(&|c| c.workspace_search.as_ref().map(|s| s.p50_ms)),
            )],
        ),
        (
            "reads",
            "reads p50 (ms)",
            vec![
                ("page of 50", f(&|c| Some(c.page50.p50_ms))),
                ("get", f(&|c| Some(c.get.p50_ms))),
                ("reasoningTree depth 5", f(&|c| Some(c.tree_depth5.p50_ms))),
            ],
        ),
        (
            "ingest",
            "ingest (msg/s, batches of 100, stub)",
            vec![
                (
                    "msg/s",
                    f(&|c| Some(c.ingest_msgs_per_s).filter(|x| *x > 0.0)),
                ),
                (
                    "first 10% of batches",
                    f(&|c| Some(100_000.0 / c.ingest_first10_ms).filter(|x| x.is_finite())),
                ),
                (
                    "last 10% of batches",
                    f(&|c| Some(100_000.0 / c.ingest_last10_ms).filter(|x| x.is_finite())),
                ),
            ],
        ),
        (
            "rss",
            "resident memory of the process (MiB)",
            vec![
                ("RSS", f(&|c| Some(c.rss_mib))),
                ("peak", f(&|c| Some(c.peak_rss_mib))),
            ],
        ),
        (
            "recall",
            "eval recall (planted)",
            vec![
                ("r@10", f(&|c| c.recall_at10)),
                ("within context", f(&|c| c.recall_context)),
            ],
        ),
    ]
}

const COLORS: [RGBColor; 3] = [
    RGBColor(0xd9, 0x48, 0x0f),
    RGBColor(0x1c, 0x7e, 0xd6),
    RGBColor(0x2b, 0x8a, 0x3e),
];

/// A line per series against the server's message count, both axes logarithmic.
fn plot(title: &str, cols: &[Column], series: &[(&str, Vec<Option<f64>>)]) -> String {
    let xs: Vec<f64> = cols
        .iter()
        .map(|c| c.server_messages.max(1) as f64)
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .filter(|y| *y > 0.0)
        .collect();
    let mut out = String::new();
    if xs.is_empty() || ys.is_empty() {
        return out;
    }
    let (xlo, xhi) = (
        xs.iter().copied().fold(f64::MAX, f64::min) / 2.0,
        xs.iter().copied().fold(0.0, f64::max) * 2.0,
    );
    let (ylo, yhi) = (
        ys.iter().copied().fold(f64::MAX, f64::min) / 2.0,
        ys.iter().copied().fold(0.0, f64::max) * 2.0,
    );
    {
        let root = SVGBackend::with_string(&mut out, (720, 440)).into_drawing_area();
        let drawn = (|| -> Result<(), Box<dyn std::error::Error>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 16))
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("messages on the server")
                .x_label_formatter(&|x| human_f(*x))
                .label_style(("sans-serif", 12))
                .draw()?;
            for (i, (name, v)) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = xs
                    .iter()
                    .zip(v)
                    .filter_map(|(x, y)| y.filter(|y| *y > 0.0).map(|y| (*x, y)))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
                chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
            root.present()?;
            Ok(())
        })();
        if let Err(e) = drawn {
            eprintln!("chart {title}: {e}");
        }
    }
    out
}

fn human_f(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.0}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// `results.json` (every figure, the arguments, an estimate of the 10M column's build time),
/// `results.csv` (one row per column) and one SVG per figure.
fn write_results(args: &Args, cols: &[Column], elapsed: Duration) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let estimate = estimate_10m(args, cols);
    let out = json!({
        "note": args.note,
        "args": {"sizes": args.sizes, "tenants": args.tenants, "tenant_messages": args.tenant_messages,
                 "session_size": args.session_size, "pool": args.pool, "requests": args.requests,
                 "batches": args.batches, "eval_conversations": args.eval_conversations, "seed": args.seed},
        "elapsed_s": elapsed.as_secs_f64(),
        "estimate_10m": estimate,
        "columns": cols,
    });
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&out)?,
    )?;
    let mut csv = String::from(
        "column,workspace_messages,server_messages,session_messages,session_search_none_p50_ms,\
         session_search_stub_p50_ms,session_search_minilm_p50_ms,workspace_search_p50_ms,page50_p50_ms,\
         get_p50_ms,tree_depth5_p50_ms,ingest_msgs_per_s,ingest_first10_ms,ingest_last10_ms,rss_mib,\
         recall_at10,recall_context,fill_s,index_s\n",
    );
    let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
    for c in cols {
        csv.push_str(&format!(
            "{},{},{},{},{:.3},{:.3},{:.3},{},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.0},{},{},{:.1},{:.1}\n",
            c.label,
            c.workspace_messages,
            c.server_messages,
            c.session_messages,
            c.session_search_none.p50_ms,
            c.session_search_stub.p50_ms,
            c.session_search_minilm.p50_ms,
            opt(c.workspace_search.as_ref().map(|s| s.p50_ms)),
            c.page50.p50_ms,
            c.get.p50_ms,
            c.tree_depth5.p50_ms,
            c.ingest_msgs_per_s,
            c.ingest_first10_ms,
            c.ingest_last10_ms,
            c.rss_mib,
            opt(c.recall_at10),
            opt(c.recall_context),
            c.fill_seconds,
            c.index_seconds,
        ));
    }
    std::fs::write(args.out.join("results.csv"), csv)?;
    for (file, title, series) in figures(cols) {
        std::fs::write(
            args.out.join(format!("{file}.svg")),
            plot(title, cols, &series),
        )?;
    }
    eprintln!(
        "wrote {}/results.{{json,csv}} and its charts",
        args.out.display()
    );
    if let Some(e) = estimate {
        eprintln!("10M column, estimated from this run's rates: {e}");
    }
    Ok(())
}

/// How long the 10M column would take to build and measure, from the largest measured column's
/// fill and index rates (an estimate, not a measurement: index builds grow faster than linearly).
fn estimate_10m(args: &Args, cols: &[Column]) -> Option<Value> {
    let c = cols
        .iter()
        .filter(|c| c.fill_seconds > 0.0 && c.index_seconds > 0.0)
        .max_by_key(|c| c.server_messages)?;
    let filled = cols
        .iter()
        .filter(|c| c.fill_seconds > 0.0)
        .map(|c| c.server_messages)
        .max()?;
    // Each fill rebuilds the indexes over everything on the server: the index rate is per row
    // on the server, the fill rate per row written at that step.
    let prev = cols
        .iter()
        .map(|x| x.server_messages)
        .filter(|&m| m < c.server_messages)
        .max()
        .unwrap_or(0);
    let fill_rate = (c.server_messages - prev).max(1) as f64 / c.fill_seconds;
    let index_rate = c.server_messages as f64 / c.index_seconds;
    let total = (args.tenants * args.tenant_messages).max(10_000_000) as f64;
    let seconds = total / fill_rate + (filled as f64 + total) / index_rate;
    Some(json!({
        "estimate": true,
        "basis": c.label,
        "fill_rows_per_s": fill_rate,
        "index_rows_per_s": index_rate,
        "build_hours": seconds / 3600.0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filler_message_gets_its_own_pair_of_distinct_turns() {
        for pool in [2usize, 3, 50, 64, 101] {
            let pairs = PoolPairs::new(pool);
            let mut seen = std::collections::HashSet::new();
            for k in 0..pairs.count {
                let (i, j) = pairs.pair(k);
                assert!(i < j && j < pool as u64, "pool {pool}: ({i}, {j})");
                assert!(seen.insert((i, j)), "pool {pool}: ({i}, {j}) twice");
            }
            assert_eq!(seen.len() as u64, (pool * (pool - 1) / 2) as u64);
        }
    }

    #[test]
    fn the_default_pool_has_a_pair_for_every_filler_message() {
        assert_eq!(pool_for(1_006_000), 2_000);
        assert_eq!(pool_for(11_006_000), 4_693);
        let pairs = PoolPairs::new(4_693);
        assert!(pairs.count >= 11_006_000);
        let (i, j) = pairs.pair(pairs.count - 1);
        assert!(i < j && j < 4_693);
    }
}
