//! The listener's health: connections open and accepted, accept errors, connections closed by
//! the header-read or idle timeout, and file descriptors against the process's limit. Rendered at
//! `/metrics`; `/ready` reports it and answers 503 when descriptors run short, since a process
//! that cannot accept is as unready as one without its database.

use std::sync::OnceLock;

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use serde::Serialize;

pub(crate) struct Metrics {
    registry: Registry,
    pub open: IntGauge,
    pub accepted: IntCounter,
    pub accept_errors: IntCounter,
    /// Connections the server closed, by reason: header_timeout, idle_timeout.
    pub closed: IntCounterVec,
    fds_open: IntGauge,
    fds_max: IntGauge,
}

pub(crate) fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("register once");
            g
        };
        let accepted = IntCounter::new(
            "honcho_http_connections_accepted_total",
            "TCP connections accepted",
        )
        .expect("valid metric");
        let accept_errors = IntCounter::new(
            "honcho_http_accept_errors_total",
            "Failed accepts (out of file descriptors, ...); the listener backs off after each",
        )
        .expect("valid metric");
        let closed = IntCounterVec::new(
            Opts::new(
                "honcho_http_connections_timed_out_total",
                "Connections closed by the server for waiting too long, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        for c in [&accepted, &accept_errors] {
            registry
                .register(Box::new(c.clone()))
                .expect("register once");
        }
        registry
            .register(Box::new(closed.clone()))
            .expect("register once");
        Metrics {
            open: gauge("honcho_http_connections_open", "HTTP connections open"),
            fds_open: gauge("honcho_process_open_fds", "File descriptors open"),
            fds_max: gauge(
                "honcho_process_max_fds",
                "The process's limit of open file descriptors (soft RLIMIT_NOFILE)",
            ),
            accepted,
            accept_errors,
            closed,
            registry,
        }
    })
}

/// What `/ready` shows of the listener.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Health {
    pub open_connections: i64,
    pub accept_errors: u64,
    /// None where the platform does not tell (not Linux).
    pub fds_open: Option<u64>,
    pub fds_max: Option<u64>,
}

/// Below this many free descriptors (or a twentieth of the limit, whichever is more) the process
/// is not ready: new connections and database reconnects are about to fail.
const MIN_FREE_FDS: u64 = 64;

impl Health {
    pub fn now() -> Health {
        let m = metrics();
        let (fds_open, fds_max) = (open_fds(), max_fds());
        if let (Some(open), Some(max)) = (fds_open, fds_max) {
            m.fds_open.set(open as i64);
            m.fds_max.set(max as i64);
        }
        Health {
            open_connections: m.open.get(),
            accept_errors: m.accept_errors.get(),
            fds_open,
            fds_max,
        }
    }

    /// Enough descriptors left to accept connections.
    pub fn fds_ok(&self) -> bool {
        match (self.fds_open, self.fds_max) {
            (Some(open), Some(max)) => max.saturating_sub(open) >= MIN_FREE_FDS.max(max / 20),
            _ => true,
        }
    }
}

/// The text exposition of the listener's metrics (descriptors read now).
pub fn render() -> String {
    Health::now();
    crate::graphql::metrics::encode(&metrics().registry.gather())
}

fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory's own descriptor is one of the entries.
    Some((dir.count() as u64).saturating_sub(1))
}

/// The soft limit, from `/proc/self/limits` ("Max open files  <soft>  <hard>  files").
fn max_fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_counted_against_the_limit() {
        let before = Health::now();
        let (Some(open), Some(max)) = (before.fds_open, before.fds_max) else {
            panic!("/proc is readable on Linux: {before:?}");
        };
        assert!(open > 0 && open < max, "{before:?}");
        let files: Vec<_> = (0..200)
            .map(|_| std::fs::File::open("/proc/self/limits").unwrap())
            .collect();
        // Other tests of this process open and close a few descriptors meanwhile.
        let during = Health::now().fds_open.unwrap();
        assert!(during >= open + 150, "{open} then {during}");
        drop(files);
        assert!(before.fds_ok());
        let short = Health {
            fds_open: Some(max - 10),
            ..before
        };
        assert!(!short.fds_ok());
    }
}
