//! Conclusions (Honcho's documents): facts one peer holds about
//! another, with public metadata, read-only provenance (level, times_derived, source_ids) and the
//! reasoning graph those source ids span.
//!
//! Explicit conclusions come from clients ([`Store::create_conclusions`]); derived ones only from
//! the deriver ([`Store::record_derived_conclusion`]), which reinforces an existing live derived
//! conclusion with the same content instead of inserting a duplicate.
//!
//! One module per concern: [`crud`] (what clients create, read, change and delete), [`derive`]
//! (the deriver's writes) and [`tree`] (the reasoning graph the source ids span). This module
//! holds what they share: the row type, the content rules and the existence checks.

mod crud;
pub(crate) mod derive;
pub mod dream;
mod tree;

use std::collections::HashSet;

use sea_orm::ConnectionTrait;
use serde_json::Value;

pub use self::crud::{MAX_DISTANCE, MAX_TOP_K};
pub use self::derive::{DerivedConclusion, MAX_SOURCES};
pub use self::tree::{
    DEFAULT_TREE_NODES, Edge, MAX_TREE_DEPTH, MAX_TREE_NODES, ReasoningTree, TreeDirection,
    TreeNode,
};
use super::{StoreError, StoreResult, columns, stmt, tokens, validate};
use crate::entity::conclusion;

pub type Conclusion = conclusion::Model;

pub use crate::entity::conclusion::Level;

/// Most tokens (o200k_base) a conclusion's content or a semantic query may have (Honcho v3.0.12's
/// EMBEDDING_MAX_INPUT_TOKENS).
pub const MAX_EMBEDDING_TOKENS: i32 = 8192;

/// The conclusion columns (the entity's: everything but the embedding) for hand-written
/// SELECT/RETURNING, qualified by `alias` unless it is empty.
pub(super) fn cols(alias: &str) -> String {
    columns::list::<conclusion::Entity>(alias)
}

/// A conclusion a client states (always EXPLICIT).
#[derive(Clone, Debug)]
pub struct NewConclusion {
    pub content: String,
    pub observer: String,
    pub observed: String,
    pub session: Option<String>,
    pub metadata: Option<Value>,
}

/// Content rules (Honcho v3.0.12's): 1..65535 characters counted before NUL bytes are stripped (as
/// Honcho v3.0.12), not empty after stripping, at most 8192 tokens.
pub(crate) fn conclusion_content(field: &str, content: &str) -> StoreResult<String> {
    let len = content.chars().count();
    if len == 0 || len > validate::MAX_CONCLUSION_CHARS {
        return Err(StoreError::invalid(format!(
            "{field} must be 1 to {} characters long (got {len})",
            validate::MAX_CONCLUSION_CHARS
        )));
    }
    let content = content.replace('\0', "");
    if content.is_empty() {
        return Err(StoreError::invalid(format!(
            "{field} is empty once NUL bytes are removed"
        )));
    }
    Ok(content)
}

/// Refuses a text over [`MAX_EMBEDDING_TOKENS`], naming its field (`field` with `{}` replaced by
/// the text's index). Counted off the runtime's workers ([`tokens::count_all`]).
pub(super) async fn within_token_limit(
    field: &str,
    texts: Vec<String>,
) -> StoreResult<Vec<String>> {
    let (texts, counts) = tokens::count_all(texts).await?;
    if let Some((i, n)) = counts
        .iter()
        .enumerate()
        .find(|(_, n)| **n > MAX_EMBEDDING_TOKENS)
    {
        let field = field.replace("{}", &i.to_string());
        return Err(StoreError::invalid(format!(
            "{field} is {n} tokens long; the limit is {MAX_EMBEDDING_TOKENS}"
        )));
    }
    Ok(texts)
}

/// Checks that every peer and session named exists in the workspace, and
/// key-share-locks them so they cannot vanish before the transaction's inserts. The first missing
/// one is NOT_FOUND, the workspace itself when it does not exist.
pub(crate) async fn require_peers_and_sessions<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    peers: &[String],
    sessions: &[String],
) -> StoreResult<()> {
    let found = |table: &'static str, names: Vec<String>| async move {
        let rows = db
            .query_all_raw(stmt(
                &format!(
                    "SELECT name FROM {table} WHERE workspace_name = $1 AND name = ANY($2::text[]) \
                     ORDER BY name FOR KEY SHARE"
                ),
                [workspace.into(), names.into()],
            ))
            .await?;
        rows.into_iter()
            .map(|r| r.try_get::<String>("", "name"))
            .collect::<Result<HashSet<String>, _>>()
            .map_err(StoreError::from)
    };
    let dedup = |names: &[String]| {
        let mut seen = HashSet::new();
        names
            .iter()
            .filter(|n| seen.insert(n.as_str()))
            .cloned()
            .collect::<Vec<_>>()
    };
    let peers = dedup(peers);
    let live_peers = found("peers", peers.clone()).await?;
    if let Some(missing) = peers.iter().find(|p| !live_peers.contains(*p)) {
        let ws_exists = db
            .query_one_raw(stmt(
                "SELECT 1 AS one FROM workspaces WHERE name = $1",
                [workspace.into()],
            ))
            .await?
            .is_some();
        if !ws_exists {
            return Err(StoreError::not_found("workspace", workspace));
        }
        return Err(StoreError::not_found("peer", missing.clone()));
    }
    let sessions = dedup(sessions);
    if !sessions.is_empty() {
        let live = found("sessions", sessions.clone()).await?;
        if let Some(missing) = sessions.iter().find(|s| !live.contains(*s)) {
            return Err(StoreError::not_found("session", missing.clone()));
        }
    }
    Ok(())
}
