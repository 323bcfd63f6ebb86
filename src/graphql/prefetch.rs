//! Look-ahead prefetching. The dataloader takes a batch when the request's task yields, and
//! resolving a long list can spill one list's lookups over several batches. A list
//! resolver knows all its items at once, so it asks the request's loader for everything its
//! selection will need in one batch per kind; the item resolvers then hit the request cache. The
//! number of statements of a query thus depends on its shape, never on its length or timing.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use async_graphql::dataloader::Loader;
use async_graphql::{Lookahead, Name, SelectionField, Value};
use futures::future::{try_join3, try_join4};

use super::RequestLoader;
use super::error::{ApiError, ApiResult, bad_input};
use super::guard::Access;
use super::loaders::{
    ConclusionKey, DerivedKey, DerivedPage, Loaders, MembersKey, PeerKey, RangeKey, SessionKey,
};
use super::types::message::DEFAULT_CONTEXT_SIDE;
use crate::store::conclusion::Conclusion;
use crate::store::message::{Message, SeqRange, check_context_sides};
use crate::store::page::MAX_PAGE;
use crate::store::path::{MAX_PATH_NAMES, PathNames};

/// Selections of the node type under a connection (`nodes` and `edges.node`) or a plain list.
pub fn nodes<'a>(look: Lookahead<'a>) -> [Lookahead<'a>; 2] {
    [look.field("nodes"), look.field("edges").field("node")]
}

/// The values of `keys`: those already in the request's cache, and the rest loaded in one
/// batch straight through the loader and fed into the cache. A prefetch knows its whole batch at
/// once, so it skips the dataloader's own batching, which gives every batch a spawned task that
/// first waits on a zero-length `futures-timer` delay, served by that crate's timer thread: about
/// 80 µs at p50 and 0.2-0.3 ms at p95 per batch on a 2-core VM (bench/history/2026-12.md,
/// "Reads: prefetch without the dataloader's timer").
///
/// The dataloader offers no lookup of one cached key, so the cache of kind `K` is copied once per
/// call; a request's caches hold what its response shows, which is bounded by its cost limits.
async fn warm<K>(
    loader: &RequestLoader,
    keys: impl IntoIterator<Item = K>,
) -> ApiResult<HashMap<K, <Loaders as Loader<K>>::Value>>
where
    K: Send + Sync + Hash + Eq + Clone + 'static,
    Loaders: Loader<K, Error = ApiError>,
{
    let keys: HashSet<K> = keys.into_iter().collect();
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let mut values = loader.get_cached_values::<K>();
    values.retain(|k, _| keys.contains(k));
    let missing: Vec<K> = keys
        .into_iter()
        .filter(|k| !values.contains_key(k))
        .collect();
    if !missing.is_empty() {
        let loaded = loader.loader().load(&missing).await?;
        loader.feed_many(loaded.clone()).await;
        values.extend(loaded);
    }
    Ok(values)
}

fn any(selections: &[Lookahead<'_>], f: impl Fn(&Lookahead<'_>) -> bool) -> bool {
    selections.iter().any(f)
}

/// Warms the loader for `peer`, `session` (with its members and their peers) and `context` of
/// these messages, as far as the selection asks for them.
pub async fn messages(
    access: &Access<'_>,
    msgs: &[Message],
    sel: &[Lookahead<'_>],
) -> ApiResult<()> {
    messages_with(access.loader(), msgs, sel).await
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
            let keys = msgs
                .iter()
                .map(|m| PeerKey(m.workspace_name.clone(), m.peer_name.clone()));
            warm(loader, keys).await?;
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
        warm(loader, keys.clone()).await?;
        let members_sel: Vec<Lookahead<'_>> = sel
            .iter()
            .map(|s| s.field("session").field("peers"))
            .collect();
        if any(&members_sel, |s| s.exists()) {
            let keys = keys.into_iter().map(|SessionKey(w, s)| MembersKey(w, s));
            let members = warm(loader, keys).await?;
            if any(&members_sel, |s| s.field("peer").exists()) {
                let keys = members
                    .values()
                    .flatten()
                    .map(|m| PeerKey(m.workspace_name.clone(), m.peer_name.clone()));
                warm(loader, keys).await?;
            }
        }
        Ok(())
    };
    let contexts = async {
        let mut keys = Vec::new();
        for s in sel {
            for field in s.selection_fields() {
                for f in field.selection_set().filter(|f| f.name() == "context") {
                    // Out-of-range sides are left to the field's resolver, which reports them.
                    let Ok((before, after)) = context_sides(f) else {
                        continue;
                    };
                    keys.extend(
                        msgs.iter()
                            .filter_map(|m| SeqRange::around(m, before, after).ok().map(RangeKey)),
                    );
                }
            }
        }
        warm(loader, keys).await?;
        ApiResult::Ok(())
    };
    try_join3(peers, sessions, contexts).await?;
    Ok(())
}

/// The `before` and `after` arguments of a `Message.context` selection (defaults filled in),
/// checked against [`MAX_CONTEXT_SIDE`](crate::store::message::MAX_CONTEXT_SIDE).
pub fn context_sides(field: SelectionField<'_>) -> ApiResult<(i64, i64)> {
    let args = field.arguments().map_err(|e| bad_input(e.message))?;
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
    check_context_sides(before, after)?;
    Ok((before, after))
}

/// Refuses a selection with a `context` window out of range anywhere below `field`. Mutations and
/// subscriptions call it before they write or subscribe: the item resolver would refuse the window
/// too, but only after the messages were written or the subscription had started.
pub fn check_context_arguments(field: SelectionField<'_>) -> ApiResult<()> {
    for child in field.selection_set() {
        if child.name() == "context" {
            context_sides(child)?;
        }
        check_context_arguments(child)?;
    }
    Ok(())
}

/// Warms the loader for `observer`, `observed`, `session`, `sources` and `derived` of these
/// conclusions, as far as the selection asks for them, and then level by level for the
/// `sources` and `derived` lists it loaded. Each level issues at most one batch per kind, and
/// only after the level above has finished, so keys loaded above are cache hits: the number of
/// statements depends on the query's shape, not on timing.
pub async fn conclusions<'a>(
    access: &Access<'_>,
    items: &[Conclusion],
    sel: impl IntoIterator<Item = Lookahead<'a>>,
) -> ApiResult<()> {
    conclusions_with(access.loader(), items, sel).await
}

/// [`conclusions`] into a given loader (a subscription warms one loader per event batch).
pub async fn conclusions_with<'a>(
    loader: &RequestLoader,
    items: &[Conclusion],
    sel: impl IntoIterator<Item = Lookahead<'a>>,
) -> ApiResult<()> {
    let mut level = vec![Group::new(items.to_vec(), sel.into_iter().collect())];
    while !level.is_empty() {
        let keys = LevelKeys::of(&level);
        let (sources, derived) = keys.load(loader).await?;
        level = level
            .iter()
            .flat_map(|group| group.children(&sources, &derived))
            .collect();
    }
    Ok(())
}

/// Conclusions of one level of the walk, with the selections they are under and the `derived`
/// pages those selections ask for.
struct Group<'a> {
    items: Vec<Conclusion>,
    sel: Vec<Lookahead<'a>>,
    pages: Vec<DerivedPage>,
}

/// Everything one level asks the loader for, one batch per kind.
#[derive(Default)]
struct LevelKeys {
    peers: Vec<PeerKey>,
    sessions: Vec<SessionKey>,
    sources: Vec<ConclusionKey>,
    derived: Vec<DerivedKey>,
}

type Loaded<K, V> = HashMap<K, V>;

impl<'a> Group<'a> {
    fn new(items: Vec<Conclusion>, sel: Vec<Lookahead<'a>>) -> Self {
        // Out-of-range arguments are left to the field's resolver, which reports them.
        let pages = derived_pages(&sel);
        Group { items, sel, pages }
    }

    /// The group below this one for `sources` and for `derived`, where the selection goes on
    /// and something was loaded; each conclusion once per group.
    fn children(
        &self,
        sources: &Loaded<ConclusionKey, Option<Conclusion>>,
        derived: &Loaded<DerivedKey, Vec<Conclusion>>,
    ) -> Vec<Group<'a>> {
        let sub = |f: &str| -> Vec<Lookahead<'a>> {
            self.sel
                .iter()
                .map(|s| s.field(f))
                .filter(|s| s.exists())
                .collect()
        };
        let cited = |c: &Conclusion| -> Vec<Conclusion> {
            let ws = &c.workspace_name;
            c.source_ids
                .iter()
                .flatten()
                .filter_map(|id| {
                    sources
                        .get(&ConclusionKey(ws.clone(), id.clone()))
                        .cloned()
                        .flatten()
                })
                .collect()
        };
        let citing = |c: &Conclusion| -> Vec<Conclusion> {
            self.pages
                .iter()
                .flat_map(|page| {
                    let key = DerivedKey(c.workspace_name.clone(), c.id.clone(), page.clone());
                    derived.get(&key).cloned().unwrap_or_default()
                })
                .collect()
        };
        [
            self.child(sub("sources"), cited),
            self.child(sub("derived"), citing),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The group of `related` conclusions under selection `sel`, each once; none when the
    /// selection stops here or nothing is related.
    fn child(
        &self,
        sel: Vec<Lookahead<'a>>,
        related: impl Fn(&Conclusion) -> Vec<Conclusion>,
    ) -> Option<Group<'a>> {
        if sel.is_empty() {
            return None;
        }
        let mut seen = HashSet::new();
        let items: Vec<Conclusion> = self
            .items
            .iter()
            .flat_map(related)
            .filter(|c| seen.insert(c.id.clone()))
            .collect();
        (!items.is_empty()).then(|| Group::new(items, sel))
    }
}

impl LevelKeys {
    /// The keys the selections of a level ask for, as far as they ask.
    fn of(level: &[Group<'_>]) -> Self {
        let mut keys = LevelKeys::default();
        for group in level {
            let wants = |f: &str| any(&group.sel, |s| s.field(f).exists());
            let (observer, observed, session, sources) = (
                wants("observer"),
                wants("observed"),
                wants("session"),
                wants("sources"),
            );
            for c in &group.items {
                let ws = &c.workspace_name;
                if observer {
                    keys.peers.push(PeerKey(ws.clone(), c.observer.clone()));
                }
                if observed {
                    keys.peers.push(PeerKey(ws.clone(), c.observed.clone()));
                }
                if session && let Some(s) = &c.session_name {
                    keys.sessions.push(SessionKey(ws.clone(), s.clone()));
                }
                if sources {
                    for id in c.source_ids.iter().flatten() {
                        keys.sources.push(ConclusionKey(ws.clone(), id.clone()));
                    }
                }
                for page in &group.pages {
                    keys.derived
                        .push(DerivedKey(ws.clone(), c.id.clone(), page.clone()));
                }
            }
        }
        keys
    }

    /// One batch per kind, all at once; the conclusions loaded for `sources` and `derived` are
    /// the next level's.
    #[allow(clippy::type_complexity)]
    async fn load(
        self,
        loader: &RequestLoader,
    ) -> ApiResult<(
        Loaded<ConclusionKey, Option<Conclusion>>,
        Loaded<DerivedKey, Vec<Conclusion>>,
    )> {
        let LevelKeys {
            peers,
            sessions,
            sources,
            derived,
        } = self;
        let (_, _, sources, derived) = try_join4(
            warm(loader, peers),
            warm(loader, sessions),
            warm(loader, sources),
            warm(loader, derived),
        )
        .await?;
        Ok((sources, derived))
    }
}

/// Conclusions of one `derived` page asked for without `first`.
pub const DEFAULT_DERIVED: u64 = 20;

/// `derived(first, after)` checked, the default filled in.
pub fn derived_page(first: Option<i32>, after: Option<String>) -> ApiResult<DerivedPage> {
    let first = match first {
        None => DEFAULT_DERIVED,
        Some(n) if (1..=MAX_PAGE as i32).contains(&n) => n as u64,
        Some(n) => {
            return Err(bad_input(format!(
                "first must be between 1 and {MAX_PAGE} (got {n})"
            )));
        }
    };
    Ok(DerivedPage { first, after })
}

/// The distinct pages that the `derived` children of these selections ask for (aliases may ask
/// for different ones); those with arguments out of range are left out.
fn derived_pages(sel: &[Lookahead<'_>]) -> Vec<DerivedPage> {
    let mut pages = Vec::new();
    for s in sel {
        for field in s.selection_fields() {
            for f in field.selection_set().filter(|f| f.name() == "derived") {
                let Ok(args) = f.arguments() else { continue };
                let arg = |name: &str| args.iter().find(|(n, _)| n == &Name::new(name));
                let first = match arg("first") {
                    Some((_, Value::Number(n))) => n.as_i64().map(|n| n as i32),
                    _ => None,
                };
                let after = match arg("after") {
                    Some((_, Value::String(s))) => Some(s.clone()),
                    _ => None,
                };
                if let Ok(page) = derived_page(first, after)
                    && !pages.contains(&page)
                {
                    pages.push(page);
                }
            }
        }
    }
    pages
}

/// The ids that the `session(id:)`, `peer(id:)` and `conclusion(id:)` children of this field ask
/// for (aliases and fragments included), so that `workspace(id)` can look them up with itself.
/// `@skip`/`@include` are not evaluated: a skipped child is looked up for nothing, never missed.
pub fn path_names(field: SelectionField<'_>) -> PathNames {
    let mut names = PathNames::default();
    for child in field.selection_set() {
        let list = match child.name() {
            "session" => &mut names.sessions,
            "peer" => &mut names.peers,
            "conclusion" => &mut names.conclusions,
            _ => continue,
        };
        let id = child.arguments().ok().and_then(|args| {
            args.into_iter().find_map(|(n, v)| match v {
                Value::String(s) if n.as_str() == "id" => Some(s),
                _ => None,
            })
        });
        if let Some(id) = id
            && !list.contains(&id)
            && list.len() < MAX_PATH_NAMES
        {
            list.push(id);
        }
    }
    names
}

/// Looks up the workspace `name` and the children `field` names under it in one statement, and
/// puts the children into the request's loader, where `Workspace.session`, `.peer` and
/// `.conclusion` find them. Conclusions that were asked for and not found are cached as absent.
pub async fn workspace_path(
    access: &Access<'_>,
    name: &str,
    field: SelectionField<'_>,
) -> ApiResult<Option<crate::store::workspace::Workspace>> {
    let names = path_names(field);
    let Some(path) = access.store().workspace_path(name, &names).await? else {
        return Ok(None);
    };
    let loader = access.loader();
    let ws = || path.workspace.name.clone();
    loader
        .feed_many(
            path.sessions
                .iter()
                .map(|s| (SessionKey(ws(), s.name.clone()), s.clone())),
        )
        .await;
    loader
        .feed_many(
            path.peers
                .iter()
                .map(|p| (PeerKey(ws(), p.name.clone()), p.clone())),
        )
        .await;
    loader
        .feed_many(names.conclusions.iter().map(|id| {
            let found = path.conclusions.iter().find(|c| &c.id == id).cloned();
            (ConclusionKey(ws(), id.clone()), found)
        }))
        .await;
    Ok(Some(path.workspace))
}
