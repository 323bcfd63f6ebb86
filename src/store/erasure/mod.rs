//! Erasure (docs/erasure.md): deleting a message, a session or a peer so that nothing of it is
//! left: not its rows, not the conclusions only it supported, not its words in the search
//! statistics, not its rows in the deriver's queue or in any process's event cache.
//!
//! [`graph`] holds what every erasure does to the reasoning graph and the queue; [`job`] the
//! peer's erasure, which runs in resumable batches.

mod graph;
mod job;

pub use graph::Erased;
pub(crate) use graph::{ids, prune};
pub use job::{DEFAULT_ERASURE_BATCH, ErasureJob, ErasureProgress};

pub use crate::entity::erasure_job::Phase as ErasurePhase;
use crate::store::{Store, StoreError, StoreResult, TxOptions, stmt};
use sea_orm::ConnectionTrait;

impl Store {
    /// Deletes one message for good, with the conclusions only it supported (transitively).
    /// NOT_FOUND when there is no such message in the workspace.
    #[tracing::instrument(name = "store.delete_message", level = "debug", skip_all)]
    pub async fn delete_message(&self, workspace: &str, id: &str) -> StoreResult<Erased> {
        self.transaction(TxOptions::default(), |txn| async move {
            let row = txn
                .query_one_raw(stmt(
                    "SELECT id FROM messages WHERE workspace_name = $1 AND public_id = $2 \
                     FOR UPDATE",
                    [workspace.into(), id.into()],
                ))
                .await?
                .ok_or_else(|| StoreError::not_found("message", id))?;
            let internal: i64 = row.try_get("", "id")?;
            graph::erase_messages(&txn, workspace, &[internal]).await
        })
        .await
    }
}
