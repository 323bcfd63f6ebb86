//! Server configuration, from the environment (every variable is listed in the README).

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

    /// Most complex query accepted (async-graphql's complexity: one per field by default).
    #[arg(long, env = "HONCHO_MAX_COMPLEXITY", default_value_t = 20_000)]
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

    /// Longest a request may take before it is answered with 503 (milliseconds).
    #[arg(long, env = "HONCHO_REQUEST_TIMEOUT_MS", default_value_t = 60_000)]
    pub request_timeout_ms: u64,

    /// A built playground (a directory with index.html) to serve at `/` instead of the one
    /// built into the binary (for playground development).
    #[arg(long, env = "HONCHO_PLAYGROUND_DIR")]
    pub playground_dir: Option<PathBuf>,

    /// Browser origins allowed to call the server besides its own: exact origins separated by
    /// commas (`https://app.example.com,http://localhost:5173`), or `*` (auth on only).
    #[arg(long, env = "HONCHO_CORS_ORIGINS", default_value = "")]
    pub cors_origins: String,

    /// Strict mode: a manifest (JSON, sha256 → document) of the only documents that run.
    #[arg(long, env = "HONCHO_TRUSTED_DOCUMENTS")]
    pub trusted_documents: Option<PathBuf>,

    /// In strict mode, admin keys may still send any document.
    #[arg(long, env = "HONCHO_TRUSTED_DOCUMENTS_ADMIN", default_value_t = false, action = clap::ArgAction::Set)]
    pub trusted_documents_admin: bool,

    #[command(flatten)]
    pub auth: AuthConfig,
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
    pub fn auth(&self) -> anyhow::Result<crate::auth::Auth> {
        crate::auth::Auth::from_secret(self.secret.as_deref())
    }
}
