//! Look-ahead prefetching. The dataloader batches by time window (1 ms), and resolving a long list
//! in a slow build, or under load, can spill one list's lookups over several windows. A list
//! resolver knows all its items at once, so it asks the request's loader for everything its
//! selection will need in one batch per kind; the item resolvers then hit the request cache. The
//! number of statements of a query thus depends on its shape, never on its length or timing.

use async_graphql::{Context, Lookahead, Name, Value};
use futures::future::try_join3;

use super::error::ApiResult;
use super::loaders::{MembersKey, PeerKey, RangeKey, SessionKey};
use super::types::message::{DEFAULT_CONTEXT_SIDE, context_range};
use super::{RequestLoader, loader};
use crate::store::message::Message;

/// Selections of the node type under a connection (`nodes` and `edges.node`) or a plain list.
pub fn nodes<'a>(look: Lookahead<'a>) -> [Lookahead<'a>; 2] {
    [look.field("nodes"), look.field("edges").field("node")]
}

fn any(selections: &[Lookahead<'_>], f: impl Fn(&Lookahead<'_>) -> bool) -> bool {
    selections.iter().any(f)
}

/// Warms the loader for `peer`, `session` (with its members and their peers) and `context` of
/// these messages, as far as the selection asks for them.
pub async fn messages(ctx: &Context<'_>, msgs: &[Message], sel: &[Lookahead<'_>]) -> ApiResult<()> {
    messages_with(loader(ctx)?, msgs, sel).await
}

/// [`messages`] into a given loader (a subscription warms one loader per event batch, shared by
/// every subscriber of the process).
pub async fn messages_with(
    loader: &RequestLoader,
    msgs: &[Message],
    sel: &[Lookahead<'_>],
) -> ApiResult<()> {
    if msgs.is_empty() {
        return Ok(());
    }
    let peers = async {
        if any(sel, |s| s.field("peer").exists()) {
            loader
                .load_many(
                    msgs.iter()
                        .map(|m| PeerKey(m.workspace_name.clone(), m.peer_name.clone())),
                )
                .await?;
        }
        ApiResult::Ok(())
    };
    let sessions = async {
        if !any(sel, |s| s.field("session").exists()) {
            return ApiResult::Ok(());
        }
        let keys: Vec<SessionKey> = msgs
            .iter()
            .map(|m| SessionKey(m.workspace_name.clone(), m.session_name.clone()))
            .collect();
        loader.load_many(keys.clone()).await?;
        let members_sel: Vec<Lookahead<'_>> = sel
            .iter()
            .map(|s| s.field("session").field("peers"))
            .collect();
        if any(&members_sel, |s| s.exists()) {
            let members = loader
                .load_many(keys.into_iter().map(|SessionKey(w, s)| MembersKey(w, s)))
                .await?;
            if any(&members_sel, |s| s.field("peer").exists()) {
                loader
                    .load_many(
                        members
                            .values()
                            .flatten()
                            .map(|m| PeerKey(m.workspace_name.clone(), m.peer_name.clone())),
                    )
                    .await?;
            }
        }
        Ok(())
    };
    let contexts = async {
        let mut keys = Vec::new();
        for s in sel {
            for field in s.selection_fields() {
                for f in field.selection_set().filter(|f| f.name() == "context") {
                    let args = f
                        .arguments()
                        .map_err(|e| async_graphql::Error::new(e.message))?;
                    let side = |name: &str| {
                        args.iter()
                            .find(|(n, _)| n == &Name::new(name))
                            .and_then(|(_, v)| match v {
                                Value::Number(n) => n.as_i64(),
                                _ => None,
                            })
                            .unwrap_or(DEFAULT_CONTEXT_SIDE)
                    };
                    let (before, after) = (side("before"), side("after"));
                    keys.extend(
                        msgs.iter()
                            .map(|m| RangeKey(context_range(m, before, after))),
                    );
                }
            }
        }
        if !keys.is_empty() {
            loader.load_many(keys).await?;
        }
        ApiResult::Ok(())
    };
    try_join3(peers, sessions, contexts).await?;
    Ok(())
}
