//! What the benchmark and the eval share: a scratch database, in-process servers, the embedder,
//! latency statistics.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use honcho_graphql::embed::{EmbedConfig, Embedder, EmbedderKind};
use honcho_graphql::graphql::{self, Limits};
use honcho_graphql::store::Store;
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection};
use serde::Serialize;
use serde_json::{Value, json};

/// The server's allocator (see src/main.rs), so the server measured in process is the one
/// shipped. Every benchmark binary that hosts the server includes this module.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `postgres://user@host:port` and the query string of DATABASE_URL, without the database name.
pub fn server_url(url: &str) -> (String, String) {
    let (url, query) = match url.split_once('?') {
        Some((u, q)) => (u.to_owned(), format!("?{q}")),
        None => (url.to_owned(), String::new()),
    };
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let base = match url[after_scheme..].find('/') {
        Some(i) => url[..after_scheme + i].to_owned(),
        None => url,
    };
    (base, query)
}

/// Creates the database `{prefix}_{pid}` (`HONCHO_BENCH_DB_PREFIX` instead of `prefix` when set)
/// on DATABASE_URL's server, runs `run` with its URL and drops it afterwards (unless `keep`),
/// whether `run` succeeded or not.
pub async fn with_database<F, Fut>(prefix: &str, keep: bool, run: F) -> anyhow::Result<()>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (base, query) = server_url(&url);
    // On a server shared with others, HONCHO_BENCH_DB_PREFIX names the databases as they agreed.
    let prefix = std::env::var("HONCHO_BENCH_DB_PREFIX").unwrap_or_else(|_| prefix.to_owned());
    let name = format!("{prefix}_{}", std::process::id());
    let admin = Database::connect(format!("{base}/postgres{query}"))
        .await
        .context("connecting to DATABASE_URL's server")?;
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await?;
    let result = run(format!("{base}/{name}{query}")).await;
    if !keep {
        admin
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await?;
    } else {
        eprintln!("kept database {name}");
    }
    result
}

/// The URL of the kept database `name` on DATABASE_URL's server, created when missing, and
/// dropped first when `fresh`.
#[allow(dead_code)] // only honcho-bench-scale and honcho-bench-replicas name theirs
pub async fn named_database(name: &str, fresh: bool) -> anyhow::Result<String> {
    anyhow::ensure!(
        name.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
        "--database takes lowercase letters, digits and _"
    );
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (base, query) = server_url(&url);
    let admin = Database::connect(format!("{base}/postgres{query}"))
        .await
        .context("connecting to DATABASE_URL's server")?;
    if fresh {
        admin
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await?;
    }
    let exists = admin
        .query_one_raw(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "SELECT 1 AS one FROM pg_database WHERE datname = $1",
            [name.into()],
        ))
        .await?
        .is_some();
    if !exists {
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await?;
    }
    Ok(format!("{base}/{name}{query}"))
}

/// The one integer `sql` (a `count(*)`, say) returns, bound to `values`.
#[allow(dead_code)] // only honcho-bench-scale and honcho-bench-replicas count rows
pub async fn count<C: ConnectionTrait>(
    db: &C,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> anyhow::Result<i64> {
    let row = db
        .query_one_raw(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            sql,
            values,
        ))
        .await?
        .context("a count returns a row")?;
    Ok(row.try_get_by_index::<i64>(0)?)
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct Stats {
    pub n: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    #[serde(skip)]
    pub sorted_ms: Vec<f64>,
}

/// The middle value (the upper one of an even count), 0 for none.
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

pub fn stats(mut d: Vec<Duration>) -> Stats {
    d.sort();
    let ms: Vec<f64> = d.iter().map(|x| x.as_secs_f64() * 1e3).collect();
    let q = |p: f64| {
        if ms.is_empty() {
            0.0
        } else {
            ms[((ms.len() as f64 - 1.0) * p).round() as usize]
        }
    };
    Stats {
        n: ms.len(),
        p50_ms: q(0.5),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        mean_ms: ms.iter().sum::<f64>() / ms.len().max(1) as f64,
        sorted_ms: ms,
    }
}

pub fn embedder(kind: EmbedderKind) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let mut cfg = EmbedConfig::from_env()?;
    cfg.kind = kind;
    Ok(honcho_graphql::embed::build(&cfg)?)
}

/// Serves `store` over HTTP on 127.0.0.1 (any free port) and returns the GraphQL URL.
pub async fn serve(store: Store) -> anyhow::Result<String> {
    serve_on(store, 0).await
}

/// [`serve`] on a given port (0: any free one), for a run that must keep to a range of ports.
pub async fn serve_on(store: Store, port: u16) -> anyhow::Result<String> {
    let schema = graphql::build_schema(store.clone(), &Limits::default());
    serve_schema_on(schema, store, port).await
}

/// [`serve_on`] with a schema of the caller's (one fed by an event bus, say).
pub async fn serve_schema_on(
    schema: graphql::AppSchema,
    store: Store,
    port: u16,
) -> anyhow::Result<String> {
    let app = honcho_graphql::http::router(schema, store, 32 << 20);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    // The server's own accept loop with its connection deadlines, as `serve` runs it.
    let timeouts = honcho_graphql::http::ConnectionTimeouts::default();
    tokio::spawn(async move {
        let _ = honcho_graphql::http::serve(listener, app, timeouts, std::future::pending()).await;
    });
    Ok(format!("http://{addr}/graphql"))
}

pub fn bar(len: u64, msg: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len).with_message(msg.to_owned());
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:>28} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

pub async fn connect(url: &str, max: u32) -> anyhow::Result<DatabaseConnection> {
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.max_connections(max)
        .min_connections(1)
        .sqlx_logging(false);
    Ok(Database::connect(opts).await?)
}

/// Sends the request and reads its JSON body, failing on an error status.
pub async fn send_json(req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    Ok(req.send().await?.error_for_status()?.json().await?)
}

/// One GraphQL request; the whole response, or an error when it has `errors`.
pub async fn graphql(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    variables: &Value,
) -> anyhow::Result<Value> {
    let req = http
        .post(url)
        .json(&json!({"query": query, "variables": variables}));
    let resp = send_json(req).await?;
    if let Some(errs) = resp.get("errors") {
        bail!("GraphQL errors: {errs}");
    }
    Ok(resp)
}

/// The `data` of one GraphQL request (an error when it has `errors`).
#[allow(dead_code)] // only honcho-eval and honcho-bench-scale ask
pub async fn graphql_data(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    variables: Value,
) -> anyhow::Result<Value> {
    Ok(graphql(http, url, query, &variables).await?["data"].clone())
}

/// The ids of a message search's results (best first) and of every snippet's context.
#[allow(dead_code)] // only honcho-eval and honcho-bench-scale search
pub fn search_ids(hits: &Value) -> (Vec<String>, Vec<String>) {
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let context = hits["snippets"]
        .as_array()
        .map(|s| s.iter().flat_map(|s| ids(&s["context"])).collect())
        .unwrap_or_default();
    (ids(&hits["results"]), context)
}

/// Runs `one(i)` for i in 0..total on `clients` concurrent workers (each takes the next i) and
/// returns each call's duration, with a progress bar.
pub async fn timed<F, Fut>(
    clients: usize,
    total: usize,
    label: &str,
    one: F,
) -> anyhow::Result<Vec<Duration>>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let pb = bar(total as u64, label);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, pb, one) = (next.clone(), pb.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            let mut d = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                one(i).await?;
                d.push(t.elapsed());
                pb.inc(1);
            }
            anyhow::Ok(d)
        }));
    }
    let mut all = Vec::with_capacity(total);
    for t in tasks {
        all.extend(t.await??);
    }
    pb.finish();
    Ok(all)
}
