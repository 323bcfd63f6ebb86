//! What the dialectic asks the model: instructions, then the gathered material in tagged
//! sections (an empty section says so, so the model knows it was looked for), then the question.

use super::Material;
use crate::store::conclusion::Conclusion;
use crate::store::message::Message;

/// Longest piece of one message shown (characters).
const MESSAGE_CHARS: usize = 1000;

pub(super) fn system(observer: &str, observed: &str, json: bool) -> String {
    let whose = if observer == observed {
        format!("You answer questions about the peer {observed:?}.")
    } else {
        format!(
            "You answer questions for the peer {observer:?} about the peer {observed:?}, from \
             {observer}'s point of view: the material is what {observer} has observed of \
             {observed}."
        )
    };
    let form = if json {
        "Answer with one JSON object of the schema you are given."
    } else {
        "Answer in plain prose, briefly and directly."
    };
    format!(
        "{whose}\n\nThe material comes from a memory system: conclusions drawn about the peer \
         (explicit facts, and deductive, inductive and contradiction conclusions built on them), \
         biographical cards, and messages from their conversations, each with its date. Answer \
         from this material only. When it does not hold the answer, say that it is not known \
         instead of guessing. When two pieces disagree, trust the newer one and say what \
         changed.\n\n{form}"
    )
}

pub(super) fn user(observer: &str, observed: &str, m: &Material, query: &str) -> String {
    let mut out = String::new();
    let card = |name: &str, card: &Option<Vec<String>>| match card {
        Some(lines) if !lines.is_empty() => lines.join("\n"),
        _ => format!("(no card of {name})"),
    };
    section(&mut out, "peer_card", &card(observer, &m.observer_card));
    if observer != observed {
        section(
            &mut out,
            "observed_peer_card",
            &card(observed, &m.observed_card),
        );
    }
    let representation = if m.representation.is_empty() {
        "(no conclusions yet)".to_owned()
    } else {
        m.representation.trim_end().to_owned()
    };
    section(&mut out, "conclusions", &representation);
    section(
        &mut out,
        "conclusions_related_to_the_question",
        &conclusions(&m.relevant),
    );
    section(
        &mut out,
        "messages_related_to_the_question",
        &messages(&m.found),
    );
    if !m.recent.is_empty() {
        section(
            &mut out,
            "latest_messages_of_the_session",
            &messages(&m.recent),
        );
    }
    out.push_str(&format!("Question: {query}"));
    out
}

fn section(out: &mut String, tag: &str, body: &str) {
    out.push_str(&format!("<{tag}>\n{body}\n</{tag}>\n\n"));
}

fn conclusions(list: &[Conclusion]) -> String {
    if list.is_empty() {
        return "(none)".into();
    }
    list.iter()
        .map(|c| {
            format!(
                "- [{}] {}",
                c.created_at.format("%Y-%m-%d %H:%M"),
                c.content
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn messages(list: &[Message]) -> String {
    if list.is_empty() {
        return "(none)".into();
    }
    list.iter()
        .map(|m| {
            let content: String = m.content.chars().take(MESSAGE_CHARS).collect();
            format!(
                "[{} session {} #{}] {}: {content}",
                m.created_at.format("%Y-%m-%d %H:%M"),
                m.session_name,
                m.seq_in_session,
                m.peer_name
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_material_says_what_was_looked_for() {
        let m = Material {
            observer_card: None,
            observed_card: Some(vec!["Name: Bob".into()]),
            representation: String::new(),
            relevant: vec![],
            found: vec![],
            recent: vec![],
        };
        let text = user("alice", "bob", &m, "Where does Bob live?");
        assert!(text.contains("(no card of alice)"), "{text}");
        assert!(text.contains("<observed_peer_card>\nName: Bob\n"), "{text}");
        assert!(text.contains("(no conclusions yet)"), "{text}");
        assert!(!text.contains("latest_messages_of_the_session"), "{text}");
        assert!(text.ends_with("Question: Where does Bob live?"), "{text}");
    }
}
