//! The deriver's flags: its queue's batching and its workers.

use clap::Args;

/// The deriver's queue and workers.
#[derive(Args, Clone, Debug)]
pub struct DeriverArgs {
    /// Deriver workers inside this process (0 = none; `honcho-graphql deriver` runs them alone).
    /// Without an LLM (HONCHO_LLM=none) none run.
    #[arg(long = "deriver-workers", env = "HONCHO_DERIVER_WORKERS", default_value_t = 1)]
    pub workers: u32,

    /// A work unit is ready once its pending messages hold this many tokens...
    #[arg(
        long = "deriver-batch-tokens",
        env = "HONCHO_DERIVER_BATCH_TOKENS",
        default_value_t = 1024
    )]
    pub batch_tokens: i64,

    /// ...or once its oldest pending message has waited this long (seconds).
    #[arg(long = "deriver-batch-secs", env = "HONCHO_DERIVER_BATCH_SECS", default_value_t = 10.0)]
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
    #[arg(long = "deriver-lease-secs", env = "HONCHO_DERIVER_LEASE_SECS", default_value_t = 600.0)]
    pub lease_secs: f64,

    /// How often an idle worker looks for ready work (milliseconds).
    #[arg(long = "deriver-poll-ms", env = "HONCHO_DERIVER_POLL_MS", default_value_t = 500)]
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

impl Default for DeriverArgs {
    /// The flags' defaults (the environment is not read): stated once, above.
    fn default() -> Self {
        crate::flags::given(&[]).expect("the deriver's defaults parse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_flags_defaults() {
        let d = DeriverArgs::default();
        assert_eq!(
            (d.workers, d.batch_tokens, d.max_input_tokens),
            (1, 1024, 4096)
        );
        assert_eq!((d.batch_secs, d.lease_secs, d.poll_ms), (10.0, 600.0, 500));
        assert_eq!(d.dedup_similarity, 0.92);
    }
}
