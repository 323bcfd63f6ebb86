//! The deriver's Prometheus counters, rendered with the GraphQL ones at `/metrics`.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts, Registry};

pub(crate) struct Metrics {
    registry: Registry,
    /// Batches by outcome: ok, failed, lease_lost.
    pub batches: IntCounterVec,
    /// Queued messages (per observer) taken off the queue by a successful batch.
    pub messages: IntCounterVec,
    /// Conclusions by level and result: created, reinforced, refused.
    pub conclusions: IntCounterVec,
    /// LLM calls by pass (explicit, reasoning), output mode and outcome.
    pub llm_calls: IntCounterVec,
    /// Premises the model named that it had not been shown (dropped).
    pub unknown_sources: IntCounterVec,
    /// Summary steps by kind (short, long) and outcome (ok, failed, lease_lost).
    pub summaries: IntCounterVec,
    /// Peer card updates by result (written, unchanged, refused entries).
    pub cards: IntCounterVec,
    /// Dreams by outcome: ok, failed, lease_lost.
    pub dreams: IntCounterVec,
}

impl Metrics {
    /// A batch that ended as `outcome` (ok or failed) with its `messages` queued messages.
    pub fn batch_ended(&self, outcome: &str, messages: usize) {
        self.batches.with_label_values(&[outcome]).inc();
        self.messages
            .with_label_values(&[outcome])
            .inc_by(messages as u64);
    }
}

pub(crate) fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("register once");
            c
        };
        Metrics {
            batches: counter(
                "honcho_deriver_batches_total",
                "Deriver batches by outcome (ok, failed, lease_lost)",
                &["outcome"],
            ),
            messages: counter(
                "honcho_deriver_messages_total",
                "Queued messages (one per observer) the deriver has processed",
                &["outcome"],
            ),
            conclusions: counter(
                "honcho_deriver_conclusions_total",
                "Conclusions the deriver produced, by level and result (created, reinforced, refused)",
                &["level", "result"],
            ),
            dreams: counter(
                "honcho_deriver_dreams_total",
                "Dreams (memory consolidation) by outcome (ok, failed, lease_lost)",
                &["outcome"],
            ),
            llm_calls: counter(
                "honcho_deriver_llm_calls_total",
                "LLM calls by pass, output mode and outcome",
                &["pass", "mode", "outcome"],
            ),
            unknown_sources: counter(
                "honcho_deriver_unknown_sources_total",
                "Premises a model cited that it had not been shown (dropped)",
                &["pass"],
            ),
            summaries: counter(
                "honcho_deriver_summaries_total",
                "Session summaries by kind (short, long) and outcome (ok, failed, lease_lost)",
                &["kind", "outcome"],
            ),
            cards: counter(
                "honcho_deriver_peer_card_total",
                "Peer card updates by result (written, unchanged) and card entries refused",
                &["result"],
            ),
            registry,
        }
    })
}

/// The deriver's metrics, for `/metrics`.
pub fn gather() -> Vec<prometheus::proto::MetricFamily> {
    metrics().registry.gather()
}
