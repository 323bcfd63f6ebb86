//! `--derive`: a deterministic fake deriver. It takes every queued batch through the deriver's
//! own store calls (`claim_unit`, `complete_batch`: the same queue, upsert, deduplication and
//! provenance links a real deriver writes), and where a real model would state a fact, states
//! the one the generator wrote for the turn (`Turn::fact`): about the speaker, cited to that
//! turn, embedded as the deriver embeds facts. Nothing comes from a question: a fact says what the
//! turn (and, for a reply, the turn it answers) says, in the evidence's own words.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use honcho_graphql::deriver::DeriverArgs;
use honcho_graphql::embed::conclusion_text;
use honcho_graphql::store::Store;
use honcho_graphql::store::queue::{ClaimRules, NewFact};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde::Serialize;

use crate::corpus::Conversation;

/// What the fake deriver wrote, and what its store calls cost.
#[derive(Serialize)]
pub struct Derived {
    pub batches: usize,
    pub messages: usize,
    pub facts: usize,
    pub created: usize,
    pub reinforced: usize,
    /// Time in `claim_unit` and `complete_batch` per queued message (the deriver's own
    /// database work; embedding the facts is not counted).
    pub store_ms_per_message: f64,
}

impl fmt::Display for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "derived: {} batches of {} queued messages, {} facts ({} new, {} reinforced); \
             claim + write {:.2} ms per message",
            self.batches,
            self.messages,
            self.facts,
            self.created,
            self.reinforced,
            self.store_ms_per_message
        )
    }
}

/// Runs the fake deriver over everything `store` queued.
pub async fn run(
    store: &Store,
    conversations: &[Conversation],
    ids: &HashMap<(usize, usize, usize), String>,
) -> anyhow::Result<Derived> {
    let turn_of_public: HashMap<&str, (usize, usize, usize)> =
        ids.iter().map(|(k, v)| (v.as_str(), *k)).collect();
    let rows = store
        .db()
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT id, public_id FROM messages",
        ))
        .await?;
    let mut turn_of: HashMap<i64, (usize, usize, usize)> = HashMap::new();
    for r in rows {
        let public: String = r.try_get("", "public_id")?;
        if let Some(t) = turn_of_public.get(public.as_str()) {
            turn_of.insert(r.try_get("", "id")?, *t);
        }
    }
    let cfg = DeriverArgs::default();
    // Every unit ready at once, batches cut as the deriver cuts them.
    let rules = ClaimRules {
        ready_tokens: 1,
        ready_after: Duration::ZERO,
        max_batch_tokens: cfg.max_input_tokens,
        lease: Duration::from_secs(600),
    };
    let embedder = store.embedder().cloned();
    let mut out = Derived {
        batches: 0,
        messages: 0,
        facts: 0,
        created: 0,
        reinforced: 0,
        store_ms_per_message: 0.0,
    };
    let mut in_store = Duration::ZERO;
    loop {
        let t = Instant::now();
        let Some(claim) = store.claim_unit("eval", rules).await? else {
            break;
        };
        in_store += t.elapsed();
        let mut facts: Vec<(String, i64)> = Vec::new();
        for m in &claim.message_ids {
            let Some(&(c, s, t)) = turn_of.get(m) else {
                continue;
            };
            let conversation = &conversations[c];
            let turn = &conversation.sessions[s].turns[t];
            // A peer's own memory of itself: what it said about itself.
            if claim.observer == claim.observed
                && conversation.peer_id(turn.speaker) == claim.observed
                && let Some(fact) = &turn.fact
            {
                facts.push((fact.clone(), *m));
            }
        }
        let vectors = match (&embedder, facts.is_empty()) {
            (Some(e), false) => {
                let texts: Vec<String> = facts
                    .iter()
                    .map(|(f, _)| conclusion_text(&claim.observer, &claim.observed, f))
                    .collect();
                e.embed(&texts).await?.into_iter().map(Some).collect()
            }
            _ => vec![None; facts.len()],
        };
        let facts: Vec<NewFact> = facts
            .into_iter()
            .zip(vectors)
            .map(|((content, m), embedding)| NewFact {
                content,
                embedding,
                message_ids: vec![m],
            })
            .collect();
        let t = Instant::now();
        let done = store
            .complete_batch(&claim, &facts, &[], cfg.dedup_similarity)
            .await?;
        in_store += t.elapsed();
        out.batches += 1;
        out.messages += claim.message_ids.len();
        out.facts += facts.len();
        out.created += done.facts_created;
        out.reinforced += done.facts_reinforced;
    }
    out.store_ms_per_message = in_store.as_secs_f64() * 1000.0 / out.messages.max(1) as f64;
    Ok(out)
}
