//! `import_checkpoints`: how far an import from another server got, so that a stopped run
//! resumes from there. A position is the importer's own JSON; the store only keeps it.

use sea_orm::ConnectionTrait;
use serde_json::Value;

use crate::store::{Store, StoreResult, stmt};

impl Store {
    /// The position recorded for `source` and `workspace`, None when no run left one.
    pub async fn import_checkpoint(
        &self,
        source: &str,
        workspace: &str,
    ) -> StoreResult<Option<Value>> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "SELECT position FROM import_checkpoints \
                 WHERE source = $1 AND workspace_name = $2",
                [source.into(), workspace.into()],
            ))
            .await?;
        Ok(row.map(|r| r.try_get("", "position")).transpose()?)
    }

    /// Records `position` (replacing the last one); None forgets it (the run finished).
    pub async fn set_import_checkpoint(
        &self,
        source: &str,
        workspace: &str,
        position: Option<&Value>,
    ) -> StoreResult<()> {
        match position {
            Some(p) => {
                self.db()
                    .execute_raw(stmt(
                        "INSERT INTO import_checkpoints (source, workspace_name, position) \
                         VALUES ($1, $2, $3::text::jsonb) ON CONFLICT (source, workspace_name) \
                         DO UPDATE SET position = EXCLUDED.position, updated_at = now()",
                        [source.into(), workspace.into(), p.to_string().into()],
                    ))
                    .await?
            }
            None => {
                self.db()
                    .execute_raw(stmt(
                        "DELETE FROM import_checkpoints WHERE source = $1 AND workspace_name = $2",
                        [source.into(), workspace.into()],
                    ))
                    .await?
            }
        };
        Ok(())
    }
}
