//! The commands' configuration, from flags and the environment (every variable is listed in
//! docs/configuration.md). This is where the modules' flags meet: a module owns its own `Args`
//! (`embed::EmbedArgs`, `llm::LlmArgs`, `deriver::DeriverArgs`, `auth::AuthArgs`,
//! `store::replicas::ReadArgs`, `store::search::SearchArgs`, `mcp::stdio::StdioArgs`,
//! `webhook::WebhookArgs`), flattened into a command's here, and no module imports this one.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct DbConfig {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/honcho")]
    pub database_url: String,

    /// Connections in the pool.
    #[arg(long, env = "HONCHO_DB_POOL", default_value_t = 20)]
    pub db_pool: u32,

    /// PostgreSQL aborts any statement running longer than this (milliseconds; 0 = no limit).
    #[arg(long, env = "HONCHO_STATEMENT_TIMEOUT_MS", default_value_t = 30_000)]
    pub statement_timeout_ms: u64,

    /// Every command that opens the database knows the embedder: it sizes the vector columns,
    /// and `serve` refuses one of another model than the stored vectors'.
    #[command(flatten)]
    pub embedder: crate::embed::EmbedArgs,
}

#[derive(Args, Clone, Debug)]
pub struct ServeConfig {
    #[command(flatten)]
    pub db: DbConfig,

    /// Address to serve HTTP on.
    #[arg(long, env = "HONCHO_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,

    /// Do not run pending migrations on start.
    #[arg(long, env = "HONCHO_NO_MIGRATE", default_value_t = false)]
    pub no_migrate: bool,

    #[command(flatten)]
    pub search: crate::store::search::SearchArgs,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "HONCHO_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Deepest query accepted.
    #[arg(long, env = "HONCHO_MAX_DEPTH", default_value_t = 16)]
    pub max_depth: usize,

    /// Most costly query accepted: every field counts one, and a list multiplies what is selected
    /// under it by its page size or limit (graphql/cost.rs).
    #[arg(long, env = "HONCHO_MAX_COMPLEXITY", default_value_t = 50_000)]
    pub max_complexity: usize,

    /// Deepest nesting of brackets (`{`, `[`, `(`) in a document, checked before parsing.
    #[arg(long, env = "HONCHO_MAX_NESTING", default_value_t = 64,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=crate::graphql::limits::CEILING_NESTING as u64))]
    pub max_nesting: usize,

    /// Most tokens in a document, checked before parsing.
    #[arg(long, env = "HONCHO_MAX_TOKENS", default_value_t = 20_000)]
    pub max_tokens: usize,

    /// Most fragment definitions in a document, checked before parsing.
    #[arg(long, env = "HONCHO_MAX_FRAGMENTS", default_value_t = 100,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=crate::graphql::limits::CEILING_FRAGMENTS as u64))]
    pub max_fragments: usize,

    /// Most fields written in a document, repeats included, checked before parsing.
    #[arg(long, env = "HONCHO_MAX_FIELDS", default_value_t = 1_000)]
    pub max_fields: usize,

    /// Most fields written under an alias in one request (fragments expanded).
    #[arg(long, env = "HONCHO_MAX_ALIASES", default_value_t = 100)]
    pub max_aliases: usize,

    /// Most top-level fields in one operation (fragments expanded).
    #[arg(long, env = "HONCHO_MAX_ROOT_FIELDS", default_value_t = 20)]
    pub max_root_fields: usize,

    /// Most texts one request may embed: searches (times the lists they sit in) and the
    /// messages and conclusions it writes.
    #[arg(long, env = "HONCHO_MAX_EMBEDDINGS", default_value_t = 200)]
    pub max_embeddings: usize,

    /// Most operations (subscriptions) open at once on one WebSocket.
    #[arg(long, env = "HONCHO_MAX_SUBSCRIPTIONS_PER_CONNECTION", default_value_t = 100)]
    pub max_subscriptions_per_connection: usize,

    /// Most operations open at once over all WebSockets of one key (auth on).
    #[arg(long, env = "HONCHO_MAX_SUBSCRIPTIONS_PER_KEY", default_value_t = 1000)]
    pub max_subscriptions_per_key: usize,

    /// Connection for the event listener (one per instance, LISTEN needs a session of its own);
    /// defaults to DATABASE_URL. Point it at PostgreSQL itself (or a session-mode pool) when
    /// DATABASE_URL goes through PgBouncer in transaction mode.
    #[arg(long, env = "HONCHO_EVENTS_DATABASE_URL")]
    pub events_database_url: Option<String>,

    /// Events buffered per instance for subscribers; a subscriber further behind ends with
    /// EVENTS_MISSED.
    #[arg(long, env = "HONCHO_EVENT_BUFFER", default_value_t = crate::store::events::DEFAULT_BUFFER)]
    pub event_buffer: usize,

    /// Answer introspection queries (GraphiQL's docs need them).
    #[arg(long, env = "HONCHO_INTROSPECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub introspection: bool,

    /// Longest a WebSocket may stay open before its `connection_init` arrives (milliseconds);
    /// then it is closed with 4408.
    #[arg(long, env = "HONCHO_WS_INIT_TIMEOUT_MS", default_value_t = 10_000)]
    pub ws_init_timeout_ms: u64,

    /// A connection must have sent a whole request head within this long of its accept, or of
    /// the first byte after an idle spell (milliseconds); else it is closed.
    #[arg(long, env = "HONCHO_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,

    /// A connection with no request in flight and nothing received for this long is closed
    /// (milliseconds).
    #[arg(long, env = "HONCHO_IDLE_TIMEOUT_MS", default_value_t = 75_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: u64,

    /// Longest a request may take before it is answered with 503 (milliseconds).
    #[arg(long, env = "HONCHO_REQUEST_TIMEOUT_MS", default_value_t = 60_000)]
    pub request_timeout_ms: u64,

    /// How often the server looks for tables whose planner statistics are stale and analyzes
    /// them, and for tables that grew since their last vacuum and vacuums them, when autovacuum
    /// is off or never did it (milliseconds; 0: never).
    #[arg(long, env = "HONCHO_ANALYZE_INTERVAL_MS", default_value_t = 10_000)]
    pub analyze_interval_ms: u64,

    /// How often the server merges the pending lists of its GIN indexes (full text, trigrams)
    /// into the indexes, so that searches read the index and not a long unsorted list
    /// (milliseconds; 0: never, leaving it to autovacuum and to the inserts that fill a list).
    #[arg(long, env = "HONCHO_GIN_FLUSH_INTERVAL_MS", default_value_t = 1_000)]
    pub gin_flush_interval_ms: u64,

    /// A built playground (a directory with index.html) to serve at `/` instead of the one
    /// built into the binary (for playground development).
    #[arg(long, env = "HONCHO_PLAYGROUND_DIR")]
    pub playground_dir: Option<PathBuf>,

    /// Browser origins allowed to call the server besides its own: exact origins separated by
    /// commas (`https://app.example.com,http://localhost:5173`), or `*` (auth on only).
    #[arg(long, env = "HONCHO_CORS_ORIGINS", default_value = "")]
    pub cors_origins: String,

    /// Host names the server answers besides IP literals and `localhost` (against DNS
    /// rebinding): exact names separated by commas (`api.example.com,honcho`), or `*` (auth on
    /// only).
    #[arg(long, env = "HONCHO_ALLOWED_HOSTS", default_value = "")]
    pub allowed_hosts: String,

    /// Most WebSockets open at once from one client address (TCP peer; behind a reverse proxy,
    /// the proxy's); 0: no cap.
    #[arg(long, env = "HONCHO_MAX_WEBSOCKETS_PER_ADDRESS",
          default_value_t = crate::http::DEFAULT_MAX_WEBSOCKETS_PER_ADDRESS)]
    pub max_websockets_per_address: usize,

    /// Strict mode: a manifest (JSON, sha256 → document) of the only documents that run.
    #[arg(long, env = "HONCHO_TRUSTED_DOCUMENTS")]
    pub trusted_documents: Option<PathBuf>,

    /// In strict mode, admin keys may still send any document.
    #[arg(long, env = "HONCHO_TRUSTED_DOCUMENTS_ADMIN", default_value_t = false, action = clap::ArgAction::Set)]
    pub trusted_documents_admin: bool,

    #[command(flatten)]
    pub reads: crate::store::replicas::ReadArgs,

    #[command(flatten)]
    pub auth: crate::auth::AuthArgs,

    #[command(flatten)]
    pub llm: crate::llm::LlmArgs,

    #[command(flatten)]
    pub deriver: crate::deriver::DeriverArgs,

    #[command(flatten)]
    pub webhooks: crate::webhook::WebhookArgs,
}

/// `honcho-graphql mcp`: MCP over stdio, with the server's configuration and the caller's key.
// No Debug: it holds a key.
#[derive(Args, Clone)]
pub struct McpConfig {
    #[command(flatten)]
    pub serve: ServeConfig,

    #[command(flatten)]
    pub stdio: crate::mcp::stdio::StdioArgs,
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, Command};

    use super::*;

    /// The variables `serve --help` lists.
    fn serve_variables() -> Vec<String> {
        // `mcp` takes serve's variables and its own two.
        let serve = McpConfig::augment_args(Command::new("serve"));
        // What clap checks when a command is built (unique argument ids, …).
        serve.clone().debug_assert();
        serve
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect()
    }

    /// The variables of docs/configuration.md's table that are ours: `RUST_LOG` is read by
    /// tracing's filter and the standard `OTEL_*` ones by the OpenTelemetry SDK, as their
    /// specifications say.
    fn documented_variables() -> Vec<String> {
        include_str!("../docs/configuration.md")
            .lines()
            .filter(|l| l.starts_with("| `"))
            .flat_map(|l| l.split('|').nth(1).unwrap_or("").split('/'))
            .map(|v| v.trim().trim_matches('`').to_owned())
            .filter(|v| v != "RUST_LOG" && !v.starts_with("OTEL_"))
            .collect()
    }

    #[test]
    fn serve_help_lists_every_documented_variable_and_no_other() {
        let (help, readme) = (serve_variables(), documented_variables());
        for var in ["HONCHO_EMBEDDER", "HONCHO_OPENAI_DIMS", "HONCHO_MODEL_DIR"] {
            assert!(help.iter().any(|h| h == var), "{var} missing from --help");
        }
        for var in &readme {
            assert!(
                help.contains(var),
                "{var} is in docs/configuration.md, not in --help"
            );
        }
        for var in &help {
            assert!(
                readme.contains(var),
                "{var} is in --help, not in docs/configuration.md"
            );
        }
    }

    #[test]
    fn a_search_beam_outside_pgvectors_bounds_is_refused_at_start() {
        let parse = |beam: &str| {
            crate::store::search::SearchArgs::augment_args(Command::new("serve"))
                .try_get_matches_from(["serve", "--search-beam", beam])
        };
        assert!(parse("300").is_ok());
        assert!(parse("40").is_ok());
        assert!(parse("39").is_err());
        assert!(parse("1001").is_err());
    }
}
