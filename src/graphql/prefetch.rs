//! Look-ahead prefetching. The dataloader batches by time window (1 ms), and resolving a long list
//! in a slow build, or under load, can spill one list's lookups over several windows. A list
//! resolver knows all its items at once, so it asks the request's loader for everything its
//! selection will need in one batch per kind; the item resolvers then hit the request cache. The
//! number of statements of a query thus depends on its shape, never on its length or timing.

use std::collections::HashSet;

use async_graphql::{Context, Lookahead, Name, Value};
use futures::future::{try_join3, try_join4};

use super::error::ApiResult;
use super::loader;
use super::loaders::{ConclusionKey, DerivedKey, MembersKey, PeerKey, RangeKey, SessionKey};
use super::types::message::{DEFAULT_CONTEXT_SIDE, context_range};
use crate::store::conclusion::Conclusion;
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
    if msgs.is_empty() {
        return Ok(());
    }
    let loader = loader(ctx)?;
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

/// Warms the loader for `observer`, `observed`, `session`, `sources` and `derived` of these
/// conclusions, as far as the selection asks for them, and then level by level for the
/// `sources` and `derived` lists it loaded. Each level issues at most one batch per kind, and
/// only after the level above has finished, so keys loaded above are cache hits: the number of
/// statements depends on the query's shape, not on timing.
pub async fn conclusions<'a>(
    ctx: &Context<'a>,
    items: &[Conclusion],
    sel: impl IntoIterator<Item = Lookahead<'a>>,
) -> ApiResult<()> {
    let loader = loader(ctx)?;
    let mut level: Vec<(Vec<Conclusion>, Vec<Lookahead<'a>>)> =
        vec![(items.to_vec(), sel.into_iter().collect())];
    while !level.is_empty() {
        let (mut peers, mut sessions, mut sources, mut derived) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (items, sel) in &level {
            let wants = |f: &str| any(sel, |s| s.field(f).exists());
            for c in items {
                let ws = &c.workspace_name;
                if wants("observer") {
                    peers.push(PeerKey(ws.clone(), c.observer.clone()));
                }
                if wants("observed") {
                    peers.push(PeerKey(ws.clone(), c.observed.clone()));
                }
                if wants("session")
                    && let Some(s) = &c.session_name
                {
                    sessions.push(SessionKey(ws.clone(), s.clone()));
                }
                if wants("sources") {
                    for id in c.source_ids.iter().flatten() {
                        sources.push(ConclusionKey(ws.clone(), id.clone()));
                    }
                }
                if wants("derived") {
                    derived.push(DerivedKey(ws.clone(), c.id.clone()));
                }
            }
        }
        let (_, _, sources, derived) = try_join4(
            async {
                if !peers.is_empty() {
                    loader.load_many(peers).await?;
                }
                ApiResult::Ok(())
            },
            async {
                if !sessions.is_empty() {
                    loader.load_many(sessions).await?;
                }
                ApiResult::Ok(())
            },
            async { loader.load_many(sources).await },
            async { loader.load_many(derived).await },
        )
        .await?;
        let mut next = Vec::new();
        for (items, sel) in &level {
            let sub = |f: &str| -> Vec<Lookahead<'a>> {
                sel.iter()
                    .map(|s| s.field(f))
                    .filter(|s| s.exists())
                    .collect()
            };
            let mut seen = HashSet::new();
            let sub_sources = sub("sources");
            if !sub_sources.is_empty() {
                let list: Vec<Conclusion> = items
                    .iter()
                    .flat_map(|c| {
                        c.source_ids.iter().flatten().filter_map(|id| {
                            sources
                                .get(&ConclusionKey(c.workspace_name.clone(), id.clone()))
                                .cloned()
                                .flatten()
                        })
                    })
                    .filter(|c| seen.insert(c.id.clone()))
                    .collect();
                if !list.is_empty() {
                    next.push((list, sub_sources));
                }
            }
            let mut seen = HashSet::new();
            let sub_derived = sub("derived");
            if !sub_derived.is_empty() {
                let list: Vec<Conclusion> = items
                    .iter()
                    .flat_map(|c| {
                        derived
                            .get(&DerivedKey(c.workspace_name.clone(), c.id.clone()))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter(|c| seen.insert(c.id.clone()))
                    .collect();
                if !list.is_empty() {
                    next.push((list, sub_derived));
                }
            }
        }
        level = next;
    }
    Ok(())
}
