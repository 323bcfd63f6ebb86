use async_graphql::SimpleObject;

use crate::store::export::{EmbeddingModel, End, FORMAT, VERSION};

/// What an export of the workspace holds now, and where to fetch it: `GET` the `path` with the
/// same key for the file itself, zstd-compressed JSON lines (docs/export.md).
#[derive(SimpleObject)]
pub struct WorkspaceExport {
    /// The file's format name (`honcho-graphql-export`).
    pub format: String,
    /// The format's version, in the file's first line.
    pub version: i32,
    /// Where the file streams from, relative to the server (`/export/workspaces/{id}`).
    pub path: String,
    /// The model that computed the stored vectors (null: none recorded).
    pub embedding_model: Option<String>,
    pub embedding_dims: i32,
    pub peers: i64,
    pub sessions: i64,
    /// Memberships of peers in sessions.
    pub members: i64,
    pub messages: i64,
    /// Conclusions, soft-deleted ones included.
    pub conclusions: i64,
    /// Session summaries (at most one short and one long per session).
    pub summaries: i64,
    /// The deriver's peer card entries (a client's card is in its observer's metadata).
    pub card_entries: i64,
    pub scopes: i64,
    /// Memberships of sessions in scopes.
    pub scope_sessions: i64,
    /// Pairs (observer, observed) that have dreamt: when, and over how many conclusions.
    pub dreams: i64,
}

impl WorkspaceExport {
    pub fn new(workspace: &str, model: EmbeddingModel, counts: End) -> Self {
        WorkspaceExport {
            format: FORMAT.to_owned(),
            version: VERSION as i32,
            path: export_path(workspace),
            embedding_model: model.model,
            embedding_dims: model.dims as i32,
            peers: counts.peers as i64,
            sessions: counts.sessions as i64,
            members: counts.members as i64,
            messages: counts.messages as i64,
            conclusions: counts.conclusions as i64,
            summaries: counts.summaries as i64,
            card_entries: counts.card_entries as i64,
            scopes: counts.scopes as i64,
            scope_sessions: counts.scope_sessions as i64,
            dreams: counts.dreams as i64,
        }
    }
}

/// The HTTP route of a workspace's export (a workspace name needs no escaping: it is
/// `[A-Za-z0-9_-]+`).
pub fn export_path(workspace: &str) -> String {
    format!("/export/workspaces/{workspace}")
}
