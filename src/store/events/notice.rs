//! What a write publishes: the [`Notice`] payload on [`CHANNEL`], sent in the write's own
//! transaction so that it is delivered at commit or never.

use sea_orm::ConnectionTrait;
use serde::{Deserialize, Serialize};

use crate::store::{StoreError, StoreResult, stmt};

/// The one notification channel of this server.
pub const CHANNEL: &str = "honcho_events";

/// What a notification says, serialised as its JSON payload. Unknown kinds (e.g. from a newer
/// server during a rolling deploy) are ignored by receivers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// One `createMessages` batch: the messages of session `s` in workspace `w` with
    /// `seq_in_session` in `from..=to`. Seqs of a batch are contiguous (assigned under the
    /// session's lock), so the range names exactly the batch's rows, in 2 numbers whatever its
    /// size; with names of at most 512 characters the payload stays under 1.2 kB.
    Message {
        w: String,
        s: String,
        from: i64,
        to: i64,
    },
    /// Conclusions created in workspace `w` (a `createConclusions` batch or a new derived
    /// conclusion), by public id: at most 100 ids of 21 characters, under 3.2 kB with the longest
    /// workspace name.
    Conclusion { w: String, ids: Vec<String> },
    /// Messages or conclusions of workspace `w` were erased: every process drops the rows its
    /// recent events cached, so no subscription is served an erased row from memory.
    Erased { w: String },
}

/// Sends `notice` on [`CHANNEL`] as part of `db`'s transaction: delivered at commit, or never.
pub(crate) async fn publish<C: ConnectionTrait>(db: &C, notice: &Notice) -> StoreResult<()> {
    let payload = serde_json::to_string(notice)
        .map_err(|e| StoreError::Internal(format!("serialising an event: {e}")))?;
    db.execute_raw(stmt(
        "SELECT pg_notify($1, $2)",
        [CHANNEL.into(), payload.into()],
    ))
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_notice_round_trips_and_stays_small() {
        let n = Notice::Message {
            w: "w".repeat(512),
            s: "s".repeat(512),
            from: i64::MAX - 100,
            to: i64::MAX,
        };
        let json = serde_json::to_string(&n).unwrap();
        assert!(json.len() < 1200, "{}", json.len());
        assert!(json.starts_with(r#"{"kind":"message","#), "{json}");
        assert_eq!(serde_json::from_str::<Notice>(&json).unwrap(), n);
    }

    #[test]
    fn an_erasure_notice_names_only_its_workspace() {
        let n = Notice::Erased { w: "ws".into() };
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, r#"{"kind":"erased","w":"ws"}"#);
        assert_eq!(serde_json::from_str::<Notice>(&json).unwrap(), n);
    }

    #[test]
    fn unknown_kinds_are_not_notices() {
        assert!(serde_json::from_str::<Notice>(r#"{"kind":"summary","w":"x","ids":[]}"#).is_err());
    }

    #[test]
    fn a_full_conclusion_batch_fits_a_notification() {
        let n = Notice::Conclusion {
            w: "w".repeat(512),
            ids: (0..100).map(|_| "x".repeat(21)).collect(),
        };
        let json = serde_json::to_string(&n).unwrap();
        assert!(json.len() < 3200, "{}", json.len());
        assert_eq!(serde_json::from_str::<Notice>(&json).unwrap(), n);
    }
}
