use async_graphql::{ID, SimpleObject};

use crate::graphql::scalars::DateTime;
use crate::store::queue::{QueueError, QueueStatus};

/// The deriver's queue for one workspace, counted in queued messages (a message observed by
/// three peers counts three times: each observer learns from it separately) and due session
/// summaries (one each, per session and kind).
#[derive(SimpleObject)]
pub struct DeriverStatus {
    /// Waiting for a worker (including those of units not ready yet: too few tokens, too new).
    pub pending: i64,
    /// In a batch a worker holds now.
    pub in_progress: i64,
    /// Held back by a failed batch, or a failed summary, until `retryFailedDerivations`.
    pub failed: i64,
    /// The most recent failure in the workspace among units that have not completed a batch
    /// since (a unit's next successful batch clears its error; the log and `/metrics` keep
    /// every failure).
    pub last_error: Option<DeriverError>,
}

/// A failed deriver batch.
#[derive(SimpleObject)]
pub struct DeriverError {
    /// What went wrong (the LLM's error, never the API key).
    pub message: String,
    pub at: DateTime,
    pub session_id: ID,
}

impl From<QueueStatus> for DeriverStatus {
    fn from(s: QueueStatus) -> Self {
        DeriverStatus {
            pending: s.pending,
            in_progress: s.in_progress,
            failed: s.failed,
            last_error: s.last_error.map(|e: QueueError| DeriverError {
                message: e.message,
                at: e.at.into(),
                session_id: ID(e.session),
            }),
        }
    }
}
