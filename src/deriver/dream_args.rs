//! The dreams' flags: when the deriver's workers consolidate memory by themselves.

use std::time::Duration;

use clap::Args;

use crate::store::dream::DreamTriggers;

/// Scheduled dreams (Honcho v3.0.12's DREAM settings) and how often they are looked for.
#[derive(Args, Clone, Debug)]
pub struct DreamArgs {
    /// Dreams run at all: scheduled, and on demand (`schedule_dream`, `scheduleDream`, which are
    /// refused when off).
    #[arg(
        long = "dream-enabled",
        env = "HONCHO_DREAM_ENABLED",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub enabled: bool,

    /// A pair (observer, observed) is due a dream once it holds this many more live explicit
    /// conclusions than after its last dream...
    #[arg(
        long = "dream-document-threshold",
        env = "HONCHO_DREAM_DOCUMENT_THRESHOLD",
        default_value_t = 50
    )]
    pub document_threshold: i64,

    /// ...its newest explicit conclusion is this old (minutes: it is idle)...
    #[arg(long = "dream-idle-minutes", env = "HONCHO_DREAM_IDLE_MINUTES", default_value_t = 60.0)]
    pub idle_minutes: f64,

    /// ...and its last dream ended this long ago (hours).
    #[arg(
        long = "dream-min-hours-between",
        env = "HONCHO_DREAM_MIN_HOURS_BETWEEN",
        default_value_t = 8.0
    )]
    pub min_hours_between: f64,

    /// How often the first deriver worker looks for pairs due a dream (seconds).
    #[arg(long = "dream-check-secs", env = "HONCHO_DREAM_CHECK_SECS", default_value_t = 60.0)]
    pub check_secs: f64,
}

impl Default for DreamArgs {
    /// The flags' defaults (the environment is not read).
    fn default() -> Self {
        crate::flags::given(&[]).expect("the dreams' defaults parse")
    }
}

impl DreamArgs {
    pub fn triggers(&self) -> DreamTriggers {
        DreamTriggers {
            threshold: self.document_threshold.max(1),
            idle: secs(self.idle_minutes * 60.0),
            min_gap: secs(self.min_hours_between * 3600.0),
        }
    }

    pub fn check_every(&self) -> Duration {
        secs(self.check_secs).max(Duration::from_secs(1))
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_honchos() {
        let d = DreamArgs::default();
        assert!(d.enabled);
        let t = d.triggers();
        assert_eq!(t.threshold, 50);
        assert_eq!(t.idle, Duration::from_secs(3600));
        assert_eq!(t.min_gap, Duration::from_secs(8 * 3600));
        assert_eq!(d.check_every(), Duration::from_secs(60));
        let off: DreamArgs = crate::flags::given(&["--dream-enabled", "false"]).unwrap();
        assert!(!off.enabled);
    }
}
