//! Resources, by URIs that name what they hold: a peer's card, a session's transcript a page of
//! seqs at a time, and a conclusion's reasoning tree. Each is read through the tool that serves
//! the same data, so it passes the same rule.

use rmcp::ErrorData;
use rmcp::model::{ErrorCode, ReadResourceResult, ResourceContents, ResourceTemplate};
use serde_json::json;

use super::args::{InWorkspace, MessageRangeArgs, PeerArgs, ReasoningTreeArgs, SessionArgs};
use super::error::ToolError;
use super::gate::Gate;
use super::{conclusions, memory, messages};
use crate::access::Code;
use crate::store::page::MAX_PAGE;

const SCHEME: &str = "honcho://workspaces/";

/// The templates `resources/templates/list` answers.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(
            "honcho://workspaces/{workspace_id}/peers/{peer_id}/card",
            "peer_card",
        )
        .with_title("Peer card")
        .with_description("The facts of a peer's card about itself, one a line.")
        .with_mime_type("text/plain"),
        ResourceTemplate::new(
            "honcho://workspaces/{workspace_id}/sessions/{session_id}/transcript{?from_seq}",
            "session_transcript",
        )
        .with_title("Session transcript")
        .with_description(
            "100 messages of a session from seqInSession from_seq (1), one a line as \
             `[session #seq] peer: content`; the last line names the next page's URI when there \
             may be one.",
        )
        .with_mime_type("text/plain"),
        ResourceTemplate::new(
            "honcho://workspaces/{workspace_id}/conclusions/{conclusion_id}/tree",
            "reasoning_tree",
        )
        .with_title("Reasoning tree")
        .with_description(
            "A conclusion's premises (negative depths) and consequences (positive), 3 steps each \
             way, with the citations between them, as the reasoning_tree tool returns them.",
        )
        .with_mime_type("application/json"),
    ]
}

/// What a URI names.
#[derive(Debug, PartialEq, Eq)]
enum Named {
    Card {
        workspace: String,
        peer: String,
    },
    Transcript {
        workspace: String,
        session: String,
        from: i64,
    },
    Tree {
        workspace: String,
        conclusion: String,
    },
}

fn parse(uri: &str) -> Option<Named> {
    let rest = uri.strip_prefix(SCHEME)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let parts: Vec<&str> = path.split('/').collect();
    let own = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    match parts.as_slice() {
        [w, "peers", p, "card"] if query.is_empty() => Some(Named::Card {
            workspace: own(w)?,
            peer: own(p)?,
        }),
        [w, "sessions", s, "transcript"] => {
            let from = match query {
                "" => 1,
                q => q.strip_prefix("from_seq=")?.parse().ok()?,
            };
            Some(Named::Transcript {
                workspace: own(w)?,
                session: own(s)?,
                from,
            })
        }
        [w, "conclusions", c, "tree"] if query.is_empty() => Some(Named::Tree {
            workspace: own(w)?,
            conclusion: own(c)?,
        }),
        _ => None,
    }
}

/// A refused or failed read as a JSON-RPC error, GraphQL's code in its data.
fn rpc_error(e: ToolError) -> ErrorData {
    let code = match e.code.as_str() {
        c if c == Code::NotFound.as_str() => ErrorCode::RESOURCE_NOT_FOUND,
        c if c == Code::BadUserInput.as_str() => ErrorCode::INVALID_PARAMS,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    ErrorData::new(code, e.to_string(), Some(json!({ "code": e.code })))
}

pub async fn read(gate: &Gate, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let named = parse(uri).ok_or_else(|| {
        ErrorData::resource_not_found(
            format!("no resource is named {uri:?} (see resources/templates/list)"),
            Some(json!({ "code": Code::NotFound.as_str() })),
        )
    })?;
    let ws = |w: String| InWorkspace {
        workspace_id: Some(w),
    };
    let contents = match named {
        Named::Card { workspace, peer } => {
            let args = PeerArgs {
                ws: ws(workspace),
                peer_id: peer,
                target_peer_id: None,
            };
            let reply = memory::get_peer_card(gate, args).await.map_err(rpc_error)?;
            ResourceContents::text(reply.text, uri)
        }
        Named::Transcript {
            workspace,
            session,
            from,
        } => {
            let to = from.saturating_add(MAX_PAGE as i64 - 1);
            let args = MessageRangeArgs {
                session: SessionArgs {
                    ws: ws(workspace.clone()),
                    session_id: session.clone(),
                },
                from_seq: from,
                to_seq: to,
            };
            let reply = messages::message_range(gate, args)
                .await
                .map_err(rpc_error)?;
            let last = reply.value["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["seq_in_session"].as_i64());
            let mut text = reply.text;
            if last == Some(to) {
                text.push_str(&format!(
                    "\n(next page: {SCHEME}{workspace}/sessions/{session}/transcript?from_seq={})",
                    to + 1
                ));
            }
            ResourceContents::text(text, uri)
        }
        Named::Tree {
            workspace,
            conclusion,
        } => {
            let args = ReasoningTreeArgs {
                ws: ws(workspace),
                conclusion_id: conclusion,
                direction: None,
                max_depth: None,
                max_nodes: None,
            };
            let reply = conclusions::reasoning_tree(gate, args)
                .await
                .map_err(rpc_error)?;
            ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some("application/json".into()),
                text: reply.value.to_string(),
                meta: None,
            }
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_card_a_transcript_page_or_a_tree_and_nothing_else() {
        assert_eq!(
            parse("honcho://workspaces/w/peers/alice/card"),
            Some(Named::Card {
                workspace: "w".into(),
                peer: "alice".into()
            })
        );
        assert_eq!(
            parse("honcho://workspaces/w/sessions/s1/transcript?from_seq=101"),
            Some(Named::Transcript {
                workspace: "w".into(),
                session: "s1".into(),
                from: 101
            })
        );
        assert_eq!(
            parse("honcho://workspaces/w/sessions/s1/transcript"),
            Some(Named::Transcript {
                workspace: "w".into(),
                session: "s1".into(),
                from: 1
            })
        );
        assert_eq!(
            parse("honcho://workspaces/w/conclusions/c1/tree"),
            Some(Named::Tree {
                workspace: "w".into(),
                conclusion: "c1".into()
            })
        );
        for bad in [
            "honcho://workspaces/w/peers/alice",
            "honcho://workspaces//peers/alice/card",
            "honcho://workspaces/w/peers/alice/card?x=1",
            "honcho://workspaces/w/sessions/s1/transcript?from_seq=x",
            "honcho://workspaces/w/sessions/s1/transcript?page=2",
            "https://workspaces/w/peers/alice/card",
            "honcho://workspaces/w/peers/a/b/card",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
