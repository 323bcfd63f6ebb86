//! The deriver: turns queued messages into conclusions with an LLM.
//!
//! A worker claims a ready work unit (session, observer, observed) from the queue in PostgreSQL
//! ([`crate::store::queue`]) and runs two passes over its batch:
//!
//! 1. **explicit**: one call with the window of messages (the batch, marked NEW, after a little
//!    context; speakers, timestamps, seqs; cut to a token budget) asks for the facts the
//!    observed peer states. Each becomes an EXPLICIT conclusion of the observer about the
//!    observed, linked to its messages, or reinforces a live duplicate.
//! 2. **reasoning**: one call with the new facts and the nearest existing conclusions of the same
//!    observer and observed asks for DEDUCTIVE, INDUCTIVE and CONTRADICTION conclusions citing
//!    premises it was shown. Premises it was not shown are dropped (and logged and counted); a
//!    conclusion left without premises, or closing a cycle, is refused.
//!
//! Both passes run before anything is written; then one transaction writes everything and takes
//! the batch off the queue, if the worker still holds the unit. A failed call (after the LLM
//! client's retries and output-mode fallbacks) fails the batch: the unit stops, the error is in
//! `deriverStatus`, the metrics and the log, and `retryFailedDerivations` resumes it.

mod args;
mod card;
mod dream;
mod dream_args;
pub mod metrics;
mod prompt;
mod summary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sea_orm::ActiveEnum;
use tokio::sync::watch;

use crate::embed::conclusion_text;
use crate::llm::{JsonReply, JsonRequest, Llm, LlmError};
use crate::store::conclusion::{Conclusion, Level, conclusion_content};
use crate::store::configuration::Resolved;
use crate::store::message::{Message, SeqRange};
use crate::store::peer_card::NewCardEntry;
use crate::store::queue::{BatchOutcome, Claim, ClaimRules, NewDerived, NewFact, Premise};
use crate::store::{Store, StoreError};
use crate::workers::Worker;
pub use args::DeriverArgs;
pub use dream::DreamReport;
pub use dream_args::DreamArgs;
use metrics::metrics;

/// Messages shown before the batch as context (within the token budget).
const CONTEXT_MESSAGES: i64 = 6;
/// Existing conclusions shown to the reasoning pass.
const NEAREST_CONCLUSIONS: i64 = 20;
/// Most tokens one answer may take.
pub(crate) const ANSWER_TOKENS: u32 = 2048;
/// How often a worker logs the queue's size while it works.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// Why a batch produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum DeriverError {
    #[error("{pass} pass: {source}")]
    Llm {
        pass: &'static str,
        #[source]
        source: LlmError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one batch did.
#[derive(Clone, Debug)]
pub enum BatchReport {
    Done {
        unit: i64,
        messages: usize,
        outcome: BatchOutcome,
    },
    /// The LLM could not give a usable answer; the unit is stopped with this error.
    Failed { unit: i64, error: String },
    /// Another worker holds the unit now (this worker's lease ran out); nothing was written.
    LeaseLost { unit: i64 },
    /// A session's summary of this kind now covers the conversation up to `to_seq`.
    Summarized {
        unit: i64,
        session: String,
        kind: crate::store::summary::SummaryKind,
        to_seq: i64,
    },
}

/// What both passes drew from a batch, before anything is written.
struct Derived {
    facts: Vec<NewFact>,
    derived: Vec<NewDerived>,
    /// The deriver's entries of the observer's card of the observed, when they change.
    card: Option<Vec<NewCardEntry>>,
}

/// Claims and processes work units; share it between workers (`Arc`).
pub struct Deriver {
    store: Store,
    llm: Arc<dyn Llm>,
    cfg: DeriverArgs,
}

impl Deriver {
    /// The store's settings under workspaces' configurations become the deriver's flags'.
    pub fn new(store: Store, llm: Arc<dyn Llm>, cfg: DeriverArgs) -> Self {
        let store = store.with_configuration_defaults(cfg.configuration_defaults());
        Deriver { store, llm, cfg }
    }

    fn rules(&self) -> ClaimRules {
        ClaimRules {
            ready_tokens: self.cfg.batch_tokens.max(1),
            ready_after: Duration::from_secs_f64(self.cfg.batch_secs.max(0.0)),
            max_batch_tokens: self.cfg.max_input_tokens.max(1),
            lease: Duration::from_secs_f64(self.cfg.lease_secs.max(1.0)),
        }
    }

    /// Claims one due summary and writes it, or else one ready unit and processes its next
    /// batch. `None` when nothing is ready. Summaries go first: there is at most one due per
    /// session and kind, so they cannot hold conclusions back for long, and a conversation's
    /// summary is worth most while it is current.
    pub async fn run_once(&self, worker: &str) -> Result<Option<BatchReport>, StoreError> {
        if let Some(report) = self.summarize_once(worker).await? {
            return Ok(Some(report));
        }
        let Some(claim) = self.store.claim_unit(worker, self.rules()).await? else {
            return Ok(None);
        };
        self.process(&claim).await.map(Some)
    }

    /// Runs one claimed batch to its end: written, failed, or lost to another worker. Its log
    /// lines carry the claim's unit, session and peers through the span.
    #[tracing::instrument(name = "deriver.batch", skip_all, fields(
        unit = claim.unit_id,
        workspace = %claim.workspace,
        session = %claim.session,
        observer = %claim.observer,
        observed = %claim.observed,
    ))]
    pub async fn process(&self, claim: &Claim) -> Result<BatchReport, StoreError> {
        let started = Instant::now();
        let m = metrics();
        let result = match self.derive(claim).await {
            Ok(Derived {
                facts,
                derived,
                card,
            }) => self
                .store
                .complete_batch_with_card(
                    claim,
                    &facts,
                    &derived,
                    self.cfg.dedup_similarity,
                    card.as_deref(),
                )
                .await
                .map_err(DeriverError::Store),
            Err(e) => Err(e),
        };
        match result {
            Ok(outcome) => {
                m.batch_ended("ok", claim.item_ids.len());
                count_outcome(&outcome);
                tracing::info!(
                    seqs = %format!("{}..={}", claim.first_seq, claim.last_seq),
                    messages = claim.item_ids.len(),
                    explicit_new = outcome.facts_created,
                    explicit_reinforced = outcome.facts_reinforced,
                    derived_new = outcome.derived_created,
                    derived_reinforced = outcome.derived_reinforced,
                    refused = outcome.refused,
                    card_entries = ?outcome.card_entries,
                    ms = started.elapsed().as_millis() as u64,
                    "deriver: batch done"
                );
                Ok(BatchReport::Done {
                    unit: claim.unit_id,
                    messages: claim.item_ids.len(),
                    outcome,
                })
            }
            Err(DeriverError::Store(StoreError::Conflict(msg))) => {
                m.batches.with_label_values(&["lease_lost"]).inc();
                tracing::warn!("deriver: {msg}; nothing written");
                Ok(BatchReport::LeaseLost {
                    unit: claim.unit_id,
                })
            }
            Err(DeriverError::Llm { pass, source }) => {
                let error = format!("{pass} pass: {source}");
                m.batch_ended("failed", claim.item_ids.len());
                tracing::error!(
                    error = %error,
                    "deriver: batch failed; the unit waits for retryFailedDerivations"
                );
                self.store.fail_batch(claim, &error).await?;
                Ok(BatchReport::Failed {
                    unit: claim.unit_id,
                    error,
                })
            }
            Err(DeriverError::Store(e)) => Err(e),
        }
    }

    /// Both passes, nothing written.
    async fn derive(&self, claim: &Claim) -> Result<Derived, DeriverError> {
        let settings = self
            .store
            .resolved_configuration(&claim.workspace, &claim.session)
            .await?;
        let mut facts = self.explicit_pass(claim, &settings).await?;
        if facts.is_empty() {
            return Ok(Derived {
                facts,
                derived: Vec::new(),
                card: None,
            });
        }
        let vectors = self
            .embed_conclusions(claim, facts.iter().map(|f| f.content.as_str()))
            .await;
        for (f, e) in facts.iter_mut().zip(vectors) {
            f.embedding = e;
        }
        let (mut derived, card) = self.reasoning_pass(claim, &facts, &settings).await?;
        let vectors = self
            .embed_conclusions(claim, derived.iter().map(|d| d.content.as_str()))
            .await;
        for (d, e) in derived.iter_mut().zip(vectors) {
            d.embedding = e;
        }
        Ok(Derived {
            facts,
            derived,
            card,
        })
    }

    /// The explicit pass: the facts the observed peer states in the batch, each once.
    async fn explicit_pass(
        &self,
        claim: &Claim,
        settings: &Resolved,
    ) -> Result<Vec<NewFact>, DeriverError> {
        let window = self.window(claim).await?;
        let reply = self
            .ask(
                "explicit",
                JsonRequest {
                    system: prompt::explicit_system(&claim.observer, &claim.observed)
                        + &prompt::custom_instructions(settings),
                    user: prompt::explicit_user(&claim.session, &window, &claim.message_ids),
                    schema_name: "explicit_facts".into(),
                    schema: prompt::explicit_schema(),
                    max_tokens: ANSWER_TOKENS,
                },
            )
            .await?;
        Ok(facts_of(claim, &window, &reply.value))
    }

    /// The reasoning pass: conclusions drawn from the facts (embedded) and the nearest existing
    /// conclusions, each citing premises it was shown.
    async fn reasoning_pass(
        &self,
        claim: &Claim,
        facts: &[NewFact],
        settings: &Resolved,
    ) -> Result<(Vec<NewDerived>, Option<Vec<NewCardEntry>>), DeriverError> {
        let vectors: Vec<Vec<f32>> = facts.iter().filter_map(|f| f.embedding.clone()).collect();
        let existing = self
            .store
            .nearest_conclusions(
                &claim.workspace,
                &claim.observer,
                &claim.observed,
                &vectors,
                NEAREST_CONCLUSIONS,
            )
            .await?;
        // The explicit call may have taken most of the lease.
        self.store.renew_lease(claim, self.rules().lease).await?;
        let contents: Vec<String> = facts.iter().map(|f| f.content.clone()).collect();
        let mut system = prompt::reasoning_system(&claim.observer, &claim.observed);
        let mut user = prompt::reasoning_user(&contents, &existing);
        let mut schema = prompt::reasoning_schema();
        let card = match settings.peer_card_create {
            true => {
                let entries = self
                    .store
                    .peer_card_entries(&claim.workspace, &claim.observer, &claim.observed)
                    .await?
                    .unwrap_or_default();
                let ctx = card::CardContext::new(entries, settings.peer_card_use);
                system.push_str(&card::system(&claim.observed));
                user.push_str(&card::user(&ctx));
                card::extend_schema(&mut schema);
                Some(ctx)
            }
            false => None,
        };
        system.push_str(&prompt::custom_instructions(settings));
        let reply = self
            .ask(
                "reasoning",
                JsonRequest {
                    system,
                    user,
                    schema_name: "derived_conclusions".into(),
                    schema,
                    max_tokens: ANSWER_TOKENS,
                },
            )
            .await?;
        let derived = derived_of(&reply.value, facts.len(), &existing);
        let card = card.and_then(|ctx| card::card_of(&reply.value, &ctx, facts.len(), &existing));
        Ok((derived, card))
    }

    /// Vectors for conclusions of the claim's pair: embedded with the pair's ids, as every
    /// conclusion is (the prompts show the content alone).
    async fn embed_conclusions<'a>(
        &self,
        claim: &Claim,
        contents: impl Iterator<Item = &'a str>,
    ) -> Vec<Option<Vec<f32>>> {
        let texts: Vec<String> = contents
            .map(|c| conclusion_text(&claim.observer, &claim.observed, c))
            .collect();
        self.store.embed_texts(&texts).await
    }

    /// The batch's messages and, budget permitting, the messages around them (newest first up
    /// to [`CONTEXT_MESSAGES`] before the batch, and everything between its messages).
    async fn window(&self, claim: &Claim) -> Result<Vec<Message>, StoreError> {
        let range = SeqRange {
            workspace: claim.workspace.clone(),
            session: claim.session.clone(),
            from: claim.first_seq - CONTEXT_MESSAGES,
            to: claim.last_seq,
        };
        let all = self.store.messages_in_ranges(&[range]).await?;
        let mut budget = self.cfg.max_input_tokens - claim.tokens;
        let mut keep: Vec<bool> = all
            .iter()
            .map(|m| claim.message_ids.contains(&m.id))
            .collect();
        for (i, m) in all.iter().enumerate().rev() {
            if keep[i] {
                continue;
            }
            let t = i64::from(m.token_count.max(1));
            if t > budget {
                break;
            }
            budget -= t;
            keep[i] = true;
        }
        Ok(all
            .into_iter()
            .zip(keep)
            .filter_map(|(m, k)| k.then_some(m))
            .collect())
    }

    async fn ask(&self, pass: &'static str, req: JsonRequest) -> Result<JsonReply, DeriverError> {
        match self.llm.complete_json(&req).await {
            Ok(reply) => {
                metrics()
                    .llm_calls
                    .with_label_values(&[pass, reply.mode.as_str(), "ok"])
                    .inc();
                Ok(reply)
            }
            Err(source) => {
                metrics()
                    .llm_calls
                    .with_label_values(&[pass, "-", "error"])
                    .inc();
                Err(DeriverError::Llm { pass, source })
            }
        }
    }
}

impl Deriver {
    /// One batch, or when none is ready one dream (messages first); adds the messages a batch
    /// processed to `done`. Whether there was nothing to do.
    async fn next_work(&self, name: &str, done: &mut u64) -> bool {
        match self.run_once(name).await {
            Ok(Some(BatchReport::Done { messages, .. })) => {
                *done += messages as u64;
                false
            }
            Ok(Some(_)) => false,
            Ok(None) => match self.dream_once(name).await {
                Ok(Some(_)) => false,
                Ok(None) => true,
                Err(e) => {
                    tracing::error!(worker = %name, error = %e, "deriver: dream queue error");
                    true
                }
            },
            Err(e) => {
                tracing::error!(worker = %name, error = %e, "deriver: queue error");
                true
            }
        }
    }
}

/// A batch in flight when `shutdown` turns true is abandoned: its lease runs out and another
/// worker takes it.
impl Worker for Deriver {
    const KIND: &'static str = "";

    /// One worker: batches until `shutdown`, resting `poll_ms` when nothing is ready; the first
    /// worker (`i` 0) also logs the progress.
    async fn work(self: Arc<Self>, name: String, i: u32, mut shutdown: watch::Receiver<bool>) {
        let poll = Duration::from_millis(self.cfg.poll_ms.max(10));
        let mut last_progress = Instant::now();
        let mut last_dream_check: Option<Instant> = None;
        let mut done = 0u64;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let idle = tokio::select! {
                idle = self.next_work(&name, &mut done) => idle,
                _ = shutdown.changed() => break,
            };
            if i == 0
                && last_dream_check.is_none_or(|t| t.elapsed() >= self.cfg.dream.check_every())
            {
                last_dream_check = Some(Instant::now());
                match self.schedule_due_dreams().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(pairs = n, "deriver: dreams scheduled"),
                    Err(e) => tracing::error!(error = %e, "deriver: the dream check failed"),
                }
            }
            if i == 0 && last_progress.elapsed() >= PROGRESS_EVERY {
                last_progress = Instant::now();
                if let Ok(backlog) = self.store.deriver_backlog().await {
                    tracing::info!(
                        processed = done,
                        backlog,
                        "deriver progress: {done} queued messages processed by this \
                         worker since the last report; {backlog} waiting"
                    );
                    done = 0;
                }
            }
            if idle {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = shutdown.changed() => break,
                }
            }
        }
    }
}

/// The explicit pass's facts, each once, each with the batch messages it comes from: those
/// the answer names, else the whole batch.
fn facts_of(claim: &Claim, window: &[Message], answer: &serde_json::Value) -> Vec<NewFact> {
    let mut facts: Vec<NewFact> = Vec::new();
    for answer in prompt::read_facts(answer) {
        let Ok(content) = conclusion_content("fact", &answer.content) else {
            continue;
        };
        if facts.iter().any(|f| f.content == content) {
            continue;
        }
        let named: Vec<i64> = window
            .iter()
            .filter(|m| {
                answer.seqs.contains(&m.seq_in_session) && claim.message_ids.contains(&m.id)
            })
            .map(|m| m.id)
            .collect();
        let message_ids = if named.is_empty() {
            claim.message_ids.clone()
        } else {
            named
        };
        facts.push(NewFact {
            content,
            embedding: None,
            message_ids,
        });
    }
    facts
}

/// The reasoning pass's conclusions that have a level and at least one premise the model was
/// shown (`facts` new facts, then `existing`); the others are counted and logged.
fn derived_of(
    answer: &serde_json::Value,
    facts: usize,
    existing: &[Conclusion],
) -> Vec<NewDerived> {
    let mut derived = Vec::new();
    for answer in prompt::read_derived(answer) {
        let Some(level) = answer.level else {
            tracing::warn!(content = %answer.content, "deriver: conclusion without a valid level dropped");
            metrics()
                .conclusions
                .with_label_values(&["unknown", "refused"])
                .inc();
            continue;
        };
        let Ok(content) = conclusion_content("conclusion", &answer.content) else {
            continue;
        };
        let premises = premises_of(&answer.source_ids, facts, existing, &content);
        if premises.is_empty() {
            metrics()
                .conclusions
                .with_label_values(&[level.to_value().as_str(), "refused"])
                .inc();
            tracing::warn!(content = %content, "deriver: conclusion without a known premise refused");
            continue;
        }
        derived.push(NewDerived {
            level,
            content,
            embedding: None,
            premises,
        });
    }
    derived
}

/// The premises a conclusion cites, each once: a fact by its label, or an existing conclusion by
/// its id. A premise the model was not shown is dropped, counted and logged.
fn premises_of(
    source_ids: &[String],
    facts: usize,
    existing: &[Conclusion],
    content: &str,
) -> Vec<Premise> {
    let mut premises = Vec::new();
    for id in source_ids {
        let premise = (0..facts)
            .find(|i| prompt::fact_label(*i) == *id)
            .map(Premise::Fact)
            .or_else(|| {
                existing
                    .iter()
                    .any(|c| c.id == *id)
                    .then(|| Premise::Existing(id.clone()))
            });
        match premise {
            Some(p) if !premises.contains(&p) => premises.push(p),
            Some(_) => {}
            None => {
                metrics()
                    .unknown_sources
                    .with_label_values(&["reasoning"])
                    .inc();
                tracing::warn!(
                    source = %id,
                    content = %content,
                    "deriver: the model cited a premise it was not shown; dropped"
                );
            }
        }
    }
    premises
}

fn count_outcome(o: &BatchOutcome) {
    let c = &metrics().conclusions;
    c.with_label_values(&[Level::Explicit.to_value().as_str(), "created"])
        .inc_by(o.facts_created as u64);
    c.with_label_values(&[Level::Explicit.to_value().as_str(), "reinforced"])
        .inc_by(o.facts_reinforced as u64);
    for d in &o.derived {
        let result = if d.times_derived == 1 {
            "created"
        } else {
            "reinforced"
        };
        c.with_label_values(&[d.level.to_value().as_str(), result])
            .inc();
    }
    c.with_label_values(&["derived", "refused"])
        .inc_by(o.refused as u64);
}
