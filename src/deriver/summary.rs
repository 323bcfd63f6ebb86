//! Session summaries, written by the deriver's workers from the summary queue
//! ([`crate::store::summary`]).
//!
//! One step: the previous summary of its kind and the messages after it, up to the next
//! threshold, become the new summary of the whole conversation so far. The short one is
//! asked to stay under its token limit and under the size of what it summarizes; the long one
//! may use its whole limit. A call that fails (after the LLM client's retries) stops the unit:
//! nothing is stored in its place (Honcho v3.0.12 stores a stand-in sentence instead, which
//! then passes for a summary), the error is in `deriverStatus`, the metrics and the log, and
//! `retryFailedDerivations` resumes it.

use std::time::Instant;

use crate::llm::TextRequest;
use crate::store::message::Message;
use crate::store::summary::{SummaryClaim, SummaryKind, SummaryMaterial};
use crate::store::{StoreError, tokens};

use super::metrics::metrics;
use super::{BatchReport, Deriver};

/// Most tokens of messages one summary step reads (the oldest of a longer step are left out,
/// and the prompt says so).
pub const MAX_SUMMARY_INPUT_TOKENS: i64 = 16_000;

/// Longest piece of one message shown to the summarizer (characters).
const MESSAGE_CHARS: usize = 4000;

impl Deriver {
    /// Claims one due summary unit and writes its next summary. `None` when none is due.
    pub(super) async fn summarize_once(
        &self,
        worker: &str,
    ) -> Result<Option<BatchReport>, StoreError> {
        let Some(claim) = self.store.claim_summary(worker, self.rules().lease).await? else {
            return Ok(None);
        };
        self.summarize(&claim).await.map(Some)
    }

    #[tracing::instrument(name = "deriver.summary", skip_all, fields(
        unit = claim.unit_id,
        workspace = %claim.workspace,
        session = %claim.session,
        kind = claim.kind.as_str(),
        seqs = %format!("{}..={}", claim.from_seq + 1, claim.to_seq),
    ))]
    pub async fn summarize(&self, claim: &SummaryClaim) -> Result<BatchReport, StoreError> {
        let started = Instant::now();
        let material = self
            .store
            .summary_material(claim, MAX_SUMMARY_INPUT_TOKENS)
            .await?;
        let last = material.messages.last().cloned();
        let written = match &last {
            None => Ok(None),
            Some(_) => self.write(claim, &material).await.map(Some),
        };
        let pass = match claim.kind {
            SummaryKind::Short => "summary_short",
            SummaryKind::Long => "summary_long",
        };
        let m = metrics();
        match written {
            Ok(text) => {
                let content = text.unwrap_or_default();
                let token_count = tokens::count(&content);
                match self
                    .store
                    .complete_summary(claim, last.as_ref(), &content, token_count)
                    .await
                {
                    Ok(()) => {}
                    Err(StoreError::Conflict(msg)) => {
                        m.summaries
                            .with_label_values(&[claim.kind.as_str(), "lease_lost"])
                            .inc();
                        tracing::warn!("deriver: {msg}; nothing written");
                        return Ok(BatchReport::LeaseLost {
                            unit: claim.unit_id,
                        });
                    }
                    Err(e) => return Err(e),
                }
                m.summaries
                    .with_label_values(&[claim.kind.as_str(), "ok"])
                    .inc();
                tracing::info!(
                    messages = material.messages.len(),
                    left_out = material.left_out,
                    tokens = token_count,
                    ms = started.elapsed().as_millis() as u64,
                    "deriver: summary written"
                );
                Ok(BatchReport::Summarized {
                    unit: claim.unit_id,
                    session: claim.session.clone(),
                    kind: claim.kind,
                    to_seq: claim.to_seq,
                })
            }
            Err(source) => {
                let error = format!("{pass} pass: {source}");
                m.summaries
                    .with_label_values(&[claim.kind.as_str(), "failed"])
                    .inc();
                tracing::error!(
                    error = %error,
                    "deriver: summary failed; the unit waits for retryFailedDerivations"
                );
                self.store.fail_summary(claim, &error).await?;
                Ok(BatchReport::Failed {
                    unit: claim.unit_id,
                    error,
                })
            }
        }
    }

    /// One call; an empty answer is a failure (a blank summary would pass for one).
    async fn write(
        &self,
        claim: &SummaryClaim,
        material: &SummaryMaterial,
    ) -> Result<String, crate::llm::LlmError> {
        let input: i64 = material
            .messages
            .iter()
            .map(|m| i64::from(m.token_count.max(1)))
            .sum::<i64>()
            + material
                .previous
                .as_ref()
                .map_or(0, |s| i64::from(s.token_count));
        let limit = match claim.kind {
            SummaryKind::Short => self.cfg.summary_max_tokens_short,
            SummaryKind::Long => self.cfg.summary_max_tokens_long,
        };
        // Words ask for a length models keep better than tokens do; about 3 words per 4 tokens.
        let target_tokens = match claim.kind {
            SummaryKind::Short => input.clamp(50, i64::from(limit)),
            SummaryKind::Long => i64::from(limit),
        };
        let words = target_tokens * 3 / 4;
        let pass = match claim.kind {
            SummaryKind::Short => "summary_short",
            SummaryKind::Long => "summary_long",
        };
        let req = TextRequest {
            system: system(claim.kind, words),
            user: user(&claim.session, material),
            max_tokens: limit,
        };
        let answer = self.llm.complete_text(&req).await;
        let outcome = if answer.is_ok() { "ok" } else { "error" };
        metrics()
            .llm_calls
            .with_label_values(&[pass, "text", outcome])
            .inc();
        let text = answer?.trim().to_owned();
        if text.is_empty() {
            return Err(crate::llm::LlmError::Unparseable {
                reason: "the summary is empty".into(),
                excerpt: String::new(),
            });
        }
        Ok(text)
    }
}

fn system(kind: SummaryKind, words: i64) -> String {
    let (what, extra) = match kind {
        SummaryKind::Short => (
            "a concise summary",
            "Keep what a reader needs to continue the conversation.",
        ),
        SummaryKind::Long => (
            "a thorough summary",
            "Also keep how each participant came across (mood, manner) and the threads that \
             run through the conversation.",
        ),
    };
    format!(
        "You write {what} of a conversation so far. You are given the summary of its earlier \
         part (if any) and the messages that came after. Write one summary of the whole \
         conversation: the earlier summary's content and the new messages together. Keep \
         every concrete fact (names, numbers, dates, places, decisions), what each participant \
         said they like, want, plan or asked for, and the topics in the order they came up. \
         {extra} Write plain prose in chronological order, naming each participant; no \
         headings, no lists, no remarks about the task. Use at most {words} words, dropping \
         the least important details first."
    )
}

fn user(session: &str, material: &SummaryMaterial) -> String {
    let mut out = format!("Session {session}.\n\nEarlier summary:\n");
    match &material.previous {
        Some(s) => {
            out.push_str(&s.content);
            out.push('\n');
        }
        None => out.push_str("(none: the messages below begin the conversation)\n"),
    }
    out.push_str("\nNew messages:\n");
    if material.left_out > 0 {
        out.push_str(&format!(
            "({} earlier messages left out for length)\n",
            material.left_out
        ));
    }
    for m in &material.messages {
        out.push_str(&line(m));
    }
    out
}

fn line(m: &Message) -> String {
    super::prompt::message_line(m, Some(MESSAGE_CHARS))
}
