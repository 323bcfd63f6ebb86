//! Webhook delivery: workers that send the outbox's due deliveries (`store::webhook::outbox`)
//! as signed JSON POSTs, and retry them with exponential backoff until they are dead-lettered.
//!
//! A worker claims a batch (a lease: `FOR UPDATE SKIP LOCKED`, the attempt counted), sends each
//! delivery with a deadline and records the outcome under its claim. A process killed mid-batch
//! loses nothing: the rows are due again when their lease ends, and are sent again with the same
//! delivery id and body (at least once; receivers deduplicate by id). Targets are checked at
//! every attempt: the URL again, and each address a name resolves to ([`guard`]), so DNS that
//! changes after registration cannot point a delivery at the server's own network.

pub mod args;
mod guard;
pub mod metrics;
pub mod sign;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::watch;

use crate::store::webhook::{DueDelivery, target};
use crate::store::{Store, StoreResult};
use crate::workers::Worker;
pub use args::WebhookArgs;

/// Most bytes of a receiver's answer read (kept as the delivery's last error when it failed);
/// the rest is never read.
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// How often the delivered and dead rows past their retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What one attempt came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    Retry,
    Dead,
    LeaseLost,
}

/// The delivery workers' shared state: the store, the settings, the secret and the HTTP client.
pub struct Webhooks {
    store: Store,
    args: WebhookArgs,
    secret: Vec<u8>,
    client: reqwest::Client,
}

impl Webhooks {
    /// None without a secret: nothing can be signed, so nothing is sent.
    pub fn new(store: Store, args: WebhookArgs) -> Option<Webhooks> {
        let secret = args.secret.clone()?.into_bytes();
        let timeout = Duration::from_millis(args.timeout_ms);
        let client = crate::outbound::client_builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A redirect would reach a URL nobody registered; a proxy would resolve names
            // past the address check.
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(guard::CheckedResolver {
                allow_private: args.allow_private,
            })
            .build()
            .expect("a reqwest client builds once a crypto provider is installed");
        Some(Webhooks {
            store,
            args,
            secret,
            client,
        })
    }

    /// The lease a claim takes: longer than an attempt may last.
    fn lease(&self) -> Duration {
        Duration::from_millis(self.args.timeout_ms) * 2 + Duration::from_secs(5)
    }

    /// The wait before attempt `attempts + 1`, after `attempts` failed: the first backoff,
    /// doubled per attempt, capped, with up to a tenth added at random so that deliveries that
    /// failed together do not come back together.
    pub fn backoff(&self, attempts: i32) -> Duration {
        let doublings = attempts.saturating_sub(1).clamp(0, 30) as u32;
        let base = self
            .args
            .backoff_ms
            .saturating_mul(1u64 << doublings)
            .min(self.args.max_backoff_ms);
        let jitter = (base / 10).max(1);
        Duration::from_millis(base + nanoid_jitter(jitter))
    }

    /// Claims one batch of due deliveries and sends them concurrently; returns their outcomes
    /// (empty when nothing was due).
    pub async fn run_once(&self, worker: &str) -> StoreResult<Vec<Outcome>> {
        let due = self
            .store
            .claim_deliveries(worker, self.args.batch, self.lease())
            .await?;
        let outcomes = futures::stream::iter(due)
            .map(|d| async move { self.attempt(&d).await })
            .buffer_unordered(self.args.batch as usize)
            .collect::<Vec<_>>()
            .await;
        outcomes.into_iter().collect()
    }

    async fn attempt(&self, d: &DueDelivery) -> StoreResult<Outcome> {
        let result = self.send(d).await;
        let m = &metrics::metrics().attempts;
        let outcome = match result {
            Ok(status) => {
                if self.store.delivery_succeeded(d, status).await? {
                    Outcome::Delivered
                } else {
                    Outcome::LeaseLost
                }
            }
            Err((status, error)) => {
                let retry_in =
                    (d.attempts < self.args.max_attempts as i32).then(|| self.backoff(d.attempts));
                let dead = retry_in.is_none();
                if !self
                    .store
                    .delivery_failed(d, status, &error, retry_in)
                    .await?
                {
                    Outcome::LeaseLost
                } else if dead {
                    tracing::warn!(delivery = %d.id, workspace = %d.workspace, url = %d.url,
                        attempts = d.attempts, error = %error, "webhook delivery dead-lettered");
                    Outcome::Dead
                } else {
                    tracing::info!(delivery = %d.id, url = %d.url, attempts = d.attempts,
                        error = %error, ?retry_in, "webhook delivery failed; will retry");
                    Outcome::Retry
                }
            }
        };
        let label = match outcome {
            Outcome::Delivered => "delivered",
            Outcome::Retry => "retry",
            Outcome::Dead => "dead",
            Outcome::LeaseLost => "lease_lost",
        };
        m.with_label_values(&[label]).inc();
        Ok(outcome)
    }

    /// One POST: the 2xx status, or the status (when one came back) and what went wrong.
    async fn send(&self, d: &DueDelivery) -> Result<u16, (Option<u16>, String)> {
        // Checked again: the URL was registered under the settings of that time.
        target::check_url(&d.url, self.args.allow_private).map_err(|e| (None, e.to_string()))?;
        let timestamp = chrono::Utc::now().timestamp();
        let (signature, timestamped) = sign::signatures(&self.secret, timestamp, &d.body);
        let response = self
            .client
            .post(&d.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::USER_AGENT, "honcho-graphql-webhooks")
            .header(sign::DELIVERY_ID, &d.id)
            .header(sign::EVENT, &d.event_type)
            .header(sign::TIMESTAMP, timestamp.to_string())
            .header(sign::SIGNATURE, signature)
            .header(sign::TIMESTAMPED_SIGNATURE, timestamped)
            .body(d.body.clone())
            .send()
            .await
            .map_err(|e| (None, describe(&e)))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(status);
        }
        let head = read_capped(response).await;
        Err((Some(status), format!("HTTP {status}: {head}")))
    }

    async fn prune(&self) {
        let age = Duration::from_secs(self.args.retention_hours.saturating_mul(3600));
        match self.store.prune_deliveries(age, 10_000).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deleted = n, "webhooks: old deliveries pruned"),
            Err(e) => tracing::warn!(error = %e, "webhooks: pruning old deliveries failed"),
        }
    }
}

impl Worker for Webhooks {
    const KIND: &'static str = "webhook";

    /// One worker: rounds of [`Webhooks::run_once`], resting `poll_ms` after a round that found
    /// nothing due, until `shutdown`; the first also prunes old rows.
    async fn work(self: Arc<Self>, name: String, index: u32, mut shutdown: watch::Receiver<bool>) {
        let prunes = index == 0;
        let poll = Duration::from_millis(self.args.poll_ms.max(10));
        let mut pruned = Instant::now();
        while !*shutdown.borrow() {
            let idle = tokio::select! {
                r = self.run_once(&name) => r.map(|outcomes| outcomes.is_empty()).unwrap_or_else(|e| {
                    tracing::error!(worker = %name, error = %e, "webhooks: outbox error");
                    true
                }),
                _ = shutdown.changed() => break,
            };
            if prunes && pruned.elapsed() >= PRUNE_EVERY {
                pruned = Instant::now();
                self.prune().await;
            }
            if idle {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = shutdown.changed() => break,
                }
            }
        }
    }
}

/// Up to [`MAX_RESPONSE_BYTES`] of the answer's body, as text.
async fn read_capped(mut response: reqwest::Response) -> String {
    let mut head = Vec::new();
    while head.len() < MAX_RESPONSE_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => head.extend_from_slice(&chunk),
            _ => break,
        }
    }
    head.truncate(MAX_RESPONSE_BYTES);
    String::from_utf8_lossy(&head).into_owned()
}

/// reqwest's error with its causes (the refused address is a cause).
fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// A number in `0..bound`, from a random id (no extra crate for one jitter).
fn nanoid_jitter(bound: u64) -> u64 {
    let id = nanoid::nanoid!(8);
    let n = id.bytes().fold(0u64, |acc, b| {
        acc.wrapping_mul(131).wrapping_add(u64::from(b))
    });
    n % bound
}
