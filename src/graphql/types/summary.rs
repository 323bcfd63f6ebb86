//! A session's summaries and its context, as the deriver writes them (docs/summaries.md).

use async_graphql::{Enum, ID, Object, SimpleObject};

use super::Message;
use crate::graphql::scalars::DateTime;
use crate::store::summary;

/// The two summaries a session keeps.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryKind {
    /// Every `summary.messages_per_short_summary` messages (20), at most 1,000 tokens.
    Short,
    /// Every `summary.messages_per_long_summary` messages (60), at most 4,000 tokens.
    Long,
}

impl From<summary::SummaryKind> for SummaryKind {
    fn from(k: summary::SummaryKind) -> Self {
        match k {
            summary::SummaryKind::Short => SummaryKind::Short,
            summary::SummaryKind::Long => SummaryKind::Long,
        }
    }
}

/// A summary of the conversation from its first message to `seqInSession`.
pub struct SessionSummary(pub summary::Summary);

#[Object]
impl SessionSummary {
    async fn kind(&self) -> SummaryKind {
        self.0.kind.into()
    }

    async fn content(&self) -> &str {
        &self.0.content
    }

    /// The last message it covers.
    async fn message_id(&self) -> ID {
        ID(self.0.message_id.clone())
    }

    /// The `seqInSession` of the last message it covers.
    async fn seq_in_session(&self) -> i64 {
        self.0.seq_in_session
    }

    async fn token_count(&self) -> i32 {
        self.0.token_count
    }

    async fn created_at(&self) -> DateTime {
        self.0.created_at.into()
    }
}

/// A session's summaries, each null until the deriver has written one.
pub struct SessionSummaries(pub summary::Summaries);

#[Object]
impl SessionSummaries {
    async fn short(&self) -> Option<SessionSummary> {
        self.0.short.clone().map(SessionSummary)
    }

    async fn long(&self) -> Option<SessionSummary> {
        self.0.long.clone().map(SessionSummary)
    }
}

/// What fits a token budget: the summary that fits 40% of it, then the newest messages after
/// the last one it covers, oldest first.
#[derive(SimpleObject)]
pub struct SessionContext {
    pub summary: Option<SessionSummary>,
    pub messages: Vec<Message>,
}
