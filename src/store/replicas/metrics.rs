//! The read pool's Prometheus metrics, one registry per pool (rendered at `/metrics`).

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

pub(super) struct Metrics {
    pub registry: Registry,
    up: IntGaugeVec,
    lag: GaugeVec,
    statements: IntCounterVec,
    fallbacks: IntCounterVec,
    /// Requests by where their reads went (replica, primary) and why.
    pub routes: IntCounterVec,
    /// How long requests with a consistency token waited for a replica to replay it.
    pub token_wait: Histogram,
}

/// One replica's series.
pub(super) struct ReplicaSeries {
    pub up: IntGauge,
    pub lag: Gauge,
    pub statements: IntCounter,
    pub fallbacks: IntCounter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        fn add<M: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: M) -> M {
            r.register(Box::new(m.clone())).expect("register once");
            m
        }
        let labels = &["replica"];
        Metrics {
            up: add(
                &registry,
                IntGaugeVec::new(
                    Opts::new(
                        "honcho_replica_up",
                        "1 while the replica takes reads (answers, is a standby, within the lag limit)",
                    ),
                    labels,
                )
                .unwrap(),
            ),
            lag: add(
                &registry,
                GaugeVec::new(
                    Opts::new(
                        "honcho_replica_lag_seconds",
                        "How long ago the primary first had WAL the replica has not replayed",
                    ),
                    labels,
                )
                .unwrap(),
            ),
            statements: add(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "honcho_replica_statements_total",
                        "Statements of requests the replica answered",
                    ),
                    labels,
                )
                .unwrap(),
            ),
            fallbacks: add(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "honcho_replica_fallbacks_total",
                        "Statements that failed on the replica and ran on the primary",
                    ),
                    labels,
                )
                .unwrap(),
            ),
            routes: add(
                &registry,
                IntCounterVec::new(
                    Opts::new(
                        "honcho_read_routes_total",
                        "Read requests by where their reads went (target) and why (reason)",
                    ),
                    &["target", "reason"],
                )
                .unwrap(),
            ),
            token_wait: add(
                &registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "honcho_consistency_wait_seconds",
                        "Time a request with x-honcho-after spent finding a replica that had replayed it",
                    )
                    .buckets(vec![0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]),
                )
                .unwrap(),
            ),
            registry,
        }
    }

    pub fn replica(&self, name: &str) -> ReplicaSeries {
        ReplicaSeries {
            up: self.up.with_label_values(&[name]),
            lag: self.lag.with_label_values(&[name]),
            statements: self.statements.with_label_values(&[name]),
            fallbacks: self.fallbacks.with_label_values(&[name]),
        }
    }
}
