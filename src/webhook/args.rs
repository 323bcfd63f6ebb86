//! The webhooks' flags: the signing secret, which targets may be called, and the delivery
//! worker's attempts, timeouts and pace.

use std::fmt;

use clap::Args;

use crate::store::webhook::WebhookPolicy;

/// Webhook delivery.
#[derive(Args, Clone)]
pub struct WebhookArgs {
    /// The secret every delivery is signed with (HMAC-SHA256; Honcho's `WEBHOOK_SECRET`). Without
    /// it endpoints can be registered and events are queued, but nothing is sent until it is set.
    #[arg(id = "webhook_secret", long = "webhook-secret", env = "HONCHO_WEBHOOK_SECRET")]
    pub secret: Option<String>,

    /// Accept webhook URLs on loopback, private, link-local and reserved addresses, and deliver
    /// to names that resolve to them (tests and local development only).
    #[arg(long = "webhook-allow-private", env = "HONCHO_WEBHOOK_ALLOW_PRIVATE",
          default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_private: bool,

    /// Most webhook endpoints one workspace may register (Honcho's WEBHOOK_MAX_WORKSPACE_LIMIT).
    #[arg(long = "webhook-max-endpoints", env = "HONCHO_WEBHOOK_MAX_ENDPOINTS",
          default_value_t = crate::store::webhook::DEFAULT_MAX_ENDPOINTS)]
    pub max_endpoints: usize,

    /// Delivery workers inside this process (0 = none: events stay queued).
    #[arg(
        id = "webhook_workers",
        long = "webhook-workers",
        env = "HONCHO_WEBHOOK_WORKERS",
        default_value_t = 1
    )]
    pub workers: u32,

    /// Attempts per delivery before it is dead-lettered.
    #[arg(long = "webhook-max-attempts", env = "HONCHO_WEBHOOK_MAX_ATTEMPTS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,

    /// Wait after the first failed attempt (milliseconds); each later wait doubles.
    #[arg(long = "webhook-backoff-ms", env = "HONCHO_WEBHOOK_BACKOFF_MS", default_value_t = 5_000)]
    pub backoff_ms: u64,

    /// Longest wait between two attempts (milliseconds).
    #[arg(
        long = "webhook-max-backoff-ms",
        env = "HONCHO_WEBHOOK_MAX_BACKOFF_MS",
        default_value_t = 3_600_000
    )]
    pub max_backoff_ms: u64,

    /// Longest one attempt may take, connecting and answering included (milliseconds).
    #[arg(long = "webhook-timeout-ms", env = "HONCHO_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,

    /// How often an idle worker looks for due deliveries (milliseconds).
    #[arg(
        id = "webhook_poll_ms",
        long = "webhook-poll-ms",
        env = "HONCHO_WEBHOOK_POLL_MS",
        default_value_t = 500
    )]
    pub poll_ms: u64,

    /// Deliveries one worker claims and sends at once.
    #[arg(long = "webhook-batch", env = "HONCHO_WEBHOOK_BATCH", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub batch: u32,

    /// Delivered and dead deliveries are deleted this long after they were queued (hours).
    #[arg(
        long = "webhook-retention-hours",
        env = "HONCHO_WEBHOOK_RETENTION_HOURS",
        default_value_t = 168
    )]
    pub retention_hours: u64,
}

// By hand: the secret is never printed.
impl fmt::Debug for WebhookArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookArgs")
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("allow_private", &self.allow_private)
            .field("max_endpoints", &self.max_endpoints)
            .field("workers", &self.workers)
            .field("max_attempts", &self.max_attempts)
            .field("backoff_ms", &self.backoff_ms)
            .field("max_backoff_ms", &self.max_backoff_ms)
            .field("timeout_ms", &self.timeout_ms)
            .field("poll_ms", &self.poll_ms)
            .field("batch", &self.batch)
            .field("retention_hours", &self.retention_hours)
            .finish()
    }
}

impl WebhookArgs {
    /// What the store checks when an endpoint is registered.
    pub fn policy(&self) -> WebhookPolicy {
        WebhookPolicy {
            allow_private: self.allow_private,
            max_endpoints: self.max_endpoints,
        }
    }
}

impl Default for WebhookArgs {
    /// The flags' defaults (the environment is not read): stated once, above.
    fn default() -> Self {
        crate::flags::given(&[]).expect("the webhooks' defaults parse")
    }
}
