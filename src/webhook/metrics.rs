//! The delivery worker's Prometheus counters, rendered with the others at `/metrics`.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts, Registry};

pub(crate) struct Metrics {
    registry: Registry,
    /// Attempts by outcome: delivered, retry (failed, due again), dead (failed, no attempt left),
    /// lease_lost (the outcome came after another worker took the delivery).
    pub attempts: IntCounterVec,
}

pub(crate) fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = Registry::new();
        let attempts = IntCounterVec::new(
            Opts::new(
                "honcho_webhook_attempts_total",
                "Webhook delivery attempts by outcome (delivered, retry, dead, lease_lost)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(attempts.clone()))
            .expect("register once");
        // Shown at 0 before the first attempt, so an alert on dead letters has a series.
        for outcome in ["delivered", "retry", "dead", "lease_lost"] {
            attempts.with_label_values(&[outcome]);
        }
        Metrics { registry, attempts }
    })
}

/// The webhooks' metrics, for `/metrics`.
pub fn gather() -> Vec<prometheus::proto::MetricFamily> {
    metrics().registry.gather()
}
