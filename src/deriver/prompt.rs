//! What the deriver asks the model, and how it reads the answers.

use sea_orm::ActiveEnum;
use serde_json::{Value, json};

use crate::store::conclusion::{Conclusion, Level};
use crate::store::message::Message;

/// Longest piece of one context message shown (characters); the batch's own messages are whole.
const CONTEXT_CHARS: usize = 1000;

pub(crate) fn explicit_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "facts": list_of(
                json!({
                    "content": {"type": "string"},
                    "source_seqs": {"type": "array", "items": {"type": "integer"}}
                }),
                &["content", "source_seqs"],
            )
        },
        "required": ["facts"]
    })
}

pub(crate) fn reasoning_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "conclusions": list_of(
                json!({
                    "level": {"type": "string", "enum": ["deductive", "inductive", "contradiction"]},
                    "content": {"type": "string"},
                    "source_ids": {"type": "array", "items": {"type": "string"}}
                }),
                &["level", "content", "source_ids"],
            )
        },
        "required": ["conclusions"]
    })
}

/// The schema of a list of objects of `properties`, those named in `required` required.
pub(crate) fn list_of(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "array",
        "items": {"type": "object", "properties": properties, "required": required}
    })
}

/// A message as the model reads it, its content cut to `limit` characters when given.
pub(crate) fn message_line(m: &Message, limit: Option<usize>) -> String {
    let content: String = match limit {
        Some(n) => m.content.chars().take(n).collect(),
        None => m.content.clone(),
    };
    format!(
        "[seq {}] {} {}: {}\n",
        m.seq_in_session,
        m.created_at.format("%Y-%m-%d %H:%M UTC"),
        m.peer_name,
        content
    )
}

/// A conclusion as the model reads it: `[id] (level) content`, with `detail` after the level
/// when given.
pub(crate) fn conclusion_line(c: &Conclusion, detail: Option<&str>) -> String {
    let level = c.level.to_value();
    let about = match detail {
        Some(d) => format!("{level}, {d}"),
        None => level,
    };
    format!("[{}] ({about}) {}\n", c.id, c.content)
}

pub(crate) fn explicit_system(observer: &str, observed: &str) -> String {
    let whose = if observer == observed {
        format!("{observed}'s memory of themselves")
    } else {
        format!("what {observer} knows about {observed}")
    };
    format!(
        "You keep {whose}. From the NEW messages of the conversation, list the facts about \
         {observed} that they state explicitly: what {observed} says or shows about themselves, \
         their life, preferences, plans, relationships and circumstances. Each fact is one short, \
         self-contained sentence that names {observed} (never \"the user\" or a bare pronoun); \
         turn relative times (\"yesterday\", \"next week\") into dates using the message \
         timestamps. Do not guess and do not infer beyond what is said. The context messages are \
         only there to make the new ones understandable. For each fact give the seq numbers of \
         the messages it comes from. When the new messages state nothing about {observed}, \
         answer with an empty list."
    )
}

/// The conversation window: context messages, then the batch's (NEW) messages.
pub(crate) fn explicit_user(session: &str, window: &[Message], batch: &[i64]) -> String {
    let mut context = String::new();
    let mut new = String::new();
    for m in window {
        if batch.contains(&m.id) {
            new.push_str(&message_line(m, None));
        } else {
            context.push_str(&message_line(m, Some(CONTEXT_CHARS)));
        }
    }
    if context.is_empty() {
        context.push_str("(none)\n");
    }
    format!("Session {session}.\n\nContext messages:\n{context}\nNEW messages:\n{new}")
}

pub(crate) fn reasoning_system(observer: &str, observed: &str) -> String {
    format!(
        "You reason about {observed} for {observer}'s memory. From the NEW facts and the \
         EXISTING conclusions, propose the conclusions about {observed} that follow: \
         \"deductive\" when it is certain given its premises, \"inductive\" when it generalises \
         a pattern from several premises, \"contradiction\" when two premises cannot both be \
         true (say what conflicts). Each conclusion is one self-contained sentence that names \
         {observed}, says something no single premise says, and cites in source_ids the ids of \
         its premises exactly as they appear in brackets below, and only those ids. Use at \
         least one NEW fact in every conclusion. When nothing follows, answer with an empty \
         list."
    )
}

/// The new facts as `n1`, `n2`, … and the existing conclusions under their ids.
pub(crate) fn reasoning_user(facts: &[String], existing: &[Conclusion]) -> String {
    let mut out = String::from("NEW facts:\n");
    for (i, f) in facts.iter().enumerate() {
        out.push_str(&format!("[{}] {f}\n", fact_label(i)));
    }
    out.push_str("\nEXISTING conclusions:\n");
    if existing.is_empty() {
        out.push_str("(none)\n");
    }
    for c in existing {
        out.push_str(&conclusion_line(c, None));
    }
    out
}

/// What the session's `reasoning.custom_instructions` add to a pass's instructions.
pub(crate) fn custom_instructions(settings: &crate::store::configuration::Resolved) -> String {
    match &settings.custom_instructions {
        Some(text) => format!(
            "\n\nInstructions from the application (follow them where they do not conflict with the above):\n{text}"
        ),
        None => String::new(),
    }
}

/// How the reasoning prompt names the batch's fact `i`.
pub(crate) fn fact_label(i: usize) -> String {
    format!("n{}", i + 1)
}

/// A fact the explicit pass proposed.
pub(crate) struct FactAnswer {
    pub content: String,
    pub seqs: Vec<i64>,
}

/// The facts of an explicit-pass answer; an item that is a bare string is a fact without seqs,
/// anything else without content is skipped.
pub(crate) fn read_facts(answer: &Value) -> Vec<FactAnswer> {
    let items = answer["facts"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|item| {
            let (content, seqs) = match item {
                Value::String(s) => (s.clone(), Vec::new()),
                Value::Object(o) => (
                    o.get("content")?.as_str()?.to_owned(),
                    o.get("source_seqs")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default(),
                ),
                _ => return None,
            };
            let content = content.trim().to_owned();
            (!content.is_empty()).then_some(FactAnswer { content, seqs })
        })
        .collect()
}

/// A conclusion the reasoning pass proposed.
pub(crate) struct DerivedAnswer {
    pub level: Option<Level>,
    pub content: String,
    pub source_ids: Vec<String>,
}

pub(crate) fn read_derived(answer: &Value) -> Vec<DerivedAnswer> {
    let items = answer["conclusions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .filter_map(|item| {
            let content = item["content"].as_str()?.trim().to_owned();
            let level = item["level"]
                .as_str()
                .map(|l| l.trim().to_ascii_lowercase())
                .and_then(|l| Level::try_from_value(&l).ok())
                .filter(|l| *l != Level::Explicit);
            let source_ids = item["source_ids"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.trim().trim_matches(['[', ']']).to_owned())
                        .collect()
                })
                .unwrap_or_default();
            (!content.is_empty()).then_some(DerivedAnswer {
                level,
                content,
                source_ids,
            })
        })
        .collect()
}
