use async_graphql::{Enum, ID, SimpleObject};

use crate::graphql::scalars::DateTime;
use crate::store::erasure::{Erased, ErasureJob as Job, ErasurePhase as Phase};

/// Where a peer's erasure is (docs/erasure.md).
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErasurePhase {
    /// Taking the deriver's queued work by or about the peer off the queue.
    Queue,
    /// Deleting the peer's messages, a batch per transaction.
    Messages,
    /// Deleting the conclusions about the peer (and those it drew, unless kept).
    Conclusions,
    /// Deleting what was written meanwhile, other peers' cards of it, and the peer.
    Peer,
    /// Nothing of the peer is left.
    Done,
}

impl From<Phase> for ErasurePhase {
    fn from(p: Phase) -> Self {
        match p {
            Phase::Queue => ErasurePhase::Queue,
            Phase::Messages => ErasurePhase::Messages,
            Phase::Conclusions => ErasurePhase::Conclusions,
            Phase::Peer => ErasurePhase::Peer,
            Phase::Done => ErasurePhase::Done,
        }
    }
}

/// A peer's erasure: it runs in batches on the server and survives a restart (`erasePeer` again,
/// or the server's start, continues it). Poll `Workspace.erasureJob` for its progress.
#[derive(SimpleObject)]
pub struct ErasureJob {
    pub id: ID,
    /// The erased peer's id (kept as the record of what was erased).
    pub peer_id: ID,
    /// Whether the conclusions the peer drew about others are handed to them instead of deleted.
    pub keep_observed: bool,
    pub phase: ErasurePhase,
    pub done: bool,
    /// The peer's messages when the job started.
    pub messages_total: i64,
    pub messages_erased: i64,
    /// Conclusions deleted, the cascade through the reasoning graph included.
    pub conclusions_erased: i64,
    pub created_at: DateTime,
    pub updated_at: DateTime,
    pub finished_at: Option<DateTime>,
}

impl From<Job> for ErasureJob {
    fn from(j: Job) -> Self {
        ErasureJob {
            id: ID(j.id),
            peer_id: ID(j.peer_name),
            keep_observed: j.keep_observed,
            done: j.phase == Phase::Done,
            phase: j.phase.into(),
            messages_total: j.messages_total,
            messages_erased: j.messages_erased,
            conclusions_erased: j.conclusions_erased,
            created_at: j.created_at.into(),
            updated_at: j.updated_at.into(),
            finished_at: j.finished_at.map(Into::into),
        }
    }
}

/// What `deleteMessage` removed.
#[derive(SimpleObject)]
pub struct MessageErasure {
    /// 1.
    pub messages: i64,
    /// Conclusions deleted because the message was all they were drawn from (transitively).
    pub conclusions: i64,
}

impl From<Erased> for MessageErasure {
    fn from(e: Erased) -> Self {
        MessageErasure {
            messages: e.messages as i64,
            conclusions: e.conclusions as i64,
        }
    }
}
