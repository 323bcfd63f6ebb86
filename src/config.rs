//! Server configuration, from the environment (every variable is listed in docs/configuration.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct DbConfig {
    /// PostgreSQL connection URL.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/honcho"
    )]
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
    pub embedder: EmbedderConfig,
}

/// The embedder. Values are checked when the embedder is configured
/// ([`crate::embed::EmbedConfig::from_settings`]), with messages naming the variable; a
/// variable set to blank counts as unset.
#[derive(Args, Clone, Default)]
pub struct EmbedderConfig {
    /// `minilm` (in-process all-MiniLM-L6-v2, 384 dimensions), `openai` (any OpenAI-compatible
    /// /v1/embeddings) or `none` (full-text search only).
    #[arg(
        id = "embedder",
        long = "embedder",
        value_name = "KIND",
        env = "HONCHO_EMBEDDER",
        default_value = "minilm"
    )]
    pub kind: String,

    /// MiniLM model directory (config.json, tokenizer.json, model.safetensors)
    /// [default: .data/models/all-MiniLM-L6-v2, in the working directory or else the source tree]
    #[arg(long = "model-dir", env = "HONCHO_MODEL_DIR")]
    pub model_dir: Option<String>,

    /// OpenAI-compatible base URL; `/embeddings` is appended.
    #[arg(
        long = "openai-base-url",
        env = "HONCHO_OPENAI_BASE_URL",
        default_value = crate::embed::DEFAULT_OPENAI_BASE_URL
    )]
    pub openai_base_url: String,

    /// Embedding model name sent in requests.
    #[arg(
        long = "openai-model",
        env = "HONCHO_OPENAI_MODEL",
        default_value = crate::embed::DEFAULT_OPENAI_MODEL
    )]
    pub openai_model: String,

    /// Bearer token of the embeddings endpoint (optional).
    #[arg(
        long = "openai-api-key",
        env = "HONCHO_OPENAI_API_KEY",
        hide_env_values = true
    )]
    pub openai_api_key: Option<String>,

    /// Vector length [default: the model's, known for OpenAI's models (1536 for
    /// text-embedding-3-small), else required]
    #[arg(long = "openai-dims", env = "HONCHO_OPENAI_DIMS")]
    pub openai_dims: Option<String>,

    /// Timeout of one embeddings request, in seconds (may be fractional).
    #[arg(
        long = "openai-timeout-secs",
        env = "HONCHO_OPENAI_TIMEOUT_SECS",
        default_value = "30"
    )]
    pub openai_timeout_secs: String,

    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors (0..=10).
    #[arg(
        long = "openai-max-retries",
        env = "HONCHO_OPENAI_MAX_RETRIES",
        default_value = "3"
    )]
    pub openai_max_retries: String,
}

impl std::fmt::Debug for EmbedderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret; what the embedder is, is enough to tell configurations apart.
        f.debug_struct("EmbedderConfig")
            .field("kind", &self.kind)
            .field("openai_model", &self.openai_model)
            .finish_non_exhaustive()
    }
}

impl EmbedderConfig {
    /// The embedder's settings from the environment alone, with the same parser as the command
    /// line (for the tests and the bench, which have no command line of their own).
    pub fn from_env() -> Result<Self, clap::Error> {
        #[derive(clap::Parser)]
        struct Env {
            #[command(flatten)]
            embedder: EmbedderConfig,
        }
        Ok(<Env as clap::Parser>::try_parse_from(["honcho-graphql"])?.embedder)
    }
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
    #[arg(
        long,
        env = "HONCHO_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = 100
    )]
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
    pub reads: ReadConfig,

    #[command(flatten)]
    pub auth: AuthConfig,

    #[command(flatten)]
    pub llm: LlmConfig,

    #[command(flatten)]
    pub deriver: DeriverConfig,
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

#[derive(Args, Clone)]
pub struct AuthConfig {
    /// Secret that signs API keys (HS256). Unset: auth is off and every request is an admin.
    #[arg(
        long = "auth-secret",
        env = "HONCHO_AUTH_SECRET",
        hide_env_values = true
    )]
    pub secret: Option<String>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = self.secret.as_ref().map(|_| "***");
        f.debug_struct("AuthConfig")
            .field("secret", &secret)
            .finish()
    }
}

impl AuthConfig {
    pub fn auth(&self) -> Result<crate::auth::Auth, crate::auth::EmptySecret> {
        crate::auth::Auth::from_secret(self.secret.as_deref())
    }
}

/// Which LLM the deriver asks (`HONCHO_LLM`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LlmKind {
    /// No LLM: nothing is queued for derivation and no worker runs.
    #[default]
    None,
    /// Any OpenAI-compatible `POST {base}/chat/completions` (OpenAI, llama.cpp, vLLM, Ollama).
    Openai,
}

#[derive(Args, Clone)]
pub struct LlmConfig {
    /// `none` (default: no derivation) or `openai` (any OpenAI-compatible chat endpoint).
    #[arg(long = "llm", env = "HONCHO_LLM", value_enum, default_value_t = LlmKind::None)]
    pub kind: LlmKind,

    /// Base URL up to and including the version; `/chat/completions` is appended.
    #[arg(
        long = "llm-base-url",
        env = "HONCHO_LLM_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub base_url: String,

    /// Model name sent in requests.
    #[arg(
        long = "llm-model",
        env = "HONCHO_LLM_MODEL",
        default_value = "gpt-4o-mini"
    )]
    pub model: String,

    /// Bearer token (optional: local servers need none).
    #[arg(
        long = "llm-api-key",
        env = "HONCHO_LLM_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,

    /// Timeout of one attempt, in seconds. Local models on a CPU are slow: be generous.
    #[arg(
        long = "llm-timeout-secs",
        env = "HONCHO_LLM_TIMEOUT_SECS",
        default_value_t = 120.0
    )]
    pub timeout_secs: f64,

    /// Retries after the first attempt on 408, 429, 5xx, timeouts and connection errors.
    #[arg(long = "llm-max-retries", env = "HONCHO_LLM_MAX_RETRIES", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(0..=10))]
    pub max_retries: u32,

    /// Most requests in flight at once from this process.
    #[arg(long = "llm-concurrency", env = "HONCHO_LLM_CONCURRENCY", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("timeout_secs", &self.timeout_secs)
            .field("max_retries", &self.max_retries)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

/// Read replicas (docs/scale-out.md).
#[derive(Args, Clone, Debug)]
pub struct ReadConfig {
    /// Streaming replicas of DATABASE_URL that answer the reads of queries, separated by commas.
    #[arg(long, env = "HONCHO_READ_DATABASE_URL", value_delimiter = ',')]
    pub read_database_url: Vec<String>,

    /// A replica further behind the primary than this (milliseconds) takes no reads.
    #[arg(long, env = "HONCHO_MAX_REPLICA_LAG_MS", default_value_t = 1_000)]
    pub max_replica_lag_ms: u64,

    /// Longest a read with `x-honcho-after` waits for a replica to replay that position before
    /// the primary answers it (milliseconds).
    #[arg(long, env = "HONCHO_REPLICA_WAIT_MS", default_value_t = 50)]
    pub replica_wait_ms: u64,
}

impl ReadConfig {
    /// The replica URLs given (blanks between commas ignored).
    pub fn urls(&self) -> Vec<String> {
        self.read_database_url
            .iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect()
    }
}

/// The deriver's queue and workers.
#[derive(Args, Clone, Debug)]
pub struct DeriverConfig {
    /// Deriver workers inside this process (0 = none; `honcho-graphql deriver` runs them alone).
    /// Without an LLM (HONCHO_LLM=none) none run.
    #[arg(
        long = "deriver-workers",
        env = "HONCHO_DERIVER_WORKERS",
        default_value_t = 1
    )]
    pub workers: u32,

    /// A work unit is ready once its pending messages hold this many tokens...
    #[arg(
        long = "deriver-batch-tokens",
        env = "HONCHO_DERIVER_BATCH_TOKENS",
        default_value_t = 1024
    )]
    pub batch_tokens: i64,

    /// ...or once its oldest pending message has waited this long (seconds).
    #[arg(
        long = "deriver-batch-secs",
        env = "HONCHO_DERIVER_BATCH_SECS",
        default_value_t = 10.0
    )]
    pub batch_secs: f64,

    /// Most tokens of messages one LLM call reads (the batch is cut to fit).
    #[arg(
        long = "deriver-max-input-tokens",
        env = "HONCHO_DERIVER_MAX_INPUT_TOKENS",
        default_value_t = 4096
    )]
    pub max_input_tokens: i64,

    /// How long a claimed unit stays a worker's; a crashed worker's unit is claimed again after
    /// it (seconds). Must exceed the time one batch takes (two LLM calls with retries).
    #[arg(
        long = "deriver-lease-secs",
        env = "HONCHO_DERIVER_LEASE_SECS",
        default_value_t = 600.0
    )]
    pub lease_secs: f64,

    /// How often an idle worker looks for ready work (milliseconds).
    #[arg(
        long = "deriver-poll-ms",
        env = "HONCHO_DERIVER_POLL_MS",
        default_value_t = 500
    )]
    pub poll_ms: u64,

    /// A new explicit fact at least this similar (cosine) to a live explicit conclusion of the
    /// same observer and observed reinforces it instead of being stored again.
    #[arg(
        long = "deriver-dedup-similarity",
        env = "HONCHO_DERIVER_DEDUP_SIMILARITY",
        default_value_t = 0.92
    )]
    pub dedup_similarity: f64,
}

impl Default for DeriverConfig {
    fn default() -> Self {
        DeriverConfig {
            workers: 1,
            batch_tokens: 1024,
            batch_secs: 10.0,
            max_input_tokens: 4096,
            lease_secs: 600.0,
            poll_ms: 500,
            dedup_similarity: 0.92,
        }
    }
}

/// The embedder's settings from `flags` alone: the environment of the test run is not read.
#[cfg(test)]
pub(crate) fn embedder_from_flags(flags: &[&str]) -> EmbedderConfig {
    use clap::{CommandFactory as _, FromArgMatches as _};
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        embedder: EmbedderConfig,
    }
    let matches = Cli::command()
        .mut_args(|a| a.env(None::<&'static str>))
        .try_get_matches_from(std::iter::once("honcho-graphql").chain(flags.iter().copied()))
        .unwrap();
    Cli::from_arg_matches(&matches).unwrap().embedder
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
    fn every_embedder_variable_is_a_flag_too_and_a_blank_value_is_unset() {
        let settings = embedder_from_flags(&["--embedder=none", "--openai-dims= "]);
        assert_eq!(settings.kind, "none");
        let cfg = crate::embed::EmbedConfig::from_settings(&settings).unwrap();
        assert_eq!(cfg.kind, crate::embed::EmbedderKind::None);
        assert_eq!(cfg.openai_dims, 1536, "blank dims: the default model's");
    }
}
