use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

use super::erasure;
use super::page::{Order, Page, Slice};
use super::peer::{ensure_peers, update_named, upsert_values};
use super::workspace::ensure_workspace;
use super::{Store, StoreError, StoreResult, TxOptions, keys, new_id, stmt, validate};
use crate::entity::{message, session, session_peer};

pub type Session = session::Model;
pub type SessionPeer = session_peer::Model;

/// More peers than this observing others in one session is refused (Honcho v3.0.12's
/// SESSION_OBSERVERS_LIMIT).
pub const MAX_OBSERVERS: i64 = 10;

/// A peer's membership settings in one session; `None` means "not set" (the deriver falls back to
/// the peer's own configuration).
#[derive(Clone, Debug, Default)]
pub struct MemberConfig {
    pub peer: String,
    pub observe_me: Option<bool>,
    pub observe_others: Option<bool>,
}

/// What `get_or_create_session` may do, by the caller's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionReach<'a> {
    /// Create the session, or replace its metadata, merge its configuration and add members.
    Any,
    /// As this peer (a peer key): create a new session (with metadata and configuration), or get
    /// one it is an active member of without changing it; name no member but itself.
    Member(&'a str),
}

impl MemberConfig {
    fn config_json(&self) -> Value {
        json!({"observe_me": self.observe_me, "observe_others": self.observe_others})
    }
}

impl Store {
    #[tracing::instrument(name = "store.session", level = "debug", skip_all)]
    pub async fn session(&self, workspace: &str, name: &str) -> StoreResult<Option<Session>> {
        find_session(self.reader(), workspace, name).await
    }

    #[tracing::instrument(name = "store.sessions_by_keys", level = "debug", skip_all)]
    pub async fn sessions_by_keys(&self, keys: &[(String, String)]) -> StoreResult<Vec<Session>> {
        keys::by_names::<session::Entity, _>(self.reader(), keys).await
    }

    /// Active members of many sessions in one statement, in join order.
    #[tracing::instrument(name = "store.members_by_sessions", level = "debug", skip_all)]
    pub async fn members_by_sessions(
        &self,
        keys: &[(String, String)],
    ) -> StoreResult<Vec<SessionPeer>> {
        let (ws, names): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        Ok(session_peer::Entity::find()
            .from_raw_sql(stmt(
                "SELECT sp.* FROM session_peers sp \
                 JOIN unnest($1::text[], $2::text[]) AS k(w, n) \
                   ON sp.workspace_name = k.w AND sp.session_name = k.n \
                 WHERE sp.left_at IS NULL \
                 ORDER BY sp.joined_at, sp.peer_name",
                [ws.into(), names.into()],
            ))
            .all(self.reader())
            .await?)
    }

    #[tracing::instrument(name = "store.session_member", level = "debug", skip_all)]
    pub async fn session_member(
        &self,
        workspace: &str,
        session: &str,
        peer: &str,
    ) -> StoreResult<Option<SessionPeer>> {
        Ok(session_peer::Entity::find()
            .filter(session_peer::Column::WorkspaceName.eq(workspace))
            .filter(session_peer::Column::SessionName.eq(session))
            .filter(session_peer::Column::PeerName.eq(peer))
            .one(self.reader())
            .await?)
    }

    /// Creates the session (with its workspace and any missing peers) or, when it exists, replaces
    /// its metadata, shallow-merges its configuration and makes the listed peers members; what
    /// `reach` forbids is FORBIDDEN, decided under the session's lock on what the transaction sees.
    #[tracing::instrument(name = "store.get_or_create_session", level = "debug", skip_all)]
    pub async fn get_or_create_session(
        &self,
        workspace: &str,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
        peers: &[MemberConfig],
        reach: SessionReach<'_>,
    ) -> StoreResult<Session> {
        validate::name("workspace", workspace)?;
        validate::name("session", name)?;
        let (metadata, configuration) = validate::attributes(metadata, configuration)?;
        super::configuration::check(configuration.as_ref())?;
        let (metadata, configuration) = (&metadata, &configuration);
        if let SessionReach::Member(me) = reach
            && let Some(other) = peers.iter().find(|p| p.peer != me)
        {
            return Err(StoreError::Forbidden(format!(
                "a peer key may not make another peer ({}) a member",
                other.peer
            )));
        }
        self.transaction(TxOptions::default(), |txn| async move {
            lock_session(&*txn, workspace, name).await?;
            if let SessionReach::Member(me) = reach
                && let Some(existing) = find_session(&*txn, workspace, name).await?
            {
                let member = session_peer::Entity::find()
                    .filter(session_peer::Column::WorkspaceName.eq(workspace))
                    .filter(session_peer::Column::SessionName.eq(name))
                    .filter(session_peer::Column::PeerName.eq(me))
                    .filter(session_peer::Column::LeftAt.is_null())
                    .one(&*txn)
                    .await?;
                if member.is_none() {
                    return Err(StoreError::Forbidden(format!(
                        "session {name} exists and peer {me} is not an active member of it"
                    )));
                }
                if metadata.is_some() || configuration.is_some() {
                    return Err(StoreError::Forbidden(format!(
                        "a peer key may not change the metadata or configuration of existing \
                         session {name}"
                    )));
                }
                // Its only possible member is itself, active already: nothing to write.
                return Ok(existing);
            }
            ensure_workspace(&*txn, workspace, None, None).await?;
            let session = session::Entity::find()
                .from_raw_sql(stmt(
                    "INSERT INTO sessions (id, name, workspace_name, metadata, configuration) \
                     VALUES ($1, $2, $3, COALESCE($4, '{}'::jsonb), COALESCE($5, '{}'::jsonb)) \
                     ON CONFLICT (name, workspace_name) DO UPDATE SET \
                       metadata = COALESCE($4, sessions.metadata), \
                       configuration = sessions.configuration || COALESCE($5, '{}'::jsonb) \
                     RETURNING *",
                    upsert_values(name, workspace, metadata, configuration),
                ))
                .one(&*txn)
                .await?
                .ok_or_else(|| StoreError::Internal("session upsert returned no row".into()))?;
            add_members(&*txn, workspace, name, peers).await?;
            Ok(session)
        })
        .await
    }

    #[tracing::instrument(name = "store.update_session", level = "debug", skip_all)]
    pub async fn update_session(
        &self,
        workspace: &str,
        name: &str,
        metadata: Option<Value>,
        configuration: Option<Value>,
    ) -> StoreResult<Session> {
        let merge = "configuration || COALESCE($4, '{}'::jsonb)";
        let attributes = validate::attributes(metadata, configuration)?;
        super::configuration::check(attributes.1.as_ref())?;
        update_named::<session::Entity>(self.db(), "session", merge, workspace, name, attributes)
            .await
    }

    /// Deletes the session with its messages and memberships at once. Honcho v3.0.12 marks the session
    /// inactive and lets a queue worker delete later; we have no worker, and a synchronous delete
    /// in one transaction leaves nothing half-deleted. Conclusions drawn in the session stay, with
    /// their session cleared, unless the session's messages were all they were drawn from: those
    /// go, with what derives only from them (docs/erasure.md).
    ///
    /// It takes the session's lock first, so a concurrent `create_messages` either finishes
    /// before (and its messages go with the session) or starts after (and makes a new session).
    #[tracing::instrument(name = "store.delete_session", level = "debug", skip_all)]
    pub async fn delete_session(&self, workspace: &str, name: &str) -> StoreResult<()> {
        self.transaction(TxOptions::default(), |txn| async move {
            lock_session(&*txn, workspace, name).await?;
            let linked = session_links(&*txn, workspace, name).await?;
            let deleted = session::Entity::delete_many()
                .filter(session::Column::WorkspaceName.eq(workspace))
                .filter(session::Column::Name.eq(name))
                .exec(&*txn)
                .await?;
            if deleted.rows_affected == 0 {
                return Err(StoreError::not_found("session", name));
            }
            erasure::prune(&txn, workspace, &linked, &[]).await?;
            Ok(())
        })
        .await
    }

    /// Copies a session under a fresh nanoid name: metadata, configuration, memberships (all
    /// rejoined now, as Honcho v3.0.12) and the messages up to and including `up_to_message` with their
    /// seqs, token counts, timestamps and embeddings. Honcho v3.0.12 zeroes token counts and drops
    /// embeddings of copies, and looks the cutoff up by session name across workspaces; both are
    /// fixed here.
    #[tracing::instrument(name = "store.clone_session", level = "debug", skip_all)]
    pub async fn clone_session(
        &self,
        workspace: &str,
        name: &str,
        up_to_message: Option<&str>,
    ) -> StoreResult<Session> {
        self.transaction(TxOptions::default(), |txn| async move {
            let original = lock_existing_session(&*txn, workspace, name).await?;
            let cutoff = match up_to_message {
                None => i64::MAX,
                Some(id) => message_seq(&*txn, workspace, name, id).await?,
            };
            let clone = insert_copy(&*txn, &original).await?;
            copy_members(&*txn, &original, &clone).await?;
            copy_messages(&*txn, &original, &clone, cutoff).await?;
            Ok(clone)
        })
        .await
    }

    /// Makes the peers members (creating session and peers when missing). Active members keep
    /// their configuration; peers that had left rejoin with the configuration given now.
    #[tracing::instrument(name = "store.add_peers_to_session", level = "debug", skip_all)]
    pub async fn add_peers_to_session(
        &self,
        workspace: &str,
        name: &str,
        peers: &[MemberConfig],
    ) -> StoreResult<Session> {
        self.get_or_create_session(workspace, name, None, None, peers, SessionReach::Any)
            .await
    }

    #[tracing::instrument(name = "store.remove_peers_from_session", level = "debug", skip_all)]
    pub async fn remove_peers_from_session(
        &self,
        workspace: &str,
        name: &str,
        peers: &[String],
    ) -> StoreResult<Session> {
        self.transaction(TxOptions::default(), |txn| async move {
            let session = lock_existing_session(&*txn, workspace, name).await?;
            txn.execute_raw(stmt(
                "UPDATE session_peers SET left_at = now() \
                 WHERE workspace_name = $1 AND session_name = $2 AND peer_name = ANY($3) \
                   AND left_at IS NULL",
                [workspace.into(), name.into(), peers.to_vec().into()],
            ))
            .await?;
            Ok(session)
        })
        .await
    }

    /// Makes `peers` the session's active members: the others leave, the listed ones join (or
    /// stay), in one transaction. The session must exist.
    #[tracing::instrument(name = "store.set_session_peers", level = "debug", skip_all)]
    pub async fn set_session_peers(
        &self,
        workspace: &str,
        name: &str,
        peers: &[MemberConfig],
    ) -> StoreResult<Session> {
        let names: Vec<String> = peers.iter().map(|p| p.peer.clone()).collect();
        let names = &names;
        self.transaction(TxOptions::default(), |txn| async move {
            let session = lock_existing_session(&*txn, workspace, name).await?;
            txn.execute_raw(stmt(
                "UPDATE session_peers SET left_at = now() \
                 WHERE workspace_name = $1 AND session_name = $2 AND peer_name <> ALL($3) \
                   AND left_at IS NULL",
                [workspace.into(), name.into(), names.clone().into()],
            ))
            .await?;
            add_members(&*txn, workspace, name, peers).await?;
            Ok(session)
        })
        .await
    }

    /// Sets the non-null fields of a peer's configuration in a session, adding the membership
    /// when there is none. Session and peer must exist.
    #[tracing::instrument(name = "store.set_session_peer_config", level = "debug", skip_all)]
    pub async fn set_session_peer_config(
        &self,
        workspace: &str,
        session_name: &str,
        config: &MemberConfig,
    ) -> StoreResult<SessionPeer> {
        // Under the session's lock: concurrent calls each counting 10 observers before the other
        // committed would otherwise let 12 through.
        self.transaction(TxOptions::default(), |txn| async move {
            lock_existing_session(&*txn, workspace, session_name).await?;
            if crate::entity::peer::Entity::find()
                .filter(crate::entity::peer::Column::WorkspaceName.eq(workspace))
                .filter(crate::entity::peer::Column::Name.eq(config.peer.as_str()))
                .one(&*txn)
                .await?
                .is_none()
            {
                return Err(StoreError::not_found("peer", config.peer.clone()));
            }
            let patch = strip_nulls(config.config_json());
            let member = session_peer::Entity::find()
                .from_raw_sql(stmt(
                    "INSERT INTO session_peers (workspace_name, session_name, peer_name, configuration) \
                     VALUES ($1, $2, $3, $5) \
                     ON CONFLICT (workspace_name, session_name, peer_name) DO UPDATE SET \
                       configuration = session_peers.configuration || $4 \
                     RETURNING *",
                    [
                        workspace.into(),
                        session_name.into(),
                        config.peer.clone().into(),
                        patch.into(),
                        config.config_json().into(),
                    ],
                ))
                .one(&*txn)
                .await?
                .ok_or_else(|| StoreError::Internal("membership upsert returned no row".into()))?;
            check_observer_limit(&*txn, workspace, session_name).await?;
            Ok(member)
        })
        .await
    }

    #[tracing::instrument(name = "store.list_sessions", level = "debug", skip_all)]
    pub async fn list_sessions(
        &self,
        workspace: &str,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Session>> {
        let select = session::Entity::find().filter(session::Column::WorkspaceName.eq(workspace));
        self.list(select, filters, order, slice).await
    }
}

/// The seq of message `id` in the session; NOT_FOUND when it is no message of that session.
async fn message_seq<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
    id: &str,
) -> StoreResult<i64> {
    Ok(message::Entity::find()
        .filter(message::Column::WorkspaceName.eq(workspace))
        .filter(message::Column::SessionName.eq(session))
        .filter(message::Column::PublicId.eq(id))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::not_found("message", id))?
        .seq_in_session)
}

/// A new session under a fresh name with `original`'s metadata and configuration.
async fn insert_copy<C: ConnectionTrait>(db: &C, original: &Session) -> StoreResult<Session> {
    session::Entity::find()
        .from_raw_sql(stmt(
            "INSERT INTO sessions (id, name, workspace_name, metadata, configuration) \
             VALUES ($1, $2, $3, $4, $5) RETURNING *",
            [
                new_id().into(),
                new_id().into(),
                original.workspace_name.clone().into(),
                original.metadata.clone().into(),
                original.configuration.clone().into(),
            ],
        ))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Internal("session insert returned no row".into()))
}

/// `original`'s memberships, with their configuration, into `clone`: every member joins now.
async fn copy_members<C: ConnectionTrait>(
    db: &C,
    original: &Session,
    clone: &Session,
) -> StoreResult<()> {
    db.execute_raw(stmt(
        "INSERT INTO session_peers (workspace_name, session_name, peer_name, configuration) \
         SELECT workspace_name, $3, peer_name, configuration FROM session_peers \
         WHERE workspace_name = $1 AND session_name = $2",
        [
            original.workspace_name.clone().into(),
            original.name.clone().into(),
            clone.name.clone().into(),
        ],
    ))
    .await?;
    Ok(())
}

/// `original`'s messages up to seq `cutoff` into `clone`, with their seqs, token counts,
/// timestamps and embeddings, under fresh public ids.
async fn copy_messages<C: ConnectionTrait>(
    db: &C,
    original: &Session,
    clone: &Session,
    cutoff: i64,
) -> StoreResult<()> {
    let (workspace, name) = (&original.workspace_name, &original.name);
    // Public ids must be fresh nanoids; the database has no nanoid function, so they are made
    // here, one per message counted, and paired with the rows in seq order by SQL (the messages
    // themselves never leave the database).
    let count = db
        .query_one_raw(stmt(
            "SELECT count(*) FROM messages \
             WHERE workspace_name = $1 AND session_name = $2 AND seq_in_session <= $3",
            [workspace.clone().into(), name.clone().into(), cutoff.into()],
        ))
        .await?
        .map(|row| row.try_get_by_index::<i64>(0))
        .transpose()?
        .unwrap_or(0);
    let ids: Vec<String> = (0..count).map(|_| new_id()).collect();
    db.execute_raw(stmt(
        "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, \
           seq_in_session, content, metadata, token_count, created_at, embedding) \
         SELECT k.id, m.workspace_name, $3, m.peer_name, m.seq_in_session, m.content, \
           m.metadata, m.token_count, m.created_at, m.embedding \
         FROM (SELECT *, row_number() OVER (ORDER BY seq_in_session) AS n FROM messages \
               WHERE workspace_name = $1 AND session_name = $2 AND seq_in_session <= $5) m \
         JOIN unnest($4::text[]) WITH ORDINALITY AS k(id, n) ON k.n = m.n \
         ORDER BY m.seq_in_session",
        [
            workspace.clone().into(),
            name.clone().into(),
            clone.name.clone().into(),
            ids.into(),
            cutoff.into(),
        ],
    ))
    .await?;
    Ok(())
}

/// Serialises the writes to one session (messages, memberships, deletion) until the transaction
/// ends: a transaction-scoped advisory lock on (workspace, session), so it needs no row and works
/// for a session that does not exist yet. Taken first, before any row lock, so writers queue here
/// instead of deadlocking on rows.
/// The conclusions drawn from the session's messages (before they go: their links cascade).
async fn session_links<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    name: &str,
) -> StoreResult<Vec<String>> {
    let sql = "SELECT DISTINCT cm.conclusion_id AS id FROM conclusion_messages cm \
               JOIN messages m ON m.id = cm.message_id \
               WHERE m.workspace_name = $1 AND m.session_name = $2 ORDER BY id";
    erasure::ids(db, stmt(sql, [workspace.into(), name.into()])).await
}

pub(crate) async fn lock_session<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
) -> StoreResult<()> {
    db.execute_raw(stmt(
        "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
        [workspace.into(), session.into()],
    ))
    .await?;
    Ok(())
}

async fn find_session<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    name: &str,
) -> StoreResult<Option<Session>> {
    Ok(session::Entity::find()
        .filter(session::Column::WorkspaceName.eq(workspace))
        .filter(session::Column::Name.eq(name))
        .one(db)
        .await?)
}

/// The session, which must exist: NOT_FOUND otherwise.
pub(crate) async fn require_session<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    name: &str,
) -> StoreResult<Session> {
    find_session(db, workspace, name)
        .await?
        .ok_or_else(|| StoreError::not_found("session", name))
}

/// [`lock_session`], then [`require_session`].
async fn lock_existing_session<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    name: &str,
) -> StoreResult<Session> {
    lock_session(db, workspace, name).await?;
    require_session(db, workspace, name).await
}

/// Upserts memberships: new members join with the given config, members that had left rejoin with
/// it, active members keep theirs. Checks the observer limit on the result, inside the transaction.
pub(crate) async fn add_members<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
    members: &[MemberConfig],
) -> StoreResult<()> {
    if members.is_empty() {
        return Ok(());
    }
    let mut members = members.to_vec();
    members.sort_by(|a, b| a.peer.cmp(&b.peer));
    members.dedup_by(|a, b| a.peer == b.peer);
    let names: Vec<String> = members.iter().map(|m| m.peer.clone()).collect();
    ensure_peers(db, workspace, &names).await?;
    let rows: Vec<Value> = members
        .iter()
        .map(|m| json!({"peer": m.peer, "config": m.config_json()}))
        .collect();
    db.execute_raw(stmt(
        "INSERT INTO session_peers (workspace_name, session_name, peer_name, configuration) \
         SELECT $1, $2, t.peer, t.config FROM jsonb_to_recordset($3) AS t(peer text, config jsonb) \
         ORDER BY t.peer \
         ON CONFLICT (workspace_name, session_name, peer_name) DO UPDATE SET \
           configuration = CASE WHEN session_peers.left_at IS NULL \
                                THEN session_peers.configuration ELSE EXCLUDED.configuration END, \
           joined_at = CASE WHEN session_peers.left_at IS NULL \
                            THEN session_peers.joined_at ELSE now() END, \
           left_at = NULL",
        [workspace.into(), session.into(), Value::Array(rows).into()],
    ))
    .await?;
    check_observer_limit(db, workspace, session).await
}

async fn check_observer_limit<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
) -> StoreResult<()> {
    let row = db
        .query_one_raw(stmt(
            "SELECT count(*) AS n FROM session_peers \
             WHERE workspace_name = $1 AND session_name = $2 AND left_at IS NULL \
               AND configuration->'observe_others' = 'true'::jsonb",
            [workspace.into(), session.into()],
        ))
        .await?;
    let observers: i64 = match row {
        Some(r) => r.try_get("", "n")?,
        None => 0,
    };
    if observers > MAX_OBSERVERS {
        return Err(StoreError::invalid(format!(
            "session {session} would have {observers} observers; at most {MAX_OBSERVERS} peers may observe others"
        )));
    }
    Ok(())
}

fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
        }
        other => other,
    }
}
