//! Dreams: the deriver's consolidation pass over everything one observer holds about one observed
//! peer, across sessions (docs/dreams.md).
//!
//! A worker claims a pending dream ([`crate::store::dream`]), shows the pair's newest
//! conclusions to the LLM in one call, and asks which are duplicates, which contradict each other,
//! and what patterns hold across sessions. Ids it was not shown are dropped; then one transaction
//! writes the merges, the CONTRADICTION and INDUCTIVE conclusions
//! ([`crate::store::conclusion::dream`]) and ends the dream, if the worker still holds it. A
//! failed call fails the dream: its unit stops, the error is in `deriverStatus.dreams`, the
//! metrics and the log, and `retryFailedDerivations` resumes it.

use std::time::Instant;

use serde_json::{Value, json};

use super::metrics::metrics;
use super::prompt;
use super::{ANSWER_TOKENS, Deriver, DeriverError};
use crate::llm::JsonRequest;
use crate::store::StoreError;
use crate::store::conclusion::dream::{DreamOutcome, DreamPlan, Dreamt};
use crate::store::conclusion::{Conclusion, conclusion_content};
use crate::store::dream::DreamClaim;

/// Most conclusions one dream reads (the pair's newest).
const DREAM_CONCLUSIONS: i64 = 100;

/// What one dream did.
#[derive(Clone, Debug)]
pub enum DreamReport {
    Done {
        unit: i64,
        outcome: DreamOutcome,
    },
    /// The LLM could not give a usable answer; the unit is stopped with this error.
    Failed {
        unit: i64,
        error: String,
    },
    /// Another worker holds the unit now; nothing was written.
    LeaseLost {
        unit: i64,
    },
}

impl Deriver {
    /// Claims one pending dream and runs it. `None` when none is pending.
    pub async fn dream_once(&self, worker: &str) -> Result<Option<DreamReport>, StoreError> {
        let Some(claim) = self.store.claim_dream(worker, self.rules().lease).await? else {
            return Ok(None);
        };
        self.dream(&claim).await.map(Some)
    }

    /// The scheduled check: asks the pairs due a dream to dream (when dreams are on).
    pub async fn schedule_due_dreams(&self) -> Result<u64, StoreError> {
        if !self.cfg.dream.enabled {
            return Ok(0);
        }
        self.store
            .schedule_due_dreams(self.cfg.dream.triggers())
            .await
    }

    /// Runs one claimed dream to its end: written, failed, or lost to another worker.
    #[tracing::instrument(name = "deriver.dream", skip_all, fields(
        unit = claim.unit_id,
        workspace = %claim.workspace,
        observer = %claim.observer,
        observed = %claim.observed,
    ))]
    pub async fn dream(&self, claim: &DreamClaim) -> Result<DreamReport, StoreError> {
        let started = Instant::now();
        let result = match self.plan(claim).await {
            Ok(plan) => self
                .store
                .complete_dream(claim, &plan)
                .await
                .map_err(DeriverError::Store),
            Err(e) => Err(e),
        };
        let m = metrics();
        match result {
            Ok(outcome) => {
                m.dreams.with_label_values(&["ok"]).inc();
                tracing::info!(
                    merged = outcome.merged.iter().map(|m| m.1.len()).sum::<usize>(),
                    contradictions = outcome.contradictions.len(),
                    inductions = outcome.inductions.len(),
                    refused = outcome.refused,
                    ms = started.elapsed().as_millis() as u64,
                    "deriver: dream done"
                );
                Ok(DreamReport::Done {
                    unit: claim.unit_id,
                    outcome,
                })
            }
            Err(DeriverError::Store(StoreError::Conflict(msg))) => {
                m.dreams.with_label_values(&["lease_lost"]).inc();
                tracing::warn!("deriver: {msg}; nothing written");
                Ok(DreamReport::LeaseLost {
                    unit: claim.unit_id,
                })
            }
            Err(DeriverError::Llm { pass, source }) => {
                let error = format!("{pass} pass: {source}");
                m.dreams.with_label_values(&["failed"]).inc();
                tracing::error!(
                    error = %error,
                    "deriver: dream failed; the unit waits for retryFailedDerivations"
                );
                self.store.fail_dream(claim, &error).await?;
                Ok(DreamReport::Failed {
                    unit: claim.unit_id,
                    error,
                })
            }
            Err(DeriverError::Store(e)) => Err(e),
        }
    }

    /// Reads the pair's conclusions and asks the LLM; nothing written. Fewer than two
    /// conclusions need no call: the plan is empty.
    async fn plan(&self, claim: &DreamClaim) -> Result<DreamPlan, DeriverError> {
        let shown = self.store.dream_material(claim, DREAM_CONCLUSIONS).await?;
        if shown.len() < 2 {
            return Ok(DreamPlan::default());
        }
        let reply = self
            .ask(
                "dream",
                JsonRequest {
                    system: system(&claim.observer, &claim.observed),
                    user: user(&shown),
                    schema_name: "dream".into(),
                    schema: schema(),
                    max_tokens: ANSWER_TOKENS,
                },
            )
            .await?;
        let mut plan = read_plan(&reply.value, &shown);
        let texts: Vec<String> = plan
            .contradictions
            .iter()
            .chain(plan.inductions.iter())
            .map(|d| crate::embed::conclusion_text(&claim.observer, &claim.observed, &d.content))
            .collect();
        let mut vectors = self.store.embed_texts(&texts).await.into_iter();
        for d in plan
            .contradictions
            .iter_mut()
            .chain(plan.inductions.iter_mut())
        {
            d.embedding = vectors.next().flatten();
        }
        // The call may have taken most of the lease.
        self.store
            .renew_dream_lease(claim, self.rules().lease)
            .await?;
        Ok(plan)
    }
}

fn system(observer: &str, observed: &str) -> String {
    let whose = if observer == observed {
        format!("{observed}'s memory of themselves")
    } else {
        format!("what {observer} knows about {observed}")
    };
    format!(
        "You consolidate {whose}, gathered over many sessions. Read the conclusions below and \
         answer with three lists. \"duplicates\": groups of ids of conclusions that say the same \
         thing (same level only); each group becomes one conclusion. \"contradictions\": pairs \
         (or more) of ids of conclusions that cannot all be true, with one self-contained \
         sentence naming {observed} that says what conflicts. \"inductions\": patterns about \
         {observed} that several conclusions from different sessions show together, each one \
         self-contained sentence naming {observed}, citing the ids it generalises. Cite ids \
         exactly as they appear in brackets, and only those. When there is nothing to say, \
         answer with empty lists."
    )
}

/// The conclusions as `[id] (level, session) content`, oldest first.
fn user(shown: &[Conclusion]) -> String {
    let mut out = String::from("Conclusions:\n");
    for c in shown {
        let session = c
            .session_name
            .as_deref()
            .map_or_else(|| "no session".to_owned(), |s| format!("session {s}"));
        out.push_str(&prompt::conclusion_line(c, Some(&session)));
    }
    out
}

fn schema() -> Value {
    let ids = json!({"type": "array", "items": {"type": "string"}});
    let stated = prompt::list_of(
        json!({"ids": ids, "content": {"type": "string"}}),
        &["ids", "content"],
    );
    json!({
        "type": "object",
        "properties": {
            "duplicates": prompt::list_of(json!({"ids": ids}), &["ids"]),
            "contradictions": stated,
            "inductions": stated
        },
        "required": ["duplicates", "contradictions", "inductions"]
    })
}

/// The ids of `item` the model was shown, each once (brackets tolerated); the others are
/// dropped, counted and logged.
fn shown_ids(item: &Value, shown: &[Conclusion]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in item["ids"].as_array().into_iter().flatten() {
        let Some(id) = id.as_str().map(|s| s.trim().trim_matches(['[', ']'])) else {
            continue;
        };
        if !shown.iter().any(|c| c.id == id) {
            metrics()
                .unknown_sources
                .with_label_values(&["dream"])
                .inc();
            tracing::warn!(source = %id, "dream: the model cited a conclusion it was not shown; dropped");
            continue;
        }
        if !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
    }
    out
}

/// The plan in an answer: groups and proposals with at least two known ids; a proposal needs
/// valid content. A conclusion is merged by one group at most (the first naming it).
fn read_plan(answer: &Value, shown: &[Conclusion]) -> DreamPlan {
    let mut plan = DreamPlan::default();
    let mut grouped: Vec<String> = Vec::new();
    for item in answer["duplicates"].as_array().into_iter().flatten() {
        let ids: Vec<String> = shown_ids(item, shown)
            .into_iter()
            .filter(|id| !grouped.contains(id))
            .collect();
        if ids.len() >= 2 {
            grouped.extend(ids.iter().cloned());
            plan.merges.push(ids);
        }
    }
    let stated = |key: &str| -> Vec<Dreamt> {
        answer[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let content = item["content"].as_str()?.trim();
                let content = conclusion_content("content", content).ok()?;
                let premises = shown_ids(item, shown);
                (premises.len() >= 2).then_some(Dreamt {
                    content,
                    premises,
                    embedding: None,
                })
            })
            .collect()
    };
    plan.contradictions = stated("contradictions");
    plan.inductions = stated("inductions");
    plan
}
