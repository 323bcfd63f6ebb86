//! A workspace as one file and back (docs/export.md): [`read`] writes everything of a workspace
//! as zstd-compressed JSON lines from one snapshot, page by page; [`write`] reads such a file
//! into a workspace in batches that can be replayed without duplicating anything.
//!
//! The lines are [`Record`]s: a [`Header`] first, then the workspace, its peers, sessions,
//! memberships, messages, conclusions, session summaries, the deriver's peer card entries, scopes
//! and their sessions, and when each pair last dreamt, and an [`End`] last that counts them, so a
//! truncated file is told from a whole one.

mod checkpoint;
mod read;
mod write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use read::ExportStream;
pub use write::{ImportOptions, ImportProgress, ImportReport, Importer, OnConflict, derived_id};

use super::{StoreError, StoreResult};

/// The header's `format`.
pub const FORMAT: &str = "honcho-graphql-export";
/// The header's `version` this server writes.
pub const VERSION: u32 = 2;
/// The versions this server reads: 1 is 2 without summaries, card entries, scopes and dreams
/// (a file of version 1 simply has no such lines; docs/export.md).
pub const READS: [u32; 2] = [1, 2];
/// Rows per page of the export and per batch of the import.
pub const PAGE: u64 = 500;

/// The first line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The workspace's name where the file was written.
    pub workspace: String,
    pub embedding: EmbeddingModel,
}

/// What the file's vectors are: a reader reuses them only when its embedder is the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingModel {
    /// The model that computed the vectors (None: the database never recorded one).
    pub model: Option<String>,
    pub dims: u32,
}

/// A workspace, peer or session: the three are written with the same fields, read from the
/// columns of the same names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct NamedRecord {
    pub name: String,
    pub metadata: Value,
    pub internal_metadata: Value,
    pub configuration: Value,
    pub created_at: DateTime<Utc>,
}

pub type WorkspaceRecord = NamedRecord;
/// A peer; its cards are in `internalMetadata.peer_cards`.
pub type PeerRecord = NamedRecord;
pub type SessionRecord = NamedRecord;

/// A peer's membership of a session, with its configuration (`observeMe`, `observeOthers`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct MemberRecord {
    #[sea_orm(alias = "session_name")]
    pub session: String,
    #[sea_orm(alias = "peer_name")]
    pub peer: String,
    pub configuration: Value,
    pub internal_metadata: Value,
    pub joined_at: DateTime<Utc>,
    pub left_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct MessageRecord {
    /// The message's public id.
    #[sea_orm(alias = "public_id")]
    pub id: String,
    #[sea_orm(alias = "session_name")]
    pub session: String,
    #[sea_orm(alias = "peer_name")]
    pub peer: String,
    pub seq_in_session: i64,
    pub content: String,
    pub metadata: Value,
    pub internal_metadata: Value,
    pub token_count: i32,
    pub created_at: DateTime<Utc>,
    /// [`encode_vector`]'s text, None when the message has no vector.
    #[sea_orm(skip)]
    pub embedding: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct ConclusionRecord {
    pub id: String,
    pub observer: String,
    pub observed: String,
    #[sea_orm(alias = "session_name")]
    pub session: Option<String>,
    pub content: String,
    /// `explicit`, `deductive`, `inductive` or `contradiction`.
    pub level: String,
    pub times_derived: i32,
    /// The conclusions it was derived from, in their order (None: never derived from any).
    pub source_ids: Option<Vec<String>>,
    /// The messages it was drawn from (public ids, sorted).
    pub message_ids: Vec<String>,
    pub metadata: Value,
    pub internal_metadata: Value,
    pub created_at: DateTime<Utc>,
    /// Set for a soft-deleted conclusion.
    pub deleted_at: Option<DateTime<Utc>>,
    #[sea_orm(skip)]
    pub embedding: Option<String>,
}

/// A session's summary of one kind (`short`, `long`), with the last message it covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRecord {
    #[sea_orm(alias = "session_name")]
    pub session: String,
    pub kind: String,
    pub content: String,
    /// The public id of the last message it covers.
    pub message_id: String,
    pub seq_in_session: i64,
    pub token_count: i32,
    pub created_at: DateTime<Utc>,
}

/// One entry the deriver wrote on `observer`'s card of `observed`, known by its position on
/// it, with the conclusions it cites. (A client's entries are the observer's
/// `internalMetadata.peer_cards`.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct CardEntryRecord {
    pub observer: String,
    pub observed: String,
    pub position: i32,
    pub content: String,
    /// The conclusions it came from (sorted).
    pub conclusion_ids: Vec<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct ScopeRecord {
    pub name: String,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

/// A session's membership of a scope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSessionRecord {
    #[sea_orm(alias = "scope_name")]
    pub scope: String,
    #[sea_orm(alias = "session_name")]
    pub session: String,
    pub added_at: DateTime<Utc>,
}

/// When `observer` last dreamt about `observed`, and how many live explicit conclusions it had
/// then: what the scheduled check compares with, so a copy does not dream its pairs again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, sea_orm::FromQueryResult)]
#[serde(rename_all = "camelCase")]
pub struct DreamRecord {
    pub observer: String,
    pub observed: String,
    pub last_dream_at: DateTime<Utc>,
    pub explicit_at_last_dream: i64,
}

/// The last line: how many of each the file holds. A version 1 file counts none of the kinds
/// after conclusions (it has none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    pub peers: u64,
    pub sessions: u64,
    pub members: u64,
    pub messages: u64,
    pub conclusions: u64,
    #[serde(default)]
    pub summaries: u64,
    #[serde(default)]
    pub card_entries: u64,
    #[serde(default)]
    pub scopes: u64,
    #[serde(default)]
    pub scope_sessions: u64,
    #[serde(default)]
    pub dreams: u64,
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Record {
    Header(Header),
    Workspace(WorkspaceRecord),
    Peer(PeerRecord),
    Session(SessionRecord),
    Member(MemberRecord),
    Message(MessageRecord),
    Conclusion(ConclusionRecord),
    Summary(SummaryRecord),
    CardEntry(CardEntryRecord),
    Scope(ScopeRecord),
    ScopeSession(ScopeSessionRecord),
    Dream(DreamRecord),
    End(End),
}

impl Record {
    /// One line of the file, without its newline.
    pub fn parse(line: &[u8]) -> StoreResult<Record> {
        serde_json::from_slice(line)
            .map_err(|e| StoreError::invalid(format!("not a line of an export: {e}")))
    }

    /// The header this record is, checked: the format and a version this server reads.
    pub fn into_header(self) -> StoreResult<Header> {
        match self {
            Record::Header(h) if h.format == FORMAT && READS.contains(&h.version) => Ok(h),
            Record::Header(h) if h.format == FORMAT => Err(StoreError::invalid(format!(
                "export format version {} is not one this server reads (it reads {READS:?})",
                h.version
            ))),
            _ => Err(StoreError::invalid(format!(
                "the first line is not a {FORMAT} header"
            ))),
        }
    }
}

/// A vector as base64 of its little-endian `f32`s: exact, and a third of its decimal text.
pub fn encode_vector(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    STANDARD.encode(bytes)
}

/// [`encode_vector`] undone; None for text that is not one.
pub fn decode_vector(s: &str) -> Option<Vec<f32>> {
    let bytes = STANDARD.decode(s).ok()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_bit_for_bit() {
        let v = vec![0.1f32, -3.5e-8, f32::MAX, 0.0, -0.0];
        let back = decode_vector(&encode_vector(&v)).unwrap();
        assert_eq!(
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert!(decode_vector("AAA").is_none());
    }

    #[test]
    fn a_header_of_another_version_is_refused_by_name() {
        let line = format!(
            r#"{{"type":"header","format":"{FORMAT}","version":99,"workspace":"w","embedding":{{"model":null,"dims":3}}}}"#
        );
        let err = Record::parse(line.as_bytes())
            .unwrap()
            .into_header()
            .unwrap_err();
        assert!(err.to_string().contains("version 99"), "{err}");
        let ok = format!(
            r#"{{"type":"header","format":"{FORMAT}","version":{VERSION},"workspace":"w","embedding":{{"model":"m","dims":3}}}}"#
        );
        assert_eq!(
            Record::parse(ok.as_bytes())
                .unwrap()
                .into_header()
                .unwrap()
                .workspace,
            "w"
        );
    }
}
