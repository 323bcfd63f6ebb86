use async_graphql::{ComplexObject, Context, ID, SimpleObject};

use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::scalars::DateTime;
use crate::store::dream::DreamStatus as StoreDreamStatus;
use crate::store::queue::{QueueError, QueueStatus};

/// The deriver's queue for one workspace, counted in queued messages (a message observed by
/// three peers counts three times: each observer learns from it separately) and due session
/// summaries (one each, per session and kind).
#[derive(SimpleObject)]
#[graphql(complex)]
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
    #[graphql(skip)]
    pub workspace: String,
}

#[ComplexObject]
impl DeriverStatus {
    /// The workspace's dreams (docs/dreams.md), counted in (observer, observed) pairs.
    async fn dreams(&self, ctx: &Context<'_>) -> ApiResult<DreamStatus> {
        let access = guard::require(ctx, rule!(DeriverStatus.dreams), On::nothing()).await?;
        Ok(access.store().dream_status(&self.workspace).await?.into())
    }
}

/// Dreams of one workspace, in (observer, observed) pairs.
#[derive(SimpleObject)]
pub struct DreamStatus {
    /// Asked for, waiting for a worker.
    pub pending: i64,
    /// Being dreamt now.
    pub in_progress: i64,
    /// Stopped by a failure until `retryFailedDerivations`.
    pub failed: i64,
    /// The most recent failure among pairs that have not dreamt since.
    pub last_error: Option<DreamError>,
}

/// A failed dream.
#[derive(SimpleObject)]
pub struct DreamError {
    /// What went wrong (the LLM's error, never the API key).
    pub message: String,
    pub at: DateTime,
}

impl From<StoreDreamStatus> for DreamStatus {
    fn from(s: StoreDreamStatus) -> Self {
        DreamStatus {
            pending: s.pending,
            in_progress: s.in_progress,
            failed: s.failed,
            last_error: s.last_error.map(|(message, at)| DreamError {
                message,
                at: at.into(),
            }),
        }
    }
}

/// A failed deriver batch.
#[derive(SimpleObject)]
pub struct DeriverError {
    /// What went wrong (the LLM's error, never the API key).
    pub message: String,
    pub at: DateTime,
    pub session_id: ID,
}

impl DeriverStatus {
    /// `workspace`'s status.
    pub fn of(workspace: &str, s: QueueStatus) -> Self {
        DeriverStatus {
            workspace: workspace.to_owned(),
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
