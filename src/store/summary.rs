//! Session summaries and the deriver's queue of them.
//!
//! A session has at most one summary of each kind (short, long). `createMessages` marks a
//! session's kind due when a batch crosses a multiple of the kind's message count
//! (`summary.messages_per_short_summary`, 20, and `summary.messages_per_long_summary`, 60, by
//! the session's settings, [`super::configuration`]): one row per session and kind, whose
//! `due_seq` is the last threshold crossed. A deriver worker claims a due unit with a lease, as
//! it claims conclusion work ([`super::queue`]), and writes the next summary: the previous one
//! of its kind and the messages after it up to the next threshold, so a session that received
//! 100 messages at once is summarized at 20, 40, 60, 80 and 100 in turn, each summary covering
//! the whole conversation up to its last message. A failed call stops the unit until
//! `retryFailedDerivations`, and shows in `deriverStatus` like a failed batch; nothing is
//! written in its place.

use std::ops::RangeInclusive;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, EntityTrait};

use super::configuration::Resolved;
use super::lease::Lease;
use super::message::Message;
use super::{Store, StoreError, StoreResult, TxOptions, columns, new_id, stmt};
use crate::entity::message;

/// The two summaries a session keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SummaryKind {
    Short,
    Long,
}

impl SummaryKind {
    pub const ALL: [SummaryKind; 2] = [SummaryKind::Short, SummaryKind::Long];

    pub fn as_str(self) -> &'static str {
        match self {
            SummaryKind::Short => "short",
            SummaryKind::Long => "long",
        }
    }

    fn parse(s: &str) -> StoreResult<SummaryKind> {
        match s {
            "short" => Ok(SummaryKind::Short),
            "long" => Ok(SummaryKind::Long),
            other => Err(StoreError::invalid(format!(
                "unknown summary kind {other:?}"
            ))),
        }
    }

    /// Its period in messages under `settings`.
    pub fn every(self, settings: &Resolved) -> i64 {
        match self {
            SummaryKind::Short => settings.messages_per_short_summary,
            SummaryKind::Long => settings.messages_per_long_summary,
        }
    }
}

/// A stored summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub kind: SummaryKind,
    pub content: String,
    /// The last message it covers: its public id and seq.
    pub message_id: String,
    pub seq_in_session: i64,
    pub token_count: i32,
    pub created_at: DateTime<Utc>,
}

/// A session's summaries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summaries {
    pub short: Option<Summary>,
    pub long: Option<Summary>,
}

/// A summary unit a worker holds, and the step it is to write.
#[derive(Clone, Debug)]
pub struct SummaryClaim {
    pub unit_id: i64,
    /// Unique to this claim: completing needs it.
    pub owner: String,
    pub workspace: String,
    pub session: String,
    pub kind: SummaryKind,
    /// The last seq the current summary covers (0: none yet).
    pub from_seq: i64,
    /// The last seq the new one is to cover.
    pub to_seq: i64,
}

/// What a summary step is written from.
#[derive(Clone, Debug)]
pub struct SummaryMaterial {
    pub previous: Option<Summary>,
    /// The messages after the previous summary up to the step's end, oldest first; the oldest
    /// are left out when they do not fit the budget.
    pub messages: Vec<Message>,
    /// Messages of the step left out for the budget.
    pub left_out: usize,
}

/// Marks the session's summaries due when the batch `seqs` crosses a threshold of theirs
/// (inside `createMessages`' transaction).
pub(crate) async fn enqueue<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
    settings: &Resolved,
    seqs: RangeInclusive<i64>,
) -> StoreResult<()> {
    if !settings.summary {
        return Ok(());
    }
    for kind in SummaryKind::ALL {
        let every = kind.every(settings).max(1);
        let due = seqs.end() - seqs.end() % every;
        if due <= 0 || due < *seqs.start() {
            continue;
        }
        db.execute_raw(stmt(
            "INSERT INTO summary_units AS u (workspace_name, session_name, kind, every, due_seq) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (workspace_name, session_name, kind) DO UPDATE SET \
               every = EXCLUDED.every, due_seq = greatest(u.due_seq, EXCLUDED.due_seq), \
               due_at = CASE WHEN u.due_seq > u.done_seq THEN u.due_at ELSE now() END",
            [
                workspace.into(),
                session.into(),
                kind.as_str().into(),
                (every as i32).into(),
                due.into(),
            ],
        ))
        .await?;
    }
    Ok(())
}

impl Store {
    /// The session's summaries (null where none is written yet).
    #[tracing::instrument(name = "store.session_summaries", level = "debug", skip_all)]
    pub async fn session_summaries(
        &self,
        workspace: &str,
        session: &str,
    ) -> StoreResult<Summaries> {
        let rows = self
            .reader()
            .query_all_raw(stmt(
                "SELECT s.kind, s.content, s.seq_in_session, s.token_count, s.created_at, \
                   m.public_id FROM session_summaries s JOIN messages m ON m.id = s.message_id \
                 WHERE s.workspace_name = $1 AND s.session_name = $2",
                [workspace.into(), session.into()],
            ))
            .await?;
        let mut out = Summaries::default();
        for r in rows {
            let summary = Summary {
                kind: SummaryKind::parse(&r.try_get::<String>("", "kind")?)?,
                content: r.try_get("", "content")?,
                message_id: r.try_get("", "public_id")?,
                seq_in_session: r.try_get("", "seq_in_session")?,
                token_count: r.try_get("", "token_count")?,
                created_at: r.try_get("", "created_at")?,
            };
            match summary.kind {
                SummaryKind::Short => out.short = Some(summary),
                SummaryKind::Long => out.long = Some(summary),
            }
        }
        Ok(out)
    }

    /// Claims the longest-waiting due summary unit no live lease holds, for its next step.
    pub async fn claim_summary(
        &self,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Option<SummaryClaim>> {
        self.transaction(TxOptions::default(), |txn| async move {
            let Some(unit) = txn
                .query_one_raw(stmt(
                    "SELECT id, workspace_name, session_name, kind, every, due_seq, done_seq \
                     FROM summary_units \
                     WHERE due_seq > done_seq AND failed_at IS NULL \
                       AND (lease_until IS NULL OR lease_until < now()) \
                     ORDER BY due_at LIMIT 1 FOR UPDATE SKIP LOCKED",
                    [],
                ))
                .await?
            else {
                return Ok(None);
            };
            let every = i64::from(unit.try_get::<i32>("", "every")?.max(1));
            let (due, done): (i64, i64) =
                (unit.try_get("", "due_seq")?, unit.try_get("", "done_seq")?);
            let claim = SummaryClaim {
                unit_id: unit.try_get("", "id")?,
                owner: format!("{worker}:{}", new_id()),
                workspace: unit.try_get("", "workspace_name")?,
                session: unit.try_get("", "session_name")?,
                kind: SummaryKind::parse(&unit.try_get::<String>("", "kind")?)?,
                from_seq: done,
                to_seq: due.min((done / every + 1) * every),
            };
            txn.execute_raw(stmt(
                "UPDATE summary_units SET lease_owner = $2, \
                   lease_until = now() + make_interval(secs => $3) WHERE id = $1",
                [
                    claim.unit_id.into(),
                    claim.owner.clone().into(),
                    lease.as_secs_f64().into(),
                ],
            ))
            .await?;
            Ok(Some(claim))
        })
        .await
    }

    /// The previous summary of the claim's kind and the messages of its step, the newest whose
    /// token counts fit `budget` (at least one).
    pub async fn summary_material(
        &self,
        claim: &SummaryClaim,
        budget: i64,
    ) -> StoreResult<SummaryMaterial> {
        let summaries = self
            .session_summaries(&claim.workspace, &claim.session)
            .await?;
        let previous = match claim.kind {
            SummaryKind::Short => summaries.short,
            SummaryKind::Long => summaries.long,
        }
        .filter(|s| s.seq_in_session == claim.from_seq);
        let rows = message::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "SELECT {} FROM messages m WHERE m.workspace_name = $1 \
                     AND m.session_name = $2 AND m.seq_in_session > $3 \
                     AND m.seq_in_session <= $4 ORDER BY m.seq_in_session DESC LIMIT 1000",
                    columns::list::<message::Entity>("m")
                ),
                [
                    claim.workspace.clone().into(),
                    claim.session.clone().into(),
                    claim.from_seq.into(),
                    claim.to_seq.into(),
                ],
            ))
            .all(self.db())
            .await?;
        let total = rows.len();
        let mut used = 0i64;
        let mut messages: Vec<Message> = Vec::new();
        for m in rows {
            used += i64::from(m.token_count.max(1));
            if used > budget && !messages.is_empty() {
                break;
            }
            messages.push(m);
        }
        messages.reverse();
        Ok(SummaryMaterial {
            previous,
            left_out: total - messages.len(),
            messages,
        })
    }

    /// Stores the claim's new summary (covering up to `last`, the newest message it read) and
    /// moves its unit on, if the claim still holds it (else `Conflict`, nothing written). With
    /// no message left in the step (all erased), the unit moves on and nothing is stored.
    pub async fn complete_summary(
        &self,
        claim: &SummaryClaim,
        last: Option<&Message>,
        content: &str,
        token_count: i32,
    ) -> StoreResult<()> {
        self.transaction(TxOptions::default(), |txn| async move {
            claim.lease().hold(&txn).await?;
            if let Some(m) = last {
                txn.execute_raw(stmt(
                    "INSERT INTO session_summaries AS s (workspace_name, session_name, kind, \
                       content, message_id, seq_in_session, token_count) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (workspace_name, session_name, kind) DO UPDATE SET \
                       content = EXCLUDED.content, message_id = EXCLUDED.message_id, \
                       seq_in_session = EXCLUDED.seq_in_session, \
                       token_count = EXCLUDED.token_count, created_at = now()",
                    [
                        claim.workspace.clone().into(),
                        claim.session.clone().into(),
                        claim.kind.as_str().into(),
                        content.replace('\0', "").into(),
                        m.id.into(),
                        m.seq_in_session.into(),
                        token_count.into(),
                    ],
                ))
                .await?;
            }
            txn.execute_raw(stmt(
                "UPDATE summary_units SET done_seq = $2, due_at = now(), lease_owner = NULL, \
                   lease_until = NULL, last_error = NULL, last_error_at = NULL WHERE id = $1",
                [claim.unit_id.into(), claim.to_seq.into()],
            ))
            .await?;
            Ok(())
        })
        .await
    }

    /// Records that the claim's summary could not be written: the unit stops until
    /// [`Store::retry_failed_derivations`]. A claim that no longer holds the unit changes nothing.
    pub async fn fail_summary(&self, claim: &SummaryClaim, message: &str) -> StoreResult<()> {
        claim.lease().fail(self.db(), message).await
    }
}

impl SummaryClaim {
    fn lease(&self) -> Lease<'_> {
        Lease {
            table: "summary_units",
            what: "summary unit",
            unit_id: self.unit_id,
            owner: &self.owner,
        }
    }
}

/// A session's context: the summary chosen for the budget and the newest messages after it.
#[derive(Clone, Debug)]
pub struct SessionContext {
    pub summary: Option<Summary>,
    pub messages: Vec<Message>,
}

/// Share of a context's token budget a summary may take.
const SUMMARY_SHARE: f64 = 0.4;

impl Summaries {
    /// The summary a context of `budget` tokens opens with: the long one when it fits
    /// [`SUMMARY_SHARE`] of the budget and says more than the short one, else the short one when
    /// it fits (Honcho v3.0.12's choice).
    pub fn for_context(self, budget: i64) -> Option<Summary> {
        let room = (budget as f64 * SUMMARY_SHARE) as i64;
        let len = |s: &Option<Summary>| s.as_ref().map_or(0, |s| i64::from(s.token_count));
        let (short, long) = (len(&self.short), len(&self.long));
        if self.long.is_some() && long <= room && long > short {
            return self.long;
        }
        if self.short.is_some() && short <= room && short > 0 {
            return self.short;
        }
        None
    }
}

impl Store {
    /// The session's context within `budget` tokens: with `summary`, the summary that fits
    /// ([`Summaries::for_context`]) and the newest messages after the last one it covers that
    /// fit the rest; without, the newest messages that fit. Messages oldest first.
    #[tracing::instrument(name = "store.session_context", level = "debug", skip_all)]
    pub async fn session_context(
        &self,
        workspace: &str,
        session: &str,
        budget: i64,
        summary: bool,
    ) -> StoreResult<SessionContext> {
        let summary = match summary {
            true => self
                .session_summaries(workspace, session)
                .await?
                .for_context(budget),
            false => None,
        };
        let (after, left) = summary.as_ref().map_or((0, budget), |s| {
            (s.seq_in_session, budget - i64::from(s.token_count))
        });
        let messages = self
            .newest_messages_after(workspace, session, left, after)
            .await?;
        Ok(SessionContext { summary, messages })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(kind: SummaryKind, tokens: i32) -> Option<Summary> {
        Some(Summary {
            kind,
            content: String::new(),
            message_id: String::new(),
            seq_in_session: 20,
            token_count: tokens,
            created_at: Utc::now(),
        })
    }

    #[test]
    fn a_context_opens_with_the_longest_summary_that_fits_two_fifths() {
        let both = |s, l| Summaries {
            short: summary(SummaryKind::Short, s),
            long: summary(SummaryKind::Long, l),
        };
        let kind = |x: Option<Summary>| x.map(|s| s.kind);
        assert_eq!(
            kind(both(100, 300).for_context(1000)),
            Some(SummaryKind::Long)
        );
        assert_eq!(
            kind(both(100, 500).for_context(1000)),
            Some(SummaryKind::Short)
        );
        assert_eq!(
            kind(both(100, 90).for_context(1000)),
            Some(SummaryKind::Short)
        );
        assert_eq!(kind(both(500, 600).for_context(1000)), None);
        assert_eq!(kind(Summaries::default().for_context(1000)), None);
    }
}
