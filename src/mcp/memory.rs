//! What a peer is known by: the dialectic's answers, peer cards, representations and context
//! (as REST serves them from the store, src/rest/memory.rs), and the deriver's queue.

use serde_json::json;

use super::args::{
    ChatArgs, InWorkspace, PeerArgs, ReasoningLevel, RepresentationArgs, ScheduleDreamArgs,
    SetPeerCardArgs,
};
use super::error::{ToolError, ToolResult};
use super::gate::Gate;
use super::reply::Reply;
use crate::access::Code;
use crate::access::{On, rule};
use crate::dialectic::representation;
use crate::dialectic::{self, Question};

pub async fn chat(gate: &Gate, a: ChatArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Peer.chat), On::peer(&ws, &a.peer_id))
        .await?;
    let Some(dialectic) = gate.dialectic() else {
        return Err(ToolError::new(
            Code::Unavailable,
            "chat answers from an LLM, and this server has none (HONCHO_LLM=none): use \
             get_peer_context, query_conclusions or search instead",
        ));
    };
    let within = access.recall_scope(a.scope.as_deref())?;
    let mut question = Question {
        observed: a.target_peer_id.unwrap_or_else(|| a.peer_id.clone()),
        observer: a.peer_id,
        workspace: ws,
        sessions: None,
        session: a.session_id,
        query: a.query.replace('\0', ""),
        level: match a.reasoning_level {
            None => dialectic::ReasoningLevel::default(),
            Some(ReasoningLevel::Minimal) => dialectic::ReasoningLevel::Minimal,
            Some(ReasoningLevel::Low) => dialectic::ReasoningLevel::Low,
            Some(ReasoningLevel::Medium) => dialectic::ReasoningLevel::Medium,
            Some(ReasoningLevel::High) => dialectic::ReasoningLevel::High,
            Some(ReasoningLevel::Max) => dialectic::ReasoningLevel::Max,
        },
        response_format: None,
        scoped: false,
    };
    dialectic::confine(access.store(), &mut question, within.as_deref()).await?;
    let content = dialectic.answer(access.store(), &question).await?;
    let text = content.clone().unwrap_or_else(|| "None".into());
    Reply::new(&json!({ "content": content }), text)
}

fn card_text(card: &Option<Vec<String>>) -> String {
    match card {
        Some(facts) if !facts.is_empty() => facts
            .iter()
            .map(|f| format!("- {f}"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => "No peer card found.".into(),
    }
}

pub async fn get_peer_card(gate: &Gate, a: PeerArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Peer.card), On::peer(&ws, &a.peer_id))
        .await?;
    let target = a.target_peer_id.as_deref().unwrap_or(&a.peer_id);
    let card = access.store().peer_card(&ws, &a.peer_id, target).await?;
    let text = card_text(&card);
    Reply::new(&json!({ "peer_card": card }), text)
}

pub async fn set_peer_card(gate: &Gate, a: SetPeerCardArgs) -> ToolResult<Reply> {
    let p = a.peer;
    let ws = gate.workspace(p.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(MutationRoot.updatePeer), On::peer(&ws, &p.peer_id))
        .await?;
    let target = p.target_peer_id.as_deref().unwrap_or(&p.peer_id);
    let card = access
        .store()
        .set_peer_card(&ws, &p.peer_id, target, a.peer_card)
        .await?;
    let card = Some(card);
    let text = card_text(&card);
    Reply::new(&json!({ "peer_card": card }), text)
}

pub async fn get_representation(gate: &Gate, a: RepresentationArgs) -> ToolResult<Reply> {
    let recall = a.recall(false);
    let p = a.peer;
    let ws = gate.workspace(p.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Peer.representation), On::peer(&ws, &p.peer_id))
        .await?;
    let target = p.target_peer_id.as_deref().unwrap_or(&p.peer_id);
    let within = access.recall_scope(a.scope.as_deref())?;
    let scope = a
        .session_id
        .map_or_else(|| json!({}), |s| json!({ "session_id": s }));
    let scope = access
        .store()
        .within_scope(&ws, within.as_deref(), scope)
        .await?;
    let text =
        representation::represent_with(access.store(), &ws, &p.peer_id, target, &scope, &recall)
            .await?;
    Reply::new(&json!({ "representation": text }), text.clone())
}

pub async fn get_peer_context(gate: &Gate, a: RepresentationArgs) -> ToolResult<Reply> {
    let recall = a.recall(true);
    let p = a.peer;
    let ws = gate.workspace(p.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Peer.representation), On::peer(&ws, &p.peer_id))
        .await?;
    let store = access.store();
    let target = p
        .target_peer_id
        .clone()
        .unwrap_or_else(|| p.peer_id.clone());
    let within = access.recall_scope(a.scope.as_deref())?;
    let scope = a
        .session_id
        .map_or_else(|| json!({}), |s| json!({ "session_id": s }));
    let scope = store.within_scope(&ws, within.as_deref(), scope).await?;
    let representation =
        representation::represent_with(store, &ws, &p.peer_id, &target, &scope, &recall).await?;
    // A card is bound to no session: recall inside a scope leaves it out, and a scope key,
    // which reaches no peer, never reads it.
    let peer_card = match within {
        Some(_) => None,
        None => {
            gate.require(rule!(Peer.card), On::peer(&ws, &p.peer_id))
                .await?;
            store.peer_card(&ws, &p.peer_id, &target).await?
        }
    };
    let text = format!(
        "Peer card:\n{}\n\nRepresentation:\n{}",
        card_text(&peer_card),
        if representation.is_empty() {
            "(no conclusions yet)"
        } else {
            &representation
        }
    );
    Reply::new(
        &json!({
            "peer_id": p.peer_id,
            "target_id": target,
            "representation": representation,
            "peer_card": peer_card,
        }),
        text,
    )
}

pub async fn get_queue_status(gate: &Gate, a: InWorkspace) -> ToolResult<Reply> {
    let ws = gate.workspace(a.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.deriverStatus), On::workspace(&ws))
        .await?;
    let s = access.store().deriver_status(&ws).await?;
    let text = format!(
        "{} pending, {} in progress, {} failed{}",
        s.pending,
        s.in_progress,
        s.failed,
        s.last_error
            .as_ref()
            .map(|e| format!(" (last error in session {}: {})", e.session, e.message))
            .unwrap_or_default()
    );
    Reply::new(
        &json!({
            "total_work_units": s.pending + s.in_progress,
            "completed_work_units": 0,
            "in_progress_work_units": s.in_progress,
            "pending_work_units": s.pending,
            "failed_work_units": s.failed,
            "last_error": s.last_error.map(|e| json!({
                "message": e.message, "at": e.at, "session_id": e.session,
            })),
        }),
        text,
    )
}

pub async fn schedule_dream(gate: &Gate, a: ScheduleDreamArgs) -> ToolResult<Reply> {
    let p = a.peer;
    let ws = gate.workspace(p.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(MutationRoot.scheduleDream), On::workspace(&ws))
        .await?;
    let observed = p.target_peer_id.as_deref().unwrap_or(&p.peer_id);
    access
        .store()
        .schedule_dream(&ws, &p.peer_id, observed)
        .await?;
    let text = format!("Dream scheduled: {}'s memory of {observed}", p.peer_id);
    Reply::new(
        &json!({"scheduled": true, "observer": p.peer_id, "observed": observed}),
        text,
    )
}
