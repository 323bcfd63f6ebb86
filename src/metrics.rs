//! Prometheus metrics per operation an API executes (a GraphQL operation, an MCP tool call as
//! `mcp.<tool>`): request counts by outcome and latency histograms, rendered at `/metrics`. The
//! series keep their GraphQL names (`honcho_graphql_*`), which dashboards already read.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// Distinct operation names get their own label up to this many; later ones count as "other",
/// so clients cannot blow up the number of series.
const MAX_OPERATION_LABELS: usize = 200;
/// Longest operation name used as a label; longer ones count as "other".
const MAX_LABEL_LEN: usize = 64;

struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    seen: Mutex<HashSet<String>>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "honcho_graphql_requests_total",
                "GraphQL operations executed, by operation name and outcome",
            ),
            &["operation", "outcome"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "honcho_graphql_request_duration_seconds",
                "Time to execute a GraphQL operation",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &["operation"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(requests.clone()))
            .expect("register once");
        registry
            .register(Box::new(latency.clone()))
            .expect("register once");
        Metrics {
            registry,
            requests,
            latency,
            seen: Mutex::new(HashSet::new()),
        }
    })
}

/// The label of an operation: its name once an operation of that name has succeeded (a name
/// that only ever fails, from a client probing or a typo, never becomes a series), at most
/// [`MAX_LABEL_LEN`] bytes and [`MAX_OPERATION_LABELS`] distinct names; "other" otherwise.
fn label(operation: Option<&str>, ok: bool) -> String {
    let Some(name) = operation.filter(|n| !n.is_empty()) else {
        return "anonymous".into();
    };
    if name.len() > MAX_LABEL_LEN {
        return "other".into();
    }
    let mut seen = metrics().seen.lock().unwrap_or_else(|e| e.into_inner());
    if seen.contains(name) {
        return name.to_owned();
    }
    if ok && seen.len() < MAX_OPERATION_LABELS {
        seen.insert(name.to_owned());
        return name.to_owned();
    }
    "other".into()
}

/// The text exposition format of every metric.
pub fn render() -> String {
    encode(&metrics().registry.gather())
}

/// `families` in the text exposition format.
pub fn encode(families: &[prometheus::proto::MetricFamily]) -> String {
    let mut out = Vec::new();
    if TextEncoder::new().encode(families, &mut out).is_err() {
        return String::new();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Counts and times one executed operation under its name (for GraphQL, see
/// `graphql::metrics::operation`).
///
/// Recorded around execution rather than by a schema extension: with any extension installed,
/// async-graphql resolves every field on a slower path (a registry lookup and the extension chain
/// per field): without one, the process's CPU for the same requests with many fields fell by a
/// third, 9.1 / 7.4 s to 6.1 / 4.5 s (bench/history/2026-12.md, "What the profile showed, and what
/// changed").
pub fn observe(operation: Option<&str>, ok: bool, elapsed: Duration) {
    let op = label(operation, ok);
    let outcome = if ok { "ok" } else { "error" };
    let m = metrics();
    m.requests.with_label_values(&[op.as_str(), outcome]).inc();
    m.latency
        .with_label_values(&[op.as_str()])
        .observe(elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_seen_to_succeed_and_short_enough_become_labels() {
        let failing = "OnlyEverFailsProbe";
        observe(Some(failing), false, Duration::ZERO);
        let long = "L".repeat(MAX_LABEL_LEN + 1);
        observe(Some(&long), true, Duration::ZERO);
        let text = render();
        assert!(!text.contains(failing), "a failing name is no label");
        assert!(!text.contains(&long), "a long name is no label");
        observe(Some("SucceedsThenFails"), true, Duration::ZERO);
        observe(Some("SucceedsThenFails"), false, Duration::ZERO);
        let text = render();
        assert!(text.contains(r#"operation="SucceedsThenFails",outcome="error""#));
    }
}
