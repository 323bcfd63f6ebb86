//! Scopes (Honcho main after v3.0.12): named groups of a workspace's sessions that bound what
//! recall may see.
//!
//! Honcho implements a scope as a hidden observer peer that copies the conclusions of its
//! sessions into collections of its own, so a membership change needs a backfill job before
//! recall sees it. Here a scope is only its membership: recall inside a scope filters by the
//! conclusions' and messages' sessions at read time ([`Store::scope_filter`]), so a change is in
//! effect when it commits, and nothing is copied or reconciled later.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, EntityTrait, FromQueryResult, QueryResult};
use serde_json::{Value, json};

use super::page::Order;
use super::session::Session;
use super::{Store, StoreError, StoreResult, new_id, stmt, validate};
use crate::entity::{scope, session};

pub type Scope = scope::Model;

/// Most sessions one scope may hold. Recall inside a scope filters by its member list, so the
/// list is bounded; a larger group is better served by a workspace of its own.
pub const MAX_SCOPE_SESSIONS: i64 = 10_000;

/// What a scope holds now: Honcho's `backfill_status` (always empty here: membership takes
/// effect when it commits, nothing is copied later), and the counts of what its recall reaches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeStatus {
    pub sessions: i64,
    pub messages: i64,
    pub conclusions: i64,
    /// The deriver's queued messages of the scope's sessions, not yet turned into conclusions.
    pub pending_work_units: i64,
}

const SCOPE_COLUMNS: &str = "id, name, workspace_name, metadata, created_at";

fn scope_from_row(row: &QueryResult) -> StoreResult<Scope> {
    Ok(Scope {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
        workspace_name: row.try_get("", "workspace_name")?,
        metadata: row.try_get("", "metadata")?,
        created_at: row.try_get::<DateTime<Utc>>("", "created_at")?,
    })
}

fn order_sql(order: Order) -> &'static str {
    match order {
        Order::Asc => "ASC",
        Order::Desc => "DESC",
    }
}

impl Store {
    /// The scope of the workspace with this name, created when missing (`true`: it is new).
    /// Metadata, when given, replaces the existing scope's. NOT_FOUND for a missing workspace.
    #[tracing::instrument(name = "store.get_or_create_scope", level = "debug", skip_all)]
    pub async fn get_or_create_scope(
        &self,
        workspace: &str,
        name: &str,
        metadata: Option<Value>,
    ) -> StoreResult<(Scope, bool)> {
        validate::name("workspace", workspace)?;
        validate::name("scope", name)?;
        let metadata = validate::optional_metadata(metadata)?;
        let metadata = &metadata;
        self.transaction(Default::default(), |txn| async move {
            let ws = txn
                .query_one_raw(stmt(
                    "SELECT name FROM workspaces WHERE name = $1 FOR KEY SHARE",
                    [workspace.into()],
                ))
                .await?;
            if ws.is_none() {
                return Err(StoreError::not_found("workspace", workspace));
            }
            let inserted = txn
                .query_one_raw(stmt(
                    &format!(
                        "INSERT INTO scopes (id, name, workspace_name, metadata) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (workspace_name, name) DO NOTHING \
                         RETURNING {SCOPE_COLUMNS}"
                    ),
                    [
                        new_id().into(),
                        name.into(),
                        workspace.into(),
                        metadata.clone().unwrap_or_else(|| json!({})).into(),
                    ],
                ))
                .await?;
            if let Some(row) = inserted {
                return Ok((scope_from_row(&row)?, true));
            }
            let row = match metadata {
                Some(m) => {
                    txn.query_one_raw(stmt(
                        &format!(
                            "UPDATE scopes SET metadata = $3 \
                             WHERE workspace_name = $1 AND name = $2 RETURNING {SCOPE_COLUMNS}"
                        ),
                        [workspace.into(), name.into(), m.clone().into()],
                    ))
                    .await?
                }
                None => {
                    txn.query_one_raw(stmt(
                        &format!(
                            "SELECT {SCOPE_COLUMNS} FROM scopes \
                             WHERE workspace_name = $1 AND name = $2"
                        ),
                        [workspace.into(), name.into()],
                    ))
                    .await?
                }
            };
            let row = row.ok_or_else(|| StoreError::Internal("the scope vanished".into()))?;
            Ok((scope_from_row(&row)?, false))
        })
        .await
    }

    /// The scope with this name, if any.
    #[tracing::instrument(name = "store.scope", level = "debug", skip_all)]
    pub async fn scope(&self, workspace: &str, name: &str) -> StoreResult<Option<Scope>> {
        self.reader()
            .query_one_raw(stmt(
                &format!(
                    "SELECT {SCOPE_COLUMNS} FROM scopes WHERE workspace_name = $1 AND name = $2"
                ),
                [workspace.into(), name.into()],
            ))
            .await?
            .map(|r| scope_from_row(&r))
            .transpose()
    }

    /// The scope with this name; NOT_FOUND when there is none.
    pub async fn require_scope(&self, workspace: &str, name: &str) -> StoreResult<Scope> {
        self.scope(workspace, name)
            .await?
            .ok_or_else(|| StoreError::not_found("scope", name))
    }

    /// A page of the workspace's scopes by creation (`skip` then at most `take`), and how many
    /// there are.
    #[tracing::instrument(name = "store.scopes", level = "debug", skip_all)]
    pub async fn scopes(
        &self,
        workspace: &str,
        order: Order,
        skip: u64,
        take: u64,
    ) -> StoreResult<(Vec<Scope>, u64)> {
        let o = order_sql(order);
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &format!(
                    "SELECT {SCOPE_COLUMNS} FROM scopes WHERE workspace_name = $1 \
                     ORDER BY created_at {o}, id {o} OFFSET $2 LIMIT $3"
                ),
                [workspace.into(), to_i64(skip).into(), to_i64(take).into()],
            ))
            .await?;
        let items = rows
            .iter()
            .map(scope_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let total = count(
            self.reader(),
            "SELECT count(*) AS n FROM scopes WHERE workspace_name = $1",
            [workspace.into()],
        )
        .await?;
        Ok((items, total))
    }

    /// Adds existing sessions to the scope (one already a member is left as it is). All or
    /// nothing: NOT_FOUND for a missing scope or session (sessions are looked up in the scope's
    /// workspace only), BAD_USER_INPUT for an empty or oversized list, TOO_LARGE past
    /// [`MAX_SCOPE_SESSIONS`].
    #[tracing::instrument(name = "store.add_sessions_to_scope", level = "debug", skip_all)]
    pub async fn add_sessions_to_scope(
        &self,
        workspace: &str,
        scope: &str,
        sessions: &[String],
    ) -> StoreResult<()> {
        if sessions.is_empty() {
            return Err(StoreError::invalid(
                "session_ids must name at least one session",
            ));
        }
        validate::batch_len("session_ids", sessions.len())?;
        for s in sessions {
            validate::name("session", s)?;
        }
        self.transaction(Default::default(), |txn| async move {
            // Serializes membership changes of one scope, so the bound below holds.
            let found = txn
                .query_one_raw(stmt(
                    "SELECT name FROM scopes WHERE workspace_name = $1 AND name = $2 \
                     FOR NO KEY UPDATE",
                    [workspace.into(), scope.into()],
                ))
                .await?;
            if found.is_none() {
                return Err(StoreError::not_found("scope", scope));
            }
            let names: Vec<String> = sessions.to_vec();
            let existing = txn
                .query_all_raw(stmt(
                    "SELECT name FROM sessions WHERE workspace_name = $1 AND name = ANY($2) \
                     FOR KEY SHARE",
                    [workspace.into(), names.clone().into()],
                ))
                .await?;
            let existing: Vec<String> = existing
                .iter()
                .map(|r| r.try_get::<String>("", "name"))
                .collect::<Result<_, _>>()?;
            if let Some(missing) = names.iter().find(|n| !existing.contains(n)) {
                return Err(StoreError::not_found("session", missing.clone()));
            }
            let inserted = txn
                .execute_raw(stmt(
                    "INSERT INTO scope_sessions (workspace_name, scope_name, session_name) \
                     SELECT $1, $2, s FROM unnest($3::text[]) AS s \
                     ON CONFLICT DO NOTHING",
                    [workspace.into(), scope.into(), names.into()],
                ))
                .await?;
            if inserted.rows_affected() > 0 {
                let total = count(
                    &*txn,
                    "SELECT count(*) AS n FROM scope_sessions \
                     WHERE workspace_name = $1 AND scope_name = $2",
                    [workspace.into(), scope.into()],
                )
                .await?;
                if total > MAX_SCOPE_SESSIONS as u64 {
                    // The error rolls the insert back: nothing is half-added.
                    return Err(StoreError::TooLarge {
                        limit: "scopeSessions",
                        max: MAX_SCOPE_SESSIONS as usize,
                        message: format!(
                            "a scope holds at most {MAX_SCOPE_SESSIONS} sessions ({total} asked)"
                        ),
                    });
                }
            }
            Ok(())
        })
        .await
    }

    /// Removes a session from the scope (a session that is not a member is left as it is).
    /// NOT_FOUND for a missing scope, or a session the workspace does not have.
    #[tracing::instrument(name = "store.remove_session_from_scope", level = "debug", skip_all)]
    pub async fn remove_session_from_scope(
        &self,
        workspace: &str,
        scope: &str,
        session: &str,
    ) -> StoreResult<()> {
        self.transaction(Default::default(), |txn| async move {
            let found = txn
                .query_one_raw(stmt(
                    "SELECT name FROM scopes WHERE workspace_name = $1 AND name = $2 \
                     FOR NO KEY UPDATE",
                    [workspace.into(), scope.into()],
                ))
                .await?;
            if found.is_none() {
                return Err(StoreError::not_found("scope", scope));
            }
            let removed = txn
                .execute_raw(stmt(
                    "DELETE FROM scope_sessions \
                     WHERE workspace_name = $1 AND scope_name = $2 AND session_name = $3",
                    [workspace.into(), scope.into(), session.into()],
                ))
                .await?;
            if removed.rows_affected() == 0 {
                let exists = txn
                    .query_one_raw(stmt(
                        "SELECT 1 AS one FROM sessions WHERE workspace_name = $1 AND name = $2",
                        [workspace.into(), session.into()],
                    ))
                    .await?;
                if exists.is_none() {
                    return Err(StoreError::not_found("session", session));
                }
            }
            Ok(())
        })
        .await
    }

    /// A page of the scope's sessions by when they joined it (`skip` then at most `take`), and
    /// how many it holds. NOT_FOUND for a missing scope.
    #[tracing::instrument(name = "store.scope_sessions", level = "debug", skip_all)]
    pub async fn scope_sessions(
        &self,
        workspace: &str,
        scope: &str,
        order: Order,
        skip: u64,
        take: u64,
    ) -> StoreResult<(Vec<Session>, u64)> {
        self.require_scope(workspace, scope).await?;
        let o = order_sql(order);
        let items = session::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "SELECT s.* FROM scope_sessions m \
                     JOIN sessions s ON s.workspace_name = m.workspace_name \
                       AND s.name = m.session_name \
                     WHERE m.workspace_name = $1 AND m.scope_name = $2 \
                     ORDER BY m.added_at {o}, s.id {o} OFFSET $3 LIMIT $4"
                ),
                [
                    workspace.into(),
                    scope.into(),
                    to_i64(skip).into(),
                    to_i64(take).into(),
                ],
            ))
            .all(self.reader())
            .await?;
        let total = count(
            self.reader(),
            "SELECT count(*) AS n FROM scope_sessions WHERE workspace_name = $1 AND scope_name = $2",
            [workspace.into(), scope.into()],
        )
        .await?;
        Ok((items, total))
    }

    /// The names of every session of the scope (at most [`MAX_SCOPE_SESSIONS`]): what recall
    /// inside it may read. NOT_FOUND for a missing scope.
    #[tracing::instrument(name = "store.scope_session_names", level = "debug", skip_all)]
    pub async fn scope_session_names(
        &self,
        workspace: &str,
        scope: &str,
    ) -> StoreResult<Vec<String>> {
        self.require_scope(workspace, scope).await?;
        let rows = self
            .reader()
            .query_all_raw(stmt(
                "SELECT session_name FROM scope_sessions \
                 WHERE workspace_name = $1 AND scope_name = $2 \
                 ORDER BY session_name LIMIT $3",
                [workspace.into(), scope.into(), MAX_SCOPE_SESSIONS.into()],
            ))
            .await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get::<String>("", "session_name"))
            .collect::<Result<_, _>>()?)
    }

    /// The filter (Honcho's filter language) of what recall inside the scope may read: its
    /// sessions' conclusions and messages. A scope without sessions matches nothing, never
    /// everything.
    pub async fn scope_filter(&self, workspace: &str, scope: &str) -> StoreResult<Value> {
        let names = self.scope_session_names(workspace, scope).await?;
        Ok(json!({"session_id": {"in": names}}))
    }

    /// Whether the session is a member of the scope (false for a missing scope or session).
    #[tracing::instrument(name = "store.session_in_scope", level = "debug", skip_all)]
    pub async fn session_in_scope(
        &self,
        workspace: &str,
        scope: &str,
        session: &str,
    ) -> StoreResult<bool> {
        Ok(self
            .reader()
            .query_one_raw(stmt(
                "SELECT 1 AS one FROM scope_sessions \
                 WHERE workspace_name = $1 AND scope_name = $2 AND session_name = $3",
                [workspace.into(), scope.into(), session.into()],
            ))
            .await?
            .is_some())
    }

    /// Whether the peer is an active member of one of the scope's sessions.
    #[tracing::instrument(name = "store.peer_in_scope", level = "debug", skip_all)]
    pub async fn peer_in_scope(
        &self,
        workspace: &str,
        scope: &str,
        peer: &str,
    ) -> StoreResult<bool> {
        Ok(self
            .reader()
            .query_one_raw(stmt(
                "SELECT 1 AS one FROM scope_sessions m \
                 JOIN session_peers sp ON sp.workspace_name = m.workspace_name \
                   AND sp.session_name = m.session_name \
                 WHERE m.workspace_name = $1 AND m.scope_name = $2 AND sp.peer_name = $3 \
                   AND sp.left_at IS NULL \
                 LIMIT 1",
                [workspace.into(), scope.into(), peer.into()],
            ))
            .await?
            .is_some())
    }

    /// What the scope holds now. NOT_FOUND for a missing scope.
    #[tracing::instrument(name = "store.scope_status", level = "debug", skip_all)]
    pub async fn scope_status(&self, workspace: &str, scope: &str) -> StoreResult<ScopeStatus> {
        self.require_scope(workspace, scope).await?;
        #[derive(FromQueryResult)]
        struct Counts {
            sessions: i64,
            messages: i64,
            conclusions: i64,
            pending: i64,
        }
        let counts = Counts::find_by_statement(stmt(
            "WITH m AS (SELECT session_name FROM scope_sessions \
                        WHERE workspace_name = $1 AND scope_name = $2) \
             SELECT (SELECT count(*) FROM m) AS sessions, \
               (SELECT count(*) FROM messages x JOIN m ON x.session_name = m.session_name \
                 WHERE x.workspace_name = $1) AS messages, \
               (SELECT count(*) FROM conclusions c JOIN m ON c.session_name = m.session_name \
                 WHERE c.workspace_name = $1) AS conclusions, \
               (SELECT count(*) FROM deriver_units u \
                 JOIN deriver_items i ON i.unit_id = u.id \
                 JOIN m ON u.session_name = m.session_name \
                 WHERE u.workspace_name = $1 AND u.failed_at IS NULL) AS pending",
            [workspace.into(), scope.into()],
        ))
        .one(self.reader())
        .await?
        .ok_or_else(|| StoreError::Internal("the status query returned no row".into()))?;
        Ok(ScopeStatus {
            sessions: counts.sessions,
            messages: counts.messages,
            conclusions: counts.conclusions,
            pending_work_units: counts.pending,
        })
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

async fn count<C: ConnectionTrait, I: IntoIterator<Item = sea_orm::Value>>(
    db: &C,
    sql: &str,
    values: I,
) -> StoreResult<u64> {
    let row = db.query_one_raw(stmt(sql, values)).await?;
    let n: i64 = match row {
        Some(r) => r.try_get("", "n")?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or(0))
}

impl Store {
    /// `filters`, narrowed to the scope's sessions when there is one (NOT_FOUND for a missing
    /// scope): what every recall inside a scope filters by.
    pub async fn within_scope(
        &self,
        workspace: &str,
        scope: Option<&str>,
        filters: Value,
    ) -> StoreResult<Value> {
        match scope {
            None => Ok(filters),
            Some(scope) => {
                let bound = self.scope_filter(workspace, scope).await?;
                if filters.is_null() {
                    return Ok(bound);
                }
                Ok(json!({"AND": [filters, bound]}))
            }
        }
    }
}
