use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect, QueryTrait};
use serde_json::Value;

use super::page::{Order, Page, Slice};
use super::workspace::ensure_workspace;
use super::{Store, StoreError, StoreResult, TxOptions, keys, new_id, stmt, validate};
use crate::entity::{peer, session, session_peer};

pub type Peer = peer::Model;

/// What `get_or_create_peer` may do to a peer that exists already (the caller's key decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerReach {
    /// Return it, replacing the metadata and configuration given.
    Any,
    /// Nothing: only a missing peer is created.
    CreateOnly,
}

impl Store {
    /// Peers for many (workspace, name) keys in one statement; absent keys are simply missing.
    #[tracing::instrument(name = "store.peers_by_keys", level = "debug", skip_all)]
    pub async fn peers_by_keys(&self, keys: &[(String, String)]) -> StoreResult<Vec<Peer>> {
        keys::by_names::<peer::Entity, _>(self.reader(), keys).await
    }

    /// Creates the peer (and its workspace) or, when it exists and `reach` allows, replaces the
    /// metadata and configuration that were given (Honcho v3.0.12's get-or-create). With [`PeerReach::CreateOnly`] an
    /// existing peer is FORBIDDEN: neither read nor changed.
    #[tracing::instrument(name = "store.get_or_create_peer", level = "debug", skip_all)]
    pub async fn get_or_create_peer(
        &self,
        workspace: &str,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
        reach: PeerReach,
    ) -> StoreResult<Peer> {
        validate::name("workspace", workspace)?;
        validate::name("peer", name)?;
        let (metadata, configuration) = validate::attributes(metadata, configuration)?;
        // Without the right to an existing row, the upsert becomes an insert that does nothing
        // on conflict, so the decision is taken by the same statement that writes.
        let on_conflict = match reach {
            PeerReach::Any => {
                "DO UPDATE SET metadata = COALESCE($4, peers.metadata), \
                 configuration = COALESCE($5, peers.configuration)"
            }
            PeerReach::CreateOnly => "DO NOTHING",
        };
        let (metadata, configuration) = (&metadata, &configuration);
        self.transaction(TxOptions::default(), |txn| async move {
            ensure_workspace(&*txn, workspace, None, None).await?;
            peer::Entity::find()
                .from_raw_sql(stmt(
                    &format!(
                        "INSERT INTO peers (id, name, workspace_name, metadata, configuration) \
                         VALUES ($1, $2, $3, COALESCE($4, '{{}}'::jsonb), COALESCE($5, '{{}}'::jsonb)) \
                         ON CONFLICT (name, workspace_name) {on_conflict} RETURNING *"
                    ),
                    upsert_values(name, workspace, metadata, configuration),
                ))
                .one(&*txn)
                .await?
                .ok_or_else(|| {
                    StoreError::Forbidden(format!(
                        "peer {name} exists; this key may create peers, not read or change them"
                    ))
                })
        })
        .await
    }

    /// Replaces metadata and configuration where given.
    #[tracing::instrument(name = "store.update_peer", level = "debug", skip_all)]
    pub async fn update_peer(
        &self,
        workspace: &str,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
    ) -> StoreResult<Peer> {
        let replace = "COALESCE($4, configuration)";
        let attributes = validate::attributes(metadata, configuration)?;
        update_named::<peer::Entity>(self.db(), "peer", replace, workspace, name, attributes).await
    }

    #[tracing::instrument(name = "store.list_peers", level = "debug", skip_all)]
    pub async fn list_peers(
        &self,
        workspace: &str,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Peer>> {
        let select = peer::Entity::find().filter(peer::Column::WorkspaceName.eq(workspace));
        self.list(select, filters, order, slice).await
    }

    /// Sessions the peer has ever been a member of, including ones it left (as Honcho v3.0.12).
    #[tracing::instrument(name = "store.list_peer_sessions", level = "debug", skip_all)]
    pub async fn list_peer_sessions(
        &self,
        workspace: &str,
        peer_name: &str,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<session::Model>> {
        let member_of = session_peer::Entity::find()
            .select_only()
            .column(session_peer::Column::SessionName)
            .filter(session_peer::Column::WorkspaceName.eq(workspace))
            .filter(session_peer::Column::PeerName.eq(peer_name))
            .as_query()
            .to_owned();
        let select = session::Entity::find()
            .filter(session::Column::WorkspaceName.eq(workspace))
            .filter(session::Column::Name.in_subquery(member_of));
        self.list(select, filters, order, slice).await
    }
}

/// Creates any of `names` that do not exist yet. Sorted so that concurrent writers creating
/// overlapping sets take row locks in one order and cannot deadlock.
pub(crate) async fn ensure_peers<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    names: &[String],
) -> StoreResult<()> {
    let mut names = names.to_vec();
    names.sort();
    names.dedup();
    for name in &names {
        validate::name("peer", name)?;
    }
    let ids: Vec<String> = names.iter().map(|_| new_id()).collect();
    db.execute_raw(stmt(
        "INSERT INTO peers (id, name, workspace_name) \
         SELECT i, n, $1 FROM unnest($2::text[], $3::text[]) AS t(i, n) ORDER BY n \
         ON CONFLICT (name, workspace_name) DO NOTHING",
        [workspace.into(), ids.into(), names.into()],
    ))
    .await?;
    Ok(())
}

/// Updates the workspace's peer or session (`what`, of the table `{what}s`) with validated
/// attributes: metadata replaced where given, configuration set to `configuration_sql` (the given
/// one is `$4`). NOT_FOUND when missing.
pub(super) async fn update_named<E>(
    db: &impl ConnectionTrait,
    what: &'static str,
    configuration_sql: &str,
    workspace: &str,
    name: &str,
    (metadata, configuration): (Option<Value>, Option<Value>),
) -> StoreResult<E::Model>
where
    E: EntityTrait,
    E::Model: sea_orm::FromQueryResult,
{
    let sql = format!(
        "UPDATE {what}s SET metadata = COALESCE($3, metadata), configuration = {configuration_sql} \
         WHERE workspace_name = $1 AND name = $2 RETURNING *"
    );
    let values = [
        workspace.into(),
        name.into(),
        metadata.into(),
        configuration.into(),
    ];
    E::find()
        .from_raw_sql(stmt(&sql, values))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::not_found(what, name))
}

/// A peer's or session's upsert's values: `$1` a new public id, `$2` its name, `$3` its workspace,
/// `$4` and `$5` its metadata and configuration.
pub(super) fn upsert_values(
    name: &str,
    workspace: &str,
    metadata: &Option<Value>,
    configuration: &Option<Value>,
) -> [sea_orm::Value; 5] {
    [
        new_id().into(),
        name.into(),
        workspace.into(),
        metadata.clone().into(),
        configuration.clone().into(),
    ]
}
