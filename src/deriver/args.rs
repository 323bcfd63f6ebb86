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

    /// Sessions get short and long summaries (a workspace's or session's
    /// `summary.enabled` overrides it).
    #[arg(long, env = "HONCHO_SUMMARY_ENABLED", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub summary_enabled: bool,

    /// A short summary every this many messages (`summary.messages_per_short_summary`).
    #[arg(long, env = "HONCHO_SUMMARY_MESSAGES_PER_SHORT", default_value_t = 20,
          value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub summary_messages_per_short: i64,

    /// A long summary every this many messages (`summary.messages_per_long_summary`).
    #[arg(long, env = "HONCHO_SUMMARY_MESSAGES_PER_LONG", default_value_t = 60,
          value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub summary_messages_per_long: i64,

    /// Most tokens of a short summary.
    #[arg(long, env = "HONCHO_SUMMARY_MAX_TOKENS_SHORT", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(50..=10_000))]
    pub summary_max_tokens_short: u32,

    /// Most tokens of a long summary.
    #[arg(long, env = "HONCHO_SUMMARY_MAX_TOKENS_LONG", default_value_t = 4000,
          value_parser = clap::value_parser!(u32).range(50..=20_000))]
    pub summary_max_tokens_long: u32,

    /// The deriver keeps peer cards (a workspace's or session's `peer_card.use` and
    /// `peer_card.create` override it).
    #[arg(long, env = "HONCHO_PEER_CARD_ENABLED", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub peer_card_enabled: bool,

    #[command(flatten)]
    pub dream: super::dream_args::DreamArgs,
}

impl DeriverArgs {
    /// The server's settings under every workspace's configuration.
    pub fn configuration_defaults(&self) -> crate::store::configuration::Defaults {
        crate::store::configuration::Defaults {
            peer_card: self.peer_card_enabled,
            summary: self.summary_enabled,
            messages_per_short_summary: self.summary_messages_per_short,
            messages_per_long_summary: self.summary_messages_per_long,
            ..Default::default()
        }
    }
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
        assert_eq!(
            d.configuration_defaults(),
            crate::store::configuration::Defaults::default()
        );
        assert_eq!(
            (d.summary_max_tokens_short, d.summary_max_tokens_long),
            (1000, 4000)
        );
    }
}
