use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::Value;

use super::page::{Order, Page, Slice};
use super::{Store, StoreError, StoreResult, TxOptions, new_id, stmt, validate};
use crate::entity::{session, workspace};

pub type Workspace = workspace::Model;

impl Store {
    #[tracing::instrument(name = "store.workspace", level = "debug", skip_all)]
    pub async fn workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        Ok(workspace::Entity::find()
            .filter(workspace::Column::Name.eq(name))
            .one(self.db())
            .await?)
    }

    /// Returns the existing workspace unchanged, or creates it (Honcho v3.0.12's get-or-create).
    #[tracing::instrument(name = "store.get_or_create_workspace", level = "debug", skip_all)]
    pub async fn get_or_create_workspace(
        &self,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
    ) -> StoreResult<Workspace> {
        validate::name("workspace", name)?;
        let (metadata, configuration) = validate::attributes(metadata, configuration)?;
        super::configuration::check(configuration.as_ref())?;
        ensure_workspace(self.db(), name, metadata, configuration).await
    }

    /// Replaces metadata, shallow-merges configuration, as Honcho v3.0.12 does. Absent fields stay.
    #[tracing::instrument(name = "store.update_workspace", level = "debug", skip_all)]
    pub async fn update_workspace(
        &self,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
    ) -> StoreResult<Workspace> {
        let (metadata, configuration) = validate::attributes(metadata, configuration)?;
        super::configuration::check(configuration.as_ref())?;
        workspace::Entity::find()
            .from_raw_sql(stmt(
                "UPDATE workspaces SET metadata = COALESCE($2, metadata), \
                 configuration = configuration || COALESCE($3, '{}'::jsonb) \
                 WHERE name = $1 RETURNING *",
                [name.into(), metadata.into(), configuration.into()],
            ))
            .one(self.db())
            .await?
            .ok_or_else(|| StoreError::not_found("workspace", name))
    }

    /// Deletes the workspace and everything in it. Refused while it has sessions, so a
    /// workspace in use is never dropped by accident (Honcho v3.0.12 answers 409 likewise).
    #[tracing::instrument(name = "store.delete_workspace", level = "debug", skip_all)]
    pub async fn delete_workspace(&self, name: &str) -> StoreResult<()> {
        self.transaction(TxOptions::default(), |txn| async move {
            let found = workspace::Entity::find()
                .from_raw_sql(stmt(
                    "SELECT * FROM workspaces WHERE name = $1 FOR UPDATE",
                    [name.into()],
                ))
                .one(&*txn)
                .await?;
            if found.is_none() {
                return Err(StoreError::not_found("workspace", name));
            }
            let active = session::Entity::find()
                .filter(session::Column::WorkspaceName.eq(name))
                .one(&*txn)
                .await?;
            if active.is_some() {
                return Err(StoreError::Conflict(format!(
                    "workspace {name} has active sessions; delete all sessions first"
                )));
            }
            workspace::Entity::delete_many()
                .filter(workspace::Column::Name.eq(name))
                .exec(&*txn)
                .await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(name = "store.list_workspaces", level = "debug", skip_all)]
    pub async fn list_workspaces(
        &self,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Workspace>> {
        self.list(workspace::Entity::find(), filters, order, slice)
            .await
    }
}

/// Inserts the workspace unless it exists; either way returns the row. Race-free through
/// `ON CONFLICT`, so concurrent creators all get the same workspace.
pub(crate) async fn ensure_workspace<C: ConnectionTrait>(
    db: &C,
    name: &str,
    metadata: Option<Value>,
    configuration: Option<Value>,
) -> StoreResult<Workspace> {
    let inserted = workspace::Entity::find()
        .from_raw_sql(stmt(
            "INSERT INTO workspaces (id, name, metadata, configuration) \
             VALUES ($1, $2, COALESCE($3, '{}'::jsonb), COALESCE($4, '{}'::jsonb)) \
             ON CONFLICT (name) DO NOTHING RETURNING *",
            [
                new_id().into(),
                name.into(),
                metadata.into(),
                configuration.into(),
            ],
        ))
        .one(db)
        .await?;
    if let Some(ws) = inserted {
        return Ok(ws);
    }
    workspace::Entity::find()
        .filter(workspace::Column::Name.eq(name))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Conflict(format!("workspace {name} was deleted concurrently")))
}
