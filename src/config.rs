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
