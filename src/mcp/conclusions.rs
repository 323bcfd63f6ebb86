//! Conclusions: list, query, create, delete, and the reasoning tree around one.

use serde::Serialize;
use serde_json::{Value, json};

use super::args::{
    CreateConclusionsArgs, DeleteConclusionArgs, ListConclusionsArgs, PeerArgs,
    QueryConclusionsArgs, ReasoningTreeArgs, TreeWay,
};
use super::error::{ToolError, ToolResult};
use super::gate::Gate;
use super::pages::filters;
use super::reply::{Reply, conclusion_lines};
use crate::access::{On, rule};
use crate::rest::conclusions::Conclusion;
use crate::store::conclusion::{Edge, NewConclusion, TreeDirection};
use crate::store::page::Order;

/// Depth of a reasoning tree when none is asked for.
const DEFAULT_DEPTH: i32 = 3;
/// Conclusions each way of a reasoning tree when no limit is asked for.
const DEFAULT_NODES: i32 = 200;

/// `{"observer_id": peer, "observed_id": target}` (the peer itself without one), and `more`
/// when given.
pub fn pair(peer: &PeerArgs, more: Value) -> Value {
    let target = peer.target_peer_id.as_deref().unwrap_or(&peer.peer_id);
    let pair = json!({ "observer_id": peer.peer_id, "observed_id": target });
    match more {
        Value::Object(m) if m.is_empty() => pair,
        more => json!({ "AND": [pair, more] }),
    }
}

pub async fn list_conclusions(gate: &Gate, a: ListConclusionsArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.peer.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.conclusions), On::workspace(&ws))
        .await?;
    let page = access
        .store()
        .list_conclusions(
            &ws,
            None,
            &pair(&a.peer, json!({})),
            Order::Desc,
            a.paging.slice()?,
        )
        .await?;
    let shown: Vec<Conclusion> = page.items.iter().cloned().map(Conclusion::from).collect();
    let text = conclusion_lines(&shown);
    Reply::new(&a.paging.page::<_, Conclusion>("conclusions", page), text)
}

pub async fn query_conclusions(gate: &Gate, a: QueryConclusionsArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.peer.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.queryConclusions), On::workspace(&ws))
        .await?;
    let found = access
        .store()
        .query_conclusions(
            &ws,
            &a.query,
            a.top_k.unwrap_or(10),
            None,
            &pair(&a.peer, filters(a.filters)),
        )
        .await?;
    let found: Vec<Conclusion> = found.into_iter().map(Conclusion::from).collect();
    let text = conclusion_lines(&found);
    Reply::new(&json!({ "conclusions": found }), text)
}

pub async fn create_conclusions(gate: &Gate, a: CreateConclusionsArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(MutationRoot.createConclusions), On::workspace(&ws))
        .await?;
    let batch = a
        .conclusions
        .into_iter()
        .map(|content| NewConclusion {
            content,
            observer: a.peer_id.clone(),
            observed: a.target_peer_id.clone(),
            session: a.session_id.clone(),
            metadata: None,
        })
        .collect();
    let created = access.store().create_conclusions(&ws, batch).await?;
    let created: Vec<Conclusion> = created.into_iter().map(Conclusion::from).collect();
    let text = format!(
        "Created {} conclusion(s):\n{}",
        created.len(),
        conclusion_lines(&created)
    );
    Reply::new(&json!({ "conclusions": created }), text)
}

pub async fn delete_conclusion(gate: &Gate, a: DeleteConclusionArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(MutationRoot.deleteConclusion), On::workspace(&ws))
        .await?;
    access
        .store()
        .delete_conclusion(&ws, &a.conclusion_id)
        .await?;
    Reply::new(
        &json!({ "deleted": a.conclusion_id }),
        format!("Conclusion {} deleted", a.conclusion_id),
    )
}

#[derive(Serialize)]
struct TreeNode {
    #[serde(flatten)]
    conclusion: Conclusion,
    /// Steps from the root: negative towards premises, positive towards consequences.
    depth: i32,
}

#[derive(Serialize)]
struct EdgeOut {
    /// The citing conclusion (drawn from `to`).
    from: String,
    to: String,
}

/// The premises and consequences of a conclusion, to a depth.
pub async fn reasoning_tree(gate: &Gate, a: ReasoningTreeArgs) -> ToolResult<Reply> {
    let ws = gate.workspace(a.ws.workspace_id.as_deref())?;
    let access = gate
        .require(rule!(Workspace.conclusion), On::workspace(&ws))
        .await?;
    let depth = a.max_depth.unwrap_or(DEFAULT_DEPTH);
    let nodes = a.max_nodes.unwrap_or(DEFAULT_NODES);
    let ways: &[(TreeDirection, i32)] = match a.direction.unwrap_or_default() {
        TreeWay::Premises => &[(TreeDirection::Sources, -1)],
        TreeWay::Consequences => &[(TreeDirection::Derived, 1)],
        TreeWay::Both => &[(TreeDirection::Sources, -1), (TreeDirection::Derived, 1)],
    };
    let (mut out, mut edges, mut truncated): (Vec<TreeNode>, Vec<Edge>, bool) = Default::default();
    let mut seen = std::collections::HashSet::new();
    for &(direction, sign) in ways {
        let tree = access
            .store()
            .reasoning_tree(&ws, &a.conclusion_id, direction, depth, nodes)
            .await?;
        truncated |= tree.truncated;
        for n in tree.nodes {
            // The root is in both walks; it is shown once.
            if n.depth == 0 && !out.is_empty() {
                continue;
            }
            out.push(TreeNode {
                conclusion: Conclusion::from(n.conclusion),
                depth: sign * n.depth,
            });
        }
        // A cycle through the root puts its edges in both walks.
        for e in tree.edges {
            if seen.insert(e.clone()) {
                edges.push(e);
            }
        }
    }
    out.sort_by_key(|n| n.depth);
    let text = out
        .iter()
        .map(|n| {
            let role = match n.depth {
                0 => "root".to_owned(),
                d if d < 0 => format!("premise {}", -d),
                d => format!("consequence {d}"),
            };
            format!("[{role}] {} ({})", n.conclusion.content, n.conclusion.id)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let root = a.conclusion_id;
    let edges: Vec<EdgeOut> = edges
        .into_iter()
        .map(|e| EdgeOut {
            from: e.from,
            to: e.to,
        })
        .collect();
    if out.is_empty() {
        return Err(ToolError::new(
            crate::access::Code::NotFound,
            format!("conclusion {root:?} not found"),
        ));
    }
    Reply::new(
        &json!({ "root": root, "nodes": out, "edges": edges, "truncated": truncated }),
        text,
    )
}
