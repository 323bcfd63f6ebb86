//! A workspace together with the sessions, peers and conclusions a request names under it, in one
//! statement. A query such as `workspace(id) { session(id) { … } }` would otherwise pay one round
//! trip per level of its path before any real work starts; for short requests (a 50-message slice
//! is ~5 ms of SQL) those lookups are a large share of the total.

use sea_orm::{ConnectionTrait, FromQueryResult, QueryResult, TryGetError, Value};

use super::conclusion::Conclusion;
use super::peer::Peer;
use super::session::Session;
use super::workspace::Workspace;
use super::{Store, StoreResult, columns, stmt};
use crate::entity::{conclusion, peer, session, workspace};

/// Most names of one kind looked up with the workspace. The lookups are LEFT JOINs, so the rows are
/// the product of the kinds' matches; with this cap at most 4 × 4 × 4 = 64 rows come back. Longer
/// lists are left to the dataloaders (one batched statement each).
pub const MAX_PATH_NAMES: usize = 4;

/// What [`Store::workspace_path`] looks up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathNames {
    /// Session names (only active sessions are found).
    pub sessions: Vec<String>,
    /// Peer names.
    pub peers: Vec<String>,
    /// Conclusion ids (only live conclusions are found).
    pub conclusions: Vec<String>,
}

/// A workspace and those of the named rows that exist.
#[derive(Clone, Debug)]
pub struct WorkspacePath {
    pub workspace: Workspace,
    pub sessions: Vec<Session>,
    pub peers: Vec<Peer>,
    pub conclusions: Vec<Conclusion>,
}

/// The row's `prefix`ed model, or None when the LEFT JOIN found nothing (its columns are NULL).
fn joined<M: FromQueryResult>(row: &QueryResult, prefix: &str) -> StoreResult<Option<M>> {
    match M::from_query_result_nullable(row, prefix) {
        Ok(m) => Ok(Some(m)),
        Err(TryGetError::Null(_)) => Ok(None),
        Err(TryGetError::DbErr(e)) => Err(e.into()),
    }
}

fn push_unique<T>(list: &mut Vec<T>, item: Option<T>, same: impl Fn(&T, &T) -> bool) {
    if let Some(item) = item
        && !list.iter().any(|x| same(x, &item))
    {
        list.push(item);
    }
}

impl Store {
    /// The workspace `name` (None when it does not exist) with the active sessions, peers and live
    /// conclusions of `names` that exist in it, in one statement. Kinds with no names are not
    /// joined; lists longer than [`MAX_PATH_NAMES`] are truncated to it.
    #[tracing::instrument(name = "store.workspace_path", level = "debug", skip_all)]
    pub async fn workspace_path(
        &self,
        name: &str,
        names: &PathNames,
    ) -> StoreResult<Option<WorkspacePath>> {
        let cap = |v: &[String]| v[..v.len().min(MAX_PATH_NAMES)].to_vec();
        let mut select = vec![columns::aliased::<workspace::Entity>("w", "w_")];
        let mut joins = String::new();
        let mut values: Vec<Value> = vec![name.into()];
        let mut join = |kind: &[String], cols: String, sql: &str| {
            if kind.is_empty() {
                return false;
            }
            values.push(cap(kind).into());
            select.push(cols);
            joins.push_str(&sql.replace("$n", &format!("${}", values.len())));
            true
        };
        let with_sessions = join(
            &names.sessions,
            columns::aliased::<session::Entity>("s", "s_"),
            " LEFT JOIN sessions s ON s.workspace_name = w.name AND s.name = ANY($n)",
        );
        let with_peers = join(
            &names.peers,
            columns::aliased::<peer::Entity>("p", "p_"),
            " LEFT JOIN peers p ON p.workspace_name = w.name AND p.name = ANY($n)",
        );
        let with_conclusions = join(
            &names.conclusions,
            columns::aliased::<conclusion::Entity>("c", "c_"),
            " LEFT JOIN conclusions c ON c.workspace_name = w.name AND c.id = ANY($n) \
               AND c.deleted_at IS NULL",
        );
        let sql = format!(
            "SELECT {} FROM workspaces w{joins} WHERE w.name = $1",
            select.join(", ")
        );
        let rows = self.reader().query_all_raw(stmt(&sql, values)).await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let mut path = WorkspacePath {
            workspace: Workspace::from_query_result(first, "w_")?,
            sessions: Vec::new(),
            peers: Vec::new(),
            conclusions: Vec::new(),
        };
        for row in &rows {
            if with_sessions {
                let s = joined::<Session>(row, "s_")?;
                push_unique(&mut path.sessions, s, |a, b| a.name == b.name);
            }
            if with_peers {
                let p = joined::<Peer>(row, "p_")?;
                push_unique(&mut path.peers, p, |a, b| a.name == b.name);
            }
            if with_conclusions {
                let c = joined::<Conclusion>(row, "c_")?;
                push_unique(&mut path.conclusions, c, |a, b| a.id == b.id);
            }
        }
        Ok(Some(path))
    }
}
