//! Export: a workspace as compressed JSON lines, read from one snapshot in keyset pages.
//!
//! The snapshot is a read-only REPEATABLE READ transaction ([`Store::snapshot`]): every page
//! sees the database as of the first statement, so a message written while the export runs is
//! in no page (not half in), and a conclusion never cites a message the file lacks. Each page is
//! [`PAGE`] rows in the order of a unique index, serialised and compressed before the next is
//! read, so memory holds one page whatever the workspace's size.

use std::io::Write;
use std::pin::Pin;

use futures::Stream;
use sea_orm::{
    ConnectionTrait, DatabaseTransaction, FromQueryResult, QueryResult, Value as SqlValue,
};

use super::{
    ConclusionRecord, EmbeddingModel, End, FORMAT, Header, MessageRecord, PAGE, Record, VERSION,
    WorkspaceRecord, encode_vector,
};
use crate::store::{Store, StoreError, StoreResult, stmt};

/// The compressed bytes of an export, a page at a time.
pub type ExportStream = Pin<Box<dyn Stream<Item = StoreResult<Vec<u8>>> + Send>>;

/// zstd's default level: about as fast as the pages are read, a fifth of the JSON's size.
const LEVEL: i32 = 3;

impl Store {
    /// The workspace's export (docs/export.md): NOT_FOUND before any byte when there is no such
    /// workspace; then its header, workspace, peers, sessions, members, messages, conclusions,
    /// summaries, card entries, scopes, scope sessions, dreams and end lines, zstd-compressed.
    #[tracing::instrument(name = "store.export_workspace", level = "debug", skip_all)]
    pub async fn export_workspace(&self, workspace: &str) -> StoreResult<ExportStream> {
        let txn = self.snapshot().await?;
        let header = header(&txn, workspace).await?;
        let ws = workspace_record(&txn, workspace)
            .await?
            .ok_or_else(|| StoreError::not_found("workspace", workspace))?;
        let workspace = workspace.to_owned();
        let stream = async_stream::try_stream! {
            let mut out = Lines::new()?;
            out.push(&Record::Header(header))?;
            out.push(&Record::Workspace(ws))?;
            yield out.take();
            let mut end = End::default();
            for kind in Kind::ALL {
                let mut after: Option<Vec<SqlValue>> = None;
                loop {
                    let rows = page(&txn, &workspace, kind, after.as_deref()).await?;
                    let Some(last) = rows.last() else { break };
                    after = Some(kind.key_of(last)?);
                    let n = rows.len() as u64;
                    for row in &rows {
                        out.push(&kind.record(row)?)?;
                    }
                    *kind.count(&mut end) += n;
                    // The compressor holds back up to a block (128 KiB) of input.
                    let chunk = out.take();
                    if !chunk.is_empty() {
                        yield chunk;
                    }
                    if n < PAGE {
                        break;
                    }
                }
            }
            out.push(&Record::End(end))?;
            yield out.finish()?;
            // Read-only: there is nothing to commit, only the snapshot to let go of.
            txn.rollback().await?;
        };
        Ok(Box::pin(stream))
    }
}

/// The compressor, and what it has written since it was last emptied.
struct Lines(zstd::stream::write::Encoder<'static, Vec<u8>>);

impl Lines {
    fn new() -> StoreResult<Self> {
        Ok(Lines(
            zstd::stream::write::Encoder::new(Vec::new(), LEVEL).map_err(io)?,
        ))
    }

    fn push(&mut self, record: &Record) -> StoreResult<()> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| StoreError::Internal(format!("serialising an export line: {e}")))?;
        line.push(b'\n');
        self.0.write_all(&line).map_err(io)
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(self.0.get_mut())
    }

    fn finish(self) -> StoreResult<Vec<u8>> {
        self.0.finish().map_err(io)
    }
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Internal(format!("compressing an export: {e}"))
}

async fn header(txn: &DatabaseTransaction, workspace: &str) -> StoreResult<Header> {
    let rows = txn
        .query_all_raw(stmt(
            "SELECT key, value FROM honcho_meta WHERE key IN ('embedding_model', 'embedding_dims')",
            [],
        ))
        .await?;
    let mut model = None;
    let mut dims = 0;
    for r in rows {
        let key: String = r.try_get("", "key")?;
        let value: String = r.try_get("", "value")?;
        match key.as_str() {
            "embedding_model" => model = Some(value),
            _ => dims = value.parse().unwrap_or(0),
        }
    }
    Ok(Header {
        format: FORMAT.into(),
        version: VERSION,
        workspace: workspace.into(),
        embedding: EmbeddingModel { model, dims },
    })
}

async fn workspace_record(
    txn: &DatabaseTransaction,
    workspace: &str,
) -> StoreResult<Option<WorkspaceRecord>> {
    let row = txn
        .query_one_raw(stmt(
            "SELECT name, metadata, internal_metadata, configuration, created_at \
             FROM workspaces WHERE name = $1",
            [workspace.into()],
        ))
        .await?;
    Ok(row
        .map(|r| WorkspaceRecord::from_query_result(&r, ""))
        .transpose()?)
}

/// What the file holds after the workspace, in this order: what a record refers to comes
/// before it (a message's session and peer, a conclusion's messages, a summary's last message,
/// a card entry's conclusions, a scope membership's scope and session).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Peers,
    Sessions,
    Members,
    Messages,
    Conclusions,
    Summaries,
    CardEntries,
    Scopes,
    ScopeSessions,
    Dreams,
}

impl Kind {
    const ALL: [Kind; 10] = [
        Kind::Peers,
        Kind::Sessions,
        Kind::Members,
        Kind::Messages,
        Kind::Conclusions,
        Kind::Summaries,
        Kind::CardEntries,
        Kind::Scopes,
        Kind::ScopeSessions,
        Kind::Dreams,
    ];

    /// The page's query: `$1` the workspace, `$2..` the last key of the page before (the first
    /// page compares with nothing), in the order of a unique index.
    fn sql(self, first: bool) -> String {
        let (select, key, after) = match self {
            Kind::Peers => (
                "SELECT name, metadata, internal_metadata, configuration, created_at FROM peers t",
                "name",
                "name > $2",
            ),
            Kind::Sessions => (
                "SELECT name, metadata, internal_metadata, configuration, created_at \
                 FROM sessions t",
                "name",
                "name > $2",
            ),
            Kind::Members => (
                "SELECT session_name, peer_name, configuration, internal_metadata, joined_at, \
                 left_at FROM session_peers t",
                "session_name, peer_name",
                "(session_name, peer_name) > ($2, $3)",
            ),
            Kind::Messages => (
                "SELECT public_id, session_name, peer_name, seq_in_session, content, metadata, \
                 internal_metadata, token_count, created_at, embedding::real[] AS embedding \
                 FROM messages t",
                "session_name, seq_in_session",
                "(session_name, seq_in_session) > ($2, $3)",
            ),
            Kind::Conclusions => (
                "SELECT id, observer, observed, session_name, content, level, times_derived, \
                 source_ids, metadata, internal_metadata, created_at, deleted_at, \
                 embedding::real[] AS embedding, \
                 ARRAY(SELECT m.public_id FROM conclusion_messages cm \
                   JOIN messages m ON m.id = cm.message_id \
                   WHERE cm.conclusion_id = t.id ORDER BY m.public_id) AS message_ids \
                 FROM conclusions t",
                "id",
                "id > $2",
            ),
            Kind::Summaries => (
                "SELECT session_name, kind, content, \
                 (SELECT m.public_id FROM messages m WHERE m.id = t.message_id) AS message_id, \
                 seq_in_session, token_count, created_at FROM session_summaries t",
                "session_name, kind",
                "(session_name, kind) > ($2, $3)",
            ),
            Kind::CardEntries => (
                "SELECT observer, observed, position, content, created_at, \
                 ARRAY(SELECT s.conclusion_id FROM peer_card_sources s \
                   WHERE s.entry_id = t.id ORDER BY s.conclusion_id) AS conclusion_ids \
                 FROM peer_card_entries t",
                "observer, observed, position",
                "(observer, observed, position) > ($2, $3, $4)",
            ),
            Kind::Scopes => (
                "SELECT name, metadata, created_at FROM scopes t",
                "name",
                "name > $2",
            ),
            Kind::ScopeSessions => (
                "SELECT scope_name, session_name, added_at FROM scope_sessions t",
                "scope_name, session_name",
                "(scope_name, session_name) > ($2, $3)",
            ),
            Kind::Dreams => (
                "SELECT observer, observed, last_dream_at, explicit_at_last_dream \
                 FROM dream_units t",
                "observer, observed",
                "(observer, observed) > ($2, $3)",
            ),
        };
        let after = if first {
            String::new()
        } else {
            format!("AND {after}")
        };
        // A pair asked to dream that never has is scheduling work, not history.
        let only = match self {
            Kind::Dreams => "AND last_dream_at IS NOT NULL",
            _ => "",
        };
        format!("{select} WHERE workspace_name = $1 {only} {after} ORDER BY {key} LIMIT {PAGE}")
    }

    /// The key of `row` to start the next page after.
    fn key_of(self, row: &QueryResult) -> StoreResult<Vec<SqlValue>> {
        let text = |c: &str| -> StoreResult<SqlValue> { Ok(row.try_get::<String>("", c)?.into()) };
        Ok(match self {
            Kind::Peers | Kind::Sessions | Kind::Scopes => vec![text("name")?],
            Kind::Members => vec![text("session_name")?, text("peer_name")?],
            Kind::Messages => vec![
                text("session_name")?,
                row.try_get::<i64>("", "seq_in_session")?.into(),
            ],
            Kind::Conclusions => vec![text("id")?],
            Kind::Summaries => vec![text("session_name")?, text("kind")?],
            Kind::CardEntries => vec![
                text("observer")?,
                text("observed")?,
                row.try_get::<i32>("", "position")?.into(),
            ],
            Kind::ScopeSessions => vec![text("scope_name")?, text("session_name")?],
            Kind::Dreams => vec![text("observer")?, text("observed")?],
        })
    }

    fn count(self, end: &mut End) -> &mut u64 {
        match self {
            Kind::Peers => &mut end.peers,
            Kind::Sessions => &mut end.sessions,
            Kind::Members => &mut end.members,
            Kind::Messages => &mut end.messages,
            Kind::Conclusions => &mut end.conclusions,
            Kind::Summaries => &mut end.summaries,
            Kind::CardEntries => &mut end.card_entries,
            Kind::Scopes => &mut end.scopes,
            Kind::ScopeSessions => &mut end.scope_sessions,
            Kind::Dreams => &mut end.dreams,
        }
    }

    /// The record of `r`, read by the columns of its fields' names (`Kind::sql` selects them).
    fn record(self, r: &QueryResult) -> StoreResult<Record> {
        fn read<T: FromQueryResult>(r: &QueryResult) -> StoreResult<T> {
            Ok(T::from_query_result(r, "")?)
        }
        let vector = || -> StoreResult<Option<String>> {
            let v: Option<Vec<f32>> = r.try_get("", "embedding")?;
            Ok(v.map(|v| encode_vector(&v)))
        };
        Ok(match self {
            Kind::Peers => Record::Peer(read(r)?),
            Kind::Sessions => Record::Session(read(r)?),
            Kind::Members => Record::Member(read(r)?),
            Kind::Messages => Record::Message(MessageRecord {
                embedding: vector()?,
                ..read(r)?
            }),
            Kind::Conclusions => Record::Conclusion(ConclusionRecord {
                embedding: vector()?,
                ..read(r)?
            }),
            Kind::Summaries => Record::Summary(read(r)?),
            Kind::CardEntries => Record::CardEntry(read(r)?),
            Kind::Scopes => Record::Scope(read(r)?),
            Kind::ScopeSessions => Record::ScopeSession(read(r)?),
            Kind::Dreams => Record::Dream(read(r)?),
        })
    }
}

async fn page(
    txn: &DatabaseTransaction,
    workspace: &str,
    kind: Kind,
    after: Option<&[SqlValue]>,
) -> StoreResult<Vec<QueryResult>> {
    let mut values: Vec<SqlValue> = vec![workspace.into()];
    values.extend(after.unwrap_or_default().iter().cloned());
    Ok(txn
        .query_all_raw(stmt(&kind.sql(after.is_none()), values))
        .await?)
}

impl Store {
    /// How many rows of each kind an export of `workspace` would hold now (NOT_FOUND for no
    /// such workspace).
    #[tracing::instrument(name = "store.export_counts", level = "debug", skip_all)]
    pub async fn export_counts(&self, workspace: &str) -> StoreResult<End> {
        let row = self
            .db()
            .query_one_raw(stmt(
                "SELECT (SELECT count(*) FROM peers WHERE workspace_name = w.name) AS peers, \
                   (SELECT count(*) FROM sessions WHERE workspace_name = w.name) AS sessions, \
                   (SELECT count(*) FROM session_peers WHERE workspace_name = w.name) AS members, \
                   (SELECT count(*) FROM messages WHERE workspace_name = w.name) AS messages, \
                   (SELECT count(*) FROM conclusions WHERE workspace_name = w.name) AS conclusions, \
                   (SELECT count(*) FROM session_summaries WHERE workspace_name = w.name) \
                     AS summaries, \
                   (SELECT count(*) FROM peer_card_entries WHERE workspace_name = w.name) \
                     AS card_entries, \
                   (SELECT count(*) FROM scopes WHERE workspace_name = w.name) AS scopes, \
                   (SELECT count(*) FROM scope_sessions WHERE workspace_name = w.name) \
                     AS scope_sessions, \
                   (SELECT count(*) FROM dream_units WHERE workspace_name = w.name \
                     AND last_dream_at IS NOT NULL) AS dreams \
                 FROM workspaces w WHERE w.name = $1",
                [workspace.into()],
            ))
            .await?
            .ok_or_else(|| StoreError::not_found("workspace", workspace))?;
        let n = |c: &str| -> StoreResult<u64> { Ok(row.try_get::<i64>("", c)?.max(0) as u64) };
        Ok(End {
            peers: n("peers")?,
            sessions: n("sessions")?,
            members: n("members")?,
            messages: n("messages")?,
            conclusions: n("conclusions")?,
            summaries: n("summaries")?,
            card_entries: n("card_entries")?,
            scopes: n("scopes")?,
            scope_sessions: n("scope_sessions")?,
            dreams: n("dreams")?,
        })
    }
}
