//! Peer cards kept by the deriver, in the reasoning pass's call: the model is shown the
//! observer's current card of the observed and answers, beside its conclusions, with the
//! complete list of the deriver's entries, each citing the facts or conclusions it rests on.
//! No call is added for it.
//!
//! The answer is checked here before anything is written: an entry needs one of the allowed
//! prefixes and at most 200 characters; entries equal but for case and spacing, or equal to a
//! client's entry, are written once; an entry citing nothing it was shown keeps the sources it
//! had when it was already on the card, and is refused otherwise; the card holds at most 40
//! entries with the client's. An answer without a card, or one that would empty a card the
//! deriver had filled, changes nothing. With `peer_card.use` off the model is not shown the
//! card, so what it proposes is added to the entries already there.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::store::conclusion::Conclusion;
use crate::store::conclusion::derive::Premise;
use crate::store::peer_card::{
    CardEntry, CardOrigin, ENTRY_PREFIXES, MAX_CARD_ENTRIES, MAX_ENTRY_CHARS, NewCardEntry,
    entry_key, well_formed,
};

use super::metrics::metrics;
use super::prompt;

/// The card as the deriver sees it before a batch.
#[derive(Clone, Debug, Default)]
pub(super) struct CardContext {
    /// The model is shown the card (`peer_card.use`).
    pub shown: bool,
    pub client: Vec<String>,
    pub derived: Vec<CardEntry>,
}

impl CardContext {
    pub fn new(entries: Vec<CardEntry>, shown: bool) -> CardContext {
        let (client, derived): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|e| e.origin == CardOrigin::Client);
        CardContext {
            shown,
            client: client.into_iter().map(|e| e.content).collect(),
            derived,
        }
    }
}

/// What the system prompt adds when the deriver keeps the card.
pub(super) fn system(observed: &str) -> String {
    format!(
        "\n\nYou also keep the PEER CARD of {observed}: the few stable facts that identify \
         {observed} and rarely change. Each entry starts with one of {prefixes} followed by a \
         space: IDENTITY for names, kind and aliases; ATTRIBUTE for lasting properties and \
         stated standing preferences; RELATIONSHIP for lasting links to others; INSTRUCTION \
         only for a rule {observed} explicitly asked to be followed. No moods, passing events \
         or guesses. Each entry is one short fact of at most {MAX_ENTRY_CHARS} characters about \
         {observed} and cites in source_ids the bracketed ids of the facts or conclusions it \
         rests on. Answer in \"card\" with the complete list of card entries you keep (the \
         ones already there that still hold, and new ones), each once; entries marked KEPT \
         are the user's own and are kept whatever you answer, so do not repeat them. At most \
         {MAX_CARD_ENTRIES} entries.",
        prefixes = ENTRY_PREFIXES.join(", ")
    )
}

/// What the user prompt adds: the current card.
pub(super) fn user(ctx: &CardContext) -> String {
    if !ctx.shown {
        return "\nPEER CARD: not shown; list only new entries the NEW facts support.\n".into();
    }
    let mut out = String::from("\nPEER CARD now:\n");
    if ctx.client.is_empty() && ctx.derived.is_empty() {
        out.push_str("(empty)\n");
    }
    for c in &ctx.client {
        out.push_str(&format!("- KEPT {c}\n"));
    }
    for e in &ctx.derived {
        out.push_str(&format!(
            "- {} (source_ids: {})\n",
            e.content,
            e.conclusion_ids.join(", ")
        ));
    }
    out
}

/// The reasoning answer's schema with the optional `card`.
pub(super) fn extend_schema(schema: &mut Value) {
    schema["properties"]["card"] = prompt::list_of(
        json!({
            "entry": {"type": "string"},
            "source_ids": {"type": "array", "items": {"type": "string"}}
        }),
        &["entry", "source_ids"],
    );
}

/// The deriver's entries after this answer, or None when the card stays as it is.
pub(super) fn card_of(
    answer: &Value,
    ctx: &CardContext,
    facts: usize,
    existing: &[Conclusion],
) -> Option<Vec<NewCardEntry>> {
    let Some(items) = answer["card"].as_array() else {
        metrics().cards.with_label_values(&["unchanged"]).inc();
        return None;
    };
    let client: HashSet<String> = ctx.client.iter().map(|c| entry_key(c)).collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut proposed: Vec<NewCardEntry> = Vec::new();
    let mut refused = 0u64;
    for item in items {
        let (content, ids) = match item {
            Value::String(s) => (s.clone(), Vec::new()),
            Value::Object(o) => (
                o.get("entry")
                    .or_else(|| o.get("content"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                o.get("source_ids")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|s| s.trim().trim_matches(['[', ']']).to_owned())
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => continue,
        };
        let content = content.replace('\0', "").trim().to_owned();
        if !well_formed(&content) {
            refused += 1;
            continue;
        }
        let key = entry_key(&content);
        if client.contains(&key) || !seen.insert(key.clone()) {
            continue;
        }
        let mut premises = premises_of(&ids, facts, existing, ctx);
        if premises.is_empty() {
            // An entry already on the card keeps what it rested on.
            if let Some(old) = ctx.derived.iter().find(|e| entry_key(&e.content) == key) {
                premises = old
                    .conclusion_ids
                    .iter()
                    .cloned()
                    .map(Premise::Existing)
                    .collect();
            }
        }
        if premises.is_empty() {
            refused += 1;
            tracing::warn!(entry = %content, "deriver: card entry citing nothing it was shown refused");
            continue;
        }
        proposed.push(NewCardEntry { content, premises });
    }
    metrics()
        .cards
        .with_label_values(&["refused_entries"])
        .inc_by(refused);
    let current: Vec<NewCardEntry> = ctx
        .derived
        .iter()
        .map(|e| NewCardEntry {
            content: e.content.clone(),
            premises: e
                .conclusion_ids
                .iter()
                .cloned()
                .map(Premise::Existing)
                .collect(),
        })
        .collect();
    let mut next = if ctx.shown {
        proposed
    } else {
        let mut all = current.clone();
        let keys: HashSet<String> = all.iter().map(|e| entry_key(&e.content)).collect();
        all.extend(
            proposed
                .into_iter()
                .filter(|e| !keys.contains(&entry_key(&e.content))),
        );
        all
    };
    next.truncate(MAX_CARD_ENTRIES.saturating_sub(ctx.client.len()));
    if (next.is_empty() && !current.is_empty()) || next == current {
        metrics().cards.with_label_values(&["unchanged"]).inc();
        return None;
    }
    metrics().cards.with_label_values(&["written"]).inc();
    Some(next)
}

/// The ids an entry cites that the model was shown: new facts by label, existing conclusions
/// and the current entries' sources by id. Each once.
fn premises_of(
    ids: &[String],
    facts: usize,
    existing: &[Conclusion],
    ctx: &CardContext,
) -> Vec<Premise> {
    let mut out = Vec::new();
    for id in ids {
        let premise = (0..facts)
            .find(|i| prompt::fact_label(*i) == *id)
            .map(Premise::Fact)
            .or_else(|| {
                let known = existing.iter().any(|c| c.id == *id)
                    || ctx
                        .derived
                        .iter()
                        .any(|e| e.conclusion_ids.iter().any(|c| c == id));
                known.then(|| Premise::Existing(id.clone()))
            });
        if let Some(p) = premise
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(client: &[&str], derived: &[(&str, &[&str])]) -> CardContext {
        CardContext {
            shown: true,
            client: client.iter().map(|s| s.to_string()).collect(),
            derived: derived
                .iter()
                .map(|(c, ids)| CardEntry {
                    content: c.to_string(),
                    origin: CardOrigin::Deriver,
                    conclusion_ids: ids.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    fn entry(content: &str, ids: &[&str]) -> Value {
        json!({"entry": content, "source_ids": ids})
    }

    #[test]
    fn entries_are_checked_deduplicated_and_cite_what_was_shown() {
        let c = ctx(
            &["IDENTITY: Name: Alice"],
            &[("ATTRIBUTE: Lives in Paris", &["c1"])],
        );
        let answer = json!({"card": [
            entry("IDENTITY: name:  alice", &["n1"]),
            entry("ATTRIBUTE: Works as a nurse", &["n1", "n1", "zzz"]),
            entry("attribute: works as a NURSE", &["n1"]),
            entry("TRAIT: kind", &["n1"]),
            entry("ATTRIBUTE: Lives in Paris", &[]),
            entry("ATTRIBUTE: Likes tea", &["unknown"]),
        ]});
        let next = card_of(&answer, &c, 1, &[]).unwrap();
        assert_eq!(
            next,
            vec![
                NewCardEntry {
                    content: "ATTRIBUTE: Works as a nurse".into(),
                    premises: vec![Premise::Fact(0)],
                },
                NewCardEntry {
                    content: "ATTRIBUTE: Lives in Paris".into(),
                    premises: vec![Premise::Existing("c1".into())],
                },
            ]
        );
    }

    #[test]
    fn no_card_or_an_emptied_card_changes_nothing() {
        let c = ctx(&[], &[("ATTRIBUTE: Lives in Paris", &["c1"])]);
        assert!(card_of(&json!({"conclusions": []}), &c, 1, &[]).is_none());
        assert!(card_of(&json!({"card": []}), &c, 1, &[]).is_none());
        let same = json!({"card": [entry("ATTRIBUTE: Lives in Paris", &["c1"])]});
        assert!(card_of(&same, &c, 1, &[]).is_none());
    }

    #[test]
    fn the_card_is_bounded_with_the_clients_entries_counted() {
        let client: Vec<String> = (0..35).map(|i| format!("client {i}")).collect();
        let client: Vec<&str> = client.iter().map(String::as_str).collect();
        let c = ctx(&client, &[]);
        let items: Vec<Value> = (0..10)
            .map(|i| entry(&format!("ATTRIBUTE: fact {i}"), &["n1"]))
            .collect();
        let next = card_of(&json!({ "card": items }), &c, 1, &[]).unwrap();
        assert_eq!(next.len(), MAX_CARD_ENTRIES - 35);
    }

    #[test]
    fn an_unshown_card_only_grows() {
        let mut c = ctx(&[], &[("ATTRIBUTE: Lives in Paris", &["c1"])]);
        c.shown = false;
        let answer = json!({"card": [entry("ATTRIBUTE: Works as a nurse", &["n1"])]});
        let next = card_of(&answer, &c, 1, &[]).unwrap();
        let contents: Vec<&str> = next.iter().map(|e| e.content.as_str()).collect();
        assert_eq!(
            contents,
            ["ATTRIBUTE: Lives in Paris", "ATTRIBUTE: Works as a nurse"]
        );
    }
}
