//! Server configuration, from the environment (every variable is listed in the README).

use std::net::SocketAddr;

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

    /// Connection for the event listener (one per instance, LISTEN needs a session of its own);
    /// defaults to DATABASE_URL. Point it at PostgreSQL itself (or a session-mode pool) when
    /// DATABASE_URL goes through PgBouncer in transaction mode.
    #[arg(long, env = "HONCHO_EVENTS_DATABASE_URL")]
    pub events_database_url: Option<String>,

    /// Events buffered per instance for subscribers; a subscriber further behind ends with
    /// EVENTS_MISSED.
    #[arg(long, env = "HONCHO_EVENT_BUFFER", default_value_t = crate::store::events::DEFAULT_BUFFER)]
    pub event_buffer: usize,
}
