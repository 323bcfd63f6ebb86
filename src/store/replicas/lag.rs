//! How far behind a replica is, in time. A replica's `pg_last_xact_replay_timestamp()` tells when
//! the last transaction it replayed committed, which says nothing while the primary is idle (the
//! replica is current, yet that time grows). Instead the health check samples the primary's WAL
//! position on every round; a replica is as far behind as the oldest sample it has not replayed.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::Lsn;

/// The primary's recent WAL positions, oldest first.
#[derive(Debug, Default)]
pub struct Samples {
    samples: VecDeque<(Instant, Lsn)>,
}

impl Samples {
    /// Records the primary's position at `at`, forgetting samples older than `keep` (lag beyond
    /// that is reported as "at least `keep`", which is enough to exceed the limit it serves).
    pub fn record(&mut self, at: Instant, lsn: Lsn, keep: Duration) {
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| at.saturating_duration_since(*t) > keep)
        {
            self.samples.pop_front();
        }
        self.samples.push_back((at, lsn));
    }

    /// How long ago the primary first had WAL that `replayed` does not include: zero when the
    /// replica has replayed the newest sample, None before any sample.
    pub fn lag(&self, replayed: Lsn, now: Instant) -> Option<Duration> {
        let (_, newest) = self.samples.back()?;
        if replayed >= *newest {
            return Some(Duration::ZERO);
        }
        let first_missed = self
            .samples
            .iter()
            .find(|(_, lsn)| *lsn > replayed)
            .map(|(t, _)| *t)?;
        Some(now.saturating_duration_since(first_missed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_as_late_as_the_oldest_sample_it_has_not_replayed() {
        let t0 = Instant::now();
        let keep = Duration::from_secs(10);
        let mut s = Samples::default();
        assert_eq!(s.lag(Lsn(5), t0), None, "nothing to compare with yet");
        s.record(t0, Lsn(100), keep);
        s.record(t0 + Duration::from_millis(250), Lsn(100), keep);
        s.record(t0 + Duration::from_millis(500), Lsn(300), keep);
        s.record(t0 + Duration::from_millis(750), Lsn(400), keep);
        let now = t0 + Duration::from_millis(800);
        assert_eq!(s.lag(Lsn(400), now), Some(Duration::ZERO), "current");
        assert_eq!(
            s.lag(Lsn(500), now),
            Some(Duration::ZERO),
            "ahead of the sample"
        );
        assert_eq!(s.lag(Lsn(300), now), Some(Duration::from_millis(50)));
        assert_eq!(s.lag(Lsn(100), now), Some(Duration::from_millis(300)));
        assert_eq!(
            s.lag(Lsn(99), now),
            Some(Duration::from_millis(800)),
            "behind every sample: as old as the oldest"
        );
    }

    #[test]
    fn an_idle_primary_leaves_a_current_replica_at_zero() {
        let t0 = Instant::now();
        let mut s = Samples::default();
        for i in 0..100 {
            s.record(t0 + Duration::from_secs(i), Lsn(42), Duration::from_secs(5));
        }
        assert_eq!(
            s.lag(Lsn(42), t0 + Duration::from_secs(100)),
            Some(Duration::ZERO)
        );
        assert!(
            s.samples.len() <= 7,
            "old samples are forgotten: {}",
            s.samples.len()
        );
    }
}
