//! honcho-graphql: Honcho's memory model over GraphQL, on PostgreSQL + pgvector.
//!
//! Layers depend one way: [`graphql`] → [`access`] → [`store`] → [`entity`], and no module imports
//! the composition root (this file, [`config`], `start.rs`); docs/architecture.md has the rules.

pub mod access;
pub use access::auth;
pub mod config;
pub mod deriver;
pub mod dialectic;
pub mod embed;
pub mod entity;
mod flags;
pub mod graphql;
pub mod http;
pub mod import_honcho;
pub mod llm;
pub mod mcp;
pub mod media;
pub mod metrics;
pub mod outbound;
pub mod rest;
pub(crate) mod retry;
mod start;
pub mod store;
pub mod telemetry;
pub mod webhook;
pub mod workers;

pub use start::StartError;

use migration::{Migrator, MigratorTrait};

use config::ServeConfig;
use store::Store;

/// The multi-threaded tokio runtime of the binaries, started after
/// [`embed::settle_thread_count`] has fixed candle's thread count.
///
/// # Safety
/// It sets an environment variable: call it before the process starts any other thread.
pub unsafe fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    // SAFETY: the caller guarantees that no other thread runs yet.
    unsafe { embed::settle_thread_count() };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Runs one maintenance `round` every `interval` until shutdown: the statistics keeper
/// (`store::statistics`) and the GIN pending-list merger (`store::gin_pending`). A failing round
/// is logged once until a round succeeds again, so a lasting failure does not flood the log.
fn every<F, Fut>(
    what: &'static str,
    interval: std::time::Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    round: F,
) where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = store::StoreResult<()>> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            match round().await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "{what} failed (logged again once it has recovered)");
                }
                Err(_) => {}
            }
        }
    });
}

/// Connects, migrates (unless told not to), checks the database matches this server, and serves
/// until SIGINT/SIGTERM, letting in-flight requests finish.
pub async fn serve(cfg: ServeConfig) -> Result<(), StartError> {
    let auth = cfg.auth.auth()?;
    announce_auth(auth.enabled());
    let origins = http::Origins::parse(&cfg.cors_origins, auth.enabled())?;
    let hosts = http::Hosts::parse(&cfg.allowed_hosts, auth.enabled())?;
    let persisted = persisted_documents(&cfg)?;
    let llm = llm::build(&cfg.llm)?;
    let dialectic = llm.clone().map(dialectic::Dialectic::new);
    let store = ready_store(&cfg, llm.is_some()).await?;
    let (stop_workers, shutdown) = tokio::sync::watch::channel(false);
    start_maintenance(&cfg, &store, &shutdown);
    let mut workers = start_deriver(&cfg, llm, &store, shutdown.clone());
    workers.extend(start_webhooks(&cfg, &store, shutdown));
    let events = start_events(&cfg).await?;
    let schema =
        graphql::build_schema_with(store.clone(), &limits(&cfg), auth, Some(events), dialectic);
    let playground = http::Playground::resolve(cfg.playground_dir.clone());
    announce_playground(&playground, cfg.playground_dir.as_deref());
    let options = http::HttpOptions {
        max_body_bytes: cfg.max_body_bytes,
        request_timeout: Some(std::time::Duration::from_millis(cfg.request_timeout_ms)),
        origins,
        hosts,
        max_websockets_per_address: cfg.max_websockets_per_address,
        playground: playground.clone(),
        persisted,
    };
    let app = http::router_with(schema, store, options);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|cause| StartError::Bind {
            addr: cfg.listen,
            cause,
        })?;
    tracing::info!(
        "serving GraphQL on http://{0}/graphql (subscriptions: ws://{0}/graphql/ws)",
        cfg.listen
    );
    if playground != http::Playground::Missing {
        tracing::info!("playground on http://{}/", cfg.listen);
    }
    let timeouts = http::ConnectionTimeouts {
        header_read: std::time::Duration::from_millis(cfg.header_read_timeout_ms),
        idle: std::time::Duration::from_millis(cfg.idle_timeout_ms),
    };
    http::serve(listener, app, timeouts, shutdown_signal())
        .await
        .map_err(StartError::Serve)?;
    let _ = stop_workers.send(true);
    for w in workers {
        let _ = w.await;
    }
    Ok(())
}

/// The server's own maintenance rounds, each when its interval is not 0: planner statistics and
/// visibility maps, and GIN pending lists.
fn start_maintenance(
    cfg: &ServeConfig,
    store: &Store,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) {
    resume_erasures(store);
    if cfg.analyze_interval_ms > 0 {
        let store = store.clone();
        every(
            "refreshing planner statistics",
            std::time::Duration::from_millis(cfg.analyze_interval_ms),
            shutdown.clone(),
            move || {
                let store = store.clone();
                async move {
                    store.analyze_stale_tables().await?;
                    store.vacuum_stale_tables().await.map(drop)
                }
            },
        );
    }
    if cfg.gin_flush_interval_ms > 0 {
        let store = store.clone();
        every(
            "merging GIN pending lists",
            std::time::Duration::from_millis(cfg.gin_flush_interval_ms),
            shutdown.clone(),
            move || {
                let store = store.clone();
                async move { store.flush_gin_pending_lists().await.map(drop) }
            },
        );
    }
}

/// Erasures a crash or a stop left unfinished continue in the background (docs/erasure.md); two
/// servers that both resume one take its steps in turn (each step locks the job's row).
fn resume_erasures(store: &Store) {
    let store = store.clone();
    tokio::spawn(async move {
        match store.unfinished_erasures().await {
            Ok(jobs) => {
                for job in jobs {
                    tracing::info!(job = %job.id, "resuming an unfinished erasure");
                    store.spawn_erasure(job.id);
                }
            }
            Err(error) => tracing::warn!(%error, "could not look for unfinished erasures"),
        }
    });
}

fn announce_auth(enabled: bool) {
    if enabled {
        tracing::info!("auth is on: requests need `Authorization: Bearer <key>`");
    } else {
        tracing::warn!(
            "auth is OFF (HONCHO_AUTH_SECRET is unset): every request is an admin; \
             do not expose this server to a network"
        );
    }
}

/// The persisted-document store, holding the trusted documents' manifest in strict mode.
fn persisted_documents(cfg: &ServeConfig) -> Result<std::sync::Arc<http::Persisted>, StartError> {
    let trusted = match &cfg.trusted_documents {
        Some(path) => {
            let manifest = http::Persisted::load_manifest(path)?;
            tracing::info!(
                documents = manifest.len(),
                admin_exempt = cfg.trusted_documents_admin,
                "strict mode: only the trusted documents of {} run",
                path.display()
            );
            Some(manifest)
        }
        None => None,
    };
    Ok(std::sync::Arc::new(http::Persisted::new(
        trusted,
        cfg.trusted_documents_admin,
    )))
}

/// The store with its read replicas, migrated (unless told not to) and checked against the
/// configured embedder.
async fn ready_store(cfg: &ServeConfig, derives: bool) -> Result<Store, StartError> {
    let store = open_store(&cfg.db)
        .await?
        .with_derivation(derives)
        .with_configuration_defaults(cfg.deriver.configuration_defaults())
        .with_dreams(cfg.deriver.dream.enabled)
        .with_conclusion_keys(cfg.search.search_conclusion_keys)
        .with_search_beam(cfg.search.search_beam)
        .with_webhook_policy(cfg.webhooks.policy())
        .with_read_pool(open_read_pool(&cfg.db, &cfg.reads).await?);
    if !cfg.no_migrate {
        Migrator::up(store.db(), None)
            .await
            .map_err(StartError::Migrate)?;
    }
    store.check_embedder().await?;
    if store.vectors_predate_context().await? {
        tracing::warn!(
            "stored vectors predate contextual embeddings (messages embedded alone, conclusions \
             without their peers' ids): search finds less until `honcho-graphql reembed --all` \
             recomputes them"
        );
    }
    Ok(store)
}

/// The in-process deriver workers, when there is an LLM and workers are configured.
fn start_deriver(
    cfg: &ServeConfig,
    llm: Option<std::sync::Arc<dyn llm::Llm>>,
    store: &Store,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    match llm {
        Some(llm) if cfg.deriver.workers > 0 => {
            tracing::info!(
                model = llm.model_id(),
                workers = cfg.deriver.workers,
                "deriver workers started"
            );
            let deriver = std::sync::Arc::new(deriver::Deriver::new(
                store.clone(),
                llm,
                cfg.deriver.clone(),
            ));
            workers::spawn(&deriver, cfg.deriver.workers, &shutdown)
        }
        Some(llm) => {
            tracing::info!(
                model = llm.model_id(),
                "messages are queued for derivation; no worker here (HONCHO_DERIVER_WORKERS=0): \
                 run `honcho-graphql deriver`"
            );
            Vec::new()
        }
        None => {
            tracing::info!("no LLM (HONCHO_LLM=none): nothing is derived");
            Vec::new()
        }
    }
}

/// The webhook delivery workers, when a secret is set and workers are configured.
fn start_webhooks(
    cfg: &ServeConfig,
    store: &Store,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let n = cfg.webhooks.workers;
    match webhook::Webhooks::new(store.clone(), cfg.webhooks.clone()) {
        Some(webhooks) if n > 0 => {
            tracing::info!(workers = n, "webhook delivery workers started");
            workers::spawn(&std::sync::Arc::new(webhooks), n, &shutdown)
        }
        Some(_) => {
            tracing::info!(
                "webhook events are queued; no delivery worker here (HONCHO_WEBHOOK_WORKERS=0)"
            );
            Vec::new()
        }
        None => {
            tracing::info!(
                "no HONCHO_WEBHOOK_SECRET: webhook events are queued but not sent until it is set"
            );
            Vec::new()
        }
    }
}

fn limits(cfg: &ServeConfig) -> graphql::Limits {
    graphql::Limits {
        max_depth: cfg.max_depth,
        max_complexity: cfg.max_complexity,
        introspection: cfg.introspection,
        max_nesting: cfg.max_nesting,
        max_tokens: cfg.max_tokens,
        max_fragments: cfg.max_fragments,
        max_fields: cfg.max_fields,
        max_aliases: cfg.max_aliases,
        max_root_fields: cfg.max_root_fields,
        max_embeddings: cfg.max_embeddings,
        max_subscriptions_per_connection: cfg.max_subscriptions_per_connection,
        max_subscriptions_per_key: cfg.max_subscriptions_per_key,
        connection_init_timeout: std::time::Duration::from_millis(cfg.ws_init_timeout_ms),
    }
}

/// The process's `LISTEN` connection, on the events URL when one is set (a direct connection
/// where the main URL goes through a transaction-pooling proxy).
async fn start_events(cfg: &ServeConfig) -> Result<store::events::EventBus, StartError> {
    let url = cfg
        .events_database_url
        .as_deref()
        .unwrap_or(&cfg.db.database_url);
    store::events::EventBus::start(url, cfg.event_buffer)
        .await
        .map_err(|cause| StartError::Events {
            url: redact(url),
            cause,
        })
}

fn announce_playground(playground: &http::Playground, dir: Option<&std::path::Path>) {
    match (playground, dir) {
        (http::Playground::Dir(dir), _) => {
            tracing::info!("serving the playground from {}", dir.display())
        }
        (http::Playground::Embedded, _) => tracing::info!("serving the built-in playground"),
        (http::Playground::Missing, Some(dir)) => tracing::warn!(
            "HONCHO_PLAYGROUND_DIR={} has no index.html; `/` says how to build the playground",
            dir.display()
        ),
        (http::Playground::Missing, None) => {
            tracing::info!("no playground built (make playground); `/` says so")
        }
    }
}

/// Serves MCP over stdin/stdout (`honcho-graphql mcp`) with the store, embedder, LLM and auth set
/// up as [`serve`] sets them up, until the client closes it.
pub async fn serve_mcp_stdio(cfg: config::McpConfig) -> Result<(), StartError> {
    let serve = &cfg.serve;
    let auth = serve.auth.auth()?;
    let llm = llm::build(&serve.llm)?;
    let dialectic = llm.clone().map(dialectic::Dialectic::new);
    let store = ready_store(serve, llm.is_some()).await?;
    let services = access::Services::new(access::Sealed::new(store), Some(auth), dialectic);
    tracing::info!("serving MCP on stdio");
    mcp::stdio::serve(services, cfg.stdio)
        .await
        .map_err(StartError::Serve)
}

/// Runs deriver workers alone (`honcho-graphql deriver`) until SIGINT/SIGTERM: derivation scales
/// out separately from serving. Queued messages come from servers with an LLM configured.
pub async fn derive(
    db: config::DbConfig,
    llm_cfg: llm::LlmArgs,
    cfg: deriver::DeriverArgs,
) -> Result<(), StartError> {
    let Some(llm) = llm::build(&llm_cfg)? else {
        return Err(StartError::NoLlm);
    };
    let store = open_store(&db)
        .await?
        .with_derivation(true)
        .with_configuration_defaults(cfg.configuration_defaults());
    Migrator::up(store.db(), None)
        .await
        .map_err(StartError::Migrate)?;
    store.check_embedder().await?;
    let workers = cfg.workers.max(1);
    tracing::info!(model = llm.model_id(), workers, "deriver started");
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let deriver = std::sync::Arc::new(deriver::Deriver::new(store, llm, cfg));
    let handles = crate::workers::spawn(&deriver, workers, &shutdown);
    shutdown_signal().await;
    let _ = stop.send(true);
    for h in handles {
        let _ = h.await;
    }
    Ok(())
}

/// The configured embedder (HONCHO_EMBEDDER), None for `none`. Migrations that create the vector
/// columns afterwards give them its dimension (the default's without an embedder).
pub fn configured_embedder(
    settings: &embed::EmbedArgs,
) -> Result<Option<std::sync::Arc<dyn embed::Embedder>>, StartError> {
    let embedder = embed::build(&embed::EmbedConfig::from_args(settings)?)?;
    match &embedder {
        Some(e) => {
            migration::set_embedding_dims(e.dims() as u32);
            tracing::info!(model = e.model_id(), dims = e.dims(), "embedder ready");
        }
        None => tracing::info!("no embedder: search is full-text only"),
    }
    Ok(embedder)
}

/// Connects to the database with the configured embedder (HONCHO_EMBEDDER); a fresh database's
/// vector columns get the embedder's dimension.
pub async fn open_store(db: &config::DbConfig) -> Result<Store, StartError> {
    let embedder = configured_embedder(&db.embedder)?;
    let timeout = (db.statement_timeout_ms > 0)
        .then(|| std::time::Duration::from_millis(db.statement_timeout_ms));
    let store = Store::connect(&db.database_url, db.db_pool, timeout)
        .await
        .map_err(|cause| StartError::Connect {
            url: redact(&db.database_url),
            cause,
        })?;
    Ok(store.with_embedder(embedder))
}

/// The replicas of HONCHO_READ_DATABASE_URL, checked once (None when there are none). A replica
/// that is down at start does not stop the server: reads go to the primary until it is up.
pub async fn open_read_pool(
    db: &config::DbConfig,
    reads: &store::replicas::ReadArgs,
) -> Result<Option<std::sync::Arc<store::ReadPool>>, StartError> {
    let urls = reads.urls();
    if urls.is_empty() {
        return Ok(None);
    }
    let settings = store::replicas::ReadSettings {
        pool: db.db_pool,
        statement_timeout: (db.statement_timeout_ms > 0)
            .then(|| std::time::Duration::from_millis(db.statement_timeout_ms)),
        max_lag: std::time::Duration::from_millis(reads.max_replica_lag_ms),
        token_wait: std::time::Duration::from_millis(reads.replica_wait_ms),
    };
    let pool = store::ReadPool::connect(&db.database_url, &urls, settings)
        .await
        .map_err(StartError::Replicas)?;
    for r in pool.replicas() {
        tracing::info!(
            replica = r.name(),
            state = r.state().as_str(),
            "read replica"
        );
    }
    Ok(Some(pool))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// The URL without its password, for messages; a text that is no URL is returned as it is.
pub fn redact(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redact_hides_the_password_and_keeps_the_rest() {
        assert_eq!(
            redact("postgres://app:s3cr%40t@db.example:5432/honcho?sslmode=require"),
            "postgres://app:***@db.example:5432/honcho?sslmode=require"
        );
        let plain = "postgres://postgres@127.0.0.1:5432/honcho";
        assert_eq!(redact(plain), plain);
        assert_eq!(redact("not a url"), "not a url");
    }
}
