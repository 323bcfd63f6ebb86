//! The read replicas' flags (docs/scale-out.md).

use clap::Args;

/// Read replicas (docs/scale-out.md).
#[derive(Args, Clone, Debug)]
pub struct ReadArgs {
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

impl ReadArgs {
    /// The replica URLs given (blanks between commas ignored).
    pub fn urls(&self) -> Vec<String> {
        self.read_database_url
            .iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect()
    }
}
