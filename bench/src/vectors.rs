//! `make bench-vectors`: the vector legs of search at the widths of OpenAI's embedding models,
//! 1536 (text-embedding-3-small) and 3072 (text-embedding-3-large). At 1536 conclusions are
//! indexed at full precision; at 3072, wider than pgvector's HNSW takes a `vector`, by their
//! half-precision casts. Messages are indexed by their sign bits at both. For each width, a fresh
//! database migrated for it gets the same clustered synthetic vectors in both tables (made in
//! PostgreSQL, then written in timed batches with the indexes in place, as the server writes
//! them), and every query goes through the store's own `queryConclusions` and `search`: recall@10
//! against an exact scan, and the latency.
//! bench/README.md ("Wide embedders") has the figures.

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::{Stats, stats};
use honcho_graphql::embed::{EmbedError, Embedder};
use honcho_graphql::store::Store;
use honcho_graphql::store::search::SearchScope;
use honcho_graphql::store::search_keys::SearchKeys;
use migration::MigratorTrait;
use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
use serde_json::Value;

#[derive(Parser, Debug, Clone)]
#[command(about = "Vector-leg recall and latency at 1536 and 3072 dimensions")]
struct Args {
    /// Rows in each of messages and conclusions.
    #[arg(long, default_value_t = 20_000)]
    rows: usize,
    /// Timed queries per table and width.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Clusters the vectors are drawn around (topics).
    #[arg(long, default_value_t = 500)]
    clusters: usize,
    /// Widths to measure.
    #[arg(long, value_delimiter = ',', default_value = "1536,3072")]
    dims: Vec<usize>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the databases.
    #[arg(long)]
    keep: bool,
}

const K: u64 = 10;
/// Spread of a point around its cluster's centre, and of a query around the point it is drawn
/// near (uniform noise per coordinate, centres' coordinates in ±0.5): a query's neighbours are
/// its point, then that point's cluster's nearest.
const POINT_NOISE: f64 = 1.0;
const QUERY_NOISE: f64 = 0.5;
/// Rows per INSERT, as `createMessages` writes a batch.
const BATCH: usize = 200;

fn main() -> anyhow::Result<()> {
    // SAFETY: nothing else runs yet.
    let rt = unsafe { honcho_graphql::runtime()? };
    rt.block_on(async {
        let args = Args::parse();
        let mut rows = Vec::new();
        for &dims in &args.dims {
            let prefix = format!("bench_vectors_{dims}");
            let args = args.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            common::with_database(&prefix, args.keep, |url| async move {
                let _ = tx.send(run(&args, dims, &url).await?);
                Ok(())
            })
            .await?;
            rows.push(rx.await?);
        }
        println!(
            "\n| dims | rows | conclusions written/s | messages written/s | conclusions r@10 | p50 | p95 \
             | messages r@10 | p50 | p95 | exact scan p50 | index scans (c, m) |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in rows {
            println!("{r}");
        }
        Ok(())
    })
}

/// The query texts `q<i>` embed to the i-th query vector; the rows' contents (`m<i>`, `c<i>`)
/// share no lexeme with them, so the text legs find nothing and the fused order is the vector
/// leg's.
struct Lookup {
    dims: usize,
    vectors: HashMap<String, Vec<f32>>,
}

#[async_trait::async_trait]
impl Embedder for Lookup {
    fn dims(&self) -> usize {
        self.dims
    }
    fn model_id(&self) -> &str {
        "bench:lookup"
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts
            .iter()
            .map(|t| {
                self.vectors
                    .get(t)
                    .cloned()
                    .ok_or_else(|| EmbedError::Inference(format!("no vector for {t:?}")))
            })
            .collect()
    }
}

struct Row {
    dims: usize,
    rows: usize,
    written: [f64; 2],
    recall: [f64; 2],
    latency: [Stats; 2],
    exact: Stats,
    /// Scans of the two vector indexes while the queries ran (0: the planner sorted instead).
    index_scans: [i64; 2],
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [c, m] = &self.latency;
        write!(
            f,
            "| {} | {} | {:.0} | {:.0} | {:.3} | {:.1} ms | {:.1} ms | {:.3} | {:.1} ms | {:.1} ms | {:.1} ms | {}, {} |",
            self.dims,
            self.rows,
            self.written[0],
            self.written[1],
            self.recall[0],
            c.p50_ms,
            c.p95_ms,
            self.recall[1],
            m.p50_ms,
            m.p95_ms,
            self.exact.p50_ms,
            self.index_scans[0],
            self.index_scans[1]
        )
    }
}

async fn run(args: &Args, dims: usize, url: &str) -> anyhow::Result<Row> {
    migration::set_embedding_dims(dims as u32);
    let db = common::connect(url, 4).await?;
    migration::Migrator::up(&db, None).await?;
    db.execute_unprepared(
        "INSERT INTO workspaces (id, name) VALUES (lpad('w', 21, 'x'), 'w');
         INSERT INTO peers (id, name, workspace_name) VALUES
           (lpad('a', 21, 'x'), 'alice', 'w'), (lpad('b', 21, 'x'), 'bob', 'w');
         INSERT INTO sessions (id, name, workspace_name) VALUES (lpad('s', 21, 'x'), 's', 'w');",
    )
    .await?;
    generate(&db, args, dims).await?;
    let written = [
        write(&db, "conclusions", args.rows).await?,
        write(&db, "messages", args.rows).await?,
    ];
    db.execute_unprepared("ANALYZE messages; ANALYZE conclusions")
        .await?;
    eprintln!(
        "{dims}: written ({:.0} conclusions/s, {:.0} messages/s)",
        written[0], written[1]
    );
    let (queries, truth, exact) = exact_answers(&db, dims).await?;
    let scans_before = [
        index_scans(&db, "ix_conclusions_embedding_hnsw").await?,
        index_scans(&db, "ix_messages_embedding_hnsw").await?,
    ];
    let store = Store::new(db.clone()).with_embedder(Some(Arc::new(Lookup {
        dims,
        vectors: queries
            .into_iter()
            .enumerate()
            .map(|(i, q)| (format!("q{i}"), q))
            .collect(),
    })));
    // One untimed pass warms the caches.
    for i in 0..truth.len().min(20) {
        nearest(&store, "conclusions", i).await?;
        nearest(&store, "messages", i).await?;
    }
    let mut recall = [0.0; 2];
    let mut latency: [Vec<Duration>; 2] = Default::default();
    for (t, table) in ["conclusions", "messages"].into_iter().enumerate() {
        for (i, truth) in truth.iter().enumerate() {
            let started = Instant::now();
            let got = nearest(&store, table, i).await?;
            latency[t].push(started.elapsed());
            recall[t] += got.iter().filter(|g| truth.contains(g)).count() as f64 / K as f64;
        }
        recall[t] /= truth.len() as f64;
    }
    // PostgreSQL's statistics reach other sessions within about a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let index_scans = [
        index_scans(&db, "ix_conclusions_embedding_hnsw").await? - scans_before[0],
        index_scans(&db, "ix_messages_embedding_hnsw").await? - scans_before[1],
    ];
    let [c, m] = latency;
    Ok(Row {
        dims,
        rows: args.rows,
        written,
        recall,
        latency: [stats(c), stats(m)],
        exact,
        index_scans,
    })
}

/// `points(i, v)`: `rows` unit vectors around `clusters` centres; `queries(i, v)`: one near each
/// of `queries` points picked at random. Made in PostgreSQL (`setseed`), unindexed.
async fn generate(
    db: &sea_orm::DatabaseConnection,
    args: &Args,
    dims: usize,
) -> anyhow::Result<()> {
    let seed = (args.seed % 1000) as f64 / 1000.0;
    let noise = |scale: f64, k: &str| {
        format!(
            "(SELECT array_agg((random() - 0.5) * {scale}) FROM generate_series(1, {dims}) \
             WHERE {k} IS NOT NULL)::vector({dims})"
        )
    };
    db.execute_unprepared(&format!(
        "SELECT setseed({seed});
         CREATE TABLE centres AS SELECT k, {centre} AS v FROM generate_series(0, {c} - 1) k;
         CREATE TABLE points AS SELECT i, l2_normalize(c.v + {point}) AS v
           FROM generate_series(0, {rows} - 1) i JOIN centres c ON c.k = i % {c};
         CREATE UNIQUE INDEX ON points (i);
         CREATE TABLE queries AS SELECT q.i, l2_normalize(p.v + {query}) AS v
           FROM (SELECT i, floor(random() * {rows})::int AS j FROM generate_series(0, {n} - 1) i) q
           JOIN points p ON p.i = q.j;",
        centre = noise(1.0, "k"),
        point = noise(POINT_NOISE, "i"),
        query = noise(QUERY_NOISE, "q.i"),
        c = args.clusters,
        rows = args.rows,
        n = args.queries,
    ))
    .await?;
    Ok(())
}

/// Writes one row per point (content `c<i>` or `m<i>`) in batches of [`BATCH`], as the server
/// writes them: each batch one statement, the indexes in place. Rows per second.
async fn write(db: &sea_orm::DatabaseConnection, table: &str, rows: usize) -> anyhow::Result<f64> {
    let insert = match table {
        "conclusions" => {
            "INSERT INTO conclusions (id, workspace_name, observer, observed, content, embedding) \
             SELECT lpad(i::text, 21, 'c'), 'w', 'alice', 'bob', 'c' || i, v FROM points \
             WHERE i >= $1 AND i < $2"
        }
        _ => {
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, \
             seq_in_session, content, embedding) \
             SELECT lpad(i::text, 21, 'm'), 'w', 's', 'alice', i + 1, 'm' || i, v FROM points \
             WHERE i >= $1 AND i < $2"
        }
    };
    let started = Instant::now();
    for from in (0..rows).step_by(BATCH) {
        db.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            insert,
            [(from as i64).into(), ((from + BATCH) as i64).into()],
        ))
        .await?;
    }
    Ok(rows as f64 / started.elapsed().as_secs_f64())
}

/// The query vectors, each query's `K` nearest points by an exact scan (indexes off), and the
/// latency of those scans.
async fn exact_answers(
    db: &sea_orm::DatabaseConnection,
    dims: usize,
) -> anyhow::Result<(Vec<Vec<f32>>, Vec<Vec<usize>>, Stats)> {
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT v::real[] AS v FROM queries ORDER BY i",
        ))
        .await?;
    let queries: Vec<Vec<f32>> = rows
        .iter()
        .map(|r| r.try_get::<Vec<f32>>("", "v"))
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(queries.iter().all(|q| q.len() == dims));
    let mut truth = Vec::new();
    let mut times = Vec::new();
    for q in &queries {
        let txn = db.begin().await?;
        txn.execute_unprepared("SET LOCAL enable_indexscan = off")
            .await?;
        let started = Instant::now();
        let rows = txn
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                format!("SELECT content FROM conclusions ORDER BY embedding <=> $1 LIMIT {K}"),
                [pgvector::Vector::from(q.clone()).into()],
            ))
            .await?;
        times.push(started.elapsed());
        txn.rollback().await?;
        truth.push(
            rows.iter()
                .filter_map(|r| r.try_get::<String>("", "content").ok())
                .filter_map(|c| c[1..].parse().ok())
                .collect(),
        );
    }
    Ok((queries, truth, stats(times)))
}

async fn index_scans(db: &sea_orm::DatabaseConnection, index: &str) -> anyhow::Result<i64> {
    db.execute_unprepared("SELECT pg_stat_clear_snapshot()")
        .await?;
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = '{index}'"),
        ))
        .await?;
    Ok(row
        .map(|r| r.try_get("", "idx_scan"))
        .transpose()?
        .unwrap_or(0))
}

/// The points the server answers query `i` with, by the store's own search of `table`.
async fn nearest(store: &Store, table: &str, i: usize) -> anyhow::Result<Vec<usize>> {
    let q = format!("q{i}");
    let contents: Vec<String> = if table == "conclusions" {
        store
            .query_conclusions("w", &q, K, None, &Value::Null)
            .await?
            .into_iter()
            .map(|c| c.content)
            .collect()
    } else {
        store
            .search(
                SearchScope::Workspace("w"),
                &q,
                &Value::Null,
                K,
                SearchKeys::WithConclusions,
            )
            .await?
            .into_iter()
            .map(|m| m.content)
            .collect()
    };
    Ok(contents
        .iter()
        .filter_map(|c| c[1..].parse().ok())
        .collect())
}
